"""Pooled keep-alive connections that the backend closes just as floodgate reuses them: an
idempotent request without a body is sent once more on a new connection (the client never
sees the race, the access log counts both sends); a request with a body cannot be replayed,
and a POST or PATCH may already have been executed by the backend (RFC 9112 section 9.3.1):
both get 502 upstream_reset and reach the backend once. nginx does the same by default
(proxy_next_upstream without non_idempotent); HAProxy avoids the race for a connection's
first request (http-reuse safe)."""

import unittest

from backend import Backend
from harness import FloodgateTestCase, poll, route, upstream


class StaleConnections(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("stale").start()
        cls.backends = [cls.backend]
        # One worker: the second request reuses the first one's pooled connection.
        cls.fg = cls.start_floodgate([upstream("stale", [cls.backend])], routes=[route("stale")],
                                     workers=1)

    def setUp(self):
        self.backend.reset_records()

    def arm_stale_connection(self):
        """One request through floodgate; its backend connection then drops the next one."""
        self.assertEqual(self.fg.get("/drop-next").status, 200)

    def test_request_without_body_is_retried_on_a_new_connection(self):
        self.arm_stale_connection()
        r = self.fg.get("/echo?after-drop")
        self.assertEqual(r.status, 200, r)
        attempts = [rec for rec in self.backend.snapshot() if rec.target == "/echo?after-drop"]
        self.assertEqual(len(attempts), 2, "expected the dropped attempt and the retry")
        self.assertTrue(attempts[0].dropped)
        self.assertNotEqual(attempts[0].conn_id, attempts[1].conn_id)

    def test_resend_on_a_new_connection_counts_as_two_attempts_in_the_access_log(self):
        self.arm_stale_connection()
        self.assertEqual(self.fg.get("/echo?resend-logged").status, 200)
        entries = poll(lambda: [e for e in self.fg.access_log_entries()
                                if e["target"] == "/echo?resend-logged"],
                       what="the access log line of the resent request")
        self.assertEqual(entries[0]["attempts"], 2, entries[0])
        self.assertEqual(entries[0]["backends"], [self.backend.address] * 2, entries[0])

    def test_request_that_is_not_idempotent_is_not_sent_twice(self):
        for method in ("POST", "PATCH"):
            with self.subTest(method=method):
                self.backend.reset_records()
                self.arm_stale_connection()
                target = "/echo?%s-after-drop" % method.lower()
                r = self.fg.request(method, target)
                self.assertGenerated(r, 502, "upstream_reset", closes=False)
                sent = [rec for rec in self.backend.snapshot() if rec.target == target]
                self.assertEqual(len(sent), 1, "a %s must not be sent twice" % method)

    def test_request_with_body_is_not_replayed(self):
        self.arm_stale_connection()
        r = self.fg.request("POST", "/echo?body-after-drop", body=b"payload")
        self.assertGenerated(r, 502, "upstream_reset", closes=False)
        attempts = [rec for rec in self.backend.snapshot() if rec.target == "/echo?body-after-drop"]
        self.assertEqual(len(attempts), 1, "a request with a body must not be sent twice")


if __name__ == "__main__":
    unittest.main()
