// PeerHealth: what active health checking knows about one backend server (a peer).
//
// Ownership: the health task (health/checker.h) is the only writer of every field; it alone
// decides `down`. The request path reads `down` (one relaxed load per candidate in backend
// selection) and skips down peers; the admin listener reads the rest for /metrics and
// /status. Passive failures seen by requests never write here.
//
// Identity: one PeerHealth per peer identity (pool name, address, and which occurrence of that
// address in the pool), created with the peer's Backend and shared by every generation that
// keeps the peer, so a reload keeps its state and streaks. Two entries with the same address,
// in one pool or in two, never share one.
//
// Memory ordering: relaxed everywhere; the fields publish no other data, and a reader that
// sees `down` one probe late sends at most one more request to a failing peer.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace floodgate {

// The outcome of one probe. success: a complete, well-formed head within the byte limit with
// an expected status. failure: connection refused or reset, or an unexpected status.
// timeout: no complete head within the timeout. malformed: a malformed, truncated or
// oversized head.
enum class ProbeResult : uint8_t { success, failure, timeout, malformed, count_ };
inline constexpr std::size_t kProbeResults = static_cast<std::size_t>(ProbeResult::count_);
inline constexpr std::array<std::string_view, kProbeResults> kProbeResultNames{
    "success", "failure", "timeout", "malformed"};

struct PeerHealth {
  std::atomic<bool> down{false};     // peers start up
  std::atomic<bool> checked{false};  // its pool has active checks in the current generation
  std::atomic<uint32_t> success_streak{0};
  std::atomic<uint32_t> failure_streak{0};
  std::atomic<int> last_result{-1};  // a ProbeResult, -1 before the first probe
  std::atomic<int> last_status{0};   // HTTP status of the last probe that got a head, else 0
  std::array<std::atomic<uint64_t>, kProbeResults> probes{};  // completed probes by result
  // How long the last completed probe took, connect to verdict (0 before the first).
  std::atomic<uint64_t> last_probe_ns{0};
  // Times the peer was marked down ([0]) and up again ([1]) by the checks.
  std::array<std::atomic<uint64_t>, 2> transitions{};
};

}  // namespace floodgate
