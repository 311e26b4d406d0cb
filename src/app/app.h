// The composition root: turns a configuration file into running reactors, an admin listener
// and signal handling, and owns the process's life from start-up to exit status.
#pragma once

#include <string>

namespace floodgate::app {

// The release ("0.1.0") and the git revision it was built from ("unknown" outside a checkout,
// "-dirty" with uncommitted changes).
const char* version();
const char* revision();
// floodgate --version: version, revision, build type, compiler, the event loops this kernel
// offers and the libraries' versions (src/app/version.cpp).
std::string version_text();

// Runs floodgate in the foreground. Returns the process exit status: 0 after a clean
// shutdown, 1 when the configuration is invalid or start-up fails (with a message on stderr
// naming the file, key and reason).
int run(const std::string& config_path);

}  // namespace floodgate::app
