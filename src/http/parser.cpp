#include "floodgate/http/parser.h"

#include <cstring>

#include "floodgate/core/ascii.h"

namespace floodgate::http {
namespace {

// error_detail() strings for the refusals this layer adds to llhttp's.
constexpr const char* kHttp09 = "HTTP/0.9 request line (no HTTP-version)";
constexpr const char* kNoTarget = "request line without a request-target";
constexpr const char* kEmptyName = "empty field name";
constexpr const char* kObsFold = "obsolete line folding";
constexpr const char* kBareLf = "bare LF line ending";
constexpr const char* kTransferCoding = "transfer coding other than exactly chunked";
constexpr const char* kLongChunkLine = "chunk line exceeds 4096 bytes";
constexpr const char* kHugeChunk = "chunk size exceeds 2^63-1";
constexpr const char* kHugeLength = "Content-Length exceeds 2^63-1";
static_assert(kMaxChunkLineBytes == 4096, "kLongChunkLine names the bound");

}  // namespace

// llhttp calls back through plain function pointers; these forward to the Parser that owns
// the llhttp_t (parser_.data).
struct ParserCallbacks {
  static Parser& self(llhttp_t* p) { return *static_cast<Parser*>(p->data); }

  // llhttp replaces the reason of a failing non-data callback with its own ("`on_..._complete`
  // callback error"), so the detail is kept in the Parser too.
  static int fail(llhttp_t* p, Reason reason, const char* detail) {
    self(p).error_reason_ = reason;
    self(p).detail_ = detail;
    llhttp_set_error_reason(p, detail);
    return HPE_USER;
  }

  static int on_message_begin(llhttp_t* p) {
    Parser& s = self(p);
    // A message begins only in the head phase; pipelined bytes after a completed message are
    // never fed before begin() (parsing pauses at message_done).
    s.in_head_ = true;
    return 0;
  }

