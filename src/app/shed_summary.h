// ShedSummary: the process log's account of shedding (docs/operations.md, "The process
// log"). Every log.shed_summary_interval the main thread reads the reactors' refusal counters
// (ReactorMetrics::refused, by upstream and kShedReasons; the shadow-mode counts by reason),
// and this class turns the difference from the previous read into lines:
//
//   shedding: upstream=api reason=route_cap refused=1234 in the last 10s (status 503)
//   shedding: upstream=- reason=inflight_cap refused=87 in the last 10s (status 503)
//   shedding (shadow): reason=inflight_cap would_refuse=12 in the last 10s
//   shedding ended: upstream=api refused=5234 over 40s
//   shedding ended (shadow): would_refuse=40 over 20s
//
// one per upstream (or `-`, refused before a route was chosen) and reason that refused in the
// interval, and one "ended" line per upstream the interval after its last refusal. So an
// incident reaches the journal once per interval however many requests it refuses; the
// metrics count every refusal. At most kMaxLines lines of each kind per interval, the largest
// counts first; the rest are folded into one line.
//
// Pure: counts and the elapsed time in, text out (no clock, no logger, no reactor), so a test
// feeds it made-up counts. Thread-safety: none; one owner (the main thread).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "floodgate/metrics/reactor_metrics.h"

namespace floodgate::app {

// Refusal totals since the process started, summed over the reactors.
struct ShedCounts {
  using ByReason = std::array<uint64_t, kShedReasons.size()>;  // indexed as kShedReasons
  // By request slot: [0] before routing, [id + 1] the upstream with pool id `id`.
  std::vector<ByReason> refused;
  ByReason shadow{};  // what stages in shadow mode would have refused (no upstream)
};

// The totals of `shards` for the first `pools` pool ids.
ShedCounts read_shed_counts(std::span<const ReactorMetrics* const> shards, std::size_t pools);

struct ShedLine {
  bool warning = false;  // a refusal line (warn); the others are info
  std::string text;
};

class ShedSummary {
 public:
  static constexpr std::size_t kMaxLines = 20;

  // Starts counting from `now`, without lines, and forgets who was shedding (when the summary
  // is turned on, or off).
  void rebase(ShedCounts now);

  // The lines for the interval since the previous call (or rebase), which took `elapsed`;
  // `pool_names[id]` names pool id `id`. Totals lower than the previous ones count as none.
  std::vector<ShedLine> summarise(const ShedCounts& now, std::chrono::milliseconds elapsed,
                                  std::span<const std::string> pool_names);

 private:
  // One source of refusals (a request slot, or shadow mode) while it sheds.
  struct Episode {
    bool shedding = false;
    uint64_t refused = 0;              // in every interval of the episode
    std::chrono::milliseconds span{};  // the intervals' time
  };
  struct Entry {
    std::size_t slot;  // kShadow for shadow mode
    std::size_t reason;
    uint64_t count;
  };
  static constexpr std::size_t kShadow = static_cast<std::size_t>(-1);

  Episode& episode(std::size_t slot) { return slot == kShadow ? shadow_ : slots_[slot]; }
  void refusal_lines(std::vector<Entry>& entries, const std::string& window,
                     std::span<const std::string> pool_names, std::vector<ShedLine>& out) const;
  void ended_lines(const std::vector<bool>& active, std::span<const std::string> pool_names,
                   std::vector<ShedLine>& out);

  ShedCounts last_;
  std::vector<Episode> slots_;  // by request slot, as ShedCounts::refused
  Episode shadow_;
};

// "10s", "1.5s": `d` rounded to a tenth of a second.
std::string shed_seconds(std::chrono::milliseconds d);

}  // namespace floodgate::app
