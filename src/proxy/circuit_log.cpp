#include "floodgate/proxy/circuit_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace floodgate::proxy {
namespace {

using resilience::CircuitState;
using resilience::CircuitTransition;

// Index into Backend::circuit_log, or kCircuitTransitions for a pair the state machine never
// takes.
std::size_t transition_index(CircuitState from, CircuitState to) noexcept {
  using enum CircuitState;
  if (from == closed && to == open) return 0;
  if (from == open && to == half_open) return 1;
  if (from == half_open && to == closed) return 2;
  if (from == half_open && to == open) return 3;
  return kCircuitTransitions;
}

std::string_view state_name(CircuitState s) noexcept {
  switch (s) {
    case CircuitState::closed:
      return "closed";
    case CircuitState::open:
      return "open";
    case CircuitState::half_open:
      return "half_open";
  }
  return "?";
}

using Buffer = fmt::memory_buffer;  // 500 bytes inline: a line needs no allocation of its own

// A duration as the configuration writes one: "30s", "1500ms".
void append(Buffer& out, std::chrono::nanoseconds d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 1000 == 0) {
    fmt::format_to(std::back_inserter(out), "{}s", ms / 1000);
  } else {
    fmt::format_to(std::back_inserter(out), "{}ms", ms);
  }
}

// The verdict: the reason code of a transport failure, else "status N".
void append(Buffer& out, VerdictCause cause) {
  if (cause.reason != Reason::none) {
    fmt::format_to(std::back_inserter(out), "{}", info(cause.reason).name);
  } else {
    fmt::format_to(std::back_inserter(out), "status {}", cause.status);
  }
}

// "6 of 10 requests failed in the last 10s"
void window_text(Buffer& out, const CircuitTransition& t, const resilience::CircuitLimits& l) {
  fmt::format_to(std::back_inserter(out), "{} of {} requests failed in the last ",
                 t.window.failures, t.window.requests);
  append(out, l.window);
}

void opening_text(Buffer& out, const CircuitTransition& t, const resilience::CircuitLimits& l,
                  VerdictCause cause) {
  auto it = std::back_inserter(out);
  if (t.opened_by == resilience::OpenedBy::streak) {
    fmt::format_to(it, "{} failures in a row (failure_threshold = {}); ", t.streak,
                   l.failure_threshold);
    window_text(out, t, l);
  } else {
    window_text(out, t, l);
    const uint64_t percent =
        t.window.requests == 0 ? 0 : uint64_t{t.window.failures} * 100 / t.window.requests;
    fmt::format_to(it, " ({}%, failure_rate_percent = {}), {} in a row", percent,
                   l.failure_rate_percent, t.streak);
  }
  fmt::format_to(it, "; latest: ");
  append(out, cause);
  fmt::format_to(it, "; half-open in ");
  append(out, l.open);
}

// One line for transition `index` of `t`, standing for `count` of them.
void write_line(const Upstream& up, const Backend& backend, const CircuitTransition& t,
                VerdictCause cause, std::size_t index, uint64_t count) {
  const resilience::CircuitLimits limits = backend.breaker->limits();
  Buffer line;
  auto it = std::back_inserter(line);
  fmt::format_to(it, "upstream \"{}\" backend {}: circuit {} -> {}: ", up.params.name,
                 backend.address.text, state_name(t.from), state_name(t.to));
  switch (index) {
    case 0:
      opening_text(line, t, limits, cause);
      break;
    case 1:
      fmt::format_to(it, "the open period (");
      append(line, limits.open);
      fmt::format_to(it, ") is over; up to {} probe(s) at a time; ", limits.half_open_max_probes);
      window_text(line, t, limits);
      break;
    case 2:
      fmt::format_to(it, "a probe succeeded (");
      append(line, cause);
      fmt::format_to(it, ")");
      break;
    default:
      fmt::format_to(it, "a probe failed (");
      append(line, cause);
      fmt::format_to(it, "); half-open again in ");
      append(line, limits.open);
  }
  if (count > 1) fmt::format_to(it, "; {} more like it since the last line", count - 1);
  const auto level = t.to == CircuitState::open ? spdlog::level::warn : spdlog::level::info;
  spdlog::log(level, "{}", std::string_view(line.data(), line.size()));
}

}  // namespace

void log_circuit_transition(const Upstream& up, Backend& backend, const CircuitTransition& t,
                            VerdictCause cause, Clock::time_point now) noexcept {
  const std::size_t index = transition_index(t.from, t.to);
  if (!t || index >= kCircuitTransitions) return;
  const uint64_t count = backend.circuit_log[index].occurred(now);
  if (count == 0) return;
  try {
    write_line(up, backend, t, cause, index, count);
  } catch (...) {  // out of memory for a line: the transition is counted in the metrics anyway
  }
}

void log_circuit_half_open(const Upstream& up, Backend& backend, Clock::time_point now) noexcept {
  const resilience::CircuitBreaker& cb = *backend.breaker;
  const CircuitTransition t{.from = CircuitState::open,
                            .to = CircuitState::half_open,
                            .streak = cb.streak(),
                            .window = cb.window(now)};
  log_circuit_transition(up, backend, t, {}, now);
}

}  // namespace floodgate::proxy
