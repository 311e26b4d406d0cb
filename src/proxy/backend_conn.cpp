#include "backend_conn.h"

#include "floodgate/proxy/reactor.h"

namespace floodgate::proxy {

BackendConn::BackendConn(Reactor& r, uint32_t upstream_id, std::shared_ptr<Backend> peer)
    : Stream(r.poller()),
      reactor(r),
      upstream(upstream_id),
      backend(std::move(peer)),
      idle_timer(
          [](void* self) {  // keep-alive expiry of a pooled connection
            Ref<BackendConn> c(static_cast<BackendConn*>(self));
            c->reactor.remove_idle(*c);
            c->close();
          },
          this) {}

BackendConn::~BackendConn() {
  idle_timer.cancel();
  set_owner(nullptr);
}

void BackendConn::close() {
  Stream::close();
  idle_timer.cancel();
}

net::StreamOwner* BackendConn::stream_owner() {
  return owner_;
}

void BackendConn::on_ready() {
  Stream::on_ready();
  // An idle connection that became readable was closed by the backend (or got bytes nobody
  // asked for): either way it cannot carry another request.
  if (pooled && readable()) {
    reactor.remove_idle(*this);
    close();
  }
}

}  // namespace floodgate::proxy
