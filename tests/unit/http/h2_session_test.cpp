// The HTTP/2 server session (h2_session.h) against libnghttp2's client session, bytes handed
// across in memory, and against raw frames for what no well-behaved client sends: request heads
// as RequestHead views, bodies under flow control, responses, the frame budget, new streams at
// the caller's pace, the head caps, refused streams and the glitch counter's GOAWAYs.
#include "floodgate/http/h2_session.h"
#include "floodgate/http/rewrite.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::http::h2 {
namespace {

using namespace std::chrono_literals;
using Clock = Session::Clock;

// What the connection would be: storage for each stream's head, and a record of events.
class Recorder final : public Handler {
 public:
  struct Stream {
    int32_t id = 0;
    std::vector<char> data = std::vector<char>(16384);
    std::vector<HeaderField> fields = std::vector<HeaderField>(128);
    bool head_seen = false;
    RequestHead head;
    Reason error = Reason::none;
    bool end_stream_on_head = false;
    std::string body;
    bool ended = false;
    bool reset_by_client = false;
    ErrorCode reset_code = ErrorCode::no_error;
    bool closed = false;
    ErrorCode close_code = ErrorCode::no_error;
    std::string response;  // body still to give to read_body
    bool response_eof = false;
  };

  bool refuse = false;
  bool accept = true;  // accepts_stream()
  std::map<int32_t, std::unique_ptr<Stream>> streams;
  int heads = 0;

  Stream& at(int32_t id) { return *streams.at(id); }

  bool accepts_stream() noexcept override { return accept; }
  StreamHandle on_stream_open(int32_t id, HeadStorage& storage) override {
    if (refuse) return nullptr;
    auto s = std::make_unique<Stream>();
    s->id = id;
    storage = {s->data.data(), s->data.size(), s->fields.data(),
               static_cast<uint32_t>(s->fields.size())};
    Stream* raw = s.get();
    streams[id] = std::move(s);
    return raw;
  }
  void on_request_head(StreamHandle h, const RequestHead& head, Reason error,
                       bool end_stream) override {
    Stream& s = *static_cast<Stream*>(h);
    ++heads;
    s.head_seen = true;
    s.head = head;
    s.error = error;
    s.end_stream_on_head = end_stream;
  }
  void on_request_data(StreamHandle h, const char* data, std::size_t n) override {
    static_cast<Stream*>(h)->body.append(data, n);
  }
  void on_request_end(StreamHandle h) override { static_cast<Stream*>(h)->ended = true; }
  void on_stream_reset(StreamHandle h, ErrorCode code) override {
    Stream& s = *static_cast<Stream*>(h);
    s.reset_by_client = true;
    s.reset_code = code;
  }
  void on_stream_close(StreamHandle h, ErrorCode code) override {
    Stream& s = *static_cast<Stream*>(h);
    s.closed = true;
    s.close_code = code;
  }
  std::size_t read_body(StreamHandle h, char* out, std::size_t max, bool& eof) override {
    Stream& s = *static_cast<Stream*>(h);
    const std::size_t n = std::min(max, s.response.size());
    std::memcpy(out, s.response.data(), n);
    s.response.erase(0, n);
    eof = s.response.empty() && s.response_eof;
    return n;
  }
};

// libnghttp2's client session: what it received, by stream.
class Client {
 public:
  struct Response {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    bool ended = false;
    uint32_t reset_code = 0xffffffff;  // none
  };
  std::map<int32_t, Response> responses;
  bool goaway = false;
  uint32_t goaway_code = 0;
  int32_t goaway_last_stream = -1;
  uint32_t max_streams_seen = 0;

