// Fuzz target: the response path (a backend's bytes towards the client).
//
// The first input byte chooses the request's situation (HEAD or not, the client's HTTP minor
// version, keep-alive) and the split seed; the rest is what the backend sends. The head is
// parsed in random pieces, then the body over random splits, as the request path does.
// Properties: no crash; parse_body never reports more bytes consumed than it was given; the
// head write_response_head produces parses back strictly as one complete head with the same
// status and the framing plan_response chose (Content-Length kept, chunked, or neither).
#include <string>
#include <vector>

#include "floodgate/http/parser.h"
#include "floodgate/http/rewrite.h"
#include "fuzz_support.h"

namespace {

using floodgate::fuzz::check;
using floodgate::http::Framing;
using floodgate::http::HeaderField;
using floodgate::http::HeadLimits;
using floodgate::http::Parser;

constexpr uint32_t kFields = 256;  // BufferLayout::kResponseFields

void check_rewritten_head(const Parser& rp, const floodgate::http::ResponsePlan& plan,
                          int client_minor, bool head_request) {
  std::string out(64 * 1024, '\0');
  floodgate::http::Writer w(out.data(), out.size());
  if (!floodgate::http::write_response_head(rp, plan, client_minor, w)) return;  // 502
  out.resize(w.size());
  std::vector<HeaderField> fields(kFields + 8);
  Parser again(Parser::Kind::response);
  again.begin(out.data(), fields.data(), HeadLimits{0, 0, kFields + 8});
  again.set_no_body(head_request);
  const Parser::Result r = again.parse_head(out.size());
  check(r == Parser::Result::head_done || r == Parser::Result::message_done,
        "the head sent to the client does not parse");
  check(again.head_end() == out.size(), "bytes after the head sent to the client");
  check(again.status() == rp.status(), "the status changed");
  if (rp.status() < 200 || rp.status() == 101) return;
  switch (plan.framing) {
    case Framing::length:
      check(again.has_content_length() && !again.chunked(), "Content-Length framing lost");
      check(again.content_length() == rp.content_length(), "the Content-Length changed");
      break;
    case Framing::chunked:
      check(again.chunked() && !again.has_content_length(), "chunked framing lost");
      break;
    case Framing::close:
      check(!again.chunked() && !again.has_content_length() && !again.keep_alive(),
            "a close-delimited body with framing headers or keep-alive");
      break;
    case Framing::none:
      break;
  }
  if (plan.close_client) check(!again.keep_alive(), "keep-alive after a closing plan");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const bool head_request = (data[0] & 1) != 0;
  const int client_minor = (data[0] & 2) != 0 ? 0 : 1;
  const bool keep_alive = (data[0] & 4) != 0;
  floodgate::fuzz::Splits splits(data[0] >> 3);
  const std::vector<char> input(data + 1, data + size);
  const std::size_t n = input.size();
  std::vector<HeaderField> fields(kFields);

  Parser rp(Parser::Kind::response);
  std::size_t start = 0;  // where the current head begins (after interim responses)
  for (;;) {
    rp.begin(input.data() + start, fields.data(), HeadLimits{0, 0, kFields});
    rp.set_no_body(head_request);
    Parser::Result r = Parser::Result::need_more;
    std::size_t end = 0;
    while (r == Parser::Result::need_more && start + end < n) {
      end += splits.next(n - start - end);
      r = rp.parse_head(end);
    }
    if (r == Parser::Result::need_more || r == Parser::Result::error) return 0;
    check(rp.head_end() <= end, "the head ends after the bytes given");
    const int status = rp.status();
    if (status < 200 && status != 101) {  // interim: forwarded, then the next head
      check_rewritten_head(rp, floodgate::http::ResponsePlan{}, client_minor, head_request);
      std::size_t consumed = 0;
      auto no_sink = [](const char*, std::size_t) {};
      rp.parse_body(input.data() + start + rp.head_end(), 0, consumed, no_sink);
      start += rp.head_end();
      continue;
    }
    const auto plan = floodgate::http::plan_response(rp, head_request, client_minor, keep_alive);
    check_rewritten_head(rp, plan, client_minor, head_request);
    if (r == Parser::Result::message_done || status == 101) return 0;
    std::size_t pos = start + rp.head_end();
    std::size_t body = 0;
    auto sink = [&](const char*, std::size_t len) { body += len; };
    while (pos < n) {
      const std::size_t piece = splits.next(n - pos);
      std::size_t consumed = 0;
      const Parser::Result b = rp.parse_body(input.data() + pos, piece, consumed, sink);
      check(consumed <= piece, "parse_body consumed more than it was given");
      if (b != Parser::Result::need_more) return 0;
      check(consumed == piece, "need_more without consuming everything");
      pos += consumed;
    }
    rp.finish();  // the backend closed: completes a close-delimited body or detects truncation
    if (plan.framing == Framing::length)
      check(body <= rp.content_length(), "body beyond Content-Length");
    return 0;
  }
}
