#include "notify.h"

#include <systemd/sd-daemon.h>

#include <spdlog/spdlog.h>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace floodgate::app {

namespace {

// sd_notify's wire format is one VAR=value per line: a newline inside a value would end it.
std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000U + static_cast<uint64_t>(ts.tv_nsec) / 1000U;
}

}  // namespace

std::string ready_message(uint64_t generation) {
  return "READY=1\nSTATUS=serving generation " + std::to_string(generation);
}

std::string reloading_message(uint64_t monotonic_usec) {
  return "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec);
}

std::string reloaded_message(uint64_t generation, bool ok, std::string_view why) {
  const std::string gen = std::to_string(generation);
  if (ok) return "READY=1\nSTATUS=serving generation " + gen + " (reloaded)";
  return "READY=1\nSTATUS=reload refused (" + one_line(why) + "); generation " + gen +
         " keeps serving";
}

std::string stopping_message() {
  return "STOPPING=1\nSTATUS=draining";
}

std::string status_message(std::string_view text) {
  return "STATUS=" + one_line(text);
}

std::string keep_alive_message() {
  return "WATCHDOG=1";
}

Notifier::Notifier() : enabled_(std::getenv("NOTIFY_SOCKET") != nullptr) {
  uint64_t usec = 0;
  if (enabled_ && ::sd_watchdog_enabled(0, &usec) > 0) {
    watchdog_interval_ = std::chrono::microseconds(usec);
  }
}

void Notifier::ready(uint64_t generation) const {
  if (enabled_) send(ready_message(generation));
}

void Notifier::reloading() const {
  if (enabled_) send(reloading_message(monotonic_usec()));
}

void Notifier::reloaded(uint64_t generation, bool ok, std::string_view why) const {
  if (enabled_) send(reloaded_message(generation, ok, why));
}

void Notifier::stopping() const {
  if (enabled_) send(stopping_message());
}

void Notifier::status(std::string_view text) const {
  if (enabled_) send(status_message(text));
}

void Notifier::keep_alive() const {
  if (enabled_) send(keep_alive_message());
}

void Notifier::send(const std::string& message) const {
  const int rc = ::sd_notify(0, message.c_str());
  if (rc < 0) {
    spdlog::warn("sd_notify failed ({}): systemd was not told \"{}\"", std::strerror(-rc),
                 one_line(message));
  }
}

}  // namespace floodgate::app
