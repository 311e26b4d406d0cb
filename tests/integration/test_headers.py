"""Header rewriting end to end: hop-by-hop removal in both directions, X-Forwarded-*, Via,
X-Request-Id, and the request-target reaching the backend exactly as sent."""

import unittest

from backend import Backend
from harness import FloodgateTestCase, upstream

HOP_BY_HOP = ("keep-alive", "proxy-connection", "te", "trailer", "upgrade")


class Headers(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])])

    def forward(self, target, headers=(), host="test.local", **kw):
        """Sends one request and returns what the backend received."""
        r = self.fg.request(kw.pop("method", "GET"), target, headers=list(headers), host=host, **kw)
        self.assertEqual(r.status, 200, r)
        return self.backend.wait_for_target(target)

    # --- hop-by-hop -------------------------------------------------------------------------
    def test_hop_by_hop_request_headers_are_removed(self):
        rec = self.forward("/echo?hop", [
            ("Connection", "keep-alive, X-Hop-A"), ("Connection", "x-hop-b"),
            ("X-Hop-A", "1"), ("X-Hop-B", "2"), ("Keep-Alive", "timeout=5"),
            ("Proxy-Connection", "keep-alive"), ("TE", "trailers"), ("Trailer", "X-Foo"),
            ("Upgrade", "h2c"), ("X-End-To-End", "kept")])
        for name in HOP_BY_HOP + ("x-hop-a", "x-hop-b"):
            self.assertFalse(rec.has_header(name), "%s reached the backend: %r" % (name, rec.headers))
        connection = " ".join(rec.header_values("connection")).lower()
        self.assertNotIn("x-hop", connection)
        self.assertEqual(rec.header_values("x-end-to-end"), ["kept"])

    def test_headers_named_by_connection_close_are_removed(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/echo?hop-close", headers=[
                ("Connection", "close, X-Hop-C"), ("X-Hop-C", "3")])
            self.assertEqual(r.status, 200, r)
            c.wait_closed()
        rec = self.backend.wait_for_target("/echo?hop-close")
        self.assertFalse(rec.has_header("x-hop-c"), rec.headers)

    def test_hop_by_hop_response_headers_are_removed(self):
        r = self.fg.get("/hop-response")
        self.assertEqual(r.status, 200, r)
        for name in HOP_BY_HOP + ("x-resp-hop",):
            self.assertFalse(r.has_header(name), "%s reached the client: %r" % (name, r.headers))
        self.assertLessEqual(r.connection_tokens(), {"keep-alive", "close"}, r)
        self.assertEqual(r.header_values("x-resp-keep"), ["kept"])
        self.assertEqual(r.body, b"hop")

    def test_end_to_end_headers_keep_their_order_and_repetitions(self):
        rec = self.forward("/echo?multi", [("X-Multi", "a"), ("Cookie", "c=1"), ("X-Multi", "b")])
        self.assertEqual(rec.header_values("x-multi"), ["a", "b"])
        self.assertEqual(rec.header_values("cookie"), ["c=1"])

    # --- forwarding headers -----------------------------------------------------------------
    def test_x_forwarded_for_is_the_client_address_when_absent(self):
        rec = self.forward("/echo?xff-absent")
        self.assertEqual(rec.header_values("x-forwarded-for"), ["127.0.0.1"])

    def test_x_forwarded_for_appends_client_address_to_all_existing_values(self):
        rec = self.forward("/echo?xff-append", [
            ("X-Forwarded-For", "1.2.3.4"), ("X-Forwarded-For", "5.6.7.8, 9.9.9.9")])
        self.assertEqual(rec.header_values("x-forwarded-for"),
                         ["1.2.3.4, 5.6.7.8, 9.9.9.9, 127.0.0.1"])

    def test_x_forwarded_proto_is_http_replacing_the_client_value(self):
        rec = self.forward("/echo?xfp", [("X-Forwarded-Proto", "https")])
        self.assertEqual(rec.header_values("x-forwarded-proto"), ["http"])

    def test_x_forwarded_host_is_the_client_host_replacing_the_client_value(self):
        rec = self.forward("/echo?xfh", [("X-Forwarded-Host", "evil.example")],
                           host="Shop.Example.com:8443")
        self.assertEqual(rec.header_values("x-forwarded-host"), ["Shop.Example.com:8443"])

    def test_host_header_is_forwarded_unchanged(self):
        rec = self.forward("/echo?host", host="Shop.Example.com:8443")
        self.assertEqual(rec.header_values("host"), ["Shop.Example.com:8443"])

    def test_via_is_set_when_absent(self):
        rec = self.forward("/echo?via-absent")
        self.assertEqual(rec.header_values("via"), ["1.1 floodgate"])

    def test_via_is_appended_to_an_existing_value(self):
        rec = self.forward("/echo?via-append", [("Via", "1.0 fred")])
        self.assertEqual(rec.header_values("via"), ["1.0 fred, 1.1 floodgate"])

    def test_request_id_is_generated_unique_per_request_when_absent(self):
        first = self.forward("/echo?rid-1").header_values("x-request-id")
        second = self.forward("/echo?rid-2").header_values("x-request-id")
        self.assertEqual(len(first), 1, first)
        self.assertEqual(len(second), 1, second)
        self.assertTrue(first[0] and second[0])
        self.assertNotEqual(first, second)

    def test_request_id_is_passed_through_when_present(self):
        rec = self.forward("/echo?rid-given", [("X-Request-Id", "client-chosen-123")])
        self.assertEqual(rec.header_values("x-request-id"), ["client-chosen-123"])

    # --- request-target ---------------------------------------------------------------------
    def test_request_target_reaches_backend_exactly_as_sent(self):
        target = "/echo/./a/../b//c%2Fd%7e?q=%20x&y=1&&z=/../"
        rec = self.forward(target)
        self.assertEqual(rec.target, target)

    def test_absolute_form_target_becomes_origin_form_with_host_set_to_authority(self):
        with self.fg.conn() as c:
            c.send(b"GET http://Absolute.example:8080/echo/abs?q=1 HTTP/1.1\r\n"
                   b"Host: Absolute.example:8080\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
        rec = self.backend.wait_for_target("/echo/abs?q=1")
        self.assertEqual(rec.header_values("host"), ["Absolute.example:8080"])

    def test_absolute_form_authority_differing_from_host_is_refused_by_default(self):
        # resilience.protocol.enforce_authority_host_match (test_front_stages.py has the
        # authority replacing Host when it is off).
        before = self.backend.request_count
        with self.fg.conn() as c:
            c.send(b"GET http://authority.example/echo/abs-host HTTP/1.1\r\n"
                   b"Host: other.example\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 400, r)
            self.assertEqual(r.header("x-floodgate-reason"), "authority_mismatch")
        self.assertEqual(self.backend.request_count, before)

    def test_absolute_form_without_path_becomes_slash(self):
        before = self.backend.request_count
        with self.fg.conn() as c:
            c.send(b"GET http://nopath.example HTTP/1.1\r\nHost: nopath.example\r\n\r\n")
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
        rec = self.backend.wait_for_requests(before + 1)[before]
        self.assertEqual(rec.target, "/")
        self.assertEqual(rec.header_values("host"), ["nopath.example"])


if __name__ == "__main__":
    unittest.main()
