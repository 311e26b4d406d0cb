"""Fault injection end to end, beyond test_upstream_faults.py (which covers refused, reset and
closed connects, malformed heads, slow heads and a FIN mid-body):

- a backend that resets (RST) in the middle of the head or of the body;
- a backend that half-closes (shutdown(SHUT_WR)) after part of a response, and keeps reading;
- a backend that stalls after the head: the client has the head, response_timeout cuts the
  body, the client connection closes and floodgate_upstream_timeouts_total moves;
- an accept storm (a few thousand connects in a burst), after which requests succeed;
- a client that never reads a large response: floodgate's memory stays bounded and the
  connection is closed after send_timeout;
- buffer pool exhaustion: with server.max_buffers_per_reactor tiny, held requests use up the
  buffers, the next request gets 503 buffers_exhausted (counted), and service recovers once
  they finish.
"""

import os
import resource
import socket
import struct
import threading
import time
import unittest

from backend import Backend, RawServer
from harness import NO_BREAKER, FloodgateTestCase, poll, route, upstream

RESPONSE_TIMEOUT = 0.5
IDLE_TIMEOUT = 1.0
DECLARED = 100000
SENT = 1000


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


class FaultBackend(RawServer):
    """A raw backend that misbehaves on purpose, chosen by the request's path."""

    def __init__(self):
        self.release = threading.Event()
        super().__init__()

    def stop(self):
        self.release.set()
        super().stop()

    def serve(self, sock, _state):
        sock.settimeout(30)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                head += chunk
            path = head.split(b" ", 2)[1].decode()
            getattr(self, "_" + path.strip("/").replace("-", "_"))(sock)
        except OSError:
            pass
        finally:
            sock.close()

    @staticmethod
    def _reset(sock):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def _rst_mid_head(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/pl")
        time.sleep(0.05)  # pacing: let the partial head leave before the RST
        self._reset(sock)

    def _rst_mid_body(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % DECLARED + b"x" * SENT)
        time.sleep(0.05)
        self._reset(sock)

    def _half_close_mid_body(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % DECLARED + b"x" * SENT)
        sock.shutdown(socket.SHUT_WR)
        self._drain(sock)

    def _half_close_delimited(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"y" * SENT)
        sock.shutdown(socket.SHUT_WR)
        self._drain(sock)

    def _stall_after_head(self, sock):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % DECLARED + b"z" * SENT)
        self.release.wait(30)

    @staticmethod
    def _drain(sock):
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass


def read_all(sock, deadline):
    """Everything until EOF (or a reset); AssertionError at the deadline."""
    out = bytearray()
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            raise AssertionError("connection still open after %d bytes" % len(out))
        except ConnectionResetError:
            return bytes(out), True
        if not chunk:
            return bytes(out), False
        out += chunk


