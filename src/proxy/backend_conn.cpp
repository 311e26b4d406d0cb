#include "backend_conn.h"

#include <boost/asio/bind_allocator.hpp>

#include "floodgate/proxy/reactor.h"
#include "session.h"

namespace floodgate::proxy {

BackendConn::BackendConn(Reactor& r, uint32_t upstream_id, uint32_t backend_index)
    : reactor(r),
      socket(r.io()),
      upstream(upstream_id),
      backend(backend_index),
      idle_timer(
          [](void* self) {  // keep-alive expiry of a pooled connection
            Ref<BackendConn> c(static_cast<BackendConn*>(self));
            c->reactor.remove_idle(*c);
            c->close();
          },
          this) {}

BackendConn::~BackendConn() = default;

void BackendConn::read_into_landing() {
  if (read_pending_ || !socket.is_open()) return;
  read_pending_ = true;
  socket.async_read_some(
      boost::asio::buffer(landing),
      boost::asio::bind_allocator(
          SlotAllocator<void>(landing_slot_),
          [self = Ref<BackendConn>(this)](const boost::system::error_code& ec, std::size_t n) {
            self->read_pending_ = false;
            self->on_landing_read(ec, n);
          }));
}

void BackendConn::on_landing_read(const boost::system::error_code& ec, std::size_t n) {
  if (owner) {
    const Ref<Session> s = owner;  // the handler may release this connection
    s->on_backend_read(ec, n, landing);
    return;
  }
  if (pooled) {  // an idle connection became readable: the backend closed it (or misbehaved)
    reactor.remove_idle(*this);
    close();
  }
}

void BackendConn::close() {
  boost::system::error_code ignored;
  if (socket.is_open()) socket.close(ignored);
  idle_timer.cancel();
}

}  // namespace floodgate::proxy
