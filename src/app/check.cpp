#include "check.h"

#include <cstdio>

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

}  // namespace

int check(const std::string& config_path, Options::Format format) {
  const config::LoadResult r = config::load_file(config_path);
  if (format == Options::Format::json) {
    print_line(config::to_json(r));
  } else {
    for (const config::Diagnostic& d : r.diagnostics) {
      print_line(config::format(d));
    }
    std::fflush(stdout);
    print_summary(config_path, r);
  }
  return r.ok() ? 0 : 1;
}

}  // namespace floodgate::app
