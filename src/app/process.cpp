// Process: start-up, the main loop, signals, draining and shutdown (process.h).
#include "process.h"

#include <malloc.h>

#include <algorithm>
#include <csignal>
#include <utility>

#include "app.h"
#include "fault_hooks.h"
#include "floodgate/core/heap_count.h"
#include "floodgate/net/ticket_keys.h"

namespace floodgate::app {

int Process::start() {
  spdlog::info("floodgate {} (revision {}) starting with {}", version(), revision(), path_);
  const unsigned workers = resolved_workers(start_.server);
  try {
    for (unsigned i = 0; i < workers; ++i) {
      reactors_.push_back(
          std::make_unique<proxy::Reactor>(i, gens_.active().snapshot, access_log_));
    }
  } catch (const std::system_error& ex) {
    return fail(path_ + ": " + ex.what());
  }
  for (auto& r : reactors_) r->share_bounds(workers);
  const proxy::Reactor& first = *reactors_.front();
  if (first.io_engine() == IoEngine::io_uring) {
    spdlog::info("event loop: io_uring");
  } else if (const std::string why = first.io_fallback_reason(); !why.empty()) {
    // Not a warning: "auto" (the default) asks for whichever loop the kernel offers.
    spdlog::info("event loop: epoll, because {}", why);
  } else {
    spdlog::info("event loop: epoll");
  }
  for (const Endpoint& e : start_.server.listen) {
    try {
      auto at = to_tcp(e);
      proxy::Reactor::ensure_unused(at);
      // Every reactor binds the same address (SO_REUSEPORT); port 0 is resolved by the first.
      for (auto& r : reactors_) at = r->listen(at, e.text);
      spdlog::info("listening on {}", at.address().to_string() + ":" + std::to_string(at.port()));
    } catch (const std::exception& ex) {
      return fail(path_ + ": server.listen: cannot listen on " + e.text + ": " + reason_of(ex));
    }
  }
  try {
    const floodgate::AdminParams& admin = start_.admin;
    admin_.emplace(
        io_,
        AdminServer::Listen{
            admin.unix_path.empty() ? to_tcp(admin.listen) : boost::asio::ip::tcp::endpoint{},
            admin.unix_path, admin.socket_mode},
        AdminServer::Handlers{
            [this](std::string& out) { render_metrics(out); }, [this] { return draining_; },
            [this](const AdminServer::Request& r,
                   const std::function<void(AdminServer::Response)>& reply) { control(r, reply); },
            [this](const AdminServer::Request& head) {
              // The token of the active generation (a reload may change it).
              return AdminServer::access_of(head, gens_.active().config.admin.token,
                                            !start_.admin.unix_path.empty());
            },
            [this] { return watchdog_drain_reason(); }, fault_hooks_built()});
  } catch (const std::exception& e) {
    return fail(path_ + ": admin.listen: cannot listen on " + start_.admin.listen.text + ": " +
                reason_of(e));
  }
  for (auto& r : reactors_) r->start();
  start_watchdog();
  health_.start();
  names_.watch(watched_names(gens_.active().config));
  health_.update(gens_.active().snapshot->generation, health_targets(*gens_.active().snapshot));
  spdlog::info("started {} worker(s); admin on {}; generation 1 ({})", workers,
               start_.admin.listen.text, gens_.active().snapshot->sha256);
  log_front(*gens_.active().snapshot, gens_.active().config);
  sampler_.refresh();
  log_swap(gens_.active().config.resilience.memory_guard);
  return 0;
}

// A host without swap leaves the guard MemAvailable alone. A warning when the operator set the
// floor (min_available as a number); with the default "auto" a note, said once per start: a
// warning about a default would come at every start of every host without swap.
void Process::log_swap(const resilience::MemoryGuardParams& guard) {
  const auto& m = sampler_.last();
  if (!m || resilience::has_swap(*m) || (!guard.automatic && guard.min_available_mib == 0)) {
    return;
  }
  const auto level = guard.automatic ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level,
              "this host has no swap: the memory guard (resilience.memory_guard) sees only "
              "MemAvailable, so a burst of writes can reach the OOM killer before the guard "
              "refuses them; consider adding swap");
}

