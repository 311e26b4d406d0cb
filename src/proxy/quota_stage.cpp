#include "floodgate/proxy/quota_stage.h"

#include <algorithm>
#include <charconv>

#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/request_key.h"
#include "floodgate/proxy/snapshot.h"

namespace floodgate::proxy {

namespace {

using redis::CallStatus;
using resilience::Digest;
using resilience::KeySource;
using resilience::QuotaDecision;
using resilience::QuotaVerdict;
using resilience::QuotaWindowKind;

// A request-derived identity longer than this is selector_identity_invalid (seed 004).
constexpr std::size_t kMaxIdentityBytes = 256;
// The longest Redis key of a decision: the prefix (128), the policy and route names and three
// 64-digit digests fit with room; a configuration whose names do not is a backend_error.
constexpr std::size_t kMaxRedisKey = 1024;

// What a Redis decision came back as, carried in Wait::result: the code in the low four bits,
// the seconds until the denying window ends above them.
enum class Result : uint32_t { allowed, burst, sustained, timeout, unavailable, error };
constexpr uint32_t kMaxResetSeconds = (uint32_t{1} << 27) - 1;

constexpr uint32_t encode(Result r, uint32_t seconds = 0) noexcept {
  return static_cast<uint32_t>(r) | (std::min(seconds, kMaxResetSeconds) << 4);
}

// Whole seconds until a window ends, at least 1 (Retry-After).
uint32_t seconds_until(std::chrono::milliseconds reset) noexcept {
  const int64_t s = (reset.count() + 999) / 1000;
  return static_cast<uint32_t>(std::clamp<int64_t>(s, 1, kMaxResetSeconds));
}

uint32_t decode_reply(CallStatus status, const redis::Reply* reply) noexcept {
  switch (status) {
    case CallStatus::timeout:
      return encode(Result::timeout);
    case CallStatus::unavailable:
      return encode(Result::unavailable);
    case CallStatus::error:
      return encode(Result::error);
    case CallStatus::reply:
      break;
  }
  // The script answers {1, 0, 0} or {0, window, ms}; anything else is an error.
  if (reply == nullptr || reply->type() != redis::ReplyType::array || reply->count != 3) {
    return encode(Result::error);
  }
  const auto e = reply->elements();
  for (const redis::ReplyValue& v : e) {
    if (v.type != redis::ReplyType::integer) return encode(Result::error);
  }
  if (e[0].integer == 1) return encode(Result::allowed);
  if (e[0].integer != 0 || (e[1].integer != 1 && e[1].integer != 2)) return encode(Result::error);
  const uint32_t seconds =
      seconds_until(std::chrono::milliseconds(std::max<int64_t>(e[2].integer, 0)));
  return encode(e[1].integer == 1 ? Result::burst : Result::sustained, seconds);
}

// Lower-case hex of a whole digest.
void hex(const Digest& d, char* out) noexcept {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (std::size_t i = 0; i < d.size(); ++i) {
    out[2 * i] = kDigits[d[i] >> 4];
    out[2 * i + 1] = kDigits[d[i] & 15];
  }
}

// Appends to a fixed buffer; `ok` turns false (and stays) once something does not fit.
struct KeyBuilder {
  char* data;
  std::size_t cap;
  std::size_t size = 0;
  bool ok = true;
  void add(std::string_view s) noexcept {
    if (!ok || s.size() > cap - size) {
      ok = false;
      return;
    }
    std::copy(s.begin(), s.end(), data + size);
    size += s.size();
  }
  void add_hex(const Digest& d) noexcept {
    char h[64];
    hex(d, h);
    add({h, sizeof h});
  }
  std::string_view view() const noexcept { return {data, size}; }
};

const std::array<const KeySource*, 3> dimensions(const resilience::QuotaSelector& s) noexcept {
  return {&s.tenant, &s.token, &s.client};
}

// "<prefix>:{<policy>[:r=<route>][:t=<hex>][:k=<hex>][:c=<hex>]}:" : the part every window key
// of one decision shares, its hash tag the braces (one Redis Cluster slot per decision).
void redis_key_base(KeyBuilder& b, const Quota& q, const QuotaPolicy& p, std::string_view route,
                    const std::array<Digest, 3>& ids) noexcept {
  static constexpr std::array<std::string_view, 3> kTags{":t=", ":k=", ":c="};
  b.add(q.params.backend.key_prefix);
  b.add(":{");
  b.add(p.params.name);
  if (p.params.selector.route) {
    b.add(":r=");
    b.add(route);
  }
  const auto dims = dimensions(p.params.selector);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i]->kind == KeySource::Kind::none) continue;
    b.add(kTags[i]);
    b.add_hex(ids[i]);
  }
  b.add("}:");
}

