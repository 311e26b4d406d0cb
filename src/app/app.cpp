#include "app.h"

#include <sys/resource.h>

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdio>
#include <thread>

#include "admin_server.h"
#include "floodgate/config/config.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/metrics/prometheus.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/reactor.h"
#include "snapshot_builder.h"

namespace floodgate::app {

namespace asio = boost::asio;
using boost::system::error_code;

const char* version() {
  return FLOODGATE_VERSION;
}

namespace {

// server.workers, with 0 resolved to one reactor per core.
unsigned resolved_workers(const ServerParams& server) {
  return server.workers != 0 ? server.workers : std::max(1U, std::thread::hardware_concurrency());
}

spdlog::level::level_enum to_spdlog(LogLevel l) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(l));
}

// The process log (not the access log): stderr, asynchronous, so a reactor that logs an error
// never waits on the terminal or journal. Owns its worker thread explicitly: the destructor
// flushes, joins the thread, and only then releases the logger and its sink.
class ProcessLog {
 public:
  explicit ProcessLog(const LogParams& params)
      : pool_(std::make_shared<spdlog::details::thread_pool>(8192, 1)),
        logger_(std::make_shared<spdlog::async_logger>(
            "floodgate", std::make_shared<spdlog::sinks::stderr_sink_mt>(), pool_,
            spdlog::async_overflow_policy::overrun_oldest)) {
    logger_->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l floodgate: %v", spdlog::pattern_time_type::utc);
    logger_->set_level(to_spdlog(params.level));
    logger_->flush_on(spdlog::level::info);
    spdlog::set_default_logger(logger_);
  }
  ~ProcessLog() {
    logger_->flush();
    pool_.reset();  // joins the worker thread
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("floodgate-exit"));
    logger_.reset();
  }
  ProcessLog(const ProcessLog&) = delete;
  ProcessLog& operator=(const ProcessLog&) = delete;

 private:
  std::shared_ptr<spdlog::details::thread_pool> pool_;
  std::shared_ptr<spdlog::async_logger> logger_;
};

// Many idle keep-alive connections need many descriptors: raise the soft limit to the hard one.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int fail(const std::string& message) {
  std::fprintf(stderr, "floodgate: %s\n", message.c_str());
  return 1;
}

// Owns the running process: reactors, admin listener, signals and the shutdown sequence.
class Process {
 public:
  Process(std::shared_ptr<const proxy::Snapshot> snapshot, const config::Config& cfg,
          const std::string& path)
      : snapshot_(std::move(snapshot)),
        cfg_(cfg),
        path_(path),
        access_log_(cfg.log, resolved_workers(cfg.server)) {}

  int start() {
    const unsigned workers = resolved_workers(cfg_.server);
    for (unsigned i = 0; i < workers; ++i) {
      reactors_.push_back(std::make_unique<proxy::Reactor>(i, snapshot_, access_log_));
    }
    for (std::size_t l = 0; l < cfg_.server.listen.size(); ++l) {
      if (int rc = bind_listener(l); rc != 0) return rc;
    }
    try {
      admin_.emplace(io_, to_tcp(cfg_.admin.listen),
                     AdminServer::Handlers{[this](std::string& out) { render_metrics(out); },
                                           [this] { return draining_; }});
    } catch (const std::exception& e) {
      return fail(path_ + ": admin.listen: cannot listen on " + cfg_.admin.listen.text + ": " +
                  e.what());
    }
    for (auto& r : reactors_) r->start();
    spdlog::info("started {} worker(s); admin on {}", workers, cfg_.admin.listen.text);
    return 0;
  }

  int run() {
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    signals_.add(SIGHUP);
    wait_signal();
    io_.run();
    for (auto& r : reactors_) r->join();
    const uint64_t cut = [this] {
      uint64_t n = 0;
      for (auto& r : reactors_) n += r->cut_requests();
      return n;
    }();
    if (cut > 0) {
      spdlog::warn("shutdown cut {} in-flight request(s)", cut);
    } else {
      spdlog::info("shutdown complete");
    }
    access_log_.flush();
    return 0;
  }

