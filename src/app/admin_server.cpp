#include "admin_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <list>
#include <stdexcept>
#include <string_view>

#include "floodgate/core/ascii.h"
#include "floodgate/core/reason.h"
#include "floodgate/http/parser.h"

namespace floodgate::app {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kJson = "application/json";
// The answer beyond max_connections (its Content-Length is the length of the last line).
constexpr std::string_view kRefusal =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 32\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    "too many admin connections open\n";
static_assert(kRefusal.size() - kRefusal.find("\r\n\r\n") - 4 == 32);

std::string_view phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

// Running out of descriptors or memory: accept() fails again at once, so wait a little.
bool is_resource_shortage(const error_code& ec) {
  const int e = ec.value();
  return ec.category() == boost::system::system_category() &&
         (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM);
}

// Reads and drops what the client has sent so far, without waiting and at most 16 KiB, so that
// the close sends FIN rather than a reset (which could destroy an answer written before it).
void drop_unread(asio::generic::stream_protocol::socket& s, error_code& ec) {
  s.non_blocking(true, ec);
  std::array<char, 1024> drop{};
  for (int i = 0; i < 16 && !ec; ++i) s.read_some(asio::buffer(drop), ec);
}

// Whether a process accepts connections on the UNIX socket file `path`: a socket file left by
// a floodgate that did not exit cleanly refuses them (nothing listens there any more).
bool socket_is_served(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;  // bind() says why
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw boost::system::system_error(error_code(errno, boost::system::system_category()),
                                      "socket");
  }
  const int r = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int e = errno;
  ::close(fd);
  // EAGAIN: a process listens there but its queue of connections to accept is full.
  if (r == 0 || e == EAGAIN || e == EINPROGRESS) return true;
  if (e == ECONNREFUSED || e == ENOENT) return false;
  throw boost::system::system_error(error_code(e, boost::system::system_category()),
                                    "connect to " + path);
}

}  // namespace

struct AdminServer::Occupancy {
  std::size_t open = 0;
  // The open connections whose request head is not complete yet, oldest first: those a new
  // connection may take the place of at max_connections.
  std::list<Connection*> waiting;
};

