#include "floodgate/redis/link.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "floodgate/core/ref.h"
#include "floodgate/net/poller.h"
#include "floodgate/net/stream.h"

namespace floodgate::redis {

namespace {

using namespace std::chrono_literals;
using ErrorCode = boost::system::error_code;

constexpr auto kFirstBackoff = 100ms;
constexpr auto kMaxBackoff = 5s;
// The replies a link expects: +OK, a 40-digit sha, an array of a few integers, an error line.
constexpr ReplyLimits kLimits{.max_bulk_bytes = 256, .max_line_bytes = 1024};
constexpr std::size_t kOutBytes = std::size_t{64} * 1024;  // each of the two output buffers
// Ring entries beyond max_pending: the handshake's (AUTH, SELECT, SCRIPT LOAD) and reloads.
constexpr uint32_t kInternalEntries = 8;

void sha1_hex(std::string_view text, char (&out)[40]) noexcept {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md.data(), &len, EVP_sha1(), nullptr) != 1 ||
      len != 20) {
    std::fill(std::begin(out), std::end(out), '0');  // EVALSHA then gets NOSCRIPT: an error
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < 20; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
}

}  // namespace

// One connection attempt's socket. Reference counted: the poller holds it while it is queued on
// the ready list and a completion holds it while it runs, so a link may drop it at any time.
class LinkImpl;

class LinkConn final : public RefCounted<LinkConn>, public net::Stream, public net::StreamOwner {
 public:
  LinkConn(net::Poller& poller, LinkImpl* impl) : Stream(poller), impl(impl) {}
  ~LinkConn() = default;
  void hold() noexcept override { add_ref(); }
  void release() noexcept override { release_ref(); }
  LinkImpl* impl;  // nullptr once the link dropped it

 protected:
  net::StreamOwner* stream_owner() override { return impl != nullptr ? this : nullptr; }
};

class LinkImpl {
 public:
  using Submit = Link::Submit;
  LinkImpl(Link& link, net::Poller& poller, TimerWheel& wheel, const Clock& clock,
           std::shared_ptr<InflightLimit> inflight, LinkStats& stats)
      : link_(link),
        poller_(poller),
        wheel_(wheel),
        clock_(clock),
        inflight_(std::move(inflight)),
        stats_(stats),
        ring_(link.params_.max_pending + kInternalEntries),
        in_(kLimits.max_reply_bytes() + 4096),
        timer_([](void* self) { static_cast<LinkImpl*>(self)->on_timer(); }, this) {
    for (auto& b : out_) b.resize(kOutBytes);
  }
  ~LinkImpl() { drop_all(); }
  LinkImpl(const LinkImpl&) = delete;
  LinkImpl& operator=(const LinkImpl&) = delete;

  void start() {
    if (link_.state_ == LinkState::idle) connect();
  }

  Submit eval(Call& call) noexcept {
    const LinkState s = link_.state_;
    const bool queue = s == LinkState::ready || (s == LinkState::connecting && !probing_);
    if (!queue) {
      stats_.refused.add();
      return Submit::unavailable;
    }
    if (calls_ >= link_.params_.max_pending || count_ >= ring_.size() - kInternalEntries) {
      stats_.refused.add();
      return Submit::busy;
    }
    if (inflight_ && inflight_->current.fetch_add(1, std::memory_order_relaxed) >= inflight_->max) {
      inflight_->current.fetch_sub(1, std::memory_order_relaxed);
      stats_.refused.add();
      return Submit::busy;
    }
    if (!append(call)) {
      if (inflight_) inflight_->current.fetch_sub(1, std::memory_order_relaxed);
      stats_.refused.add();
      return Submit::busy;
    }
    const auto now = clock_.now();
    Entry& e = push(Kind::call);
    e.call = &call;
    e.deadline = now + link_.params_.command_timeout +
                 (s == LinkState::ready ? 0ms : link_.params_.connect_timeout);
    call.link_ = &link_;
    call.slot_ = index_of(e);
    call.sent_ = now;
    ++calls_;
    stats_.inflight.fetch_add(1, std::memory_order_relaxed);
    if (s == LinkState::ready && !timer_.armed()) arm_head();
    flush();
    return Submit::accepted;
  }

