"""The admin listener against clients that do not play along: connection cap (idle and slow
connections make room for new ones), head and body bounds, the token checked before a body is
read, bounded memory, HEAD without bodies and the Bearer scheme in any case
(docs/operations.md, "Limits of the admin listener")."""

import unittest

from backend import Backend
from harness import (DEFAULT_TIMEOUT, Conn, FloodgateTestCase, admin_get, build_request, poll,
                     render_toml, upstream)

TOKEN = "admin-hardening-token-0123456789"
MAX_CONNECTIONS = 64
MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
HALF_HEAD = b"GET /healthz HTTP/1.1\r\nHost: admin.test\r\n"


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/%d/status" % pid)


class AdminHardening(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], admin={"token": TOKEN})

    def admin(self, timeout=DEFAULT_TIMEOUT):
        return Conn(self.fg.admin_port, timeout=timeout)

    def admin_request(self, method, path, headers=(), body=None):
        with self.admin() as c:
            c.send(build_request(method, path, list(headers), body, host="admin.test"))
            r = c.read_response(method)
            rest = c.wait_closed()
        return r, rest

    def wait_for_admin_connections(self, n):
        """Until the admin listener holds `n` connections besides the scrape that asks."""
        poll(lambda: self.fg.metrics().value("floodgate_admin_connections") == n + 1,
             what="%d open admin connection(s)" % n)

    def setUp(self):
        super().setUp()
        self.wait_for_admin_connections(0)  # what earlier tests opened is gone

    # --- connection cap -----------------------------------------------------------------
    def test_healthz_gets_through_while_64_connections_hold_no_complete_head(self):
        """A balancer's health check must always get through: idle or slow clients holding
        every admin connection make room, the oldest first, and the bound still holds."""
        refused_before = self.fg.metrics().value("floodgate_admin_connections_refused_total")
        conns = []
        try:
            # Half send nothing, half send half a head. Counted before the last one connects:
            # the scrape that counts is a connection too.
            for i in range(MAX_CONNECTIONS - 1):
                c = self.admin()
                if i % 2:
                    c.send(HALF_HEAD)
                conns.append(c)
            self.wait_for_admin_connections(MAX_CONNECTIONS - 1)
            conns.append(self.admin())
            conns[-1].send(HALF_HEAD)
            status, _, body = admin_get(self.fg.admin_port, "/healthz")
            self.assertEqual((status, body), (200, b"ok\n"))
            # The oldest was closed to make room, without an answer and without a reset.
            self.assertEqual(conns[0].wait_closed(), b"")
            self.assertFalse(conns[0].reset)
            # The next oldest may have made room too, for the scrape above if floodgate had not
            # seen it close yet; the newer ones are held.
            self.assertTrue(conns[2].is_open_after(0.1))
            self.assertTrue(conns[-1].is_open_after(0.1))
            # Still at most MAX_CONNECTIONS open, this scrape's included.
            self.assertLessEqual(self.fg.metrics().value("floodgate_admin_connections"),
                                 MAX_CONNECTIONS)
        finally:
            for c in conns:
                c.close()
        self.assertEqual(self.fg.metrics().value("floodgate_admin_connections_refused_total"),
                         refused_before)

    def test_connections_beyond_the_cap_get_503_while_every_open_one_has_its_head(self):
        refused_before = self.fg.metrics().value("floodgate_admin_connections_refused_total")
        head = (b"POST /config/validate HTTP/1.1\r\nHost: admin.test\r\n"
                b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                b"Expect: 100-continue\r\nContent-Length: 100\r\n\r\n")
        conns = []
        try:
            for _ in range(MAX_CONNECTIONS):
                c = self.admin()
                c.send(head)
                # The 100 says the head is complete: this connection is being served.
                self.assertEqual(c.read_response().status, 100)
                conns.append(c)
            for _ in range(6):
                c = self.admin()
                conns.append(c)
                c.send(HALF_HEAD)
                r = c.read_response()
                self.assertEqual(r.status, 503, r)
                self.assertIn(b"too many admin connections", r.body)
                self.assertIn("close", r.connection_tokens(), r)
                c.wait_closed()
            self.assertTrue(conns[0].is_open_after(0.1))
            self.assertTrue(conns[MAX_CONNECTIONS - 1].is_open_after(0.1))
        finally:
            for c in conns:
                c.close()
        # Until floodgate has seen every close, a poll may be refused too: count those.
        polls_refused = []

        def healthz():
            status, _, body = admin_get(self.fg.admin_port, "/healthz")
            if status == 503 and b"too many admin connections" in body:
                polls_refused.append(status)
            return status == 200

        poll(healthz, what="/healthz once the held connections are closed")
        self.assertEqual(self.fg.metrics().value("floodgate_admin_connections_refused_total"),
                         refused_before + 6 + len(polls_refused))

    def test_memory_stays_bounded_with_60_connections_each_holding_a_16_kib_head(self):
        pid = self.fg.proc.pid
        before = rss_kib(pid)
        unfinished = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"p" * (MAX_HEAD - 200) + b"\r\n"
        conns = []
        try:
            for _ in range(60):
                c = self.admin()
                c.send(unfinished)
                conns.append(c)
            self.wait_for_admin_connections(60)
            growth_mib = (rss_kib(pid) - before) / 1024.0
            self.assertLess(growth_mib, 20, "RSS grew %.1f MiB" % growth_mib)
            self.assertTrue(conns[-1].is_open_after(0.1))  # held, not answered
        finally:
            for c in conns:
                c.close()

    # --- the token before the body ------------------------------------------------------
    def test_an_unauthenticated_post_gets_401_before_its_body_is_sent(self):
        with self.admin() as c:
            c.send(b"POST /config/validate HTTP/1.1\r\nHost: admin.test\r\n"
                   b"Content-Length: %d\r\n\r\n" % MAX_BODY)
            r = c.read_response()
            self.assertEqual(r.status, 401, r)
            self.assertIn("token", r.json()["error"])
            self.assertEqual(r.header("www-authenticate"), "Bearer", r)
            self.assertEqual(c.wait_closed(), b"")

    def test_a_wrong_token_gets_401_for_any_method_and_path_but_get_and_head(self):
        for method, path in (("POST", "/config/rollback"), ("PUT", "/config/activate"),
                             ("POST", "/healthz"), ("DELETE", "/nowhere")):
            r, _ = self.admin_request(method, path, [("Authorization", "Bearer wrong-" + TOKEN)])
            self.assertEqual(r.status, 401, (method, path, r))

    def test_an_authorized_post_with_expect_100_continue_gets_100_then_its_answer(self):
        body = b"[server]\nworkers = 1\n"
        with self.admin() as c:
            c.send(b"POST /config/validate HTTP/1.1\r\nHost: admin.test\r\n"
                   b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                   b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
            interim = c.read_response()
            self.assertEqual(interim.status, 100, interim)
            c.send(body)
            r = c.read_response()
        self.assertEqual(r.status, 200, r)
        self.assertIn("valid", r.json())

    def test_the_bearer_scheme_is_case_insensitive_and_the_token_is_not(self):
        body = render_toml(self.fg.config()).encode()
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            r, _ = self.admin_request("POST", "/config/validate",
                                      [("Authorization", scheme + " " + TOKEN)], body)
            self.assertEqual((r.status, r.json()["valid"]), (200, True), scheme)
        for value in ("Bearer " + TOKEN.upper(), "Basic " + TOKEN, "Bearer" + TOKEN, TOKEN):
            r, _ = self.admin_request("POST", "/config/validate", [("Authorization", value)],
                                      body)
            self.assertEqual(r.status, 401, value)

    # --- head and body bounds -----------------------------------------------------------
    def test_a_head_of_exactly_16_kib_is_served_and_one_byte_more_gets_431(self):
        start = b"GET /healthz HTTP/1.1\r\nHost: admin.test\r\nX-Pad: "
        end = b"\r\n\r\n"
        for size, status in ((MAX_HEAD, 200), (MAX_HEAD + 1, 431)):
            with self.admin() as c:
                c.send(start + b"p" * (size - len(start) - len(end)) + end)
                r = c.read_response()
                self.assertEqual(r.status, status, (size, r))
                if status == 431:
                    self.assertIn(b"head larger than", r.body)
                c.wait_closed()

    def test_a_head_that_never_ends_gets_431_at_16_kib(self):
        with self.admin() as c:
            c.send(b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"p" * (4 * MAX_HEAD))
            r = c.read_response()
            self.assertEqual(r.status, 431, r)

    def test_a_configuration_over_1_mib_gets_413_before_it_is_sent(self):
        with self.admin() as c:
            c.send(b"POST /config/validate HTTP/1.1\r\nHost: admin.test\r\n"
                   b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                   b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))
            r = c.read_response()
            self.assertEqual(r.status, 413, r)
            self.assertIn(b"larger than", r.body)
            self.assertEqual(c.wait_closed(), b"")

    def test_a_configuration_of_exactly_1_mib_is_validated(self):
        body = render_toml(self.fg.config()).encode()
        body += b"#" * (MAX_BODY - len(body) - 1) + b"\n"
        self.assertEqual(len(body), MAX_BODY)
        r, _ = self.admin_request("POST", "/config/validate",
                                  [("Authorization", "Bearer " + TOKEN)], body)
        self.assertEqual((r.status, r.json()["valid"]), (200, True), r)

    def test_a_get_with_a_body_gets_413(self):
        r, _ = self.admin_request("GET", "/config", body=b"x")
        self.assertEqual(r.status, 413, r)

    # --- the strict parser ------------------------------------------------------------------
    def test_heads_the_proxy_refuses_get_400_on_the_admin_listener_too(self):
        cases = {
            "empty field name": b"GET /healthz HTTP/1.1\r\nHost: admin.test\r\n: v\r\n\r\n",
            "obs-fold": b"GET /healthz HTTP/1.1\r\nHost: admin.test\r\nX-A: a\r\n b\r\n\r\n",
            "space before colon": b"GET /healthz HTTP/1.1\r\nHost : admin.test\r\n\r\n",
            "invalid method": b"G@T /healthz HTTP/1.1\r\nHost: admin.test\r\n\r\n",
            "two lengths": b"POST /config/validate HTTP/1.1\r\nHost: admin.test\r\n"
                           b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/2 line": b"GET /healthz HTTP/2.0\r\nHost: admin.test\r\n\r\n",
            "field without colon": b"GET /healthz HTTP/1.1\r\nHost: admin.test\r\nX-A\r\n\r\n",
        }
        for name, head in cases.items():
            with self.admin() as c:
                c.send(head)
                r = c.read_response()
                self.assertEqual(r.status, 400, (name, r))
                self.assertIn(b"malformed request", r.body, name)
                c.wait_closed()

    def test_a_head_with_more_than_100_fields_gets_431(self):
        for fields, status in ((99, 200), (101, 431)):  # Host is one of them
            head = b"GET /healthz HTTP/1.1\r\nHost: admin.test\r\n" + b"X-F: v\r\n" * fields
            with self.admin() as c:
                c.send(head + b"\r\n")
                self.assertEqual(c.read_response().status, status, fields)

    def test_chunked_bodies_get_411(self):
        with self.admin() as c:
            c.send(b"POST /config/validate HTTP/1.1\r\nHost: admin.test\r\n"
                   b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            self.assertEqual(c.read_response().status, 411)

    # --- HEAD -----------------------------------------------------------------------------
    def test_head_gets_the_status_and_headers_of_get_and_no_body(self):
        for path in ("/healthz", "/config", "/metrics", "/status", "/nowhere"):
            got, _ = self.admin_request("GET", path)
            head, rest = self.admin_request("HEAD", path)
            self.assertEqual(rest, b"", path)  # nothing after the head, then the close
            self.assertEqual(head.status, got.status, path)
            self.assertEqual(head.header("content-type"), got.header("content-type"), path)
            if path in ("/healthz", "/config", "/nowhere"):  # bodies that do not change
                self.assertEqual(int(head.header("content-length")), len(got.body), path)
            else:
                self.assertGreater(int(head.header("content-length")), 0, path)

    def test_head_of_an_error_has_no_body_either(self):
        head, rest = self.admin_request("HEAD", "/config/validate")
        self.assertEqual(head.status, 405, head)
        self.assertGreater(int(head.header("content-length")), 0, head)
        self.assertEqual(rest, b"")


if __name__ == "__main__":
    unittest.main()
