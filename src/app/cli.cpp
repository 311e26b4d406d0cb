#include "cli.h"

#include <string_view>

namespace floodgate::app {

const char* usage() {
  return "Usage: floodgate -c FILE     run in the foreground with the configuration FILE\n"
         "       floodgate --version   print the version and exit\n"
         "       floodgate --help      print this help and exit\n"
         "\n"
         "floodgate is an HTTP/1.1 reverse proxy built for overload control.\n"
         "Signals: SIGTERM/SIGINT drain in-flight requests (server.drain_timeout) and exit;\n"
         "a second signal exits at once. Exit status: 0 after a clean shutdown, 1 when the\n"
         "configuration is invalid or floodgate cannot start.\n"
         "Documentation: docs/configuration.md, docs/operations.md, docs/metrics.md.\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--version" || arg == "-V") {
      o.command = Options::Command::version;
      return o;
    }
    if (arg == "--help" || arg == "-h") {
      o.command = Options::Command::help;
      return o;
    }
    if (arg == "-c" || arg == "--config") {
      if (i + 1 >= argc) {
        o.error = std::string(arg) + " needs a FILE argument";
        return o;
      }
      o.config_path = argv[++i];
      o.command = Options::Command::run;
      continue;
    }
    if (arg.starts_with("--config=")) {
      o.config_path = std::string(arg.substr(9));
      o.command = Options::Command::run;
      continue;
    }
    o.command = Options::Command::usage_error;
    o.error = "unknown argument '" + std::string(arg) + "'";
    return o;
  }
  if (o.command != Options::Command::run) o.error = "no configuration file given (-c FILE)";
  return o;
}

}  // namespace floodgate::app
