"""Upgrade (WebSocket) end to end: after the backend's 101 the connection is an opaque
bidirectional tunnel until either side closes; a refused upgrade is an ordinary response."""

import base64
import hashlib
import os
import threading
import unittest

from backend import Backend, WS_GUID
from harness import FloodgateTestCase, build_request, upstream

KEY = base64.b64encode(b"0123456789abcdef").decode()
UPGRADE_HEADERS = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                   ("Sec-WebSocket-Key", KEY), ("Sec-WebSocket-Version", "13")]


class Upgrade(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("ws").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])])

    def open_tunnel(self, c, target="/ws"):
        c.send(build_request("GET", target, headers=UPGRADE_HEADERS))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        self.assertEqual((r.header("upgrade") or "").lower(), "websocket", r)
        self.assertIn("upgrade", r.connection_tokens(), r)
        expected = base64.b64encode(hashlib.sha1((KEY + WS_GUID).encode()).digest()).decode()
        self.assertEqual(r.header("sec-websocket-accept"), expected, r)
        return self.backend.wait_for_target(target)

    def test_upgrade_request_reaches_backend_with_upgrade_headers(self):
        with self.fg.conn() as c:
            rec = self.open_tunnel(c, "/ws?headers")
        self.assertEqual([v.lower() for v in rec.header_values("upgrade")], ["websocket"])
        self.assertIn("upgrade", ",".join(rec.header_values("connection")).lower())
        self.assertEqual(rec.header_values("sec-websocket-key"), [KEY])

    def test_tunnel_carries_bytes_both_ways(self):
        with self.fg.conn() as c:
            self.open_tunnel(c, "/ws?small")
            for payload in (b"ping", b"\x00\xff\r\n\r\nGET / HTTP/1.1\r\n\r\n", b"x" * 1000):
                c.send(payload)
                self.assertEqual(c.read_exact(len(payload)), payload)

    def test_tunnel_streams_large_transfers_in_both_directions_at_once(self):
        payload = os.urandom(1024 * 1024)
        with self.fg.conn() as c:
            self.open_tunnel(c, "/ws?large")
            sender = threading.Thread(target=c.send, args=(payload,), daemon=True)
            sender.start()
            echoed = c.read_exact(len(payload), timeout=30)
            sender.join(10)
        self.assertTrue(echoed == payload, "tunnel corrupted the byte stream")

    def test_client_closing_the_tunnel_closes_the_backend_side(self):
        with self.fg.conn() as c:
            rec = self.open_tunnel(c, "/ws?client-closes")
        self.backend.wait_for(lambda b: ("peer-closed", rec.conn_id) in b.ws_events,
                              what="the backend to see the tunnel close")

    def test_backend_closing_the_tunnel_closes_the_client_side(self):
        with self.fg.conn() as c:
            self.open_tunnel(c, "/ws?close_after=5")
            c.send(b"12345")
            self.assertEqual(c.read_exact(5), b"12345")
            self.assertEqual(c.wait_closed(), b"")

    def test_refused_upgrade_is_an_ordinary_response(self):
        with self.fg.conn() as c:
            c.send(build_request("GET", "/echo?refused-upgrade", headers=UPGRADE_HEADERS))
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["target"], "/echo?refused-upgrade")
            if "close" not in r.connection_tokens():
                self.assertEqual(c.request("GET", "/echo?after-refused").status, 200)


if __name__ == "__main__":
    unittest.main()
