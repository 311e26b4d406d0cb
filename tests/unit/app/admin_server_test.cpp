#include "admin_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace floodgate::app {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr std::string_view kToken = "secret-token-0123456789";

TEST(BearerToken, TheSchemeMatchesInAnyCase) {
  for (const char* value : {"Bearer secret-token-0123456789", "bearer secret-token-0123456789",
                            "BEARER secret-token-0123456789", "Bearer   secret-token-0123456789"}) {
    EXPECT_TRUE(AdminServer::bearer_token_matches(value, kToken)) << value;
  }
}

TEST(BearerToken, TheTokenMatchesOnlyExactly) {
  for (const char* value :
       {"Bearer SECRET-TOKEN-0123456789", "Bearer secret-token-012345678",
        "Bearer secret-token-0123456789x", "Bearersecret-token-0123456789",
        "Basic secret-token-0123456789", "secret-token-0123456789", "Bearer ", ""}) {
    EXPECT_FALSE(AdminServer::bearer_token_matches(value, kToken)) << value;
  }
}

TEST(BearerToken, AnEmptyTokenMatchesNothing) {
  EXPECT_FALSE(AdminServer::bearer_token_matches("Bearer ", ""));
  EXPECT_FALSE(AdminServer::bearer_token_matches("Bearer x", ""));
}

