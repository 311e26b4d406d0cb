"""Backend faults end to end: each fault gets the right generated status and
X-Floodgate-Reason, a body cut short by the backend is never presented as complete, a request
never hangs, and the fault counters move."""

import socket
import time
import unittest

from backend import Backend, MID_BODY_DECLARED
from harness import (NO_BREAKER, BadResponse, FloodgateTestCase, build_request, free_port, poll,
                     route, upstream)

RESPONSE_TIMEOUT = 0.5
CONNECT_TIMEOUT = 0.3


class HangingListener:
    """A loopback listener whose accept queue is full and never drained: the kernel drops new
    SYNs, so connecting to it hangs until the connector's own timeout."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.fillers = []
        self.hangs = self._fill()

    def _fill(self):
        """Connects until a connect times out; True once connecting really hangs."""
        for _ in range(16):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(0.5)
            try:
                s.connect(self.sock.getsockname())
            except socket.timeout:
                s.close()
                return True
            except OSError:
                s.close()
                return False
            self.fillers.append(s)
        return False

    def close(self):
        for s in self.fillers:
            s.close()
        self.sock.close()


class UpstreamFaults(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("faulty").start()
        cls.backends = [cls.backend]
        cls.hanging = HangingListener()
        cls.refused_address = "127.0.0.1:%d" % free_port()
        cls.fg = cls.start_floodgate(
            [upstream("faulty", [cls.backend], response_timeout="%dms" % (RESPONSE_TIMEOUT * 1000)),
             upstream("refused", [cls.refused_address]),
             upstream("hanging", [cls.hanging.address],
                      connect_timeout="%dms" % (CONNECT_TIMEOUT * 1000))],
            routes=[route("faulty", host="faulty.test"), route("refused", host="refused.test"),
                    route("hanging", host="hanging.test")],
            resilience=NO_BREAKER)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.hanging.close()

    def generated(self, host, path, status, reason):
        start = time.monotonic()
        r = self.fg.get(path, host=host)
        elapsed = time.monotonic() - start
        self.assertGenerated(r, status, reason, closes=False)
        return r, elapsed

    def test_refused_connect_is_502_upstream_connect_failed(self):
        self.generated("refused.test", "/x", 502, "upstream_connect_failed")

    def test_reset_before_response_is_502_upstream_reset(self):
        self.generated("faulty.test", "/reset-before-response", 502, "upstream_reset")

    def test_close_before_response_is_502_upstream_reset(self):
        self.generated("faulty.test", "/close-before-response", 502, "upstream_reset")

    def test_malformed_status_line_is_502_upstream_bad_response(self):
        self.generated("faulty.test", "/malformed", 502, "upstream_bad_response")

    def test_malformed_header_line_is_502_upstream_bad_response(self):
        self.generated("faulty.test", "/malformed-header", 502, "upstream_bad_response")

    def test_slow_response_head_is_504_upstream_timeout(self):
        _, elapsed = self.generated("faulty.test", "/slow-head?ms=4000", 504, "upstream_timeout")
        self.assertGreaterEqual(elapsed, RESPONSE_TIMEOUT - 0.1)
        self.assertLess(elapsed, 3.5)

    def test_hanging_connect_is_504_upstream_connect_timeout(self):
        if not self.hanging.hangs:
            self.skipTest("connecting to a full accept queue does not hang on this machine")
        _, elapsed = self.generated("hanging.test", "/x", 504, "upstream_connect_timeout")
        self.assertGreaterEqual(elapsed, CONNECT_TIMEOUT - 0.1)
        self.assertLess(elapsed, 5.0)

    def test_backend_closing_mid_body_closes_client_connection_and_body_stays_short(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/close-mid-body", host="faulty.test")
            self.assertEqual(r.status, 200, r)
            self.assertFalse(r.complete, "a truncated body was presented as complete: %r" % r)
            self.assertLess(len(r.body), MID_BODY_DECLARED)
            self.assertTrue(c.eof, "client connection left open")

    def test_malformed_chunk_after_the_head_closes_client_connection(self):
        with self.fg.conn() as c:
            c.send(build_request("GET", "/bad-chunk", host="faulty.test"))
            try:
                r = c.read_response()
            except BadResponse as e:  # garbage forwarded verbatim would be a proxy bug too
                self.fail("floodgate passed on a malformed chunk: %s" % e)
            if r.status == 502:
                self.assertGenerated(r, 502, "upstream_bad_response", closes=False)
            else:
                self.assertEqual(r.status, 200, r)
                self.assertFalse(r.complete, "a broken body was presented as complete: %r" % r)
                c.wait_closed()

    def test_client_connection_is_usable_after_a_generated_502(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/reset-before-response", host="faulty.test")
            self.assertEqual(r.status, 502, r)
            if "close" in r.connection_tokens():
                c.wait_closed()
                return
            self.assertEqual(c.request("GET", "/echo", host="faulty.test").status, 200)

    def test_fault_counters_move(self):
        m = self.fg.metrics()
        failures = m.value("floodgate_upstream_connect_failures_total", upstream="refused")
        timeouts = m.value("floodgate_upstream_timeouts_total", upstream="faulty")
        resets = m.value("floodgate_responses_generated_total", reason="upstream_reset")
        self.assertEqual(self.fg.get("/x", host="refused.test").status, 502)
        self.assertEqual(self.fg.get("/slow-head?ms=3000", host="faulty.test").status, 504)
        self.assertEqual(self.fg.get("/close-before-response", host="faulty.test").status, 502)
        poll(lambda: self.fg.metrics().value("floodgate_upstream_connect_failures_total",
                                             upstream="refused") >= failures + 1,
             what="floodgate_upstream_connect_failures_total{upstream=refused} to move")
        poll(lambda: self.fg.metrics().value("floodgate_upstream_timeouts_total",
                                             upstream="faulty") >= timeouts + 1,
             what="floodgate_upstream_timeouts_total{upstream=faulty} to move")
        poll(lambda: self.fg.metrics().value("floodgate_responses_generated_total",
                                             reason="upstream_reset") >= resets + 1,
             what="floodgate_responses_generated_total{reason=upstream_reset} to move")


if __name__ == "__main__":
    unittest.main()
