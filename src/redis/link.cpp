// The Redis link (include/floodgate/redis/link.h).
//
// The commands written and not yet answered are in a PendingRing (pending_ring.h, which also
// says why one timer covers all their deadlines). The same timer bounds a connect and times the
// breaker's backoff: the link's state says which it is.
//
// Re-entrancy. Done may call eval(), cancel(), close() or start() on this link. So every path
// that completes calls first does all of its own work (state, timer, connection) and completes
// last; a drain completes only the entries that were there when it began (by sequence number),
// since a Done may have drained them already or pushed new ones; and the read loop stops when the
// connection it parses for is no longer the link's. Nothing completes inside eval() or cancel().
//
// The process log. Failures and recoveries are logged where they happen (failed_connect, lost,
// ready), before any call completes; a call answered never reaches them, so the path of a
// healthy link neither formats nor allocates for the log.
#include "floodgate/redis/link.h"

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include "floodgate/core/ref.h"
#include "floodgate/net/poller.h"
#include "floodgate/net/stream.h"
#include "pending_ring.h"

namespace floodgate::redis {

namespace {

using namespace std::chrono_literals;
using ErrorCode = boost::system::error_code;
using TimePoint = std::chrono::steady_clock::time_point;

constexpr auto kFirstBackoff = 100ms;
constexpr auto kMaxBackoff = 5s;
// The replies a link expects: +OK, a 40-digit sha, an array of a few integers, an error line.
constexpr ReplyLimits kLimits{.max_bulk_bytes = 256, .max_line_bytes = 1024};
// Input room beyond the largest reply, so that one read takes many small pipelined replies.
constexpr std::size_t kReadBatch = std::size_t{16} * 1024;
constexpr std::size_t kOutBytes = std::size_t{64} * 1024;  // each of the two output buffers
// Ring entries beyond max_pending, for the handshake (AUTH, SELECT, SCRIPT LOAD) and reloads.
constexpr uint32_t kInternalEntries = 8;
// What a connect pushes. Calls, reloads and resends leave this much room, so that a reconnect
// can push its handshake behind the entries it has yet to drain.
constexpr uint32_t kHandshakeEntries = 3;

std::chrono::milliseconds backoff_after(uint32_t failures) noexcept {
  std::chrono::milliseconds b = kFirstBackoff;
  for (uint32_t i = 1; i < failures && b < kMaxBackoff; ++i) b *= 2;
  return std::min<std::chrono::milliseconds>(b, kMaxBackoff);
}

void sha1_hex(std::string_view text, char (&out)[40]) noexcept {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md.data(), &len, EVP_sha1(), nullptr) != 1 ||
      len != 20) {
    std::fill(std::begin(out), std::end(out), '0');  // SCRIPT LOAD's answer then fails the check
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < 20; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
}

// "10.0.0.5:6379", "[2001:db8::5]:6379", with " db 2" when the link SELECTs a db.
std::string server_name(const LinkParams& p) {
  const auto& a = p.server.address();
  std::string name = a.is_v6() ? '[' + a.to_string() + ']' : a.to_string();
  name += ':' + std::to_string(p.server.port());
  if (p.db != 0) name += " db " + std::to_string(p.db);
  return name;
}

}  // namespace

class LinkImpl;

// One connection attempt's socket. Reference counted: the poller holds it while it is queued on
// the ready list and a completion holds it while it runs, so the link may drop it at any time.
class LinkConn final : public RefCounted<LinkConn>, public net::Stream, public net::StreamOwner {
 public:
  LinkConn(net::Poller& poller, LinkImpl* impl) : Stream(poller), impl(impl) {}
  ~LinkConn() = default;
  LinkConn(const LinkConn&) = delete;
  LinkConn& operator=(const LinkConn&) = delete;
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  LinkImpl* impl;  // nullptr once the link dropped it: its completions go nowhere

 protected:
  net::StreamOwner* stream_owner() override { return impl != nullptr ? this : nullptr; }
};

class LinkImpl {
 public:
  using Submit = Link::Submit;
  LinkImpl(Link& link, net::Poller& poller, TimerWheel& wheel, const Clock& clock,
           std::shared_ptr<InflightLimit> inflight, LinkStats& stats)
      : link_(link),
        p_(link.params_),
        poller_(poller),
        wheel_(wheel),
        clock_(clock),
        inflight_(std::move(inflight)),
        stats_(stats),
        ring_(link.params_.max_pending + kInternalEntries),
        in_(kLimits.max_reply_bytes() + kReadBatch),
        timer_([](void* self) { static_cast<LinkImpl*>(self)->on_timer(); }, this),
        name_(server_name(link.params_)) {
    for (auto& b : out_) b.resize(kOutBytes);
  }
  ~LinkImpl() {
    set_state(LinkState::idle);
    timer_.cancel();
    drop_conn();
    drain(ring_.last_seq(), nullptr);  // no Done: the owners of the calls are going too
  }
  LinkImpl(const LinkImpl&) = delete;
  LinkImpl& operator=(const LinkImpl&) = delete;

