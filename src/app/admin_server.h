// The admin listener: GET /healthz, GET /metrics (Prometheus text format), GET /status (pools
// and peers as JSON) and the control API under /config (docs/operations.md), on the main
// thread's io_context, never on a reactor. Builds with FLOODGATE_FAULT_HOOKS (test builds) also
// hand the test-only paths under /fault/ to the control handler.
//
// One request per connection (Connection: close), so there is no keep-alive and no idle
// deadline. Everything a client can make floodgate hold is bounded (Params):
//   - at most `max_connections` open at once; the next one takes the place of the oldest one
//     whose request head is not complete yet (closed), so that idle or slow clients cannot keep
//     a balancer's health check out; when every open one has a complete head, it is answered
//     503 at once and closed;
//   - a request head of at most `max_head` bytes (431), complete within `head_timeout` (408);
//   - the token is checked as soon as the head is complete: a request other than GET or HEAD
//     without it gets 401 (or 403 when it would change floodgate and no token is configured)
//     and its body is never read, so until then a connection holds at most `max_head` bytes;
//   - an authorized body of at most `max_body` bytes (413, decided from Content-Length before
//     a byte of it is read), complete within `body_timeout` (408);
//   - the answer written within `write_timeout`, then the connection lingers at most `linger`
//     for the client to close (so an error answered before the body was read reaches a client
//     still sending it, instead of being lost to a reset).
// HEAD is served as GET without the body (same status and headers, Content-Length included).
//
// Thread-safety: construct, close() and the accessors on the io_context's thread (the main
// thread); the handlers are called there too.
#pragma once

#include <array>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "floodgate/core/log_throttle.h"

namespace floodgate::app {

// The admin listener's bounds (a namespace-scope struct so that it can be a default argument).
struct AdminParams {
  std::size_t max_connections = 64;
  std::size_t max_head = std::size_t{16} << 10;  // request line and header fields
  // A configuration body. Larger files are activated from disk (POST /config/activate with
  // an empty body reads the file, up to 16 MiB).
  std::size_t max_body = std::size_t{1} << 20;
  std::chrono::milliseconds head_timeout{10'000};   // from accept to the end of the head
  std::chrono::milliseconds body_timeout{10'000};   // from the end of the head
  std::chrono::milliseconds write_timeout{10'000};  // to write the answer
  std::chrono::milliseconds linger{2'000};          // after the answer, for the client's FIN
};

class AdminServer {
 public:
  using Params = AdminParams;

  struct Request {
    std::string method;         // as sent, except HEAD, which is served as "GET"
    std::string path;           // without the query
    std::string authorization;  // the Authorization header's value, if any
    std::string body;
  };
  struct Response {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
  };

  // What a request other than GET and HEAD may do, decided from its head alone.
  struct Access {
    int status = 0;     // 0: go on; 401 (answered with WWW-Authenticate: Bearer) or 403
    std::string error;  // why, for the {"error": ...} answer of a refusal
  };

  struct Handlers {
    std::function<void(std::string&)> metrics;  // appends the exposition text
    std::function<bool()> draining;
    // Every path under /config, and /status. Answers by calling the reply function, at once or
    // later (an activation answers once every reactor serves the new generation).
    std::function<void(const Request&, std::function<void(Response)>)> control;
    // Whether a request other than GET and HEAD may go on (access_of() is the control API's
    // rule). Called with the head (no body yet) once it is complete, before any body byte is
    // read.
    std::function<Access(const Request& head)> access;
    // Why floodgate drains without shutting down (the watchdog's drain): while it returns a
    // non-empty text, /healthz answers 503 with it. Optional.
    std::function<std::string()> drain_reason;
    // Whether POST /fault/... goes to `control` too (floodgate-faults, fault_hooks.h); otherwise
    // those paths are a 404 like any unknown one.
    bool fault_hooks = false;
  };

  // Where it listens: a TCP address, or a UNIX socket (`unix_path` not empty) created with
  // file mode `mode` (a stale socket file left by a crash is replaced; a socket that a process
  // serves, or a file of another kind, is an error) and removed when the server goes, unless
  // the path names another file by then.
  struct Listen {
    boost::asio::ip::tcp::endpoint tcp;
    std::string unix_path;
    uint32_t mode = 0660;
  };

  // Binds and listens; throws boost::system::system_error on failure (std::runtime_error when
  // the UNIX socket's path holds a file that is not a socket, or a socket a process serves).
  AdminServer(boost::asio::io_context& io, const Listen& at, Handlers h,
              const Params& p = Params{});
  AdminServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& at, Handlers h,
              const Params& p = Params{})
      : AdminServer(io, Listen{at, {}, 0}, std::move(h), p) {}
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Stops accepting; connections in progress finish.
  void close();
  // The TCP port it listens on (0 on a UNIX socket).
  uint16_t port() const;
  // Connections open now (each holds a slot until it is closed).
  std::size_t open_connections() const;
  // Connections answered 503 because `max_connections` were open, each with a complete head.
  uint64_t refused_connections() const { return refused_; }

  // The control API's rule (docs/operations.md). With a token configured, every request but GET
  // and HEAD needs `Authorization: Bearer <token>` (401 otherwise). Without one, the requests
  // that change floodgate (POST /config/activate, /config/rollback, the test builds' /fault/)
  // are refused with 403, and the others (POST /config/validate and /config/preview, which only
  // read, and paths the control API answers 404 or 405) go on.
  // On a UNIX socket (`local_socket`) without a token, the socket file's mode decides who may
  // connect, and so who may change floodgate: every request goes on.
  static Access access_of(const Request& head, std::string_view token, bool local_socket = false);

  // True if `authorization` is `Bearer <token>`: the scheme in any case (RFC 9110 11.1), then
  // one or more spaces, then exactly `token`, compared in time that depends only on the
  // lengths. An empty `token` matches nothing.
  static bool bearer_token_matches(std::string_view authorization, std::string_view token);

 private:
  class Connection;
  struct Occupancy;
  void do_accept();
  using Socket = boost::asio::generic::stream_protocol::socket;
  void on_accept(const boost::system::error_code& ec, Socket s);
  void refuse(Socket& s);

  boost::asio::io_context& io_;
  boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol> acceptor_;
  std::string unix_path_;  // the socket file to remove, when on a UNIX socket
  uint64_t unix_dev_ = 0;  // its device and inode: removed only while they match
  uint64_t unix_ino_ = 0;
  boost::asio::steady_timer retry_;  // accept back-off when out of descriptors or memory
  Handlers handlers_;
  Params params_;
  // Shared with every connection's slot: the io_context destroys pending connections after
  // the AdminServer is gone, and their slots still give their count back.
  std::shared_ptr<Occupancy> occupancy_;
  uint64_t refused_ = 0;
  bool accepting_ = true;  // false from an accept failure to the next success (for the log)
  LogThrottle accept_log_{std::chrono::seconds(1)};
  LogThrottle evict_log_{std::chrono::seconds(10)};  // connections closed to make room
};

}  // namespace floodgate::app
