#include "floodgate/proxy/access_log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

namespace floodgate::proxy {
namespace {

// Per reactor: about 3,000 typical lines, so a log thread that falls a second behind under
// full load drops lines rather than stalling a reactor.
constexpr std::size_t kRingBytes = std::size_t{1} << 20;
// Longer targets are logged cut (and marked "..."), so that a line always fits the stack
// buffer (no allocation) and the ring.
constexpr std::size_t kMaxLoggedTarget = 4096;
// The log thread looks for lines this often when the rings were empty (backing off up to the
// longest interval while idle); reactors never wake it, so writing costs them no syscall.
constexpr auto kMinIdleWait = std::chrono::milliseconds(1);
constexpr auto kMaxIdleWait = std::chrono::milliseconds(20);

using LineBuffer = fmt::basic_memory_buffer<char, AccessLog::kLineBytes>;

std::string_view cut_target(std::string_view t, bool& cut) {
  cut = t.size() > kMaxLoggedTarget;
  return cut ? t.substr(0, kMaxLoggedTarget) : t;
}

// Appends `s` as the contents of a JSON string (RFC 8259 escaping).
void json_escape(LineBuffer& out, std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", u);
    } else {
      out.push_back(c);
    }
  }
}

void json_field(LineBuffer& out, std::string_view key, std::string_view value) {
  fmt::format_to(std::back_inserter(out), ",\"{}\":\"", key);
  json_escape(out, value);
  out.push_back('"');
}

void format_json(LineBuffer& out, const AccessRecord& r) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.time.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(r.time);
  fmt::format_to(std::back_inserter(out), "{{\"time\":\"{:%Y-%m-%dT%H:%M:%S}.{:03}Z\"", secs,
                 ms.count() % 1000);
  json_field(out, "client", r.client);
  json_field(out, "method", r.method);
  bool cut = false;
  json_field(out, "target", cut_target(r.target, cut));
  if (cut) {  // inside the string: the closing quote was just written
    out.resize(out.size() - 1);
    fmt::format_to(std::back_inserter(out), "...\"");
  }
  fmt::format_to(std::back_inserter(out), ",\"status\":{},\"bytes_in\":{},\"bytes_out\":{}",
                 r.status, r.bytes_in, r.bytes_out);
  json_field(out, "upstream", r.upstream);
  json_field(out, "backend", r.backend);
  fmt::format_to(std::back_inserter(out), ",\"duration_ms\":{:.3f}",
                 std::chrono::duration<double, std::milli>(r.duration).count());
  json_field(out, "reason", info(r.reason).name);
  json_field(out, "request_id", r.request_id);
  out.push_back('}');
}

// NCSA combined log format, with floodgate's fields appended (upstream, backend, duration in
// seconds, reason, request id).
void format_combined(LineBuffer& out, const AccessRecord& r) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(r.time);
  auto dash = [](std::string_view s) { return s.empty() ? std::string_view("-") : s; };
  bool cut = false;
  fmt::format_to(std::back_inserter(out),
                 "{} - - [{:%d/%b/%Y:%H:%M:%S} +0000] \"{} {}{} HTTP/1.1\" {} {} \"-\" \"-\"",
                 dash(r.client), secs, dash(r.method), dash(cut_target(r.target, cut)),
                 cut ? "..." : "", r.status, r.bytes_out);
  fmt::format_to(std::back_inserter(out), " {} {} {:.6f} {} {}", dash(r.upstream), dash(r.backend),
                 std::chrono::duration<double>(r.duration).count(), dash(info(r.reason).name),
                 dash(r.request_id));
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
  if (format_ == AccessLogFormat::json) {
    format_json(line, r);
  } else {
    format_combined(line, r);
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
