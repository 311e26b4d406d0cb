"""Slow and stalled clients are not load (issue 35, docs/resilience.md "What the controls
count"): once a response is read to its end from the backend, the front in-flight cap, the
adaptive ceiling, the route and global caps and the pool slot stop counting the exchange, even
while the client is still reading it; a client that takes no byte of a response for
`server.send_timeout` is closed; and a client's next request never finds the slot of its
previous one still held."""

import socket
import threading
import time
import unittest

from backend import Backend, big_body
from harness import Conn, FloodgateTestCase, build_request, poll, upstream

# Far more than the buffers between the backend and a client that reads nothing (floodgate's
# own and the sockets' on both sides), so that the backend is still sending when the client
# stops reading.
LARGE = 32 * 1024 * 1024


class SlowClientTestCase(FloodgateTestCase):
    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels) or 0

    def stalled_reader(self, target, host="test.local"):
        """A connection that sends a GET for `target` and reads nothing (its receive buffer
        small, so that the response waits in floodgate)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", self.fg.port))
        s.sendall(build_request("GET", target, host=host))
        return s


class SlowReaders(SlowClientTestCase):
    """HAProxy's defaults serve every other client while 300 readers crawl through large
    responses (it caps connections, not requests); before this fix floodgate answered them
    429 inflight_cap while it and the backend sat idle."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a]),
             upstream("pooled", [cls.a],
                      resilience={"max_active_requests": 1, "max_pending_requests": 0})],
            routes=[{"host": "pooled.test", "path_prefix": "/", "upstream": "pooled"},
                    {"host": "*", "path_prefix": "/", "upstream": "a"}],
            resilience={"inflight": {"max_inflight": 4},
                        "route_queue": {"default_cap": 4, "global_cap": 4}})

    def test_readers_that_stop_reading_hold_no_slot_of_the_caps(self):
        readers = []
        try:
            for i in range(12):  # three times every cap
                readers.append(self.stalled_reader("/big?bytes=%d&r=%d" % (LARGE, i)))
                self.a.wait_for_target("/big?bytes=%d&r=%d" % (LARGE, i))
                # The client sets the pace: the front cap, the adaptive ceiling and the route
                # and global caps stop counting it.
                poll(lambda: self.metric("floodgate_inflight_requests") == 0,
                     what="reader %d's slot given back" % i)
            for i in range(10):
                r = self.fg.get("/echo?honest=%d" % i)
                self.assertEqual(r.status, 200, r)
            # A reader still gets its response, at its own pace.
            s = readers[0]
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(4096)
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:80])
        finally:
            for s in readers:
                s.close()
        for reason in ("inflight_cap", "route_cap", "global_cap", "adaptive_limit"):
            self.assertEqual(self.metric("floodgate_responses_generated_total", reason=reason),
                             0, reason)

    def test_a_reader_keeps_its_pool_slot_while_the_backend_is_still_sending(self):
        # The pool's slot is the backend's connection: it is given back once the backend's part
        # is over (the whole response in floodgate), not while the backend still sends.
        s = self.stalled_reader("/big?bytes=%d&pooled=1" % LARGE, host="pooled.test")
        try:
            self.a.wait_for_target("/big?bytes=%d&pooled=1" % LARGE)
            poll(lambda: self.metric("floodgate_inflight_requests") == 0, what="client-paced")
            self.assertEqual(self.metric("floodgate_pool_active", upstream="pooled"), 1)
            r = self.fg.request("GET", "/echo", host="pooled.test")
            self.assertGenerated(r, 503, "proxy_overloaded")
        finally:
            s.close()
        poll(lambda: self.metric("floodgate_pool_active", upstream="pooled") == 0,
             what="the slot back once the reader is gone")
        self.assertEqual(self.fg.request("GET", "/echo", host="pooled.test").status, 200)


class SendTimeout(SlowClientTestCase):
    """nginx's send_timeout (60 s by default): a client that takes nothing of a response for
    that long is closed. HAProxy's `timeout client` does the same."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], server={"send_timeout": "1s"})

    def test_a_client_that_reads_nothing_is_closed_after_send_timeout(self):
        size = 16 * 1024 * 1024  # far more than the buffers between floodgate and the client
        before = self.metric("floodgate_client_send_timeouts_total")
        s = self.stalled_reader("/big?bytes=%d&stalled=1" % size)
        try:
            poll(lambda: self.metric("floodgate_client_send_timeouts_total") == before + 1,
                 timeout=15, what="the stalled reader closed")
            got = 0
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                got += len(chunk)
            self.assertLess(got, size)  # cut short: never presented as whole
        finally:
            s.close()
        entry = poll(lambda: [e for e in self.fg.access_log_entries()
                              if "stalled=1" in e.get("target", "")],
                     what="the access log record")[0]
        self.assertEqual(entry["status"], 200, entry)

    def test_a_client_reading_slowly_but_steadily_is_not_cut(self):
        size = 4 * 1024 * 1024
        before = self.metric("floodgate_client_send_timeouts_total")
        with Conn(self.fg.port) as c:
            c.send(build_request("GET", "/big?bytes=%d&steady=1" % size, host="test.local"))
            r = c.read_head()
            self.assertEqual(r.status, 200, r)
            # Three times send_timeout in all, a small read every 0.05 s: always progressing.
            body = bytearray(c.buf)
            c.buf.clear()
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                body += c.sock.recv(16384)
                time.sleep(0.05)
            while len(body) < size:
                chunk = c.sock.recv(65536)
                self.assertTrue(chunk, "closed after %d of %d bytes" % (len(body), size))
                body += chunk
            self.assertEqual(bytes(body), big_body(size))
        self.assertEqual(self.metric("floodgate_client_send_timeouts_total"), before)


class NextRequestFindsTheSlotFree(SlowClientTestCase):
    """With two reactors and a pool at a cap of one, a client that sends its next request (on a
    new connection, which may land on the other reactor) as soon as it has read an answer was
    sometimes refused 503 proxy_overloaded: the previous request's slot was given back only once
    floodgate saw its write complete, after the client already had the bytes."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        one = {"max_active_requests": 1, "max_pending_requests": 0}
        cls.fg = cls.start_floodgate(
            [upstream("ok", [cls.a], resilience=one),
             upstream("refused", ["127.0.0.1:%d" % cls.closed_port()], resilience=one)],
            routes=[{"host": "ok.test", "path_prefix": "/", "upstream": "ok"},
                    {"host": "refused.test", "path_prefix": "/", "upstream": "refused"}],
            workers=2, resilience={"circuit_breaker": {"enabled": False}})

    @staticmethod
    def closed_port():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there: connections are refused
        return port

    def one_after_another(self, host, expected, n=150):
        statuses = {}
        for i in range(n):
            with Conn(self.fg.port) as c:
                c.send(build_request("GET", "/echo?i=%d" % i, host=host))
                r = c.read_response()
                key = (r.status, r.header("x-floodgate-reason") or "")
                statuses[key] = statuses.get(key, 0) + 1
        self.assertEqual(statuses, {expected: n})

    def test_after_a_relayed_answer(self):
        self.one_after_another("ok.test", (200, ""))

    def test_after_a_generated_answer(self):
        self.one_after_another("refused.test", (502, "upstream_connect_failed"))


if __name__ == "__main__":
    unittest.main()
