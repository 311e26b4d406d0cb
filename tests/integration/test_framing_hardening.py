"""Framing floodgate refuses although llhttp 8.1 lets it through (docs/http.md, "Requests" and
"Bodies and framing"), end to end: empty field names, obs-folds after an empty first line,
HTTP/0.9 request lines, response transfer codings other than chunked, Content-Length on 204
and 1xx, chunk sizes above 2^63-1, chunk lines over 4096 bytes and bare CR in chunk
extensions. A malformed request is 400 bad_request, closed, and reaches no backend; a
malformed response is 502 upstream_bad_response, or, once its body has started, a client
connection cut without the last chunk."""

import unittest

from backend import Backend
from harness import NO_BREAKER, BodyReader, FloodgateTestCase, build_request, upstream

CHUNKED_POST = b"POST /echo?%s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

BAD_HEADS = {
    "empty field name": b"GET /echo?e1 HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n",
    "empty field name before a colon-prefixed Transfer-Encoding":
        b"POST /echo?e2 HTTP/1.1\r\nHost: a\r\n:Transfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n",
    "bare colon": b"GET /echo?e3 HTTP/1.1\r\nHost: a\r\n:\r\n\r\n",
    "Host folded after an empty first line": b"GET /echo?f1 HTTP/1.1\r\nHost:\r\n evil.example\r\n\r\n",
    "Content-Length folded after an empty first line":
        b"POST /echo?f2 HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n 5\r\n\r\nhello",
    "fold of whitespace only": b"GET /echo?f3 HTTP/1.1\r\nHost: a\r\nX-A:\r\n \r\n\r\n",
    "chunked with a trailing tab (not chunked to llhttp)":
        b"POST /echo?t1 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n",
}

# Chunked request bodies refused at their first chunk line (within floodgate's first read).
BAD_FIRST_CHUNKS = {
    "chunk size of 2^64-1": b"ffffffffffffffff\r\nhello\r\n0\r\n\r\n",
    "chunk size of 2^63": b"8000000000000000\r\nhello\r\n0\r\n\r\n",
    "bare CR in a chunk extension name": b"5;a\rb\r\nhello\r\n0\r\n\r\n",
    "bare CR in a chunk extension value": b"5;a=b\rc\r\nhello\r\n0\r\n\r\n",
}


def chunk_line(n):
    """A chunk line of exactly n bytes (CRLF included) for a 5-byte chunk."""
    return b"5;" + b"e" * (n - 4) + b"\r\n"


def response_head(*fields):
    return b"HTTP/1.1 200 OK\r\n" + b"".join(f + b"\r\n" for f in fields) + b"\r\n"