  void cancel(Call& call) noexcept {
    if (call.link_ != &link_) return;
    ring_[call.slot_].call = nullptr;  // the reply is dropped when it comes
    call.link_ = nullptr;
  }

  void close() noexcept { fail(CallStatus::unavailable, LinkState::idle); }

  bool busy() const noexcept { return calls_ != 0; }

  // --- completions, from the link's LinkConn ---

  void on_connected(const ErrorCode& ec) {
    if (ec) return failed_connect(CallStatus::unavailable);
    reading_ = false;
    read_more();
    flush();
  }

  void on_written(const ErrorCode& ec) {
    writing_ = false;
    if (ec) return lost(CallStatus::unavailable);
    flush();
  }

  void on_read(const ErrorCode& ec, std::size_t n) {
    reading_ = false;
    if (ec || n == 0) return lost(CallStatus::unavailable);
    in_len_ += n;
    const Ref<LinkConn> keep = conn_;  // a reply's Done may end this connection
    std::size_t used = 0;
    ReplyParser parser(kLimits);
    while (conn_.get() == keep.get() && used < in_len_) {
      Reply reply;
      const Parsed p = parser.parse({in_.data() + used, in_len_ - used}, reply);
      if (p.status == ParseStatus::need_more) break;
      if (p.status == ParseStatus::protocol_error) return lost(CallStatus::error);
      used += p.consumed;
      if (!on_reply(reply)) return;  // the connection is gone
    }
    if (conn_.get() != keep.get()) return;
    std::memmove(in_.data(), in_.data() + used, in_len_ - used);
    in_len_ -= used;
    read_more();
  }

 private:
  enum class Kind : uint8_t { auth, select, load, reload, call };
  struct Entry {
    Kind kind = Kind::call;
    bool resent = false;
    Call* call = nullptr;  // Kind::call; nullptr once cancelled
    uint64_t seq = 0;      // the order it was written in
    std::chrono::steady_clock::time_point deadline{};
  };

  // --- the ring (FIFO) ---
  Entry& push(Kind kind) noexcept {
    Entry& e = ring_[(head_ + count_) % ring_.size()];
    ++count_;
    e = Entry{.kind = kind, .seq = ++seq_};
    return e;
  }
  Entry pop() noexcept {
    Entry e = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    return e;
  }
  uint32_t index_of(const Entry& e) const noexcept {
    return static_cast<uint32_t>(&e - ring_.data());
  }

  // --- output ---
  bool append_args(std::initializer_list<std::string_view> args) noexcept {
    CommandWriter w(
        std::span<char>(out_[fill_].data() + out_len_[fill_], kOutBytes - out_len_[fill_]));
    if (w.write(args) == 0) return false;
    out_len_[fill_] += w.size();
    return true;
  }
  bool append(Call& call) noexcept {
    CommandWriter w(
        std::span<char>(out_[fill_].data() + out_len_[fill_], kOutBytes - out_len_[fill_]));
    if (!call.write_(call, w, link_.script_sha())) return false;
    out_len_[fill_] += w.size();
    return true;
  }
  // Writes what has gathered, unless a write is under way (its completion calls this again).
  void flush() noexcept {
    if (writing_ || !conn_ || !connected_ || out_len_[fill_] == 0) return;
    const std::size_t n = std::exchange(out_len_[fill_], 0);
    const char* data = out_[fill_].data();
    fill_ ^= 1;
    writing_ = true;
    conn_->write(data, n, [](net::StreamOwner& o, const ErrorCode& ec, std::size_t) {
      auto& c = static_cast<LinkConn&>(o);
      if (c.impl != nullptr) c.impl->on_written(ec);
    });
  }

  void read_more() noexcept {
    if (reading_ || !conn_) return;
    reading_ = true;
    conn_->read_some(in_.data() + in_len_, in_.size() - in_len_,
                     [](net::StreamOwner& o, const ErrorCode& ec, std::size_t n) {
                       auto& c = static_cast<LinkConn&>(o);
                       if (c.impl != nullptr) c.impl->on_read(ec, n);
                     });
  }

