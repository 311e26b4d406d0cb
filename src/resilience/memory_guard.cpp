#include "floodgate/resilience/memory_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>

namespace floodgate::resilience {
namespace {

// A decimal number of kB as the kernel writes it: spaces, digits, optionally " kB", spaces.
std::optional<uint64_t> parse_kib(std::string_view value) noexcept {
  std::size_t i = 0;
  while (i < value.size() && value[i] == ' ') ++i;
  const std::size_t digits = i;
  uint64_t n = 0;
  for (; i < value.size() && value[i] >= '0' && value[i] <= '9'; ++i) {
    const auto d = static_cast<uint64_t>(value[i] - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  if (i == digits) return std::nullopt;
  std::string_view rest = value.substr(i);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.remove_suffix(1);
  if (!rest.empty() && rest != " kB") return std::nullopt;
  return n;
}

struct Field {
  std::string_view key;
  uint64_t MemInfo::*member;
  bool required;
};

constexpr std::array<Field, 4> kFields{{
    {"MemTotal", &MemInfo::mem_total_kib, true},
    {"MemAvailable", &MemInfo::mem_available_kib, true},
    {"SwapTotal", &MemInfo::swap_total_kib, false},
    {"SwapFree", &MemInfo::swap_free_kib, false},
}};

}  // namespace

std::optional<MemInfo> parse_meminfo(std::string_view text) noexcept {
  MemInfo info;
  std::array<bool, kFields.size()> seen{};
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    for (std::size_t f = 0; f < kFields.size(); ++f) {
      if (kFields[f].key != key) continue;
      const std::optional<uint64_t> kib = parse_kib(line.substr(colon + 1));
      if (!kib || seen[f]) return std::nullopt;
      seen[f] = true;
      info.*kFields[f].member = *kib;
    }
  }
  for (std::size_t f = 0; f < kFields.size(); ++f) {
    if (kFields[f].required && !seen[f]) return std::nullopt;
  }
  return info;
}

uint64_t available_mib(const MemInfo& info) noexcept {
  return (info.mem_available_kib + info.swap_free_kib) / 1024;
}

uint64_t resolve_floor_mib(const MemoryGuardParams& params, const MemInfo& info) noexcept {
  if (!params.automatic) return params.min_available_mib;
  const uint64_t percent_mib = info.mem_total_kib / 1024 * kAutoFloorPercent / 100;
  return std::max(kAutoFloorMinMib, percent_mib);
}

bool is_write(std::string_view method) noexcept {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

void MemoryGuard::publish(const MemInfo& info, uint64_t floor_mib) noexcept {
  available_kib_.store(info.mem_available_kib + info.swap_free_kib, std::memory_order_relaxed);
  available_mib_.store(resilience::available_mib(info), std::memory_order_relaxed);
  floor_mib_.store(floor_mib, std::memory_order_relaxed);
  samples_.store(samples_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  decide();
}

void MemoryGuard::set_floor(uint64_t floor_mib) noexcept {
  floor_mib_.store(floor_mib, std::memory_order_relaxed);
  decide();
}

// Single writer: the values just stored are the ones read back here.
void MemoryGuard::decide() noexcept {
  const uint64_t floor = floor_mib_.load(std::memory_order_relaxed);
  const bool sampled = samples_.load(std::memory_order_relaxed) != 0;
  const bool below = available_kib_.load(std::memory_order_relaxed) < floor * 1024;
  pressure_.store(sampled && floor != 0 && below, std::memory_order_relaxed);
}

MeminfoSampler::MeminfoSampler(const MemoryGuardParams& params, MemoryGuard& guard,
                               const Clock& clock)
    : params_(params), guard_(guard), clock_(clock) {}

bool MeminfoSampler::refresh() noexcept {
  if (!enabled()) return false;
  const Clock::time_point now = clock_.now();
  if (last_read_ && now - *last_read_ < kInterval) return false;
  last_read_ = now;
  const std::optional<std::size_t> length = read_file();
  std::optional<MemInfo> info;
  if (length) info = parse_meminfo(std::string_view(buf_.data(), *length));
  if (!info) {
    guard_.count_read_failure();
    return true;
  }
  last_ = *info;
  guard_.publish(*info, resolve_floor_mib(params_, *info));
  return true;
}

void MeminfoSampler::set_params(const MemoryGuardParams& params) {
  params_ = params;
  if (!enabled()) {
    guard_.set_floor(0);
  } else if (last_) {
    guard_.set_floor(resolve_floor_mib(params_, *last_));
  }
}

std::optional<std::size_t> MeminfoSampler::read_file() noexcept {
  const int fd = ::open(params_.meminfo.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::size_t length = 0;
  bool ok = true;
  while (length < buf_.size()) {
    const ssize_t n = ::read(fd, buf_.data() + length, buf_.size() - length);
    if (n > 0) {
      length += static_cast<std::size_t>(n);
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      ok = false;
      break;
    }
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  if (length == buf_.size()) {  // more than fits: keep the complete lines only
    const std::string_view kept(buf_.data(), length);
    const std::size_t eol = kept.rfind('\n');
    length = eol == std::string_view::npos ? 0 : eol + 1;
  }
  return length;
}

}  // namespace floodgate::resilience
