// [[server.tls]]: the certificates of the TLS listeners, read inside [server], and
// [upstreams.tls], TLS to a pool's backends (docs/configuration.md).
#pragma once

#include "floodgate/proxy/params.h"
#include "table_reader.h"

namespace floodgate::config::detail {

// Reads the [[server.tls]] entries of the [server] table `r` into p.tls and adds their listen
// addresses to p.listen (once each). `listen_written`: server.listen is in the file; when it is
// not and TLS is configured, floodgate has no plain listener. Returns whether every entry's
// listen was valid, so that p.tls says exactly which listeners speak TLS (a rule comparing
// other addresses with them must not run on a partial list).
bool read_server_tls(TableReader& r, ServerParams& p, bool listen_written);

// Reads one [upstreams.tls] table into `p` and, when it is enabled and its keys are valid, reads
// its files as a generation will (an unusable file is an error at its key); verify = false is a
// warning.
void read_upstream_tls(TableReader& r, net::TlsClientParams& p);

}  // namespace floodgate::config::detail
