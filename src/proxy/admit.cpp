// Pool admission, the innermost stage before backend selection: a routed request takes a slot
// of its pool (upstream/admission.h), waits for one in the pool's FIFO, or is turned away with
// 503 and the pool's Retry-After.
//
// A parked request is an AdmissionWaiter embedded in the client connection, with nothing else
// pending but a read that only watches for the client going away (what the client sends meanwhile
// stays in in_). It leaves the queue for exactly one of:
//   - a grant or a rejection from the admission: the completion runs on whichever thread
//     decided it (another reactor releasing a slot, or the main thread applying a reload's
//     limits) and only hands the connection to its own reactor through the poller's inbox;
//     on_admission() then runs here;
//   - pending_timeout (the client timer, unused otherwise while queued), the client going away
//     (close()), or its generation retiring (on_generation_retired()): the connection cancels
//     the waiter. When the cancel loses to a completion already on its way, the connection
//     remembers why it gave up and on_admission() drops the grant (handing it to the next
//     waiter) and answers with that reason. A grant is never leaked and never used by a
//     request that gave up on it.
#include <boost/asio/error.hpp>

#include "client_conn.h"
#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

using boost::system::error_code;

void ClientConn::admit() {
  const Upstream& up = *ex_.up;
  Admission::Result r = up.pool->admission.admit(waiter_);
  switch (r.status) {
    case AdmitStatus::admitted:
      ex_.permit = std::move(r.permit);
      reactor_.metrics().pool_admitted(up.id);
      phase_ = Phase::forwarding;
      return select_backend();
    case AdmitStatus::queued:
      return park();
    case AdmitStatus::rejected:
      return reject(Reason::proxy_overloaded);
  }
}

void ClientConn::park() {
  phase_ = Phase::queued;
  parked_ = Ref<ClientConn>(this);
  leave_reason_ = Reason::none;
  queued_at_ = std::chrono::steady_clock::now();
  const std::chrono::milliseconds timeout = ex_.up->policy.pending_timeout;
  if (timeout.count() > 0) arm_client_timer(timeout);
  watch_client_while_queued();
}

// Keeps a read pending so that a client that goes away is noticed (and its waiter cancelled)
// at once. Bytes it sends meanwhile (the body, a pipelined request) are kept for later; once
// in_ is full nothing more is read until the request leaves the queue.
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

void ClientConn::leave_queue(Reason reason, CancelReason cancel) {
  if (!waiter_.cancel(cancel)) {
    leave_reason_ = reason;  // a completion is on its way; on_admission() answers
    return;
  }
  const Ref<ClientConn> keep = std::move(parked_);
  client_timer_.cancel();
  client_.cancel_read();
  count_queue_wait();
  reject(reason);
}

void ClientConn::on_admission(AdmitStatus status) {
  Permit permit = waiter_.take_permit();  // empty unless granted
  if (closed_) return;                    // the client went away: the grant goes on
  client_timer_.cancel();
  client_.cancel_read();
  count_queue_wait();
  if (const Reason gave_up = std::exchange(leave_reason_, Reason::none); gave_up != Reason::none) {
    permit.release();
    return reject(gave_up);
  }
  if (status != AdmitStatus::admitted) return reject(Reason::proxy_overloaded);  // queue shrank
  ex_.permit = std::move(permit);
  reactor_.metrics().pool_admitted(ex_.up->id);
  phase_ = Phase::forwarding;
  select_backend();
}

void ClientConn::count_queue_wait() {
  reactor_.metrics().pool_queue_wait(ex_.up->id, std::chrono::steady_clock::now() - queued_at_);
}

void ClientConn::reject(Reason reason) {
  ex_.permit.release();  // a turned-away request holds no slot while its answer is written
  reactor_.metrics().pool_rejected(ex_.up->id, reason);
  respond(reason);
}

// Any thread: only hands the connection over. After send() the connection may be gone.
void ClientConn::on_admission_complete(void* context, AdmitStatus status) noexcept {
  auto& handoff = *static_cast<AdmissionHandoff*>(context);
  handoff.status = status;
  handoff.poller.send(handoff);
}

// The connection's reactor, from the poller's inbox.
void ClientConn::on_admission_handoff(net::RemoteTask& task) {
  auto& handoff = static_cast<AdmissionHandoff&>(task);
  ClientConn& c = handoff.conn;
  const Ref<ClientConn> keep = std::move(c.parked_);
  c.on_admission(handoff.status);
}

}  // namespace floodgate::proxy
