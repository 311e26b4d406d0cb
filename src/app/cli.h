// Command-line parsing for the floodgate binary: `floodgate -c FILE` runs the proxy,
// `floodgate check -c FILE [--format text|json]` validates a file and exits. Pure; main thread.
#pragma once

#include <string>

namespace floodgate::app {

struct Options {
  enum class Command { run, check, version, help, usage_error };
  enum class Format { text, json };  // of `floodgate check`
  Command command = Command::usage_error;
  std::string config_path;
  Format format = Format::text;
  bool bind_test = false;  // check --bind-test: also bind every listen address
  std::string error;       // for usage_error
};

Options parse_options(int argc, char** argv);
const char* usage();

}  // namespace floodgate::app
