// slow_backend: a capacity-limited HTTP/1.1 backend for the overload lab.
//
// What it models: an application server with W worker slots, each of which takes a fixed
// service time S per request (a thread pool in front of a database, say). Capacity is exactly
// W * 1000 / S requests per second. Requests beyond W wait in an UNBOUNDED FIFO, as they do in
// the accept queue and thread-pool queue of most real servers.
//
// The property the lab depends on: the backend never cancels work. A request whose client has
// gone away is still taken from the FIFO and still keeps its slot busy for S ms; only its
// response is thrown away. (To stay under RLIMIT_NOFILE during a collapse, the socket of a peer
// that closed is released as soon as its EOF is read, but its queued requests remain queued.)
// Serving dead requests is what makes an overload collapse metastable: once the queue is longer
// than the clients' timeout, every request is served too late, so the queue never shrinks.
//
// Service is simulated with one timerfd, not by burning CPU: the process is idle apart from
// parsing and writing, so it does not compete with the proxy under test for the 2 CPUs.
// A slot freed at time d starts the next waiting request at d exactly (not when the timer
// fires), so timer slack does not erode capacity.
//
// Protocol: HTTP/1.1 keep-alive and pipelining (responses in request order), Content-Length
// request bodies (skipped), "Connection: close" and HTTP/1.0 honoured. Chunked request bodies
// are answered 501 and the connection is closed (the lab only sends GETs).
//
// Capacity at runtime (the retry-storm experiment, bench/retry_storm/): SIGUSR1 switches to
// --degraded-workers slots (default W / 2), SIGUSR2 back to W. Requests already running keep
// their slot until they finish; a slot above the new count is retired when it frees, and a
// slot added later is free from the moment of the signal.
//
// Per-bucket counts (--stats-out FILE): every request received, started and completed (with
// or without its client still there), the longest queue and the queue wait, per
// --stats-bucket-ms (default 100) of CLOCK_MONOTONIC, with buckets aligned to multiples of the
// bucket length since the clock's origin (so another process's buckets on the same clock line
// up), written to FILE as one JSON object on exit. See write_stats() for the format.
//
// Service that depends on the load and random outliers (the adaptive-admission benchmark,
// bench/adaptive/), both off by default: --per-active-ms K makes a request's service time
// S + K x (the other requests in service when it starts), a backend whose latency grows with
// its concurrency (lock or cache contention); capacity is then W x 1000 / (S + K x (W - 1))
// with every slot busy. --outlier-percent P makes P % of the requests, drawn at random
// (--seed), take --outlier-ms of service instead (a slow query), in their slot like any other.
//
// Usage: slow_backend [--port P] [--workers W] [--service-ms S] [--body-bytes N]
//   [--degraded-workers N] [--stats-out FILE] [--stats-bucket-ms MS]
//   [--per-active-ms K] [--outlier-percent P] [--outlier-ms MS] [--seed N]
// Prints the bound port on the first line of stdout (so --port 0 works), then runs until
// SIGTERM/SIGINT, when it prints counters as one JSON line on stderr and exits 0.
// Single-threaded; one epoll loop.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Nanos = std::int64_t;

Nanos now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "slow_backend: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