  explicit Client(std::size_t max_send_header_block = 0) {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl,
                const uint8_t* v, size_t vl, uint8_t, void* ud) {
          auto& r = static_cast<Client*>(ud)->responses[f->hd.stream_id];
          std::string name(reinterpret_cast<const char*>(n), nl);
          std::string value(reinterpret_cast<const char*>(v), vl);
          if (name == ":status") {
            r.status = std::stoi(value);
          } else {
            r.fields.emplace_back(name, value);
          }
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cbs, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t len, void* ud) {
          static_cast<Client*>(ud)->responses[id].body.append(reinterpret_cast<const char*>(d),
                                                              len);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(
        cbs, [](nghttp2_session*, const nghttp2_frame* f, void* ud) {
          auto* c = static_cast<Client*>(ud);
          if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
              (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
            c->responses[f->hd.stream_id].ended = true;
          }
          if (f->hd.type == NGHTTP2_RST_STREAM) {
            c->responses[f->hd.stream_id].reset_code = f->rst_stream.error_code;
          }
          if (f->hd.type == NGHTTP2_GOAWAY) {
            c->goaway = true;
            c->goaway_code = f->goaway.error_code;
            c->goaway_last_stream = f->goaway.last_stream_id;
          }
          if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
            for (size_t i = 0; i < f->settings.niv; ++i) {
              if (f->settings.iv[i].settings_id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS) {
                c->max_streams_seen = f->settings.iv[i].value;
              }
            }
          }
          return 0;
        });
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    if (max_send_header_block != 0) {
      nghttp2_option_set_max_send_header_block_length(opt, max_send_header_block);
    }
    nghttp2_session_client_new2(&session_, cbs, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~Client() { nghttp2_session_del(session_); }

  nghttp2_session* session() { return session_; }

  // A request: pseudo-header fields first, then `fields`; `body` (nullptr: none) sent from
  // `upload`.
  int32_t request(std::vector<std::pair<std::string, std::string>> fields,
                  const std::string* body = nullptr) {
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : fields) {
      nva.push_back({reinterpret_cast<uint8_t*>(n.data()), reinterpret_cast<uint8_t*>(v.data()),
                     n.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    }
    nghttp2_data_provider provider{};
    if (body != nullptr) {
      upload_ = *body;
      provider.source.ptr = this;
      provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t len,
                                  uint32_t* flags, nghttp2_data_source* src, void*) -> ssize_t {
        auto* c = static_cast<Client*>(src->ptr);
        const std::size_t n = std::min(len, c->upload_.size());
        std::memcpy(buf, c->upload_.data(), n);
        c->upload_.erase(0, n);
        if (c->upload_.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
      };
    }
    return nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                  body != nullptr ? &provider : nullptr, nullptr);
  }

  // Bytes the client has to send now.
  std::string out() {
    std::string bytes;
    for (;;) {
      const uint8_t* p = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &p);
      if (n <= 0) break;
      bytes.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    }
    return bytes;
  }
  void in(const std::string& bytes) {
    nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()),
                             bytes.size());
  }

 private:
  nghttp2_session* session_ = nullptr;
  std::string upload_;
};

std::vector<std::pair<std::string, std::string>> get(std::string path) {
  return {{":method", "GET"},
          {":scheme", "https"},
          {":authority", "example.com"},
          {":path", std::move(path)}};
}

// Raw frames, for what libnghttp2's client will not send.
std::string frame(uint8_t type, uint8_t flags, int32_t id, std::string_view payload) {
  std::string f;
  const auto len = static_cast<uint32_t>(payload.size());
  f.push_back(static_cast<char>(len >> 16));
  f.push_back(static_cast<char>(len >> 8));
  f.push_back(static_cast<char>(len));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  const auto uid = static_cast<uint32_t>(id);
  f.push_back(static_cast<char>(uid >> 24));
  f.push_back(static_cast<char>(uid >> 16));
  f.push_back(static_cast<char>(uid >> 8));
  f.push_back(static_cast<char>(uid));
  f.append(payload);
  return f;
}
const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
std::string client_start() {
  return kPreface + frame(NGHTTP2_SETTINGS, 0, 0, "");
}
std::string ping(char tag) {
  return frame(NGHTTP2_PING, 0, 0, std::string(8, tag));
}
// A GET's header block in HPACK from the static table alone: :method GET, :scheme http,
// :path /, :authority "a" (literal with an indexed name).
const std::string kGetBlock = std::string("\x82\x86\x84\x41\x01", 5) + "a";

class H2Session : public ::testing::Test {
 protected:
  Limits limits;
  Recorder rec;
  std::unique_ptr<Session> server;
  Clock::time_point now = Clock::time_point{} + 1h;
  std::string unread;  // what the server has not consumed yet