int Process::run() {
  signals_.add(SIGTERM);
  signals_.add(SIGINT);
  signals_.add(SIGHUP);
  signals_.add(SIGUSR1);
  wait_signal();
  poll_trimmed();
  poll_memory();
  sweep_rate_limits();
  rotate_ticket_keys();
  summarise_shedding();
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

void Process::wait_signal() {
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

void Process::begin_drain(int sig) {
  // First: a reactor that finishes draining ends its loop, which the watchdog must not take for
  // a stall (and systemd expects no keep-alive from a stopping service).
  if (watchdog_) watchdog_->stop();
  draining_ = true;
  names_.stop();
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

void Process::start_watchdog() {
  std::vector<proxy::Reactor*> reactors;
  for (auto& r : reactors_) reactors.push_back(r.get());
  // The overload cause compares the adaptive ceiling's in-flight count with the ceiling now;
  // with no ceiling (adaptive admission off), the front cap's count with the cap (0 = no cap:
  // no overload cause). Both states are process-wide: the same objects in every generation.
  WatchdogThread::PressureSource pressure = [front = gens_.active().snapshot->front_state,
                                             protection =
                                                 gens_.active().snapshot->protection.state] {
    if (protection && protection->adaptive.ceiling() != 0) {
      return WatchdogThread::Pressure{.ceiling = protection->adaptive.ceiling()};
    }
    if (!front) return WatchdogThread::Pressure{};
    return WatchdogThread::Pressure{.ceiling = front->inflight.limit()};
  };
  watchdog_.emplace(std::move(reactors), std::move(pressure), notifier_);
  watchdog_->configure(gens_.active().config.resilience.watchdog, *gens_.active().snapshot);
}

std::string Process::watchdog_drain_reason() const {
  if (!watchdog_) return {};
  const resilience::WatchdogCauses causes = watchdog_->drain_causes();
  if (causes.empty()) return {};
  return "draining: watchdog (" + causes.to_string() + ")";
}

void Process::force() {
  for (auto& r : reactors_) r->begin_cut();  // all of them first (Reactor::begin_cut)
  for (auto& r : reactors_) r->force_close();
}

void Process::poll_memory() {
  memory_timer_.expires_after(std::chrono::milliseconds(250));
  memory_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;
    sampler_.refresh();
    poll_memory();
  });
}

void Process::rotate_ticket_keys() {
  ticket_timer_.expires_after(net::TicketKeys::kPeriod);
  ticket_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;
    if (!net::TicketKeys::process().rotate()) {
      spdlog::warn(
          "TLS session ticket keys not rotated: OpenSSL's random generator failed; "
          "the current keys stay for another period");
    }
    rotate_ticket_keys();
  });
}

void Process::poll_trimmed() {
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

void Process::summarise_shedding() {
  const auto interval = gens_.active().config.log.shed_summary_interval;
  const bool on = interval.count() != 0;
  shed_timer_.expires_after(on ? interval : std::chrono::milliseconds(1000));
  shed_timer_.async_wait([this, on](const error_code& ec) {
    if (ec) return;
    const auto now = std::chrono::steady_clock::now();
    std::vector<const ReactorMetrics*> shards;
    for (auto& r : reactors_) shards.push_back(&r->metrics());
    ShedCounts counts = read_shed_counts(shards, gens_.pool_names().size());
    const bool still_on = gens_.active().config.log.shed_summary_interval.count() != 0;
    if (on && still_on) {
      const auto elapsed =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - shed_read_at_);
      for (const ShedLine& line : shed_.summarise(counts, elapsed, gens_.pool_names())) {
        if (line.warning) {
          spdlog::warn("{}", line.text);
        } else {
          spdlog::info("{}", line.text);
        }
      }
    } else {
      shed_.rebase(std::move(counts));  // turned on or off: counts from here, anew
    }
    shed_read_at_ = now;
    summarise_shedding();
  });
}

void Process::sweep_rate_limits() {
  rate_timer_.expires_after(std::chrono::seconds(1));
  rate_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;
    const auto now = std::chrono::steady_clock::now();
    for (const proxy::RateLimitRule& rule : gens_.active().snapshot->rate_limits->rules) {
      rule.state->reclaim(now, rule.params.idle_ttl);
    }
    gens_.quota_state().sweep(now);  // quota buckets whose windows ended
    sweep_rate_limits();
  });
}

void Process::poll_done() {
  poll_timer_.expires_after(std::chrono::milliseconds(20));
  poll_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;
    bool all_done = true;
    for (auto& r : reactors_) all_done = all_done && r->finished();
    if (!all_done) return poll_done();
    drain_timer_.cancel();
    retire_timer_.cancel();
    trim_timer_.cancel();
    rate_timer_.cancel();
    memory_timer_.cancel();
    ticket_timer_.cancel();
    shed_timer_.cancel();
    signals_.cancel();
    if (admin_) admin_->close();
    io_.stop();
  });
}

}  // namespace floodgate::app
