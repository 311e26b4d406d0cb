#include "floodgate/health/checker.h"

#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <exception>

#include "floodgate/health/probe.h"

namespace floodgate::health {

namespace asio = boost::asio;
using boost::system::error_code;

// A peer being checked in the current generation.
struct Checker::Peer {
  Peer(asio::io_context& io, Target t) : target(std::move(t)), timer(io) {}
  Target target;                     // params is set
  asio::steady_timer timer;          // the next round
  std::shared_ptr<Probe> in_flight;  // at most one probe at a time
  bool removed = false;              // a generation without this peer was installed
};

// One probe: its own socket, deadline, buffer and request. Every completion holds it (never
// the peer or the checker by a raw capture alone) and returns at once once `done`.
struct Checker::Probe {
  Probe(asio::io_context& io, std::shared_ptr<Peer> p, uint64_t started_in)
      : peer(std::move(p)),
        epoch(started_in),
        params(*peer->target.params),
        socket(io),
        deadline(io),
        started(std::chrono::steady_clock::now()),
        head(params) {
    const std::string& host = params.host.empty() ? peer->target.peer : params.host;
    request = "GET " + params.path + " HTTP/1.1\r\nHost: " + host +
              "\r\nUser-Agent: floodgate-health\r\nConnection: close\r\n\r\n";
  }
  std::shared_ptr<Peer> peer;
  const uint64_t epoch;  // the install it started under
  const HealthParams params;
  asio::ip::tcp::socket socket;
  // The TLS session over `socket` when the pool speaks TLS (declared after it: it goes first).
  std::optional<asio::ssl::stream<asio::ip::tcp::socket&>> tls;
  asio::steady_timer deadline;
  const std::chrono::steady_clock::time_point started;  // for floodgate_health_probe_duration
  ProbeHead head;
  std::string request;
  std::string why;    // what failed, when the log can say more than the result (TLS)
  bool done = false;  // its one outcome is decided
};

Checker::Checker() = default;

Checker::~Checker() {
  try {
    stop();
  } catch (...) {
    // The probe thread could not be told to stop (no memory to post the request) or joined:
    // it still uses this object, so nothing can be released safely.
    std::terminate();
  }
}

void Checker::start() {
  work_.emplace(io_.get_executor());
  // run() returns once stop() dropped the guard and the last aborted completion has run, so
  // nothing a probe uses outlives the loop.
  thread_ = std::thread([this] { io_.run(); });
}

void Checker::update(uint64_t generation, std::vector<Target> targets) {
  asio::post(io_, [this, generation, targets = std::move(targets)]() mutable {
    install(generation, std::move(targets));
  });
}

void Checker::stop() {
  if (!thread_.joinable()) return;
  asio::post(io_, [this] {
    stopped_ = true;
    for (auto& [state, peer] : peers_) {
      peer->removed = true;
      peer->timer.cancel();
      if (peer->in_flight) {
        error_code ignored;
        peer->in_flight->deadline.cancel();
        peer->in_flight->socket.close(ignored);  // its completion runs, aborted, and returns
      }
    }
    peers_.clear();
    work_.reset();
  });
  thread_.join();
}

void Checker::install(uint64_t generation, std::vector<Target> targets) {
  if (stopped_) return;
  ++epoch_;  // probes started before this install are late from now on
  std::map<const PeerHealth*, std::shared_ptr<Peer>> next;
  for (Target& t : targets) {
    PeerHealth& state = *t.state;
    if (!t.params) {  // no active checks: up, and nothing to report
      state.checked.store(false, std::memory_order_relaxed);
      state.down.store(false, std::memory_order_relaxed);
      state.success_streak.store(0, std::memory_order_relaxed);
      state.failure_streak.store(0, std::memory_order_relaxed);
      continue;
    }
    if (next.contains(&state)) continue;  // one identity, one peer (cannot happen: defensive)
    state.checked.store(true, std::memory_order_relaxed);
    if (const auto it = peers_.find(&state); it != peers_.end()) {
      // Kept: same state, streaks and in-flight probe; a changed interval restarts the round.
      std::shared_ptr<Peer> peer = it->second;
      const bool reschedule = peer->target.params->interval != t.params->interval;
      peer->target = std::move(t);
      if (reschedule) schedule(peer, false);
      next.emplace(&state, std::move(peer));
    } else {
      auto peer = std::make_shared<Peer>(io_, std::move(t));
      schedule(peer, true);
      next.emplace(&state, std::move(peer));
    }
  }
  for (auto& [state, peer] : peers_) {
    if (next.contains(state)) continue;
    peer->removed = true;  // no longer probed; a probe in flight ends without effect
    peer->timer.cancel();
  }
  peers_ = std::move(next);
  spdlog::debug("health: generation {}: {} peer(s) checked", generation, peers_.size());
}

void Checker::schedule(const std::shared_ptr<Peer>& peer, bool now) {
  peer->timer.expires_after(now ? std::chrono::milliseconds(0) : peer->target.params->interval);
  peer->timer.async_wait([this, peer](const error_code& ec) {
    if (ec || peer->removed || stopped_) return;  // cancelled: a new round or none
    start_probe(peer);
    schedule(peer, false);
  });
}

void Checker::start_probe(const std::shared_ptr<Peer>& peer) {
  if (peer->in_flight) {
    // Still running from an earlier round (interval shorter than timeout, or a slow peer):
    // skip this round rather than overlap.
    return;
  }
  auto probe = std::make_shared<Probe>(io_, peer, epoch_);
  peer->in_flight = probe;
  probe->deadline.expires_after(probe->params.timeout);
  probe->deadline.async_wait([this, probe](const error_code& ec) {
    if (!ec) complete(probe, ProbeResult::timeout, 0);
  });
  if (const auto& tls = peer->target.tls) {
    SSL* ssl = net::new_client_ssl(*tls, peer->target.host);
    if (ssl == nullptr) {
      probe->why = "no memory for a TLS session";
      return complete(probe, ProbeResult::failure, 0);
    }
    probe->tls.emplace(probe->socket, ssl);  // owns `ssl` from here
  }
  probe->socket.async_connect(peer->target.endpoint, [this, probe](const error_code& ec) {
    if (probe->done) return;
    if (ec) return complete(probe, ProbeResult::failure, 0);
    if (!probe->tls) return send_request(probe);
    probe->tls->async_handshake(
        asio::ssl::stream_base::client, [this, probe](const error_code& ec) {
          if (probe->done) return;
          if (!ec) return send_request(probe);
          // The certificate's refusal says more than "certificate verify failed".
          const long verified = SSL_get_verify_result(probe->tls->native_handle());
          probe->why = "TLS handshake: " +
                       (verified != X509_V_OK ? std::string(X509_verify_cert_error_string(verified))
                                              : ec.message());
          complete(probe, ProbeResult::failure, 0);
        });
  });
}

void Checker::send_request(const std::shared_ptr<Probe>& probe) {
  const auto sent = [this, probe](const error_code& ec, std::size_t) {
    if (probe->done) return;
    if (ec) return complete(probe, ProbeResult::failure, 0);
    read_head(probe);
  };
  if (probe->tls) {
    asio::async_write(*probe->tls, asio::buffer(probe->request), sent);
  } else {
    asio::async_write(probe->socket, asio::buffer(probe->request), sent);
  }
}

void Checker::read_head(const std::shared_ptr<Probe>& probe) {
  const std::span<char> space = probe->head.space();
  const auto got = [this, probe](const error_code& ec, std::size_t n) {
    if (probe->done) return;
    ProbeHead& head = probe->head;
    if (ec) {  // EOF (a TLS close too) or a reset before the verdict: no head is a failure, a
               // cut one malformed
      head.closed();
      return complete(probe, head.result(), 0);
    }
    if (head.received(n) == ProbeHead::Verdict::need_more) return read_head(probe);
    complete(probe, head.result(), head.status());
  };
  if (probe->tls) {
    probe->tls->async_read_some(asio::buffer(space.data(), space.size()), got);
  } else {
    probe->socket.async_read_some(asio::buffer(space.data(), space.size()), got);
  }
}

void Checker::complete(const std::shared_ptr<Probe>& probe, ProbeResult result, int status) {
  if (probe->done) return;  // exactly one outcome per probe
  probe->done = true;
  Peer& peer = *probe->peer;
  if (peer.in_flight == probe) peer.in_flight.reset();
  // A late completion (its generation was replaced, the peer removed, or the checker stopped)
  // frees its resources and changes nothing.
  if (!stopped_ && !peer.removed && probe->epoch == epoch_) {
    const auto took = std::chrono::steady_clock::now() - probe->started;
    peer.target.state->last_probe_ns.store(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()),
        std::memory_order_relaxed);
    apply(peer, *probe, result, status);
  }
  // Closed after the verdict is recorded, so a peer that sees the probe's connection end sees
  // its effect too.
  error_code ignored;
  probe->deadline.cancel();
  probe->socket.close(ignored);
}

