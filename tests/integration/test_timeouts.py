"""Client-side timeouts end to end: header_timeout runs from the first byte of a head (408 and
close, however slowly the bytes trickle in), a connection that never sends a byte is closed
silently, and idle_timeout (not header_timeout) applies between keep-alive requests."""

import time
import unittest

from backend import Backend
from harness import FloodgateTestCase, build_request, upstream

HEADER_TIMEOUT = 1.0
IDLE_TIMEOUT = 2.5
SLACK = 0.15      # timers may fire a little early on a coarse wheel
UPPER = 8.0       # generous upper bound for ASan builds


class Timeouts(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])], server={
            "header_timeout": "%dms" % (HEADER_TIMEOUT * 1000),
            "idle_timeout": "%dms" % (IDLE_TIMEOUT * 1000)})

    def test_incomplete_head_gets_408_after_header_timeout_and_close(self):
        before = self.backend.request_count
        with self.fg.conn() as c:
            c.send(b"GET /echo HTTP/1.1\r\nHost: a\r\n")
            start = time.monotonic()
            r = c.read_response(timeout=UPPER)
            elapsed = time.monotonic() - start
            self.assertGenerated(r, 408, "header_timeout")
            c.wait_closed()
        self.assertGreaterEqual(elapsed, HEADER_TIMEOUT - SLACK)
        self.assertEqual(self.backend.request_count, before)

    def test_trickled_head_does_not_extend_header_timeout(self):
        with self.fg.conn() as c:
            c.send(b"GET /echo HTTP/1.1\r\nHost: a\r\nX-Slow: ")
            start = time.monotonic()
            # One byte every 100 ms: a per-read timer would never fire.
            while c.is_open_after(0.1):
                self.assertLess(time.monotonic() - start, UPPER, "no 408 while trickling")
                c.send(b"s")
            elapsed = time.monotonic() - start
            r = c.read_response()
            self.assertGenerated(r, 408, "header_timeout")
        self.assertGreaterEqual(elapsed, HEADER_TIMEOUT - SLACK)
        self.assertLess(elapsed, HEADER_TIMEOUT + 3.0)

    def test_connection_that_never_sends_a_byte_is_closed_silently_after_header_timeout(self):
        with self.fg.conn() as c:
            start = time.monotonic()
            received = c.wait_closed(timeout=UPPER)
            elapsed = time.monotonic() - start
        self.assertEqual(received, b"", "expected a silent close")
        self.assertGreaterEqual(elapsed, HEADER_TIMEOUT - SLACK)

    def test_idle_timeout_not_header_timeout_applies_between_keep_alive_requests(self):
        with self.fg.conn() as c:
            self.assertEqual(c.request("GET", "/echo?idle-1").status, 200)
            # Longer than header_timeout, shorter than idle_timeout: still open.
            self.assertTrue(c.is_open_after(HEADER_TIMEOUT + 0.5), "closed before idle_timeout")
            self.assertEqual(c.request("GET", "/echo?idle-2").status, 200)
            start = time.monotonic()
            received = c.wait_closed(timeout=UPPER)
            elapsed = time.monotonic() - start
        self.assertEqual(received, b"", "expected a silent close of the idle connection")
        self.assertGreaterEqual(elapsed, IDLE_TIMEOUT - SLACK)

    def test_header_timeout_applies_to_the_second_request_on_a_connection(self):
        with self.fg.conn() as c:
            self.assertEqual(c.request("GET", "/echo?first").status, 200)
            c.send(b"GET /echo?second HTTP/1.1\r\n")
            start = time.monotonic()
            r = c.read_response(timeout=UPPER)
            elapsed = time.monotonic() - start
            self.assertGenerated(r, 408, "header_timeout")
            c.wait_closed()
        self.assertGreaterEqual(elapsed, HEADER_TIMEOUT - SLACK)
        self.assertLess(elapsed, IDLE_TIMEOUT)

    def test_slow_body_is_not_cut_by_header_timeout(self):
        with self.fg.conn() as c:
            c.send(build_request("POST", "/echo?slow-body", headers=[("Content-Length", "4")]))
            self.assertTrue(c.is_open_after(HEADER_TIMEOUT + 0.3), "answered before the body came")
            c.send(b"body")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body"], "body")


if __name__ == "__main__":
    unittest.main()
