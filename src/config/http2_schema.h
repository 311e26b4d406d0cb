// The schema of [server.http2]: HTTP/2 from clients (proxy/params.h, Http2Params). Its own file
// because h2c_listen is checked against the listeners [server] and its [[server.tls]] entries
// declare, and because its limits relate to each other. Main thread only.
#pragma once

#include "floodgate/proxy/params.h"
#include "table_reader.h"

namespace floodgate::config::detail {

// Reads the keys of one [server.http2] table into p.http2 (which holds the defaults) and
// records their errors. h2c_listen is checked against p.listen and p.tls, so the caller reads
// server.listen and [[server.tls]] first; `listeners_known`: both were valid, so that p says
// exactly which listeners are plain and which speak TLS (otherwise h2c_listen is read but not
// compared, rather than reported against a list the operator did not write). The caller
// finishes the table.
void read_http2(TableReader& r, ServerParams& p, bool listeners_known);

}  // namespace floodgate::config::detail