  // --- connecting ---
  void connect() {
    drop_conn();
    link_.state_ = LinkState::connecting;
    stats_.connects.add();
    conn_ = Ref<LinkConn>(new LinkConn(poller_, this));
    connected_ = false;
    in_len_ = 0;
    out_len_[0] = out_len_[1] = 0;
    const LinkParams& p = link_.params_;
    // The handshake goes first; calls queued behind the connect follow it in the same buffer.
    bool ok = true;
    if (!p.password.empty()) {
      ok = p.username.empty() ? append_args({"AUTH", p.password})
                              : append_args({"AUTH", p.username, p.password});
      push(Kind::auth);
    }
    if (p.db != 0) {
      const IntegerArg db(p.db);
      ok = ok && append_args({"SELECT", db.view()});
      push(Kind::select);
    }
    ok = ok && append_args({"SCRIPT", "LOAD", p.script});
    push(Kind::load);
    stats_.script_loads.add();
    load_seq_ = seq_;
    wheel_.schedule(timer_, clock_.now() + p.connect_timeout);
    if (!ok) return failed_connect(CallStatus::error);  // a script larger than the buffer
    conn_->connect(p.server, [](net::StreamOwner& o, const ErrorCode& ec, std::size_t) {
      auto& c = static_cast<LinkConn&>(o);
      if (c.impl == nullptr) return;
      c.impl->connected_ = !ec;
      c.impl->on_connected(ec);
    });
  }

  // The connect or the handshake failed: what waits for it fails, and the breaker opens.
  void failed_connect(CallStatus status) {
    stats_.connect_failures.add();
    ++failures_;
    fail(status, LinkState::backoff);
    auto backoff = kFirstBackoff;
    for (uint32_t i = 1; i < failures_ && backoff < kMaxBackoff; ++i) backoff *= 2;
    wheel_.schedule(timer_,
                    clock_.now() + std::min<std::chrono::milliseconds>(backoff, kMaxBackoff));
  }

  // A connection that was ready is gone (Redis closed it, a reset, a stall, a broken reply):
  // what is in flight fails with `status`, and the link connects again at once; after a stall or
  // a broken reply it probes (refusing calls until ready), after a close it queues them.
  void lost(CallStatus status) {
    if (link_.state_ != LinkState::ready) return failed_connect(status);
    stats_.disconnects.add();
    if (status != CallStatus::unavailable) ++failures_;
    fail(status, LinkState::idle);
    probing_ = failures_ > 0;
    connect();
  }

  void on_timer() {
    switch (link_.state_) {
      case LinkState::connecting:  // connect_timeout passed before the link was ready
        return failed_connect(CallStatus::unavailable);
      case LinkState::backoff:  // the breaker's backoff has passed: one probe
        probing_ = true;
        return connect();
      case LinkState::ready:
        if (count_ != 0 && ring_[head_].deadline <= clock_.now()) return lost(CallStatus::timeout);
        return arm_head();
      case LinkState::idle:
        return;
    }
  }

  void arm_head() noexcept {
    if (count_ == 0) return timer_.cancel();
    wheel_.schedule(timer_, ring_[head_].deadline);
  }

  // --- replies ---
  // One reply, for the ring's head. False when the connection went (a handshake error).
  bool on_reply(const Reply& reply) {
    if (count_ == 0) {  // a reply nobody asked for
      lost(CallStatus::error);
      return false;
    }
    const Entry e = pop();
    const bool error = reply.type() == ReplyType::error;
    switch (e.kind) {
      case Kind::auth:
      case Kind::select:
        if (error) {
          failed_connect(CallStatus::error);
          return false;
        }
        return true;
      case Kind::load:
        if (reply.type() != ReplyType::bulk_string || reply.value.text != link_.script_sha()) {
          failed_connect(CallStatus::error);
          return false;
        }
        ready();
        return true;
      case Kind::reload:
        return true;  // a mismatch shows as a second NOSCRIPT: that call then fails
      case Kind::call:
        break;
    }
    if (e.call == nullptr) {  // cancelled: nobody waits for this reply
      done_with(nullptr);
      return true;
    }
    if (error && redis::error_code(reply.value.text) == "NOSCRIPT" && !e.resent) return resend(e);
    Call& call = *e.call;
    call.link_ = nullptr;
    done_with(&call);
    stats_.latency.observe(clock_.now() - call.sent_);
    if (error) stats_.errors.add();
    call.done_(call, error ? CallStatus::error : CallStatus::reply, &reply);
    if (link_.state_ == LinkState::ready) arm_head();
    return true;
  }

