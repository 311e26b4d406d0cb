// An exchange: one request's life on a client connection, from its first byte to its access
// log record. It pins the generation the request runs on and holds what the request is (its
// facts, its route and pool), its state in the stage chain (the request view the stages read,
// the tickets they hold, what a shadow-mode stage would have answered), its pool slot, its
// outcome, and its attempts at backends.
//
// An exchange embeds two attempts, so a retry or a hedge allocates nothing; today's request
// path uses one (the second is for the retry and hedging of the failure-handling stages).
// A client connection embeds one exchange and begins it again for each request (reset, never
// reallocated).
//
// Thread-safety: reactor thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/ref.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/http/rewrite.h"
#include "floodgate/proxy/attempt.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/proxy/stage.h"
#include "floodgate/resilience/request_view.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

struct Exchange {
  // -- The stage chain's state (stage.h).
  resilience::RequestView request;     // what the stages read
  TicketBook tickets;                  // what they hold until the exchange ends
  uint8_t cursor = 0;                  // the next stage to run
  Reason would_reject = Reason::none;  // the first shadow-mode refusal
  StageId would_reject_stage = StageId::count_;

  // -- The request.
  Ref<ReactorGeneration> gen;  // pinned once its head is complete (on_head re-pins)
  http::RequestFacts facts;
  const Upstream* up = nullptr;  // its pool, once routed (part of gen)
  std::chrono::steady_clock::time_point started{};
  std::string_view request_id;  // X-Request-Id as received, or request_id_buf
  char request_id_buf[32] = {};
  bool head_request = false;    // HEAD: the response has no body
  bool request_parsed = false;  // the request parser saw the end of the message
  uint64_t body_bytes = 0;      // request body bytes forwarded
  uint64_t bytes_in = 0;        // bytes read from the client for this request
  uint64_t bytes_out = 0;       // bytes written to the client for this request

  // -- The pool slot, held from admission to the end of the exchange (tunnels included).
  Permit permit;

  // -- How the exchange ended, set where it is decided (core/outcome.h).
  Outcome outcome;

  // -- Its tries at backends.
  std::array<Attempt, 2> attempts;

  Exchange() = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Records how the exchange ends, keeping whether response bytes (a forwarded 1xx) already
  // reached the client.
  void decide(const Outcome& o) noexcept {
    const bool saw = outcome.client_saw_bytes;
    outcome = o;
    outcome.client_saw_bytes = saw;
  }

  // The attempt carrying the exchange's response (the first; a hedge's winner later).
  Attempt& attempt() noexcept { return attempts[0]; }
  const Attempt& attempt() const noexcept { return attempts[0]; }
  // An attempt that has not started, or nullptr when both are in use.
  Attempt* free_attempt() noexcept {
    for (Attempt& a : attempts) {
      if (!a.started()) return &a;
    }
    return nullptr;
  }

  // A new request, read on `generation`, begun at `now` with `bytes_in` of it already read.
  void begin(Ref<ReactorGeneration> generation, std::chrono::steady_clock::time_point now,
             uint64_t already_read) noexcept {
    gen = std::move(generation);
    facts = {};
    up = nullptr;
    started = now;
    request_id = {};
    head_request = request_parsed = false;
    body_bytes = bytes_out = 0;
    bytes_in = already_read;
    outcome = Outcome{};
  }

  // Settles what the exchange holds, in reverse order of taking (the pool slot after every
  // backend's in-flight count, then the stages' tickets), and unpins its generation. The
  // attempts must be ended before (their backend connections are the client's business).
  // Later calls do nothing but reset.
  void end() noexcept {
    permit.release();  // the pool slot, after the backend's (sum of backends <= pool)
    tickets.settle(outcome);
    request = {};
    cursor = 0;
    would_reject = Reason::none;
    would_reject_stage = StageId::count_;
    up = nullptr;
    gen = Ref<ReactorGeneration>();  // the request is over; its generation may retire
  }
};

}  // namespace floodgate::proxy
