#include "app.h"

#include <sys/resource.h>

#include <fmt/chrono.h>
#include <malloc.h>
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <csignal>
#include <cstdio>
#include <thread>

#include "admin_server.h"
#include "config_diff.h"
#include "floodgate/config/config.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/health/checker.h"
#include "floodgate/metrics/prometheus.h"
#include "floodgate/proxy/access_log.h"
#include "floodgate/proxy/front_stages.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/resilience/memory_guard.h"
#include "generations.h"
#include "notify.h"
#include "pool_metrics.h"

namespace floodgate::app {

namespace asio = boost::asio;
using boost::system::error_code;

const char* version() {
  return FLOODGATE_VERSION;
}

namespace {

// True when the heap is glibc's malloc (floodgate_memory_* metrics, malloc_trim), false in a
// sanitizer build, whose allocator replaces it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kGlibcHeap = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kGlibcHeap = false;
#else
constexpr bool kGlibcHeap = true;
#endif
#else
constexpr bool kGlibcHeap = true;
#endif

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

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", std::chrono::floor<std::chrono::seconds>(t),
                     ms.count() % 1000);
}

// What the health task probes in `snap`: every peer of every pool (those of pools without
// [upstreams.health] only to be marked up and unprobed).
std::vector<health::Target> health_targets(const proxy::Snapshot& snap) {
  std::vector<health::Target> targets;
  for (const auto& up : snap.upstreams) {
    for (const auto& b : up->backends) {
      targets.push_back(health::Target{up->params.name, b->address.text, b->endpoint, b->health,
                                       up->params.health});
    }
  }
  return targets;
}

// GET /status: every pool of the serving generation with its admission figures and its peers'
// health.
boost::json::object status_json(const proxy::Snapshot& snap) {
  namespace json = boost::json;
  json::array pools;
  for (const auto& up : snap.upstreams) {
    json::array peers;
    for (const auto& b : up->backends) {
      const PeerHealth& h = *b->health;
      const int last = h.last_result.load(std::memory_order_relaxed);
      json::object peer{
          {"address", b->address.text},
          {"up", !h.down.load(std::memory_order_relaxed)},
          {"checked", h.checked.load(std::memory_order_relaxed)},
          {"active", b->load.active.load(std::memory_order_relaxed)},
          {"success_streak", h.success_streak.load(std::memory_order_relaxed)},
          {"failure_streak", h.failure_streak.load(std::memory_order_relaxed)},
          {"last_probe", last < 0 ? json::value(nullptr)
                                  : json::value(kProbeResultNames[static_cast<std::size_t>(last)])},
      };
      if (const int status = h.last_status.load(std::memory_order_relaxed); status != 0) {
        peer["last_status"] = status;
      }
      peers.push_back(std::move(peer));
    }
    const Admission& a = up->pool->admission;
    pools.push_back(json::object{{"name", up->params.name},
                                 {"health_checks", up->params.health.has_value()},
                                 {"active", a.active()},
                                 {"pending", a.pending()},
                                 {"limit", a.limit()},
                                 {"peers", std::move(peers)}});
  }
  json::object out{{"generation", snap.generation}};
  if (snap.front_state) {
    const proxy::FrontState& front = *snap.front_state;
    out["inflight"] =
        json::object{{"limit", snap.max_inflight}, {"in_flight", front.inflight.in_flight()}};
    out["memory_guard"] = json::object{{"available_mib", front.memory.available_mib()},
                                       {"floor_mib", front.memory.floor_mib()},
                                       {"under_pressure", front.memory.under_pressure()}};
  }
  out["pools"] = std::move(pools);
  return out;
}

// Owns the running process: reactors, admin listener, signals, configuration generations and
// the shutdown sequence. Main thread only.
class Process {
 public:
  Process(Generations gens, const std::string& path)
      : gens_(std::move(gens)),
        start_(gens_.active().config),
        path_(path),
        access_log_(start_.log, resolved_workers(start_.server)),
        serving_(gens_.active().snapshot) {}