  void start() {
    if (link_.state_ != LinkState::idle) return;
    failures_ = 0;
    probing_ = false;
    connect();
  }

  Submit eval(Call& call) noexcept {
    const LinkState s = link_.state_;
    if (s != LinkState::ready && (s != LinkState::connecting || probing_)) {
      return refuse(Submit::unavailable);
    }
    if (call.link_ != nullptr || calls_ >= p_.max_pending ||
        ring_.size() + 1 + kHandshakeEntries > ring_.capacity()) {
      return refuse(Submit::busy);
    }
    if (inflight_ && inflight_->current.fetch_add(1, std::memory_order_relaxed) >= inflight_->max) {
      inflight_->current.fetch_sub(1, std::memory_order_relaxed);
      return refuse(Submit::busy);
    }
    if (!append(call)) {
      if (inflight_) inflight_->current.fetch_sub(1, std::memory_order_relaxed);
      return refuse(Submit::busy);
    }
    const TimePoint now = clock_.now();
    // Behind a connect the deadline is set again when the link becomes ready (ready()).
    Entry& e = ring_.push(Kind::call, now + p_.command_timeout);
    e.call = &call;
    call.link_ = &link_;
    call.slot_ = ring_.slot_of(e);
    call.sent_ = now;
    ++calls_;
    stats_.inflight.fetch_add(1, std::memory_order_relaxed);
    if (s == LinkState::ready && !timer_.armed()) arm_deadline();
    flush();
    return Submit::accepted;
  }

  void cancel(Call& call) noexcept {
    if (call.link_ != &link_) return;
    ring_.at(call.slot_).call = nullptr;  // the entry stays until its reply comes, then drops it
    call.link_ = nullptr;
  }

  void close() noexcept {
    const uint64_t last = ring_.last_seq();
    set_state(LinkState::idle);
    timer_.cancel();
    drop_conn();
    drain(last, CallStatus::unavailable);
  }

  bool busy() const noexcept { return calls_ != 0; }

 private:
  using Kind = PendingRing::Kind;
  using Entry = PendingRing::Entry;

  // --- output ---

  CommandWriter writer() noexcept {
    return CommandWriter(
        std::span<char>(out_[fill_].data() + out_len_[fill_], kOutBytes - out_len_[fill_]));
  }
  bool append_args(std::initializer_list<std::string_view> args) noexcept {
    CommandWriter w = writer();
    if (w.write(args) == 0) return false;
    out_len_[fill_] += w.size();
    return true;
  }
  bool append(Call& call) noexcept {
    CommandWriter w = writer();
    if (!call.write_(call, w, link_.script_sha()) || w.size() == 0) return false;
    out_len_[fill_] += w.size();
    return true;
  }
  // Writes what has gathered, unless a write is under way (its completion calls this again).
  void flush() noexcept {
    if (writing_ || !connected_ || out_len_[fill_] == 0) return;
    const std::size_t n = std::exchange(out_len_[fill_], 0);
    const char* data = out_[fill_].data();
    fill_ ^= 1U;
    writing_ = true;
    conn_->write(data, n, [](net::StreamOwner& o, const ErrorCode& ec, std::size_t) {
      if (LinkImpl* impl = static_cast<LinkConn&>(o).impl) impl->on_written(ec);
    });
  }
  void read_more() noexcept {
    if (reading_ || !connected_) return;
    reading_ = true;
    conn_->read_some(in_.data() + in_len_, in_.size() - in_len_,
                     [](net::StreamOwner& o, const ErrorCode& ec, std::size_t n) {
                       if (LinkImpl* impl = static_cast<LinkConn&>(o).impl) impl->on_read(ec, n);
                     });
  }

  // --- completions of the connection ---

