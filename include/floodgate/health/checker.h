// Checker: the health task. One per process, on its own thread with its own io_context,
// separate from the request reactors; it probes the servers of every pool that has
// [upstreams.health] and is the only writer of each peer's PeerHealth (upstream/peer_health.h).
//
// The loop, per peer: every `interval` (a fixed schedule) a probe starts, unless the previous
// one is still in flight: then the peer is skipped that round, never probed twice at once.
// A probe connects, makes the TLS handshake when the pool speaks TLS to its backends (the
// pool's own client context: the same CA, verification, name and client certificate as the
// proxied connections), sends `GET path`, reads the response head (ProbeHead) and closes, all
// within `timeout`; it ends in exactly one outcome. `fall` consecutive failures (failure,
// timeout, malformed) mark the peer down, `rise` consecutive successes mark it up; a failure
// resets the success streak and a success the failure streak.
//
// Generations: update() installs the targets of a configuration generation. A peer it keeps
// (the same PeerHealth) keeps its state, streaks and schedule; a removed peer stops being
// probed; a peer whose pool has no health table is up and unprobed. A probe that completes
// after the generation it started in was replaced, or after stop(), may free its resources but
// changes no peer's state (every completion checks the generation and the stop flag first).
//
// Thread-safety: update() and stop() from any thread (they post to the health thread); the
// rest is internal to it. Lifetime: stop() (or the destructor) ends the loop and joins the
// thread before anything the probes use is released.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/net/tls.h"
#include "floodgate/upstream/params.h"
#include "floodgate/upstream/peer_health.h"

namespace floodgate::health {

// One peer as a generation configures it.
struct Target {
  std::string pool;  // upstream name (logs)
  std::string peer;  // the address as configured (logs; the default Host header)
  boost::asio::ip::tcp::endpoint endpoint;
  std::shared_ptr<PeerHealth> state;   // the peer's identity
  std::optional<HealthParams> params;  // nullopt: the pool has no active checks
  // The pool's [upstreams.tls] context (nullptr: plain TCP) and the host the server was
  // written with, the name TLS sends and verifies unless server_name says otherwise.
  std::shared_ptr<const net::TlsClientConfig> tls;
  std::string host;
};

class Checker {
 public:
  Checker();
  ~Checker();
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  void start();
  // Installs generation `generation`'s targets (posted).
  void update(uint64_t generation, std::vector<Target> targets);
  // Ends the loop (probes in flight are abandoned without changing any state) and joins.
  void stop();

 private:
  struct Peer;
  struct Probe;
  void install(uint64_t generation, std::vector<Target> targets);
  void schedule(const std::shared_ptr<Peer>& peer, bool now);
  void start_probe(const std::shared_ptr<Peer>& peer);
  void send_request(const std::shared_ptr<Probe>& probe);
  void read_head(const std::shared_ptr<Probe>& probe);
  void complete(const std::shared_ptr<Probe>& probe, ProbeResult result, int status);
  void apply(Peer& peer, const Probe& probe, ProbeResult result, int status);

  boost::asio::io_context io_{1};
  std::thread thread_;
  // Health thread only.
  std::map<const PeerHealth*, std::shared_ptr<Peer>> peers_;
  uint64_t epoch_ = 0;  // one per install(), including a rollback's
  bool stopped_ = false;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
};

}  // namespace floodgate::health
