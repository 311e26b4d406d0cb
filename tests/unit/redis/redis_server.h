// A redis-server of a test's own: started on 127.0.0.1 and a free port (the same port again on a
// restart), waited for with a deadline until it answers, stopped (SIGSTOP) and continued,
// killed. Plus a blocking client for the commands a test sends beside the code under test
// (SCRIPT FLUSH, GET). Needs /usr/bin/redis-server (scripts/deps.sh installs it).
//
// Thread-safety: the test's thread. Lifetime: the destructor kills the server.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/redis/command_writer.h"
#include "floodgate/redis/reply_parser.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): posix_spawn's environment

namespace floodgate::redis::testing {

// A port on 127.0.0.1 that nothing listens on (the kernel's choice; free when this returns).
inline uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// A blocking TCP connection to 127.0.0.1:port, or -1. Reads and writes time out after 2 s.
inline int dial(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{.tv_sec = 2, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (!connected && errno == EINTR) {  // a signal came (a child stopping): the connect goes on
    pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
    while (::poll(&p, 1, 2000) < 0 && errno == EINTR) {
    }
    int err = 0;
    socklen_t len = sizeof err;
    connected = (p.revents & POLLOUT) != 0 &&
                ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  }
  if (!connected) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `commands` pipelined on one new connection and returns the last one's reply as Redis
// encoded it ("+OK\r\n", "$1\r\n1\r\n"), or what went wrong ("dial: ...", "recv: ...").
inline std::string pipeline(
    uint16_t port, std::initializer_list<std::initializer_list<std::string_view>> commands) {
  const int fd = dial(port);
  if (fd < 0) return std::string("dial: ") + std::strerror(errno);
  std::string out(4096, '\0');
  CommandWriter w(out);
  for (const auto& c : commands) w.write(c);
  std::string reply;
  if (::send(fd, out.data(), w.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(w.size())) {
    reply = std::string("send: ") + std::strerror(errno);
  }
  std::string in;
  const ReplyParser parser;
  std::size_t left = reply.empty() ? commands.size() : 0;
  char buf[4096];
  while (left != 0) {
    Reply r;
    const Parsed p = parser.parse(in, r);
    if (p.status == ParseStatus::protocol_error) {
      reply = "protocol error: " + in;
      break;
    }
    if (p.status == ParseStatus::reply) {
      if (--left == 0) reply = in.substr(0, p.consumed);
      in.erase(0, p.consumed);
      continue;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;  // a signal (a child server stopping, say)
    if (n <= 0) {
      reply = n == 0 ? std::string("recv: EOF") : std::string("recv: ") + std::strerror(errno);
      break;
    }
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply;
}

class RedisServer {
 public:
  explicit RedisServer(std::vector<std::string> extra_args = {}) : extra_(std::move(extra_args)) {}
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts the server (on its earlier port when it ran before) and waits until it answers a
  // PING, for 5 s at most. A first start that loses its port to someone else tries another.
  bool start() {
    const bool again = port_ != 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (!again) port_ = free_port();
      if (spawn() && answers()) return true;
      stop();
    }
    return false;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // SIGSTOP, returning once the server is stopped; resume() continues it.
  void pause() {
    int status = 0;
    ::kill(pid_, SIGSTOP);
    ::waitpid(pid_, &status, WUNTRACED);
  }
  void resume() {
    int status = 0;
    ::kill(pid_, SIGCONT);
    ::waitpid(pid_, &status, WCONTINUED);
  }
  uint16_t port() const { return port_; }

 private:
  bool spawn() {
    const std::string port = std::to_string(port_);
    std::vector<std::string> args = {"redis-server", "--port",      port, "--bind",
                                     "127.0.0.1",    "--save",      "",   "--appendonly",
                                     "no",           "--daemonize", "no"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    const int e = posix_spawnp(&pid_, "redis-server", &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (e != 0) pid_ = -1;
    return e == 0;
  }
  // Polls until the server answers (any reply: with requirepass a PING is refused), it exits,
  // or 5 s pass.
  bool answers() const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return false;  // it exited (port taken?)
      const std::string reply = pipeline(port_, {{"PING"}});
      if (reply.starts_with('+') || reply.starts_with('-')) return true;
      ::poll(nullptr, 0,
             5);  // not ordering anything: the server's start-up has no event to wait on
    }
    return false;
  }

  std::vector<std::string> extra_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace floodgate::redis::testing
