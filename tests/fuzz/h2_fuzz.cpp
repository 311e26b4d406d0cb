// Fuzz target: the HTTP/2 frame layer (http/h2_session.h) as a client's bytes reach it, after
// the connection preface, cut into the pieces a socket would deliver.
//
// Properties: a feed never reports more bytes than it was given, and once it fails every later
// feed fails; every request head it hands over views only the storage lent for its stream and
// is inspected and forwarded (rewrite.h) without overflowing, and when inspect_request accepts
// it the forwarded head names a host; what the session produces for the client is a sequence
// of whole frames (9-byte headers whose lengths add up), never larger than the frame size the
// client allows. Each stream with a head is answered (a small body), so response framing and
// flow control run too. A violation aborts.
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/http/h2_session.h"
#include "floodgate/http/rewrite.h"
#include "fuzz_support.h"

namespace {

using floodgate::Reason;
using floodgate::fuzz::check;
namespace h2 = floodgate::http::h2;
namespace http = floodgate::http;

constexpr std::size_t kStorage = 4096;
constexpr uint32_t kFieldSlots = 32;

struct Stream {
  int32_t id = 0;
  std::array<char, kStorage> data{};
  std::array<http::HeaderField, kFieldSlots> fields{};
  bool answered = false;
  std::string body = "hello from floodgate";
};

bool within(std::string_view v, const Stream& s) {
  return v.empty() ||
         (v.data() >= s.data.data() && v.data() + v.size() <= s.data.data() + s.data.size());
}

class Handler final : public h2::Handler {
 public:
  std::map<int32_t, std::unique_ptr<Stream>> streams;
  std::vector<int32_t> to_answer;

  bool accept = true;
  bool accepts_stream() noexcept override { return accept; }
  h2::StreamHandle on_stream_open(int32_t id, h2::HeadStorage& storage) override {
    if (streams.size() >= 64) return nullptr;  // refused: REFUSED_STREAM
    auto s = std::make_unique<Stream>();
    s->id = id;
    storage = {s->data.data(), s->data.size(), s->fields.data(), kFieldSlots};
    Stream* raw = s.get();
    streams[id] = std::move(s);
    return raw;
  }
  void on_request_head(h2::StreamHandle h, const http::RequestHead& head, Reason error,
                       bool /*end_stream*/) override {
    const Stream& s = *static_cast<Stream*>(h);
    check(within(head.method_name, s) && within(head.target, s) && within(head.scheme, s) &&
              within(head.authority, s),
          "a pseudo-header field views outside its stream's storage");
    check(head.field_count() <= kFieldSlots, "more fields than slots");
    for (uint32_t i = 0; i < head.field_count(); ++i) {
      check(within(head.field_name(i), s) && within(head.field_value(i), s),
            "a field views outside its stream's storage");
    }
    to_answer.push_back(s.id);
    if (error != Reason::none) return;
    http::RequestFacts facts;
    if (http::inspect_request(head, facts) != Reason::none) return;
    check(!facts.host.empty() || facts.connect, "an accepted request names no host");
    std::array<char, 8192> out{};
    http::Writer w(out.data(), out.size());
    http::write_request_head(head, facts, {.client_ip = "10.0.0.1", .request_id = "fuzz"}, w);
  }
  void on_request_data(h2::StreamHandle h, const char*, std::size_t n) override {
    passed.emplace_back(static_cast<Stream*>(h)->id, n);
  }
  void on_request_end(h2::StreamHandle) override {}
  void on_stream_reset(h2::StreamHandle, h2::ErrorCode) override {}
  void on_stream_close(h2::StreamHandle h, h2::ErrorCode) override {
    streams.erase(static_cast<Stream*>(h)->id);
  }
  std::size_t read_body(h2::StreamHandle h, char* out, std::size_t max, bool& eof) override {
    Stream& s = *static_cast<Stream*>(h);
    const std::size_t n = std::min(max, s.body.size());
    std::memcpy(out, s.body.data(), n);
    s.body.erase(0, n);
    eof = s.body.empty();
    return n;
  }
  std::vector<std::pair<int32_t, std::size_t>> passed;  // body bytes, to consume()
};

// The produced bytes are whole frames, none over the default SETTINGS_MAX_FRAME_SIZE.
void check_frames(std::string_view out) {
  std::size_t pos = 0;
  while (pos < out.size()) {
    check(out.size() - pos >= 9, "produced bytes end inside a frame header");
    const auto* p = reinterpret_cast<const uint8_t*>(out.data() + pos);
    const std::size_t len = (std::size_t{p[0]} << 16) | (std::size_t{p[1]} << 8) | p[2];
    check(len <= 16384, "a produced frame is over the client's maximum frame size");
    check(out.size() - pos - 9 >= len, "produced bytes end inside a frame's payload");
    pos += 9 + len;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  h2::Limits limits;
  limits.max_header_list_bytes = 2048;
  limits.max_header_bytes = 2048;
  limits.max_headers = kFieldSlots;
  limits.max_uri_bytes = 512;
  limits.max_frames_per_turn = 8;
  limits.glitch_threshold = 64;
  Handler handler;
  h2::Session session(limits, handler);
  check(session.ok(), "no session");
  floodgate::fuzz::Splits splits(data[0]);
  std::string in = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  in.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string out;
  std::array<char, 1000> buf{};  // small, so that frames are split across produce() calls
  auto now = h2::Session::Clock::time_point{} + std::chrono::hours(1);
  std::size_t offered = 0;  // bytes of `in` handed over so far
  std::string unread;
  bool failed = false;
  for (int turn = 0; turn < 10000; ++turn) {
    if (offered < in.size()) {
      const std::size_t piece = splits.next(in.size() - offered);
      unread.append(in, offered, piece);
      offered += piece;
    }
    handler.accept = (turn & 3) != 3;  // sometimes the caller takes no new stream
    const h2::Session::Fed fed = session.feed(unread.data(), unread.size(), now);
    check(fed.consumed <= unread.size(), "a feed consumed more than it was given");
    check(!failed || fed.failed, "a feed after a failure did not fail");
    failed = failed || fed.failed;
    unread.erase(0, fed.consumed);
    for (const int32_t id : handler.to_answer) {
      if (handler.streams.count(id) == 0 || handler.streams[id]->answered) continue;
      handler.streams[id]->answered = true;
      const h2::ResponseField fields[] = {{"content-type", "text/plain"}};
      session.submit_response(id, 200, fields, 1, true);
    }
    handler.to_answer.clear();
    for (const auto& [id, n] : handler.passed) session.consume(id, n);
    handler.passed.clear();
    for (std::size_t n; (n = session.produce(buf.data(), buf.size())) > 0;)
      out.append(buf.data(), n);
    now += std::chrono::milliseconds(50);
    if (offered == in.size() && fed.consumed == 0 && !fed.budget_spent) break;
  }
  check_frames(out);
  return 0;
}
