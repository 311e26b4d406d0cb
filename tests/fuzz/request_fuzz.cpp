// Fuzz target: the request path's parse -> inspect -> rewrite.
//
// Property: an input is refused (a parser error or an inspect_request reason), or what
// floodgate forwards (write_request_head, then the body re-framed as the session does) parses
// back strictly, with a fresh Parser, as exactly one request with the same method, origin-form
// target, framing (chunked / the same Content-Length / none), Host, body and end-to-end
// fields, with no byte left over. Parsing the input in one piece or in random pieces gives the
// same verdict. A violation aborts.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"
#include "fuzz_support.h"

namespace {

using floodgate::Reason;
using floodgate::fuzz::check;
using floodgate::http::Field;
using floodgate::http::HeaderField;
using floodgate::http::HeadLimits;
using floodgate::http::Parser;

constexpr HeadLimits kLimits{};  // the defaults floodgate ships with

struct Field_ {
  std::string_view name, value;
  bool operator==(const Field_&) const = default;
};

// The fields an end-to-end recipient must see unchanged: everything that is not hop-by-hop
// (nor named by Connection) and that floodgate does not itself replace or remove.
std::vector<Field_> end_to_end(const Parser& p) {
  std::vector<std::string_view> named;
  for (uint32_t i = 0; i < p.field_count(); ++i) {
    if (p.field_kind(i) != Field::connection) continue;
    floodgate::ascii::for_each_token(p.field_value(i),
                                     [&](std::string_view t) { named.push_back(t); });
  }
  std::vector<Field_> out;
  for (uint32_t i = 0; i < p.field_count(); ++i) {
    const Field k = p.field_kind(i);
    if (k != Field::other && k != Field::content_length) continue;
    bool hop = false;
    for (std::string_view t : named) hop = hop || floodgate::ascii::iequals(t, p.field_name(i));
    if (hop && k == Field::other) continue;
    // HTTP2-Settings belongs to an h2c upgrade offer, which floodgate removes (docs/http.md).
    if (floodgate::ascii::iequals(p.field_name(i), "http2-settings")) continue;
    out.push_back({p.field_name(i), p.field_value(i)});
  }
  return out;
}

// Parses [data, data + n) as one head, in pieces chosen by `splits` (or whole when null).
Parser::Result parse_head(Parser& p, const char* data, std::size_t n, HeaderField* fields,
                          floodgate::fuzz::Splits* splits) {
  p.begin(data, fields, kLimits);
  std::size_t end = 0;
  for (;;) {
    end += splits != nullptr ? splits->next(n - end) : n - end;
    const Parser::Result r = p.parse_head(end);
    if (r != Parser::Result::need_more || end == n) return r;
  }
}

// The body as the session forwards it: de-chunked by the parser, re-chunked per piece.
struct Body {
  std::string data;       // the body bytes
  std::string forwarded;  // the body as framed towards the backend
  Parser::Result result = Parser::Result::need_more;
};

Body forward_body(Parser& p, const char* rest, std::size_t n, floodgate::fuzz::Splits& splits) {
  Body b;
  const bool chunked = p.chunked();
  auto sink = [&](const char* at, std::size_t len) {
    b.data.append(at, len);
    if (chunked) {
      char hex[32];
      b.forwarded.append(hex,
                         static_cast<std::size_t>(std::snprintf(hex, sizeof hex, "%zx\r\n", len)));
    }
    b.forwarded.append(at, len);
    if (chunked) b.forwarded += "\r\n";
  };
  std::size_t pos = 0;
  do {
    const std::size_t piece = n == pos ? 0 : splits.next(n - pos);
    std::size_t consumed = 0;
    b.result = p.parse_body(rest + pos, piece, consumed, sink);
    check(consumed <= piece, "parse_body consumed more than it was given");
    pos += consumed;
    if (b.result != Parser::Result::need_more) break;
  } while (pos < n);
  if (b.result == Parser::Result::message_done && chunked) b.forwarded += "0\r\n\r\n";
  return b;
}

// The input head's framing, read before its body is parsed: trailer fields update llhttp's
// flags as they are parsed (a trailer named Content-Length sets F_CONTENT_LENGTH), and
// floodgate reads the framing only at the head.
struct Framing {
  bool chunked, has_length;
  uint64_t length;
};

void check_forwarded(const Parser& in, const Framing& framing,
                     const floodgate::http::RequestFacts& facts, const std::string& head,
                     const Body& body) {
  std::vector<HeaderField> fields(kLimits.max_headers + 16);
  Parser out(Parser::Kind::request);
  HeadLimits loose{1 << 20, 1 << 20, static_cast<uint32_t>(fields.size())};
  std::string wire = head + body.forwarded;
  out.begin(wire.data(), fields.data(), loose);
  const Parser::Result r = out.parse_head(head.size());
  check(r == Parser::Result::head_done, "the forwarded head does not parse");
  check(out.head_end() == head.size(), "the forwarded head has bytes after its end");
  check(out.method_name() == in.method_name(), "the method changed");
  check(out.target() == facts.path, "the target is not the origin-form path");
  check(out.http_major() == 1 && out.http_minor() == 1, "not forwarded as HTTP/1.1");
  check(out.chunked() == framing.chunked, "chunked framing changed");
  check(out.has_content_length() == framing.has_length, "Content-Length appeared or vanished");
  check(out.content_length() == framing.length, "the Content-Length value changed");
  check(end_to_end(out) == end_to_end(in), "the end-to-end fields changed");
  uint32_t hosts = 0;
  for (uint32_t i = 0; i < out.field_count(); ++i) {
    if (out.field_kind(i) != Field::host) continue;
    ++hosts;
    check(floodgate::ascii::trim(out.field_value(i)) == facts.host, "the Host changed");
  }
  check(hosts == 1, "not exactly one Host");
  floodgate::http::RequestFacts again;
  check(floodgate::http::inspect_request(out.request_head(), again) == Reason::none,
        "the backend would refuse the forwarded head");
  check(again.path == facts.path && again.host == facts.host, "re-inspection disagrees");
  if (body.result != Parser::Result::message_done) return;
  // The forwarded message is exactly one message: same body, nothing left over.
  std::string data;
  auto sink = [&](const char* at, std::size_t len) { data.append(at, len); };
  std::size_t consumed = 0;
  const std::size_t n = wire.size() - head.size();
  const Parser::Result b = out.parse_body(wire.data() + head.size(), n, consumed, sink);
  check(b == Parser::Result::message_done, "the forwarded body does not complete");
  check(consumed == n, "bytes after the forwarded message (a second request)");
  check(data == body.data, "the body changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  floodgate::fuzz::Splits splits(data[0]);
  const std::vector<char> input(data + 1, data + size);
  const std::size_t n = input.size();
  std::vector<HeaderField> fields(kLimits.max_headers), fields2(kLimits.max_headers);

  Parser whole(Parser::Kind::request);
  const Parser::Result r = parse_head(whole, input.data(), n, fields.data(), nullptr);
  Parser pieces(Parser::Kind::request);
  const Parser::Result r2 = parse_head(pieces, input.data(), n, fields2.data(), &splits);
  check(r == r2, "the verdict depends on how the head arrived");
  if (r != Parser::Result::head_done) return 0;  // refused, or incomplete
  check(whole.head_end() == pieces.head_end(), "the head's end depends on how it arrived");

  floodgate::http::RequestFacts facts;
  if (floodgate::http::inspect_request(whole.request_head(), facts) != Reason::none) return 0;

  std::string head(64 * 1024, '\0');
  floodgate::http::Writer w(head.data(), head.size());
  const floodgate::http::ForwardInfo fwd{"127.0.0.1", facts.request_id.empty()
                                                          ? "0123456789abcdef0123456789abcdef"
                                                          : facts.request_id};
  if (!floodgate::http::write_request_head(whole.request_head(), facts, fwd, w)) return 0;  // 431
  head.resize(w.size());
  const Framing framing{whole.chunked(), whole.has_content_length(), whole.content_length()};
  const Body body =
      forward_body(whole, input.data() + whole.head_end(), n - whole.head_end(), splits);
  check_forwarded(whole, framing, facts, head, body);
  return 0;
}