  void on_connected(const ErrorCode& ec) {
    if (ec) return failed_connect(CallStatus::unavailable, "connect failed", ec.message());
    connected_ = true;
    read_more();
    flush();
  }
  void on_written(const ErrorCode& ec) {
    writing_ = false;
    if (ec) return lost(CallStatus::unavailable, "writing to it failed", ec.message());
    flush();
  }
  void on_read(const ErrorCode& ec, std::size_t n) {
    reading_ = false;
    if (ec) return lost(CallStatus::unavailable, "the connection failed", ec.message());
    if (n == 0) return lost(CallStatus::unavailable, "Redis closed the connection");
    in_len_ += n;
    const LinkConn* const conn = conn_.get();  // a Done may end this connection, or replace it
    const ReplyParser parser(kLimits);
    std::size_t used = 0;
    while (used < in_len_) {
      Reply reply;
      const Parsed p = parser.parse({in_.data() + used, in_len_ - used}, reply);
      if (p.status == ParseStatus::need_more) break;
      if (p.status == ParseStatus::protocol_error) {
        return lost(CallStatus::error, "a reply broke the Redis protocol (RESP)");
      }
      used += p.consumed;
      on_reply(reply);
      if (conn_.get() != conn) return;  // the connection is gone: its bytes with it
    }
    // Whole replies are gone; a partial one (under max_reply_bytes) moves to the front.
    std::memmove(in_.data(), in_.data() + used, in_len_ - used);
    in_len_ -= used;
    read_more();
  }

  // --- connecting and the breaker ---

  // Drops any connection, pushes the handshake (behind entries a caller has yet to drain) and
  // connects. The calls eval() accepts meanwhile are written behind the handshake.
  void connect() {
    drop_conn();
    set_state(LinkState::connecting);
    stats_.connects.add();
    conn_ = Ref<LinkConn>(new LinkConn(poller_, this));
    const TimePoint deadline = clock_.now() + p_.connect_timeout;
    bool ok = true;
    if (!p_.password.empty()) {
      ok = p_.username.empty() ? append_args({"AUTH", p_.password})
                               : append_args({"AUTH", p_.username, p_.password});
      ring_.push(Kind::auth, deadline);
    }
    if (p_.db != 0) {
      const IntegerArg db(p_.db);
      ok = ok && append_args({"SELECT", db.view()});
      ring_.push(Kind::select, deadline);
    }
    ok = ok && append_args({"SCRIPT", "LOAD", p_.script});
    ring_.push(Kind::load, deadline);
    load_seq_ = ring_.last_seq();
    stats_.script_loads.add();
    wheel_.schedule(timer_, deadline);
    if (!ok) {  // a script larger than the buffer
      return failed_connect(CallStatus::error, "the handshake does not fit the output buffer");
    }
    conn_->connect(p_.server, [](net::StreamOwner& o, const ErrorCode& ec, std::size_t) {
      if (LinkImpl* impl = static_cast<LinkConn&>(o).impl) impl->on_connected(ec);
    });
  }

  // The connect or the handshake failed: the breaker opens, then what waited fails. `what`
  // and `why` say what failed for the log.
  void failed_connect(CallStatus status, std::string_view what, std::string_view why = {}) {
    const uint64_t last = ring_.last_seq();
    stats_.connect_failures.add();
    ++failures_;
    drop_conn();
    set_state(LinkState::backoff);
    const std::chrono::milliseconds backoff = backoff_after(failures_);
    wheel_.schedule(timer_, clock_.now() + backoff);
    char next[48];
    *fmt::format_to_n(next, sizeof next - 1, "next connect in {} ms", backoff.count()).out = '\0';
    log_failure(what, why, next);
    drain(last, status);
  }

  // The connection went while the link was ready (or was being made: then the connect failed).
  // Redis closed it or reset it (unavailable): reconnect at once and queue calls behind it. A
  // stall (timeout) or a broken reply (error): reconnect at once as a probe, refusing calls.
  void lost(CallStatus status, std::string_view what, std::string_view why = {}) {
    if (link_.state_ != LinkState::ready) return failed_connect(status, what, why);
    const uint64_t last = ring_.last_seq();
    stats_.disconnects.add();
    probing_ = status != CallStatus::unavailable;
    log_failure(what, why, "reconnecting now");
    connect();
    drain(last, status);
  }

