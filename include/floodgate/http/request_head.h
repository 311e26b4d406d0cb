// A request's head as the request path sees it, whatever protocol brought it: the method, the
// target, the scheme and authority when the protocol carries them apart from the fields, the
// header fields, how the body is framed, and the version. The HTTP/1 parser makes one from a
// parsed head (Parser::request_head); an HTTP/2 stream will make one from its decoded header
// block. Everything after parsing reads only this: the front of the stage chain, routing, the
// stages' request keys, the forwarded head's rewrite (rewrite.h) and the access log.
//
// A view: the strings and the field table live where the protocol put them (the client
// connection's request buffer for HTTP/1), for as long as the exchange runs. Copying one copies
// the view, never the bytes.
//
// Thread-safety: a value; the bytes it views belong to one reactor thread.
#pragma once

#include <llhttp.h>

#include <cstdint>
#include <string_view>

#include "floodgate/http/field.h"

namespace floodgate::http {

// A header field recorded as offsets relative to the head's base pointer, and what it is.
struct HeaderField {
  uint32_t name_off, name_len, value_off, value_len;
  Field kind;
};

// A head's header fields: offsets into `base`, in the order they came, with their kinds.
struct FieldTable {
  const char* base = nullptr;
  const HeaderField* entries = nullptr;
  uint32_t count = 0;
  uint32_t kinds = 0;  // bit(f) of every Field kind among them

  std::string_view name(uint32_t i) const noexcept {
    return {base + entries[i].name_off, entries[i].name_len};
  }
  std::string_view value(uint32_t i) const noexcept {
    return {base + entries[i].value_off, entries[i].value_len};
  }
};

// How the request's body arrives.
enum class BodyFraming : uint8_t {
  none,     // no body
  length,   // content_length bytes
  chunked,  // HTTP/1.1 chunked transfer coding
  stream,   // a stream of data of no length declared (HTTP/2 DATA frames up to END_STREAM)
};

struct RequestHead {
  // The method as the client sent it, and its code in llhttp's table of registered methods
  // (the IANA registry; used as the code for any protocol). A method the table lacks (QUERY,
  // an extension) has the code HTTP_POST: neither safe nor idempotent (RFC 9110 9.2.2).
  std::string_view method_name;
  llhttp_method_t method = HTTP_GET;
  // The target as sent: HTTP/1's request-target (origin, absolute, authority or asterisk
  // form), HTTP/2's :path.
  std::string_view target;
  // HTTP/2's :scheme and :authority; empty from HTTP/1, where the listener says the scheme and
  // Host (or an absolute-form target) the authority.
  std::string_view scheme;
  std::string_view authority;
  uint8_t version_major = 1;
  uint8_t version_minor = 1;
  // It came in an HTTP/2 stream (an HTTP/1 request line saying HTTP/2.0 is not one).
  bool h2 = false;
  BodyFraming body = BodyFraming::none;
  uint64_t content_length = 0;  // BodyFraming::length: its value
  // The connection may carry another request after this one, as far as the head says
  // (HTTP/1's keep-alive rules; always true of HTTP/2, whose streams end alone).
  bool keep_alive = false;

  // The header fields, in order.
  FieldTable fields;

  // A head was parsed: every complete head has a method.
  bool complete() const noexcept { return !method_name.empty(); }
  uint32_t field_count() const noexcept { return fields.count; }
  std::string_view field_name(uint32_t i) const noexcept { return fields.name(i); }
  std::string_view field_value(uint32_t i) const noexcept { return fields.value(i); }
  Field field_kind(uint32_t i) const noexcept { return fields.entries[i].kind; }
  // Whether the head has at least one field of kind `f` (bit(f)), or of any kind in a set.
  bool has(uint32_t k) const noexcept { return (fields.kinds & k) != 0; }
  bool chunked() const noexcept { return body == BodyFraming::chunked; }
  // The access log's protocol field.
  std::string_view protocol() const noexcept {
    if (version_major == 2) return "HTTP/2.0";
    return version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
  }
};

}  // namespace floodgate::http