  static int on_target(llhttp_t* p, const char* at, std::size_t n) {
    Parser& s = self(p);
    if (s.url_len_ == 0) s.url_off_ = static_cast<uint32_t>(at - s.base_);
    s.url_len_ += static_cast<uint32_t>(n);
    if (s.is_request_ && s.url_len_ > s.limits_.max_uri_bytes) {
      return fail(p, Reason::uri_too_long, "request-target exceeds max_uri_bytes");
    }
    // reason-phrase = *( HTAB / SP / VCHAR / obs-text ) (RFC 9112 section 4): llhttp 8.1 lets
    // other control bytes through, and floodgate relays the phrase to the client.
    if (!s.is_request_) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(at[i]);
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
          return fail(p, Reason::upstream_bad_response, "control character in reason phrase");
        }
      }
    }
    return 0;
  }

  static int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
    Parser& s = self(p);
    if (!s.in_head_) return 0;  // trailer fields are dropped
    if (s.field_count_ == 0 || s.in_value_) {
      if (s.field_count_ >= s.limits_.max_headers) {
        return fail(p, s.is_request_ ? Reason::header_too_large : Reason::upstream_bad_response,
                    "too many header fields");
      }
      s.fields_[s.field_count_++] = {static_cast<uint32_t>(at - s.base_), 0, 0, 0, Field::other};
      s.in_value_ = false;
    }
    s.fields_[s.field_count_ - 1].name_len += static_cast<uint32_t>(n);
    return 0;
  }

  static int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
    Parser& s = self(p);
    if (!s.in_head_) return 0;
    HeaderField& f = s.fields_[s.field_count_ - 1];
    if (!s.in_value_) {
      f.value_off = static_cast<uint32_t>(at - s.base_);
      s.in_value_ = true;
    } else if (at != s.base_ + f.value_off + f.value_len) {
      // A value in pieces that are not contiguous is an obs-fold (RFC 9112 section 5.2):
      // recorded as one span it would carry the fold's CRLF downstream. Refuse it.
      return fail(p, s.is_request_ ? Reason::bad_request : Reason::upstream_bad_response,
                  "obsolete line folding");
    }
    f.value_len += static_cast<uint32_t>(n);
    return 0;
  }

  static int on_header_value_complete(llhttp_t* p) {
    Parser& s = self(p);
    if (!s.in_head_) return 0;
    HeaderField& f = s.fields_[s.field_count_ - 1];
    // llhttp 8.1 accepts ": v" (an empty field-name; RFC 9110 section 5.1 needs a token), and
    // forwarded, ":Transfer-Encoding: chunked" means something else to the next hop.
    if (f.name_len == 0) return fail(p, s.malformed(), kEmptyName);
    if (!s.in_value_) {  // empty value: llhttp sends no value span
      f.value_off = f.name_off;
      s.in_value_ = true;
    }
    f.kind = classify({s.base_ + f.name_off, f.name_len});  // the name is complete now
    s.kinds_seen_ |= bit(f.kind);
    return 0;
  }

  static int on_headers_complete(llhttp_t* p) {
    Parser& s = self(p);
    s.in_head_ = false;
    s.head_done_ = true;
    s.content_length_ = p->content_length;
    // llhttp takes any value below 2^64; many servers keep a length in a signed 64-bit integer
    // and would read a larger one differently (request smuggling). Chunk sizes have the same
    // bound (run_body).
    if ((p->flags & F_CONTENT_LENGTH) != 0 && s.content_length_ > kMaxContentLength) {
      return fail(p, s.malformed(), kHugeLength);
    }
    const bool chunked = (p->flags & F_CHUNKED) != 0;
    // llhttp refuses a request whose Transfer-Encoding it does not take for chunked only once
    // the body is parsed (after this pause), and it disagrees with a plain trim about OWS:
    // "chunked\t" is not chunked to llhttp. Refuse such a head now, as a head.
    if (s.is_request_ && s.has(bit(Field::transfer_encoding)) && !chunked) {
      return fail(p, Reason::bad_request, kTransferCoding);
    }
    // Responses that never have a body whatever their framing headers say (RFC 9112 6.3):
    // to HEAD, 1xx, 204 and 304. Returning 1 tells llhttp so; the parser then pauses at
    // message complete instead of here.
    if (!s.is_request_) {
      const int status = p->status_code;
      // llhttp accepts any 1-3 digit number; a status-code is 3DIGIT (RFC 9112 section 4).
      if (status < 100) return fail(p, Reason::upstream_bad_response, "invalid status code");
      if (s.no_body_ || status < 200 || status == 204 || status == 304) return 1;
      // llhttp decodes only a final "chunked" and drops any other coding undecoded (or reads
      // "xchunked" to EOF): the client would get gzip or chunk syntax as content. Only a single
      // "chunked" is relayed (HAProxy refuses the rest too). Requests: inspect_request().
      if (s.has(bit(Field::transfer_encoding)) && !(chunked && only_chunked(s))) {
        return fail(p, Reason::upstream_bad_response, kTransferCoding);
      }
    }
    s.chunk_line_start_ = chunked ? 0 : Parser::kNoChunkLine;
    return HPE_PAUSED;
  }

  // Exactly one Transfer-Encoding field, and its value is "chunked".
  static bool only_chunked(const Parser& s) {
    int codings = 0;
    bool chunked = false;
    for (uint32_t i = 0; i < s.field_count_; ++i) {
      if (s.fields_[i].kind != Field::transfer_encoding) continue;
      ++codings;
      chunked = ascii::iequals(ascii::trim(s.field_value(i)), "chunked");
    }
    return codings == 1 && chunked;
  }

  // Pauses after every chunk line so that run_body() learns where the line ended (llhttp
  // tells no position here) and checks its length and the chunk size before any data.
  static int on_chunk_header(llhttp_t* p) {
    self(p).at_chunk_header_ = true;
    return HPE_PAUSED;
  }

  static int on_body(llhttp_t* p, const char* at, std::size_t n) {
    // llhttp flushes an open body span at the end of every execute, with n == 0 when it was
    // given no bytes: that is not data (and must never become a zero-size chunk).
    if (n == 0) return 0;
    Parser& s = self(p);
    if (s.sink_fn_ != nullptr) s.sink_fn_(s.sink_, at, n);
    return 0;
  }

  static int on_message_complete(llhttp_t* p) {
    self(p).message_done_ = true;
    return HPE_PAUSED;
  }

  static const llhttp_settings_t& settings() {
    static const llhttp_settings_t s = [] {
      llhttp_settings_t v;
      llhttp_settings_init(&v);
      v.on_message_begin = on_message_begin;
      v.on_url = on_target;
      v.on_status = on_target;
      v.on_header_field = on_header_field;
      v.on_header_value = on_header_value;
      v.on_header_value_complete = on_header_value_complete;
      v.on_headers_complete = on_headers_complete;
      v.on_chunk_header = on_chunk_header;
      v.on_body = on_body;
      v.on_message_complete = on_message_complete;
      return v;
    }();
    return s;
  }
};