 private:
  int bind_listener(std::size_t l) {
    const Endpoint& e = cfg_.server.listen[l];
    try {
      auto at = to_tcp(e);
      // Every reactor binds the same address (SO_REUSEPORT); port 0 is resolved by the first.
      for (auto& r : reactors_) at = r->listen(at);
      spdlog::info("listening on {}", at.address().to_string() + ":" + std::to_string(at.port()));
    } catch (const std::exception& ex) {
      return fail(path_ + ": server.listen[" + std::to_string(l) + "]: cannot listen on " + e.text +
                  ": " + ex.what());
    }
    return 0;
  }

  void wait_signal() {
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        spdlog::warn("SIGHUP ignored: configuration reload is not available in this version");
      } else if (!draining_) {
        begin_drain(sig);
      } else {
        spdlog::warn("second signal: closing in-flight requests now");
        force();
      }
      wait_signal();
    });
  }

  void begin_drain(int sig) {
    draining_ = true;
    spdlog::info("{} received: draining (at most {} ms)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                 cfg_.server.drain_timeout.count());
    for (auto& r : reactors_) r->drain();
    drain_timer_.expires_after(cfg_.server.drain_timeout);
    drain_timer_.async_wait([this](const error_code& ec) {
      if (ec) return;
      spdlog::warn("drain_timeout reached: closing in-flight requests");
      force();
    });
    poll_done();
  }

  void force() {
    for (auto& r : reactors_) r->force_close();
  }

  // Reactors end their threads when their last connection closes; the main loop ends then.
  void poll_done() {
    poll_timer_.expires_after(std::chrono::milliseconds(20));
    poll_timer_.async_wait([this](const error_code& ec) {
      if (ec) return;
      bool all_done = true;
      for (auto& r : reactors_) all_done = all_done && r->finished();
      if (!all_done) return poll_done();
      drain_timer_.cancel();
      signals_.cancel();
      if (admin_) admin_->close();
      io_.stop();
    });
  }

  void render_metrics(std::string& out) {
    std::vector<const ReactorMetrics*> shards;
    for (auto& r : reactors_) shards.push_back(&r->metrics());
    render_prometheus(shards, snapshot_->upstream_names, out);
    PrometheusWriter w(out);
    w.header("floodgate_access_log_dropped_total",
             "Access log lines dropped because the log queue was full.", MetricType::counter);
    w.sample("floodgate_access_log_dropped_total", {}, access_log_.dropped());
    w.header("floodgate_reactor_heap_allocations_total",
             "Heap allocations made on reactor threads: one per connection, none per request.",
             MetricType::counter);
    w.sample("floodgate_reactor_heap_allocations_total", {}, counted_heap_allocations());
  }

  std::shared_ptr<const proxy::Snapshot> snapshot_;
  const config::Config& cfg_;
  std::string path_;
  proxy::AccessLog access_log_;
  asio::io_context io_{1};
  asio::signal_set signals_{io_};
  asio::steady_timer drain_timer_{io_};
  asio::steady_timer poll_timer_{io_};
  std::optional<AdminServer> admin_;
  std::vector<std::unique_ptr<proxy::Reactor>> reactors_;
  bool draining_ = false;
};

}  // namespace

int run(const std::string& config_path) {
  const config::LoadResult loaded = config::load_file(config_path);
  for (const auto& d : loaded.diagnostics) std::fprintf(stderr, "%s\n", config::format(d).c_str());
  if (!loaded.ok()) return fail(config_path + ": configuration is invalid; nothing was started");
  const config::Config& cfg = *loaded.config;
  std::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  std::shared_ptr<const proxy::Snapshot> snapshot;
  try {
    snapshot = build_snapshot(cfg);
  } catch (const std::exception& e) {
    return fail(config_path + ": " + e.what());
  }
  ProcessLog process_log(cfg.log);
  std::unique_ptr<Process> process;
  try {
    process = std::make_unique<Process>(snapshot, cfg, config_path);
  } catch (const std::exception& e) {
    return fail(config_path + ": " + e.what());
  }
  if (const int rc = process->start(); rc != 0) return rc;
  return process->run();
}

}  // namespace floodgate::app
