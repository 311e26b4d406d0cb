"""Graceful shutdown end to end: SIGTERM/SIGINT stop accepting, let in-flight requests finish,
close idle connections and exit 0; a second signal or the end of drain_timeout cuts what is left
and exits 0 too."""

import signal
import time
import unittest

from harness import (Floodgate, OwnFloodgateTestCase, build_request, poll, refuses_connections,
                     upstream)


class Shutdown(OwnFloodgateTestCase):
    """Each test runs its own floodgate (self.fg), since each ends it."""

    def start(self, pool=None, workers=1, **server):
        return self.launch(Floodgate([upstream("app", [self.backend], **(pool or {}))],
                                     server=server, workers=workers))

    def hold(self, key):
        """A client connection whose request is held in flight at the backend."""
        c = self.fg.conn()
        c.send(build_request("GET", "/hold?key=%s" % key))
        self.backend.wait_for_target("/hold?key=%s" % key)
        return c

    def assertExitsZero(self, timeout=20):
        rc = self.fg.wait_exit(timeout)
        self.assertEqual(rc, 0, "exit code %r; stderr:\n%s" % (rc, self.fg.stderr_tail()))

    def test_idle_floodgate_exits_0_promptly_on_sigterm(self):
        self.start()
        start = time.monotonic()
        self.fg.signal(signal.SIGTERM)
        self.assertExitsZero()
        self.assertLess(time.monotonic() - start, 5.0)

    def test_sigint_shuts_down_cleanly_like_sigterm(self):
        self.start()
        self.fg.signal(signal.SIGINT)
        self.assertExitsZero()

    def test_sigterm_lets_an_in_flight_request_finish_then_exits_0(self):
        self.start(drain_timeout="30s")
        with self.hold("drain-1") as c:
            self.fg.signal(signal.SIGTERM)
            poll(lambda: refuses_connections(self.fg.port),
                 what="the listener to stop accepting after SIGTERM")
            self.assertIsNone(self.fg.proc.poll(), "exited with a request in flight")
            self.backend.release("drain-1")
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"released drain-1"), r)
            self.assertTrue(r.complete)
        self.assertExitsZero()

    def test_sigterm_closes_idle_keep_alive_connections(self):
        self.start(drain_timeout="30s")
        with self.fg.conn() as idle, self.hold("drain-2") as busy:
            self.assertEqual(idle.request("GET", "/echo?idle").status, 200)
            self.fg.signal(signal.SIGTERM)
            self.assertEqual(idle.wait_closed(), b"")
            self.backend.release("drain-2")
            self.assertEqual(busy.read_response().status, 200)
        self.assertExitsZero()

    def test_second_sigterm_cuts_in_flight_requests_and_exits_0(self):
        self.start(drain_timeout="60s")
        with self.hold("cut-1") as c:
            self.fg.signal(signal.SIGTERM)
            poll(lambda: refuses_connections(self.fg.port),
                 what="the listener to stop accepting after SIGTERM")
            start = time.monotonic()
            self.fg.signal(signal.SIGTERM)
            self.assertExitsZero(timeout=20)
            self.assertLess(time.monotonic() - start, 10.0)
            self.assertNotIn(b"released", c.wait_closed(), "a cut request must not complete")
        self.backend.release("cut-1")

    def test_drain_timeout_cuts_in_flight_requests_and_exits_0(self):
        self.start(drain_timeout="1s")
        with self.hold("cut-2") as c:
            start = time.monotonic()
            self.fg.signal(signal.SIGTERM)
            self.assertExitsZero(timeout=20)
            elapsed = time.monotonic() - start
            self.assertNotIn(b"released", c.wait_closed(), "a cut request must not complete")
        self.backend.release("cut-2")
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 10.0)

    # Requests parked in a pool's admission queue are in progress too: a drain serves them as
    # slots free; the drain deadline cuts them with the rest.
    QUEUE = {"resilience": {"max_active_requests": 1, "max_pending_requests": 4}}

    def parked(self, target):
        c = self.fg.conn()
        c.send(build_request("GET", target))
        poll(lambda: self.fg.metrics().value("floodgate_pool_pending", upstream="app") == 1,
             what="the request to wait in the queue")
        return c

    def test_sigterm_serves_a_request_waiting_in_the_admission_queue_then_exits_0(self):
        self.start(pool=self.QUEUE, workers=2, drain_timeout="30s")
        with self.hold("queue-drain") as first, self.parked("/echo?parked") as waiting:
            self.fg.signal(signal.SIGTERM)
            poll(lambda: refuses_connections(self.fg.port),
                 what="the listener to stop accepting after SIGTERM")
            self.backend.release("queue-drain")
            self.assertEqual(first.read_response().status, 200)
            r = waiting.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertIn("close", r.connection_tokens())
        self.assertExitsZero()

    def test_drain_timeout_cuts_a_request_waiting_in_the_admission_queue(self):
        self.start(pool=self.QUEUE, workers=2, drain_timeout="1s")
        with self.hold("queue-cut") as first, self.parked("/echo?parked-cut") as waiting:
            self.fg.signal(signal.SIGTERM)
            self.assertExitsZero(timeout=20)
            self.assertEqual(waiting.wait_closed(), b"")
            self.assertNotIn(b"released", first.wait_closed())
        self.backend.release("queue-cut")


if __name__ == "__main__":
    unittest.main()