Parser::Parser(Kind kind) : is_request_(kind == Kind::request) {
  llhttp_init(&parser_, is_request_ ? HTTP_REQUEST : HTTP_RESPONSE, &ParserCallbacks::settings());
  parser_.data = this;
}

void Parser::begin(const char* base, HeaderField* fields, const HeadLimits& limits) {
  if (message_done_ || llhttp_get_errno(&parser_) == HPE_PAUSED) llhttp_resume(&parser_);
  base_ = base;
  fields_ = fields;
  limits_ = limits;
  parsed_ = head_end_ = line_end_ = 0;
  content_length_ = 0;
  body_fed_ = 0;
  chunk_line_start_ = kNoChunkLine;
  url_off_ = url_len_ = field_count_ = kinds_seen_ = 0;
  ext_method_off_ = ext_method_len_ = 0;
  method_seen_ = false;
  in_head_ = in_value_ = head_done_ = message_done_ = false;
  no_body_ = at_chunk_header_ = false;
  error_reason_ = Reason::none;
  detail_ = nullptr;
  sink_ = nullptr;
  sink_fn_ = nullptr;
}

Parser::Result Parser::on_error(llhttp_errno_t err) {
  (void)err;
  if (error_reason_ == Reason::none) {
    error_reason_ = is_request_ ? Reason::bad_request : Reason::upstream_bad_response;
  }
  return Result::error;
}

Parser::Result Parser::refuse(Reason reason, const char* detail) {
  error_reason_ = reason;
  detail_ = detail;
  return Result::error;
}

// Every line of a complete header section is one field line, but the final empty one. Any
// other line is an obs-fold continuation (RFC 9112 section 5.2), which llhttp 8.1 folds into
// the value silently when the value's first line is empty ("Host:\r\n evil.example" reads
// as Host "evil.example"); a fold after a non-empty value is caught earlier (on_header_value).
bool Parser::has_obs_fold() const {
  if (field_count_ == 0) return false;  // llhttp refuses a space right after the start line
  const char* p = base_ + fields_[0].name_off;
  const char* const end = base_ + head_end_;
  uint32_t lines = 0;
  for (; p != nullptr && p < end; ++lines) {
    p = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (p != nullptr) ++p;
  }
  return lines != field_count_ + 1;
}

