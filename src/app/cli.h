// Command-line parsing for the floodgate binary.
#pragma once

#include <string>

namespace floodgate::app {

struct Options {
  enum class Command { run, version, help, usage_error };
  Command command = Command::usage_error;
  std::string config_path;
  std::string error;  // for usage_error
};

Options parse_options(int argc, char** argv);
const char* usage();

}  // namespace floodgate::app
