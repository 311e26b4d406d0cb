// A client connection, whatever protocol it speaks: what the reactor lists, drains, closes and
// evicts, and what every protocol's connection shares before and around its requests: the
// socket (in the clear or TLS), its address and ConnectionFacts, the opening bound (a
// connection is an opening one until its first request head is complete), the TLS handshake
// and its slot of the front in-flight cap, the connection's timer (handshake_timeout, then the
// protocol's own deadlines) and send_timeout's progress check.
//
// The protocol is a subclass: HTTP/1.1 is ClientConn (client_conn.h). The reactor's listener
// makes connections through accept() and never sees a protocol's type.
//
// Thread-safety: reactor thread only. Lifetime: reference-counted; an open connection holds
// itself, and whoever runs its code (a completion, a timer, the poller) holds a Ref meanwhile.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "floodgate/core/ref.h"
#include "floodgate/core/timer_wheel.h"
#include "floodgate/net/stream.h"
#include "floodgate/proxy/exchange.h"
#include "floodgate/proxy/reactor.h"
#include "floodgate/upstream/admission.h"

namespace floodgate::proxy {

class ClientConnection : public RefCounted<ClientConnection>, public net::StreamOwner {
 public:
  // The connection for the accepted socket `fd` from `peer`; `tls`: the listener speaks TLS
  // with these certificates (of the reactor's current generation), else nullptr; `h2c`: the
  // plain listener takes HTTP/2 with prior knowledge too (server.http2.h2c_listen). Then
  // start().
  static Ref<ClientConnection> accept(Reactor& reactor, int fd, const sockaddr* peer,
                                      const net::TlsListener* tls, bool h2c = false);
  virtual ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  // Opens the connection: it holds itself, is an opening one (bounded in number, given
  // server.handshake_timeout for its handshake or its first byte), runs the TLS handshake if
  // any, and reads.
  void start();
  // Opens a connection made by hand-over (below): it holds itself and is an opening one.
  void start_handed_over();
  // Drain: close now if no request is in progress, else after the requests in progress.
  virtual void drain() = 0;
  // Shutdown deadline: close now. Returns true when a request was cut.
  virtual bool force_close() = 0;
  // Generation `retired` is being forced out (server.retirement_grace passed) and `current`
  // serves: a request still on `retired` whose pool `current` no longer has is ended.
  virtual void on_generation_retired(uint64_t retired, const Snapshot& current) = 0;
  // Closes the connection (the reactor makes room for a newer opening one).
  void evict() { close(); }

  // net::StreamOwner: the TLS handshake's steps.
  void on_tls_handshake(Handshake result) noexcept override;
  bool on_tls_hello() noexcept override;
  std::string_view tls_plain_http_answer() noexcept override;

  // Reactor's intrusive connection list.
  ClientConnection* list_prev = nullptr;
  ClientConnection* list_next = nullptr;
  // Reactor's list of opening connections (Reactor::opening_begin), while `opening`.
  ClientConnection* opening_prev = nullptr;
  ClientConnection* opening_next = nullptr;
  bool opening = false;

 protected:
  ClientConnection(Reactor& reactor, int fd, const sockaddr* peer, const net::TlsListener* tls);

  // The protocol begins: the socket (and its TLS session) is ready for its first read.
  virtual void begin() = 0;
  // Closes the connection now: what is in progress is given up.
  virtual void close() = 0;
  // The connection's timer fired (the TLS handshake is over: one that is not closes here).
  virtual void on_timer() = 0;
  // The TLS handshake completed: the first request's header_timeout runs from now.
  virtual void on_handshake_done() {}

  std::string_view peer_ip() const noexcept { return {client_ip_, client_ip_len_}; }
  void arm_timer(std::chrono::milliseconds d);
  // A write to the client begins: `send_timeout` runs from now, and from each byte the client
  // takes.
  void arm_send_timer(std::chrono::milliseconds send_timeout);
  // The timer fired while a write is pending: true (the timer re-armed) when the client took a
  // byte within `send_timeout`; false when it took nothing for that long.
  bool send_progressing(std::chrono::milliseconds send_timeout);
  // A response write pending this long makes its exchange client-paced: what the stages
  // admitted it with goes back (Exchange::release_tickets). Also send_timeout's first check.
  static constexpr std::chrono::milliseconds kClientPacedAfter{1000};
  // close() in two steps around the protocol's own: the timer, the handshake's slot and the
  // opening bound first; then the socket, and the open connection lets go of itself (which
  // may be the last reference: nothing may follow).
  void begin_close() noexcept;
  void finish_close();

  // The client socket; its completions come to this connection. The poller holds the
  // connection through it while it is queued; a hand-over (below) moves those holds with it.
  class ClientStream final : public net::Stream {
   public:
    ClientStream(Poller& poller, ClientConnection& conn) : Stream(poller), conn_(&conn) {}
    ~ClientStream() = default;
    void hold() override {
      ++holds_;
      conn_->add_ref();
    }
    void release() override {
      --holds_;
      conn_->release_ref();
    }
    // Its completions go to `conn` from now on.
    void rebind(ClientConnection& conn) {
      ClientConnection& old = *std::exchange(conn_, &conn);
      for (uint32_t i = 0; i < holds_; ++i) conn.add_ref();
      for (uint32_t i = 0; i < holds_; ++i) old.release_ref();
    }

   private:
    net::StreamOwner* stream_owner() override { return conn_; }
    ClientConnection* conn_;
    uint32_t holds_ = 0;
  };

  // The connection that takes over `from`'s socket (a TLS session included), address and
  // facts, once `from` has learnt that its client speaks another protocol (HTTP/2 by ALPN or
  // by its preface): `from` is closed without closing the socket, and this connection is an
  // opening one. Only between requests, from a completion of `from`'s socket. Then start().
  struct HandOver {};
  ClientConnection(HandOver, ClientConnection& from);
  Reactor& reactor_;
  std::unique_ptr<ClientStream> stream_;
  ClientStream& client_;
  // header_timeout, idle_timeout, send_timeout, the tunnel's idle_timeout, the linger.
  TimerWheel::Entry client_timer_;
  // What the stages and the access log know of this connection (every exchange points to it).
  ConnectionFacts facts_;
  bool closed_ = false;

 private:
  bool admit_handshake() noexcept;  // the front in-flight cap, for a TLS handshake
  void on_client_timer();

  const net::TlsListener* tls_listener_ = nullptr;  // until start() makes the session
  // A slot of the front in-flight cap held by the TLS handshake, from its complete ClientHello
  // (when the costly steps start) to its end.
  Permit handshake_permit_;
  // An open connection holds itself: no pending operation holds a reference (stream.h).
  // close() lets go (let_go).
  Ref<ClientConnection> self_;
  int adopt_error_ = 0;  // the poller refused the socket (errno)
  // The pending client write: when it began or last made progress, and what the kernel still
  // held for the client at the last check (send_progressing).
  static constexpr std::size_t kUnsentUnknown = ~std::size_t{0};
  std::chrono::steady_clock::time_point send_since_{};
  std::size_t send_unsent_ = kUnsentUnknown;
  // Client address, formatted once at accept.
  char client_ip_[48] = {};
  uint8_t client_ip_len_ = 0;
};

}  // namespace floodgate::proxy