// The bucket of a decision in a per-process table: the same parts, framed and hashed, with the
// windows (a changed window starts afresh) and the table's prefix.
Digest local_key(std::string_view prefix, const QuotaPolicy& p, std::string_view route,
                 const std::array<Digest, 3>& ids) noexcept {
  const auto dims = dimensions(p.params.selector);
  auto part = [&](std::size_t i) {
    return dims[i]->kind == KeySource::Kind::none
               ? std::string_view{}
               : std::string_view(reinterpret_cast<const char*>(ids[i].data()), ids[i].size());
  };
  return resilience::digest_of({prefix, p.params.name, p.params.selector.route ? route : "",
                                part(0), part(1), part(2), p.contract});
}

// EVALSHA <sha> <n> <keys...> <requests window_ms kind>... for the call's policy.
bool write_call(redis::Call& call, redis::CommandWriter& out, std::string_view sha) noexcept {
  const auto& c = static_cast<const QuotaCall&>(call);
  const QuotaPolicy& p = *c.policy;
  std::array<char, kMaxRedisKey> burst_key{};
  std::array<char, kMaxRedisKey> sustained_key{};
  KeyBuilder kb{burst_key.data(), burst_key.size()};
  redis_key_base(kb, *c.quota, p, c.ex->up->params.name, c.ids);
  KeyBuilder ks = kb;
  ks.data = sustained_key.data();
  std::copy(burst_key.data(), burst_key.data() + kb.size, sustained_key.data());
  kb.add("burst");
  ks.add("sustained");
  if (!kb.ok || !ks.ok) return false;
  const resilience::QuotaLimits& l = p.limits;
  const bool burst = l.burst_requests != 0;
  const bool sustained = l.sustained_requests != 0;
  const redis::IntegerArg keys(int{burst} + int{sustained});
  const redis::IntegerArg b_requests(l.burst_requests), b_window(l.burst_window.count());
  const redis::IntegerArg s_requests(l.sustained_requests), s_window(l.sustained_window.count());
  std::array<std::string_view, 11> args{};
  std::size_t n = 0;
  args[n++] = "EVALSHA";
  args[n++] = sha;
  args[n++] = keys.view();
  if (burst) args[n++] = kb.view();
  if (sustained) args[n++] = ks.view();
  if (burst) {
    args[n++] = b_requests.view();
    args[n++] = b_window.view();
    args[n++] = "1";
  }
  if (sustained) {
    args[n++] = s_requests.view();
    args[n++] = s_window.view();
    args[n++] = "2";
  }
  return out.write(std::span<const std::string_view>(args.data(), n)) != 0;
}

void call_done(redis::Call& call, CallStatus status, const redis::Reply* reply) noexcept {
  auto& c = static_cast<QuotaCall&>(call);
  c.ex->wait.complete(decode_reply(status, reply));
}

Reason reason_of(QuotaOutcome o) noexcept {
  switch (o) {
    case QuotaOutcome::allowed:
    case QuotaOutcome::skipped:
      return Reason::none;
    case QuotaOutcome::burst_quota_exhausted:
      return Reason::burst_quota_exhausted;
    case QuotaOutcome::sustained_quota_exhausted:
      return Reason::sustained_quota_exhausted;
    case QuotaOutcome::selector_identity_missing:
      return Reason::selector_identity_missing;
    case QuotaOutcome::selector_identity_invalid:
      return Reason::selector_identity_invalid;
    case QuotaOutcome::backend_timeout:
      return Reason::backend_timeout;
    case QuotaOutcome::backend_unavailable:
      return Reason::backend_unavailable;
    case QuotaOutcome::backend_error:
    case QuotaOutcome::count_:
      break;
  }
  return Reason::backend_error;
}

