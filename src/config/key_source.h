// The text syntax of a request-key source (resilience::KeySource; seed 004, "Request-Key
// Sources and Selector Composition"): where a request's identity is taken from. One parser for
// every key that names one: the key and tier_key of [[resilience.scoped_rate_limits]], and the
// keys of the quota selectors (which accept a subset of the kinds: quota_policies.cpp checks the
// kind).
//
//   header:<name>   a header field; the name a token (RFC 9110 section 5.6.2), stored lower-case
//   cookie:<name>   a cookie of the Cookie fields; the name as written (case-sensitive)
//   query:<name>    a parameter of the query string; the name as received (case-sensitive)
//   path, authority, method, cid, sticky-cid (both Kind::cid), peer_ip, client_ip, bearer_token
//
// As values.h: no TOML; the text as the operator wrote it in, the source or a message that
// says what is wrong and lists the accepted forms (without the key's name, which the caller
// puts in front). Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>

#include "floodgate/resilience/params.h"
#include "values.h"

namespace floodgate::config::detail {

// Every accepted form, for messages and docs.
inline constexpr std::string_view kKeySourceForms =
    "header:<name>, cookie:<name>, query:<name>, path, authority, method, cid, sticky-cid, "
    "peer_ip, client_ip or bearer_token";

Parsed<resilience::KeySource> parse_key_source(std::string_view text);

// The text form of `k` that parse_key_source reads back as `k` ("header:x-tenant-id", "cid"), for
// messages about a source the operator may not have written (a scope's default key).
std::string key_source_text(const resilience::KeySource& k);

}  // namespace floodgate::config::detail
