// The kernel interfaces a reactor's event loop can run on (`server.io`, docs/configuration.md).
#pragma once

namespace floodgate {

// What the configuration asks for.
enum class IoMode { automatic, io_uring, epoll };
// What a loop actually runs on.
enum class IoEngine { epoll, io_uring };

}  // namespace floodgate
