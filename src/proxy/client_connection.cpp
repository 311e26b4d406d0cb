// What every client connection shares whatever its protocol: the socket and its address, the
// opening bound, the TLS handshake and its slot of the front in-flight cap, the connection's
// timer and send_timeout's progress check.
#include "client_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "floodgate/http/rewrite.h"
#include "floodgate/metrics/reactor_metrics.h"
#include "floodgate/net/tls.h"

namespace floodgate::proxy {

ClientConnection::ClientConnection(Reactor& reactor, int fd, const sockaddr* peer,
                                   const net::TlsListener* tls)
    : reactor_(reactor),
      stream_(std::make_unique<ClientStream>(reactor.poller(), *this)),
      client_(*stream_),
      client_timer_([](void* c) { static_cast<ClientConnection*>(c)->on_client_timer(); }, this),
      tls_listener_(tls) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // What a slow reader costs the kernel is bounded too: without it the kernel grows a client's
  // send buffer to megabytes that floodgate fills (copying from the backend) for a client that
  // takes a few kilobytes a second.
  if (const uint32_t unsent = reactor.snapshot().server.max_unsent_bytes; unsent > 0) {
    ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &unsent, sizeof(unsent));
  }
  const void* addr = nullptr;
  if (peer->sa_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(peer)->sin_addr;
  } else if (peer->sa_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr;
  }
  if (addr != nullptr && ::inet_ntop(peer->sa_family, addr, client_ip_, sizeof(client_ip_))) {
    client_ip_len_ = static_cast<uint8_t>(std::strlen(client_ip_));
  }
  facts_.peer = IpAddress::of(peer).value_or(IpAddress{});
  facts_.peer_text = peer_ip();
  facts_.connection_id = reactor.next_connection_id();
  adopt_error_ = client_.adopt(fd);
  reactor_.add_client(*this);
  reactor_.metrics().client_connections.add(1);
  reactor_.metrics().accepted_connections.add();
}

ClientConnection::ClientConnection(HandOver /*tag*/, ClientConnection& from)
    : reactor_(from.reactor_),
      stream_(std::move(from.stream_)),
      client_(*stream_),
      client_timer_([](void* c) { static_cast<ClientConnection*>(c)->on_client_timer(); }, this),
      facts_(from.facts_),
      client_ip_len_(from.client_ip_len_) {
  std::memcpy(client_ip_, from.client_ip_, sizeof(client_ip_));
  facts_.peer_text = peer_ip();
  client_.rebind(*this);
  reactor_.add_client(*this);
  reactor_.metrics().client_connections.add(1);
  // `from` ends here without its socket: nothing of it runs again (closed_), and the reference
  // it held on itself goes (its caller's completion still holds it).
  from.closed_ = true;
  from.begin_close();
  const Ref<ClientConnection> last = std::move(from.self_);
}

void ClientConnection::start_handed_over() {
  self_ = Ref<ClientConnection>(this);
  reactor_.opening_begin(*this);
  begin();
}

ClientConnection::~ClientConnection() {
  reactor_.metrics().client_connections.add(-1);
  reactor_.remove_client(*this);
}

void ClientConnection::start() {
  self_ = Ref<ClientConnection>(this);
  if (adopt_error_ != 0) return close();  // the poller could not take the socket
  // Until its first request head is complete the connection is an opening one: bounded in
  // number (the oldest makes room), and given handshake_timeout for its handshake (TLS) or its
  // first byte (plain), then closed without an answer. It holds no slot of any cap: a TLS
  // handshake takes one when its ClientHello is complete (on_tls_hello).
  reactor_.opening_begin(*this);
  if (tls_listener_ != nullptr) {
    // The first read runs the handshake, then reads the first head.
    auto session = std::make_unique<net::TlsSession>(reactor_.snapshot().tls,
                                                     *std::exchange(tls_listener_, nullptr));
    if (!session->ok()) return close();  // OpenSSL is out of memory
    client_.start_tls(std::move(session));
  }
  arm_timer(reactor_.snapshot().server.handshake_timeout);
  begin();
}

void ClientConnection::begin_close() noexcept {
  client_timer_.cancel();
  handshake_permit_.release();
  reactor_.opening_end(*this);
}

void ClientConnection::finish_close() {
  if (stream_) client_.close();
  const Ref<ClientConnection> last = std::move(self_);  // may be the last reference
}

