// Process: the standard process_* metrics (the names Prometheus client libraries and the
// node and HAProxy exporters use) and floodgate_build_info (process.h). Read at scrape time on
// the main thread, from getrusage(), getrlimit() and /proc/self: never on a reactor.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

#include "app.h"
#include "process.h"

namespace floodgate::app {
namespace {

// Descriptors open now: the entries of /proc/self/fd, less the one reading it. -1 when it
// cannot be read.
int64_t open_fds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;
}

// /proc/self/statm: total program size and resident set, in pages.
bool memory_pages(uint64_t& virtual_pages, uint64_t& resident_pages) {
  std::FILE* f = std::fopen("/proc/self/statm", "re");
  if (f == nullptr) return false;
  const bool ok = std::fscanf(f, "%lu %lu", &virtual_pages, &resident_pages) == 2;
  std::fclose(f);
  return ok;
}

}  // namespace

void Process::render_process_metrics(PrometheusWriter& w) {
  w.header("floodgate_build_info",
           "Always 1; the labels say which floodgate this is (version, git revision).",
           MetricType::gauge);
  const Label build[] = {{"version", version()}, {"revision", revision()}};
  w.sample("floodgate_build_info", build, uint64_t{1});

  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  w.header("process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
           MetricType::counter);
  w.sample("process_cpu_seconds_total", {}, seconds(usage.ru_utime) + seconds(usage.ru_stime));

  if (const int64_t fds = open_fds(); fds >= 0) {
    w.header("process_open_fds", "Open file descriptors.", MetricType::gauge);
    w.sample("process_open_fds", {}, fds);
  }
  if (rlimit rl{}; ::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    w.header("process_max_fds", "The limit on open file descriptors (RLIMIT_NOFILE).",
             MetricType::gauge);
    w.sample("process_max_fds", {},
             rl.rlim_cur == RLIM_INFINITY ? -1.0 : static_cast<double>(rl.rlim_cur));
  }
  if (uint64_t vsize = 0, rss = 0; memory_pages(vsize, rss)) {
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    w.header("process_virtual_memory_bytes", "Virtual memory size, in bytes.", MetricType::gauge);
    w.sample("process_virtual_memory_bytes", {}, vsize * page);
    w.header("process_resident_memory_bytes", "Resident memory size, in bytes.", MetricType::gauge);
    w.sample("process_resident_memory_bytes", {}, rss * page);
  }
  w.header("process_start_time_seconds", "When floodgate started, in seconds since the epoch.",
           MetricType::gauge);
  w.sample("process_start_time_seconds", {},
           std::chrono::duration<double>(started_at_.time_since_epoch()).count());
}

}  // namespace floodgate::app
