"""Request semantics an attacker probes, end to end (each compared with HAProxy 2.6 and nginx
1.22): HTTP/1.0 with Transfer-Encoding, userinfo and malformed Host values, client request ids
that are not plain ASCII, route bypasses through unnormalised paths, h2c upgrades, fragments,
OPTIONS *, a 413 followed by a lingering close, and HTTP/1.0 requests without Host."""

import json
import re
import socket
import unittest

from backend import Backend
from harness import FloodgateTestCase, build_request, poll, route, upstream

GENERATED_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_BODY = 1024


class RequestHardening(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.app = Backend("app").start()
        cls.admin = Backend("admin").start()
        cls.backends = [cls.app, cls.admin]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.app]), upstream("admin", [cls.admin])],
            routes=[route("admin", path_prefix="/admin"),
                    dict(route("app", host="h2c.test"), allow_h2c_upgrade=True),
                    route("app")],
            server={"max_body_bytes": MAX_BODY})

    def setUp(self):
        super().setUp()
        self.app.reset_records()
        self.admin.reset_records()

    # --- helpers ----------------------------------------------------------------------------
    def assertRefusedUnseen(self, raw, status=400, reason="bad_request"):
        """The request is answered by floodgate with `status`/`reason`, the connection closes,
        and no backend saw anything."""
        with self.fg.conn() as c:
            c.send(raw)
            r = c.read_response()
            self.assertEqual((r.status, r.header("x-floodgate-reason")), (status, reason), r)
            self.assertIn("close", r.connection_tokens(), r)
            c.wait_closed()
        self.assertEqual(self.app.request_count + self.admin.request_count, 0,
                         [x.target for x in self.app.snapshot() + self.admin.snapshot()])
        return r

    def forwarded(self, raw, backend=None):
        """Sends raw bytes; expects a 200 from a backend and returns what that backend got."""
        backend = backend or self.app
        with self.fg.conn() as c:
            c.send(raw)
            r = c.read_response()
        self.assertEqual(r.status, 200, r)
        return backend.wait_for_requests(1)[0]

    # --- 2: HTTP/1.0 with Transfer-Encoding -------------------------------------------------
    def test_http10_chunked_request_is_refused_and_the_request_behind_it_never_arrives(self):
        self.assertRefusedUnseen(
            b"POST /echo?te10 HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n"
            b"\r\n0\r\n\r\nGET /echo?smuggled HTTP/1.1\r\nHost: test.local\r\n\r\n")

    # --- 4: authority and Host validation ---------------------------------------------------
    def test_absolute_form_with_userinfo_is_refused(self):
        self.assertRefusedUnseen(
            b"GET http://user:pw@evil.example/x HTTP/1.1\r\nHost: test.local\r\n\r\n")

    def test_absolute_form_with_a_port_above_65535_is_refused(self):
        self.assertRefusedUnseen(b"GET http://a.example:65536/ HTTP/1.1\r\nHost: a\r\n\r\n")

    def test_host_that_is_not_host_and_port_is_refused(self):
        for host in ("a b", "a/b", "user@a.example", "a.example, b.example", "a:65536", "a:8o",
                     "[::1"):
            with self.subTest(host=host):
                self.assertRefusedUnseen(build_request("GET", "/echo", host=host))

    def test_ipv6_literal_host_with_port_is_forwarded_unchanged(self):
        rec = self.forwarded(build_request("GET", "/echo?v6", host="[::1]:8080"))
        self.assertEqual(rec.header_values("host"), ["[::1]:8080"])

    def test_empty_host_on_http11_is_routed_by_catch_all_and_the_backend_gets_its_address(self):
        rec = self.forwarded(b"GET /echo?empty-host HTTP/1.1\r\nHost:\r\n\r\n")
        self.assertEqual(rec.header_values("host"), [self.app.address])
        self.assertFalse(rec.has_header("x-forwarded-host"), rec.headers)

    # --- 15: HTTP/1.0 without Host ----------------------------------------------------------
    def test_http10_request_without_host_reaches_the_backend_with_the_backends_address(self):
        rec = self.forwarded(b"GET /echo?no-host HTTP/1.0\r\n\r\n")
        self.assertEqual(rec.version, "HTTP/1.1")
        self.assertEqual(rec.header_values("host"), [self.app.address])

    # --- 10: X-Request-Id and the access log ------------------------------------------------
    def log_entry_for(self, target):
        return poll(lambda: [e for e in self.fg.access_log_entries() if e["target"] == target],
                    what="the access log line of %s" % target)[0]

    def test_client_request_id_that_is_not_visible_ascii_is_replaced_by_a_generated_one(self):
        for i, rid in enumerate((b"caf\xc3\xa9", b"a b", b"x" * 6000)):
            with self.subTest(rid=rid[:20]):
                target = "/echo?rid-%d" % i
                with self.fg.conn() as c:
                    c.send(b"GET %s HTTP/1.1\r\nHost: test.local\r\nX-Request-Id: %s\r\n\r\n"
                           % (target.encode(), rid))
                    self.assertEqual(c.read_response().status, 200)
                sent = self.app.wait_for_target(target).header_values("x-request-id")
                self.assertEqual(len(sent), 1, sent)
                self.assertRegex(sent[0], GENERATED_ID)
                self.assertEqual(self.log_entry_for(target)["request_id"], sent[0])

    def test_client_request_id_of_200_visible_characters_is_kept(self):
        rid = "A-z_0~!" * 28 + "abcd"
        self.assertEqual(len(rid), 200)
        rec = self.forwarded(build_request("GET", "/echo?rid-200", [("X-Request-Id", rid)]))
        self.assertEqual(rec.header_values("x-request-id"), [rid])

    def test_access_log_is_valid_utf8_json_with_quotes_and_backslashes_escaped(self):
        target = '/echo?q="x"\\y'
        self.forwarded(build_request("GET", target))
        entry = self.log_entry_for(target)
        self.assertEqual(entry["target"], target)
        with open(self.fg.access_log_path, "rb") as f:
            for line in f.read().splitlines():
                json.loads(line.decode("utf-8", "strict"))

    # --- 11: routes match the normalised path -----------------------------------------------
    def test_unnormalised_spellings_of_a_path_match_its_route_and_reach_it_as_sent(self):
        for target in ("/x/../admin/a", "//admin/b", "/./admin/c", "/%61dmin/d", "/%2e/admin/e"):
            with self.subTest(target=target):
                self.admin.reset_records()
                rec = self.forwarded(build_request("GET", target), backend=self.admin)
                self.assertEqual(rec.target, target)
        self.assertEqual(self.app.request_count, 0)

    def test_a_path_climbing_above_the_root_is_refused(self):
        self.assertRefusedUnseen(build_request("GET", "/../admin"))
        self.assertRefusedUnseen(build_request("GET", "/a/%2e%2e/../admin"))

    def test_a_malformed_percent_encoding_is_refused(self):
        self.assertRefusedUnseen(build_request("GET", "/admin%zz"))

    def test_the_query_plays_no_part_in_route_matching(self):
        rec = self.forwarded(build_request("GET", "/echo?/admin"))
        self.assertEqual(rec.target, "/echo?/admin")

    # --- 12: h2c ----------------------------------------------------------------------------
    H2C = [("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
           ("HTTP2-Settings", "AAMAAABkAAQAoAAAAAIAAAAA")]

    def test_h2c_upgrade_is_forwarded_as_a_plain_request(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/h2c", headers=self.H2C)
            self.assertEqual(r.status, 200, r)
            self.assertFalse(r.has_header("upgrade"), r)
            self.assertIn("close", r.connection_tokens(), r)  # as after a declined upgrade
            c.wait_closed()
        rec = self.app.wait_for_target("/h2c")
        for name in ("upgrade", "http2-settings"):
            self.assertFalse(rec.has_header(name), rec.headers)
        self.assertNotIn("upgrade", ",".join(rec.header_values("connection")).lower())

    def test_h2c_is_removed_from_an_offer_that_also_names_websocket(self):
        rec = self.forwarded(build_request("GET", "/echo?h2c-ws", [
            ("Connection", "upgrade"), ("Upgrade", "h2c, websocket")]))
        self.assertEqual(rec.header_values("upgrade"), ["websocket"])

    def test_h2c_upgrade_is_tunnelled_on_a_route_that_allows_it(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/h2c", headers=self.H2C, host="h2c.test")
            self.assertEqual(r.status, 101, r)
            c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            self.assertEqual(c.read_exact(24), b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        rec = self.app.wait_for_target("/h2c")
        self.assertEqual(rec.header_values("http2-settings"), ["AAMAAABkAAQAoAAAAAIAAAAA"])

    # --- extension methods -------------------------------------------------------------------
    def test_an_extension_method_is_forwarded_as_sent_with_its_body(self):
        """Any token is a method (RFC 9110 section 9.1): QUERY (with a body), WebDAV's and
        private ones reach the backend as sent, as with HAProxy (nginx forwards upper-case
        ones)."""
        for method in ("QUERY", "VERSION-CONTROL", "X_PRIVATE.1"):
            rec = self.forwarded(("%s /echo?m=%s HTTP/1.1\r\nHost: test.local\r\n"
                                  "Content-Length: 7\r\n\r\n{\"q\":1}" % (method, method))
                                 .encode())
            self.assertEqual((rec.method, rec.target, rec.body),
                             (method, "/echo?m=%s" % method, b'{"q":1}'))
            self.app.reset_records()
        entry = poll(lambda: next((e for e in reversed(self.fg.access_log_entries())
                                   if e.get("method") == "X_PRIVATE.1"), None),
                     what="the access log's entry")
        self.assertEqual(entry["status"], 200)

    def test_a_method_that_is_not_a_token_is_refused(self):
        for raw in (b"G@T / HTTP/1.1\r\nHost: test.local\r\n\r\n",
                    b"%s / HTTP/1.1\r\nHost: test.local\r\n\r\n" % (b"M" * 33)):
            self.assertRefusedUnseen(raw)

    # --- 14: fragments, OPTIONS *, lingering close after 413 --------------------------------
    def test_a_fragment_in_the_target_is_refused(self):
        self.assertRefusedUnseen(build_request("GET", "/admin#frag"))

    def test_options_asterisk_is_answered_by_floodgate_and_the_connection_stays_usable(self):
        with self.fg.conn() as c:
            r = c.request("OPTIONS", "*")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("allow"), "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH")
            self.assertEqual(r.header_values("content-length"), ["0"])
            self.assertEqual(c.request("GET", "/echo?after-options").status, 200)
        self.assertEqual([x.target for x in self.app.snapshot()], ["/echo?after-options"])

    def test_a_413_sent_while_the_client_still_sends_its_body_reaches_the_client(self):
        with self.fg.conn() as c:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            c.send(b"POST /echo?big HTTP/1.1\r\nHost: test.local\r\nContent-Length: 100000000\r\n\r\n")
            piece = b"b" * 65536
            try:
                for _ in range(64):  # 4 MiB: far more than floodgate buffers or ever reads
                    c.send(piece)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the lingering close ended: what was sent before must still be readable
            r = c.read_response()
            self.assertEqual((r.status, r.header("x-floodgate-reason")), (413, "body_too_large"))
            c.wait_closed()
        self.assertEqual(self.app.request_count, 0)


if __name__ == "__main__":
    unittest.main()