struct Options {
  int port = 0;
  int workers = 16;
  double service_ms = 10.0;
  std::size_t body_bytes = 13;
  int degraded_workers = 0;  // 0: W / 2 (at least 1)
  std::string stats_out;     // empty: no per-bucket counts
  double stats_bucket_ms = 100.0;
  double per_active_ms = 0.0;    // service grows by this per other request in service
  double outlier_percent = 0.0;  // share of requests served in outlier_ms instead
  double outlier_ms = 0.0;
  std::uint64_t seed = 1;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "slow_backend: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--port")
      o.port = std::atoi(value());
    else if (a == "--workers")
      o.workers = std::atoi(value());
    else if (a == "--service-ms")
      o.service_ms = std::atof(value());
    else if (a == "--body-bytes")
      o.body_bytes = std::strtoul(value(), nullptr, 10);
    else if (a == "--degraded-workers")
      o.degraded_workers = std::atoi(value());
    else if (a == "--stats-out")
      o.stats_out = value();
    else if (a == "--stats-bucket-ms")
      o.stats_bucket_ms = std::atof(value());
    else if (a == "--per-active-ms")
      o.per_active_ms = std::atof(value());
    else if (a == "--outlier-percent")
      o.outlier_percent = std::atof(value());
    else if (a == "--outlier-ms")
      o.outlier_ms = std::atof(value());
    else if (a == "--seed")
      o.seed = std::strtoull(value(), nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: slow_backend [--port P] [--workers W] [--service-ms S] "
                   "[--body-bytes N] [--degraded-workers N] [--stats-out FILE] "
                   "[--stats-bucket-ms MS] [--per-active-ms K] [--outlier-percent P] "
                   "[--outlier-ms MS] [--seed N]\n");
      std::exit(2);
    }
  }
  if (o.degraded_workers == 0) o.degraded_workers = std::max(1, o.workers / 2);
  if (o.workers < 1 || o.service_ms < 0 || o.port < 0 || o.port > 65535 || o.degraded_workers < 1 ||
      !(o.stats_bucket_ms >= 1) || !(o.per_active_ms >= 0) ||
      !(o.outlier_percent >= 0 && o.outlier_percent <= 100) || !(o.outlier_ms >= 0)) {
    std::fprintf(stderr, "slow_backend: invalid options\n");
    std::exit(2);
  }
  return o;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

bool contains_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// A connection, indexed by fd. `gen` tells a job whether the fd it refers to is still the same
// connection: the fd of a closed peer may be reused while its requests are still queued.
struct Conn {
  bool open = false;
  std::uint64_t gen = 0;
  std::string in;
  std::string out;
  std::size_t body_left = 0;   // request body bytes still to skip
  std::uint64_t next_seq = 0;  // sequence of the next parsed request on this connection
  std::uint64_t done_seq = 0;  // responses written so far (pipelining order check)
  bool close_after = false;    // close once the response to request close_seq is written
  std::uint64_t close_seq = 0;
  bool want_out = false;  // EPOLLOUT registered
};

struct Job {
  int fd;
  std::uint64_t gen;
  std::uint64_t seq;  // per-connection sequence number
  bool close;         // the request asked to close the connection
  Nanos arrival;
};

// Counts of one stats bucket (--stats-out). Each event is counted at the time it happens in
// the model: arrival when parsed, start and completion at their scheduled times.
struct Bucket {
  std::uint64_t received = 0, started = 0, responded = 0, discarded = 0;
  std::size_t queued_max = 0;        // longest FIFO (waiting, not running) seen in the bucket
  Nanos wait_sum = 0, wait_max = 0;  // queue wait of the requests started in the bucket
};

struct Running {
  Nanos deadline;
  std::uint64_t order;  // global start order: tie-break for equal deadlines
  Job job;
  bool operator>(const Running& o) const {
    return deadline != o.deadline ? deadline > o.deadline : order > o.order;
  }
};

class Server {
 public:
  explicit Server(const Options& o)
      : opt_(o),
        service_(static_cast<Nanos>(o.service_ms * 1e6)),
        rng_(o.seed),
        free_since_(o.workers, 0),
        bucket_(static_cast<Nanos>(o.stats_bucket_ms * 1e6)),
        first_bucket_(now_ns() / bucket_) {
    std::string body(o.body_bytes, 'x');
    if (!body.empty()) body.back() = '\n';
    ok_response_ = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body;
    ok_close_response_ =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
  }

  int listen_and_print_port();
  void run();
  void print_counters() const;
  void write_stats() const;

 private:
  void on_accept();
  void on_readable(int fd);
  void on_writable(int fd);
  bool parse_requests(int fd);
  void reject_and_close(int fd, const char* response);
  void start_waiting();
  void complete_due(Nanos now);
  void arm_timer();
  void flush(int fd);
  void close_conn(int fd);
  void set_out_interest(int fd, bool want);
  void on_signalfd();
  void set_workers(int workers, Nanos now);
  Nanos service_for(std::size_t others);
  Bucket* stats(Nanos t);