// One admin request on its own connection, in phases; each phase but `handler` has a deadline.
// A completion or deadline that belongs to a phase already left is ignored (phase_ moved on).
class AdminServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Socket s, const Handlers& h, const Params& p, std::shared_ptr<Occupancy> o)
      : socket_(std::move(s)),
        timer_(socket_.get_executor()),
        handlers_(h),
        params_(p),
        occupancy_(std::move(o)),
        buffer_(p.max_head) {  // a bound, not an allocation: the buffer grows as bytes arrive
    ++occupancy_->open;
    waiting_ = occupancy_->waiting.insert(occupancy_->waiting.end(), this);
  }
  ~Connection() {
    unlist();
    release();
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start() {
    arm(Phase::head, params_.head_timeout);
    asio::async_read_until(
        socket_, buffer_, "\r\n\r\n",
        [self = shared_from_this()](const error_code& ec, std::size_t n) { self->on_head(ec, n); });
  }

  // Closes the connection, whose head is not complete, to make room for a new one: what the
  // client sent is dropped first so that it reads the end of the connection, not a reset.
  void evict() {
    error_code ignored;
    socket_.cancel(ignored);  // the read completes with operation_aborted, in a phase left
    drop_unread(socket_, ignored);
    finish();
  }

 private:
  enum class Phase { head, body, handler, write, linger, done };

  void arm(Phase phase, std::chrono::milliseconds after) {
    if (phase != Phase::head) unlist();
    phase_ = phase;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), phase](const error_code& ec) {
      if (!ec) self->on_deadline(phase);
    });
  }

  void on_deadline(Phase phase) {
    if (phase != phase_) return;
    if (phase == Phase::head || phase == Phase::body) {
      error_code ignored;
      socket_.cancel(ignored);  // the read completes with operation_aborted, in a phase left
      return respond(408, phase == Phase::head ? "request head not complete in time\n"
                                               : "request body not complete in time\n");
    }
    finish();  // the client does not read the answer, or does not close after it
  }

  void on_head(const error_code& ec, std::size_t n) {
    if (phase_ != Phase::head) return;
    if (ec == asio::error::not_found) {
      return respond(431,
                     "request head larger than " + std::to_string(params_.max_head) + " bytes\n");
    }
    if (ec) return finish();  // closed or reset before a complete head
    std::string why;
    const int status =
        parse_head(std::string_view(static_cast<const char*>(buffer_.data().data()), n), why);
    buffer_.consume(n);
    if (status != 0) return respond(status, why);
    if (request_.method != "GET") {
      const Access a = handlers_.access(request_);
      if (a.status != 0) {
        return respond(a.status,
                       boost::json::serialize(boost::json::object{{"error", a.error}}) + "\n",
                       a.status == 401 ? "WWW-Authenticate: Bearer\r\n" : "", kJson);
      }
    }
    if (length_ > 0 && request_.method == "GET") {
      return respond(413, "a GET or HEAD request takes no body\n");
    }
    if (length_ > params_.max_body) {
      return respond(413, "body larger than " + std::to_string(params_.max_body) +
                              " bytes; activate a larger file from disk (empty body)\n");
    }
    start_body();
  }

  // Returns 0, or the status to answer with and its reason in `why`. The head is parsed by
  // the strict parser the proxy uses (http/parser.h): what the client listeners refuse, the
  // admin listener refuses too.
  int parse_head(std::string_view head, std::string& why) {
    const auto bound = static_cast<uint32_t>(params_.max_head);
    parser_.begin(head.data(), fields_.data(), http::HeadLimits{bound, bound, kMaxFields});
    const http::Parser::Result r = parser_.parse_head(head.size());
    if (r == http::Parser::Result::error || r == http::Parser::Result::need_more) {
      const Reason reason = parser_.error_reason();
      if (reason == Reason::header_too_large) {
        why = "more than " + std::to_string(kMaxFields) + " header fields\n";
        return 431;
      }
      why = std::string("malformed request: ") +
            (r == http::Parser::Result::need_more ? "incomplete head" : parser_.error_detail()) +
            "\n";
      return reason == Reason::uri_too_long ? 414 : 400;
    }
    if (parser_.http_major() != 1 || parser_.http_minor() > 1) {
      why = "malformed request: HTTP/1.0 or HTTP/1.1 only\n";
      return 400;
    }
    request_.method = std::string(parser_.method_name());
    if (request_.method == "HEAD") {
      request_.method = "GET";  // RFC 9110 9.3.2: GET without the body
      head_only_ = true;
    }
    const std::string_view target = parser_.target();
    request_.path = std::string(target.substr(0, target.find('?')));
    if (parser_.chunked() || parser_.has(http::bit(http::Field::transfer_encoding))) {
      why = "send the body with Content-Length\n";
      return 411;
    }
    length_ = parser_.has_content_length() ? parser_.content_length() : 0;
    for (uint32_t i = 0; i < parser_.field_count(); ++i) {
      const std::string_view name = parser_.field_name(i);
      if (ascii::iequals(name, "authorization")) {
        request_.authorization = std::string(parser_.field_value(i));
      } else if (parser_.field_kind(i) == http::Field::expect) {
        expect_continue_ = ascii::iequals(parser_.field_value(i), "100-continue");
      }
    }
    return 0;
  }

  void start_body() {
    // The bytes after the head already read belong to the body.
    const std::size_t have = std::min(buffer_.size(), length_);
    request_.body.assign(static_cast<const char*>(buffer_.data().data()), have);
    buffer_.consume(buffer_.size());
    if (have == length_) return route();
    arm(Phase::body, params_.body_timeout);
    request_.body.resize(length_);
    if (!expect_continue_) return read_body(have);
    out_ = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this(), have](const error_code& ec, std::size_t) {
                        if (self->phase_ != Phase::body) return;
                        if (ec) return self->finish();
                        self->read_body(have);
                      });
  }

  void read_body(std::size_t have) {
    asio::async_read(socket_, asio::buffer(request_.body.data() + have, length_ - have),
                     [self = shared_from_this()](const error_code& ec, std::size_t) {
                       if (self->phase_ != Phase::body) return;
                       if (ec) return self->finish();
                       self->route();
                     });
  }

  void route() {
    unlist();
    phase_ = Phase::handler;  // no deadline: the handler answers (an activation, later)
    timer_.cancel();
    const std::string_view path = request_.path;
    if (path == "/config" || path.starts_with("/config/") || path == "/status" ||
        (handlers_.fault_hooks && path.starts_with("/fault/"))) {
      return handlers_.control(request_, [self = shared_from_this()](const Response& r) {
        self->respond(r.status, r.body, "", r.content_type);
      });
    }
    if (path != "/healthz" && path != "/metrics") return respond(404, "not found\n");
    if (request_.method != "GET") {
      return respond(405, "use GET or HEAD\n", "Allow: GET, HEAD\r\n");
    }
    if (path == "/healthz") {
      if (handlers_.draining()) return respond(503, "draining\n");
      if (handlers_.drain_reason) {
        if (const std::string why = handlers_.drain_reason(); !why.empty()) {
          return respond(503, why + "\n");
        }
      }
      return respond(200, "ok\n");
    }
    std::string body;
    handlers_.metrics(body);
    respond(200, body, "", "text/plain; version=0.0.4; charset=utf-8");
  }

  void respond(int status, std::string_view body, std::string_view extra = "",
               std::string_view type = kText) {
    arm(Phase::write, params_.write_timeout);
    out_ = "HTTP/1.1 " + std::to_string(status) + " " + std::string(phrase(status)) + "\r\n";
    out_ += "Content-Type: " + std::string(type) + "\r\n";
    out_ += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    out_ += std::string(extra) + "Connection: close\r\n\r\n";
    if (!head_only_) out_ += body;
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const error_code& ec, std::size_t) {
                        if (self->phase_ != Phase::write) return;
                        if (ec) return self->finish();
                        self->linger();
                      });
  }

  // Sends FIN, then reads and drops whatever the client still sends until it closes: closing
  // with unread bytes would reset the connection and could destroy the answer in flight.
  void linger() {
    arm(Phase::linger, params_.linger);
    out_ = std::string();
    request_.body = std::string();
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_send, ignored);
    discard();
  }

  void discard() {
    socket_.async_read_some(asio::buffer(drop_),
                            [self = shared_from_this()](const error_code& ec, std::size_t) {
                              if (self->phase_ != Phase::linger) return;
                              if (ec) return self->finish();
                              self->discard();
                            });
  }

  void finish() {
    unlist();
    phase_ = Phase::done;
    timer_.cancel();
    error_code ignored;
    socket_.close(ignored);
    release();  // the descriptor is closed: the slot is free for the next connection
  }

  // Once the head is complete (or the connection ends), a new connection no longer takes its
  // place.
  void unlist() {
    if (!listed_) return;
    occupancy_->waiting.erase(waiting_);
    listed_ = false;
  }

  void release() {
    if (released_) return;
    --occupancy_->open;
    released_ = true;
  }

  Socket socket_;
  asio::steady_timer timer_;
  const Handlers& handlers_;
  const Params params_;
  const std::shared_ptr<Occupancy> occupancy_;  // this connection's slot
  std::list<Connection*>::iterator waiting_;    // its place in occupancy_->waiting, if listed_
  bool listed_ = true;
  bool released_ = false;  // its slot given back
  Phase phase_ = Phase::head;
  asio::streambuf buffer_;  // the head, and the body bytes read with it
  Request request_;
  std::size_t length_ = 0;  // Content-Length
  bool head_only_ = false;  // a HEAD request: the answer goes without its body
  bool expect_continue_ = false;
  std::string out_;
  std::array<char, 512> drop_{};               // what lingering reads, unread
  static constexpr uint32_t kMaxFields = 100;  // header fields in an admin request head
  http::Parser parser_{http::Parser::Kind::request};
  std::array<http::HeaderField, kMaxFields> fields_{};
};