  void start() {
    server = std::make_unique<Session>(limits, rec);
    ASSERT_TRUE(server->ok());
  }
  // Feeds `bytes` after what is still unread; returns the last feed's result.
  Session::Fed feed(const std::string& bytes, bool accept = true) {
    unread += bytes;
    rec.accept = accept;
    Session::Fed fed;
    do {
      fed = server->feed(unread.data(), unread.size(), now);
      unread.erase(0, fed.consumed);
    } while (fed.consumed > 0 && !unread.empty() && fed.budget_spent);
    return fed;
  }
  std::string produce() {
    std::string bytes;
    char buf[4096];
    for (std::size_t n; (n = server->produce(buf, sizeof(buf))) > 0;) bytes.append(buf, n);
    return bytes;
  }
  // Client and server talk until neither has anything to say.
  void exchange(Client& c) {
    for (int i = 0; i < 100; ++i) {
      const std::string up = c.out();
      if (!up.empty()) feed(up);
      const std::string down = produce();
      if (!down.empty()) c.in(down);
      if (up.empty() && down.empty()) return;
    }
    FAIL() << "client and server did not settle";
  }
};

TEST_F(H2Session, ARequestHeadArrivesAsTheSameViewAnHttp1HeadIs) {
  start();
  Client c;
  auto fields = get("/search?q=1");
  fields.emplace_back("user-agent", "test");
  fields.emplace_back("x-request-id", "abc");
  const int32_t id = c.request(fields);
  exchange(c);
  ASSERT_EQ(rec.streams.count(id), 1U);
  const Recorder::Stream& s = rec.at(id);
  ASSERT_TRUE(s.head_seen);
  EXPECT_EQ(s.error, Reason::none);
  EXPECT_EQ(s.head.method_name, "GET");
  EXPECT_EQ(s.head.method, HTTP_GET);
  EXPECT_EQ(s.head.target, "/search?q=1");
  EXPECT_EQ(s.head.scheme, "https");
  EXPECT_EQ(s.head.authority, "example.com");
  EXPECT_EQ(s.head.protocol(), "HTTP/2.0");
  EXPECT_TRUE(s.head.keep_alive);
  EXPECT_EQ(s.head.body, BodyFraming::none);
  EXPECT_TRUE(s.end_stream_on_head);
  EXPECT_TRUE(s.ended);
  ASSERT_EQ(s.head.field_count(), 2U);
  EXPECT_EQ(s.head.field_name(0), "user-agent");
  EXPECT_EQ(s.head.field_value(0), "test");
  EXPECT_EQ(s.head.field_kind(1), Field::x_request_id);
  EXPECT_TRUE(s.head.has(bit(Field::x_request_id)));
}

TEST_F(H2Session, AnUnknownMethodIsNeitherSafeNorIdempotent) {
  start();
  Client c;
  auto fields = get("/");
  fields[0].second = "QUERY";
  const int32_t id = c.request(fields);
  exchange(c);
  EXPECT_EQ(rec.at(id).head.method_name, "QUERY");
  EXPECT_EQ(rec.at(id).head.method, HTTP_POST);
}

TEST_F(H2Session, CookieFieldsAreJoinedIntoOneWhereTheFirstWas) {
  start();
  Client c;
  auto fields = get("/");
  fields.emplace_back("cookie", "a=1");
  fields.emplace_back("accept", "*/*");
  fields.emplace_back("cookie", "b=2");
  fields.emplace_back("cookie", "c=3");
  const int32_t id = c.request(fields);
  exchange(c);
  const RequestHead& h = rec.at(id).head;
  ASSERT_EQ(h.field_count(), 2U);
  EXPECT_EQ(h.field_name(0), "cookie");
  EXPECT_EQ(h.field_value(0), "a=1; b=2; c=3");
  EXPECT_EQ(h.field_name(1), "accept");
}

TEST_F(H2Session, AConnectRequestsTargetIsItsAuthority) {
  start();
  Client c;
  const int32_t id = c.request({{":method", "CONNECT"}, {":authority", "db.internal:5432"}});
  exchange(c);
  EXPECT_EQ(rec.at(id).head.method, HTTP_CONNECT);
  EXPECT_EQ(rec.at(id).head.target, "db.internal:5432");
}

