// CONNECT host:port (RFC 9110 section 9.3.6), once the protocol policy has allowed it
// (resilience.protocol.allow_connect and its allowlists, docs/resilience.md): floodgate opens
// a TCP connection to the authority, answers 200, and from then on relays bytes both ways with
// the upgrade tunnel's code (tunnel.cpp) until either side closes or idle_timeout passes. An
// IP literal is connected at once; a name is resolved off the reactor (resolver.h). A refused
// or unreachable target is 502 upstream_connect_failed, a slow one 504
// upstream_connect_timeout, as for a backend.
#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <cstring>
#include <memory>
#include <string>

#include "floodgate/proxy/reactor.h"
#include "resolver.h"
#include "session.h"

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

void Session::open_connect_tunnel() {
  phase_ = Phase::forwarding;  // a client that goes away now is logged as cut short
  // inspect_request checked the form: host ":" port, the port at most 65535.
  const std::string_view authority = facts_.authority;
  const std::size_t colon = authority.rfind(':');
  std::string_view host = authority.substr(0, colon);
  uint16_t port = 0;
  for (const char c : authority.substr(colon + 1)) {
    port = static_cast<uint16_t>(port * 10 + static_cast<uint16_t>(c - '0'));
  }
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (!ec) return connect_tunnel_to({address, port});
  // The completion holds the session (through a shared handle, so that copies of the
  // function never touch its count off this thread) until it runs here.
  auto self = std::make_shared<Ref<Session>>(this);
  const bool queued =
      reactor_.resolver().resolve(std::string(host), port, [self](const Resolver::Result& r) {
        Session& s = **self;
        if (s.closed_) return;  // the client went away meanwhile
        if (r.error) return s.respond(Reason::upstream_connect_failed);
        s.connect_tunnel_to(r.endpoint);
      });
  if (!queued) respond(Reason::upstream_connect_failed);
}

void Session::connect_tunnel_to(const asio::ip::tcp::endpoint& to) {
  conn_ = Ref<BackendConn>(new BackendConn(reactor_, kNoPool, nullptr));
  conn_->owner = Ref<Session>(this);
  connecting_ = true;
  arm_backend_timer(kTunnelConnectTimeout);
  conn_->connect(to, [](net::StreamOwner& o, const error_code& ec, std::size_t) {
    Session::from(o).on_tunnel_connected(ec);
  });
}

void Session::on_tunnel_connected(const error_code& ec) {
  connecting_ = false;
  backend_timer_.cancel();
  if (ec) return fail_backend(Reason::upstream_connect_failed);
  if (cout_ == nullptr) cout_ = reactor_.response_buffers().acquire();
  if (bin_ == nullptr) bin_ = reactor_.response_buffers().acquire();
  if (cout_ == nullptr || bin_ == nullptr) return fail_backend(Reason::buffers_exhausted);
  decide(Outcome::relayed(200, std::chrono::steady_clock::now() - started_));
  std::memcpy(cout_, kEstablished.data(), kEstablished.size());
  cout_len_ = kEstablished.size();
  bin_len_ = 0;
  run_tunnel();
}

}  // namespace floodgate::proxy
