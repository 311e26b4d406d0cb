// Running a routed exchange through its route's chain, and the client connection's side of
// the one waiting mechanism (Wait, exchange.h): a stage that answers wait (pool admission's
// queue) has the exchange parked here, with nothing else pending but a read that only
// watches for the client going away (what the client sends meanwhile stays in in_). The
// wait ends exactly once:
//   - its completion arrives through the poller's inbox: on_wait_over() gives it to the
//     stage's resume() and the chain goes on after the stage (or the stage's answer goes out);
//   - the deadline (the client timer, unused otherwise while waiting), the client going away
//     (close()) or the generation retiring (on_generation_retired()): leave_wait() asks the
//     stage to cancel. When the cancel loses to a completion already on its way, the
//     connection remembers why it gave up and the completion is given back (the stage drops
//     the grant, handing it to the next waiter) before the connection answers with that
//     reason. A grant is never leaked and never used by an exchange that gave up on it.
#include <boost/asio/error.hpp>
#include <utility>

#include "client_conn.h"
#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

using boost::system::error_code;

void ClientConn::run_chain(const Chain& chain) {
  const Decision d = chain.run(ex_, reactor_.metrics());
  switch (d.verdict) {
    case Decision::Verdict::go:
      phase_ = Phase::forwarding;
      return select_backend();
    case Decision::Verdict::stop:
      return respond(d);
    case Decision::Verdict::wait:
      return park(d);
  }
}

void ClientConn::park(const Decision& d) {
  phase_ = Phase::queued;
  parked_ = Ref<ClientConn>(this);
  Wait& w = ex_.wait;
  w.gave_up = Reason::none;
  w.abandoned = false;
  w.since = ex_.now();
  w.at_deadline = d.reason;
  if (d.deadline.count() > 0) arm_client_timer(d.deadline);
  watch_client_while_queued();
}

// Keeps a read pending so that a client that goes away is noticed (and its wait cancelled)
// at once. Bytes it sends meanwhile (the body, a pipelined request) are kept for later; once
// in_ is full nothing more is read until the exchange stops waiting.
void ClientConn::watch_client_while_queued() {
  if (client_.reading() || closed_) return;
  const std::size_t room = reactor_.request_data() - in_len_;
  if (room == 0) return;
  client_.read_some(in_data() + in_len_, room,
                    [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                      ClientConn& c = ClientConn::from(o);
                      c.on_client_read(ec, n, false);
                    });
}

void ClientConn::leave_wait(Reason reason, CancelReason why) {
  Wait& w = ex_.wait;
  if (!w.stage->cancel(ex_, why)) {
    w.gave_up = reason;  // a completion is on its way; on_wait_over() answers
    return;
  }
  w.stage = nullptr;
  const Ref<ClientConn> keep = std::move(parked_);
  client_timer_.cancel();
  client_.cancel_read();
  respond(reason);
}

// The exchange's reactor, from the poller's inbox.
void ClientConn::on_wait_over() {
  const Ref<ClientConn> keep = std::move(parked_);
  Wait& w = ex_.wait;
  const Stage& stage = *std::exchange(w.stage, nullptr);
  Ticket& ticket = ex_.tickets.next(stage);
  const Decision d = stage.resume(ex_, ticket, w.result);
  ex_.tickets.commit();
  if (closed_) return;  // the client went away: the stage gave back what came
  if (reactor_.cutting()) {
    // A slot freed by the shutdown's cut elsewhere: this request is cut with the rest.
    reactor_.count_cut();
    return cut(OutcomeSource::floodgate);
  }
  client_timer_.cancel();
  client_.cancel_read();
  if (const Reason gave_up = std::exchange(w.gave_up, Reason::none); gave_up != Reason::none) {
    return respond(gave_up, d.answer, d.status);
  }
  if (Chain::enforced(ex_, stage, d, reactor_.metrics())) return respond(d);
  run_chain(*w.chain);  // on, after the stage that waited
}

}  // namespace floodgate::proxy
