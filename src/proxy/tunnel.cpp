// The upgrade tunnel: after a backend's 101 Switching Protocols, bytes flow opaquely in both
// directions until either side closes. Each direction is a read -> write loop over one buffer
// (client -> backend through in_, backend -> client through bin_). A direction that reaches
// EOF half-closes the other side; the request ends when both directions are done.
// idle_timeout applies to the tunnel as a whole: no traffic either way for that long closes it.
#include <boost/asio/error.hpp>
#include <cstring>

#include "floodgate/proxy/reactor.h"
#include "session.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

void Session::start_tunnel() {
  http::Parser& rp = conn_->parser;
  decide(Outcome::relayed(101, std::chrono::steady_clock::now() - started_));
  phase_ = Phase::tunnel;
  backend_timer_.cancel();
  if (cout_ == nullptr) cout_ = reactor_.response_buffers().acquire();
  if (cout_ == nullptr) return fail_backend(Reason::buffers_exhausted);
  http::Writer w(cout_ + cout_len_, BufferLayout::kResponseData - cout_len_);
  if (!http::write_response_head(rp, http::ResponsePlan{}, parser_.http_minor(), w)) {
    return fail_backend(Reason::upstream_bad_response);
  }
  cout_len_ += w.size();
  // Bytes the backend sent after its 101 head belong to the tunnel.
  const std::size_t extra = bin_len_ - rp.head_end();
  std::memmove(bin_data(), bin_data() + rp.head_end(), extra);
  bin_len_ = extra;
  run_tunnel();
}

void Session::run_tunnel() {
  phase_ = Phase::tunnel;
  tunnel_open_ = 2;
  outcome_.client_saw_bytes = true;
  arm_client_timer(reactor_.snapshot().server.idle_timeout);
  client_writing_ = true;
  client_.write(cout_, cout_len_, [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
    Session& s = Session::from(o);
    s.client_writing_ = false;
    s.bytes_out_ += n;
    if (s.closed_) return;
    if (ec) return s.close();
    s.cout_len_ = 0;
    s.tunnel_backend_to_client();
  });
  tunnel_client_to_backend();
}

void Session::tunnel_client_to_backend() {
  if (closed_) return;
  if (in_len_ > in_pos_) {  // pending client bytes: forward them first
    conn_->write(in_data() + in_pos_, in_len_ - in_pos_,
                 [](net::StreamOwner& o, const error_code& ec, std::size_t) {
                   Session& s = Session::from(o);
                   if (s.closed_) return;
                   if (ec) return s.close();
                   s.in_pos_ = s.in_len_ = 0;
                   s.arm_client_timer(s.reactor_.snapshot().server.idle_timeout);
                   s.tunnel_client_to_backend();
                 });
    return;
  }
  const std::size_t cap = reactor_.request_data();
  client_.read_some(in_data(), cap, [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
    Session& s = Session::from(o);
    if (s.closed_) return;
    if (ec == asio::error::eof) {
      s.conn_->shutdown_send();
      return s.tunnel_half_closed();
    }
    if (ec) return s.close();
    s.bytes_in_ += n;
    s.in_pos_ = 0;
    s.in_len_ = n;
    s.tunnel_client_to_backend();
  });
}

void Session::tunnel_backend_to_client() {
  if (closed_) return;
  if (bin_len_ > 0) {
    client_writing_ = true;
    client_.write(bin_data(), bin_len_,
                  [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                    Session& s = Session::from(o);
                    s.client_writing_ = false;
                    s.bytes_out_ += n;
                    if (s.closed_) return;
                    if (ec) return s.close();
                    s.bin_len_ = 0;
                    s.arm_client_timer(s.reactor_.snapshot().server.idle_timeout);
                    s.tunnel_backend_to_client();
                  });
    return;
  }
  conn_->read_some(bin_data(), BufferLayout::kResponseData,
                   [](net::StreamOwner& o, const error_code& ec, std::size_t n) {
                     Session& s = Session::from(o);
                     if (s.closed_) return;
                     if (ec == asio::error::eof) {
                       s.client_.shutdown_send();
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
