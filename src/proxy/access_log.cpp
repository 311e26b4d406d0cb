#include "floodgate/proxy/access_log.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <stdexcept>

namespace floodgate::proxy {
namespace {

constexpr std::size_t kQueueLines = 65536;

// Appends `s` as the contents of a JSON string (RFC 8259 escaping).
void json_escape(fmt::memory_buffer& out, std::string_view s) {
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

void json_field(fmt::memory_buffer& out, std::string_view key, std::string_view value) {
  fmt::format_to(std::back_inserter(out), ",\"{}\":\"", key);
  json_escape(out, value);
  out.push_back('"');
}

void format_json(fmt::memory_buffer& out, const AccessRecord& r) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(r.time.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(r.time);
  fmt::format_to(std::back_inserter(out), "{{\"time\":\"{:%Y-%m-%dT%H:%M:%S}.{:03}Z\"", secs,
                 ms.count() % 1000);
  json_field(out, "client", r.client);
  json_field(out, "method", r.method);
  json_field(out, "target", r.target);
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
void format_combined(fmt::memory_buffer& out, const AccessRecord& r) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(r.time);
  auto dash = [](std::string_view s) { return s.empty() ? std::string_view("-") : s; };
  fmt::format_to(std::back_inserter(out),
                 "{} - - [{:%d/%b/%Y:%H:%M:%S} +0000] \"{} {} HTTP/1.1\" {} {} \"-\" \"-\"",
                 dash(r.client), secs, dash(r.method), dash(r.target), r.status, r.bytes_out);
  fmt::format_to(std::back_inserter(out), " {} {} {:.6f} {} {}", dash(r.upstream), dash(r.backend),
                 std::chrono::duration<double>(r.duration).count(), dash(info(r.reason).name),
                 dash(r.request_id));
}

}  // namespace

AccessLog::AccessLog(const LogParams& params) : format_(params.access_log_format) {
  if (params.access_log == "off") return;
  spdlog::sink_ptr sink;
  try {
    if (params.access_log == "stderr") {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(params.access_log);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("log.access_log: cannot open '" + params.access_log +
                             "': " + e.what());
  }
  sink->set_pattern("%v");
  pool_ = std::make_shared<spdlog::details::thread_pool>(kQueueLines, 1);
  logger_ = std::make_shared<spdlog::async_logger>("access", std::move(sink), pool_,
                                                   spdlog::async_overflow_policy::overrun_oldest);
  logger_->set_level(spdlog::level::info);
  logger_->flush_on(spdlog::level::info);
}

AccessLog::~AccessLog() {
  if (!logger_) return;
  logger_->flush();
  // Join the log thread (the pool's destructor) before the logger and its sink go away, so
  // nothing on that thread can touch them afterwards.
  pool_.reset();
  logger_.reset();
}

void AccessLog::write(const AccessRecord& r) {
  if (!logger_) return;
  fmt::memory_buffer line;
  if (format_ == AccessLogFormat::json) {
    format_json(line, r);
  } else {
    format_combined(line, r);
  }
  logger_->info(std::string_view(line.data(), line.size()));
}

uint64_t AccessLog::dropped() const {
  return pool_ ? pool_->overrun_counter() : 0;
}

void AccessLog::flush() {
  if (logger_) logger_->flush();
}

}  // namespace floodgate::proxy