class QuotaStage final : public Stage {
 public:
  QuotaStage(const Upstream& up, std::shared_ptr<const Quota> quota)
      : Stage(StageId::quota, resilience::Mode::enforce), quota_(std::move(quota)) {
    for (const QuotaPolicy& p : quota_->policies) {
      if (p.applies_to(up.params.name)) policies_.push_back(&p);
    }
    const auto& b = quota_->params.backend;
    backstop_ = b.connect_timeout + b.command_timeout + std::chrono::seconds(1);
  }

  bool empty() const noexcept { return policies_.empty(); }

  Decision check(Exchange& ex, Ticket&) const noexcept override {
    QuotaCall& qc = ex.quota;
    const KeyContext ctx{.head = &ex.head,
                         .request = &ex.request,
                         .peer = &ex.conn->peer,
                         .peer_text = ex.conn->peer_text,
                         .connection_id = ex.conn->connection_id,
                         .trusted_proxies = &quota_->trusted_proxies};
    for (std::size_t i = qc.next; i < policies_.size(); ++i) {
      const QuotaPolicy& p = *policies_[i];
      std::array<Digest, 3> ids{};
      if (const QuotaOutcome bad = identities(p, ctx, ids); bad != QuotaOutcome::allowed) {
        p.counts->count(ex.reactor_index, bad);
        if (bad == QuotaOutcome::skipped) continue;
        if (refuse(ex, p, reason_of(bad))) {
          return Decision::stop(reason_of(bad), bad == QuotaOutcome::selector_identity_missing
                                                    ? &p.missing
                                                    : &p.invalid);
        }
        continue;
      }
      Decision out;
      if (!quota_->redis()) {
        const QuotaDecision d = quota_->table->decide(
            local_key(quota_->params.backend.key_prefix, p, ex.up->params.name, ids), ex.started,
            p.limits);
        if (decided(ex, p, ids, d, QuotaMode::in_memory, out)) return out;
        continue;
      }
      redis::Link& link = ex.quota_links->link(*quota_);
      qc.quota = quota_.get();
      qc.policy = &p;
      qc.link = &link;
      qc.ids = ids;
      qc.current = static_cast<uint8_t>(i);
      if (link.eval(qc) == redis::Link::Submit::accepted) {
        return Decision::wait(backstop_, Reason::backend_timeout);
      }
      if (failed(ex, p, ids, QuotaOutcome::backend_unavailable, out)) return out;
    }
    return Decision::go();
  }

  bool cancel(Exchange& ex, CancelReason) const noexcept override {
    if (!ex.quota.pending()) return false;  // the reply came: its completion is on its way
    ex.quota.link->cancel(ex.quota);
    return true;
  }

  Decision resume(Exchange& ex, Ticket&, uint32_t result) const noexcept override {
    // A count Redis made cannot be taken back: an exchange that gave up meanwhile answers for
    // itself (waiting.cpp).
    if (ex.wait.abandoned || ex.wait.gave_up != Reason::none) return Decision::stop(Reason::none);
    QuotaCall& qc = ex.quota;
    const QuotaPolicy& p = *policies_[qc.current];
    Decision out;
    const auto code = static_cast<Result>(result & 15);
    bool stop = false;
    switch (code) {
      case Result::allowed:
      case Result::burst:
      case Result::sustained: {
        QuotaDecision d;
        if (code != Result::allowed) {
          d.verdict = QuotaVerdict::denied;
          d.window = code == Result::burst ? QuotaWindowKind::burst : QuotaWindowKind::sustained;
          d.reset = std::chrono::seconds(result >> 4);
        }
        stop = decided(ex, p, qc.ids, d, QuotaMode::redis, out);
        break;
      }
      case Result::timeout:
        stop = failed(ex, p, qc.ids, QuotaOutcome::backend_timeout, out);
        break;
      case Result::unavailable:
        stop = failed(ex, p, qc.ids, QuotaOutcome::backend_unavailable, out);
        break;
      case Result::error:
        stop = failed(ex, p, qc.ids, QuotaOutcome::backend_error, out);
        break;
    }
    if (stop) return out;
    qc.next = static_cast<uint8_t>(qc.current + 1);
    if (qc.next < policies_.size()) --ex.cursor;  // the chain runs this stage again, from next
    return Decision::go();
  }

