// The HTTP/1.1 tunnel relay: after a backend's 101 Switching Protocols (or a CONNECT target's
// connection), the attempt's continuation, bytes flow opaquely in both directions until
// either side closes. Each direction is a read -> write loop over one buffer (client ->
// backend through the client's input, backend -> client through the attempt's). A direction
// that reaches EOF half-closes the other side; the exchange ends when both are done.
// idle_timeout applies to the tunnel as a whole: no traffic either way for that long closes it.
// It is the generation's the request was read on: a reload does not change a running tunnel's.
#include <boost/asio/error.hpp>
#include <cstring>

#include "backend_conn.h"
#include "client_conn.h"
#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

void ClientConn::run_tunnel() {
  ex_->phase = Exchange::Phase::tunnel;
  tunnel_open_ = 2;
  ex_->outcome.client_saw_bytes = true;
  arm_timer(ex_->gen->snapshot->server.idle_timeout);
  client_writing_ = true;
  const std::string_view head = out_.next_write();
  client_.write(head.data(), head.size(),
                [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                  ClientConn& c = ClientConn::from(o);
                  c.client_writing_ = false;
                  c.count_out(n);
                  if (c.closed_) return;
                  if (ec) return c.close();
                  c.out_.clear();
                  c.tunnel_backend_to_client();
                });
  tunnel_client_to_backend();
}

// The request's head stays where it is until the exchange ends (the access log reads its
// method, target and CONNECT authority from it): the tunnel's bytes go after it.
void ClientConn::tunnel_client_to_backend() {
  if (closed_) return;
  net::Stream& backend = ex_->attempt().stream();
  if (in_len_ > in_pos_) {  // pending client bytes: forward them first
    backend.write(in_data() + in_pos_, in_len_ - in_pos_,
                  [](net::StreamOwner& o, const error_code& ec, std::size_t) {
                    ClientConn& c =
                        static_cast<ClientConn&>(Attempt::from(o).exchange().downstream());
                    if (c.closed_) return;
                    if (ec) return c.close();
                    c.in_pos_ = c.in_len_ = c.parser_.head_end();
                    c.arm_timer(c.ex_->gen->snapshot->server.idle_timeout);
                    c.tunnel_client_to_backend();
                  });
    return;
  }
  const std::size_t head = parser_.head_end();
  client_.read_some(in_data() + head, reactor_.request_data() - head,
                    [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                      ClientConn& c = ClientConn::from(o);
                      if (c.closed_) return;
                      if (ec == asio::error::eof) {
                        c.ex_->attempt().stream().shutdown_send();
                        return c.tunnel_half_closed();
                      }
                      if (ec) return c.close();
                      c.count_in(n);
                      c.in_pos_ = c.parser_.head_end();
                      c.in_len_ = c.in_pos_ + n;
                      c.tunnel_client_to_backend();
                    });
}

void ClientConn::tunnel_backend_to_client() {
  if (closed_) return;
  Attempt& a = ex_->attempt();
  if (a.in_len() > 0) {
    client_writing_ = true;
    client_.write(a.in_data(), a.in_len(),
                  [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                    ClientConn& c = ClientConn::from(o);
                    c.client_writing_ = false;
                    c.count_out(n);
                    if (c.closed_) return;
                    if (ec) return c.close();
                    c.ex_->attempt().set_in_len(0);
                    c.arm_timer(c.ex_->gen->snapshot->server.idle_timeout);
                    c.tunnel_backend_to_client();
                  });
    return;
  }
  a.stream().read_some(a.in_data(), BufferLayout::kResponseData,
                       [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                         Attempt& a = Attempt::from(o);
                         ClientConn& c = static_cast<ClientConn&>(a.exchange().downstream());
                         if (c.closed_) return;
                         if (ec == asio::error::eof) {
                           c.client_.shutdown_send();
                           return c.tunnel_half_closed();
                         }
                         if (ec) return c.close();
                         a.set_in_len(n);
                         c.tunnel_backend_to_client();
                       });
}

void ClientConn::tunnel_half_closed() {
  if (--tunnel_open_ > 0) return;
  ex_->attempt().end(false);
  finish_request(true);
}

}  // namespace floodgate::proxy