namespace {

// The methods llhttp 8.1 parses in a request (its HTTP_METHOD_MAP, and PRI for the HTTP/2
// preface it refuses itself).
bool llhttp_knows(std::string_view method) {
#define FLOODGATE_KNOWN(num, name, string) \
  if (method == #string) return true;
  HTTP_METHOD_MAP(FLOODGATE_KNOWN)
#undef FLOODGATE_KNOWN
  return method == "PRI";
}

// tchar (RFC 9110 section 5.6.2).
bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

// The longest extension method floodgate forwards (the longest registered one, VERSION-CONTROL,
// has 15 bytes).
constexpr std::size_t kMaxExtensionMethod = 32;

}  // namespace

// llhttp 8.1 knows a fixed list of methods and refuses any other token, though RFC 9110
// section 9.1 lets a request use any (QUERY, WebDAV's and CalDAV's, a private one). A request's
// method is therefore held back until the space after it has arrived: a method llhttp knows is
// parsed as it is; any other token is recorded and llhttp reads POST in its place (the same
// framing, from the fields; and floodgate treats it as neither safe nor idempotent, as an
// unknown method must be). False: the method is still incomplete.
bool Parser::start_method(std::size_t end) {
  // Empty lines before the request line are ignored (RFC 9112 section 2.2), by llhttp too.
  std::size_t at = 0;
  while (at < end && (base_[at] == '\r' || base_[at] == '\n')) ++at;
  std::size_t n = 0;
  while (at + n < end && n <= kMaxExtensionMethod && is_tchar(base_[at + n])) ++n;
  if (at + n == end && n <= kMaxExtensionMethod) return false;  // more of the method to come
  method_seen_ = true;
  if (n == 0 || n > kMaxExtensionMethod || base_[at + n] != ' ') return true;  // llhttp refuses
  const std::string_view method(base_ + at, n);
  if (llhttp_knows(method)) return true;
  static constexpr std::string_view kStandIn = "POST";
  if (at > 0 && llhttp_execute(&parser_, base_, at) != HPE_OK) return true;  // its error stays
  llhttp_execute(&parser_, kStandIn.data(), kStandIn.size());
  ext_method_off_ = static_cast<uint32_t>(at);
  ext_method_len_ = static_cast<uint8_t>(n);
  parsed_ = at + n;
  return true;
}

Parser::Result Parser::parse_head(std::size_t end) {
  if (error_reason_ != Reason::none) return Result::error;  // an error is final
  if (is_request_ && !method_seen_ && !start_method(end)) return Result::need_more;
  const char* from = base_ + parsed_;
  const llhttp_errno_t err = llhttp_execute(&parser_, from, end - parsed_);
  if (err == HPE_OK) {
    parsed_ = end;
  } else if (err == HPE_PAUSED && head_done_) {
    parsed_ = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - base_);
    head_end_ = parsed_;
  } else {
    return on_error(err);
  }
  // The header section starts after the start line (request line or status line).
  if (line_end_ == 0 && url_len_ != 0) {
    const std::size_t target_end = url_off_ + url_len_;
    // llhttp 8.1 takes a request-target ended by CR or LF ("GET /\r\n") for HTTP/0.9 and then
    // waits for a byte past the LF, until header_timeout. Once the byte after the target is
    // parsed the target is complete, and only a space may follow it.
    if (is_request_ && parsed_ > target_end && base_[target_end] != ' ') {
      return refuse(Reason::bad_request, kHttp09);
    }
    const char* nl =
        static_cast<const char*>(std::memchr(base_ + target_end, '\n', parsed_ - target_end));
    if (nl != nullptr) line_end_ = static_cast<std::size_t>(nl - base_) + 1;
  }
  if (!is_request_) {
    if (!head_done_) return Result::need_more;
    if (line_end_ == 0) line_end_ = head_end_;  // status line without reason phrase
    if (has_obs_fold()) return refuse(Reason::upstream_bad_response, kObsFold);
    return message_done_ ? Result::message_done : Result::head_done;
  }
  const std::size_t header_bytes = line_end_ == 0 ? 0 : parsed_ - line_end_;
  if (header_bytes > limits_.max_header_bytes) {
    return refuse(Reason::header_too_large, "header section exceeds max_header_bytes");
  }
  if (!head_done_) return Result::need_more;
  // llhttp 8.1 ends a request line with an empty target at its LF ("CONNECT \n"), reporting
  // no target at all: no request line floodgate can forward.
  if (line_end_ < 2) return refuse(Reason::bad_request, kNoTarget);
  // llhttp rejects a bare LF after a field line but accepts one after the request line and
  // as the final empty line; refuse those too, so every line of a request ends in CRLF.
  if (base_[line_end_ - 2] != '\r' || base_[head_end_ - 2] != '\r') {
    return refuse(Reason::bad_request, kBareLf);
  }
  if (has_obs_fold()) return refuse(Reason::bad_request, kObsFold);
  return Result::head_done;
}