 private:
  // The digests of the policy's identities, or why it has none (skipped: the policy's
  // missing_key says not to count a request without one). An anonymous client's address is
  // framed (digest_of), so it is never the plain SHA-256 of a header value.
  static QuotaOutcome identities(const QuotaPolicy& p, const KeyContext& ctx,
                                 std::array<Digest, 3>& ids) noexcept {
    const auto dims = dimensions(p.params.selector);
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i]->kind == KeySource::Kind::none) continue;
      std::array<char, kKeyScratch> scratch{};
      const Identity who = identity_of(*dims[i], p.params.missing_key, ctx, scratch);
      switch (who.as) {
        case Counted::by_key:
          if (who.value.size() > kMaxIdentityBytes) return QuotaOutcome::selector_identity_invalid;
          ids[i] = resilience::sha256(who.value);
          break;
        case Counted::by_peer:
          ids[i] = resilience::digest_of({"missing:peer", who.value});
          break;
        case Counted::skipped:
          return QuotaOutcome::skipped;
        case Counted::by_route:  // not a quota's value (config): refused as the default is
        case Counted::refused:
          return QuotaOutcome::selector_identity_missing;
      }
    }
    return QuotaOutcome::allowed;
  }

  // Whether a refusal for `reason` by `p` stops the request: in enforce mode it does; in shadow
  // mode it is counted as the chain counts a shadow stop, and the request goes on.
  bool refuse(Exchange& ex, const QuotaPolicy& p, Reason reason) const noexcept {
    if (quota_->params.enforcement == resilience::Mode::enforce) {
      ex.quota_by = &p.params.name;
      return true;
    }
    if (ex.quota_by == nullptr) ex.quota_by = &p.params.name;
    ex.metrics->shadow_rejected(StageId::quota, reason);
    if (ex.would_reject == Reason::none) {
      ex.would_reject = reason;
      ex.would_reject_stage = StageId::quota;
    }
    return false;
  }

  // A counter table's or Redis's decision `d`; true (with `out`) when it stops the request.
  bool decided(Exchange& ex, const QuotaPolicy& p, const std::array<Digest, 3>& ids,
               const QuotaDecision& d, QuotaMode mode, Decision& out) const noexcept {
    switch (d.verdict) {
      case QuotaVerdict::allowed:
        quota_->state->count(ex.reactor_index, mode);
        p.counts->count(ex.reactor_index, QuotaOutcome::allowed);
        return false;
      case QuotaVerdict::denied: {
        quota_->state->count(ex.reactor_index, mode);
        const QuotaOutcome o = d.window == QuotaWindowKind::sustained
                                   ? QuotaOutcome::sustained_quota_exhausted
                                   : QuotaOutcome::burst_quota_exhausted;
        p.counts->count(ex.reactor_index, o);
        if (!refuse(ex, p, reason_of(o))) return false;
        out = Decision::stop_built(reason_of(o), seconds_until(d.reset), p.header);
        return true;
      }
      case QuotaVerdict::table_full:
      case QuotaVerdict::busy:
        break;
    }
    // The table could not decide: a fallback table's failure is the combined failure.
    if (mode == QuotaMode::fallback) return policy(ex, p, QuotaOutcome::backend_unavailable, out);
    return failed(ex, p, ids, QuotaOutcome::backend_unavailable, out);
  }

  // The backend could not decide, for `why`: the local fallback for a timeout or an unavailable
  // Redis, else the failure policy.
  bool failed(Exchange& ex, const QuotaPolicy& p, const std::array<Digest, 3>& ids,
              QuotaOutcome why, Decision& out) const noexcept {
    if (quota_->fallback && why != QuotaOutcome::backend_error) {
      const QuotaDecision d = quota_->fallback->decide(
          local_key(quota_->params.local_fallback->key_prefix, p, ex.up->params.name, ids),
          ex.now(), p.limits);
      if (d.verdict == QuotaVerdict::allowed || d.verdict == QuotaVerdict::denied) {
        return decided(ex, p, ids, d, QuotaMode::fallback, out);
      }
    }
    return policy(ex, p, why, out);
  }

  bool policy(Exchange& ex, const QuotaPolicy& p, QuotaOutcome why, Decision& out) const noexcept {
    quota_->state->count(ex.reactor_index, QuotaMode::failed);
    p.counts->count(ex.reactor_index, why);
    if (quota_->params.backend_failure_policy == resilience::BackendFailurePolicy::fail_open) {
      if (ex.quota_by == nullptr) ex.quota_by = &p.params.name;  // the degraded decision
      return false;
    }
    if (!refuse(ex, p, reason_of(why))) return false;
    out = Decision::stop(reason_of(why), why == QuotaOutcome::backend_timeout ? &p.timeout
                                         : why == QuotaOutcome::backend_error ? &p.error
                                                                              : &p.unavailable);
    return true;
  }

  std::shared_ptr<const Quota> quota_;
  std::vector<const QuotaPolicy*> policies_;  // the ones applying to the upstream, in order
  std::chrono::milliseconds backstop_{};      // a wait's deadline should the link not answer
};

