// loadgen: an OPEN-LOOP HTTP/1.1 load generator for the overload lab.
//
// What it models: a large population of independent users. Requests arrive on a schedule
// (a fixed rate, or a Poisson process with --poisson) whatever happens to earlier requests, so
// a slow server faces MORE concurrent requests, never fewer, the way a real site does (a
// closed-loop tool like wrk slows down with the server and hides overload). Each user gives up
// after --timeout-ms and closes its connection, as browsers, mobile apps and upstream services
// with deadlines do.
//
// Connections: a request reuses an idle keep-alive connection whose previous response
// completed, else opens a new one. A request that times out closes its connection (a normal
// close, FIN, like a client abandoning a request). epoll, non-blocking sockets, edge-triggered,
// no limit but RLIMIT_NOFILE (raised to its hard limit).
//
// Accounting, exactly one outcome per request, decided when it happens:
//   succeeded  a 2xx response fully received before the deadline
//   rejected   a non-2xx response fully received before the deadline (a 503 from a proxy)
//   timed_out  no complete response by sched + timeout; the connection is closed then
//   error      connect failure, reset or EOF before a complete response, unparsable response,
//              or no socket available locally
// Latency is measured from the request's SCHEDULED time (not from when it was written), on
// CLOCK_MONOTONIC, so a late generator cannot hide queueing (no coordinated omission); the
// JSON reports how late the generator itself was (send_lag_ms).
//
// Phases: --phase DURATION@RATE, repeatable, run back to back (DURATION like 5s or 500ms,
// RATE in requests/s, 0 for a pause). After the last phase it waits for every request to end.
//
// Output: one JSON object on stdout (or --out FILE): totals per phase, and per time bucket
// (--bucket-ms, default 100) by scheduled send time: sent, succeeded, rejected, timed_out,
// errors, success and rejection latency p50/p99, plus ok_done (2xx responses completed in the
// bucket, i.e. goodput by completion time). Times in the JSON are seconds from the start.
//
// Retrying clients (--client-retries N, for the retry-storm experiment in bench/retry_storm/):
// a request that fails (a 5xx response, a timeout, or an error) is sent again at once, at most
// N times; a 2xx or a 4xx ends it. Each send (the original or a retry) is a request in the
// accounting above, with its own deadline (its send time + --timeout-ms), so the fields above
// count sends; the JSON then also has, at the top, per phase and per bucket: `originals`
// (original requests scheduled there), `originals_succeeded` (of those, the ones that
// eventually got a 2xx), `retries_sent` (retries sent there) and the latency of the
// originals that succeeded, from the original's scheduled time to the 2xx
// (original_success_p50_ms / _p99_ms). `ok_done` is then goodput by completion time: every
// original succeeds at most once. Retries continue after the last phase; their sends fall in
// buckets past the last phase. Without --client-retries the output is as before.
//
// --start-at-ns NS starts the first phase at NS on CLOCK_MONOTONIC (default: 10 ms from now),
// so that another process can line its own clock up with the buckets.
//
// --p999 adds success_p999_ms (the 99.9th percentile of the success latency) after
// success_p99_ms in every phase and bucket (for the hedging benchmark, bench/hedging/).
//
// Single-threaded. Usage: loadgen --port P --phase 5s@800 [--phase ...] [--host 127.0.0.1]
//   [--path /] [--timeout-ms 1000] [--poisson] [--seed N] [--bucket-ms 100] [--out FILE]
//   [--client-retries N] [--start-at-ns NS] [--p999]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Nanos = std::int64_t;
constexpr Nanos kNsPerMs = 1'000'000;
constexpr Nanos kNsPerSec = 1'000'000'000;

Nanos now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos{ts.tv_sec} * kNsPerSec + ts.tv_nsec;
}

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "loadgen: %s\n", msg.c_str());
  std::exit(2);
}

// --- options ---------------------------------------------------------------------------------

struct Phase {
  Nanos duration;
  double rate;
};

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path = "/";
  std::vector<Phase> phases;
  Nanos timeout = 1000 * kNsPerMs;
  bool poisson = false;
  std::uint64_t seed = 1;
  Nanos bucket = 100 * kNsPerMs;
  std::string out;
  int client_retries = 0;
  bool retries_set = false;  // --client-retries given: report the per-original fields
  Nanos start_at = 0;        // 0: 10 ms from now
  bool p999 = false;         // --p999: report success_p999_ms too
};

