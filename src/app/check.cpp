#include "check.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "floodgate/config/config.h"

namespace floodgate::app {
namespace {

// fwrite, not printf("%s"): a message may quote a TOML string holding a NUL ("\u0000").
void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

std::string count(size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// stdout carries only diagnostics, for scripts and editors; this line is for the operator.
void print_summary(const std::string& config_path, const config::LoadResult& r) {
  size_t errors = 0;
  for (const config::Diagnostic& d : r.diagnostics) {
    errors += d.severity == config::Diagnostic::Severity::error ? 1 : 0;
  }
  const size_t warnings = r.diagnostics.size() - errors;
  const std::string verdict = r.ok() ? "valid" : "invalid";
  std::fprintf(stderr, "floodgate check: %s: %s (%s, %s)\n", config_path.c_str(), verdict.c_str(),
               count(errors, "error").c_str(), count(warnings, "warning").c_str());
}

// Where `text` (an address as written) first appears quoted in `source`: its line and column,
// or {0, 0}.
std::pair<int, int> position_of(const std::string& source, const std::string& text) {
  const std::size_t at = source.find('"' + text + '"');
  if (at == std::string::npos) return {0, 0};
  const int line = 1 + static_cast<int>(std::count(source.begin(), source.begin() + at, '\n'));
  const std::size_t start = source.rfind('\n', at);
  const int column = static_cast<int>(at - (start == std::string::npos ? 0 : start + 1)) + 1;
  return {line, column};
}

// Binds `e` as the daemon's listeners do, then lets it go. Empty, or why it cannot.
std::string try_bind(const Endpoint& e) {
  namespace ip = boost::asio::ip;
  boost::system::error_code ec;
  const ip::address address = ip::make_address(e.host, ec);
  if (ec) return "not an IP address";
  const int fd = ::socket(address.is_v6() ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  const ip::tcp::endpoint at(address, e.port);
  std::string why;
  if (::bind(fd, at.data(), static_cast<socklen_t>(at.size())) != 0) why = std::strerror(errno);
  ::close(fd);
  return why;
}

void bind_test(const std::string& config_path, config::LoadResult& r) {
  std::string source;
  std::string unused;
  config::read_file(config_path, source, unused);
  const auto add = [&](const std::string& path, const Endpoint& e) {
    const std::string why = try_bind(e);
    if (why.empty()) return;
    const auto [line, column] = position_of(source, e.text);
    r.diagnostics.push_back(config::Diagnostic{
        config::Diagnostic::Severity::error, config_path, line, column, path,
        "cannot listen on " + e.text + ": " + why + " (floodgate check --bind-test, as uid " +
            std::to_string(::geteuid()) + ")"});
  };
  for (std::size_t i = 0; i < r.config->server.listen.size(); ++i) {
    add("server.listen[" + std::to_string(i) + "]", r.config->server.listen[i]);
  }
  if (r.config->admin.unix_path.empty()) add("admin.listen", r.config->admin.listen);
  const bool failed = std::any_of(r.diagnostics.begin(), r.diagnostics.end(), [](const auto& d) {
    return d.severity == config::Diagnostic::Severity::error;
  });
  std::stable_sort(
      r.diagnostics.begin(), r.diagnostics.end(),
      [](const config::Diagnostic& a, const config::Diagnostic& b) { return a.line < b.line; });
  if (failed) r.config.reset();
}

// The diagnostics and the notes, in one source order (a note after the problems of its line).
std::vector<const config::Diagnostic*> in_source_order(const config::LoadResult& r) {
  std::vector<const config::Diagnostic*> all;
  for (const auto* list : {&r.diagnostics, &r.notes}) {
    for (const config::Diagnostic& d : *list) all.push_back(&d);
  }
  std::stable_sort(all.begin(), all.end(), [](const auto* a, const auto* b) {
    return std::pair(a->line, a->column) < std::pair(b->line, b->column);
  });
  return all;
}

}  // namespace

int check(const std::string& config_path, Options::Format format, bool bind) {
  config::LoadResult r = config::load_file(config_path);
  if (bind && r.ok()) bind_test(config_path, r);
  if (format == Options::Format::json) {
    print_line(config::to_json(r, true));
  } else {
    for (const config::Diagnostic* d : in_source_order(r)) {
      print_line(config::format(*d));
    }
    std::fflush(stdout);
    print_summary(config_path, r);
  }
  return r.ok() ? 0 : 1;
}

}  // namespace floodgate::app
