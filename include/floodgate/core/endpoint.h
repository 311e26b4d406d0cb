// An IP endpoint as written in the configuration ("127.0.0.1:8080", "[::1]:9000",
// "localhost:9000"). Plain data: resolved once at load time on the main thread, never on a
// reactor. `text` keeps the spelling the operator wrote, because metrics label backends with it.
#pragma once

#include <cstdint>
#include <string>

namespace floodgate {

struct Endpoint {
  std::string host;  // IP literal without brackets ("127.0.0.1", "::1"); "localhost" -> 127.0.0.1
  uint16_t port = 0;
  std::string text;  // as written in the configuration

  bool operator==(const Endpoint&) const = default;
};

}  // namespace floodgate
