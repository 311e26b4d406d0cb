// CircuitBreaker: how the lock-free state works.
//
// THE STATE WORD. word_ packs everything a decision must see at once: the state, the probes in
// flight, the streak, the epoch and the kPublishing flag (layout in the header). Every decision
// is one compare-and-swap on the word, prepared from one value of it, so it checks and changes
// all of them in one indivisible step: two threads can never both move open -> half_open, both
// take the last probe permit, both open a closed circuit, or let a failure count towards a
// streak that a success reset in between. A CAS that loses reloads the word and decides again
// from the new value (a failure that lost the race to open becomes a failure while open).
//
// WHO CHANGES WHAT, and what races with it:
//   - closed: record() of a failure adds one to the streak, or, when the window's counts and
//     the streak meet the limits, opens (below). A success resets a non-zero streak. try_pass()
//     only loads, so it races nothing.
//   - closed -> open and half_open -> open (openings): one CAS sets state open, zeroes the
//     probes, adds one to the epoch and sets kPublishing. Only the CAS's winner then stores
//     opened_at_ and clears kPublishing (release). While the flag is set, try_pass() refuses
//     without reading opened_at_, so nobody can read the previous period's time as this one's
//     and half-open early. Nothing moves a publishing word out of open, so the winner's
//     fetch_and only ever clears its own flag; failures of stragglers may still bump the
//     streak meanwhile (the flag rides along).
//   - open -> half_open: try_pass() once now >= opened_at_ + open, in one CAS that also takes
//     the first probe permit (probes are 0 in open: every opening zeroes them). Racing callers
//     all prepare the same CAS; one wins, the rest reload and see half_open.
//   - half_open: try_pass() adds a probe while probes < max_probes; record() of a current probe
//     ends the period (success: closed, streak 0, probes 0; failure: an opening); abandon() of
//     a current probe subtracts it. They race on the word: the period ends exactly once, and a
//     permit given back after it ended is not subtracted from the next period.
// "Current" is the epoch: a pass carries the epoch of the period that issued its permit, and
// every opening adds one, so each half-open period has its own epoch. A probe whose period has
// ended (another probe closed or reopened the circuit) holds no permit any more and is treated
// as a straggler: the ending zeroed the count, so its release must not touch the next one.
// The epoch has 21 bits: a probe would be mistaken for a current one only after exactly 2^21
// openings during its own attempt, each at least `open` long.
//
// THE TIMESTAMPS live beside the word, each in its own atomic of clock ticks:
//   - opened_at_: written only by an opening's winner, under kPublishing (above). A reader that
//     loaded the word with acquire and saw the flag clear sees this period's value or a later
//     one (the flag's clearing is a release, and the word's later changes are RMWs, which
//     continue its release sequence). A later value means a later opening, whose CAS changed
//     the word, so any decision made from the stale word fails its CAS.
//   - last_failure_: every failure raises it to its `now` by a CAS loop (a max), before
//     touching the word, so an observer that sees the circuit open sees a last failure at least
//     as late as the one that opened it. Threads' loop clocks differ by a loop turn at most;
//     the max keeps it monotonic.
// The limits (threshold_, min_requests_, rate_percent_, max_probes_, open_ticks_) are read where
// each decision needs them and written by set_limits() with relaxed stores: a decision that
// starts after set_limits() returned sees the new values; an overlapping one may use either,
// which is the most a reload can promise (it is not ordered against any one request).
//
// THE WINDOW (window_, failure_window.h) is apart from the word: record() adds each verdict to
// it before deciding, and a failure while closed reads its counts once, before the CAS loop.
// The opening decision is then made from the word's streak and those counts; a CAS that loses
// decides again from the new word with the same counts (they differ from the current ones by
// the verdicts racing this one, which is what "at the same moment" means for a window). The
// counts are not in the word, so two racing failures may both see the rate reached: only one
// CAS opens the circuit, the other then records as a straggler. A closing (half_open ->
// closed) clears the window after its CAS, so that the failures that opened the circuit do not
// reopen it at the next failure; verdicts of stragglers racing the clear may survive it.
//
// MEMORY ORDER. The word's successful RMWs are acq_rel and its loads acquire: a breaker guards
// no data of its callers, but opened_at_ must be visible with the state that depends on it.
// On x86 none of this costs more than the CAS itself; the closed fast path is a plain load.
#include "floodgate/resilience/circuit_breaker.h"

#include <algorithm>
#include <limits>