Nanos parse_duration(std::string_view s) {
  char* end = nullptr;
  std::string str(s);
  double v = std::strtod(str.c_str(), &end);
  std::string_view unit(end);
  if (end == str.c_str() || v < 0) fail("bad duration '" + str + "'");
  if (unit == "ms") return static_cast<Nanos>(v * kNsPerMs);
  if (unit == "s" || unit.empty()) return static_cast<Nanos>(v * kNsPerSec);
  fail("bad duration unit in '" + str + "' (use s or ms)");
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(std::string(a) + " needs a value");
      return argv[++i];
    };
    auto millis = [&]() { return static_cast<Nanos>(std::atof(value().c_str()) * kNsPerMs); };
    if (a == "--host") {
      o.host = value();
    } else if (a == "--port") {
      o.port = std::atoi(value().c_str());
    } else if (a == "--path") {
      o.path = value();
    } else if (a == "--timeout-ms") {
      o.timeout = millis();
    } else if (a == "--poisson") {
      o.poisson = true;
    } else if (a == "--seed") {
      o.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--bucket-ms") {
      o.bucket = millis();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--client-retries") {
      o.client_retries = std::atoi(value().c_str());
      o.retries_set = true;
      if (o.client_retries < 0 || o.client_retries > 100) fail("--client-retries wants 0..100");
    } else if (a == "--p999") {
      o.p999 = true;
    } else if (a == "--start-at-ns") {
      o.start_at = static_cast<Nanos>(std::strtoll(value().c_str(), nullptr, 10));
    } else if (a == "--phase") {
      std::string p = value();
      auto at = p.find('@');
      if (at == std::string::npos) fail("--phase wants DURATION@RATE, got '" + p + "'");
      double rate = std::atof(p.c_str() + at + 1);
      if (rate < 0) fail("negative rate in '" + p + "'");
      o.phases.push_back({parse_duration(p.substr(0, at)), rate});
    } else {
      fail("unknown option '" + std::string(a) + "' (see the header of loadgen.cpp)");
    }
  }
  if (o.port <= 0 || o.port > 65535) fail("--port is required");
  if (o.phases.empty()) fail("at least one --phase DURATION@RATE is required");
  if (o.timeout <= 0 || o.bucket <= 0) fail("--timeout-ms and --bucket-ms must be positive");
  return o;
}

