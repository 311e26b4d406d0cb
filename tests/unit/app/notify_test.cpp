#include "notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>

namespace floodgate::app {
namespace {

TEST(NotifyMessage, ReadyNamesTheGeneration) {
  EXPECT_EQ(ready_message(7), "READY=1\nSTATUS=serving generation 7");
}

TEST(NotifyMessage, ReloadingCarriesTheMonotonicTime) {
  EXPECT_EQ(reloading_message(123456789), "RELOADING=1\nMONOTONIC_USEC=123456789");
}

TEST(NotifyMessage, SuccessfulReloadNamesTheNewGeneration) {
  EXPECT_EQ(reloaded_message(3, true, ""), "READY=1\nSTATUS=serving generation 3 (reloaded)");
}

TEST(NotifyMessage, RefusedReloadSaysWhyAndThatTheOldGenerationKeepsServing) {
  EXPECT_EQ(reloaded_message(2, false, "2 errors"),
            "READY=1\nSTATUS=reload refused (2 errors); generation 2 keeps serving");
}

TEST(NotifyMessage, NewlinesInTextCannotStartAnotherAssignment) {
  EXPECT_EQ(reloaded_message(2, false, "a\nREADY=1"),
            "READY=1\nSTATUS=reload refused (a READY=1); generation 2 keeps serving");
  EXPECT_EQ(status_message("x\r\nSTOPPING=1"), "STATUS=x  STOPPING=1");
}

TEST(NotifyMessage, StoppingSaysDraining) {
  EXPECT_EQ(stopping_message(), "STOPPING=1\nSTATUS=draining");
}

// A datagram socket standing in for systemd's notification socket; NOTIFY_SOCKET points at it
// while the object lives.
class FakeNotifySocket {
 public:
  FakeNotifySocket() {
    char dir[] = "/tmp/floodgate-notify-XXXXXX";
    dir_ = ::mkdtemp(dir);
    path_ = dir_ + "/notify.sock";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval deadline{.tv_sec = 10, .tv_usec = 0};  // a receive that finds nothing fails
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof(deadline));
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~FakeNotifySocket() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  FakeNotifySocket(const FakeNotifySocket&) = delete;
  FakeNotifySocket& operator=(const FakeNotifySocket&) = delete;

  bool bound() const { return bound_; }

  // The next datagram, or "" when none arrives before the deadline.
  std::string receive() const {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

uint64_t now_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000U + static_cast<uint64_t>(ts.tv_nsec) / 1000U;
}

TEST(Notifier, SendsEachEventToNotifySocket) {
  FakeNotifySocket systemd;
  ASSERT_TRUE(systemd.bound());
  const Notifier notifier;
  ASSERT_TRUE(notifier.enabled());
  notifier.ready(1);
  EXPECT_EQ(systemd.receive(), "READY=1\nSTATUS=serving generation 1");
  notifier.reloaded(1, false, "bad file");
  EXPECT_EQ(systemd.receive(),
            "READY=1\nSTATUS=reload refused (bad file); generation 1 keeps serving");
  notifier.status("hello");
  EXPECT_EQ(systemd.receive(), "STATUS=hello");
  notifier.stopping();
  EXPECT_EQ(systemd.receive(), "STOPPING=1\nSTATUS=draining");
}

TEST(Notifier, ReloadingStampsTheCallWithClockMonotonic) {
  FakeNotifySocket systemd;
  ASSERT_TRUE(systemd.bound());
  const uint64_t before = now_usec();
  Notifier().reloading();
  const uint64_t after = now_usec();
  const std::string got = systemd.receive();
  const std::string prefix = "RELOADING=1\nMONOTONIC_USEC=";
  ASSERT_EQ(got.substr(0, prefix.size()), prefix);
  const uint64_t stamp = std::stoull(got.substr(prefix.size()));
  EXPECT_GE(stamp, before);
  EXPECT_LE(stamp, after);
}

TEST(Notifier, LeavesNotifySocketInTheEnvironment) {
  FakeNotifySocket systemd;
  Notifier().ready(1);
  EXPECT_NE(std::getenv("NOTIFY_SOCKET"), nullptr);
}

TEST(Notifier, ReadsTheWatchdogIntervalSystemdSetsAndSendsKeepAlives) {
  FakeNotifySocket systemd;
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::unsetenv("WATCHDOG_PID");
  const Notifier notifier;
  ::unsetenv("WATCHDOG_USEC");
  EXPECT_EQ(notifier.watchdog_interval(), std::chrono::seconds(30));
  notifier.keep_alive();
  EXPECT_EQ(systemd.receive(), "WATCHDOG=1");
}

TEST(Notifier, ExpectsNoKeepAliveWhenTheWatchdogIsMeantForAnotherProcess) {
  FakeNotifySocket systemd;
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);
  const Notifier notifier;
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  EXPECT_EQ(notifier.watchdog_interval(), std::chrono::microseconds(0));
}

TEST(Notifier, IsDisabledWithoutNotifySocket) {
  ::unsetenv("NOTIFY_SOCKET");
  const Notifier notifier;
  EXPECT_FALSE(notifier.enabled());
  notifier.ready(1);  // sends nothing, fails nothing
}

}  // namespace
}  // namespace floodgate::app
