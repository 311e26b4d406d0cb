#include "admin_server.h"

#include <algorithm>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <memory>
#include <string_view>

namespace floodgate::app {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr std::size_t kMaxRequestHead = 8192;
constexpr auto kReadTimeout = std::chrono::seconds(10);

struct AdminConnection : std::enable_shared_from_this<AdminConnection> {
  AdminConnection(asio::ip::tcp::socket s, const AdminServer::Handlers& h)
      : socket(std::move(s)),
        timer(socket.get_executor()),
        handlers(h),
        buffer(kMaxRequestHead + AdminServer::kMaxBody) {}

  void start() {
    timer.expires_after(kReadTimeout);
    timer.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec) self->socket.close();
    });
    asio::async_read_until(
        socket, buffer, "\r\n\r\n",
        [self = shared_from_this()](const error_code& ec, std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(const error_code& ec, std::size_t n) {
    if (ec) {
      timer.cancel();
      if (ec == asio::error::not_found)
        respond(431, "Request Header Fields Too Large", "head too large\n");
      return;
    }
    if (n > kMaxRequestHead) {
      timer.cancel();
      return respond(431, "Request Header Fields Too Large", "head too large\n");
    }
    const std::string head(static_cast<const char*>(buffer.data().data()), n);
    buffer.consume(n);
    const std::string_view line = std::string_view(head).substr(0, head.find("\r\n"));
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) {
      timer.cancel();
      return respond(400, "Bad Request", "malformed request\n");
    }
    request.method = std::string(line.substr(0, sp1));
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    request.path = std::string(target.substr(0, target.find('?')));
    std::size_t length = 0;
    for (std::size_t at = head.find("\r\n") + 2; at < head.size();) {
      const std::size_t end = head.find("\r\n", at);
      const std::string_view field = std::string_view(head).substr(at, end - at);
      at = end + 2;
      const std::size_t colon = field.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = lower(field.substr(0, colon));
      std::string_view value = field.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
      }
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      if (name == "content-length") {
        const auto [p, err] = std::from_chars(value.data(), value.data() + value.size(), length);
        if (err != std::errc() || p != value.data() + value.size()) {
          timer.cancel();
          return respond(400, "Bad Request", "malformed Content-Length\n");
        }
      } else if (name == "transfer-encoding") {
        timer.cancel();
        return respond(411, "Length Required", "send the body with Content-Length\n");
      } else if (name == "authorization") {
        request.authorization = std::string(value);
      }
    }
    if (length > AdminServer::kMaxBody) {
      timer.cancel();
      return respond(413, "Content Too Large", "body larger than 4 MiB\n");
    }
    // The bytes after the head already read belong to the body.
    const std::size_t have = std::min(buffer.size(), length);
    request.body.assign(static_cast<const char*>(buffer.data().data()), have);
    buffer.consume(have);
    if (request.body.size() == length) {
      timer.cancel();
      return route();
    }
    const std::size_t missing = length - request.body.size();
    request.body.resize(length);
    asio::async_read(socket, asio::buffer(request.body.data() + (length - missing), missing),
                     [self = shared_from_this()](const error_code& e, std::size_t) {
                       self->timer.cancel();
                       if (!e) self->route();
                     });
  }

  static std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
  }

  void route() {
    const std::string_view path = request.path;
    if (path == "/config" || path.starts_with("/config/") || path == "/status") {
      return handlers.control(request, [self = shared_from_this()](AdminServer::Response r) {
        self->respond(r.status, phrase(r.status), r.body, "", r.content_type);
      });
    }
    if (path != "/healthz" && path != "/metrics") return respond(404, "Not Found", "not found\n");
    if (request.method != "GET" && request.method != "HEAD") {
      return respond(405, "Method Not Allowed", "use GET\n", "Allow: GET, HEAD\r\n");
    }
    if (path == "/healthz") {
      if (handlers.draining()) return respond(503, "Service Unavailable", "draining\n");
      return respond(200, "OK", "ok\n");
    }
    std::string body;
    handlers.metrics(body);
    respond(200, "OK", body, "", "text/plain; version=0.0.4; charset=utf-8");
  }

  static std::string_view phrase(int status) {
    switch (status) {
      case 200:
        return "OK";
      case 400:
        return "Bad Request";
      case 401:
        return "Unauthorized";
      case 404:
        return "Not Found";
      case 405:
        return "Method Not Allowed";
      case 409:
        return "Conflict";
      case 422:
        return "Unprocessable Content";
      case 500:
        return "Internal Server Error";
      case 503:
        return "Service Unavailable";
      default:
        return "Unknown";
    }
  }

  void respond(int status, std::string_view phrase, const std::string& body,
               std::string_view extra = "", std::string_view type = "text/plain; charset=utf-8") {
    out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(phrase) + "\r\n";
    out += "Content-Type: " + std::string(type) + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    out += std::string(extra) + "Connection: close\r\n\r\n" + body;
    asio::async_write(socket, asio::buffer(out),
                      [self = shared_from_this()](const error_code&, std::size_t) {
                        error_code ignored;
                        self->socket.shutdown(asio::socket_base::shutdown_send, ignored);
                        self->socket.close(ignored);
                      });
  }

  asio::ip::tcp::socket socket;
  asio::steady_timer timer;
  const AdminServer::Handlers& handlers;
  asio::streambuf buffer;
  AdminServer::Request request;
  std::string out;
};

}  // namespace

AdminServer::AdminServer(asio::io_context& io, const asio::ip::tcp::endpoint& at, Handlers h)
    : io_(io), acceptor_(io), handlers_(std::move(h)) {
  acceptor_.open(at.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(at);
  acceptor_.listen();
  do_accept();
}

void AdminServer::close() {
  error_code ignored;
  acceptor_.close(ignored);
}

void AdminServer::do_accept() {
  acceptor_.async_accept(io_, [this](const error_code& ec, asio::ip::tcp::socket s) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) std::make_shared<AdminConnection>(std::move(s), handlers_)->start();
    do_accept();
  });
}

}  // namespace floodgate::app