AdminServer::AdminServer(asio::io_context& io, const Listen& at, Handlers h, const Params& p)
    : io_(io),
      acceptor_(io),
      retry_(io),
      handlers_(std::move(h)),
      params_(p),
      occupancy_(std::make_shared<Occupancy>()) {
  if (at.unix_path.empty()) {
    const asio::generic::stream_protocol::endpoint ep(at.tcp);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
  } else {
    // A socket file left by a floodgate that did not exit cleanly is replaced; a socket some
    // process still serves, or a file of any other kind, is not floodgate's to remove.
    struct stat st {};
    if (::lstat(at.unix_path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        throw std::runtime_error(
            "the path holds a file that is not a socket (floodgate replaces only a stale socket "
            "file); remove it or choose another path");
      }
      if (socket_is_served(at.unix_path)) {
        throw std::runtime_error("another floodgate (or another program) is listening on unix:" +
                                 at.unix_path + "; stop it or choose another admin.listen");
      }
      ::unlink(at.unix_path.c_str());
    }
    const asio::generic::stream_protocol::endpoint ep(
        asio::local::stream_protocol::endpoint(at.unix_path));
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    // Which file is ours: at exit the path is removed only if it still names it (another
    // process may have replaced it since).
    if (::lstat(at.unix_path.c_str(), &st) != 0) {
      throw boost::system::system_error(error_code(errno, boost::system::system_category()),
                                        "stat " + at.unix_path);
    }
    unix_dev_ = static_cast<uint64_t>(st.st_dev);
    unix_ino_ = static_cast<uint64_t>(st.st_ino);
    unix_path_ = at.unix_path;
    if (::chmod(at.unix_path.c_str(), static_cast<mode_t>(at.mode)) != 0) {
      const int e = errno;
      ::unlink(at.unix_path.c_str());
      throw boost::system::system_error(error_code(e, boost::system::system_category()),
                                        "chmod " + at.unix_path);
    }
  }
  acceptor_.listen();
  do_accept();
}