TEST_F(H2Session, ARequestBodyComesNoFasterThanTheCallerConsumesIt) {
  limits.stream_window = 65535;
  start();
  Client c;
  auto fields = get("/upload");
  fields[0].second = "POST";
  fields.emplace_back("content-length", "200000");
  const std::string body(200000, 'x');
  const int32_t id = c.request(fields, &body);
  exchange(c);
  Recorder::Stream& s = rec.at(id);
  EXPECT_EQ(s.head.body, BodyFraming::length);
  EXPECT_EQ(s.head.content_length, 200000U);
  // The stream's window is all the client may send until floodgate passes bytes on.
  EXPECT_EQ(s.body.size(), 65535U);
  EXPECT_FALSE(s.ended);
  std::size_t passed = 0;
  for (int i = 0; i < 10 && !s.ended; ++i) {
    server->consume(id, s.body.size() - passed);
    passed = s.body.size();
    exchange(c);
  }
  EXPECT_TRUE(s.ended);
  EXPECT_EQ(s.body, body);
}

TEST_F(H2Session, ABodyWithoutContentLengthIsAStreamOfData) {
  start();
  Client c;
  auto fields = get("/upload");
  fields[0].second = "POST";
  const std::string body = "hello";
  const int32_t id = c.request(fields, &body);
  exchange(c);
  EXPECT_EQ(rec.at(id).head.body, BodyFraming::stream);
  EXPECT_FALSE(rec.at(id).end_stream_on_head);
  EXPECT_EQ(rec.at(id).body, "hello");
  EXPECT_TRUE(rec.at(id).ended);
}

TEST_F(H2Session, AResponseReachesTheClientWithItsBody) {
  start();
  Client c;
  const int32_t id = c.request(get("/"));
  exchange(c);
  Recorder::Stream& s = rec.at(id);
  s.response = std::string(100000, 'r');
  s.response_eof = true;
  const ResponseField fields[] = {{"content-type", "text/plain"}, {"content-length", "100000"}};
  ASSERT_TRUE(server->submit_response(id, 200, fields, 2, true));
  exchange(c);
  const Client::Response& r = c.responses[id];
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.fields.size(), 2U);
  EXPECT_EQ(r.fields[0].first, "content-type");
  EXPECT_EQ(r.body.size(), 100000U);
  EXPECT_TRUE(r.ended);
  EXPECT_TRUE(s.closed);
  EXPECT_EQ(s.close_code, ErrorCode::no_error);
}

TEST_F(H2Session, ABodyMaySendOnlyWhileTheClientsWindowsAreOpen) {
  start();
  Client c;
  const nghttp2_settings_entry shut{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0};
  nghttp2_submit_settings(c.session(), NGHTTP2_FLAG_NONE, &shut, 1);
  const int32_t id = c.request(get("/"));
  exchange(c);
  EXPECT_FALSE(server->can_send_body(id));
  nghttp2_submit_window_update(c.session(), NGHTTP2_FLAG_NONE, id, 1000);
  exchange(c);
  EXPECT_TRUE(server->can_send_body(id));
}

TEST_F(H2Session, ABodyNotReadyYetIsSentOnceResumed) {
  start();
  Client c;
  const int32_t id = c.request(get("/"));
  exchange(c);
  ASSERT_TRUE(server->submit_response(id, 200, nullptr, 0, true));
  exchange(c);
  EXPECT_EQ(c.responses[id].status, 200);
  EXPECT_FALSE(c.responses[id].ended);
  rec.at(id).response = "late";
  rec.at(id).response_eof = true;
  server->resume_body(id);
  exchange(c);
  EXPECT_EQ(c.responses[id].body, "late");
  EXPECT_TRUE(c.responses[id].ended);
}

TEST_F(H2Session, AResponseWholeBeforeItsRequestTellsTheClientToStopWithoutError) {
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, kGetBlock);  // a body follows
  bytes += frame(NGHTTP2_DATA, 0, 1, "part");
  feed(bytes);
  ASSERT_TRUE(server->submit_response(1, 413, nullptr, 0, false));
  // The frames on stream 1, in order: the response's HEADERS ending the stream, then
  // RST_STREAM NO_ERROR.
  const std::string out = produce();
  std::vector<std::pair<int, int>> on_stream;  // type, flags
  std::string rst_payload;
  for (std::size_t pos = 0; pos + 9 <= out.size();) {
    const auto* h = reinterpret_cast<const uint8_t*>(out.data() + pos);
    const std::size_t len = (std::size_t{h[0]} << 16) | (std::size_t{h[1]} << 8) | h[2];
    if (h[8] == 1 && h[5] == 0 && h[6] == 0 && h[7] == 0) {
      on_stream.emplace_back(h[3], h[4]);
      if (h[3] == NGHTTP2_RST_STREAM) rst_payload = out.substr(pos + 9, len);
    }
    pos += 9 + len;
  }
  ASSERT_EQ(on_stream.size(), 2U);
  EXPECT_EQ(on_stream[0], std::make_pair(int{NGHTTP2_HEADERS},
                                         int{NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM}));
  EXPECT_EQ(on_stream[1].first, NGHTTP2_RST_STREAM);
  EXPECT_EQ(rst_payload, std::string(4, '\0'));  // NO_ERROR
}

