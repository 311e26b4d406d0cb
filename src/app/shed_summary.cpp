#include "shed_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace floodgate::app {
namespace {

uint64_t since(uint64_t now, uint64_t before) {
  return now > before ? now - before : 0;
}

std::string upstream_name(std::size_t slot, std::span<const std::string> pool_names) {
  if (slot == ReactorMetrics::kUnroutedSlot) return "-";
  const std::size_t id = slot - 1;
  if (id < pool_names.size()) return pool_names[id];
  std::string unnamed(1, '#');  // appended, not "#" + string: GCC 12's -Wrestrict false positive
  unnamed += std::to_string(id);
  return unnamed;
}

}  // namespace

ShedCounts read_shed_counts(std::span<const ReactorMetrics* const> shards, std::size_t pools) {
  ShedCounts c;
  c.refused.resize(pools + 1);
  for (const ReactorMetrics* m : shards) {
    const std::size_t slots = std::min(c.refused.size(), m->slots());
    for (std::size_t slot = 0; slot < slots; ++slot) {
      for (std::size_t i = 0; i < kShedReasons.size(); ++i) {
        c.refused[slot][i] += m->refused(slot, i).value();
      }
    }
    for (std::size_t s = 0; s < kStageReasons.size(); ++s) {
      const std::size_t i = shed_reason_index(kStageReasons[s].reason);
      if (i < kShedReasons.size()) c.shadow[i] += m->shadow_rejections(s).value();
    }
  }
  return c;
}

std::string shed_seconds(std::chrono::milliseconds d) {
  const int64_t tenths = (std::max<int64_t>(d.count(), 0) + 50) / 100;
  if (tenths % 10 == 0) return fmt::format("{}s", tenths / 10);
  return fmt::format("{}.{}s", tenths / 10, tenths % 10);
}

void ShedSummary::rebase(ShedCounts now) {
  last_ = std::move(now);
  slots_.assign(last_.refused.size(), Episode{});
  shadow_ = Episode{};
}

std::vector<ShedLine> ShedSummary::summarise(const ShedCounts& now,
                                             std::chrono::milliseconds elapsed,
                                             std::span<const std::string> pool_names) {
  last_.refused.resize(now.refused.size());  // pools added since (ids only grow)
  slots_.resize(std::max(slots_.size(), now.refused.size()));
  std::vector<Entry> entries;
  std::vector<bool> active(slots_.size() + 1);  // + 1: shadow mode, last
  const auto take = [&](std::size_t slot, std::size_t reason, uint64_t n) {
    if (n == 0) return;
    entries.push_back({slot, reason, n});
    Episode& e = episode(slot);
    e.shedding = true;
    e.refused += n;
    active[slot == kShadow ? slots_.size() : slot] = true;
  };
  for (std::size_t slot = 0; slot < now.refused.size(); ++slot) {
    for (std::size_t i = 0; i < kShedReasons.size(); ++i) {
      take(slot, i, since(now.refused[slot][i], last_.refused[slot][i]));
    }
  }
  for (std::size_t i = 0; i < kShedReasons.size(); ++i) {
    take(kShadow, i, since(now.shadow[i], last_.shadow[i]));
  }
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    if (active[slot]) slots_[slot].span += elapsed;
  }
  if (active.back()) shadow_.span += elapsed;

  std::vector<ShedLine> out;
  refusal_lines(entries, shed_seconds(elapsed), pool_names, out);
  ended_lines(active, pool_names, out);
  last_ = now;
  return out;
}

// The largest counts first (then slot and reason order, which the stable sort keeps), at most
// kMaxLines; the rest in one line.
void ShedSummary::refusal_lines(std::vector<Entry>& entries, const std::string& window,
                                std::span<const std::string> pool_names,
                                std::vector<ShedLine>& out) const {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.count > b.count; });
  const std::size_t shown = std::min(entries.size(), kMaxLines);
  for (std::size_t k = 0; k < shown; ++k) {
    const Entry& e = entries[k];
    const Reason reason = kShedReasons[e.reason];
    if (e.slot == kShadow) {
      out.push_back(
          {false, fmt::format("shedding (shadow): reason={} would_refuse={} in the last {}",
                              info(reason).name, e.count, window)});
    } else {
      out.push_back({true, fmt::format("shedding: upstream={} reason={} refused={} in the last {} "
                                       "(status {})",
                                       upstream_name(e.slot, pool_names), info(reason).name,
                                       e.count, window, info(reason).status)});
    }
  }
  if (entries.size() > shown) {
    uint64_t rest = 0;
    for (std::size_t k = shown; k < entries.size(); ++k) rest += entries[k].count;
    out.push_back({true, fmt::format("shedding: {} more upstream and reason pair(s) refused={} "
                                     "in the last {}",
                                     entries.size() - shown, rest, window)});
  }
}

// An episode ends with the first interval without a refusal from its source.
void ShedSummary::ended_lines(const std::vector<bool>& active,
                              std::span<const std::string> pool_names, std::vector<ShedLine>& out) {
  std::size_t written = 0;
  std::size_t folded = 0;
  const auto end = [&](std::size_t slot, std::size_t index) {
    Episode& e = episode(slot);
    if (!e.shedding || active[index]) return;
    if (written == kMaxLines) {
      ++folded;
    } else if (slot == kShadow) {
      ++written;
      out.push_back({false, fmt::format("shedding ended (shadow): would_refuse={} over {}",
                                        e.refused, shed_seconds(e.span))});
    } else {
      ++written;
      out.push_back(
          {false, fmt::format("shedding ended: upstream={} refused={} over {}",
                              upstream_name(slot, pool_names), e.refused, shed_seconds(e.span))});
    }
    e = Episode{};
  };
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) end(slot, slot);
  end(kShadow, slots_.size());
  if (folded > 0)
    out.push_back({false, fmt::format("shedding ended: {} more upstream(s)", folded)});
}

}  // namespace floodgate::app