// --- HTTP/1.1 response parser (incremental) --------------------------------------------------

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool has_token(std::string_view list, std::string_view token) {
  std::size_t pos = 0;
  while (pos <= list.size()) {
    auto comma = list.find(',', pos);
    auto item = list.substr(pos, comma == std::string_view::npos ? list.npos : comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return false;
}

// Parses one response to a GET. feed() consumes bytes and says whether the response is complete,
// still incomplete, or malformed; eof() says whether EOF completes it (close-delimited body).
class ResponseParser {
 public:
  enum class Result { kIncomplete, kComplete, kBad };

  void reset() { *this = ResponseParser{}; }
  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }
  bool eof_completes() const { return state_ == State::kUntilClose; }

  Result feed(const char* p, std::size_t n, std::size_t& extra) {
    extra = 0;
    std::size_t i = 0;
    while (i < n) {
      switch (state_) {
        case State::kHead: {
          std::size_t take = n - i;
          head_.append(p + i, take);
          auto end = head_.find("\r\n\r\n");
          if (end == std::string::npos) {
            if (head_.size() > 65536) return Result::kBad;
            return Result::kIncomplete;
          }
          // Bytes after the head that belong to the body go back to the loop.
          std::size_t used = take - (head_.size() - (end + 4));
          head_.resize(end + 4);
          i += used;
          if (!parse_head()) return Result::kBad;
          if (state_ == State::kDone) {
            extra = n - i;
            return Result::kComplete;
          }
          break;
        }
        case State::kBody: {
          std::size_t take = std::min<std::size_t>(remaining_, n - i);
          remaining_ -= take;
          i += take;
          if (remaining_ == 0) {
            state_ = State::kDone;
            extra = n - i;
            return Result::kComplete;
          }
          break;
        }
        case State::kUntilClose:
          i = n;
          break;
        case State::kChunkSize:
        case State::kChunkDataEnd:
        case State::kTrailer: {
          char ch = p[i++];
          line_ += ch;
          if (line_.size() > 4096) return Result::kBad;
          if (ch != '\n') break;
          std::string_view line(line_);
          if (state_ == State::kChunkSize) {
            char* end = nullptr;
            unsigned long long size = std::strtoull(line_.c_str(), &end, 16);
            if (end == line_.c_str()) return Result::kBad;
            remaining_ = size;
            state_ = size == 0 ? State::kTrailer : State::kChunkData;
          } else if (state_ == State::kChunkDataEnd) {
            if (line != "\r\n") return Result::kBad;
            state_ = State::kChunkSize;
          } else if (line == "\r\n") {  // end of trailers
            state_ = State::kDone;
            extra = n - i;
            return Result::kComplete;
          }
          line_.clear();
          break;
        }
        case State::kChunkData: {
          std::size_t take = std::min<std::size_t>(remaining_, n - i);
          remaining_ -= take;
          i += take;
          if (remaining_ == 0) state_ = State::kChunkDataEnd;
          break;
        }
        case State::kDone:
          extra = n - i;
          return Result::kComplete;
      }
    }
    return Result::kIncomplete;
  }

 private:
  enum class State {
    kHead,
    kBody,
    kUntilClose,
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailer,
    kDone
  };

  bool parse_head() {
    std::string_view head(head_);
    // "HTTP/1.x SSS reason"
    if (head.size() < 12 || head.substr(0, 7) != "HTTP/1.") return false;
    bool http10 = head[7] == '0';
    status_ = std::atoi(std::string(head.substr(9, 3)).c_str());
    if (status_ < 100 || status_ > 999) return false;
    keep_alive_ = !http10;
    bool chunked = false;
    long long length = -1;
    auto pos = head.find("\r\n") + 2;
    while (pos < head.size()) {
      auto eol = head.find("\r\n", pos);
      if (eol == std::string_view::npos || eol == pos) break;
      std::string_view h = head.substr(pos, eol - pos);
      pos = eol + 2;
      auto colon = h.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view name = h.substr(0, colon), value = h.substr(colon + 1);
      if (iequals(name, "content-length"))
        length = std::atoll(std::string(value).c_str());
      else if (iequals(name, "transfer-encoding"))
        chunked = has_token(value, "chunked");
      else if (iequals(name, "connection")) {
        if (has_token(value, "close")) keep_alive_ = false;
        if (has_token(value, "keep-alive")) keep_alive_ = true;
      }
    }
    if (status_ < 200) {  // interim response: parse the next head
      if (status_ == 101) return false;
      head_.clear();
      state_ = State::kHead;
      return true;
    }
    if (status_ == 204 || status_ == 304) {
      state_ = State::kDone;
    } else if (chunked) {
      state_ = State::kChunkSize;
    } else if (length >= 0) {
      remaining_ = static_cast<std::uint64_t>(length);
      state_ = length == 0 ? State::kDone : State::kBody;
    } else {
      state_ = State::kUntilClose;
      keep_alive_ = false;
    }
    return true;
  }

  State state_ = State::kHead;
  std::string head_;
  std::string line_;
  std::uint64_t remaining_ = 0;
  int status_ = 0;
  bool keep_alive_ = true;
};

// --- requests and connections ----------------------------------------------------------------

enum class Outcome : std::uint8_t { kPending, kSucceeded, kRejected, kTimedOut, kError };
enum class ErrorKind : std::uint8_t { kNone, kConnect, kReset, kBadResponse, kNoSocket };

struct Request {
  Nanos sched;  // scheduled send time: latency and deadline are measured from it
  Nanos done = -1;
  int fd = -1;  // connection carrying it while pending
  std::uint16_t status = 0;
  std::uint16_t phase = 0;
  Outcome outcome = Outcome::kPending;
  ErrorKind error = ErrorKind::kNone;
  // --client-retries: the original request this send belongs to (itself for an original),
  // which send of it this is (0 = the original), and, on the original, how it ended after
  // all its sends (final, final_done).
  std::int64_t origin = -1;
  std::uint8_t attempt = 0;
  Outcome final = Outcome::kPending;
  Nanos final_done = -1;
};

enum class ConnState : std::uint8_t { kClosed, kConnecting, kSending, kWaiting, kIdle };

struct Conn {
  ConnState state = ConnState::kClosed;
  std::uint64_t gen = 0;  // distinguishes successive connections on the same fd number
  std::int64_t req = -1;
  std::size_t sent = 0;  // bytes of the request written
  ResponseParser parser;
};

struct Counters {
  std::uint64_t opened = 0, reused = 0, closed_by_timeout = 0, closed_by_server = 0;
  std::uint64_t errors_by_kind[5] = {};
  Nanos max_lag = 0;
  std::vector<float> lag_ms;
};

class LoadGen {
 public:
  explicit LoadGen(Options o) : opt_(std::move(o)), rng_(opt_.seed) {
    request_ = "GET " + opt_.path + " HTTP/1.1\r\nHost: " + opt_.host +
               "\r\nUser-Agent: floodgate-loadgen\r\n\r\n";
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(static_cast<std::uint16_t>(opt_.port));
    if (inet_pton(AF_INET, opt_.host.c_str(), &addr_.sin_addr) != 1) fail("--host must be IPv4");
  }

  void run();
  void report(std::FILE* out) const;

 private:
  void issue(std::int64_t idx, Nanos now);
  void issue_retries(Nanos now);
  std::uint16_t phase_at(Nanos t) const;
  bool next_arrival();
  void expire(Nanos now);
  void finish(std::int64_t idx, Outcome outcome, Nanos now, ErrorKind error = ErrorKind::kNone);
  void on_event(int fd, std::uint32_t events);
  void on_connected(int fd);
  void send_request(int fd);
  void read_response(int fd);
  void close_conn(int fd);
  void arm_timer(Nanos when);
  Conn& conn(int fd) {
    if (static_cast<std::size_t>(fd) >= conns_.size()) conns_.resize(fd + 4096);
    return conns_[fd];
  }

  Options opt_;
  std::mt19937_64 rng_;
  std::string request_;
  sockaddr_in addr_{};
  int ep_ = -1, tfd_ = -1;
  Nanos t0_ = 0;
  std::size_t phase_ = 0;  // phase of the next arrival
  Nanos phase_start_ = 0;
  std::uint64_t phase_k_ = 0;  // arrivals already scheduled in this phase
  Nanos next_sched_ = 0;       // scheduled time of the next arrival
  bool generating_ = true;
  Nanos armed_ = -1;
  std::uint64_t next_gen_ = 1;
  std::vector<Request> reqs_;
  std::deque<std::int64_t> inflight_;                // pending requests in deadline (= sched) order
  std::vector<std::pair<int, std::uint64_t>> idle_;  // LIFO of keep-alive connections
  std::vector<Conn> conns_;
  Counters counters_;
  std::vector<std::int64_t> retry_due_;  // failed sends to send again (--client-retries)
};

// Advances to the next scheduled arrival; false once the last phase is over.
bool LoadGen::next_arrival() {
  while (phase_ < opt_.phases.size()) {
    const Phase& ph = opt_.phases[phase_];
    Nanos end = phase_start_ + ph.duration;
    if (ph.rate > 0) {
      Nanos t;
      if (opt_.poisson) {
        std::exponential_distribution<double> gap(ph.rate);
        Nanos prev = phase_k_ == 0 ? phase_start_ : next_sched_;
        t = prev + static_cast<Nanos>(gap(rng_) * kNsPerSec);
      } else {
        // k-th arrival at start + k/rate: no accumulated rounding drift.
        t = phase_start_ + static_cast<Nanos>(static_cast<double>(phase_k_) * kNsPerSec / ph.rate);
      }
      if (t < end) {
        ++phase_k_;
        next_sched_ = t;
        return true;
      }
    }
    ++phase_;
    phase_start_ = end;
    phase_k_ = 0;
  }
  return false;
}

void LoadGen::run() {
  ep_ = epoll_create1(EPOLL_CLOEXEC);
  tfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (ep_ < 0 || tfd_ < 0) fail("epoll_create1/timerfd_create failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = tfd_;
  epoll_ctl(ep_, EPOLL_CTL_ADD, tfd_, &ev);

  double expected = 0;
  for (const Phase& p : opt_.phases)
    expected += p.rate * static_cast<double>(p.duration) / kNsPerSec;
  reqs_.reserve(static_cast<std::size_t>(expected * 1.1) + 16);
  counters_.lag_ms.reserve(reqs_.capacity());

  t0_ = now_ns() + 10 * kNsPerMs;
  if (opt_.start_at != 0) {
    if (opt_.start_at < now_ns()) fail("--start-at-ns is in the past");
    t0_ = opt_.start_at;
  }
  phase_start_ = t0_;
  generating_ = next_arrival();
  std::vector<epoll_event> events(1024);
  for (;;) {
    Nanos now = now_ns();
    while (generating_ && next_sched_ <= now) {
      reqs_.push_back(Request{next_sched_, -1, -1, 0, static_cast<std::uint16_t>(phase_)});
      reqs_.back().origin = static_cast<std::int64_t>(reqs_.size()) - 1;
      issue(static_cast<std::int64_t>(reqs_.size()) - 1, now);
      generating_ = next_arrival();
    }
    expire(now);
    // After the arrivals due by `now` and with their send time `now`, so inflight_ stays in
    // deadline order.
    while (!retry_due_.empty()) issue_retries(now);
    if (!generating_ && inflight_.empty()) break;
    Nanos wake = inflight_.empty() ? INT64_MAX : reqs_[inflight_.front()].sched + opt_.timeout;
    if (generating_) wake = std::min(wake, next_sched_);
    arm_timer(wake);
    int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0 && errno != EINTR) fail(std::string("epoll_wait: ") + std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == tfd_) {
        std::uint64_t expirations;
        [[maybe_unused]] auto r = read(tfd_, &expirations, sizeof expirations);
      } else {
        on_event(fd, events[i].events);
      }
    }
  }
  for (auto [fd, gen] : idle_) {
    if (conn(fd).state == ConnState::kIdle && conn(fd).gen == gen) close_conn(fd);
  }
}