TEST_F(H2Session, AStreamTheCallerRefusesIsResetWithRefusedStream) {
  start();
  rec.refuse = true;
  Client c;
  const int32_t id = c.request(get("/"));
  exchange(c);
  EXPECT_EQ(c.responses[id].reset_code, static_cast<uint32_t>(NGHTTP2_REFUSED_STREAM));
  EXPECT_EQ(rec.heads, 0);
}

TEST_F(H2Session, NewStreamsWaitUnreadWhileTheCallerTakesNone) {
  start();
  Client c;
  feed(c.out());
  produce();
  c.request(get("/one"));
  const std::string bytes = c.out();
  const Session::Fed fed = feed(bytes, /*accept=*/false);
  EXPECT_TRUE(fed.awaiting_stream_room);
  EXPECT_EQ(rec.heads, 0);
  EXPECT_EQ(unread.size(), bytes.size());
  feed("", /*accept=*/true);
  EXPECT_EQ(rec.heads, 1);
  EXPECT_TRUE(unread.empty());
}

TEST_F(H2Session, OneFeedProcessesAtMostTheFrameBudget) {
  limits.max_frames_per_turn = 4;
  start();
  std::string bytes = client_start();
  for (char tag = 'a'; tag < 'a' + 6; ++tag) bytes += ping(tag);
  const Session::Fed fed = server->feed(bytes.data(), bytes.size(), now);
  EXPECT_TRUE(fed.budget_spent);
  // The preface, SETTINGS and three PINGs: four frames.
  EXPECT_EQ(fed.consumed, kPreface.size() + 9 + 3 * 17);
  const Session::Fed rest =
      server->feed(bytes.data() + fed.consumed, bytes.size() - fed.consumed, now);
  EXPECT_FALSE(rest.budget_spent);
  EXPECT_EQ(rest.consumed, 3U * 17);
}

TEST_F(H2Session, AFrameHeaderNotAllInWaitsForItsRest) {
  start();
  const std::string bytes = client_start() + ping('a');
  const std::size_t cut = bytes.size() - 17 + 5;  // five bytes of the PING's header
  const Session::Fed fed = server->feed(bytes.data(), cut, now);
  EXPECT_EQ(fed.consumed, bytes.size() - 17);
}

TEST_F(H2Session, APathOverMaxUriBytesIsAnswered414) {
  limits.max_uri_bytes = 64;
  start();
  Client c;
  const int32_t id = c.request(get("/" + std::string(100, 'p')));
  exchange(c);
  EXPECT_EQ(rec.at(id).error, Reason::uri_too_long);
}

TEST_F(H2Session, FieldsOverMaxHeaderBytesOrMaxHeadersAreAnswered431) {
  limits.max_header_bytes = 1024;
  limits.max_headers = 4;
  start();
  Client c;
  auto big = get("/");
  big.emplace_back("x-big", std::string(2000, 'b'));
  const int32_t one = c.request(big);
  auto many = get("/");
  for (int i = 0; i < 5; ++i) many.emplace_back("x-f" + std::to_string(i), "v");
  const int32_t two = c.request(many);
  exchange(c);
  EXPECT_EQ(rec.at(one).error, Reason::header_too_large);
  EXPECT_EQ(rec.at(two).error, Reason::header_too_large);
  EXPECT_EQ(server->glitches()[static_cast<std::size_t>(Glitch::header_overflow)], 2U);
}

TEST_F(H2Session, CookiesCountTowardsTheDecodedListCap) {
  limits.max_header_list_bytes = 4096;
  limits.max_header_bytes = 65536;
  start();
  Client c;
  auto fields = get("/");
  // Each crumb is small; together they pass the cap after decoding.
  for (int i = 0; i < 60; ++i)
    fields.emplace_back("cookie", "k" + std::to_string(i) + "=" + std::string(40, 'v'));
  const int32_t id = c.request(fields);
  exchange(c);
  EXPECT_EQ(rec.at(id).error, Reason::header_too_large);
  EXPECT_FALSE(c.goaway);
}

