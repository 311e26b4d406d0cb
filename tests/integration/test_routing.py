"""Routing end to end: hosts match case-insensitively and ignore the port, "*.example.com"
matches subdomains only, the longest byte prefix wins, exact hosts come before wildcards, and a
request no route matches gets 404 no_route without reaching any backend."""

import unittest

from backend import Backend
from harness import FloodgateTestCase, build_request, route, upstream

#           upstream   host                  path_prefix
ROUTES = [("apex",     "example.com",        "/"),
          ("apex_api", "example.com",        "/api"),
          ("wild",     "*.example.com",      "/"),
          ("exact",    "exact.example.com",  "/only"),
          ("wild_net", "*.example.net",      "/"),
          ("mixed",    "Mixed.Example.ORG",  "/"),
          ("fallback", "*",                  "/fallback")]


class Routing(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        names = sorted({u for u, _, _ in ROUTES})
        cls.by_name = {n: Backend(n).start() for n in names}
        cls.backends = list(cls.by_name.values())
        cls.fg = cls.start_floodgate(
            [upstream(n, [b]) for n, b in cls.by_name.items()],
            routes=[route(u, host=h, path_prefix=p) for u, h, p in ROUTES])

    def routed_to(self, host, path="/", raw=None):
        with self.fg.conn() as c:
            c.send(raw or build_request("GET", path, host=host))
            r = c.read_response()
        self.assertEqual(r.status, 200, "%s %s: %r" % (host, path, r))
        return r.header("x-backend-name")

    def assertNoRoute(self, host, path="/", raw=None):
        before = {n: b.request_count for n, b in self.by_name.items()}
        with self.fg.conn() as c:
            c.send(raw or build_request("GET", path, host=host))
            r = c.read_response()
        self.assertGenerated(r, 404, "no_route")
        after = {n: b.request_count for n, b in self.by_name.items()}
        self.assertEqual(before, after, "a request with no route reached a backend")

    def test_host_matches_case_insensitively(self):
        self.assertEqual(self.routed_to("EXAMPLE.com"), "apex")
        self.assertEqual(self.routed_to("mixed.example.org"), "mixed")

    def test_host_port_is_ignored(self):
        self.assertEqual(self.routed_to("example.com:8080"), "apex")
        self.assertEqual(self.routed_to("foo.example.com:81", "/x"), "wild")

    def test_longest_matching_prefix_wins(self):
        self.assertEqual(self.routed_to("example.com", "/api/users"), "apex_api")
        self.assertEqual(self.routed_to("example.com", "/ap"), "apex")

    def test_path_prefix_is_a_plain_byte_prefix(self):
        self.assertEqual(self.routed_to("example.com", "/apix"), "apex_api")
        self.assertEqual(self.routed_to("example.com", "/API"), "apex")

    def test_wildcard_matches_any_name_ending_in_the_suffix(self):
        self.assertEqual(self.routed_to("foo.example.com"), "wild")
        self.assertEqual(self.routed_to("a.b.example.com", "/deep"), "wild")
        self.assertEqual(self.routed_to("FOO.EXAMPLE.COM"), "wild")

    def test_wildcard_does_not_match_the_bare_domain(self):
        self.assertNoRoute("example.net")

    def test_wildcard_does_not_match_a_name_that_merely_ends_with_the_domain(self):
        self.assertNoRoute("badexample.net")

    def test_exact_host_comes_before_wildcard(self):
        self.assertEqual(self.routed_to("exact.example.com", "/only/x"), "exact")

    def test_wildcard_serves_paths_the_exact_host_has_no_route_for(self):
        self.assertEqual(self.routed_to("exact.example.com", "/other"), "wild")

    def test_catch_all_host_matches_any_host(self):
        self.assertEqual(self.routed_to("other.org", "/fallback/x"), "fallback")

    def test_no_matching_route_is_404_no_route(self):
        self.assertNoRoute("other.org", "/")

    def test_no_route_with_expect_100_continue_gets_404_without_100(self):
        self.assertNoRoute("other.org", raw=build_request(
            "POST", "/nothing", host="other.org",
            headers=[("Expect", "100-continue"), ("Content-Length", "5")]))

    def test_absolute_form_routes_by_its_authority(self):
        raw = b"GET http://foo.example.com/abs HTTP/1.1\r\nHost: foo.example.com\r\n\r\n"
        self.assertEqual(self.routed_to(None, raw=raw), "wild")

    def test_http10_request_without_host_uses_catch_all_routes(self):
        self.assertEqual(self.routed_to(None, raw=b"GET /fallback HTTP/1.0\r\n\r\n"), "fallback")
        self.assertNoRoute(None, raw=b"GET / HTTP/1.0\r\n\r\n")


if __name__ == "__main__":
    unittest.main()