void LoadGen::arm_timer(Nanos when) {
  if (when == armed_) return;
  armed_ = when;
  itimerspec its{};
  if (when != INT64_MAX) {
    when = std::max<Nanos>(when, 1);
    its.it_value.tv_sec = when / kNsPerSec;
    its.it_value.tv_nsec = when % kNsPerSec;
  }
  timerfd_settime(tfd_, TFD_TIMER_ABSTIME, &its, nullptr);
}

// The phase that time t falls in (the last one after the end).
std::uint16_t LoadGen::phase_at(Nanos t) const {
  Nanos end = t0_;
  for (std::size_t i = 0; i < opt_.phases.size(); ++i) {
    end += opt_.phases[i].duration;
    if (t < end) return static_cast<std::uint16_t>(i);
  }
  return static_cast<std::uint16_t>(opt_.phases.size() - 1);
}

// Sends again, now, every failed send in retry_due_ (a send that fails at once, e.g. with no
// local socket, is queued again for the caller's next round).
void LoadGen::issue_retries(Nanos now) {
  std::vector<std::int64_t> due;
  due.swap(retry_due_);
  for (std::int64_t failed : due) {
    Request next{now, -1, -1, 0, phase_at(now)};
    next.origin = reqs_[failed].origin;
    next.attempt = static_cast<std::uint8_t>(reqs_[failed].attempt + 1);
    reqs_.push_back(next);
    issue(static_cast<std::int64_t>(reqs_.size()) - 1, now);
  }
}

