// A server that speaks just enough RESP to lead a link where a real Redis would not: it answers
// SCRIPT LOAD and EVALSHA, in the order they come, as told, on every connection it accepts.
// The n-th EVALSHA of a connection gets the n-th answer given (the last one once they run out;
// an empty answer is a stall: nothing more is answered on that connection, as Redis answers in
// order).
//
// Thread-safety: its own thread serves; accepted() from any thread.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace floodgate::redis::testing {

class FakeServer {
 public:
  // The answers to each SCRIPT LOAD and to the EVALSHAs (raw bytes).
  FakeServer(std::string on_load, std::vector<std::string> on_evalsha)
      : on_load_(std::move(on_load)), on_evalsha_(std::move(on_evalsha)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(listen_fd_, 16);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_.store(true);
    thread_.join();
    for (Client& c : clients_) ::close(c.fd);
    ::close(listen_fd_);
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  uint16_t port() const { return port_; }
  // While held, the server reads but answers nothing (a slow handshake); then it catches up.
  void hold(bool held) { held_.store(held); }
  int accepted() const { return accepted_.load(); }

 private:
  struct Client {
    int fd;
    std::string in;
    std::size_t scanned = 0;  // commands before this offset are answered
    std::size_t evalshas = 0;
    bool stalled = false;
  };

  void serve() {
    while (!stop_.load()) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const Client& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      const int n = ::poll(fds.data(), fds.size(), 10);  // 10 ms: how soon it sees stop_, hold
      if (!held_.load()) {
        for (Client& c : clients_) answer(c);
      }
      if (n <= 0) continue;
      if ((fds[0].revents & POLLIN) != 0) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          clients_.push_back({fd, {}});
          accepted_.fetch_add(1);
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) read_from(clients_[i - 1]);
      }
    }
  }

  void read_from(Client& c) {
    char buf[4096];
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return;
    c.in.append(buf, static_cast<std::size_t>(n));
    if (!held_.load()) answer(c);
  }

  void answer(Client& c) {
    // Each command's name comes whole before its reply is due; answer them in order.
    static constexpr std::string_view kLoad = "$4\r\nLOAD\r\n";
    static constexpr std::string_view kEvalsha = "$7\r\nEVALSHA\r\n";
    std::string out;
    while (!c.stalled) {
      const std::size_t load = c.in.find(kLoad, c.scanned);
      const std::size_t eval = c.in.find(kEvalsha, c.scanned);
      if (load == std::string::npos && eval == std::string::npos) break;
      const bool is_load = load < eval;
      if (is_load) {
        out += on_load_;
      } else if (!on_evalsha_.empty()) {
        const std::string& answer = on_evalsha_[std::min(c.evalshas++, on_evalsha_.size() - 1)];
        c.stalled = answer.empty();
        out += answer;
      }
      c.scanned = (is_load ? load + kLoad.size() : eval + kEvalsha.size());
    }
    if (!out.empty()) ::send(c.fd, out.data(), out.size(), MSG_NOSIGNAL);
  }

  const std::string on_load_;
  const std::vector<std::string> on_evalsha_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<Client> clients_;  // the serving thread's
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> held_{false};
  std::thread thread_;
};

}  // namespace floodgate::redis::testing
