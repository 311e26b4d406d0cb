// The stage chain: the checks a request passes on its way to a backend, in order.
//
// A stage looks at an exchange and answers go, stop (with a reason and a prebuilt answer) or
// wait (it parked the exchange and resumes the chain exactly once later, see Chain::run).
// A chain is built when its generation is built and holds only the stages that are
// configured, so a feature that is not configured costs nothing on the request path.
//
// A stage that admits a request may hold something for it until the exchange ends (a slot of
// the in-flight cap, the adaptive ceiling, the route cap or the global cap; the adaptive
// ceiling's ticket also gives the exchange's outcome to its controller as a sample): it fills
// the Ticket it is given. The exchange's TicketBook settles every held ticket exactly once when
// the exchange ends, in reverse order, with the exchange's Outcome; a destroyed exchange
// settles what it still holds.
//
// Shadow mode is the chain's, not each stage's: a stage in shadow mode that says stop is
// counted (floodgate_shadow_rejections_total{stage,reason}, in the reactor's metrics shard), the
// exchange remembers the first such reason for its access log record (would_reject), and the chain
// goes on.
//
// Thread-safety: a Chain and its stages are immutable once built and shared by every reactor
// (a stage's mutable state, such as the in-flight cap's counter, is its own, thread-safe
// business). An exchange and its tickets belong to one reactor.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/core/outcome.h"
#include "floodgate/core/reason.h"
#include "floodgate/core/stage_id.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/request_view.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

class Stage;
struct Exchange;

// A generated answer built once (with its Retry-After or Allow header), in both connection
// variants.
struct PrebuiltAnswer {
  std::string keep_alive;
  std::string close;
  std::string_view bytes(bool close_connection) const {
    return close_connection ? close : keep_alive;
  }
};

// floodgate's generated answer for `reason` with `retry_after` seconds (0 = none), `status`
// instead of the reason's own (0 = its own) and `extra` header lines ("Name: value\r\n").
PrebuiltAnswer prebuild_answer(Reason reason, uint32_t retry_after, int status = 0,
                               std::string_view extra = {});

struct Decision {
  enum class Verdict : uint8_t { go, stop, wait };
  Verdict verdict = Verdict::go;
  // stop: the answer's reason. wait: the reason the exchange is answered with when the wait
  // reaches its deadline.
  Reason reason = Reason::none;
  int status = 0;                          // 0 = info(reason).status
  const PrebuiltAnswer* answer = nullptr;  // nullptr = the plain generated response for reason
  std::chrono::milliseconds deadline{0};   // wait: how long at most (0 = no deadline)
  // stop without `answer`: a Retry-After known only now (0 = none) and header lines
  // ("Name: value\r\n", the stage's, alive as long as its generation) written into the answer.
  uint32_t retry_after = 0;
  std::string_view extra{};
  // stop: enforced whatever the stage's mode. A security rule (early data's replay protection)
  // is not traffic policy, so shadow mode does not lift it.
  bool always = false;

  static constexpr Decision go() noexcept { return {}; }
  static constexpr Decision wait(std::chrono::milliseconds deadline = {},
                                 Reason at_deadline = Reason::none) noexcept {
    return {Verdict::wait, at_deadline, 0, nullptr, deadline};
  }
  static constexpr Decision stop(Reason reason, const PrebuiltAnswer* answer = nullptr,
                                 int status = 0) noexcept {
    return {Verdict::stop, reason, status, answer, {}};
  }
  // A stop whose answer is built now: `reason` with Retry-After `retry_after` seconds and the
  // header lines `extra`.
  static constexpr Decision stop_built(Reason reason, uint32_t retry_after,
                                       std::string_view extra) noexcept {
    return {Verdict::stop, reason, 0, nullptr, {}, retry_after, extra};
  }
  // A stop enforced in shadow mode too (`always`).
  static constexpr Decision stop_always(Reason reason, const PrebuiltAnswer* answer) noexcept {
    return {Verdict::stop, reason, 0, answer, {}, 0, {}, true};
  }
};

// What one stage holds for an admitted exchange until it ends.
struct Ticket {
  const Stage* stage = nullptr;
  Permit permit;       // a slot to give back (the in-flight cap)
  uint64_t value = 0;  // the stage's own datum
  bool held = false;   // set by a stage that holds something without a permit
  bool holds() const noexcept { return held || static_cast<bool>(permit); }
};