void Checker::apply(Peer& peer, const Probe& probe, ProbeResult result, int status) {
  PeerHealth& s = *peer.target.state;
  const HealthParams& p = *peer.target.params;
  s.probes[static_cast<std::size_t>(result)].fetch_add(1, std::memory_order_relaxed);
  s.last_result.store(static_cast<int>(result), std::memory_order_relaxed);
  s.last_status.store(status, std::memory_order_relaxed);
  const bool down = s.down.load(std::memory_order_relaxed);
  if (result == ProbeResult::success) {
    s.failure_streak.store(0, std::memory_order_relaxed);
    const uint32_t streak = s.success_streak.load(std::memory_order_relaxed) + 1;
    s.success_streak.store(streak, std::memory_order_relaxed);
    if (down && streak >= p.rise) {
      s.down.store(false, std::memory_order_relaxed);
      s.transitions[1].fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("health: {} of upstream '{}' is up after {} successful probes", peer.target.peer,
                   peer.target.pool, streak);
    }
    return;
  }
  s.success_streak.store(0, std::memory_order_relaxed);
  const uint32_t streak = s.failure_streak.load(std::memory_order_relaxed) + 1;
  s.failure_streak.store(streak, std::memory_order_relaxed);
  if (!down && streak >= p.fall) {
    s.down.store(true, std::memory_order_relaxed);
    s.transitions[0].fetch_add(1, std::memory_order_relaxed);
    spdlog::warn("health: {} of upstream '{}' is down after {} failed probes (last: {}{}{})",
                 peer.target.peer, peer.target.pool, streak,
                 kProbeResultNames[static_cast<std::size_t>(result)],
                 status != 0 ? ", status " + std::to_string(status) : std::string(),
                 probe.why.empty() ? std::string() : ", " + probe.why);
  }
}

}  // namespace floodgate::health
