// Notifier: tells the service manager (systemd, Type=notify) where floodgate's life stands,
// through libsystemd's sd_notify: READY=1 once it serves, RELOADING=1 / READY=1 around a
// configuration reload, STOPPING=1 when the drain starts, and a STATUS= line with the serving
// generation, shown by `systemctl status`.
//
// Under a unit with WatchdogSec=, systemd expects WATCHDOG=1 at least every WATCHDOG_USEC: the
// watchdog thread (watchdog.h) sends it, through keep_alive(), while every reactor is turning.
//
// Threading: main thread, except status() and keep_alive(), which the watchdog thread calls
// too. The class holds no mutable state and no lock; sd_notify itself opens a datagram socket
// per call, so concurrent calls are independent.
//
// Without NOTIFY_SOCKET in the environment (not started by systemd, or a unit that is not
// Type=notify) every call returns at once and sends nothing. NOTIFY_SOCKET is read once, at
// construction, and is left in the environment (sd_notify's unset_environment = 0).
//
// A message that cannot be sent is logged as a warning and otherwise ignored: serving traffic
// matters more than telling systemd about it (systemd then times the start or reload out and
// acts on its own).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::app {

class Notifier {
 public:
  Notifier();

  // Every listener (proxy and admin) is listening: READY=1, STATUS=serving generation N.
  void ready(uint64_t generation) const;

  // A reload begins: RELOADING=1 with MONOTONIC_USEC, the CLOCK_MONOTONIC time of this call in
  // microseconds (systemd >= 253 matches it against the reload it asked for). Each reloading()
  // must be followed by reloaded().
  void reloading() const;

  // A reload ended: READY=1 with a STATUS naming the generation that serves now. On failure
  // (ok = false) the STATUS says the reload was refused, why, and that `generation` (the old
  // one) keeps serving.
  void reloaded(uint64_t generation, bool ok, std::string_view why) const;

  // The drain begins: STOPPING=1, STATUS=draining. Send it once, on the first SIGTERM/SIGINT.
  void stopping() const;

  // STATUS=text alone, for anything else worth showing in `systemctl status` (any thread).
  void status(std::string_view text) const;

  // WATCHDOG=1: floodgate is alive (any thread). Only meaningful when watchdog_interval() is
  // non-zero.
  void keep_alive() const;

  // systemd's WATCHDOG_USEC for this process (sd_watchdog_enabled: WATCHDOG_PID, when set, must
  // be ours), read at construction; zero when systemd expects no keep-alive.
  std::chrono::microseconds watchdog_interval() const { return watchdog_interval_; }

  // True when NOTIFY_SOCKET was set at construction.
  bool enabled() const { return enabled_; }

 private:
  // Sends `message` (newline-separated VAR=value assignments) when enabled.
  void send(const std::string& message) const;

  bool enabled_;
  std::chrono::microseconds watchdog_interval_{0};
};

// The sd_notify message text for each event, exposed for unit tests. A newline inside `why` or
// `text` would start a new assignment, so each one becomes a space.
std::string ready_message(uint64_t generation);
std::string reloading_message(uint64_t monotonic_usec);
std::string reloaded_message(uint64_t generation, bool ok, std::string_view why);
std::string stopping_message();
std::string status_message(std::string_view text);
std::string keep_alive_message();

}  // namespace floodgate::app
