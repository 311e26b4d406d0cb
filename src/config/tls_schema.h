// [[server.tls]]: the certificates of the TLS listeners, read inside [server]
// (docs/configuration.md, "[[server.tls]]").
#pragma once

#include "floodgate/proxy/params.h"
#include "table_reader.h"

namespace floodgate::config::detail {

// Reads the [[server.tls]] entries of the [server] table `r` into p.tls and adds their listen
// addresses to p.listen (once each). `listen_written`: server.listen is in the file; when it is
// not and TLS is configured, floodgate has no plain listener.
void read_server_tls(TableReader& r, ServerParams& p, bool listen_written);

}  // namespace floodgate::config::detail
