#include "collector.h"

#include <algorithm>
#include <tuple>

namespace floodgate::config {

std::string format(const Diagnostic& d) {
  std::string out = d.file;
  if (d.line > 0) {
    out += ':';
    out += std::to_string(d.line);
    out += ':';
    out += std::to_string(d.column);
  }
  out += d.severity == Diagnostic::Severity::error ? ": error: " : ": warning: ";
  if (!d.path.empty()) {
    out += d.path + ": ";
  }
  return out + d.message;
}

namespace detail {

void Collector::error(Position at, std::string path, std::string message) {
  add(Diagnostic::Severity::error, at, std::move(path), std::move(message));
  ++errors_;
}

void Collector::warning(Position at, std::string path, std::string message) {
  add(Diagnostic::Severity::warning, at, std::move(path), std::move(message));
}

void Collector::add(Diagnostic::Severity severity, Position at, std::string path,
                    std::string message) {
  diagnostics_.push_back(
      Diagnostic{severity, file_, at.line, at.column, std::move(path), std::move(message)});
}

std::vector<Diagnostic> Collector::take() {
  std::stable_sort(diagnostics_.begin(), diagnostics_.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                   });
  std::vector<Diagnostic> out;
  out.swap(diagnostics_);
  errors_ = 0;
  return out;
}

}  // namespace detail
}  // namespace floodgate::config
