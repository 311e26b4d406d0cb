"""Bad input end to end: every malformed or ambiguous request class gets 400 bad_request and a
closed connection, the request limits are inclusive (exactly the limit passes, one more is
414/431/413), and nothing of a rejected request reaches a backend."""

import unittest

from backend import Backend
from harness import FloodgateTestCase, build_request, chunked, upstream

MAX_URI = 64
MAX_HEADER_BYTES = 512
MAX_HEADERS = 10
MAX_BODY = 1000

BAD_REQUESTS = {
    "request line without a version": b"GET /echo\r\nHost: a\r\n\r\n",
    "request line with an unknown protocol": b"GET /echo HTTX/1.1\r\nHost: a\r\n\r\n",
    "request line with an extra token": b"GET /echo HTTP/1.1 extra\r\nHost: a\r\n\r\n",
    "binary garbage": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    "Content-Length with Transfer-Encoding":
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "conflicting Content-Length headers":
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "conflicting Content-Length list":
        b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello!",
    "non-numeric Content-Length": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n",
    "negative Content-Length": b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n",
    "unknown transfer coding": b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: bogus\r\n\r\n",
    "chunked not the final transfer coding":
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, bogus\r\n\r\n0\r\n\r\n",
    "HTTP/1.1 without Host": b"GET /echo HTTP/1.1\r\nX-A: b\r\n\r\n",
    "two Host headers": b"GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "bare LF line endings": b"GET /echo HTTP/1.1\nHost: a\n\n",
    "bare LF inside the head": b"GET /echo HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n",
    "whitespace before the colon": b"GET /echo HTTP/1.1\r\nHost: a\r\nX-A : b\r\n\r\n",
    "invalid character in a field name": b"GET /echo HTTP/1.1\r\nHost: a\r\nX(A): b\r\n\r\n",
    "NUL in a field value": b"GET /echo HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n",
}


def head_with_header_section(n_bytes, target="/echo?hb"):
    """A GET whose header section (field lines + final CRLF, request line excluded) is exactly
    n_bytes long: "Host: a\\r\\n" (9) + "X-Pad: <pad>\\r\\n" (9 + pad) + "\\r\\n" (2)."""
    pad = n_bytes - 20
    assert pad >= 0
    return ("GET %s HTTP/1.1\r\nHost: a\r\nX-Pad: %s\r\n\r\n" % (target, "p" * pad)).encode()


def head_with_fields(count, target="/echo?hc"):
    fields = ["Host: a"] + ["X-F%d: v" % i for i in range(count - 1)]
    return ("GET %s HTTP/1.1\r\n%s\r\n\r\n" % (target, "\r\n".join(fields))).encode()


# A request another test sends whose head floodgate may or may not have forwarded before the
# refusal (the 413 of a body over the limit in one read races the backend connect): it can
# reach the backend after that test ended, so `rejected` does not count it.
MAY_ARRIVE_LATE = {"/echo?chunked-over-2"}


