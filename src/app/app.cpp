#include "app.h"

#include <sys/resource.h>

#include <fmt/chrono.h>
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <boost/system/system_error.hpp>
#include <csignal>
#include <cstdio>
#include <thread>

#include "process.h"

namespace floodgate::app {

namespace {

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

}  // namespace

// server.workers, with 0 resolved to one reactor per core.
unsigned resolved_workers(const ServerParams& server) {
  return server.workers != 0 ? server.workers : std::max(1U, std::thread::hardware_concurrency());
}

spdlog::level::level_enum to_spdlog(LogLevel l) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(l));
}

int fail(const std::string& message) {
  std::fprintf(stderr, "floodgate: %s\n", message.c_str());
  return 1;
}

std::string reason_of(const std::exception& e) {
  if (const auto* b = dynamic_cast<const boost::system::system_error*>(&e)) {
    return b->code().message();
  }
  if (const auto* s = dynamic_cast<const std::system_error*>(&e)) return s->code().message();
  return e.what();
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
    for (std::size_t i = 0; i < up->backends.size(); ++i) {
      const auto& b = up->backends[i];
      targets.push_back(health::Target{up->params.name, b->address.text, b->endpoint, b->health,
                                       up->params.health, up->tls, up->hosts[i]});
    }
  }
  return targets;
}

// GET /status: every pool of the serving generation with its admission figures and its peers'
// health.
namespace {

// The server entry a backend comes from, as written: its address, or the host name that
// resolved to it (docs/configuration.md, "Backends by name").
std::string server_of(const UpstreamParams& p, const std::string& address) {
  for (const ServerEntry& s : p.servers) {
    for (const Endpoint& e : s.resolved) {
      if (e.text == address) return s.address.text;
    }
  }
  return address;
}

}  // namespace

boost::json::object status_json(const proxy::Snapshot& snap) {
  namespace json = boost::json;
  json::array pools;
  const auto now = Clock::steady().now();
  for (const auto& up : snap.upstreams) {
    json::array peers;
    for (const auto& b : up->backends) {
      const PeerHealth& h = *b->health;
      const int last = h.last_result.load(std::memory_order_relaxed);
      json::object peer{
          {"address", b->address.text},
          {"server", server_of(up->params, b->address.text)},
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
      const resilience::CircuitBreaker& cb = *b->breaker;
      static constexpr std::string_view kStates[] = {"closed", "open", "half_open"};
      peer["circuit"] = json::object{
          {"state", kStates[static_cast<std::size_t>(cb.state(now))]},
          {"failure_streak", cb.streak()},
          {"probes_in_flight", cb.probes_in_flight()},
      };
      peers.push_back(std::move(peer));
    }
    const Admission& a = up->pool->admission;
    pools.push_back(json::object{
        {"name", up->params.name},
        {"health_checks", up->params.health.has_value()},
        {"active", a.active()},
        {"pending", a.pending()},
        {"limit", a.limit()},
        {"route_cap",
         json::object{{"limit", up->route_cap}, {"in_flight", up->pool->route_cap.active()}}},
        {"backends", std::move(peers)}});
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
  if (const auto& state = snap.protection.state) {
    const resilience::AimdLimits& aimd = snap.protection.aimd;
    out["adaptive_admission"] = json::object{{"ceiling", state->adaptive.ceiling()},
                                             {"in_flight", state->adaptive.in_flight()},
                                             {"min", aimd.min},
                                             {"max", aimd.max}};
    out["brownout"] = json::object{{"enabled", snap.protection.brownout && aimd.max != 0},
                                   {"active", state->brownout.active()}};
    out["global_cap"] = json::object{{"limit", snap.protection.global_cap},
                                     {"in_flight", state->global_cap.active()}};
  }
  out["pools"] = std::move(pools);
  return out;
}

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