AdminServer::~AdminServer() {
  if (unix_path_.empty()) return;
  struct stat st {};
  if (::lstat(unix_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) &&
      static_cast<uint64_t>(st.st_dev) == unix_dev_ &&
      static_cast<uint64_t>(st.st_ino) == unix_ino_) {
    ::unlink(unix_path_.c_str());
  }
}

uint16_t AdminServer::port() const {
  if (!unix_path_.empty()) return 0;
  const auto ep = acceptor_.local_endpoint();
  const auto* sa = reinterpret_cast<const sockaddr*>(ep.data());
  if (sa->sa_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
}

void AdminServer::close() {
  error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

std::size_t AdminServer::open_connections() const {
  return occupancy_->open;
}

void AdminServer::do_accept() {
  acceptor_.async_accept(io_, [this](const error_code& ec, Socket s) {
    if (ec == asio::error::operation_aborted) return;  // closed: `this` may be gone
    on_accept(ec, std::move(s));
  });
}

void AdminServer::on_accept(const error_code& ec, Socket s) {
  if (!acceptor_.is_open()) return;
  const auto now = std::chrono::steady_clock::now();
  if (is_resource_shortage(ec)) {
    if (accept_log_.occurred(now)) {
      spdlog::warn(
          "admin listener: accept failed: {} ({} more since the last line); retrying every {} ms",
          ec.message(), accept_log_.take() - 1, kAcceptRetry.count());
    }
    accepting_ = false;
    retry_.expires_after(kAcceptRetry);
    retry_.async_wait([this](const error_code& e) {
      if (!e) do_accept();
    });
    return;
  }
  if (!ec) {
    if (!accepting_ && accept_log_.ready(now)) {
      spdlog::info("admin listener: accepting again ({} failures since the last line)",
                   accept_log_.take());
      accepting_ = true;
    }
    if (occupancy_->open >= params_.max_connections && !occupancy_->waiting.empty()) {
      // The oldest connection still without a complete head makes room, so that idle or slow
      // clients cannot keep out a balancer's health check.
      occupancy_->waiting.front()->evict();
      if (evict_log_.occurred(now)) {
        spdlog::debug(
            "admin listener: {} connection(s) without a complete request head closed to make "
            "room for new ones (at most {} open)",
            evict_log_.take(), params_.max_connections);
      }
    }
    if (occupancy_->open >= params_.max_connections) {
      refuse(s);
    } else {
      std::make_shared<Connection>(std::move(s), handlers_, params_, occupancy_)->start();
    }
  }
  do_accept();  // after an error other than a shortage (the peer aborted), at once
}

// Answers without holding anything: what the client sent is drained (bounded) so that the
// close sends FIN rather than a reset, then the 503 goes in one non-blocking write.
void AdminServer::refuse(Socket& s) {
  ++refused_;
  error_code ec;
  drop_unread(s, ec);
  s.write_some(asio::buffer(kRefusal), ec);
  s.shutdown(asio::socket_base::shutdown_send, ec);
  s.close(ec);
}

AdminServer::Access AdminServer::access_of(const Request& head, std::string_view token,
                                           bool local_socket) {
  if (!token.empty()) {
    if (bearer_token_matches(head.authorization, token)) return {};
    return {401, "missing or wrong token: send Authorization: Bearer <admin.token>"};
  }
  if (local_socket) return {};
  const bool changes = head.path == "/config/activate" || head.path == "/config/rollback" ||
                       head.path.starts_with("/fault/");
  if (!changes) return {};
  return {403, head.method + " " + head.path +
                   " changes floodgate's configuration and no admin token is configured: set "
                   "admin.token or admin.token_file and send Authorization: Bearer <token>, or "
                   "reload with SIGHUP (systemctl reload floodgate)"};
}

bool AdminServer::bearer_token_matches(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "bearer";
  if (token.empty() || authorization.size() <= kScheme.size() ||
      !ascii::iequals(authorization.substr(0, kScheme.size()), kScheme) ||
      authorization[kScheme.size()] != ' ') {
    return false;
  }
  std::string_view given = authorization.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  // Constant time in the token's length: the comparison does not stop at the first difference.
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < token.size(); ++i) {
    diff |= static_cast<unsigned char>(token[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

}  // namespace floodgate::app
