#include "floodgate/proxy/access_log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace floodgate::proxy {
namespace {

// Per reactor: about 3,000 typical lines, so a log thread that falls a second behind under
// full load drops lines rather than stalling a reactor.
constexpr std::size_t kRingBytes = std::size_t{1} << 20;
// Every logged string is bounded, so that a line always fits the stack buffer (no allocation)
// and the ring: longer ones are logged cut, marked with kCut. The target may be long; every
// other string (client, peer, method, upstream, backend, reason, request id) is short by nature.
constexpr std::size_t kMaxLoggedTarget = 4096;
constexpr std::size_t kMaxLoggedHeader = 1024;  // User-Agent, Referer
constexpr std::size_t kMaxLoggedField = 256;
constexpr std::string_view kCut = "...";
// The longest line: every byte of every string escaped (6 bytes in JSON, "\u00XX"), plus the
// keys, punctuation and numbers (well under 1024 bytes). Strings: the target, Referer and
// User-Agent, and the short ones (client, peer, host, method, protocol, upstream, backend, four
// backends, reason, rate limit, quota, request id, would_reject, TLS version and cipher: counted
// as 19).
constexpr std::size_t kLongestLine =
    (kMaxLoggedTarget + 2 * kMaxLoggedHeader + 19 * kMaxLoggedField) * 6 + 23 * kCut.size() + 1024;
static_assert(kLongestLine <= AccessLog::kLineBytes);
// The log thread looks for lines this often when the rings were empty (backing off up to the
// longest interval while idle); reactors never wake it, so writing costs them no syscall.
constexpr auto kMinIdleWait = std::chrono::milliseconds(1);
constexpr auto kMaxIdleWait = std::chrono::milliseconds(20);

using LineBuffer = fmt::basic_memory_buffer<char, AccessLog::kLineBytes>;

void put_hex_byte(LineBuffer& out, std::string_view prefix, unsigned char u) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.append(prefix);
  out.push_back(kHex[u >> 4]);
  out.push_back(kHex[u & 0xf]);
}

// Appends at most `max` bytes of `s` as the contents of a JSON string (RFC 8259), then kCut if
// it was longer. Only printable ASCII is copied: '"' and '\\' are escaped, control characters
// and DEL become \u00XX, and so does every byte >= 0x80 (\u0080-\u00ff, the byte's value), so
// the line is valid UTF-8 JSON whatever the client sent and the bytes can be recovered.
void json_escape(LineBuffer& out, std::string_view s, std::size_t max) {
  const bool cut = s.size() > max;
  for (const char c : cut ? s.substr(0, max) : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20 || u >= 0x7f) {
      put_hex_byte(out, "\\u00", u);
    } else {
      out.push_back(c);
    }
  }
  if (cut) out.append(kCut);
}

void json_field(LineBuffer& out, std::string_view key, std::string_view value,
                std::size_t max = kMaxLoggedField) {
  fmt::format_to(std::back_inserter(out), ",\"{}\":\"", key);
  json_escape(out, value, max);
  out.push_back('"');
}

// A duration in milliseconds with microsecond digits, or null when negative (did not happen).
void json_ms(LineBuffer& out, std::string_view key, std::chrono::nanoseconds d) {
  if (d.count() < 0) {
    fmt::format_to(std::back_inserter(out), ",\"{}\":null", key);
  } else {
    fmt::format_to(std::back_inserter(out), ",\"{}\":{:.3f}", key,
                   std::chrono::duration<double, std::milli>(d).count());
  }
}

