// The `url` of a redis quota backend ([resilience.quota.backend], resilience::RedisTarget):
//
//   redis://[[user]:password@]host[:port][/db]
//
// host a DNS name, an IPv4 address or a bracketed IPv6 address, case-insensitive (stored lower
// case); port 1..65535, 6379 when absent; db 0..kMaxRedisDb, 0 when absent. The user
// information is percent-decoded (a password with '@' or ':' may be written %40, %3A) and,
// when present, must hold a ':' before a non-empty password: "redis://:secret@host" or
// "redis://user:secret@host". No query part, no other scheme (rediss://, TLS, is refused).
//
// As values.h: no TOML; each function returns the value or a message that says what is wrong
// and how to fix it, without the key's name (the caller puts "url = " in front). No message
// holds the password: the url is quoted as redact_redis_url() writes it.
//
// parse_redis_url() is a pure function (any thread). resolve_redis_host() calls getaddrinfo()
// and can wait for DNS: main thread only, at load, never on a reactor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "floodgate/resilience/params.h"
#include "values.h"

namespace floodgate::config::detail {

// Redis's own limit on a database index (an int).
inline constexpr int64_t kMaxRedisDb = 2'147'483'647;

// Every field of the target but `address`, which resolution fills in.
Parsed<resilience::RedisTarget> parse_redis_url(std::string_view text);

// `text` with the password of its user information replaced by "***" (all of the user
// information when it has no ':', since that may be a password written without one). For
// messages and logs; `text` need not be valid.
std::string redact_redis_url(std::string_view text);

// The numeric address (no brackets) that `host`, a name or an IP literal, resolves to first,
// as getaddrinfo() orders them; or why it does not resolve.
Parsed<std::string> resolve_redis_host(const std::string& host);

}  // namespace floodgate::config::detail
