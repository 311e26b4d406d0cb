// The admin listener: GET /healthz, GET /metrics (Prometheus text format), GET /status (pools
// and peers as JSON) and the control API
// under /config (docs/operations.md), on the main thread's io_context, never on a reactor. One
// request per connection (Connection: close); a body needs Content-Length; every read has a
// deadline and a size bound.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <string>

namespace floodgate::app {

class AdminServer {
 public:
  struct Request {
    std::string method;
    std::string path;           // without the query
    std::string authorization;  // the Authorization header's value, if any
    std::string body;
  };
  struct Response {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
  };

  struct Handlers {
    std::function<void(std::string&)> metrics;  // appends the exposition text
    std::function<bool()> draining;
    // Every path under /config, and /status. Answers by calling the reply function, at once or
    // later (an activation answers once every reactor serves the new generation).
    std::function<void(const Request&, std::function<void(Response)>)> control;
  };

  // Largest request body accepted (a configuration file).
  static constexpr std::size_t kMaxBody = std::size_t{4} << 20;

  // Binds and listens; throws boost::system::system_error on failure.
  AdminServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& at, Handlers h);
  void close();

 private:
  void do_accept();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Handlers handlers_;
};

}  // namespace floodgate::app