// A chunk line ended `line_end` bytes into the body; llhttp holds its chunk-size.
bool Parser::check_chunk_line(uint64_t line_end) {
  const uint64_t size = parser_.content_length;
  if (line_end - chunk_line_start_ > kMaxChunkLineBytes) {
    refuse(malformed(), kLongChunkLine);
    return false;
  }
  if (size > kMaxChunkSize) {
    refuse(malformed(), kHugeChunk);
    return false;
  }
  // The next line starts after this chunk's data and CRLF; the last chunk (size 0) is
  // followed by the trailer section instead.
  chunk_line_start_ = size == 0 ? kNoChunkLine : line_end + size + 2;
  return true;
}

Parser::Result Parser::run_body(const char* p, std::size_t n, std::size_t& consumed) {
  consumed = 0;
  if (error_reason_ != Reason::none) return Result::error;  // an error is final
  if (llhttp_get_errno(&parser_) == HPE_PAUSED) llhttp_resume(&parser_);
  llhttp_errno_t err = llhttp_execute(&parser_, p, n);
  // A chunked body pauses after each chunk line (on_chunk_header), before the chunk's data.
  while (err == HPE_PAUSED && at_chunk_header_) {
    at_chunk_header_ = false;
    const char* line_end = llhttp_get_error_pos(&parser_);
    if (!check_chunk_line(body_fed_ + static_cast<uint64_t>(line_end - p))) break;
    llhttp_resume(&parser_);
    err = llhttp_execute(&parser_, line_end, static_cast<std::size_t>(p + n - line_end));
  }
  sink_fn_ = nullptr;
  if (error_reason_ != Reason::none) return Result::error;
  if (err == HPE_OK) {
    body_fed_ += n;
    // A chunk line still arriving is bounded now, not when (if ever) its LF comes.
    if (body_fed_ > chunk_line_start_ && body_fed_ - chunk_line_start_ > kMaxChunkLineBytes) {
      return refuse(malformed(), kLongChunkLine);
    }
    consumed = n;
    return Result::need_more;
  }
  if (err == HPE_PAUSED && message_done_) {
    consumed = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - p);
    return Result::message_done;
  }
  return on_error(err);
}

Parser::Result Parser::finish() {
  if (error_reason_ != Reason::none) return Result::error;
  if (message_done_) return Result::message_done;
  // Still paused after the head: let llhttp enter the body state first, or llhttp_finish
  // (which ignores a paused parser) would report a complete empty body as truncated.
  if (llhttp_get_errno(&parser_) == HPE_PAUSED) {
    llhttp_resume(&parser_);
    llhttp_execute(&parser_, base_ + head_end_, 0);
  }
  const llhttp_errno_t err = llhttp_finish(&parser_);
  if ((err == HPE_OK || err == HPE_PAUSED) && message_done_) return Result::message_done;
  return on_error(err == HPE_OK ? HPE_INVALID_EOF_STATE : err);
}

std::string_view Parser::method_name() const {
  if (ext_method_len_ != 0) return {base_ + ext_method_off_, ext_method_len_};
  return llhttp_method_name(static_cast<llhttp_method_t>(parser_.method));
}

RequestHead Parser::request_head() const {
  RequestHead h;
  h.method_name = method_name();
  h.method = method();
  h.target = target();
  h.version_major = static_cast<uint8_t>(http_major());
  h.version_minor = static_cast<uint8_t>(http_minor());
  h.body = chunked()             ? BodyFraming::chunked
           : content_length_ > 0 ? BodyFraming::length
                                 : BodyFraming::none;
  h.content_length = content_length_;
  h.keep_alive = keep_alive();
  h.fields = FieldTable{base_, fields_, field_count_, kinds_seen_};
  return h;
}

std::string_view Parser::field_name(uint32_t i) const {
  return view(fields_[i].name_off, fields_[i].name_len);
}

std::string_view Parser::field_value(uint32_t i) const {
  return view(fields_[i].value_off, fields_[i].value_len);
}

}  // namespace floodgate::http