class BackendFaults(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = FaultBackend()
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend.address],
                                               response_timeout="%dms" % (RESPONSE_TIMEOUT * 1000))],
                                     resilience=NO_BREAKER)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.backend.stop()

    def test_reset_in_the_middle_of_the_head_is_502_upstream_reset(self):
        r = self.fg.get("/rst-mid-head")
        self.assertGenerated(r, 502, "upstream_reset", closes=False)

    def test_reset_in_the_middle_of_the_body_closes_the_client_connection_with_a_short_body(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/rst-mid-body")
            self.assertEqual(r.status, 200, r)
            self.assertFalse(r.complete, r)
            self.assertLess(len(r.body), DECLARED)
            self.assertTrue(c.eof)

    def test_half_close_in_the_middle_of_a_length_body_is_truncation_not_success(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/half-close-mid-body")
            self.assertEqual(r.status, 200, r)
            self.assertFalse(r.complete, r)
            self.assertLessEqual(len(r.body), SENT)
            self.assertTrue(c.eof)

    def test_half_close_ends_a_close_delimited_body_as_complete(self):
        r = self.fg.get("/half-close-delimited")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.complete, r)
        self.assertEqual(r.body, b"y" * SENT)

    def test_backend_stalling_after_the_head_is_cut_by_the_response_timeout_and_counted(self):
        before = self.fg.metrics().value("floodgate_upstream_timeouts_total", upstream="app")
        s = socket.create_connection(("127.0.0.1", self.fg.port), timeout=5)
        s.sendall(b"GET /stall-after-head HTTP/1.1\r\nHost: a\r\n\r\n")
        start = time.monotonic()
        data, _ = read_all(s, start + 10)
        elapsed = time.monotonic() - start
        s.close()
        self.assertTrue(data.startswith(b"HTTP/1.1 200 OK\r\n"), data[:200])
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertIn(b"Content-Length: %d" % DECLARED, head)
        self.assertEqual(body, b"z" * SENT)  # short: the timeout closed the connection
        self.assertGreaterEqual(elapsed, RESPONSE_TIMEOUT - 0.1)
        poll(lambda: self.fg.metrics().value("floodgate_upstream_timeouts_total", upstream="app")
             >= before + 1, what="floodgate_upstream_timeouts_total{upstream=app} to move")


class ClientFaults(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("big").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     server={"idle_timeout": "%dms" % (IDLE_TIMEOUT * 1000),
                                             "send_timeout": "%dms" % (IDLE_TIMEOUT * 1000)})

    def test_an_accept_storm_leaves_floodgate_serving(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, 8192)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        storm = min(3000, want - 200)
        socks = []
        try:
            for _ in range(storm):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", self.fg.port))
                socks.append(s)
            # Half of them send a request floodgate answers itself (no Host: 400), so the storm
            # loads floodgate's accept and parse paths, not the test backend's listen queue;
            # every connection then goes away at once.
            for s in socks[::2]:
                try:
                    s.send(b"GET /echo HTTP/1.1\r\n\r\n")
                except OSError:
                    pass
        finally:
            for s in socks:
                s.close()
        for i in range(20):
            self.assertEqual(self.fg.get("/echo?after-storm=%d" % i).status, 200)
        self.assertIsNone(self.fg.proc.poll())

    def client_connections(self):
        return self.fg.metrics().value("floodgate_client_connections")

    def test_a_client_that_never_reads_is_bounded_and_closed_after_send_timeout(self):
        pid = self.fg.proc.pid
        before = rss_kib(pid)
        # Start from no client connection: one still closing (the start-up readiness probe, an
        # earlier test's) could close just as this one opens, and the count would never rise.
        poll(lambda: self.client_connections() == 0, what="no client connection open")
        open_before = 0
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.connect(("127.0.0.1", self.fg.port))
        total = 512 * 1024 * 1024
        s.sendall(b"GET /big?bytes=%d HTTP/1.1\r\nHost: a\r\n\r\n" % total)
        peak = before
        poll(lambda: self.client_connections() > open_before, what="the stalled connection open")
        # Until floodgate closes it (send_timeout after the last byte the client took), sampling
        # its RSS meanwhile; the deadline only bounds a floodgate that never closes it.
        deadline = time.monotonic() + IDLE_TIMEOUT + 20
        while self.client_connections() > open_before:
            self.assertLess(time.monotonic(), deadline, "the stalled client was never closed")
            peak = max(peak, rss_kib(pid))
            time.sleep(0.1)
        self.assertLess(peak - before, 32 * 1024, "floodgate grew by %d KiB for one stalled client"
                        % (peak - before))
        data, _ = read_all(s, time.monotonic() + 10)
        s.close()
        self.assertLess(len(data), 64 * 1024 * 1024, "floodgate kept sending to a stalled client")
        self.assertEqual(self.fg.get("/echo").status, 200)


class BufferExhaustion(FloodgateTestCase):
    """max_buffers_per_reactor = 4 on one reactor: a held request keeps two request buffers
    (the client's head and the head sent to the backend), so two held requests use them all."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("hold").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     server={"max_buffers_per_reactor": 4})

    def test_exhausted_buffers_give_503_buffers_exhausted_then_service_recovers(self):
        before = self.fg.metrics().value("floodgate_responses_generated_total",
                                         reason="buffers_exhausted")
        held = [self.fg.conn() for _ in range(2)]
        try:
            for i, c in enumerate(held):
                c.request("GET", "/hold?key=k%d" % i, read=False)
            self.backend.wait_for_requests(2)
            r = self.fg.get("/echo?while-held")
            self.assertGenerated(r, 503, "buffers_exhausted", closes=True)
            poll(lambda: self.fg.metrics().value("floodgate_responses_generated_total",
                                                 reason="buffers_exhausted") >= before + 1,
                 what="floodgate_responses_generated_total{reason=buffers_exhausted} to move")
            for i in range(2):
                self.backend.release("k%d" % i)
            for c in held:
                self.assertEqual(c.read_final_response().status, 200)
        finally:
            for c in held:
                c.close()
        poll(lambda: self.fg.get("/echo?after").status == 200, what="service to recover")
        self.assertIsNone(self.fg.proc.poll())


if __name__ == "__main__":
    unittest.main()