// An AdminServer on its own io_context thread, and blocking clients with a receive deadline.
class AdminServerTest : public ::testing::Test {
 protected:
  void start(const AdminParams& p, bool fault_hooks = false) {
    AdminServer::Handlers h{
        [](std::string& out) { out += "metric 1\n"; },
        [] { return false; },
        [this](const AdminServer::Request& r,
               const std::function<void(AdminServer::Response)>& reply) {
          control_calls_.fetch_add(1);
          reply(AdminServer::Response{200, "{\"body\":" + std::to_string(r.body.size()) + "}\n"});
        },
        [](const AdminServer::Request& head) { return AdminServer::access_of(head, kToken); },
        [this] {
          const std::lock_guard lock(drain_reason_mutex_);
          return drain_reason_;
        },
        fault_hooks};
    server_.emplace(io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), h, p);
    port_ = server_->port();
    thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    asio::post(io_, [this] { server_->close(); });
    guard_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }

  asio::ip::tcp::socket connect() {
    asio::ip::tcp::socket s(client_io_);
    s.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
    timeval tv{5, 0};  // no test waits on a read longer than this
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return s;
  }

  // Everything the server sends until it closes.
  static std::string read_all(asio::ip::tcp::socket& s) {
    std::string out;
    char buf[4096];
    boost::system::error_code ec;
    while (!ec) {
      const std::size_t n = s.read_some(asio::buffer(buf), ec);
      out.append(buf, n);
    }
    return out;
  }

  std::string exchange(std::string_view request) {
    auto s = connect();
    asio::write(s, asio::buffer(request));
    return read_all(s);
  }

  std::size_t open_connections() {
    std::promise<std::size_t> p;
    asio::post(io_, [&] { p.set_value(server_->open_connections()); });
    return p.get_future().get();
  }

  bool wait_for_open_connections(std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (open_connections() != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_ = asio::make_work_guard(io_);
  asio::io_context client_io_;
  std::optional<AdminServer> server_;
  std::thread thread_;
  uint16_t port_ = 0;
  std::atomic<int> control_calls_{0};
  std::mutex drain_reason_mutex_;
  std::string drain_reason_;  // what the drain_reason handler answers
};

TEST_F(AdminServerTest, HealthzAnswers200WhileNoDrainReasonIsGiven) {
  start(AdminParams{});
  EXPECT_TRUE(exchange("GET /healthz HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));
}

TEST_F(AdminServerTest, HealthzAnswers503WithTheDrainReasonWhileThereIsOne) {
  drain_reason_ = "draining: watchdog (poll_stall)";
  start(AdminParams{});
  const std::string answer = exchange("GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 503 ")) << answer;
  EXPECT_TRUE(answer.ends_with("\r\n\r\ndraining: watchdog (poll_stall)\n")) << answer;
}

TEST_F(AdminServerTest, AHeadNotCompleteBeforeTheDeadlineIsAnswered408) {
  start(AdminParams{.head_timeout = 50ms});
  EXPECT_TRUE(exchange("GET /healthz HTTP/1.1\r\n").starts_with("HTTP/1.1 408 "));
}

TEST_F(AdminServerTest, ABodyNotCompleteBeforeTheDeadlineIsAnswered408) {
  start(AdminParams{.body_timeout = 50ms});
  const std::string answer = exchange(
      "POST /config/validate HTTP/1.1\r\nAuthorization: Bearer secret-token-0123456789\r\n"
      "Content-Length: 10\r\n\r\nabc");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 408 ")) << answer;
  EXPECT_EQ(control_calls_.load(), 0);
}

TEST_F(AdminServerTest, AConnectionBeyondTheLimitIsAnswered503WhenEveryOpenOneHasItsHead) {
  start(AdminParams{.max_connections = 1});
  auto held = connect();  // a complete head, its body still to come
  asio::write(held, asio::buffer("POST /config/validate HTTP/1.1\r\nAuthorization: Bearer " +
                                 std::string(kToken) + "\r\nContent-Length: 10\r\n\r\n"));
  ASSERT_TRUE(wait_for_open_connections(1));
  const std::string answer = exchange("GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 503 ")) << answer;
  EXPECT_NE(answer.find("Retry-After: 1\r\n"), std::string::npos);
  held.close();
  ASSERT_TRUE(wait_for_open_connections(0));
  EXPECT_TRUE(exchange("GET /healthz HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));
}

TEST_F(AdminServerTest, ANewConnectionTakesThePlaceOfTheOldestOneWithoutACompleteHead) {
  start(AdminParams{.max_connections = 2});
  auto oldest = connect();
  asio::write(oldest, asio::buffer(std::string_view("GET /healthz HTTP/1.1\r\n")));
  ASSERT_TRUE(wait_for_open_connections(1));
  auto idle = connect();  // sends nothing
  ASSERT_TRUE(wait_for_open_connections(2));
  EXPECT_TRUE(exchange("GET /healthz HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));
  char byte = 0;
  boost::system::error_code ec;
  EXPECT_EQ(oldest.read_some(asio::buffer(&byte, 1), ec), 0U);
  EXPECT_EQ(ec, asio::error::eof);  // closed without an answer, and without a reset
  asio::write(idle, asio::buffer(std::string_view("GET /healthz HTTP/1.1\r\n\r\n")));
  EXPECT_TRUE(read_all(idle).starts_with("HTTP/1.1 200 "));
}

TEST_F(AdminServerTest, AnUnauthorizedPostIsAnswered401AndItsBodyIsNeverRead) {
  start(AdminParams{});
  const std::string answer =
      exchange("POST /config/activate HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 401 ")) << answer;
  EXPECT_NE(answer.find("WWW-Authenticate: Bearer\r\n"), std::string::npos);
  EXPECT_EQ(control_calls_.load(), 0);
}

AdminServer::Request head(std::string method, std::string path, std::string authorization = "") {
  return AdminServer::Request{std::move(method), std::move(path), std::move(authorization), ""};
}

TEST(AdminAccess, WithoutATokenWhatChangesFloodgateIsForbiddenAndWhatReadsGoesOn) {
  for (const char* path : {"/config/activate", "/config/rollback", "/fault/stall"}) {
    const AdminServer::Access a = AdminServer::access_of(head("POST", path), "");
    EXPECT_EQ(a.status, 403) << path;
    EXPECT_NE(a.error.find(std::string("POST ") + path), std::string::npos) << a.error;
    EXPECT_NE(a.error.find("admin.token_file"), std::string::npos) << a.error;
    // A token sent when none is configured is no token either.
    EXPECT_EQ(
        AdminServer::access_of(head("POST", path, "Bearer " + std::string(kToken)), "").status,
        403);
  }
  for (const char* path : {"/config/validate", "/config/preview", "/config/nope", "/status"}) {
    EXPECT_EQ(AdminServer::access_of(head("POST", path), "").status, 0) << path;
  }
}

TEST(AdminAccess, OnAUnixSocketWithoutATokenTheFilesModeDecidesAndEverythingGoesOn) {
  for (const char* path : {"/config/activate", "/config/rollback", "/config/validate"}) {
    EXPECT_EQ(AdminServer::access_of(head("POST", path), "", true).status, 0) << path;
    // A token configured still applies on the socket.
    EXPECT_EQ(AdminServer::access_of(head("POST", path), kToken, true).status, 401) << path;
  }
}

TEST(AdminAccess, WithATokenEveryRequestButGetNeedsIt) {
  for (const char* path : {"/config/activate", "/config/rollback", "/config/validate",
                           "/config/preview", "/config/nope"}) {
    EXPECT_EQ(AdminServer::access_of(head("POST", path), kToken).status, 401) << path;
    EXPECT_EQ(
        AdminServer::access_of(head("PUT", path, "Bearer wrong-token-0123456789"), kToken).status,
        401)
        << path;
    EXPECT_EQ(
        AdminServer::access_of(head("POST", path, "Bearer " + std::string(kToken)), kToken).status,
        0)
        << path;
  }
}

TEST_F(AdminServerTest, ABodyOverTheLimitIsAnswered413FromItsContentLength) {
  start(AdminParams{.max_body = 4});
  const std::string answer = exchange(
      "POST /config/validate HTTP/1.1\r\nAuthorization: bearer secret-token-0123456789\r\n"
      "Content-Length: 5\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 413 ")) << answer;
}

TEST_F(AdminServerTest, AHeadOverTheLimitIsAnswered431) {
  start(AdminParams{.max_head = 64});
  const std::string answer = exchange("GET /healthz HTTP/1.1\r\nX: " + std::string(64, 'x'));
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 431 ")) << answer;
}

TEST_F(AdminServerTest, AnAuthorizedBodyReachesTheHandlerWhole) {
  start(AdminParams{});
  const std::string answer = exchange(
      "POST /config/validate HTTP/1.1\r\nAuthorization: Bearer secret-token-0123456789\r\n"
      "Content-Length: 6\r\n\r\nabcdef");
  EXPECT_TRUE(answer.ends_with("{\"body\":6}\n")) << answer;
}

TEST_F(AdminServerTest, FaultPathsAreUnknownUnlessTheBinaryHasTheFaultHooks) {
  start(AdminParams{});
  const std::string without = exchange(
      "POST /fault/stall HTTP/1.1\r\nAuthorization: Bearer secret-token-0123456789\r\n"
      "Content-Length: 2\r\n\r\n{}");
  EXPECT_TRUE(without.starts_with("HTTP/1.1 404 ")) << without;
  EXPECT_EQ(control_calls_.load(), 0);
}

TEST_F(AdminServerTest, FaultPathsGoToTheControlHandlerInTheBinaryWithTheFaultHooks) {
  start(AdminParams{}, /*fault_hooks=*/true);
  const std::string with = exchange(
      "POST /fault/stall HTTP/1.1\r\nAuthorization: Bearer secret-token-0123456789\r\n"
      "Content-Length: 2\r\n\r\n{}");
  EXPECT_TRUE(with.ends_with("{\"body\":2}\n")) << with;
  EXPECT_EQ(control_calls_.load(), 1);
}

TEST_F(AdminServerTest, HeadIsAnsweredWithTheHeadersOfGetAndNoBody) {
  start(AdminParams{});
  const std::string get = exchange("GET /metrics HTTP/1.1\r\n\r\n");
  const std::string head = exchange("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(get.ends_with("\r\n\r\nmetric 1\n")) << get;
  EXPECT_EQ(head, get.substr(0, get.size() - std::string_view("metric 1\n").size()));
}

TEST_F(AdminServerTest, AClientThatDoesNotCloseIsLetGoAfterTheLinger) {
  start(AdminParams{.linger = 50ms});
  auto s = connect();
  asio::write(s, asio::buffer(std::string_view("GET /healthz HTTP/1.1\r\n\r\n")));
  EXPECT_TRUE(read_all(s).starts_with("HTTP/1.1 200 "));
  EXPECT_TRUE(wait_for_open_connections(0));  // while the client still holds its socket
}

}  // namespace
}  // namespace floodgate::app