  Options opt_;
  Nanos service_;
  std::mt19937_64 rng_;  // --outlier-percent draws
  std::uniform_real_distribution<double> percent_{0.0, 100.0};
  int ep_ = -1, lfd_ = -1, tfd_ = -1, sfd_ = -1;
  std::vector<Conn> conns_;
  std::uint64_t next_gen_ = 1;
  std::deque<Job> waiting_;  // unbounded FIFO
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running_;
  std::vector<Nanos> free_since_;  // free slots: since when each is free
  std::uint64_t start_order_ = 0;
  Nanos armed_ = -1;
  std::string ok_response_, ok_close_response_;

  // counters
  std::uint64_t accepted_ = 0, requests_ = 0, responded_ = 0, discarded_ = 0;
  std::size_t max_waiting_ = 0;

  // capacity at runtime (SIGUSR1 / SIGUSR2)
  int retiring_ = 0;  // busy slots to remove when they free
  std::vector<std::pair<Nanos, int>> capacity_changes_;

  // per-bucket counts (--stats-out)
  Nanos bucket_;
  std::int64_t first_bucket_;  // index of buckets_[0] on CLOCK_MONOTONIC / bucket_
  std::vector<Bucket> buckets_;
};

// The service time of a request that starts with `others` requests in service: S, plus
// --per-active-ms per other request, or --outlier-ms for the --outlier-percent drawn at random.
// With neither option it is S, and no random number is drawn.
Nanos Server::service_for(std::size_t others) {
  if (opt_.outlier_percent > 0 && percent_(rng_) < opt_.outlier_percent)
    return static_cast<Nanos>(opt_.outlier_ms * 1e6);
  if (opt_.per_active_ms > 0)
    return service_ + static_cast<Nanos>(opt_.per_active_ms * 1e6 * static_cast<double>(others));
  return service_;
}

Bucket* Server::stats(Nanos t) {
  if (opt_.stats_out.empty()) return nullptr;
  std::int64_t i = t / bucket_ - first_bucket_;
  if (i < 0) i = 0;  // not possible: every event is after the start
  if (static_cast<std::size_t>(i) >= buckets_.size()) buckets_.resize(i + 64);
  return &buckets_[i];
}

// The number of slots becomes `workers`: free slots are removed at once, busy ones when their
// request finishes (retiring_); new slots are free from `now`.
void Server::set_workers(int workers, Nanos now) {
  int current = static_cast<int>(free_since_.size() + running_.size()) - retiring_;
  if (workers < current) {
    int remove = current - workers;
    while (remove > 0 && !free_since_.empty()) {
      free_since_.pop_back();
      --remove;
    }
    retiring_ += remove;
  } else if (workers > current) {
    int add = workers - current;
    int keep = std::min(add, retiring_);  // slots about to be retired stay instead
    retiring_ -= keep;
    for (add -= keep; add > 0; --add) free_since_.push_back(now);
  }
  capacity_changes_.emplace_back(now, workers);
}