void ClientConnection::arm_timer(std::chrono::milliseconds d) {
  reactor_.wheel().schedule(client_timer_, reactor_.now() + d);
}

void ClientConnection::on_client_timer() {
  const Ref<ClientConnection> keep(this);
  if (const net::TlsSession* tls = client_.tls(); tls != nullptr && !tls->handshake_reported) {
    // The handshake did not finish within its time: closed, never answered in plain text.
    reactor_.metrics().tls_handshake(TlsHandshakeResult::timeout, kTlsVersionUnknown);
    return close();
  }
  on_timer();
}

// A handshake costs far more CPU than a request: from its complete ClientHello (before the
// signature and the key exchange) to its end it holds a slot of the front in-flight cap, so a
// flood of new TLS connections cannot take the CPU admitted requests need. A connection that
// sends nothing, or only part of a ClientHello, costs no CPU and holds no slot (its bound is
// the opening connections'). At the cap the handshake ends with an internal_error alert (it
// cannot be answered with an HTTP status before TLS); in shadow mode it goes on and the
// would-be refusal is counted.
bool ClientConnection::on_tls_hello() noexcept {
  return admit_handshake();
}

// nginx answers "400 The plain HTTP request was sent to HTTPS port"; floodgate answers its
// plain_http_to_tls 400 (prebuilt), counted like every generated answer, then closes.
std::string_view ClientConnection::tls_plain_http_answer() noexcept {
  reactor_.metrics().generated(Reason::plain_http_to_tls);
  return http::generated_response(Reason::plain_http_to_tls, true);
}

bool ClientConnection::admit_handshake() noexcept {
  const Snapshot& snap = reactor_.snapshot();
  if (snap.max_inflight == 0) return true;
  handshake_permit_ = snap.front_state->inflight.try_enter();
  if (handshake_permit_) return true;
  if (snap.inflight_shadow) {
    reactor_.metrics().shadow_rejected(StageId::inflight, Reason::inflight_cap);
    return true;
  }
  reactor_.metrics().tls_handshake(TlsHandshakeResult::refused, kTlsVersionUnknown);
  return false;
}

void ClientConnection::on_tls_handshake(Handshake result) noexcept {
  handshake_permit_.release();
  const net::TlsSession& tls = *client_.tls();
  if (tls.hello == net::TlsSession::Hello::refused) return;  // counted as refused already
  if (result == Handshake::ok && !closed_) on_handshake_done();
  const std::size_t v = tls_version_index(tls.version_label());
  TlsHandshakeResult r = TlsHandshakeResult::ok;
  if (result == Handshake::failed) r = TlsHandshakeResult::failed;
  if (result == Handshake::closed) r = TlsHandshakeResult::closed;
  reactor_.metrics().tls_handshake(r, v);
  if (result == Handshake::ok) {
    reactor_.metrics().tls_handshake_done(reactor_.poller().clock().now() - tls.started,
                                          tls.facts().resumed);
  }
}

// send_timeout is checked four times per period: the kernel says when it takes bytes of a
// write (Stream::last_sent_at), and how much it still holds for the client (unsent_bytes),
// which shrinks as the client reads even while the socket is too full to take more. The
// connection is closed between send_timeout and 1.25 x send_timeout after the last progress.
void ClientConnection::arm_send_timer(std::chrono::milliseconds send_timeout) {
  send_since_ = reactor_.now();
  send_unsent_ = kUnsentUnknown;
  arm_timer(std::clamp(send_timeout / 4, std::chrono::milliseconds(1), kClientPacedAfter));
}

bool ClientConnection::send_progressing(std::chrono::milliseconds send_timeout) {
  const auto now = reactor_.now();
  const std::size_t unsent = client_.unsent_bytes();
  if (send_unsent_ != kUnsentUnknown && unsent < send_unsent_) send_since_ = now;
  send_unsent_ = unsent;
  const auto since = std::max(send_since_, client_.last_sent_at());
  if (now - since >= send_timeout) {
    reactor_.metrics().send_timeouts.add();
    return false;
  }
  const auto check = now + std::max(send_timeout / 4, std::chrono::milliseconds(1));
  reactor_.wheel().schedule(client_timer_, std::min(since + send_timeout, check));
  return true;
}

}  // namespace floodgate::proxy
