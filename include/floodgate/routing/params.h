// Parameters of one route ([[routes]] in the configuration). Plain values.
#pragma once

#include <string>

namespace floodgate {

struct RouteParams {
  std::string host = "*";         // exact host, "*.example.com" or "*"; stored lower-case
  std::string path_prefix = "/";  // plain byte prefix
  std::string upstream;           // name of an [[upstreams]] entry
};

}  // namespace floodgate
