// CONNECT host:port (RFC 9110 section 9.3.6), once the protocol policy has allowed it
// (resilience.protocol.allow_connect and its allowlists, docs/resilience.md): floodgate opens
// a TCP connection to the authority (the exchange's attempt, with no pool), answers 200, and
// from then on relays bytes both ways with the upgrade tunnel's code (tunnel.cpp) until
// either side closes or idle_timeout passes. An IP literal is connected at once; a name is
// resolved off the reactor (resolver.h). A refused or unreachable target is 502
// upstream_connect_failed, a slow one 504 upstream_connect_timeout, as for a backend.
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <cstring>
#include <memory>
#include <string>

#include "backend_conn.h"
#include "client_conn.h"
#include "floodgate/proxy/reactor.h"
#include "resolver.h"

namespace floodgate::proxy {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// A tunnel target has no pool and so no connect_timeout of its own.
constexpr std::chrono::seconds kTunnelConnectTimeout{10};
constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection Established\r\n\r\n";
// The id a tunnel's connection carries instead of a pool's (it is never pooled).
constexpr uint32_t kNoPool = UINT32_MAX;
}  // namespace

void ClientConn::open_connect_tunnel() {
  phase_ = Phase::forwarding;  // a client that goes away now is logged as cut short
  // inspect_request checked the form: host ":" port, the port at most 65535.
  const std::string_view authority = ex_.facts.authority;
  const std::size_t colon = authority.rfind(':');
  std::string_view host = authority.substr(0, colon);
  uint16_t port = 0;
  for (const char c : authority.substr(colon + 1)) {
    port = static_cast<uint16_t>(port * 10 + static_cast<uint16_t>(c - '0'));
  }
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (!ec) return ex_.attempt().start_tunnel({address, port});
  // The completion holds the connection (through a shared handle, so that copies of the
  // function never touch its count off this thread) until it runs here.
  auto self = std::make_shared<Ref<ClientConn>>(this);
  const bool queued =
      reactor_.resolver().resolve(std::string(host), port, [self](const Resolver::Result& r) {
        ClientConn& c = **self;
        if (c.closed_) return;  // the client went away meanwhile
        if (r.error) return c.respond(Reason::upstream_connect_failed);
        c.ex_.attempt().start_tunnel(r.endpoint);
      });
  if (!queued) respond(Reason::upstream_connect_failed);
}

void Attempt::start_tunnel(const asio::ip::tcp::endpoint& to) {
  started_ = true;
  begun_at_ = client_->reactor().now();
  conn_ = Ref<BackendConn>(new BackendConn(client_->reactor(), kNoPool, nullptr));
  connect(to, kTunnelConnectTimeout, [](net::StreamOwner& o, const error_code& ec, std::size_t) {
    Attempt::from(o).on_tunnel_connected(ec);
  });
}

void Attempt::on_tunnel_connected(const error_code& ec) {
  connecting_ = false;
  timer_.cancel();
  if (ec) return fail(Reason::upstream_connect_failed);
  connected_at_ = head_at_ = client_->reactor().now();  // the tunnel's "head" is floodgate's 200
  Exchange& ex = client_->exchange();
  if (bin_ == nullptr) bin_ = client_->reactor().response_buffers().acquire();
  if (!client_->acquire_out() || bin_ == nullptr) return fail(Reason::buffers_exhausted);
  ex.decide(Outcome::relayed(200, ex.now() - ex.started));
  std::memcpy(client_->out_end(), kEstablished.data(), kEstablished.size());
  client_->commit_out(kEstablished.size());
  ex.head_bytes_out += kEstablished.size();
  bin_len_ = 0;
  client_->run_tunnel();
}

}  // namespace floodgate::proxy