// Sends request idx on an idle keep-alive connection, or on a new one.
void LoadGen::issue(std::int64_t idx, Nanos now) {
  if (reqs_[idx].attempt == 0) {  // a retry is sent on time by construction
    Nanos lag = now - reqs_[idx].sched;
    counters_.max_lag = std::max(counters_.max_lag, lag);
    counters_.lag_ms.push_back(static_cast<float>(lag) / kNsPerMs);
  }
  inflight_.push_back(idx);
  while (!idle_.empty()) {
    auto [fd, gen] = idle_.back();
    idle_.pop_back();
    Conn& c = conn(fd);
    if (c.state != ConnState::kIdle || c.gen != gen) continue;  // closed meanwhile
    ++counters_.reused;
    c.state = ConnState::kSending;
    c.req = idx;
    c.sent = 0;
    c.parser.reset();
    reqs_[idx].fd = fd;
    send_request(fd);
    return;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    finish(idx, Outcome::kError, now, ErrorKind::kNoSocket);
    return;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  Conn& c = conn(fd);
  c = Conn{};
  c.gen = next_gen_++;
  c.req = idx;
  c.state = ConnState::kConnecting;
  reqs_[idx].fd = fd;
  ++counters_.opened;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.fd = fd;
  epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  int r = connect(fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_);
  if (r == 0) {
    on_connected(fd);
  } else if (errno != EINPROGRESS) {
    ErrorKind kind =
        (errno == EADDRNOTAVAIL || errno == EAGAIN) ? ErrorKind::kNoSocket : ErrorKind::kConnect;
    finish(idx, Outcome::kError, now, kind);
    close_conn(fd);
  }
}

// Times out every pending request whose deadline has passed, closing its connection.
void LoadGen::expire(Nanos now) {
  while (!inflight_.empty()) {
    std::int64_t idx = inflight_.front();
    Request& r = reqs_[idx];
    if (r.outcome == Outcome::kPending) {
      if (r.sched + opt_.timeout > now) return;
      int fd = r.fd;
      finish(idx, Outcome::kTimedOut, now);
      if (fd >= 0) {
        ++counters_.closed_by_timeout;
        close_conn(fd);
      }
    }
    inflight_.pop_front();
  }
}

// Records the one outcome of request idx and detaches it from its connection.
void LoadGen::finish(std::int64_t idx, Outcome outcome, Nanos now, ErrorKind error) {
  Request& r = reqs_[idx];
  if (r.outcome != Outcome::kPending) fail("internal error: a request got two outcomes");
  r.outcome = outcome;
  r.error = error;
  r.done = now;
  if (outcome == Outcome::kError) ++counters_.errors_by_kind[static_cast<int>(error)];
  if (r.fd >= 0 && conn(r.fd).req == idx) conn(r.fd).req = -1;
  r.fd = -1;
  // --client-retries: a 5xx, a timeout or an error is sent again (by the main loop, not from
  // here: this may run in the middle of a connection's event handling).
  bool failed = outcome == Outcome::kTimedOut || outcome == Outcome::kError ||
                (outcome == Outcome::kRejected && r.status >= 500);
  if (failed && r.attempt < opt_.client_retries) {
    retry_due_.push_back(idx);
  } else {
    Request& original = reqs_[r.origin];
    original.final = outcome;
    original.final_done = now;
  }
}

void LoadGen::on_event(int fd, std::uint32_t events) {
  Conn& c = conn(fd);
  switch (c.state) {
    case ConnState::kConnecting:
      if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) on_connected(fd);
      break;
    case ConnState::kSending:
      if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) send_request(fd);
      if (conn(fd).state == ConnState::kWaiting && (events & (EPOLLIN | EPOLLRDHUP)))
        read_response(fd);
      break;
    case ConnState::kWaiting:
      if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) read_response(fd);
      break;
    case ConnState::kIdle: {
      // Anything on an idle connection is the server closing it (or garbage): drop it.
      ++counters_.closed_by_server;
      close_conn(fd);
      break;
    }
    case ConnState::kClosed:
      break;
  }
}

