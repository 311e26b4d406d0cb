// floodgate --version: what was built and what it runs on, like `haproxy -vv`.
#include <llhttp.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <spdlog/version.h>

#include <toml++/impl/version.h>
#include <boost/asio/io_context.hpp>
#include <boost/version.hpp>
#include <exception>
#include <string>

#include "app.h"
#include "fault_hooks.h"
#include "floodgate/net/poller.h"
#include "floodgate_revision.h"

namespace floodgate::app {

const char* version() {
  return FLOODGATE_VERSION;
}

const char* revision() {
  return FLOODGATE_REVISION;
}

namespace {

// Which event loops this kernel gives floodgate: io_uring is tried as `server.io = "auto"`
// would, on a poller built and dropped at once.
std::string event_loops() {
  std::string io_uring = "io_uring";
  try {
    boost::asio::io_context io;
    const net::Poller probe(io, IoMode::automatic);
    io_uring += probe.uses_uring() ? " (usable here)"
                                   : " (not usable here: " + probe.fallback_reason() + ")";
  } catch (const std::exception& e) {
    io_uring += std::string(" (not usable here: ") + e.what() + ")";
  }
  return io_uring + ", epoll (always)";
}

std::string dotted(unsigned major, unsigned minor, unsigned patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

std::string version_text() {
  std::string out = std::string("floodgate ") + version() + " (revision " + revision() + ")\n";
  out += std::string("build: ") + FLOODGATE_BUILD_TYPE + std::string(fault_hooks_build_note()) +
         "; " + FLOODGATE_COMPILER + ", C++20\n";
  out += "event loops: " + event_loops() + "\n";
  out += "libraries:\n";
  out += "  Boost " +
         dotted(BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100) + "\n";
  out += "  llhttp " + dotted(LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH) +
         " (strict mode)\n";
  out += std::string("  OpenSSL ") + OpenSSL_version(OPENSSL_VERSION_STRING) + " (built with " +
         OPENSSL_VERSION_STR + ")\n";
  out += std::string("  liburing ") + FLOODGATE_LIBURING_VERSION + "\n";
  out += "  spdlog " + dotted(SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH) + "\n";
  out += "  toml++ " + dotted(TOML_LIB_MAJOR, TOML_LIB_MINOR, TOML_LIB_PATCH) + "\n";
  return out;
}

}  // namespace floodgate::app
