// The admin listener: GET /healthz and GET /metrics (Prometheus text format), on the main
// thread's io_context, never on a reactor. One request per connection; every read has a
// deadline and a size bound.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <string>

namespace floodgate::app {

class AdminServer {
 public:
  struct Handlers {
    std::function<void(std::string&)> metrics;  // appends the exposition text
    std::function<bool()> draining;
  };

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