class BadInput(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])], server={
            "max_uri_bytes": MAX_URI, "max_header_bytes": MAX_HEADER_BYTES,
            "max_headers": MAX_HEADERS, "max_body_bytes": MAX_BODY})

    def rejected(self, raw, status, reason):
        """Sends raw bytes on a fresh connection; asserts the generated answer, the closed
        connection, and that nothing reached the backend."""
        before = self.backend.request_count
        with self.fg.conn() as c:
            c.send(raw)
            r = c.read_response()
            self.assertGenerated(r, status, reason)
            c.wait_closed()
        reached = [r.target for r in self.backend.snapshot()[before:]
                   if r.target not in MAY_ARRIVE_LATE]
        self.assertEqual(reached, [], "rejected request reached the backend")
        return r

    def passes(self, raw, target):
        with self.fg.conn() as c:
            c.send(raw)
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
        return self.backend.wait_for_target(target)

    # --- 400 --------------------------------------------------------------------------------
    def test_each_malformed_or_ambiguous_request_is_400_bad_request_and_closed(self):
        for name, raw in BAD_REQUESTS.items():
            with self.subTest(name):
                self.rejected(raw, 400, "bad_request")

    def test_smuggled_request_behind_an_ambiguous_one_never_reaches_the_backend(self):
        raw = (b"POST /echo?front HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
               b"GET /echo?smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
        self.rejected(raw, 400, "bad_request")

    def test_invalid_chunk_size_in_request_body_is_400_and_closed(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?bad-chunk", headers=[("Transfer-Encoding", "chunked")])
                   + b"5\r\nhello\r\nzz\r\nnope\r\n0\r\n\r\n")
            r = c.read_response()
            self.assertGenerated(r, 400, "bad_request")
            c.wait_closed()
        for rec in self.backend.snapshot():
            if rec.target == "/echo?bad-chunk":
                self.backend.wait_for(lambda b: rec.aborted, what="the backend request to be aborted")
                self.assertFalse(rec.complete)

    # --- max_uri_bytes (414) ----------------------------------------------------------------
    def test_request_target_of_exactly_max_uri_bytes_passes(self):
        target = "/echo?" + "u" * (MAX_URI - 6)
        self.assertEqual(len(target), MAX_URI)
        self.passes(build_request("GET", target), target)

    def test_request_target_one_byte_over_max_uri_bytes_is_414(self):
        target = "/echo?" + "u" * (MAX_URI - 5)
        self.rejected(build_request("GET", target), 414, "uri_too_long")

    # --- max_header_bytes (431) -------------------------------------------------------------
    def test_header_section_of_exactly_max_header_bytes_passes(self):
        raw = head_with_header_section(MAX_HEADER_BYTES)
        self.assertEqual(len(raw) - len(b"GET /echo?hb HTTP/1.1\r\n"), MAX_HEADER_BYTES)
        self.passes(raw, "/echo?hb")

    def test_header_section_one_byte_over_max_header_bytes_is_431(self):
        self.rejected(head_with_header_section(MAX_HEADER_BYTES + 1), 431, "header_too_large")

    def test_request_line_does_not_count_toward_max_header_bytes(self):
        target = "/echo?hb-long-line-" + "l" * (MAX_URI - 19)
        self.passes(head_with_header_section(MAX_HEADER_BYTES, target), target)

    # --- max_headers (431) ------------------------------------------------------------------
    def test_exactly_max_headers_fields_pass(self):
        self.passes(head_with_fields(MAX_HEADERS), "/echo?hc")

    def test_one_field_over_max_headers_is_431(self):
        self.rejected(head_with_fields(MAX_HEADERS + 1), 431, "header_too_large")

    # --- max_body_bytes (413) ---------------------------------------------------------------
    def test_content_length_body_of_exactly_max_body_bytes_passes(self):
        rec = self.passes(build_request("POST", "/echo?body-max", body=b"b" * MAX_BODY), "/echo?body-max")
        self.assertEqual(len(rec.body), MAX_BODY)

    def test_content_length_one_byte_over_max_body_bytes_is_413_before_the_body_is_sent(self):
        head = build_request("POST", "/echo?body-over", headers=[("Content-Length", str(MAX_BODY + 1))])
        self.rejected(head, 413, "body_too_large")

    def test_oversized_body_with_expect_100_continue_gets_413_without_100(self):
        head = build_request("POST", "/echo?body-over-expect", headers=[
            ("Content-Length", str(MAX_BODY + 1)), ("Expect", "100-continue")])
        self.rejected(head, 413, "body_too_large")  # the first response read must be the 413

    def test_chunked_body_of_exactly_max_body_bytes_passes(self):
        raw = build_request("POST", "/echo?chunked-max", headers=[("Transfer-Encoding", "chunked")])
        rec = self.passes(raw + chunked(b"c" * 600, b"d" * (MAX_BODY - 600)), "/echo?chunked-max")
        self.assertEqual(bytes(rec.body), b"c" * 600 + b"d" * (MAX_BODY - 600))

    def test_chunked_body_crossing_max_body_bytes_after_forwarding_began_is_413_and_closed(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?chunked-over", headers=[("Transfer-Encoding", "chunked")])
                   + b"258\r\n" + b"c" * 600 + b"\r\n")
            rec = self.backend.wait_for_target("/echo?chunked-over")
            self.backend.wait_for(lambda b: len(rec.body) == 600, what="the first 600 body bytes")
            c.send(b"191\r\n" + b"d" * 401 + b"\r\n0\r\n\r\n")
            r = c.read_response()
            self.assertGenerated(r, 413, "body_too_large")
            c.wait_closed()
        self.backend.wait_for(lambda b: rec.aborted, what="the backend request to be aborted")
        self.assertFalse(rec.complete)
        self.assertLessEqual(len(rec.body), MAX_BODY)

    def test_chunked_body_crossing_max_body_bytes_at_once_is_413_and_closed(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?chunked-over-2", headers=[("Transfer-Encoding", "chunked")])
                   + chunked(b"e" * 700, b"f" * 301))
            r = c.read_response()
            self.assertGenerated(r, 413, "body_too_large")
            c.wait_closed()
        for rec in self.backend.snapshot():
            if rec.target == "/echo?chunked-over-2":
                self.backend.wait_for(lambda b: rec.aborted, what="the backend request to be aborted")
                self.assertFalse(rec.complete)


if __name__ == "__main__":
    unittest.main()