void format_json(LineBuffer& out, const AccessRecord& r) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.time.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(r.time);
  fmt::format_to(std::back_inserter(out), "{{\"time\":\"{:%Y-%m-%dT%H:%M:%S}.{:03}Z\"", secs,
                 ms.count() % 1000);
  json_field(out, "client", r.client);
  json_field(out, "peer", r.peer);
  json_field(out, "host", r.host);
  json_field(out, "method", r.method);
  json_field(out, "target", r.target, kMaxLoggedTarget);
  json_field(out, "protocol", r.protocol);
  fmt::format_to(
      std::back_inserter(out),
      ",\"stream\":{},\"status\":{},\"bytes_in\":{},\"bytes_out\":{},\"body_bytes_sent\":{}",
      r.stream, r.status, r.bytes_in, r.bytes_out, r.body_bytes_sent);
  json_field(out, "upstream", r.upstream);
  json_field(out, "backend", r.backend);
  fmt::format_to(std::back_inserter(out), ",\"attempts\":{},\"backends\":[", r.attempts);
  for (uint8_t i = 0; i < r.attempts && i < r.backends.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    json_escape(out, r.backends[i], kMaxLoggedField);
    out.push_back('"');
  }
  out.push_back(']');
  json_ms(out, "duration_ms", r.duration);
  json_ms(out, "upstream_connect_ms", r.connect_time);
  json_ms(out, "upstream_head_ms", r.head_time);
  json_field(out, "reason", info(r.reason).name);
  json_field(out, "rate_limit", r.rate_limit);
  json_field(out, "quota", r.quota);
  json_field(out, "request_id", r.request_id);
  json_field(out, "would_reject", info(r.would_reject).name);
  json_field(out, "user_agent", r.user_agent, kMaxLoggedHeader);
  json_field(out, "referer", r.referer, kMaxLoggedHeader);
  json_field(out, "tls_version", r.tls_version);
  json_field(out, "tls_cipher", r.tls_cipher);
  out.push_back('}');
}

// A combined-format field: "-" when empty; else at most `max` bytes, with '"', '\\', control
// characters and bytes >= 0x7f written \xXX (as nginx does), so a field never breaks the line
// or its quoting; kCut when it was longer.
void combined_field(LineBuffer& out, std::string_view s, std::size_t max = kMaxLoggedField) {
  if (s.empty()) {
    out.push_back('-');
    return;
  }
  const bool cut = s.size() > max;
  for (const char c : cut ? s.substr(0, max) : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\' || u < 0x20 || u >= 0x7f) {
      put_hex_byte(out, "\\x", u);
    } else {
      out.push_back(c);
    }
  }
  if (cut) out.append(kCut);
}

// nginx's `combined` exactly: $remote_addr - $remote_user [$time_local] "$request" $status
// $body_bytes_sent "$http_referer" "$http_user_agent", the client as $remote_addr (behind a
// trusted proxy too, as nginx's realip module makes it), the request line as received ("-"
// when it could not be parsed), the time in UTC.
void format_combined(LineBuffer& out, const AccessRecord& r) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(r.time);
  combined_field(out, r.client);
  fmt::format_to(std::back_inserter(out), " - - [{:%d/%b/%Y:%H:%M:%S} +0000] \"", secs);
  if (r.method.empty()) {
    out.push_back('-');
  } else {
    combined_field(out, r.method);
    out.push_back(' ');
    combined_field(out, r.target, kMaxLoggedTarget);
    out.push_back(' ');
    combined_field(out, r.protocol);
  }
  fmt::format_to(std::back_inserter(out), "\" {} {} \"", r.status, r.body_bytes_sent);
  combined_field(out, r.referer, kMaxLoggedHeader);
  out.append(std::string_view("\" \""));
  combined_field(out, r.user_agent, kMaxLoggedHeader);
  out.push_back('"');
}

// A duration in seconds with millisecond digits (nginx's $upstream_connect_time), "-" when
// negative.
void combined_seconds(LineBuffer& out, std::chrono::nanoseconds d) {
  if (d.count() < 0) {
    out.push_back('-');
  } else {
    fmt::format_to(std::back_inserter(out), "{:.3f}", std::chrono::duration<double>(d).count());
  }
}

