#include "rules.h"

#include <string>

#include "values.h"

namespace floodgate::config::detail {
namespace {

// With SO_REUSEPORT both listeners could bind the same port and share its connections.
void check_admin_port(const Config& c, const DocumentMarks& marks, Collector& out) {
  if (!marks.server_listen_ok || !marks.admin_listen_ok) {
    return;
  }
  for (const Endpoint& e : c.server.listen) {
    if (e.port != 0 && e.host == c.admin.listen.host && e.port == c.admin.listen.port) {
      out.error(marks.admin_listen_at.value_or(marks.server_listen_at), "admin.listen",
                quoted(c.admin.listen.text) +
                    " is also a server.listen address; give the admin listener its own port");
      return;
    }
  }
}

// The admin API changes the configuration: reachable from other hosts, it needs a token. A
// token that is written but invalid has its own error; this one would only repeat it.
void check_admin_exposure(const Config& c, const DocumentMarks& marks, Collector& out) {
  // A UNIX socket is reached through the file system: its mode decides who connects.
  if (!marks.admin_listen_ok || marks.token_given || !c.admin.unix_path.empty() ||
      is_loopback(c.admin.listen.host)) {
    return;
  }
  out.error(marks.admin_listen_at.value_or(Position{1, 1}), "admin.listen",
            quoted(c.admin.listen.text) +
                " is not a loopback address and admin.token is not set, so anyone who can "
                "reach it could change the configuration; set admin.token or admin.token_file (at "
                "least " +
                std::to_string(kMinTokenLength) +
                " characters, e.g. the output of \"openssl rand -hex 32\"), or listen on "
                "127.0.0.1");
}

// Among routes with the same host and path_prefix the first wins (routing/route_table.h), so
// a later one can never match: almost certainly a copy-and-paste slip.
void warn_shadowed_routes(const Config& c, const DocumentMarks& marks, Collector& out) {
  for (size_t later = 0; later < c.routes.size(); ++later) {
    const RouteParams& r = c.routes[later];
    if (!marks.routes[later].host_and_prefix_ok) {
      continue;
    }
    for (size_t first = 0; first < later; ++first) {
      const RouteParams& f = c.routes[first];
      if (!marks.routes[first].host_and_prefix_ok || f.host != r.host ||
          f.path_prefix != r.path_prefix) {
        continue;
      }
      out.warning(
          marks.routes[later].at, "routes[" + std::to_string(marks.routes[later].index) + "]",
          "this route never matches: routes[" + std::to_string(marks.routes[first].index) +
              "] (line " + std::to_string(marks.routes[first].at.line) + ") has the same host " +
              quoted(r.host) + " and path_prefix " + quoted(r.path_prefix) +
              " and takes all its requests; remove one of them or change its host or "
              "path_prefix");
      break;
    }
  }
}

// After server.retirement_grace the retirement hook rejects every request still parked in an
// admission queue of the old generation (generation_retired), so a longer pending_timeout
// promises a wait that a reload can cut short.
void check_pending_timeouts(const Config& c, const DocumentMarks& marks, Collector& out) {
  if (!marks.retirement_grace_ok) {
    return;
  }
  const std::string grace = quoted(format_duration(c.server.retirement_grace));
  for (size_t i = 0; i < c.upstreams.size(); ++i) {
    const std::chrono::milliseconds timeout = c.upstreams[i].resilience.pending_timeout;
    const DocumentMarks::Upstream& mark = marks.upstreams[i];
    if (!mark.pending_timeout_at || timeout <= c.server.retirement_grace) {
      continue;
    }
    out.error(*mark.pending_timeout_at,
              "upstreams[" + std::to_string(mark.index) + "].resilience.pending_timeout",
              std::string("pending_timeout = ")
                  .append(quoted(format_duration(timeout)))
                  .append(" is longer than server.retirement_grace = ")
                  .append(grace)
                  .append(": a request that waits through a reload is rejected with "
                          "generation_retired once retirement_grace has passed, whatever its "
                          "pending_timeout; set pending_timeout to at most ")
                  .append(grace)
                  .append(" or raise server.retirement_grace"));
  }
}

// A head that is still arriving when a reload happens is routed on the configuration current
// when it completes, but its connection keeps the old generation alive meanwhile; and every
// request in progress on an upstream the reload removed is ended after retirement_grace. A
// grace shorter than header_timeout ends such requests sooner than a client is even allowed
// to take to send its head.
void warn_short_retirement_grace(const Config& c, const DocumentMarks& marks, Collector& out) {
  if (!marks.retirement_grace_ok || !marks.header_timeout_ok ||
      c.server.retirement_grace >= c.server.header_timeout) {
    return;
  }
  out.warning(marks.retirement_grace_at, "server.retirement_grace",
              "retirement_grace = " + quoted(format_duration(c.server.retirement_grace)) +
                  " is shorter than server.header_timeout = " +
                  quoted(format_duration(c.server.header_timeout)) +
                  ": after a reload, requests on an upstream it removes are ended sooner than "
                  "a client may take to send one request head; set retirement_grace to at "
                  "least header_timeout");
}

}  // namespace

void check_document(const Config& c, const DocumentMarks& marks, Collector& out) {
  check_admin_port(c, marks, out);
  check_admin_exposure(c, marks, out);
  warn_shadowed_routes(c, marks, out);
  check_pending_timeouts(c, marks, out);
  warn_short_retirement_grace(c, marks, out);
}

}  // namespace floodgate::config::detail