void LoadGen::on_connected(int fd) {
  Conn& c = conn(fd);
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    if (c.req >= 0) finish(c.req, Outcome::kError, now_ns(), ErrorKind::kConnect);
    close_conn(fd);
    return;
  }
  c.state = ConnState::kSending;
  c.sent = 0;
  c.parser.reset();
  send_request(fd);
}

void LoadGen::send_request(int fd) {
  Conn& c = conn(fd);
  while (c.sent < request_.size()) {
    ssize_t w = send(fd, request_.data() + c.sent, request_.size() - c.sent, MSG_NOSIGNAL);
    if (w > 0) {
      c.sent += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;  // EPOLLOUT edge will resume
    if (c.req >= 0) finish(c.req, Outcome::kError, now_ns(), ErrorKind::kReset);
    close_conn(fd);
    return;
  }
  c.state = ConnState::kWaiting;
  // The response may already be there (edge-triggered: no new edge for it).
  read_response(fd);
}

void LoadGen::read_response(int fd) {
  char buf[16384];
  for (;;) {
    Conn& c = conn(fd);
    if (c.state != ConnState::kWaiting) return;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    Nanos now = now_ns();
    if (n <= 0) {  // EOF or reset
      if (n == 0 && c.parser.eof_completes() && c.req >= 0) {
        std::int64_t idx = c.req;
        int status = c.parser.status();
        reqs_[idx].status = static_cast<std::uint16_t>(status);
        finish(idx, status / 100 == 2 ? Outcome::kSucceeded : Outcome::kRejected, now);
      } else if (c.req >= 0) {
        finish(c.req, Outcome::kError, now, ErrorKind::kReset);
      }
      close_conn(fd);
      return;
    }
    std::size_t extra = 0;
    auto result = c.parser.feed(buf, static_cast<std::size_t>(n), extra);
    if (result == ResponseParser::Result::kIncomplete) continue;
    if (result == ResponseParser::Result::kBad || c.req < 0) {
      if (c.req >= 0) finish(c.req, Outcome::kError, now, ErrorKind::kBadResponse);
      close_conn(fd);
      return;
    }
    std::int64_t idx = c.req;
    int status = c.parser.status();
    reqs_[idx].status = static_cast<std::uint16_t>(status);
    finish(idx, status / 100 == 2 ? Outcome::kSucceeded : Outcome::kRejected, now);
    // A FIN that came with the response raised no edge of its own: look for it now, or
    // the next request would be sent on a connection the server has closed.
    if (c.parser.keep_alive() && extra == 0 &&
        recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK) < 0 && errno == EAGAIN) {
      c.state = ConnState::kIdle;
      idle_.emplace_back(fd, c.gen);
    } else {
      close_conn(fd);
    }
    return;
  }
}