  void on_timer() {
    switch (link_.state_) {
      case LinkState::connecting: {  // connect_timeout passed before the link was ready
        char why[64];
        *fmt::format_to_n(why, sizeof why - 1, "connect_timeout, {} ms", p_.connect_timeout.count())
             .out = '\0';
        return failed_connect(
            CallStatus::unavailable,
            connected_ ? "the handshake was not answered in time" : "connect timed out", why);
      }
      case LinkState::backoff:  // the backoff has passed: one connect, the probe
        probing_ = true;
        return connect();
      case LinkState::ready:
        if (ring_.size() != 0 && ring_.earliest_deadline() <= clock_.now()) {
          char why[96];
          *fmt::format_to_n(why, sizeof why - 1,
                            "command_timeout, {} ms; {} call(s) in flight failed",
                            p_.command_timeout.count(), calls_)
               .out = '\0';
          return lost(CallStatus::timeout, "stalled: no reply in time", why);
        }
        return arm_deadline();
      case LinkState::idle:
        return;
    }
  }

  void arm_deadline() noexcept {
    if (ring_.size() == 0) return timer_.cancel();
    wheel_.schedule(timer_, ring_.earliest_deadline());
  }

  void ready() {
    set_state(LinkState::ready);
    failures_ = 0;
    probing_ = false;
    if (down_failures_ != 0) {
      const std::chrono::duration<double> down = clock_.now() - down_since_;
      spdlog::info("Redis at {} is reachable again after {} failure(s) over {:.1f} s", name_,
                   down_failures_, down.count());
      down_failures_ = 0;
    }
    // What is left are the calls queued behind the connect, sent with the handshake.
    ring_.restamp(clock_.now() + p_.command_timeout);
    arm_deadline();
  }

  // --- replies ---

  // One reply, for the ring's head.
  void on_reply(const Reply& reply) {
    if (ring_.size() == 0) return lost(CallStatus::error, "Redis sent a reply nobody asked for");
    const Entry e = ring_.pop();
    const bool error = reply.type() == ReplyType::error;
    switch (e.kind) {
      case Kind::auth:  // Redis's error text never holds the password
        if (error) failed_connect(CallStatus::error, "AUTH failed", reply.value.text);
        return;
      case Kind::select:
        if (error) failed_connect(CallStatus::error, "SELECT failed", reply.value.text);
        return;
      case Kind::load:
        if (error) return failed_connect(CallStatus::error, "SCRIPT LOAD failed", reply.value.text);
        if (reply.type() != ReplyType::bulk_string || reply.value.text != link_.script_sha()) {
          return failed_connect(CallStatus::error, "SCRIPT LOAD answered a wrong SHA-1");
        }
        return ready();
      case Kind::reload:  // an error shows as the resent call's second NOSCRIPT
        return;
      case Kind::call:
        break;
    }
    arm_deadline();                                // the head moved on
    if (e.call == nullptr) return release_slot();  // cancelled: nobody waits for this reply
    Call& call = *e.call;
    if (error && redis::error_code(reply.value.text) == "NOSCRIPT") {
      stats_.noscript.add();
      if (!e.resent && resend(e)) return;
      return complete(call, CallStatus::error, nullptr);
    }
    stats_.latency.observe(clock_.now() - call.sent_);
    if (error) stats_.errors.add();
    complete(call, CallStatus::reply, &reply);
  }

  // NOSCRIPT: SCRIPT LOAD again (once for all the calls sent before it), then the call again at
  // the back with its deadline. False when there is no room for them (the call then fails).
  bool resend(const Entry& e) noexcept {
    if (ring_.size() + 2 + kHandshakeEntries > ring_.capacity()) return false;
    if (e.seq > load_seq_) {  // sent after the last SCRIPT LOAD: the script went since
      if (!append_args({"SCRIPT", "LOAD", p_.script})) return false;
      ring_.push(Kind::reload, e.deadline, true);
      load_seq_ = ring_.last_seq();
      stats_.script_loads.add();
    }
    if (!append(*e.call)) return false;  // a reload just written is answered and ignored
    Entry& again = ring_.push(Kind::call, e.deadline, true);
    again.call = e.call;
    again.resent = true;
    e.call->slot_ = ring_.slot_of(again);
    arm_deadline();
    flush();
    return true;
  }

  // --- completing calls ---

  // A call's entry is gone: its share of the in-flight counts goes.
  void release_slot() noexcept {
    --calls_;
    stats_.inflight.fetch_sub(1, std::memory_order_relaxed);
    if (inflight_) inflight_->current.fetch_sub(1, std::memory_order_relaxed);
  }
  // Last thing a path does: Done may do anything to the link.
  void complete(Call& call, CallStatus status, const Reply* reply) noexcept {
    call.link_ = nullptr;
    release_slot();
    if (status == CallStatus::timeout) stats_.timeouts.add();
    if (status == CallStatus::error) stats_.errors.add();
    call.done_(call, status, reply);
  }
  // Pops the entries up to sequence number `last` (those there when the caller began), each
  // call completing with `*status` (none: dropped without Done).
  void drain(uint64_t last, const CallStatus* status) noexcept {
    while (ring_.size() != 0 && ring_.head().seq <= last) {
      const Entry e = ring_.pop();
      if (e.kind != Kind::call) continue;
      if (e.call == nullptr) {
        release_slot();
      } else if (status == nullptr) {
        e.call->link_ = nullptr;
        release_slot();
      } else {
        complete(*e.call, *status, nullptr);
      }
    }
  }
  void drain(uint64_t last, CallStatus status) noexcept { drain(last, &status); }