// The script. Redis's clock (TIME) places the windows, so every instance agrees on them; GET
// checks each window before anything is written, so a denial counts nowhere; a key expires at
// its window's end (PEXPIREAT, set when the window's first request creates it).
constexpr std::string_view kScript = R"(-- floodgate quota decision (fixed windows)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deny, left = 0, 0
for i = 1, #KEYS do
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  if used >= tonumber(ARGV[3 * i - 2]) then
    local kind = tonumber(ARGV[3 * i])
    if kind > deny then
      local window = tonumber(ARGV[3 * i - 1])
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl < 0 then ttl = window - now % window end
      deny, left = kind, ttl
    end
  end
end
if deny > 0 then return {0, deny, left} end
for i = 1, #KEYS do
  if redis.call('INCR', KEYS[i]) == 1 then
    local window = tonumber(ARGV[3 * i - 1])
    redis.call('PEXPIREAT', KEYS[i], now - now % window + window)
  end
end
return {1, 0, 0}
)";

}  // namespace

std::string_view quota_script() noexcept {
  return kScript;
}

std::string_view label(QuotaOutcome o) noexcept {
  if (o == QuotaOutcome::allowed) return "allowed";
  if (o == QuotaOutcome::skipped) return "skipped";
  return info(reason_of(o)).name;
}

std::string_view label(QuotaMode m) noexcept {
  static constexpr std::array<std::string_view, kQuotaModes> kLabels{"in_memory", "redis",
                                                                     "fallback", "failed"};
  return kLabels[static_cast<std::size_t>(m)];
}

uint64_t QuotaPolicyCounts::total(QuotaOutcome o) const noexcept {
  uint64_t sum = 0;
  for (const Shard& s : shards_)
    sum += s.n[static_cast<std::size_t>(o)].load(std::memory_order_relaxed);
  return sum;
}

uint64_t QuotaState::total(QuotaMode m) const noexcept {
  uint64_t sum = 0;
  for (const Shard& s : modes_)
    sum += s.n[static_cast<std::size_t>(m)].load(std::memory_order_relaxed);
  return sum;
}

std::shared_ptr<resilience::QuotaTable> QuotaState::in_memory_table() {
  if (!in_memory_) in_memory_ = std::make_shared<resilience::QuotaTable>();
  return in_memory_;
}

std::shared_ptr<resilience::QuotaTable> QuotaState::fallback_table(uint32_t max_entries) {
  if (!fallback_ || fallback_->max_live() != max_entries) {
    fallback_ = std::make_shared<resilience::QuotaTable>(max_entries);
  }
  return fallback_;
}

std::shared_ptr<redis::InflightLimit> QuotaState::inflight(uint32_t max) {
  if (!inflight_ || inflight_->max != max) inflight_ = std::make_shared<redis::InflightLimit>(max);
  return inflight_;
}

uint64_t QuotaState::link_key(const redis::LinkParams& link, const redis::InflightLimit* inflight) {
  std::string sig = link.server.address().to_string() + '\n' + std::to_string(link.server.port());
  sig += '\n' + std::to_string(link.db) + '\n' + link.username + '\n' + link.password;
  sig += '\n' + std::to_string(link.connect_timeout.count()) + '\n' +
         std::to_string(link.command_timeout.count()) + '\n' + std::to_string(link.max_pending);
  sig += '\n' + std::to_string(reinterpret_cast<uintptr_t>(inflight));
  for (const auto& [s, key] : link_keys_) {
    if (s == sig) return key;
  }
  link_keys_.emplace_back(std::move(sig), link_keys_.size() + 1);
  return link_keys_.back().second;
}