TEST_F(H2Session, AHeaderBlockDecodingToTwiceTheCapEndsTheConnection) {
  limits.max_header_list_bytes = 4096;
  start();
  Client c(1 << 20);
  auto fields = get("/");
  // The same large field again and again: after the first, each is one byte of HPACK (an
  // index into the dynamic table), and decodes to the whole field.
  for (int i = 0; i < 200; ++i) fields.emplace_back("x-bomb", std::string(1000, 'b'));
  c.request(fields);
  exchange(c);
  EXPECT_TRUE(c.goaway);
  EXPECT_EQ(c.goaway_code, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_EQ(rec.heads, 0);
  EXPECT_TRUE(server->finished());
}

TEST_F(H2Session, ContinuationFramesBeyondTheLimitEndTheConnection) {
  limits.max_continuations = 4;
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, 0, 1, kGetBlock);
  // Each fragment one more field, "x: y" as a literal without indexing.
  for (int i = 0; i < 8; ++i) {
    bytes += frame(NGHTTP2_CONTINUATION, 0, 1, std::string("\x00\x01x\x01y", 5));
  }
  feed(bytes);
  produce();
  EXPECT_TRUE(server->goaway_sent());
  EXPECT_NE(server->goaway_code(), ErrorCode::no_error);
  EXPECT_EQ(rec.heads, 0);
  EXPECT_GE(server->glitches()[static_cast<std::size_t>(Glitch::tiny_continuation)], 4U);
}

TEST_F(H2Session, GlitchesSendAGracefulGoawayAtThreeQuartersAndEnhanceYourCalmAtTheThreshold) {
  limits.glitch_threshold = 20;
  start();
  Client c;
  // A stream in progress keeps the connection open after the graceful GOAWAY.
  feed(client_start() +
       frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, kGetBlock));
  c.in(produce());
  // Ten PINGs a second are free; each one more is a glitch.
  std::string pings;
  for (int i = 0; i < 10 + 15; ++i) pings += ping('p');
  feed(pings);
  c.in(produce());
  EXPECT_TRUE(c.goaway);
  EXPECT_EQ(c.goaway_code, static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_EQ(server->glitches()[static_cast<std::size_t>(Glitch::ping_flood)], 15U);
  pings.clear();
  for (int i = 0; i < 5; ++i) pings += ping('q');
  const Session::Fed fed = feed(pings);
  EXPECT_TRUE(fed.failed);
  produce();
  EXPECT_EQ(server->goaway_code(), ErrorCode::enhance_your_calm);
  EXPECT_TRUE(server->finished());
}

TEST_F(H2Session, AGracefulGoawayWithNoStreamLeftFinishesTheSession) {
  limits.glitch_threshold = 20;
  start();
  std::string pings = client_start();
  for (int i = 0; i < 10 + 15; ++i) pings += ping('p');
  feed(pings);
  Client c;
  c.in(produce());
  EXPECT_TRUE(c.goaway);
  EXPECT_EQ(c.goaway_code, static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_TRUE(server->finished());
}

TEST_F(H2Session, GlitchesOlderThanAMinuteFadeOut) {
  limits.glitch_threshold = 20;
  start();
  for (int i = 0; i < 14; ++i) server->glitch(Glitch::reset_unanswered, now);
  now += 2min;
  for (int i = 0; i < 14; ++i) server->glitch(Glitch::reset_unanswered, now);
  EXPECT_FALSE(server->goaway_sent());
  Client c;
  c.in(produce());
  EXPECT_FALSE(c.goaway);
  EXPECT_EQ(server->glitches()[static_cast<std::size_t>(Glitch::reset_unanswered)], 28U);
}

TEST_F(H2Session, EmptyDataFramesAreGlitches) {
  start();
  std::string bytes = client_start();
  // HEADERS without END_STREAM, then empty DATA frames.
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, kGetBlock);
  for (int i = 0; i < 3; ++i) bytes += frame(NGHTTP2_DATA, 0, 1, "");
  feed(bytes);
  EXPECT_EQ(server->glitches()[static_cast<std::size_t>(Glitch::empty_data)], 3U);
}

