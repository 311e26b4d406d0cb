// The upgrade tunnel: after a backend's 101 Switching Protocols, bytes flow opaquely in both
// directions until either side closes. Each direction is a read -> write loop over one buffer
// (client -> backend through in_, backend -> client through bin_). A direction that reaches
// EOF half-closes the other side; the request ends when both directions are done.
// idle_timeout applies to the tunnel as a whole: no traffic either way for that long closes it.
#include <boost/asio/write.hpp>
#include <cstring>

#include "floodgate/proxy/reactor.h"
#include "session.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

void Session::start_tunnel() {
  http::Parser& rp = conn_->parser;
  status_ = 101;
  phase_ = Phase::tunnel;
  backend_timer_.cancel();
  if (cout_ == nullptr) cout_ = reactor_.response_buffers().acquire();
  http::Writer w(cout_ + cout_len_, BufferLayout::kResponseData - cout_len_);
  if (!http::write_response_head(rp, http::ResponsePlan{}, parser_.http_minor(), w)) {
    return fail_backend(Reason::upstream_bad_response);
  }
  cout_len_ += w.size();
  // Bytes the backend sent after its 101 head belong to the tunnel.
  const std::size_t extra = bin_len_ - rp.head_end();
  std::memmove(bin_data(), bin_data() + rp.head_end(), extra);
  bin_len_ = extra;
  tunnel_open_ = 2;
  response_started_ = true;
  arm_client_timer(reactor_.snapshot().server.idle_timeout);
  client_writing_ = true;
  asio::async_write(
      client_, asio::buffer(cout_, cout_len_),
      in(client_write_slot_, [self = Ref<Session>(this)](const error_code& ec, std::size_t n) {
        self->client_writing_ = false;
        self->bytes_out_ += n;
        if (self->closed_) return;
        if (ec) return self->close();
        self->cout_len_ = 0;
        self->tunnel_backend_to_client();
      }));
  tunnel_client_to_backend();
}

void Session::tunnel_client_to_backend() {
  if (closed_) return;
  if (in_len_ > in_pos_) {  // pending client bytes: forward them first
    conn_->write(in_data() + in_pos_, in_len_ - in_pos_,
                 [](Session& s, const error_code& ec, std::size_t) {
                   if (s.closed_) return;
                   if (ec) return s.close();
                   s.in_pos_ = s.in_len_ = 0;
                   s.arm_client_timer(s.reactor_.snapshot().server.idle_timeout);
                   s.tunnel_client_to_backend();
                 });
    return;
  }
  const std::size_t cap = BufferLayout::request_data(reactor_.snapshot().server);
  client_.async_read_some(
      asio::buffer(in_data(), cap),
      in(client_read_slot_, [self = Ref<Session>(this)](const error_code& ec, std::size_t n) {
        if (self->closed_) return;
        if (ec == asio::error::eof) {
          self->conn_->shutdown_send();
          return self->tunnel_half_closed();
        }
        if (ec) return self->close();
        self->bytes_in_ += n;
        self->in_pos_ = 0;
        self->in_len_ = n;
        self->tunnel_client_to_backend();
      }));
}

void Session::tunnel_backend_to_client() {
  if (closed_) return;
  if (bin_len_ > 0) {
    client_writing_ = true;
    asio::async_write(
        client_, asio::buffer(bin_data(), bin_len_),
        in(client_write_slot_, [self = Ref<Session>(this)](const error_code& ec, std::size_t n) {
          self->client_writing_ = false;
          self->bytes_out_ += n;
          if (self->closed_) return;
          if (ec) return self->close();
          self->bin_len_ = 0;
          self->arm_client_timer(self->reactor_.snapshot().server.idle_timeout);
          self->tunnel_backend_to_client();
        }));
    return;
  }
  conn_->read_some(bin_data(), BufferLayout::kResponseData,
                   [](Session& s, const error_code& ec, std::size_t n) {
                     if (s.closed_) return;
                     if (ec == asio::error::eof) {
                       error_code ignored;
                       s.client_.shutdown(asio::socket_base::shutdown_send, ignored);
                       return s.tunnel_half_closed();
                     }
                     if (ec) return s.close();
                     s.bin_len_ = n;
                     s.tunnel_backend_to_client();
                   });
}

void Session::tunnel_half_closed() {
  if (--tunnel_open_ > 0) return;
  release_backend(false);
  finish_request(true);
}

}  // namespace floodgate::proxy