namespace floodgate::resilience {
namespace {

constexpr Clock::duration::rep kNever = std::numeric_limits<Clock::duration::rep>::min();

// Index into transitions_, or -1 for a pair the state machine never takes.
int transition_index(CircuitState from, CircuitState to) noexcept {
  using enum CircuitState;
  if (from == closed && to == open) return 0;
  if (from == open && to == half_open) return 1;
  if (from == half_open && to == closed) return 2;
  if (from == half_open && to == open) return 3;
  return -1;
}

Clock::duration::rep open_ticks_of(const CircuitLimits& limits) noexcept {
  return std::max(std::chrono::duration_cast<Clock::duration>(limits.open), Clock::duration::zero())
      .count();
}

}  // namespace

CircuitBreaker::CircuitBreaker(const CircuitLimits& limits) noexcept
    : opened_at_(kNever),
      threshold_(std::clamp(limits.failure_threshold, uint32_t{1}, kMaxThreshold)),
      min_requests_(std::clamp(limits.min_requests, uint32_t{1}, kMaxMinRequests)),
      rate_percent_(std::min(limits.failure_rate_percent, uint32_t{100})),
      max_probes_(std::clamp(limits.half_open_max_probes, uint32_t{1}, kMaxProbes)),
      open_ticks_(open_ticks_of(limits)),
      window_(limits.window) {}

CircuitPass CircuitBreaker::try_pass_slow(uint64_t word, time_point now) noexcept {
  for (;;) {
    switch (state_of(word)) {
      case CircuitState::closed:
        return {*this, CircuitPass::Kind::regular, 0};
      case CircuitState::open: {
        if ((word & kPublishing) != 0 || now.time_since_epoch().count() < half_open_ticks()) {
          return {};
        }
        const uint64_t next =
            (word & ~kStateMask) | static_cast<uint64_t>(CircuitState::half_open) | kOneProbe;
        if (word_.compare_exchange_weak(word, next, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
          count(CircuitState::open, CircuitState::half_open);
          return {*this, CircuitPass::Kind::probe, epoch_of(word), true};
        }
        break;  // `word` reloaded: decide again
      }
      case CircuitState::half_open: {
        if (probes_of(word) >= max_probes_.load(std::memory_order_relaxed)) return {};
        if (word_.compare_exchange_weak(word, word + kOneProbe, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
          return {*this, CircuitPass::Kind::probe, epoch_of(word)};
        }
        break;
      }
    }
  }
}

OpenedBy CircuitBreaker::opens(uint32_t streak, FailureWindow::Counts counts) const noexcept {
  if (counts.requests < min_requests_.load(std::memory_order_relaxed)) return OpenedBy::none;
  if (streak >= threshold_.load(std::memory_order_relaxed)) return OpenedBy::streak;
  const uint64_t rate = rate_percent_.load(std::memory_order_relaxed);
  if (rate != 0 && uint64_t{counts.failures} * 100 >= rate * counts.requests) {
    return OpenedBy::failure_rate;
  }
  return OpenedBy::none;
}

CircuitTransition CircuitBreaker::record_slow(CircuitPass::Kind kind, uint32_t epoch,
                                              CircuitVerdict verdict, time_point now) noexcept {
  const bool failure = verdict == CircuitVerdict::failure;
  FailureWindow::Counts counts{};
  if (failure) {
    note_failure(now);
    counts = window_.counts(now);
  }
  uint64_t word = word_.load(std::memory_order_acquire);
  for (;;) {
    const CircuitState state = state_of(word);
    const bool probe = kind == CircuitPass::Kind::probe && current_probe(word, epoch);
    const uint32_t streak = streak_of(word);
    const uint32_t streak_after = failure ? std::min(streak + 1, kMaxThreshold) : 0;
    // The epoch, and the publishing flag of an opening still in progress, survive any change.
    const uint64_t kept = word & ~(kStateMask | kProbesMask | kStreakMask);
    const uint64_t with_streak = (word & ~kStreakMask) | (uint64_t{streak_after} << kStreakShift);
    const OpenedBy opened_by =
        failure && state == CircuitState::closed ? opens(streak_after, counts) : OpenedBy::none;
    uint64_t next = 0;
    CircuitState to = state;
    if (!failure) {
      if (probe) {
        to = CircuitState::closed;
        next = kept;  // closed, no probes, streak 0
      } else if (state == CircuitState::closed && streak != 0) {
        next = with_streak;
      } else {
        return {};  // nothing changes
      }
    } else if (probe || opened_by != OpenedBy::none) {
      to = CircuitState::open;
      next = (kept + (uint64_t{1} << kEpochShift)) | kPublishing |
             static_cast<uint64_t>(CircuitState::open) | (uint64_t{streak_after} << kStreakShift);
    } else if (streak_after != streak) {
      next = with_streak;  // closed below the limits, or a straggler while open / half-open
    } else {
      return {};  // saturated
    }
    if (word_.compare_exchange_weak(word, next, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      if (to == state) return {};
      if (to == CircuitState::open) publish_opening(now);
      count(state, to);
      CircuitTransition t{.from = state, .to = to, .opened_by = opened_by, .streak = streak_after};
      t.window = failure ? counts : window_.counts(now);
      if (to == CircuitState::closed) window_.clear();  // after reading what it held
      return t;
    }
  }
}

void CircuitBreaker::abandon(CircuitPass&& pass) noexcept {
  assert((!pass || pass.breaker_ == this) && "abandoning a pass of another breaker");
  pass.drop();
}

void CircuitBreaker::release_probe(uint32_t epoch) noexcept {
  uint64_t word = word_.load(std::memory_order_acquire);
  while (current_probe(word, epoch)) {
    assert(probes_of(word) > 0);
    if (word_.compare_exchange_weak(word, word - kOneProbe, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      return;
    }
  }
  // The period ended: its ending already took this permit back.
}

void CircuitBreaker::note_failure(time_point now) noexcept {
  const Rep ticks = now.time_since_epoch().count();
  Rep seen = last_failure_.load(std::memory_order_relaxed);
  while (seen < ticks &&
         !last_failure_.compare_exchange_weak(seen, ticks, std::memory_order_relaxed)) {
  }
}

void CircuitBreaker::publish_opening(time_point now) noexcept {
  opened_at_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  word_.fetch_and(~kPublishing, std::memory_order_release);
}

CircuitBreaker::Rep CircuitBreaker::half_open_ticks() const noexcept {
  return opened_at_.load(std::memory_order_relaxed) + open_ticks_.load(std::memory_order_relaxed);
}

void CircuitBreaker::count(CircuitState from, CircuitState to) noexcept {
  transitions_[static_cast<std::size_t>(transition_index(from, to))].fetch_add(
      1, std::memory_order_relaxed);
}

void CircuitBreaker::set_limits(const CircuitLimits& limits) noexcept {
  threshold_.store(std::clamp(limits.failure_threshold, uint32_t{1}, kMaxThreshold),
                   std::memory_order_relaxed);
  min_requests_.store(std::clamp(limits.min_requests, uint32_t{1}, kMaxMinRequests),
                      std::memory_order_relaxed);
  rate_percent_.store(std::min(limits.failure_rate_percent, uint32_t{100}),
                      std::memory_order_relaxed);
  window_.set_window(limits.window);
  max_probes_.store(std::clamp(limits.half_open_max_probes, uint32_t{1}, kMaxProbes),
                    std::memory_order_relaxed);
  open_ticks_.store(open_ticks_of(limits), std::memory_order_relaxed);
}

CircuitLimits CircuitBreaker::limits() const noexcept {
  return {.failure_threshold = threshold_.load(std::memory_order_relaxed),
          .min_requests = min_requests_.load(std::memory_order_relaxed),
          .failure_rate_percent = rate_percent_.load(std::memory_order_relaxed),
          .window = window_.window(),
          .open = Clock::duration{open_ticks_.load(std::memory_order_relaxed)},
          .half_open_max_probes = max_probes_.load(std::memory_order_relaxed)};
}

CircuitState CircuitBreaker::state(time_point now) const noexcept {
  const uint64_t word = word_.load(std::memory_order_acquire);
  const CircuitState state = state_of(word);
  if (state != CircuitState::open || (word & kPublishing) != 0) return state;
  return now.time_since_epoch().count() < half_open_ticks() ? CircuitState::open
                                                            : CircuitState::half_open;
}

CircuitBreaker::time_point CircuitBreaker::half_open_at() const noexcept {
  const uint64_t word = word_.load(std::memory_order_acquire);
  const Rep open = open_ticks_.load(std::memory_order_relaxed);
  if ((word & kPublishing) != 0) {
    return last_failure() + Clock::duration{open};
  }
  const Rep opened = opened_at_.load(std::memory_order_relaxed);
  if (opened == kNever) return time_point{};
  return time_point{Clock::duration{opened + open}};
}

uint64_t CircuitBreaker::transitions(CircuitState from, CircuitState to) const noexcept {
  const int index = transition_index(from, to);
  if (index < 0) return 0;
  return transitions_[static_cast<std::size_t>(index)].load(std::memory_order_relaxed);
}

}  // namespace floodgate::resilience