TEST_F(H2Session, DataOnAClosedStreamIsAGlitch) {
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, kGetBlock);
  feed(bytes);
  ASSERT_EQ(rec.heads, 1);
  ASSERT_TRUE(server->submit_response(1, 204, nullptr, 0, false));
  produce();
  ASSERT_TRUE(rec.at(1).closed);
  feed(frame(NGHTTP2_DATA, 0, 1, "late"));
  EXPECT_EQ(server->glitches()[static_cast<std::size_t>(Glitch::closed_stream)], 1U);
}

TEST_F(H2Session, AWindowUpdateOfZeroIsAGlitchAndEndsTheConnection) {
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, kGetBlock);
  bytes += frame(NGHTTP2_WINDOW_UPDATE, 0, 1, std::string(4, '\0'));  // an increment of 0
  feed(bytes);
  produce();
  EXPECT_EQ(server->glitches()[static_cast<std::size_t>(Glitch::stream_error)], 1U);
  EXPECT_TRUE(server->goaway_sent());
  EXPECT_EQ(server->goaway_code(), ErrorCode::protocol_error);
}

// MadeYouReset's other primitive: libnghttp2 answers it with a connection error, so it cannot
// make floodgate reset streams one by one.
TEST_F(H2Session, DataOnAHalfClosedStreamEndsTheConnection) {
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, kGetBlock);
  bytes += frame(NGHTTP2_DATA, 0, 1, "more");  // after END_STREAM
  feed(bytes);
  produce();
  EXPECT_TRUE(server->goaway_sent());
  EXPECT_EQ(server->goaway_code(), ErrorCode::stream_closed);
  EXPECT_TRUE(server->finished());
}

TEST_F(H2Session, TrailersAreDropped) {
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS, 1, kGetBlock);
  bytes += frame(NGHTTP2_DATA, 0, 1, "body");
  // A trailer block: "x-sum: 1" as a literal without indexing.
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1,
                 std::string("\x00\x05x-sum\x01\x31", 9));
  feed(bytes);
  EXPECT_EQ(rec.heads, 1);
  EXPECT_EQ(rec.at(1).body, "body");
  EXPECT_TRUE(rec.at(1).ended);
}

TEST_F(H2Session, AClientResetReachesTheCaller) {
  start();
  std::string bytes = client_start();
  bytes += frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, kGetBlock);
  bytes += frame(NGHTTP2_RST_STREAM, 0, 1, std::string("\0\0\0\x08", 4));
  feed(bytes);
  EXPECT_TRUE(rec.at(1).reset_by_client);
  EXPECT_EQ(rec.at(1).reset_code, ErrorCode::cancel);
  EXPECT_TRUE(rec.at(1).closed);
}