// `combined`, then floodgate's fields: upstream, backend (both, comma-separated, after a retry
// or hedge, as nginx's $upstream_addr), duration, connect and head times in seconds, reason,
// request id, TLS version and cipher, and the connection's peer (the first field is the client,
// which differs from it behind a trusted proxy).
void format_combined_floodgate(LineBuffer& out, const AccessRecord& r) {
  format_combined(out, r);
  out.push_back(' ');
  combined_field(out, r.upstream);
  out.push_back(' ');
  if (r.attempts > 1) {
    for (uint8_t i = 0; i < r.attempts && i < r.backends.size(); ++i) {
      if (i > 0) out.push_back(',');
      combined_field(out, r.backends[i]);
    }
  } else {
    combined_field(out, r.backend);
  }
  fmt::format_to(std::back_inserter(out), " {:.6f} ",
                 std::chrono::duration<double>(r.duration).count());
  combined_seconds(out, r.connect_time);
  out.push_back(' ');
  combined_seconds(out, r.head_time);
  out.push_back(' ');
  combined_field(out, info(r.reason).name);
  out.push_back(' ');
  combined_field(out, r.request_id);
  out.push_back(' ');
  combined_field(out, r.tls_version);
  out.push_back(' ');
  combined_field(out, r.tls_cipher);
  out.push_back(' ');
  combined_field(out, r.peer);
}

}  // namespace

struct AccessLog::Shard {
  SpscRing ring{kRingBytes};
  std::atomic<uint64_t> dropped{0};  // written by the shard's reactor only
};

AccessLog::AccessLog(const LogParams& params, unsigned shards)
    : format_(params.access_log_format), path_(params.access_log) {
  if (params.access_log == "off") return;
  open_logger();
  for (unsigned i = 0; i < std::max(shards, 1U); ++i) shards_.push_back(std::make_unique<Shard>());
  writer_ = std::thread([this] { run_writer(); });
}

void AccessLog::open_logger() {
  spdlog::sink_ptr sink;
  try {
    if (path_ == "stderr") {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    } else {
      // spdlog would create missing directories: floodgate never does (a vanished
      // /var/log/floodgate is an operator's to recreate, with its owner and mode).
      const std::size_t slash = path_.rfind('/');
      if (const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
          !dir.empty()) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
          throw std::runtime_error("the directory \"" + dir + "\" does not exist");
        }
      }
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path_);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("log.access_log: cannot open '" + path_ + "': " + e.what());
  }
  sink->set_pattern("%v");
  auto logger = std::make_shared<spdlog::logger>("access", std::move(sink));
  logger->set_level(spdlog::level::info);
  logger_ = std::move(logger);
}

AccessLog::~AccessLog() {
  flush();
}

void AccessLog::write(unsigned shard, const AccessRecord& r) {
  if (shards_.empty()) return;
  LineBuffer line;  // on the stack: the longest line fits (kMaxLoggedTarget)
  switch (format_) {
    case AccessLogFormat::json:
      format_json(line, r);
      break;
    case AccessLogFormat::combined:
      format_combined(line, r);
      break;
    case AccessLogFormat::combined_floodgate:
      format_combined_floodgate(line, r);
      break;
  }
  Shard& s = *shards_[shard];
  if (!s.ring.push(std::string_view(line.data(), line.size()))) {
    s.dropped.store(s.dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

uint64_t AccessLog::dropped() const {
  uint64_t n = 0;
  for (const auto& s : shards_) n += s->dropped.load(std::memory_order_relaxed);
  return n;
}

void AccessLog::flush() {
  if (!writer_.joinable()) return;
  stopping_.store(true, std::memory_order_release);
  writer_.join();
}

void AccessLog::run_writer() {
  auto wait = kMinIdleWait;
  for (;;) {
    // Read the flag first: a pass that starts after it was set sees every line written before.
    const bool last_pass = stopping_.load(std::memory_order_acquire);
    if (reopen_.exchange(false, std::memory_order_acq_rel) && path_ != "stderr") {
      try {
        open_logger();  // a new file where logrotate moved the old one
      } catch (const std::exception& e) {
        spdlog::error("{}; the access log keeps writing to the old file", e.what());
      }
    }
    std::size_t n = 0;
    for (auto& s : shards_) {
      n += s->ring.pop_all([this](std::string_view line) { logger_->info(line); });
    }
    if (n > 0) {
      logger_->flush();
      wait = kMinIdleWait;
    }
    if (last_pass) return;
    if (n == 0) {
      std::this_thread::sleep_for(wait);
      wait = std::min(wait * 2, std::chrono::duration_cast<decltype(wait)>(kMaxIdleWait));
    }
  }
}

}  // namespace floodgate::proxy
