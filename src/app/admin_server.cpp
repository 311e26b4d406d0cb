#include "admin_server.h"

#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
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
      : socket(std::move(s)), timer(socket.get_executor()), handlers(h), buffer(kMaxRequestHead) {}

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
    timer.cancel();
    if (ec) {
      if (ec == asio::error::not_found)
        respond(431, "Request Header Fields Too Large", "head too large\n");
      return;
    }
    const std::string_view head(static_cast<const char*>(buffer.data().data()), n);
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const std::size_t sp1 = line.find(' ');
    const std::size_t sp2 = line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) {
      return respond(400, "Bad Request", "malformed request\n");
    }
    const std::string_view method = line.substr(0, sp1);
    std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    route(method, path);
  }

  void route(std::string_view method, std::string_view path) {
    if (path != "/healthz" && path != "/metrics") return respond(404, "Not Found", "not found\n");
    if (method != "GET" && method != "HEAD") {
      return respond(405, "Method Not Allowed", "use GET\n", "Allow: GET, HEAD\r\n");
    }
    if (path == "/healthz") {
      if (handlers.draining()) return respond(503, "Service Unavailable", "draining\n");
      return respond(200, "OK", "ok\n");
    }
    std::string body;
    handlers.metrics(body);
    respond(200, "OK", std::move(body), "", "text/plain; version=0.0.4; charset=utf-8");
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