// The tickets of one exchange, settled exactly once, in reverse order.
class TicketBook {
 public:
  // Every chain floodgate builds fits: a route's, the longer, has at most 7 stages (rate
  // limits, quota, brownout, adaptive ceiling, route cap, global cap, pool).
  static constexpr std::size_t kMax = 8;

  TicketBook() = default;
  TicketBook(const TicketBook&) = delete;
  TicketBook& operator=(const TicketBook&) = delete;
  // An exchange torn down without end() (it cannot happen on the request path, which ends
  // every exchange) settles as abandoned by floodgate, never as a backend's answer.
  ~TicketBook() {
    Outcome abandoned;
    abandoned.source = OutcomeSource::floodgate;
    abandoned.kind = OutcomeKind::client_aborted;
    settle(abandoned);
  }

  // The slot the next stage may fill; kept only when it then holds something (commit()). A
  // stage that answers wait and is granted later takes its ticket the same way (next(),
  // fill, commit()) before it resumes the chain. A chain has at most kMax stages (Chain).
  Ticket& next(const Stage& stage) noexcept {
    Ticket& t = tickets_[count_];
    t.stage = &stage;
    return t;
  }
  void commit() noexcept {
    if (tickets_[count_].holds()) {
      ++count_;
    } else {
      tickets_[count_] = Ticket{};
    }
  }
  // Settles every held ticket with `outcome`, last taken first; later calls do nothing.
  void settle(const Outcome& outcome) noexcept;
  std::size_t size() const noexcept { return count_; }

 private:
  std::array<Ticket, kMax + 1> tickets_{};  // + 1: the slot a stage is filling
  std::size_t count_ = 0;
};

class Stage {
 public:
  Stage(StageId id, resilience::Mode mode) noexcept : id_(id), mode_(mode) {}
  virtual ~Stage() = default;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  // Looks at the exchange; fills `ticket` when it admits and holds something. A stage that
  // answers wait has parked the exchange and runs the chain on exactly once later.
  virtual Decision check(Exchange& exchange, Ticket& ticket) const noexcept = 0;
  // For a stage that answers wait (the exchange's Wait, exchange.h, says how waiting works):
  // the exchange gives up waiting, for `why`. True when that ends the wait (no completion
  // will come); false when a completion is already on its way: it still comes to resume(),
  // which then finds Wait::gave_up or Wait::abandoned set and gives back what it brought.
  virtual bool cancel(Exchange& exchange, CancelReason why) const noexcept {
    (void)exchange;
    (void)why;
    return true;
  }
  // The completion of the wait, on the exchange's reactor, with the value Wait::complete()
  // carried: fills `ticket` when it admits and answers go or stop (the chain goes on after this
  // stage on go).
  virtual Decision resume(Exchange& exchange, Ticket& ticket, uint32_t result) const noexcept {
    (void)exchange;
    (void)ticket;
    (void)result;
    return Decision::go();
  }
  // The exchange ended with `outcome`; `ticket` is what check() filled. Called exactly once
  // per held ticket (its permit is released right after).
  virtual void settle(Ticket& ticket, const Outcome& outcome) const noexcept {
    (void)ticket;
    (void)outcome;
  }

  StageId id() const noexcept { return id_; }
  resilience::Mode mode() const noexcept { return mode_; }

 private:
  StageId id_;
  resilience::Mode mode_;
};

class Chain {
 public:
  Chain() = default;
  // Throws std::length_error past TicketBook::kMax stages (each may hold a ticket).
  explicit Chain(std::vector<std::unique_ptr<const Stage>> stages) : stages_(std::move(stages)) {
    if (stages_.size() > TicketBook::kMax) throw std::length_error("stage chain too long");
  }

  // Runs the exchange through the stages from its cursor: the first stop in enforce mode
  // (or a wait) ends the run; go when every stage let it through. A stage that answered wait
  // resumes the exchange by calling run() again: the cursor is already past it.
  // `metrics` (the reactor's shard) counts what shadow-mode stages would have refused.
  Decision run(Exchange& exchange, ReactorMetrics& metrics) const noexcept;
  // Whether `d`, answered by `stage`, stops the exchange: a stop in enforce mode does; a stop
  // in shadow mode is counted and remembered (would_reject) instead.
  static bool enforced(Exchange& exchange, const Stage& stage, const Decision& d,
                       ReactorMetrics& metrics) noexcept;

  std::size_t size() const noexcept { return stages_.size(); }
  bool empty() const noexcept { return stages_.empty(); }
  const Stage& stage(std::size_t i) const { return *stages_[i]; }

 private:
  std::vector<std::unique_ptr<const Stage>> stages_;
};

}  // namespace floodgate::proxy
