"""Message forwarding end to end: keep-alive on both sides, HTTP/1.0 clients, pipelining,
request and response bodies in every framing (streamed, not buffered), HEAD/204/304 without a
body, Expect: 100-continue, trailers."""

import os
import unittest

from backend import (Backend, CHUNKED_BODY, CLOSE_DELIMITED_BODY, HEAD_TEST_LENGTH, big_body)
from harness import (BodyReader, FloodgateTestCase, build_request, chunked, poll, upstream)


class Forwarding(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])])

    # --- keep-alive -------------------------------------------------------------------------
    def test_client_connection_is_kept_alive_across_requests(self):
        with self.fg.conn() as c:
            for i in range(3):
                r = c.request("GET", "/echo?keepalive=%d" % i)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json()["target"], "/echo?keepalive=%d" % i)
                self.assertNotIn("close", r.connection_tokens(), r)

    def test_backend_connections_are_reused_across_requests(self):
        self.fg.get("/echo?warm=1")
        before = self.backend.connections_accepted
        for i in range(6):
            r = self.fg.get("/echo?reuse=%d" % i)  # a new client connection each time
            self.assertEqual(r.status, 200, r)
        opened = self.backend.connections_accepted - before
        self.assertLessEqual(opened, 1, "6 requests opened %d backend connections" % opened)

    def test_backend_connection_the_backend_closes_is_not_reused(self):
        with self.fg.conn() as c:
            closed_before = self.backend.connections_closed
            r = c.request("GET", "/close-after-response")
            self.assertEqual((r.status, r.body), (200, b"bye"), r)
            self.backend.wait_for(lambda b: b.connections_closed > closed_before,
                                  what="the backend to close its connection")
        r = self.fg.get("/echo?after-backend-close")
        self.assertEqual(r.status, 200, r)

    # --- HTTP/1.0 clients -------------------------------------------------------------------
    def test_http10_client_gets_response_and_connection_closed(self):
        with self.fg.conn() as c:
            c.send(b"GET /echo?v=10 HTTP/1.0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["target"], "/echo?v=10")
            self.assertTrue(r.complete, r)
            c.wait_closed()

    def test_http10_client_gets_chunked_backend_body_without_chunked_framing(self):
        with self.fg.conn() as c:
            c.send(b"GET /chunked HTTP/1.0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertNotEqual(r.framing, "chunked", r)
            self.assertTrue(r.complete, r)
            self.assertEqual(r.body, CHUNKED_BODY)
            c.wait_closed()

    def test_http10_client_gets_close_delimited_backend_body_close_delimited(self):
        with self.fg.conn() as c:
            c.send(b"GET /close-delimited HTTP/1.0\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.framing, "close", r)
            self.assertEqual(r.body, CLOSE_DELIMITED_BODY)
            self.assertTrue(r.complete, r)

    # --- pipelining -------------------------------------------------------------------------
    def test_pipelined_requests_are_answered_in_order(self):
        with self.fg.conn() as c:
            c.send(build_request("GET", "/slow-head?ms=300&n=1")
                   + build_request("POST", "/echo?n=2", body=b"second")
                   + build_request("GET", "/slow-head?ms=10&n=3")
                   + build_request("GET", "/echo?n=4"))
            r1, r2, r3, r4 = (c.read_response() for _ in range(4))
            self.assertEqual((r1.status, r1.body), (200, b"/slow-head?ms=300&n=1"), r1)
            self.assertEqual(r2.json()["target"], "/echo?n=2")
            self.assertEqual(r2.json()["body"], "second")
            self.assertEqual((r3.status, r3.body), (200, b"/slow-head?ms=10&n=3"), r3)
            self.assertEqual(r4.json()["target"], "/echo?n=4")

    # --- request bodies ---------------------------------------------------------------------
    def test_content_length_request_body_reaches_backend_intact(self):
        body = os.urandom(300_000)
        r = self.fg.request("POST", "/echo?cl-body", body=body)
        self.assertEqual(r.status, 200, r)
        rec = self.backend.wait_for_target("/echo?cl-body")
        self.assertTrue(rec.complete)
        self.assertEqual(bytes(rec.body), body)
        self.assertEqual(rec.header_values("content-length"), [str(len(body))])

    def test_chunked_request_body_reaches_backend_intact_reframed_without_trailers(self):
        parts = [b"a" * 10, os.urandom(70_000), b"z"]
        raw = b"".join(b"%x;client-ext=1\r\n%s\r\n" % (len(p), p) for p in parts)
        raw += b"0\r\nX-Client-Trailer: secret\r\n\r\n"
        r = self.fg.request("POST", "/echo?chunked-body", body=raw,
                            headers=[("Transfer-Encoding", "chunked")])
        self.assertEqual(r.status, 200, r)
        rec = self.backend.wait_for_target("/echo?chunked-body")
        self.assertEqual(bytes(rec.body), b"".join(parts))
        self.assertEqual(rec.trailers, [], "request trailers must be dropped")
        self.assertFalse(rec.has_header("x-client-trailer"))
        self.assertNotIn(b"client-ext", rec.raw_head)
        self.assertIn(rec.header_values("transfer-encoding"), ([], ["chunked"]))

    def test_request_body_is_streamed_to_backend_before_client_finished_sending(self):
        half = b"q" * 100_000
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?streamed-request", body=half,
                                 headers=[("Content-Length", str(2 * len(half)))]))
            rec = self.backend.wait_for_target("/echo?streamed-request")
            self.backend.wait_for(lambda b: len(rec.body) > 0,
                                  what="the first body bytes before the client sent the rest")
            self.assertFalse(rec.complete)
            c.send(half)
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
        self.assertEqual(bytes(rec.body), half + half)

    # --- response bodies --------------------------------------------------------------------
    def test_content_length_response_body_reaches_client_intact(self):
        n = 5 * 1024 * 1024 + 7
        r = self.fg.get("/big?bytes=%d" % n)
        self.assertEqual(r.status, 200)
        self.assertTrue(r.complete, r)
        self.assertEqual(len(r.body), n)
        self.assertTrue(r.body == big_body(n), "large body corrupted")

    def test_chunked_response_reaches_http11_client_chunked_without_trailers(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/chunked")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.framing, "chunked", r)
            self.assertTrue(r.complete, r)
            self.assertEqual(r.body, CHUNKED_BODY)
            self.assertEqual(r.trailers, [], "response trailers must be dropped")
            self.assertFalse(r.has_header("x-backend-trailer"), r)
            self.assertFalse(r.has_header("trailer"), r)
            self.assertEqual(c.request("GET", "/echo?after-chunked").status, 200)

    def test_close_delimited_response_reaches_http11_client_chunked_on_kept_connection(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/close-delimited")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.framing, "chunked", r)
            self.assertTrue(r.complete, r)
            self.assertEqual(r.body, CLOSE_DELIMITED_BODY)
            self.assertEqual(c.request("GET", "/echo?after-close-delimited").status, 200)

    def test_response_body_is_streamed_to_client_before_backend_finished_sending(self):
        with self.fg.conn() as c:
            c.send(build_request("GET", "/hold-body?key=stream-1&size=50000"))
            r = c.read_head()
            self.assertEqual(r.status, 200, r)
            body = BodyReader(c, r)
            self.assertEqual(body.read(50_000), b"a" * 50_000)
            self.backend.release("stream-1")
            self.assertEqual(body.read(50_000), b"b" * 50_000)

    # --- responses without a body -----------------------------------------------------------
    def test_head_response_has_no_body(self):
        with self.fg.conn() as c:
            c.send(build_request("HEAD", "/head-test") + build_request("GET", "/echo?after-head"))
            r = c.read_response("HEAD")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("content-length"), str(HEAD_TEST_LENGTH), r)
            after = c.read_response()
            self.assertEqual(after.status, 200, after)
            self.assertEqual(after.json()["target"], "/echo?after-head")

    def test_204_response_has_no_body(self):
        self._assert_bodiless_status(204)

    def test_304_response_has_no_body_even_with_content_length(self):
        r = self._assert_bodiless_status(304)
        self.assertEqual(r.header("etag"), '"v1"')

    def _assert_bodiless_status(self, status):
        with self.fg.conn() as c:
            c.send(build_request("GET", "/status/%d" % status) + build_request("GET", "/echo?after"))
            r = c.read_response()
            self.assertEqual(r.status, status, r)
            self.assertFalse(r.has_header("transfer-encoding"), r)
            after = c.read_response()
            self.assertEqual(after.status, 200, "bytes after the %d: %r" % (status, after))
            self.assertEqual(after.json()["target"], "/echo?after")
            return r

    # --- Expect: 100-continue ---------------------------------------------------------------
    def test_expect_100_continue_is_answered_by_floodgate_and_not_forwarded(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?expect", headers=[
                ("Expect", "100-continue"), ("Content-Length", "11")]))
            interim = c.read_response()
            self.assertEqual(interim.status, 100, interim)
            c.send(b"hello world")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
        rec = self.backend.wait_for_target("/echo?expect")
        self.assertEqual(bytes(rec.body), b"hello world")
        self.assertFalse(rec.has_header("expect"), rec.headers)

    def test_expect_100_continue_with_chunked_body(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?expect-chunked", headers=[
                ("Expect", "100-continue"), ("Transfer-Encoding", "chunked")]))
            self.assertEqual(c.read_response().status, 100)
            c.send(chunked(b"abc", b"defgh"))
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body"], "abcdefgh")

    def test_client_sending_body_without_waiting_for_100_is_served(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?no-wait", body=b"eager",
                                 headers=[("Expect", "100-continue")]))
            r = c.read_final_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body"], "eager")
            self.assertEqual(c.request("GET", "/echo?after-expect").status, 200)


if __name__ == "__main__":
    unittest.main()


class RequestsPerConnection(FloodgateTestCase):
    """server.max_requests_per_connection: the last request a connection may carry is answered
    with Connection: close, whoever answers it, and the connection ends."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     server={"max_requests_per_connection": 3})

    def test_the_last_request_a_connection_may_carry_closes_it(self):
        with self.fg.conn() as c:
            for i in range(2):
                r = c.request("GET", "/echo?n=%d" % i)
                self.assertEqual(r.status, 200, r)
                self.assertNotIn("close", r.connection_tokens(), r)
            r = c.request("GET", "/echo?n=2")
            self.assertEqual(r.status, 200, r)
            self.assertIn("close", r.connection_tokens(), r)
            c.wait_closed()

    def test_floodgates_own_answer_to_the_last_request_closes_it_too(self):
        with self.fg.conn() as c:
            for i in range(2):
                self.assertEqual(c.request("GET", "/echo?own=%d" % i).status, 200)
            r = c.request("OPTIONS", "*")
            self.assertEqual(r.status, 200, r)
            self.assertIn("close", r.connection_tokens(), r)
            c.wait_closed()