  int start() {
    const unsigned workers = resolved_workers(start_.server);
    try {
      for (unsigned i = 0; i < workers; ++i) {
        reactors_.push_back(
            std::make_unique<proxy::Reactor>(i, gens_.active().snapshot, access_log_));
      }
    } catch (const std::system_error& ex) {
      return fail(path_ + ": " + ex.what());
    }
    const proxy::Reactor& first = *reactors_.front();
    if (first.io_engine() == IoEngine::io_uring) {
      spdlog::info("event loop: io_uring");
    } else if (const std::string why = first.io_fallback_reason(); !why.empty()) {
      spdlog::warn("event loop: epoll, because {} (server.io = \"epoll\" silences this)", why);
    } else {
      spdlog::info("event loop: epoll");
    }
    for (const Endpoint& e : start_.server.listen) {
      try {
        auto at = to_tcp(e);
        // Every reactor binds the same address (SO_REUSEPORT); port 0 is resolved by the first.
        for (auto& r : reactors_) at = r->listen(at, e.text);
        spdlog::info("listening on {}", at.address().to_string() + ":" + std::to_string(at.port()));
      } catch (const std::exception& ex) {
        return fail(path_ + ": server.listen: cannot listen on " + e.text + ": " + ex.what());
      }
    }
    try {
      admin_.emplace(
          io_, to_tcp(start_.admin.listen),
          AdminServer::Handlers{
              [this](std::string& out) { render_metrics(out); }, [this] { return draining_; },
              [this](const AdminServer::Request& r,
                     const std::function<void(AdminServer::Response)>& reply) {
                control(r, reply);
              },
              [this](std::string_view authorization) {
                // The token of the active generation (a reload may change it).
                const std::string& token = gens_.active().config.admin.token;
                return token.empty() || AdminServer::bearer_token_matches(authorization, token);
              }});
    } catch (const std::exception& e) {
      return fail(path_ + ": admin.listen: cannot listen on " + start_.admin.listen.text + ": " +
                  e.what());
    }
    for (auto& r : reactors_) r->start();
    health_.start();
    health_.update(gens_.active().snapshot->generation, health_targets(*gens_.active().snapshot));
    spdlog::info("started {} worker(s); admin on {}; generation 1 ({})", workers,
                 start_.admin.listen.text, gens_.active().snapshot->sha256);
    log_front(*gens_.active().snapshot, gens_.active().config);
    sampler_.refresh();
    if (const auto& m = sampler_.last(); m && !resilience::has_swap(*m)) {
      spdlog::warn(
          "this host has no swap: the memory guard (resilience.memory_guard) sees only "
          "MemAvailable, so a burst of writes can reach the OOM killer before the guard refuses "
          "them; consider adding swap");
    }
    return 0;
  }