  // NOSCRIPT: the script is loaded again (once for every call sent before the reload) and the
  // call sent again, at the end of the ring, with its deadline.
  bool resend(const Entry& e) {
    stats_.noscript.add();
    if (count_ + 2 > ring_.size()) {
      lost(CallStatus::error);
      return false;
    }
    if (e.seq > load_seq_) {
      if (!append_args({"SCRIPT", "LOAD", link_.params_.script})) {
        lost(CallStatus::error);
        return false;
      }
      push(Kind::reload).deadline = e.deadline;
      load_seq_ = seq_;
      stats_.script_loads.add();
    }
    Call& call = *e.call;
    if (!append(call)) {
      lost(CallStatus::error);
      return false;
    }
    Entry& again = push(Kind::call);
    again.call = &call;
    again.resent = true;
    again.deadline = e.deadline;
    call.slot_ = index_of(again);
    flush();
    return true;
  }

  void ready() {
    link_.state_ = LinkState::ready;
    failures_ = 0;
    probing_ = false;
    stats_.ready.store(1, std::memory_order_relaxed);
    arm_head();
  }

  // A call's entry is gone: the in-flight counts go down.
  void done_with(Call*) noexcept {
    --calls_;
    stats_.inflight.fetch_sub(1, std::memory_order_relaxed);
    if (inflight_) inflight_->current.fetch_sub(1, std::memory_order_relaxed);
  }

  // Ends the connection and completes every call in the ring with `status`, the link in `next`
  // (set first, so that a Done that calls eval() is refused).
  void fail(CallStatus status, LinkState next) {
    if (link_.state_ == LinkState::ready) stats_.ready.store(0, std::memory_order_relaxed);
    link_.state_ = next;
    timer_.cancel();
    drop_conn();
    while (count_ != 0) {
      const Entry e = pop();
      if (e.kind != Kind::call) continue;
      done_with(e.call);
      if (e.call == nullptr) continue;
      Call& call = *e.call;
      call.link_ = nullptr;
      if (status == CallStatus::timeout) stats_.timeouts.add();
      if (status == CallStatus::error) stats_.errors.add();
      call.done_(call, status, nullptr);
    }
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

  // The link is going away: nothing is completed (the owners of the calls are going too).
  void drop_all() noexcept {
    if (link_.state_ == LinkState::ready) stats_.ready.store(0, std::memory_order_relaxed);
    timer_.cancel();
    drop_conn();
    while (count_ != 0) {
      const Entry e = pop();
      if (e.kind != Kind::call) continue;
      done_with(e.call);
      if (e.call != nullptr) e.call->link_ = nullptr;
    }
  }

  Link& link_;
  net::Poller& poller_;
  TimerWheel& wheel_;
  const Clock& clock_;
  std::shared_ptr<InflightLimit> inflight_;
  LinkStats& stats_;
  Ref<LinkConn> conn_;
  bool connected_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool probing_ = false;   // connecting after a failure: calls are refused until ready
  uint32_t failures_ = 0;  // since the link was last ready
  std::vector<Entry> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;  // entries in the ring
  uint32_t calls_ = 0;     // of them, calls (cancelled ones included)
  uint64_t seq_ = 0;
  uint64_t load_seq_ = 0;  // the last SCRIPT LOAD's
  std::array<std::vector<char>, 2> out_;
  std::array<std::size_t, 2> out_len_{};
  unsigned fill_ = 0;  // the output buffer commands are appended to
  std::vector<char> in_;
  std::size_t in_len_ = 0;
  TimerWheel::Entry timer_;
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
