// The access log: one line per request, written by a log thread of its own so a slow disk
// never blocks a reactor. A reactor formats the line into a stack buffer and pushes it into
// its own single-producer ring (core/spsc_ring.h): no lock, no allocation, no syscall. The log
// thread drains the rings and writes with an spdlog logger (file or stderr sink). When a
// reactor's ring is full the new line is dropped (never blocking) and counted in
// floodgate_access_log_dropped_total.
//
// Thread-safety: write() may be called from any reactor concurrently; open/reopen/close from
// the main thread only.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "floodgate/core/reason.h"
#include "floodgate/core/spsc_ring.h"
#include "floodgate/proxy/params.h"

namespace spdlog {
class logger;
}  // namespace spdlog

namespace floodgate::proxy {

struct AccessRecord {
  std::chrono::system_clock::time_point time;
  // The client: the connection's peer, or from a peer in server.trusted_proxies the address
  // its X-Forwarded-For gives, as for the client_ip key source (request_key.h).
  std::string_view client;
  std::string_view peer;  // the connection's peer address
  std::string_view host;  // the Host field, or an absolute-form / CONNECT target's authority
  std::string_view method;
  std::string_view target;
  std::string_view protocol;  // "HTTP/1.0", "HTTP/1.1" or "HTTP/2.0"; empty when unparsed
  uint32_t stream = 0;        // the HTTP/2 stream id; 0 on HTTP/1.x
  std::string_view user_agent;
  std::string_view referer;
  int status = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t body_bytes_sent = 0;  // bytes_out without the response heads (nginx's)
  std::string_view upstream;
  std::string_view backend;  // the backend whose response the client got (or the last tried)
  // Every send of the request to a backend, in order: a retry or a hedge makes two, and a
  // stale pooled connection's resend counts too (up to four); attempts = how many.
  std::array<std::string_view, 4> backends{};
  uint8_t attempts = 0;
  std::chrono::nanoseconds duration{0};
  // The answering attempt's time to connect to its backend (zero on a pooled connection) and
  // to the response head; negative when it did not get that far (or there was no attempt).
  std::chrono::nanoseconds connect_time{-1};
  std::chrono::nanoseconds head_time{-1};
  Reason reason = Reason::none;
  std::string_view rate_limit;  // the scoped rate limit that answered 429 rate_limited
  // The quota policy that answered, or recorded a shadow denial or a degraded decision.
  std::string_view quota;
  std::string_view request_id;
  Reason would_reject = Reason::none;  // what a stage in shadow mode would have answered
  // The client's TLS version and cipher suite ("TLSv1.3", "TLS_AES_128_GCM_SHA256"); empty on
  // a plain listener.
  std::string_view tls_version;
  std::string_view tls_cipher;
};

class AccessLog {
 public:
  // The stack buffer a line is formatted into: the longest line fits (every logged string is
  // bounded and escaped, access_log.cpp), so formatting never allocates.
  static constexpr std::size_t kLineBytes = std::size_t{72} * 1024;

  // Opens the log described by `params` ("off" disables it), with one queue per reactor
  // (`shards`). Throws std::runtime_error with the file name and reason when the file cannot
  // be opened.
  AccessLog(const LogParams& params, unsigned shards);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  bool enabled() const { return !shards_.empty(); }
  // Queues one line from reactor `shard` (its thread only): no lock, no allocation, no
  // syscall. Dropped (and counted) when the reactor's queue is full.
  void write(unsigned shard, const AccessRecord& r);
  uint64_t dropped() const;
  // Reopens the log file (SIGUSR1, after logrotate moved it), on the log thread; any thread.
  void reopen() { reopen_.store(true, std::memory_order_release); }
  // Writes out everything queued so far and stops the log thread (shutdown, after the
  // reactors have stopped).
  void flush();

 private:
  struct Shard;
  void run_writer();
  void open_logger();

  std::shared_ptr<spdlog::logger> logger_;  // used by the log thread only
  AccessLogFormat format_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> reopen_{false};
  std::string path_;  // the file, or "stderr" (nothing to reopen)
  std::thread writer_;
};

}  // namespace floodgate::proxy
