"""Connections in their opening cannot starve requests (issue 35, docs/configuration.md
"[server]"): a connection that has not completed its first request head (on a TLS listener:
its ClientHello, its handshake, then the head) holds no slot of any cap; a TLS handshake takes
its front-cap slot only when its ClientHello is complete; opening connections are bounded by
`server.max_opening_connections` (a new one closes the oldest) and given
`server.handshake_timeout` for their handshake (TLS) or first byte (plain).

Before this, a TCP connection to a TLS listener that sent nothing held a front-cap slot from
accept until header_timeout: a handful of them made every request on the other listeners
429 and reset new TLS clients. nginx and HAProxy hold no request slot for a connection that
has sent nothing (nginx closes it after client_header_timeout or ssl_handshake_timeout, 60 s
each; HAProxy after `timeout client`)."""

import socket
import ssl
import time

from backend import Backend
from harness import FloodgateTestCase, TlsConn, build_request, poll, upstream
from tls_certs import TestCA


def client_context(ca):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    return ctx


def closed_by_peer(s, timeout):
    """True when the peer closes `s` (EOF or reset) within `timeout` seconds, having sent
    nothing; False when it is still open then."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


class OpeningTestCase(FloodgateTestCase):
    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels) or 0

    def silent(self, port, first=b""):
        """A connection to `port` that sends `first` (maybe nothing) and then nothing more."""
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if first:
            s.sendall(first)
        return s


class SilentTlsConnections(OpeningTestCase):
    """Silent and half-sent TLS connections hold no slot of the front in-flight cap: requests
    on the plain listener and new TLS clients are served beside them."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cert, key = cls.ca.leaf("open", ["open.test"], kind="ec")
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     resilience={"inflight": {"max_inflight": 4}},
                                     tls=[{"certificate": cert, "private_key": key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def test_silent_and_partial_hello_connections_hold_no_slot(self):
        # A TLS record header announcing a 512-byte handshake message, and a few bytes of it.
        partial_hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
        sockets = []
        try:
            for _ in range(20):  # five times the cap
                sockets.append(self.silent(self.fg.tls_port))
                sockets.append(self.silent(self.fg.tls_port, partial_hello))
            poll(lambda: self.metric("floodgate_client_opening_connections") == 40,
                 what="every silent connection accepted and opening")
            self.assertEqual(self.metric("floodgate_inflight_requests"), 0)
            # The cap's four slots are all free for requests: four held at once on the plain
            # listener, and a new TLS client besides.
            held = []
            for i in range(4):
                c = self.fg.conn()
                c.send(build_request("GET", "/hold?key=open-%d" % i))
                self.backend.wait_for_target("/hold?key=open-%d" % i)
                held.append(c)
            for i in range(4):
                self.backend.release("open-%d" % i)
                self.assertEqual(held[i].read_response().status, 200)
                held[i].close()
            with TlsConn(self.fg.tls_port, client_context(self.ca.cert), "open.test") as c:
                self.assertEqual(c.request("GET", "/echo?tls", host="open.test").status, 200)
            for s in sockets:  # still open: nothing pushed them out
                s.setblocking(False)
                try:
                    self.assertNotEqual(s.recv(1), b"")
                except BlockingIOError:
                    pass
        finally:
            for s in sockets:
                s.close()
        self.assertEqual(self.metric("floodgate_responses_generated_total",
                                     reason="inflight_cap"), 0)
        self.assertEqual(self.metric("floodgate_tls_handshakes_total", result="refused",
                                     version="unknown"), 0)


class OpeningBoundAndDeadline(OpeningTestCase):
    """At `max_opening_connections` a new connection closes the oldest opening one; a
    connection with a complete head is no longer opening and is never closed for room; a
    silent plain connection is closed after handshake_timeout, one that sent a byte gets
    header_timeout and a 408."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     server={"max_opening_connections": 16,
                                             "handshake_timeout": "3s",
                                             "header_timeout": "6s"})

    def test_the_oldest_opening_connection_makes_room_for_a_new_one(self):
        served = self.fg.conn()  # past its opening: a request completed on it
        try:
            self.assertEqual(served.request("GET", "/echo?first").status, 200)
            evicted = self.metric("floodgate_client_opening_evictions_total")
            flood = [self.silent(self.fg.port) for _ in range(40)]
            try:
                poll(lambda: self.metric("floodgate_client_opening_evictions_total")
                     >= evicted + 24, what="24 oldest silent connections closed")
                self.assertLessEqual(self.metric("floodgate_client_opening_connections"), 16)
                # The oldest went first: the first 24 are closed, the last 16 open.
                for s in flood[:24]:
                    self.assertTrue(closed_by_peer(s, 5))
                for s in flood[24:]:
                    s.setblocking(False)
                    with self.assertRaises(BlockingIOError):
                        s.recv(1)
                # A new client is served, and the connection past its opening is untouched.
                self.assertEqual(self.fg.get("/echo?new").status, 200)
                self.assertEqual(served.request("GET", "/echo?again").status, 200)
            finally:
                for s in flood:
                    s.close()
        finally:
            served.close()

    def test_a_silent_connection_is_closed_after_handshake_timeout(self):
        s = self.silent(self.fg.port)
        started = time.monotonic()
        try:
            self.assertTrue(closed_by_peer(s, 10))
            waited = time.monotonic() - started
        finally:
            s.close()
        # Closed by handshake_timeout (3 s), not header_timeout (6 s); no answer was sent.
        self.assertGreaterEqual(waited, 2.5)
        self.assertLess(waited, 5.5)

    def test_a_connection_that_sent_a_byte_gets_header_timeout_and_408(self):
        s = self.silent(self.fg.port, b"G")
        started = time.monotonic()
        try:
            s.settimeout(15)
            got = b""
            while True:
                data = s.recv(4096)
                if not data:
                    break
                got += data
            waited = time.monotonic() - started
        finally:
            s.close()
        self.assertTrue(got.startswith(b"HTTP/1.1 408"), got)
        self.assertGreaterEqual(waited, 5.5)


if __name__ == "__main__":
    import unittest
    unittest.main()
