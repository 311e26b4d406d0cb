#include "cli.h"

#include <optional>
#include <string_view>

namespace floodgate::app {
namespace {

std::optional<Options::Format> parse_format(std::string_view name) {
  if (name == "text") return Options::Format::text;
  if (name == "json") return Options::Format::json;
  return std::nullopt;
}

// An option that takes a value: "-c FILE", "--config FILE" or "--config=FILE".
struct ValueOption {
  std::string_view short_name;  // "" when there is none
  std::string_view long_name;
  std::string_view value_name;  // for "--config needs a FILE argument"
};

// True when argv[i] is `option`; then stores its value in `value` (advancing i past a separate
// value), or sets `error` when the value is missing.
bool take(const ValueOption& option, int argc, char** argv, int& i, std::string& value,
          std::string& error) {
  const std::string_view arg = argv[i];
  const std::string_view name = option.long_name;
  if (arg.starts_with(name) && arg.size() > name.size() && arg[name.size()] == '=') {
    value = arg.substr(name.size() + 1);
    return true;
  }
  if (arg != name && (option.short_name.empty() || arg != option.short_name)) {
    return false;
  }
  if (i + 1 >= argc) {
    error = std::string(arg) + " needs a " + std::string(option.value_name) + " argument";
  } else {
    value = argv[++i];
  }
  return true;
}

constexpr ValueOption kConfig{"-c", "--config", "FILE"};
constexpr ValueOption kFormat{"", "--format", "FORMAT (text or json)"};

// Once every argument was accepted: run or check, or why neither.
void choose_command(Options& o, bool check, bool have_config, bool have_format) {
  if (!have_config) {
    o.error = check ? "no configuration file given (floodgate check -c FILE)"
                    : "no configuration file given (-c FILE)";
  } else if (have_format && !check) {
    o.error = "--format applies to floodgate check only (floodgate check -c FILE --format json)";
  } else {
    o.command = check ? Options::Command::check : Options::Command::run;
  }
}

}  // namespace

const char* usage() {
  return "Usage: floodgate -c FILE     run in the foreground with the configuration FILE\n"
         "       floodgate check -c FILE [--format text|json] [--bind-test]\n"
         "                             validate FILE with the daemon's own rules and exit;\n"
         "                             --bind-test also binds every listen address as this\n"
         "                             user would at start (and releases it at once)\n"
         "       floodgate --version   print the version and exit\n"
         "       floodgate --help      print this help and exit\n"
         "\n"
         "floodgate is an HTTP/1.1 reverse proxy built for overload control.\n"
         "-c FILE may also be written --config FILE or --config=FILE.\n"
         "check prints every error and warning to stdout, one per line as\n"
         "FILE:LINE:COLUMN: error|warning: KEY.PATH: message (--format text, the default), or one\n"
         "JSON object {\"valid\", \"errors\", \"warnings\"} (--format json). It exits 0 when the\n"
         "file is valid (warnings allowed), 1 when it has errors.\n"
         "Signals: SIGTERM/SIGINT drain in-flight requests (server.drain_timeout) and exit;\n"
         "a second signal exits at once. Exit status: 0 after a clean shutdown, 1 when the\n"
         "configuration is invalid, floodgate cannot start, or the command line is wrong.\n"
         "Documentation: docs/configuration.md, docs/operations.md, docs/metrics.md.\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  const bool check = argc > 1 && std::string_view(argv[1]) == "check";
  bool have_config = false;
  bool have_format = false;
  for (int i = check ? 2 : 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--version" || arg == "-V") {
      o.command = Options::Command::version;
      return o;
    }
    if (arg == "--help" || arg == "-h") {
      o.command = Options::Command::help;
      return o;
    }
    std::string value;
    if (take(kConfig, argc, argv, i, value, o.error)) {
      if (!o.error.empty()) return o;
      o.config_path = std::move(value);
      have_config = true;
      continue;
    }
    if (take(kFormat, argc, argv, i, value, o.error)) {
      if (!o.error.empty()) return o;
      const auto format = parse_format(value);
      if (!format) {
        o.error = "unknown --format '" + value + "'; expected text or json";
        return o;
      }
      o.format = *format;
      have_format = true;
      continue;
    }
    if (check && arg == "--bind-test") {
      o.bind_test = true;
      continue;
    }
    o.error = arg == "check" ? "the check command comes first: floodgate check -c FILE"
                             : "unknown argument '" + std::string(arg) + "'";
    return o;
  }
  choose_command(o, check, have_config, have_format);
  return o;
}

}  // namespace floodgate::app