void Server::on_signalfd() {
  signalfd_siginfo info{};
  while (read(sfd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    Nanos now = now_ns();
    complete_due(now);  // requests due before the switch finish with the old capacity
    if (info.ssi_signo == SIGUSR1) set_workers(opt_.degraded_workers, now);
    if (info.ssi_signo == SIGUSR2) set_workers(opt_.workers, now);
  }
}

int Server::listen_and_print_port() {
  lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (lfd_ < 0) die("socket");
  int one = 1;
  setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(opt_.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("bind");
  if (listen(lfd_, 4096) < 0) die("listen");
  socklen_t len = sizeof addr;
  getsockname(lfd_, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);

  ep_ = epoll_create1(EPOLL_CLOEXEC);
  tfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (ep_ < 0 || tfd_ < 0) die("epoll/timerfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd_;
  epoll_ctl(ep_, EPOLL_CTL_ADD, lfd_, &ev);
  ev.data.fd = tfd_;
  epoll_ctl(ep_, EPOLL_CTL_ADD, tfd_, &ev);

  // SIGUSR1 / SIGUSR2 change the capacity; read from a signalfd, so a signal that arrives
  // while the loop is busy is not lost. (main() blocks them.)
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  sigaddset(&mask, SIGUSR2);
  sfd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd_ < 0) die("signalfd");
  ev.data.fd = sfd_;
  epoll_ctl(ep_, EPOLL_CTL_ADD, sfd_, &ev);
  return ntohs(addr.sin_port);
}

void Server::run() {
  std::vector<epoll_event> events(256);
  while (!g_stop) {
    int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    // Completions first, so a slot that freed before these events is free for them.
    complete_due(now_ns());
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      std::uint32_t e = events[i].events;
      if (fd == lfd_) {
        on_accept();
      } else if (fd == tfd_) {
        std::uint64_t expirations;
        [[maybe_unused]] auto r = read(tfd_, &expirations, sizeof expirations);
      } else if (fd == sfd_) {
        on_signalfd();
      } else {
        if (e & EPOLLOUT) on_writable(fd);
        if (e & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(fd);
      }
    }
    complete_due(now_ns());
    start_waiting();
    arm_timer();
  }
}

void Server::on_accept() {
  for (;;) {
    int fd = accept4(lfd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
      if (errno == EMFILE || errno == ENFILE) return;  // stays in the accept queue
      die("accept4");
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (static_cast<std::size_t>(fd) >= conns_.size()) conns_.resize(fd + 1024);
    Conn& c = conns_[fd];
    c = Conn{};
    c.open = true;
    c.gen = next_gen_++;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
    ++accepted_;
  }
}

void Server::on_readable(int fd) {
  Conn& c = conns_[fd];
  if (!c.open) return;
  char buf[16384];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r > 0) {
      if (c.close_after) continue;  // nothing after "Connection: close" matters
      c.in.append(buf, static_cast<std::size_t>(r));
      if (!parse_requests(fd)) return;  // connection closed by a protocol error
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return;
    // EOF or error: the peer is gone. Its queued requests stay queued and are still served.
    close_conn(fd);
    return;
  }
}

// Parses every complete request in c.in and queues it. Returns false if the connection was
// closed because of a malformed request.
bool Server::parse_requests(int fd) {
  Conn& c = conns_[fd];
  std::size_t pos = 0;
  for (;;) {
    if (c.body_left > 0) {
      std::size_t skip = std::min(c.body_left, c.in.size() - pos);
      pos += skip;
      c.body_left -= skip;
      if (c.body_left > 0) break;
    }
    std::string_view rest(c.in.data() + pos, c.in.size() - pos);
    auto end = rest.find("\r\n\r\n");
    if (end == std::string_view::npos) {
      if (rest.size() > 65536) {
        reject_and_close(fd,
                         "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                         "Content-Length: 0\r\nConnection: close\r\n\r\n");
        return false;
      }
      break;
    }
    std::string_view head = rest.substr(0, end);
    pos += end + 4;
    auto line_end = head.find("\r\n");
    std::string_view line = head.substr(0, line_end);
    bool http10 = line.size() >= 8 && line.substr(line.size() - 8) == "HTTP/1.0";
    bool close = http10;
    std::size_t content_length = 0;
    bool chunked = false;
    std::string_view headers =
        line_end == std::string_view::npos ? std::string_view{} : head.substr(line_end + 2);
    while (!headers.empty()) {
      auto eol = headers.find("\r\n");
      std::string_view h = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view{} : headers.substr(eol + 2);
      auto colon = h.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view name = h.substr(0, colon), value = h.substr(colon + 1);
      if (iequals(name, "content-length")) {
        content_length = std::strtoull(std::string(value).c_str(), nullptr, 10);
      } else if (iequals(name, "transfer-encoding")) {
        chunked = true;
      } else if (iequals(name, "connection")) {
        if (contains_token(value, "close")) close = true;
        if (http10 && contains_token(value, "keep-alive")) close = false;
      }
    }
    if (chunked) {
      reject_and_close(fd,
                       "HTTP/1.1 501 Not Implemented\r\n"
                       "Content-Length: 0\r\nConnection: close\r\n\r\n");
      return false;
    }
    c.body_left = content_length;
    Job job{fd, c.gen, c.next_seq++, close, now_ns()};
    waiting_.push_back(job);
    ++requests_;
    if (waiting_.size() > max_waiting_) max_waiting_ = waiting_.size();
    if (Bucket* b = stats(job.arrival)) {
      ++b->received;
      b->queued_max = std::max(b->queued_max, waiting_.size());
    }
    if (close) {
      c.close_after = true;
      c.close_seq = job.seq;
      pos = c.in.size();
      break;
    }
  }
  c.in.erase(0, pos);
  return true;
}

void Server::reject_and_close(int fd, const char* response) {
  [[maybe_unused]] auto r = write(fd, response, std::strlen(response));
  close_conn(fd);
}

// Gives every free slot the oldest waiting request. A slot free since `since` starts a request
// that arrived at `arrival` at max(since, arrival): the slot's worker would have picked it up
// the moment both were there, whenever this loop gets to run.
void Server::start_waiting() {
  while (!waiting_.empty() && !free_since_.empty()) {
    Job job = waiting_.front();
    waiting_.pop_front();
    Nanos since = free_since_.back();
    free_since_.pop_back();
    Nanos start = std::max(since, job.arrival);
    // others: the requests in service as this loop sees them (one due in this same turn may
    // still be counted, a negligible error for --per-active-ms).
    running_.push(Running{start + service_for(running_.size()), start_order_++, job});
    if (Bucket* b = stats(start)) {
      ++b->started;
      b->wait_sum += start - job.arrival;
      b->wait_max = std::max(b->wait_max, start - job.arrival);
    }
  }
}

// Finishes every request whose service time is over, writing its response if its client is
// still connected (that is the only moment the backend learns whether it is).
void Server::complete_due(Nanos now) {
  for (;;) {
    // Hand freed slots to waiting requests before looking further: their completion may
    // also be due already.
    start_waiting();
    if (running_.empty() || running_.top().deadline > now) return;
    Running r = running_.top();
    running_.pop();
    if (retiring_ > 0)
      --retiring_;  // the capacity was lowered while this slot was busy
    else
      free_since_.push_back(r.deadline);
    Bucket* b = stats(r.deadline);
    Conn* c = static_cast<std::size_t>(r.job.fd) < conns_.size() ? &conns_[r.job.fd] : nullptr;
    if (c == nullptr || !c->open || c->gen != r.job.gen) {
      ++discarded_;
      if (b != nullptr) ++b->discarded;
      continue;
    }
    c->out += r.job.close ? ok_close_response_ : ok_response_;
    c->done_seq = r.job.seq + 1;
    ++responded_;
    if (b != nullptr) ++b->responded;
    flush(r.job.fd);
  }
}

void Server::arm_timer() {
  Nanos next = running_.empty() ? 0 : running_.top().deadline;
  if (next == armed_) return;
  armed_ = next;
  itimerspec its{};
  if (next > 0) {
    its.it_value.tv_sec = next / 1'000'000'000;
    its.it_value.tv_nsec = next % 1'000'000'000;
  }
  timerfd_settime(tfd_, TFD_TIMER_ABSTIME, &its, nullptr);  // zero disarms
}

void Server::flush(int fd) {
  Conn& c = conns_[fd];
  while (!c.out.empty()) {
    ssize_t w = send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (w > 0) {
      c.out.erase(0, static_cast<std::size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      set_out_interest(fd, true);
      return;
    }
    close_conn(fd);  // EPIPE/ECONNRESET: the client gave up long ago
    return;
  }
  set_out_interest(fd, false);
  if (c.close_after && c.done_seq > c.close_seq) close_conn(fd);
}

void Server::on_writable(int fd) {
  if (conns_[fd].open) flush(fd);
}

void Server::set_out_interest(int fd, bool want) {
  Conn& c = conns_[fd];
  if (c.want_out == want) return;
  c.want_out = want;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0u);
  ev.data.fd = fd;
  epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
}

void Server::close_conn(int fd) {
  Conn& c = conns_[fd];
  if (!c.open) return;
  c.open = false;
  c.in.clear();
  c.in.shrink_to_fit();
  c.out.clear();
  c.out.shrink_to_fit();
  close(fd);  // also removes it from the epoll set
}

void Server::print_counters() const {
  std::fprintf(
      stderr,
      "{\"accepted\": %llu, \"requests\": %llu, \"responded\": %llu, "
      "\"discarded_client_gone\": %llu, \"still_queued\": %zu, \"max_queued\": %zu}\n",
      static_cast<unsigned long long>(accepted_), static_cast<unsigned long long>(requests_),
      static_cast<unsigned long long>(responded_), static_cast<unsigned long long>(discarded_),
      waiting_.size() + running_.size(), max_waiting_);
}

// --stats-out: one JSON object with one array per count, element i for the bucket that starts
// at t0_s + i * bucket_ms (t0_s in seconds of CLOCK_MONOTONIC, a multiple of the bucket):
//   received    requests parsed (each attempt of a proxy counts)
//   started     requests that took a slot
//   responded   requests finished whose connection was still open (response written)
//   discarded   requests finished after their connection had closed (wasted work)
//   queued_max  longest FIFO of waiting requests
//   wait_mean_ms, wait_max_ms  queue wait of the requests started in the bucket
// and capacity_changes: [{"t_s", "workers"}] for every SIGUSR1 / SIGUSR2.
void Server::write_stats() const {
  if (opt_.stats_out.empty()) return;
  std::FILE* f = std::fopen(opt_.stats_out.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "slow_backend: cannot write %s\n", opt_.stats_out.c_str());
    return;
  }
  std::size_t n = buckets_.size();
  while (n > 0 && buckets_[n - 1].received == 0 && buckets_[n - 1].started == 0 &&
         buckets_[n - 1].responded == 0 && buckets_[n - 1].discarded == 0)
    --n;
  auto series = [&](const char* key, auto get, bool last = false) {
    std::fprintf(f, "\"%s\": [", key);
    for (std::size_t i = 0; i < n; ++i) {
      double v = get(buckets_[i]);
      if (v == std::floor(v))
        std::fprintf(f, "%s%.0f", i ? "," : "", v);
      else
        std::fprintf(f, "%s%.3f", i ? "," : "", v);
    }
    std::fprintf(f, "]%s\n", last ? "" : ",");
  };
  std::fprintf(f, "{\"clock\": \"CLOCK_MONOTONIC\", \"bucket_ms\": %.3f, \"t0_s\": %.6f,\n",
               static_cast<double>(bucket_) / 1e6,
               static_cast<double>(first_bucket_ * bucket_) / 1e9);
  std::fprintf(f, "\"workers\": %d, \"degraded_workers\": %d, \"service_ms\": %.3f,\n",
               opt_.workers, opt_.degraded_workers, opt_.service_ms);
  std::fprintf(f, "\"capacity_changes\": [");
  for (std::size_t i = 0; i < capacity_changes_.size(); ++i)
    std::fprintf(f, "%s{\"t_s\": %.6f, \"workers\": %d}", i ? ", " : "",
                 static_cast<double>(capacity_changes_[i].first) / 1e9,
                 capacity_changes_[i].second);
  std::fprintf(f, "],\n");
  series("received", [](const Bucket& b) { return static_cast<double>(b.received); });
  series("started", [](const Bucket& b) { return static_cast<double>(b.started); });
  series("responded", [](const Bucket& b) { return static_cast<double>(b.responded); });
  series("discarded", [](const Bucket& b) { return static_cast<double>(b.discarded); });
  series("queued_max", [](const Bucket& b) { return static_cast<double>(b.queued_max); });
  series("wait_mean_ms", [](const Bucket& b) {
    return b.started ? std::round(static_cast<double>(b.wait_sum) / b.started / 1e3) / 1e3 : 0.0;
  });
  series(
      "wait_max_ms",
      [](const Bucket& b) { return std::round(static_cast<double>(b.wait_max) / 1e3) / 1e3; },
      true);
  std::fprintf(f, "}\n");
  std::fclose(f);
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
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake at the deadline, not up to 50 us later
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: epoll_wait returns EINTR
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t capacity_signals;  // read from the server's signalfd
  sigemptyset(&capacity_signals);
  sigaddset(&capacity_signals, SIGUSR1);
  sigaddset(&capacity_signals, SIGUSR2);
  sigprocmask(SIG_BLOCK, &capacity_signals, nullptr);
  Server server(opt);
  server.listen_and_print_port();
  server.run();
  server.print_counters();
  server.write_stats();
  return 0;
}
