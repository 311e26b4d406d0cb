#include "floodgate/http/parser.h"

#include <cstring>

namespace floodgate::http {

// llhttp calls back through plain function pointers; these forward to the Parser that owns
// the llhttp_t (parser_.data).
struct ParserCallbacks {
  static Parser& self(llhttp_t* p) { return *static_cast<Parser*>(p->data); }

  static int fail(llhttp_t* p, Reason reason, const char* detail) {
    self(p).error_reason_ = reason;
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
    // Responses that never have a body whatever their framing headers say (RFC 9112 6.3):
    // to HEAD, 1xx, 204 and 304. Returning 1 tells llhttp so; the parser then pauses at
    // message complete instead of here.
    if (!s.is_request_) {
      const int status = p->status_code;
      // llhttp accepts any 1-3 digit number; a status-code is 3DIGIT (RFC 9112 section 4).
      if (status < 100) return fail(p, Reason::upstream_bad_response, "invalid status code");
      if (s.no_body_ || status < 200 || status == 204 || status == 304) return 1;
    }
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
  url_off_ = url_len_ = field_count_ = kinds_seen_ = 0;
  in_head_ = in_value_ = head_done_ = message_done_ = false;
  no_body_ = false;
  error_reason_ = Reason::none;
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

Parser::Result Parser::parse_head(std::size_t end) {
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
    const char* nl = static_cast<const char*>(
        std::memchr(base_ + url_off_ + url_len_, '\n', parsed_ - (url_off_ + url_len_)));
    if (nl != nullptr) line_end_ = static_cast<std::size_t>(nl - base_) + 1;
  }
  if (!is_request_) {
    if (!head_done_) return Result::need_more;
    if (line_end_ == 0) line_end_ = head_end_;  // status line without reason phrase
    return message_done_ ? Result::message_done : Result::head_done;
  }
  const std::size_t header_bytes = line_end_ == 0 ? 0 : parsed_ - line_end_;
  if (header_bytes > limits_.max_header_bytes) {
    error_reason_ = Reason::header_too_large;
    return Result::error;
  }
  // llhttp rejects a bare LF after a field line but accepts one after the request line and
  // as the final empty line; refuse those too, so every line of a request ends in CRLF.
  if (head_done_ && (base_[line_end_ - 2] != '\r' || base_[head_end_ - 2] != '\r')) {
    error_reason_ = Reason::bad_request;
    return Result::error;
  }
  return head_done_ ? Result::head_done : Result::need_more;
}

Parser::Result Parser::run_body(const char* p, std::size_t n, std::size_t& consumed) {
  if (llhttp_get_errno(&parser_) == HPE_PAUSED) llhttp_resume(&parser_);
  const llhttp_errno_t err = llhttp_execute(&parser_, p, n);
  sink_fn_ = nullptr;
  if (err == HPE_OK) {
    consumed = n;
    return Result::need_more;
  }
  if (err == HPE_PAUSED && message_done_) {
    consumed = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - p);
    return Result::message_done;
  }
  consumed = 0;
  return on_error(err);
}

Parser::Result Parser::finish() {
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
  return llhttp_method_name(static_cast<llhttp_method_t>(parser_.method));
}

std::string_view Parser::field_name(uint32_t i) const {
  return view(fields_[i].name_off, fields_[i].name_len);
}

std::string_view Parser::field_value(uint32_t i) const {
  return view(fields_[i].value_off, fields_[i].value_len);
}

}  // namespace floodgate::http
