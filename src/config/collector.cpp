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
  switch (d.severity) {
    case Diagnostic::Severity::error:
      out += ": error: ";
      break;
    case Diagnostic::Severity::warning:
      out += ": warning: ";
      break;
    case Diagnostic::Severity::note:
      out += ": note: ";
      break;
  }
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

void Collector::note(Position at, std::string path, std::string message) {
  notes_.push_back(Diagnostic{Diagnostic::Severity::note, file_, at.line, at.column,
                              std::move(path), std::move(message)});
}

void Collector::add(Diagnostic::Severity severity, Position at, std::string path,
                    std::string message) {
  diagnostics_.push_back(
      Diagnostic{severity, file_, at.line, at.column, std::move(path), std::move(message)});
}

namespace {

std::vector<Diagnostic> in_source_order(std::vector<Diagnostic>& from) {
  std::stable_sort(from.begin(), from.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  std::vector<Diagnostic> out;
  out.swap(from);
  return out;
}

}  // namespace

std::vector<Diagnostic> Collector::take() {
  errors_ = 0;
  return in_source_order(diagnostics_);
}

std::vector<Diagnostic> Collector::take_notes() {
  return in_source_order(notes_);
}

}  // namespace detail
}  // namespace floodgate::config
