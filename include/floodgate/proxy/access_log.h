// The access log: one line per request, written by spdlog's asynchronous logger so a slow disk
// never blocks a reactor. Reactors format the line into a stack buffer and enqueue it; the log
// thread writes. When the queue is full the oldest lines are dropped (never blocking) and
// counted in floodgate_access_log_dropped_total.
//
// Thread-safety: write() may be called from any reactor concurrently; open/reopen/close from
// the main thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/core/reason.h"
#include "floodgate/proxy/params.h"

namespace spdlog {
class logger;
namespace details {
class thread_pool;
}
}  // namespace spdlog

namespace floodgate::proxy {

struct AccessRecord {
  std::chrono::system_clock::time_point time;
  std::string_view client;
  std::string_view method;
  std::string_view target;
  int status = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  std::string_view upstream;
  std::string_view backend;
  std::chrono::nanoseconds duration{0};
  Reason reason = Reason::none;
  std::string_view request_id;
};

class AccessLog {
 public:
  // Opens the log described by `params` ("off" disables it). Throws std::runtime_error with
  // the file name and reason when the file cannot be opened.
  explicit AccessLog(const LogParams& params);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  bool enabled() const { return logger_ != nullptr; }
  void write(const AccessRecord& r);
  uint64_t dropped() const;
  void flush();

 private:
  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::shared_ptr<spdlog::logger> logger_;
  AccessLogFormat format_;
};

}  // namespace floodgate::proxy
