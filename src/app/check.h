// `floodgate check`: validates a configuration file with the loader the daemon uses
// (config::load_file), so a file that passes here also passes at start-up and on reload.
// Main thread only.
#pragma once

#include <string>

#include "cli.h"

namespace floodgate::app {

// Prints every error and warning of `config_path` to stdout, one config::format() line each
// (Format::text; a one-line summary goes to stderr), or the config::to_json() object
// (Format::json). Returns the exit status: 0 when the file is valid (warnings allowed), 1 when
// it has errors or cannot be read.
// With `bind_test`, a valid file's listen addresses (server.listen, admin.listen) are also
// bound as start-up binds them (SO_REUSEADDR and SO_REUSEPORT, so floodgate's own running
// listeners do not count as taken) and released: each that cannot be is an error at its line.
int check(const std::string& config_path, Options::Format format, bool bind_test = false);

}  // namespace floodgate::app
