// Collects the diagnostics of one load: every problem found in one pass, errors and warnings,
// each with its position and key path. The loader keeps going after an error so the operator
// sees all problems at once; the Config is only published when no error was recorded.
// Not thread-safe; one Collector per load, on the main thread.
#pragma once

#include <string>
#include <vector>

#include "floodgate/config/config.h"

namespace floodgate::config::detail {

// 1-based position in the source; {0, 0} when there is none (e.g. an unreadable file).
struct Position {
  int line = 0;
  int column = 0;
};

class Collector {
 public:
  explicit Collector(std::string file) : file_(std::move(file)) {}

  void error(Position at, std::string path, std::string message);
  void warning(Position at, std::string path, std::string message);
  // A fact `floodgate check` states about the file (LoadResult::notes), not a problem.
  void note(Position at, std::string path, std::string message);

  bool has_errors() const { return errors_ > 0; }
  int error_count() const { return errors_; }
  const std::string& file() const { return file_; }

  // The diagnostics in source order (position-less ones first); leaves the Collector empty.
  std::vector<Diagnostic> take();
  // The notes in source order; leaves the Collector without them.
  std::vector<Diagnostic> take_notes();

 private:
  void add(Diagnostic::Severity severity, Position at, std::string path, std::string message);

  std::string file_;
  std::vector<Diagnostic> diagnostics_;
  std::vector<Diagnostic> notes_;
  int errors_ = 0;
};

}  // namespace floodgate::config::detail
