"""Pooled keep-alive connections that the backend closes just as floodgate reuses them: a
request without a body is sent once more on a new connection (the client never sees the
race); a request with a body cannot be replayed and gets 502 upstream_reset."""

import unittest

from backend import Backend
from harness import FloodgateTestCase, route, upstream


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

    def test_request_with_body_is_not_replayed(self):
        self.arm_stale_connection()
        r = self.fg.request("POST", "/echo?body-after-drop", body=b"payload")
        self.assertGenerated(r, 502, "upstream_reset", closes=False)
        attempts = [rec for rec in self.backend.snapshot() if rec.target == "/echo?body-after-drop"]
        self.assertEqual(len(attempts), 1, "a request with a body must not be sent twice")


if __name__ == "__main__":
    unittest.main()