  int run() {
    signals_.add(SIGTERM);
    signals_.add(SIGINT);
    signals_.add(SIGHUP);
    signals_.add(SIGUSR1);
    wait_signal();
    poll_trimmed();
    poll_memory();
    // Every listener is up (start()) and signals are caught from here on, so a stop is a
    // drain: tell systemd.
    notifier_.ready(gens_.active().snapshot->generation);
    io_.run();
    for (auto& r : reactors_) r->join();
    health_.stop();
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
  struct Outcome {
    config::LoadResult validation;  // diagnostics (valid only when there are no errors)
    std::string error;              // a failure after validation (binding, resolving)
    uint64_t generation = 0;        // set when activated
  };

  // Validates `source`; with `activate`, builds and publishes it as the next generation.
  Outcome apply(const std::string& source, const std::string& origin, bool activate,
                std::function<void()> served = {}) {
    Outcome out;
    out.validation = config::load_string(source, origin);
    if (!out.validation.ok()) return out;
    restart_only_changes(*out.validation.config, origin, out.validation);
    if (!out.validation.ok() || !activate) return out;
    Generations::Entry next;
    try {
      next = gens_.build(*out.validation.config, source);
    } catch (const std::exception& e) {
      out.error = e.what();
      return out;
    }
    if (!apply_listeners(next.config, out.error)) return out;
    publish(std::move(next), std::move(served));
    out.generation = gens_.active().snapshot->generation;
    return out;
  }

  // Keys a running floodgate cannot change: they are refused with the reason, so the file is
  // never half applied.
  void restart_only_changes(const config::Config& next, const std::string& origin,
                            config::LoadResult& result) {
    bool refused = false;
    auto refuse = [&](std::string path, std::string message) {
      result.diagnostics.push_back(config::Diagnostic{config::Diagnostic::Severity::error, origin,
                                                      0, 0, std::move(path), std::move(message)});
      refused = true;
    };
    const config::Config& now = start_;
    if (resolved_workers(next.server) != resolved_workers(now.server)) {
      refuse("server.workers", "the number of reactors cannot change while floodgate runs (" +
                                   std::to_string(resolved_workers(now.server)) +
                                   "); restart floodgate to apply it, or set it back");
    }
    if (next.server.io != now.server.io) {
      refuse("server.io",
             "the reactors' event loops are built at start; restart floodgate to "
             "change the kernel interface they use, or set it back");
    }
    if (next.admin.listen.text != now.admin.listen.text) {
      refuse("admin.listen", "the admin listener cannot move while floodgate runs (it is on " +
                                 now.admin.listen.text + "); restart floodgate to apply it");
    }
    if (next.log.access_log != now.log.access_log ||
        next.log.access_log_format != now.log.access_log_format) {
      refuse("log.access_log",
             "the access log's destination and format are fixed at start; "
             "restart floodgate to change them (SIGUSR1 reopens the file)");
    }
    if (next.server.max_headers > now.server.max_headers ||
        next.server.max_uri_bytes + next.server.max_header_bytes >
            now.server.max_uri_bytes + now.server.max_header_bytes) {
      refuse("server.max_header_bytes",
             "request buffers were sized at start for max_headers = " +
                 std::to_string(now.server.max_headers) +
                 " and max_uri_bytes + max_header_bytes = " +
                 std::to_string(now.server.max_uri_bytes + now.server.max_header_bytes) +
                 "; a reload may lower these limits, raising them needs a restart");
    }
    if (refused) result.config.reset();  // `next` refers into it: only now
  }

  // Binds addresses `next` adds (on every reactor) and closes those it removes. Nothing
  // changes when a bind fails.
  bool apply_listeners(const config::Config& next, std::string& error) {
    const auto& now = gens_.active().config.server.listen;
    auto listed = [](const std::vector<Endpoint>& list, const Endpoint& e) {
      return std::any_of(list.begin(), list.end(),
                         [&](const Endpoint& x) { return x.text == e.text; });
    };
    std::vector<std::pair<std::string, std::vector<int>>> opened;
    for (const Endpoint& e : next.server.listen) {
      if (listed(now, e)) continue;
      std::vector<int> fds;
      try {
        auto at = to_tcp(e);
        for (std::size_t i = 0; i < reactors_.size(); ++i) {
          boost::asio::ip::tcp::endpoint bound;
          fds.push_back(proxy::Reactor::open_listener(at, bound));
          at = bound;
        }
      } catch (const std::exception& ex) {
        for (int fd : fds) ::close(fd);
        for (auto& [key, list] : opened) {
          for (int fd : list) ::close(fd);
        }
        error = "server.listen: cannot listen on " + e.text + ": " + ex.what();
        return false;
      }
      opened.emplace_back(e.text, std::move(fds));
    }
    for (auto& [key, fds] : opened) {
      for (std::size_t i = 0; i < reactors_.size(); ++i) reactors_[i]->add_listener(fds[i], key);
      spdlog::info("listening on {}", key);
    }
    for (const Endpoint& e : now) {
      if (listed(next.server.listen, e)) continue;
      for (auto& r : reactors_) r->remove_listener(e.text);
      spdlog::info("no longer listening on {} (established connections carry on)", e.text);
    }
    return true;
  }

  void publish(Generations::Entry next, std::function<void()> served) {
    std::shared_ptr<const proxy::Snapshot> old = gens_.active().snapshot;
    const auto snap = next.snapshot;
    const std::string changes = summarize(config_diff(gens_.active().config, next.config));
    gens_.activate(std::move(next));
    install_everywhere(snap, std::move(served));
    ++reloads_ok_;
    last_success_ = std::chrono::system_clock::now();
    track_retirement(old);
    spdlog::info("generation {} active ({}): {}; generation {} retiring", snap->generation,
                 snap->sha256, changes, old->generation);
  }

  // Posts `snap` to every reactor; once all of them serve it, it is what GET /config reports
  // and `served` runs (main thread).
  void install_everywhere(const std::shared_ptr<const proxy::Snapshot>& snap,
                          std::function<void()> served) {
    spdlog::set_level(to_spdlog(snap->log.level));
    health_.update(snap->generation, health_targets(*snap));
    // The active generation is `snap` (publish and rollback activate before installing).
    log_front(*snap, gens_.active().config);
    sampler_.set_params(gens_.active().config.resilience.memory_guard);
    const uint64_t seq = ++publish_seq_;
    auto left = std::make_shared<std::size_t>(reactors_.size());
    auto on_main = [this, snap, seq, left, served = std::move(served)] {
      if (--*left != 0) return;
      if (seq == publish_seq_) serving_ = snap;  // a later publish wins
      if (served) served();
    };
    for (auto& r : reactors_) {
      r->activate(snap, [this, on_main] { asio::post(io_, on_main); });
    }
  }

  // --- Retirement: an old generation ends when its last request ends, or is forced after
  // server.retirement_grace (then requests on pools it alone had are ended).
  struct Retiring {
    std::weak_ptr<const proxy::Snapshot> snapshot;
    uint64_t generation;
    std::chrono::steady_clock::time_point deadline;
  };

  void track_retirement(const std::shared_ptr<const proxy::Snapshot>& old) {
    retiring_.push_back(Retiring{
        old, old->generation,
        std::chrono::steady_clock::now() + gens_.active().snapshot->server.retirement_grace});
    if (retiring_.size() == 1) poll_retirement();
  }

  void poll_retirement() {
    retire_timer_.expires_after(std::chrono::milliseconds(100));
    retire_timer_.async_wait([this](const error_code& ec) {
      if (ec) return;
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(retiring_, [&](const Retiring& r) {
        // The previous generation stays in memory for rollback; what matters is whether any
        // reactor still runs a request on it.
        const auto s = r.snapshot.lock();
        if (s == gens_.active().snapshot) return true;  // rolled back to: not retiring any more
        if (!s || s->reactor_holds.load(std::memory_order_acquire) == 0) {
          spdlog::info("generation {} retired", r.generation);
          return true;
        }
        if (now >= r.deadline) {
          spdlog::warn(
              "generation {}: retirement_grace passed; ending its requests on removed "
              "upstreams",
              r.generation);
          for (auto& reactor : reactors_) reactor->retire(r.generation);
          return true;
        }
        return false;
      });
      if (!retiring_.empty()) poll_retirement();
    });
  }

  // --- Control API (docs/operations.md) -----------------------------------------------------
  using Reply = std::function<void(AdminServer::Response)>;

  void control(const AdminServer::Request& req, const Reply& done) {
    namespace json = boost::json;
    auto reply = [&done](int status, const json::value& v) {
      done(AdminServer::Response{status, json::serialize(v) + "\n"});
    };
    auto message = [&](int status, std::string text) {
      reply(status, json::object{{"error", std::move(text)}});
    };
    auto invalid = [&done](const config::LoadResult& r) {
      done(AdminServer::Response{422, config::to_json(r) + "\n"});
    };
    if (req.path == "/status") {
      if (req.method != "GET") return message(405, "use GET /status");
      return reply(200, status_json(*serving_));
    }
    if (req.path == "/config") {
      if (req.method != "GET") return message(405, "use GET /config");
      const auto& snap = *serving_;  // what every reactor serves now
      return reply(200, json::object{{"generation", snap.generation},
                                     {"sha256", snap.sha256},
                                     {"loaded_at", rfc3339(snap.loaded_at)}});
    }
    const std::string_view action = std::string_view(req.path).substr(8);  // after "/config/"
    if (action != "validate" && action != "preview" && action != "activate" &&
        action != "rollback") {
      return message(404, "unknown path; see docs/operations.md for the control API");
    }
    if (req.method != "POST") return message(405, "use POST " + req.path);
    // The token was checked when the head was complete (AdminServer::Handlers::authorized).
    if (draining_) return message(503, "floodgate is shutting down");
    if (action == "validate") {
      return done(AdminServer::Response{
          200, config::to_json(apply(req.body, "request body", false).validation) + "\n"});
    }
    if (action == "preview") {
      Outcome o = apply(req.body, "request body", false);
      if (!o.validation.ok()) return invalid(o.validation);
      json::object changes = config_diff(gens_.active().config, *o.validation.config);
      changes["generation"] = gens_.active().snapshot->generation;
      return reply(200, changes);
    }
    if (action == "activate") {
      const bool from_file = req.body.empty();
      std::string source = req.body;
      if (from_file && !read_config_file(source)) {
        ++reloads_failed_;
        return message(500, "cannot read " + path_ + ": " + source);
      }
      Outcome o =
          reload(source, from_file ? path_ : std::string("request body"), "control API",
                 [done](uint64_t generation) {
                   done(AdminServer::Response{
                       200, json::serialize(json::object{{"generation", generation}}) + "\n"});
                 });
      if (!o.validation.ok()) return invalid(o.validation);
      if (o.generation == 0) return message(500, o.error);
      return;  // answered once every reactor serves it
    }
    // rollback
    const Generations::Entry* previous = gens_.previous();
    if (previous == nullptr) return message(409, "there is no previous generation to go back to");
    notifier_.reloading();
    const std::shared_ptr<const proxy::Snapshot> old = gens_.active().snapshot;
    std::string error;
    if (!apply_listeners(previous->config, error)) {
      notifier_.reloaded(old->generation, false, error);
      return message(500, error);
    }
    gens_.rollback();
    const auto snap = gens_.active().snapshot;
    track_retirement(old);
    spdlog::info("rollback: generation {} active again; generation {} retiring", snap->generation,
                 old->generation);
    install_everywhere(snap, [this, snap, done] {
      notifier_.reloaded(snap->generation, true, "");
      done(AdminServer::Response{
          200,
          boost::json::serialize(boost::json::object{{"generation", snap->generation}}) + "\n"});
    });
  }

  // The file's text, or the reason it cannot be read in `text`.
  bool read_config_file(std::string& text) {
    std::string why;
    if (config::read_file(path_, text, why)) return true;
    text = why;
    return false;
  }

  // A reload from SIGHUP or the control API: validate, build, publish; log the outcome.
  // `served` runs once every reactor serves the new generation.
  Outcome reload(const std::string& source, const std::string& origin, std::string_view trigger,
                 const std::function<void(uint64_t)>& served = {}) {
    notifier_.reloading();
    Outcome o = apply(source, origin, true, [this, served] {
      const uint64_t g = serving_->generation;
      notifier_.reloaded(g, true, "");
      if (served) served(g);
    });
    if (o.generation != 0) {
      for (const auto& d : o.validation.diagnostics) spdlog::warn("{}", config::format(d));
      return o;
    }
    ++reloads_failed_;
    spdlog::error("reload ({}) refused; generation {} keeps serving", trigger,
                  gens_.active().snapshot->generation);
    for (const auto& d : o.validation.diagnostics) spdlog::error("{}", config::format(d));
    if (!o.error.empty()) spdlog::error("{}: {}", origin, o.error);
    notifier_.reloaded(gens_.active().snapshot->generation, false,
                       o.error.empty() ? "invalid configuration" : o.error);
    return o;
  }

  void wait_signal() {
    signals_.async_wait([this](const error_code& ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        if (!draining_) {
          spdlog::info("SIGHUP: reloading {}", path_);
          std::string source;
          if (read_config_file(source)) {
            reload(source, path_, "SIGHUP");
          } else {
            ++reloads_failed_;
            spdlog::error("reload (SIGHUP) refused: cannot read {}: {}", path_, source);
          }
        }
      } else if (sig == SIGUSR1) {
        access_log_.reopen();
        spdlog::info("SIGUSR1: log files reopened");
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
    notifier_.stopping();
    const auto drain_timeout = gens_.active().snapshot->server.drain_timeout;
    spdlog::info("{} received: draining (at most {} ms)", sig == SIGINT ? "SIGINT" : "SIGTERM",
                 drain_timeout.count());
    for (auto& r : reactors_) r->drain();
    drain_timer_.expires_after(drain_timeout);
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

  // The reactors give idle buffer blocks back to the allocator (Reactor::housekeep); glibc keeps
  // freed memory in each thread's arena, so when some were given back since the last look, the
  // main thread asks it to return free pages to the kernel. Off the reactors: malloc_trim()
  // walks every arena under its lock and makes system calls.
  // The memory guard's sample, refreshed here on the main thread so that no reactor ever reads
  // a file: the sampler reads /proc/meminfo at most once a second (a procfs read never waits
  // for a disk), and the reactors see the result in one atomic load.
  void poll_memory() {
    memory_timer_.expires_after(std::chrono::milliseconds(250));
    memory_timer_.async_wait([this](const error_code& ec) {
      if (ec) return;
      sampler_.refresh();
      poll_memory();
    });
  }

  // The in-flight cap and the memory floor this generation resolved, at start and on reload.
  static void log_front(const proxy::Snapshot& snap, const config::Config& cfg) {
    const resilience::InflightParams& in = cfg.resilience.inflight;
    if (snap.max_inflight == 0) {
      spdlog::info("in-flight cap: off (resilience.inflight.max_inflight = 0)");
    } else {
      spdlog::info("in-flight cap: {} requests (resilience.inflight.max_inflight = {}{})",
                   snap.max_inflight, in.automatic ? "auto" : std::to_string(in.max_inflight),
                   in.mode == resilience::Mode::shadow ? ", shadow mode" : "");
    }
  }

  void poll_trimmed() {
    trim_timer_.expires_after(std::chrono::seconds(10));
    trim_timer_.async_wait([this](const error_code& ec) {
      if (ec) return;
      uint64_t trimmed = 0;
      for (auto& r : reactors_) {
        for (const auto kind : {BufferPoolKind::request, BufferPoolKind::response}) {
          trimmed += r->metrics().buffer_pool(kind).trimmed_bytes.value();
        }
      }
      if (trimmed != trimmed_seen_) {
        trimmed_seen_ = trimmed;
        if constexpr (kGlibcHeap) ::malloc_trim(0);
      }
      poll_trimmed();
    });
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
      retire_timer_.cancel();
      trim_timer_.cancel();
      memory_timer_.cancel();
      signals_.cancel();
      if (admin_) admin_->close();
      io_.stop();
    });
  }

  void render_front_metrics(PrometheusWriter& w) {
    const proxy::FrontState& front = gens_.front();
    w.header("floodgate_inflight_requests",
             "Requests holding a slot of the front in-flight cap (resilience.inflight).",
             MetricType::gauge);
    w.sample("floodgate_inflight_requests", {}, static_cast<double>(front.inflight.in_flight()));
    w.header("floodgate_inflight_limit",
             "The front in-flight cap as resolved (0 = no cap; resilience.inflight.max_inflight).",
             MetricType::gauge);
    w.sample("floodgate_inflight_limit", {}, static_cast<uint64_t>(serving_->max_inflight));
    w.header("floodgate_memory_guard_available_bytes",
             "MemAvailable + SwapFree at the memory guard's last sample (resilience.memory_guard).",
             MetricType::gauge);
    w.sample("floodgate_memory_guard_available_bytes", {},
             static_cast<double>(front.memory.available_mib()) * 1024 * 1024);
    w.header("floodgate_memory_guard_floor_bytes",
             "Below this, writes are refused with 503 memory_pressure (0 = guard off).",
             MetricType::gauge);
    w.sample("floodgate_memory_guard_floor_bytes", {},
             static_cast<double>(front.memory.floor_mib()) * 1024 * 1024);
    w.header("floodgate_memory_guard_samples_total",
             "Reads of the memory guard's meminfo file (at most one a second).",
             MetricType::counter);
    w.sample("floodgate_memory_guard_samples_total", {}, front.memory.samples());
    w.header("floodgate_memory_guard_read_failures_total",
             "Reads of the meminfo file that failed or could not be parsed (the last sample "
             "stands).",
             MetricType::counter);
    w.sample("floodgate_memory_guard_read_failures_total", {}, front.memory.read_failures());
  }

  void render_metrics(std::string& out) {
    std::vector<const ReactorMetrics*> shards;
    for (auto& r : reactors_) shards.push_back(&r->metrics());
    render_prometheus(shards, gens_.pool_names(), out);
    render_accept_errors(shards, out);
    PrometheusWriter w(out);
    if (admin_) {
      w.header("floodgate_admin_connections", "Open admin connections, this scrape's included.",
               MetricType::gauge);
      w.sample("floodgate_admin_connections", {},
               static_cast<uint64_t>(admin_->open_connections()));
      w.header("floodgate_admin_connections_refused_total",
               "Admin connections answered 503 because the connection limit was reached.",
               MetricType::counter);
      w.sample("floodgate_admin_connections_refused_total", {}, admin_->refused_connections());
    }
    render_pool_metrics(w, *serving_, shards);
    render_front_metrics(w);
    w.header("floodgate_access_log_dropped_total",
             "Access log lines dropped because the log queue was full.", MetricType::counter);
    w.sample("floodgate_access_log_dropped_total", {}, access_log_.dropped());
    w.header("floodgate_reactor_heap_allocations_total",
             "Heap allocations made on reactor threads: one per connection, none per request.",
             MetricType::counter);
    w.sample("floodgate_reactor_heap_allocations_total", {}, counted_heap_allocations());
    // glibc's view of the heap, all arenas (the way Envoy reports its allocator): what floodgate
    // has allocated, and what the allocator holds from the kernel for it. Not in sanitizer
    // builds, whose allocator glibc does not see.
    if constexpr (kGlibcHeap) {
      const struct mallinfo2 heap = ::mallinfo2();
      w.header("floodgate_memory_allocated_bytes",
               "Heap bytes floodgate has allocated now (glibc, all threads).", MetricType::gauge);
      w.sample("floodgate_memory_allocated_bytes", {},
               static_cast<uint64_t>(heap.uordblks + heap.hblkhd));
      w.header("floodgate_memory_heap_size_bytes",
               "Heap bytes the allocator holds from the kernel: allocated plus free for reuse.",
               MetricType::gauge);
      w.sample("floodgate_memory_heap_size_bytes", {},
               static_cast<uint64_t>(heap.arena + heap.hblkhd));
    }
    w.header("floodgate_config_generation", "The active configuration generation.",
             MetricType::gauge);
    w.sample("floodgate_config_generation", {}, static_cast<double>(serving_->generation));
    w.header("floodgate_config_reloads_total",
             "Reloads by result (SIGHUP and POST /config/activate; start-up not counted).",
             MetricType::counter);
    const Label ok[] = {{"result", "ok"}};
    const Label error[] = {{"result", "error"}};
    w.sample("floodgate_config_reloads_total", ok, reloads_ok_);
    w.sample("floodgate_config_reloads_total", error, reloads_failed_);
    w.header("floodgate_config_last_reload_success_timestamp_seconds",
             "When the active configuration was last loaded successfully (start-up included).",
             MetricType::gauge);
    w.sample("floodgate_config_last_reload_success_timestamp_seconds", {},
             std::chrono::duration<double>(last_success_.time_since_epoch()).count());
  }

  Generations gens_;
  const config::Config start_;  // the configuration floodgate started with
  std::string path_;
  proxy::AccessLog access_log_;
  asio::io_context io_{1};
  asio::signal_set signals_{io_};
  asio::steady_timer drain_timer_{io_};
  asio::steady_timer poll_timer_{io_};
  asio::steady_timer retire_timer_{io_};
  asio::steady_timer trim_timer_{io_};
  asio::steady_timer memory_timer_{io_};
  resilience::MeminfoSampler sampler_{gens_.active().config.resilience.memory_guard,
                                      gens_.front().memory, Clock::steady()};
  uint64_t trimmed_seen_ = 0;  // buffer bytes the reactors had given back at the last malloc_trim
  std::optional<AdminServer> admin_;
  std::vector<std::unique_ptr<proxy::Reactor>> reactors_;
  health::Checker health_;  // probes the peers of pools with [upstreams.health]
  std::vector<Retiring> retiring_;
  std::shared_ptr<const proxy::Snapshot> serving_;  // installed on every reactor
  uint64_t publish_seq_ = 0;
  uint64_t reloads_ok_ = 0;
  uint64_t reloads_failed_ = 0;
  std::chrono::system_clock::time_point last_success_ = std::chrono::system_clock::now();
  bool draining_ = false;
  Notifier notifier_;
};

}  // namespace

int run(const std::string& config_path) {
  std::string source;
  if (std::string why; !config::read_file(config_path, source, why)) {
    return fail(config_path + ": cannot read: " + why);
  }
  const config::LoadResult loaded = config::load_string(source, config_path);
  for (const auto& d : loaded.diagnostics) std::fprintf(stderr, "%s\n", config::format(d).c_str());
  if (!loaded.ok()) return fail(config_path + ": configuration is invalid; nothing was started");
  const config::Config& cfg = *loaded.config;
  std::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  Generations gens(resolved_workers(cfg.server));
  try {
    gens.activate(gens.build(cfg, source));
  } catch (const std::exception& e) {
    return fail(config_path + ": " + e.what());
  }
  ProcessLog process_log(cfg.log);
  std::unique_ptr<Process> process;
  try {
    process = std::make_unique<Process>(std::move(gens), config_path);
  } catch (const std::exception& e) {
    return fail(config_path + ": " + e.what());
  }
  if (const int rc = process->start(); rc != 0) return rc;
  return process->run();
}

}  // namespace floodgate::app