TEST_F(H2Session, ShutdownSendsGoawayWithTheLastStreamProcessed) {
  start();
  Client c;
  const int32_t id = c.request(get("/"));
  exchange(c);
  server->shutdown();
  c.in(produce());
  EXPECT_TRUE(c.goaway);
  EXPECT_EQ(c.goaway_code, static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_EQ(c.goaway_last_stream, id);
  EXPECT_FALSE(server->finished());  // its stream is still in progress
  ASSERT_TRUE(server->submit_response(id, 204, nullptr, 0, false));
  c.in(produce());
  EXPECT_TRUE(server->finished());
}

TEST_F(H2Session, TheAdvertisedStreamLimitCanShrinkAndComeBack) {
  start();
  Client c;
  exchange(c);
  EXPECT_EQ(c.max_streams_seen, 100U);
  server->advertise_max_streams(10);
  exchange(c);
  EXPECT_EQ(c.max_streams_seen, 10U);
  server->advertise_max_streams(100);
  exchange(c);
  EXPECT_EQ(c.max_streams_seen, 100U);
}

TEST_F(H2Session, WithoutThePrefaceTheConnectionEndsWithProtocolError) {
  start();
  const std::string bytes = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  const Session::Fed fed = server->feed(bytes.data(), bytes.size(), now);
  EXPECT_TRUE(fed.failed);
}

// -- The head an HTTP/1.1 backend receives for an HTTP/2 request (rewrite.h).

class H2Forwarding : public H2Session {
 protected:
  // The stream's head after inspect_request: its reason, and the forwarded head's text.
  Reason inspect(const std::vector<std::pair<std::string, std::string>>& fields,
                 const std::string* body = nullptr) {
    start();
    Client c;
    const int32_t id = c.request(fields, body);
    exchange(c);
    if (rec.streams.count(id) == 0 || !rec.at(id).head_seen) {
      ADD_FAILURE() << "no head";
      return Reason::count_;
    }
    const RequestHead& head = rec.at(id).head;
    const Reason r = inspect_request(head, facts);
    if (r != Reason::none) return r;
    std::string out(16384, '\0');
    Writer w(out.data(), out.size());
    EXPECT_TRUE(write_request_head(head, facts, {.client_ip = "10.0.0.9", .request_id = "r1"}, w));
    out.resize(w.size());
    text = out;
    return r;
  }
  RequestFacts facts;
  std::string text;
};

TEST_F(H2Forwarding, TheAuthorityBecomesHostAndTheRequestLineHttp11) {
  auto fields = get("/a?b=1");
  fields.emplace_back("accept", "*/*");
  ASSERT_EQ(inspect(fields), Reason::none);
  EXPECT_EQ(facts.host, "example.com");
  EXPECT_EQ(facts.host_header, "example.com");
  EXPECT_EQ(facts.path, "/a?b=1");
  EXPECT_TRUE(facts.keep_alive);
  EXPECT_FALSE(facts.has_body);
  EXPECT_EQ(text.substr(0, text.find("\r\n")), "GET /a?b=1 HTTP/1.1");
  EXPECT_NE(text.find("\r\nHost: example.com\r\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\r\naccept: */*\r\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Transfer-Encoding"), std::string::npos) << text;
}

TEST_F(H2Forwarding, AHostFieldThatAgreesIsForwardedOnce) {
  auto fields = get("/");
  fields.emplace_back("host", "EXAMPLE.com");
  ASSERT_EQ(inspect(fields), Reason::none);
  EXPECT_EQ(text.find("\r\nHost: "), text.rfind("\r\nHost: ")) << text;
  EXPECT_EQ(text.find("\r\nhost: "), std::string::npos) << text;
}

TEST_F(H2Forwarding, AHostFieldNamingAnotherHostIsABadRequest) {
  auto fields = get("/");
  fields.emplace_back("host", "other.example");
  EXPECT_EQ(inspect(fields), Reason::bad_request);
}

TEST_F(H2Forwarding, WithoutAuthorityTheHostFieldNamesTheHost) {
  ASSERT_EQ(inspect({{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {"host", "h.test"}}),
            Reason::none);
  EXPECT_EQ(facts.host, "h.test");
}

// A request with neither :authority nor Host has no host to route on: libnghttp2 takes it as
// malformed (RFC 9113 section 8.3.1) and resets it.
TEST_F(H2Session, WithoutAuthorityOrHostAStreamIsResetAsMalformed) {
  start();
  Client c;
  const int32_t id = c.request({{":method", "GET"}, {":scheme", "http"}, {":path", "/"}});
  exchange(c);
  EXPECT_EQ(c.responses[id].reset_code, static_cast<uint32_t>(NGHTTP2_PROTOCOL_ERROR));
  EXPECT_EQ(rec.heads, 0);
}

TEST_F(H2Forwarding, ABodyOfNoDeclaredLengthIsChunkedToTheBackend) {
  auto fields = get("/up");
  fields[0].second = "POST";
  const std::string body = "data";
  ASSERT_EQ(inspect(fields, &body), Reason::none);
  EXPECT_TRUE(facts.has_body);
  EXPECT_NE(text.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << text;
}

TEST_F(H2Forwarding, ABodyWithContentLengthKeepsIt) {
  auto fields = get("/up");
  fields[0].second = "POST";
  fields.emplace_back("content-length", "4");
  const std::string body = "data";
  ASSERT_EQ(inspect(fields, &body), Reason::none);
  EXPECT_NE(text.find("content-length: 4\r\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("Transfer-Encoding"), std::string::npos) << text;
}

TEST_F(H2Forwarding, TeTrailersIsNotForwarded) {
  auto fields = get("/");
  fields.emplace_back("te", "trailers");
  ASSERT_EQ(inspect(fields), Reason::none);
  EXPECT_EQ(text.find("te:"), std::string::npos) << text;
}

TEST_F(H2Forwarding, AConnectRequestNamesItsTarget) {
  ASSERT_EQ(inspect({{":method", "CONNECT"}, {":authority", "db.internal:5432"}}), Reason::none);
  EXPECT_TRUE(facts.connect);
  EXPECT_EQ(facts.authority, "db.internal:5432");
}

}  // namespace
}  // namespace floodgate::http::h2