void QuotaState::sweep(std::chrono::steady_clock::time_point now) noexcept {
  if (in_memory_) in_memory_->reclaim(now);
  if (fallback_) fallback_->reclaim(now);
}

QuotaPolicy::QuotaPolicy(resilience::QuotaPolicyParams p, std::shared_ptr<QuotaPolicyCounts> c)
    : params(std::move(p)),
      limits(resilience::QuotaLimits::of(params)),
      counts(std::move(c)),
      header("X-Floodgate-Quota: " + params.name + "\r\n"),
      missing(prebuild_answer(Reason::selector_identity_missing, 0, 0, header)),
      invalid(prebuild_answer(Reason::selector_identity_invalid, 0, 0, header)),
      timeout(prebuild_answer(Reason::backend_timeout, 1, 0, header)),
      unavailable(prebuild_answer(Reason::backend_unavailable, 1, 0, header)),
      error(prebuild_answer(Reason::backend_error, 1, 0, header)) {
  contract = std::to_string(limits.burst_requests) + '/' +
             std::to_string(limits.burst_window.count()) + ',' +
             std::to_string(limits.sustained_requests) + '/' +
             std::to_string(limits.sustained_window.count());
}

bool QuotaPolicy::applies_to(std::string_view upstream) const noexcept {
  const auto& allow = params.route_allowlist;
  return allow.empty() || std::find(allow.begin(), allow.end(), upstream) != allow.end();
}

std::shared_ptr<const Quota> build_quota(const resilience::QuotaParams& params,
                                         std::vector<IpRange> trusted_proxies,
                                         std::shared_ptr<QuotaState> state,
                                         std::vector<std::shared_ptr<QuotaPolicyCounts>> counts) {
  if (!params.enabled || params.policies.empty()) return nullptr;
  auto q = std::make_shared<Quota>();
  q->params = params;
  q->trusted_proxies = std::move(trusted_proxies);
  for (std::size_t i = 0; i < params.policies.size(); ++i) {
    q->policies.emplace_back(params.policies[i], std::move(counts.at(i)));
  }
  const resilience::QuotaBackendParams& b = params.backend;
  if (b.kind == resilience::QuotaBackendKind::in_memory) {
    q->table = state->in_memory_table();
  } else {
    if (params.local_fallback)
      q->fallback = state->fallback_table(params.local_fallback->max_entries);
    q->link.server = {boost::asio::ip::make_address(b.redis.address), b.redis.port};
    q->link.db = b.redis.db;
    q->link.username = b.redis.username;
    q->link.password = b.redis.password;
    q->link.connect_timeout = b.connect_timeout;
    q->link.command_timeout = b.command_timeout;
    q->link.script = std::string(kScript);
    q->link.max_pending = std::min<uint32_t>(b.max_inflight, 65536);
    // Every reactor's link to this Redis shares one throttle: one failure line a second in all.
    q->link.failure_log = std::make_shared<SharedLogThrottle>();
    q->inflight = state->inflight(b.max_inflight);
    q->link_key = state->link_key(q->link, q->inflight.get());
  }
  q->state = std::move(state);
  return q;
}

void add_quota_stage(std::vector<std::unique_ptr<const Stage>>& stages, const Upstream& up,
                     std::shared_ptr<const Quota> quota) {
  if (!quota) return;
  auto stage = std::make_unique<QuotaStage>(up, std::move(quota));
  if (!stage->empty()) stages.push_back(std::move(stage));
}

QuotaCall::QuotaCall() noexcept : Call(&write_call, &call_done) {}

QuotaLinks::~QuotaLinks() {
  close();
}

redis::Link& QuotaLinks::link(const Quota& q) {
  for (Entry& e : links_) {
    if (e.key == q.link_key) return *e.link;
  }
  Entry e;
  e.key = q.link_key;
  e.link = std::make_unique<redis::Link>(poller_, wheel_, clock_, q.link, q.inflight, stats_);
  e.link->start();
  links_.push_back(std::move(e));
  return *links_.back().link;
}

void QuotaLinks::prune(uint64_t keep) noexcept {
  for (Entry& e : links_) {
    if (e.key != keep && !e.link->busy()) e.link.reset();
  }
  std::erase_if(links_, [](const Entry& e) { return !e.link; });
}

void QuotaLinks::close() noexcept {
  for (Entry& e : links_) e.link->close();
}

}  // namespace floodgate::proxy