void LoadGen::close_conn(int fd) {
  Conn& c = conn(fd);
  if (c.state == ConnState::kClosed) return;
  c.state = ConnState::kClosed;
  c.req = -1;
  c.parser.reset();
  close(fd);  // also leaves the epoll set
}

// --- report ----------------------------------------------------------------------------------

double percentile(std::vector<float>& v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  std::size_t rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void print_ms(std::FILE* out, const char* key, double v) {
  if (std::isnan(v))
    std::fprintf(out, "\"%s\": null", key);
  else
    std::fprintf(out, "\"%s\": %.3f", key, v);
}

struct Tally {
  std::uint64_t sent = 0, succeeded = 0, rejected = 0, timed_out = 0, errors = 0, ok_done = 0;
  std::vector<float> ok_ms, rej_ms;
  std::map<int, std::uint64_t> statuses;
  // --client-retries only
  std::uint64_t originals = 0, originals_succeeded = 0, retries_sent = 0;
  std::vector<float> original_ok_ms;

  void add_original(const Request& r) {
    ++originals;
    if (r.final == Outcome::kSucceeded) {
      ++originals_succeeded;
      original_ok_ms.push_back(static_cast<float>(r.final_done - r.sched) / kNsPerMs);
    }
  }

  void print_retries(std::FILE* out) {
    std::fprintf(out,
                 ", \"originals\": %" PRIu64 ", \"originals_succeeded\": %" PRIu64
                 ", \"retries_sent\": %" PRIu64 ", ",
                 originals, originals_succeeded, retries_sent);
    print_ms(out, "original_success_p50_ms", percentile(original_ok_ms, 50));
    std::fprintf(out, ", ");
    print_ms(out, "original_success_p99_ms", percentile(original_ok_ms, 99));
  }

  void add(const Request& r, double latency_ms) {
    ++sent;
    switch (r.outcome) {
      case Outcome::kSucceeded:
        ++succeeded;
        ok_ms.push_back(static_cast<float>(latency_ms));
        break;
      case Outcome::kRejected:
        ++rejected;
        rej_ms.push_back(static_cast<float>(latency_ms));
        break;
      case Outcome::kTimedOut:
        ++timed_out;
        break;
      case Outcome::kError:
        ++errors;
        break;
      case Outcome::kPending:
        break;
    }
    if (r.status != 0) ++statuses[r.status];
  }

  void print(std::FILE* out, bool p999) {
    std::fprintf(out,
                 "\"sent\": %" PRIu64 ", \"succeeded\": %" PRIu64 ", \"rejected\": %" PRIu64
                 ", \"timed_out\": %" PRIu64 ", \"errors\": %" PRIu64 ", \"ok_done\": %" PRIu64
                 ", ",
                 sent, succeeded, rejected, timed_out, errors, ok_done);
    print_ms(out, "success_p50_ms", percentile(ok_ms, 50));
    std::fprintf(out, ", ");
    print_ms(out, "success_p99_ms", percentile(ok_ms, 99));
    std::fprintf(out, ", ");
    if (p999) {
      print_ms(out, "success_p999_ms", percentile(ok_ms, 99.9));
      std::fprintf(out, ", ");
    }
    print_ms(out, "success_max_ms",
             ok_ms.empty() ? NAN : *std::max_element(ok_ms.begin(), ok_ms.end()));
    std::fprintf(out, ", ");
    print_ms(out, "reject_p50_ms", percentile(rej_ms, 50));
    std::fprintf(out, ", ");
    print_ms(out, "reject_p99_ms", percentile(rej_ms, 99));
    std::fprintf(out, ", \"statuses\": {");
    bool first = true;
    for (auto [status, count] : statuses) {
      std::fprintf(out, "%s\"%d\": %" PRIu64, first ? "" : ", ", status, count);
      first = false;
    }
    std::fprintf(out, "}");
  }
};

void LoadGen::report(std::FILE* out) const {
  std::vector<Tally> phases(opt_.phases.size());
  Nanos total = 0;
  for (const Phase& p : opt_.phases) total += p.duration;
  std::size_t nbuckets = static_cast<std::size_t>((total + opt_.bucket - 1) / opt_.bucket);
  if (opt_.retries_set) {  // retries go on after the last phase: buckets for them too
    for (const Request& r : reqs_)
      nbuckets = std::max(nbuckets, static_cast<std::size_t>((r.sched - t0_) / opt_.bucket) + 1);
  }
  std::vector<Tally> buckets(nbuckets);
  Tally originals;
  for (const Request& r : reqs_) {
    double latency = static_cast<double>(r.done - r.sched) / kNsPerMs;
    phases[r.phase].add(r, latency);
    std::size_t b = std::min(nbuckets - 1, static_cast<std::size_t>((r.sched - t0_) / opt_.bucket));
    buckets[b].add(r, latency);
    if (opt_.retries_set && r.attempt == 0) {
      phases[r.phase].add_original(r);
      buckets[b].add_original(r);
      originals.add_original(r);
    } else if (opt_.retries_set) {
      ++phases[r.phase].retries_sent;
      ++buckets[b].retries_sent;
      ++originals.retries_sent;
    }
    if (r.outcome == Outcome::kSucceeded) {
      std::size_t d = static_cast<std::size_t>((r.done - t0_) / opt_.bucket);
      if (d < nbuckets) ++buckets[d].ok_done;
      if (r.done - t0_ < total) {
        // ok_done per phase: by completion time, within the phase's time span.
        Nanos start = 0;
        for (std::size_t i = 0; i < opt_.phases.size(); ++i) {
          if (r.done - t0_ < start + opt_.phases[i].duration) {
            ++phases[i].ok_done;
            break;
          }
          start += opt_.phases[i].duration;
        }
      }
    }
  }
  std::fprintf(out, "{\"timeout_ms\": %.3f, \"bucket_ms\": %.3f, \"poisson\": %s, ",
               static_cast<double>(opt_.timeout) / kNsPerMs,
               static_cast<double>(opt_.bucket) / kNsPerMs, opt_.poisson ? "true" : "false");
  std::vector<float> lag = counters_.lag_ms;
  std::fprintf(out,
               "\"requests\": %zu, \"connections_opened\": %" PRIu64
               ", \"connections_reused\": %" PRIu64 ", \"closed_by_timeout\": %" PRIu64
               ", \"idle_closed_by_server\": %" PRIu64 ", ",
               reqs_.size(), counters_.opened, counters_.reused, counters_.closed_by_timeout,
               counters_.closed_by_server);
  std::fprintf(out,
               "\"errors_by_kind\": {\"connect\": %" PRIu64 ", \"reset\": %" PRIu64
               ", \"bad_response\": %" PRIu64 ", \"no_socket\": %" PRIu64 "}, ",
               counters_.errors_by_kind[1], counters_.errors_by_kind[2],
               counters_.errors_by_kind[3], counters_.errors_by_kind[4]);
  print_ms(out, "send_lag_p99_ms", percentile(lag, 99));
  std::fprintf(out, ", ");
  print_ms(out, "send_lag_max_ms", static_cast<double>(counters_.max_lag) / kNsPerMs);
  if (opt_.start_at != 0) std::fprintf(out, ", \"start_at_ns\": %" PRId64, opt_.start_at);
  if (opt_.retries_set) {
    std::fprintf(out, ", \"client_retries\": %d", opt_.client_retries);
    originals.print_retries(out);
  }
  std::fprintf(out, ",\n\"phases\": [");
  Nanos start = 0;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    std::fprintf(out, "%s\n {\"start_s\": %.3f, \"duration_s\": %.3f, \"rate\": %.3f, ",
                 i ? "," : "", static_cast<double>(start) / kNsPerSec,
                 static_cast<double>(opt_.phases[i].duration) / kNsPerSec, opt_.phases[i].rate);
    phases[i].print(out, opt_.p999);
    if (opt_.retries_set) phases[i].print_retries(out);
    std::fprintf(out, "}");
    start += opt_.phases[i].duration;
  }
  std::fprintf(out, "],\n\"buckets\": [");
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::fprintf(out, "%s\n {\"t_s\": %.3f, ", b ? "," : "",
                 static_cast<double>(b * opt_.bucket) / kNsPerSec);
    buckets[b].print(out, opt_.p999);
    if (opt_.retries_set) buckets[b].print_retries(out);
    std::fprintf(out, "}");
  }
  std::fprintf(out, "]}\n");
}

void raise_nofile() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse_options(argc, argv);
  raise_nofile();
  prctl(PR_SET_TIMERSLACK, 1UL);  // send on schedule, not up to 50 us later
  std::signal(SIGPIPE, SIG_IGN);
  std::FILE* out = stdout;
  if (!opt.out.empty()) {
    out = std::fopen(opt.out.c_str(), "w");
    if (out == nullptr) fail("cannot open " + opt.out);
  }
  LoadGen gen(std::move(opt));
  gen.run();
  gen.report(out);
  if (out != stdout) std::fclose(out);
  return 0;
}