  void set_state(LinkState next) noexcept {
    const bool was = link_.state_ == LinkState::ready;
    const bool is = next == LinkState::ready;
    link_.state_ = next;
    if (was != is) stats_.ready.store(is ? 1 : 0, std::memory_order_relaxed);
  }

  void drop_conn() noexcept {
    if (!conn_) return;
    conn_->impl = nullptr;
    conn_->close();
    conn_ = Ref<LinkConn>();
    connected_ = reading_ = writing_ = false;
    out_len_[0] = out_len_[1] = 0;
    in_len_ = 0;
  }

  // A failure for the process log: counted towards the recovery line, and written unless a line
  // for this Redis was written less than a second ago (then the next one counts it). `then` is
  // what the link does next.
  void log_failure(std::string_view what, std::string_view why, std::string_view then) {
    const TimePoint now = clock_.now();
    if (down_failures_++ == 0) down_since_ = now;
    const uint64_t count = failure_log_->occurred(now);
    if (count == 0) return;
    char more[64] = "";
    if (count > 1) {
      *fmt::format_to_n(more, sizeof more - 1, "; {} more like it since the last line", count - 1)
           .out = '\0';
    }
    spdlog::warn(
        "Redis at {}: {}{}{}{}; quota decisions follow backend_failure_policy until it is back; "
        "{}{}",
        name_, what, why.empty() ? "" : " (", why, why.empty() ? "" : ")", then, more);
  }

  Submit refuse(Submit why) noexcept {
    stats_.refused.add();
    return why;
  }

  Link& link_;
  const LinkParams& p_;
  net::Poller& poller_;
  TimerWheel& wheel_;
  const Clock& clock_;
  std::shared_ptr<InflightLimit> inflight_;
  LinkStats& stats_;
  Ref<LinkConn> conn_;
  bool connected_ = false;  // conn_'s connect completed: writes and reads may start
  bool reading_ = false;
  bool writing_ = false;
  bool probing_ = false;   // connecting after a failure: calls are refused until ready
  uint32_t failures_ = 0;  // connects failed since the link was last ready (the backoff's)
  PendingRing ring_;
  uint32_t calls_ = 0;     // entries that are calls (cancelled ones included)
  uint64_t load_seq_ = 0;  // the last SCRIPT LOAD's
  std::array<std::vector<char>, 2> out_;
  std::array<std::size_t, 2> out_len_{};
  unsigned fill_ = 0;  // the output buffer commands are appended to (the other may be writing)
  std::vector<char> in_;
  std::size_t in_len_ = 0;
  TimerWheel::Entry timer_;
  std::string name_;  // the server, for the log (server_name)
  std::shared_ptr<SharedLogThrottle> failure_log_ =
      p_.failure_log ? p_.failure_log : std::make_shared<SharedLogThrottle>();
  uint32_t down_failures_ = 0;  // failures logged or counted since the link was last ready
  TimePoint down_since_{};      // the first of them
};

Call::~Call() {
  if (link_ != nullptr) link_->cancel(*this);
}

Link::Link(net::Poller& poller, TimerWheel& wheel, const Clock& clock, LinkParams params,
           std::shared_ptr<InflightLimit> inflight, LinkStats& stats)
    : params_(std::move(params)) {
  if (params_.max_pending == 0) params_.max_pending = 1;
  sha1_hex(params_.script, sha_);
  impl_ = std::make_unique<LinkImpl>(*this, poller, wheel, clock, std::move(inflight), stats);
}

Link::~Link() = default;

void Link::start() {
  impl_->start();
}
Link::Submit Link::eval(Call& call) noexcept {
  return impl_->eval(call);
}
void Link::cancel(Call& call) noexcept {
  impl_->cancel(call);
}
void Link::close() noexcept {
  impl_->close();
}
bool Link::busy() const noexcept {
  return impl_->busy();
}

}  // namespace floodgate::redis
