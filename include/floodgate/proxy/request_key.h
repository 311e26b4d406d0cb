// Request-key sources (seed 004, "Request-Key Sources"): the identity a scoped rate limit (issue
// 15) counts a request by, read from the parsed head, the RequestView and the connection.
//
// What each source gives (an empty result means the request has none: "missing"):
//   header:<name>  the first field named <name> (case-insensitive), trimmed of OWS. Only the
//                  first such field counts, even when its value is empty.
//   cookie:<name>  the first cookie named exactly <name> (names are case-sensitive) in the
//                  Cookie fields, every one of them searched in order, each a `;`-separated list
//                  of `name=value` pairs (RFC 6265 section 5.4; OWS around a pair, its name and
//                  its value is ignored); the value without one pair of surrounding DQUOTEs.
//   query:<name>   the value of the first `&`-separated parameter of the request-target's query
//                  (after the first '?', up to a '#') whose name is exactly <name>. Nothing is
//                  percent-decoded, neither names nor values: identities are compared as sent,
//                  so `?t=a%62` and `?t=ab` are two identities. `?t` (no '=') is an empty value.
//   path           RequestView::path, the normalised path (empty for CONNECT and OPTIONS *).
//   authority      RequestView::authority (absolute-form), else RequestView::host, normalised
//                  as routing compares hosts (routing/route_table.h, normalise_host: lower-case,
//                  no port, no trailing dot), so that "A.EXAMPLE:80" and "a.example." are one
//                  identity; missing when that leaves nothing or more than 255 bytes.
//   method         the method token as received.
//   cid            the client connection's id, in decimal.
//   peer_ip        the connection's peer address, as the access log writes it (peer_text).
//   client_ip      the client's address as the proxies in front of floodgate saw it, as nginx's
//                  realip module works it out with real_ip_recursive on. From a peer inside one
//                  of the trusted proxies' ranges, the elements of every X-Forwarded-For field
//                  (the fields in order, each a comma-separated list, elements trimmed) are read
//                  as one list from the right: an address in a trusted range is a proxy that
//                  appended, and is passed over; the first that is not is the client. When every
//                  one is trusted, the client is the left-most. An element that is not an address
//                  ("unknown", a host name, garbage) ends the reading: the client is then the
//                  last trusted address passed (the peer when that element is the right-most).
//                  Only what the trusted proxies appended is believed: whatever a client writes
//                  in its own X-Forwarded-For stands left of the address its first trusted proxy
//                  appended for it, so a client never chooses the address it is counted by. An
//                  element is an IPv4 or IPv6 address (IpAddress::parse: no zone), optionally
//                  with a port as some proxies write one ("192.0.2.7:4711", "[2001:db8::7]:4711",
//                  "[2001:db8::7]"); empty elements are skipped (RFC 9110 section 5.6.1). From
//                  an untrusted peer, or without any X-Forwarded-For element, the client is the
//                  peer: a header is never believed from an untrusted peer. Either way the
//                  address is written in one canonical form (IPv4 and IPv4-mapped IPv6 as dotted
//                  quad, IPv6 as inet_ntop writes it), so a client counts once whether it comes
//                  directly, over a dual-stack listener or through a proxy. The access log's
//                  `client` is this address too (forwarded_client, below).
//   bearer_token   the credentials of the first Authorization field when its scheme is Bearer
//                  (case-insensitive), trimmed; any other scheme, or none, is missing.
//   none           always missing.
// Values are returned whatever their length (a value of more than 256 bytes too): the scoped
// limiter stores only a digest of it (resilience/identity_digest.h), never the value.
//
// A request without its rule's identity (issue 35): identity_of() says what the rule counts it
// by instead, as the rule's missing_key (resilience::MissingKey) asks: the client's address
// (peer), the route (route), nothing (skip) or a refusal (refuse). There is no fallback to the
// Host: a client that could spell its host anew for each request ("a.example", "A.EXAMPLE:80",
// "a.example.") chose its own bucket, and every anonymous client of a host shared one.
//
// Cost: a scan of the head's fields for the header-based sources (client_ip's from the last
// field, reading each X-Forwarded-For element once at most); nothing allocates, nothing locks,
// nothing throws.
//
// Thread-safety and lifetime: a pure function of its arguments. A result views the head buffer,
// the RequestView's strings, peer_text or `scratch`, and is valid as long as they are: for the
// one check it was computed for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "floodgate/core/ip_range.h"
#include "floodgate/http/request_head.h"
#include "floodgate/resilience/params.h"
#include "floodgate/resilience/request_view.h"

namespace floodgate::proxy {

// What the key sources read from one request (views; valid for one check). A null member gives
// nothing: the sources that need it are missing (client_ip without `peer` falls back to
// peer_text, without `trusted_proxies` it trusts nobody).
struct KeyContext {
  const http::RequestHead* head = nullptr;  // the parsed request head
  const resilience::RequestView* request = nullptr;
  const IpAddress* peer = nullptr;  // the connection's peer
  std::string_view peer_text;       // its textual form (as the access log has it)
  uint64_t connection_id = 0;       // the client connection's id (cid)
  const std::vector<IpRange>* trusted_proxies = nullptr;  // server.trusted_proxies
};

// Room for what a source writes rather than views: cid's decimal form (20 digits), client_ip's
// canonical address (INET6_ADDRSTRLEN, 46) and authority's normalised host (255).
inline constexpr std::size_t kKeyScratch = 256;

// The client's address by client_ip's rule (above) when it comes from X-Forwarded-For, for a
// request with the parsed head `head` (nullptr: none) from `peer`; nullopt when the client is
// the peer itself (an untrusted peer, no X-Forwarded-For element, or a right-most element that
// is not an address). The one place the client is worked out: the client_ip key source and the
// access log's `client` both take it from here.
std::optional<IpAddress> forwarded_client(const IpAddress& peer,
                                          std::span<const IpRange> trusted_proxies,
                                          const http::RequestHead* head) noexcept;

// `a` in client_ip's canonical text form (above), written into `out` (it always fits).
std::string_view address_text(const IpAddress& a, std::span<char, kKeyScratch> out) noexcept;

// The identity source `s` gives this request, or an empty view when it has none (see above).
std::string_view key_of(const resilience::KeySource& s, const KeyContext& c,
                        std::span<char, kKeyScratch> scratch) noexcept;

// How a rule counts one request: by the identity of its key when the request has it, else as
// the rule's missing_key says.
enum class Counted : uint8_t {
  by_key,    // `value` is the key's identity
  by_peer,   // missing, missing_key = "peer": `value` is the client's address (client_ip's rule)
  by_route,  // missing, missing_key = "route": the caller's bucket for the route
  skipped,   // missing, missing_key = "skip": the rule does not count the request
  refused,   // missing, missing_key = "refuse": 429 selector_identity_missing (quota)
};
struct Identity {
  std::string_view value;  // by_key and by_peer; empty otherwise
  Counted as = Counted::skipped;
};

// What a rule keyed by `s`, with `missing` for a request without it, counts this request by.
Identity identity_of(const resilience::KeySource& s, resilience::MissingKey missing,
                     const KeyContext& c, std::span<char, kKeyScratch> scratch) noexcept;

}  // namespace floodgate::proxy
