// The process log's lines about circuit breaker transitions (issue 35: an operator must see a
// circuit open, and why, without scraping metrics). One line per transition, naming the
// upstream of the attempt or selection that made it, the backend, the verdict that caused it
// (a transport failure's reason code, or a response status) and the window's counts:
//
//   upstream "app" backend 10.0.0.7:9000: circuit closed -> open: 6 of 10 requests failed in
//     the last 10s (60%, failure_rate_percent = 50), 2 in a row; latest: upstream_timeout;
//     half-open in 30s
//
// docs/operations.md lists every form. Openings are at `warn`, the rest at `info`.
//
// Rate-limited: at most one line per second per backend and transition, whichever reactor makes
// it (Backend::circuit_log), the line that gets through saying how many it stands for. With
// `open` of a second or more no transition is ever suppressed: the same transition of one
// circuit cannot recur within `open`.
//
// Thread-safety: the calling reactor's thread, for a transition that thread's record() or
// try_pass() made (one caller per transition). Never blocks: the process log is asynchronous
// (app.cpp: a bounded queue that drops its oldest line when full); the line is formatted on this
// thread, on the stack, as Attempt::log_failure's are; a line that cannot be formatted (out of
// memory) is dropped, never thrown.
#pragma once

#include "floodgate/core/clock.h"
#include "floodgate/core/reason.h"
#include "floodgate/proxy/snapshot.h"
#include "floodgate/resilience/circuit_breaker.h"

namespace floodgate::proxy {

// What the verdict that made a transition was: a transport failure's reason (one that
// backend_failure() counts), else the response head's status.
struct VerdictCause {
  Reason reason = Reason::none;
  int status = 0;
};

// `t` was made on `backend`'s breaker by a verdict of an attempt of `up`; nothing when `t` is
// empty (no transition).
void log_circuit_transition(const Upstream& up, Backend& backend,
                            const resilience::CircuitTransition& t, VerdictCause cause,
                            Clock::time_point now) noexcept;

// A pass that try_pass() gave for `backend` half-opened its circuit (CircuitPass::half_opened()).
void log_circuit_half_open(const Upstream& up, Backend& backend, Clock::time_point now) noexcept;

}  // namespace floodgate::proxy