BAD_RESPONSES = {
    "empty field name": response_head(b": v", b"Content-Length: 2") + b"ok",
    "fold after an empty first line": response_head(b"X-A:\r\n folded", b"Content-Length: 2") + b"ok",
    "Content-Length folded after an empty first line": response_head(b"Content-Length:\r\n 2") + b"ok",
    "gzip, chunked": response_head(b"Transfer-Encoding: gzip, chunked") + b"5\r\nhello\r\n0\r\n\r\n",
    "chunked, identity": response_head(b"Transfer-Encoding: chunked, identity") + b"5\r\nhello\r\n0\r\n\r\n",
    "xchunked": response_head(b"Transfer-Encoding: xchunked") + b"5\r\nhello\r\n0\r\n\r\n",
    "two Transfer-Encoding fields":
        response_head(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked") + b"5\r\nhello\r\n0\r\n\r\n",
    "chunk size of 2^64-1": response_head(b"Transfer-Encoding: chunked") + b"ffffffffffffffff\r\nhello",
    "chunk line over 4096 bytes": response_head(b"Transfer-Encoding: chunked") + chunk_line(4097) + b"hello\r\n0\r\n\r\n",
    "bare CR in a chunk extension": response_head(b"Transfer-Encoding: chunked") + b"5;a\rb\r\nhello\r\n0\r\n\r\n",
}


class FramingHardening(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        # header_timeout far above the read deadline: an answer within it cannot be the 408.
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     server={"header_timeout": "60s"}, resilience=NO_BREAKER)

    def rejected(self, raw):
        """Sends raw bytes on a fresh connection: 400 bad_request, closed, no backend request."""
        before = self.backend.request_count
        with self.fg.conn() as c:
            c.send(raw)
            r = c.read_response()
            self.assertGenerated(r, 400, "bad_request")
            c.wait_closed()
        # The aborted request of the long-chunk-line test may be recorded late: it is not ours.
        reached = [r for r in self.backend.snapshot()[before:] if r.target != "/echo?line-long"]
        self.assertEqual(reached, [], "rejected request reached the backend: %r" % reached)

    def raw_response(self, key, *parts):
        self.backend.set_raw(key, *parts)
        return build_request("GET", "/raw?key=" + key)

    # --- requests ---------------------------------------------------------------------------
    def test_malformed_request_heads_are_400_and_reach_no_backend(self):
        for name, raw in BAD_HEADS.items():
            with self.subTest(name):
                self.rejected(raw)

    def test_http09_request_line_is_400_at_once_not_after_header_timeout(self):
        self.rejected(b"GET /echo?http09\r\n")

    def test_bad_first_chunk_lines_are_400_and_reach_no_backend(self):
        for i, (name, body) in enumerate(BAD_FIRST_CHUNKS.items()):
            with self.subTest(name):
                self.rejected(CHUNKED_POST % (b"c%d" % i) + body)

    def test_chunk_line_of_exactly_4096_bytes_passes(self):
        line = chunk_line(4096)
        self.assertEqual(len(line), 4096)
        with self.fg.conn() as c:
            c.send(CHUNKED_POST % b"line-ok" + line + b"hello\r\n" + line + b"world\r\n0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
        rec = self.backend.wait_for_target("/echo?line-ok")
        self.assertEqual(bytes(rec.body), b"helloworld")

    def test_chunk_line_over_4096_bytes_is_400_and_the_backend_request_is_aborted(self):
        # The head goes to the backend before the 4097th byte of the line is read (bodies are
        # streamed): the backend request is then aborted, never completed.
        with self.fg.conn() as c:
            c.send(CHUNKED_POST % b"line-long" + chunk_line(4097) + b"hello\r\n0\r\n\r\n")
            r = c.read_response()
            self.assertGenerated(r, 400, "bad_request")
            c.wait_closed()
        for rec in self.backend.snapshot():
            if rec.target == "/echo?line-long":
                self.backend.wait_for(lambda b: rec.aborted, what="the backend request to be aborted")
                self.assertFalse(rec.complete)
                self.assertEqual(bytes(rec.body), b"")

    # --- responses --------------------------------------------------------------------------
    def test_malformed_responses_are_502_upstream_bad_response(self):
        for i, (name, raw) in enumerate(BAD_RESPONSES.items()):
            with self.subTest(name):
                with self.fg.conn() as c:
                    c.send(self.raw_response("bad-%d" % i, raw))
                    r = c.read_response()
                    self.assertGenerated(r, 502, "upstream_bad_response")

    def assert_cut_after_the_first_chunk(self, key, bad_rest):
        head = response_head(b"Transfer-Encoding: chunked")
        with self.fg.conn() as c:
            c.send(self.raw_response(key, head + b"5\r\nhello\r\n", bad_rest))
            r = c.read_head()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(BodyReader(c, r).read(5), b"hello")
            self.backend.release(key + "/1")
            rest = c.wait_closed()
        self.assertNotIn(b"0\r\n\r\n", rest, "a cut body must not end with the last chunk")

    def test_huge_chunk_size_after_the_body_started_cuts_the_client_connection(self):
        self.assert_cut_after_the_first_chunk("cut-size", b"ffffffffffffffff\r\nxx")

    def test_long_chunk_line_after_the_body_started_cuts_the_client_connection(self):
        self.assert_cut_after_the_first_chunk("cut-line", chunk_line(5000) + b"world\r\n0\r\n\r\n")

    def test_no_content_response_loses_its_content_length(self):
        raw = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-A: b\r\n\r\n"
        with self.fg.conn() as c:
            c.send(self.raw_response("cl-204", raw))
            r = c.read_response()
        self.assertEqual(r.status, 204, r)
        self.assertFalse(r.has_header("content-length"), r)
        self.assertEqual(r.header("x-a"), "b")

    def test_interim_response_loses_its_content_length(self):
        raw = (b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nContent-Length: 0\r\n\r\n"
               b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        with self.fg.conn() as c:
            c.send(self.raw_response("cl-103", raw))
            interim = c.read_response()
            final = c.read_response()
        self.assertEqual(interim.status, 103, interim)
        self.assertFalse(interim.has_header("content-length"), interim)
        self.assertEqual((final.status, final.body), (200, b"ok"), final)

    def test_not_modified_response_keeps_its_content_length(self):
        raw = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"
        with self.fg.conn() as c:
            c.send(self.raw_response("cl-304", raw))
            r = c.read_response()
        self.assertEqual(r.status, 304, r)
        self.assertEqual(r.header_values("content-length"), ["50"])


if __name__ == "__main__":
    unittest.main()
