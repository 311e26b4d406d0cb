"""The circuit breaker's defaults end to end (issue 35, "Breakers and retries that one client
cannot steer"): what one client's requests can and cannot do to a pool.

With issue 13's defaults (failure_statuses = [502, 503, 504], three failures in a row,
when_all_open = "reject"), 9 requests to a path where the application answers 503 by design
opened every circuit of a three-backend pool and every request to every path got
503 circuit_open for 30 s; three timeouts on a slow URL took a one-backend pool offline. The
defaults now:

- only transport failures and timeouts count; a response status only when failure_statuses
  lists it;
- a circuit opens only once its backend has min_requests (10) verdicts in `window` (10 s), and
  then on failure_threshold (5) in a row or failure_rate_percent (50) of them;
- when every circuit of a pool is open (a one-backend pool's one), requests fail open to the
  least recently failed backend, counted in floodgate_circuit_fail_open_total;
- every transition has a line in the process log (upstream, backend, cause, counts).
"""

import unittest

from backend import Backend
from harness import FloodgateTestCase, poll, route, upstream


def circuit_states(fg, pool, backends):
    m = fg.metrics()
    return [m.value("floodgate_circuit_state", upstream=pool, backend=b.address) for b in backends]


def openings(fg, pool):
    return fg.metrics().value("floodgate_circuit_transitions_total", upstream=pool,
                              **{"from": "closed", "to": "open"})


class ApplicationStatusesAreNotFailures(FloodgateTestCase):
    """Three backends, the default [resilience.circuit_breaker] (no table at all). nginx counts
    against a server only what proxy_next_upstream lists, `error timeout` by default: a 502,
    503 or 504 the server answers is passed to the client and never marks it failed. HAProxy
    has no passive check at all unless `observe` is configured."""

    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend("b%d" % i).start() for i in range(3)]
        cls.fg = cls.start_floodgate([upstream("app", cls.backends)], workers=1)

    def test_many_5xx_answers_of_one_path_open_no_circuit_and_every_path_is_still_served(self):
        for status in (503, 502, 504):
            for i in range(15):  # round robin: five of each status per backend
                r = self.fg.get("/status/%d?i=%d" % (status, i))
                self.assertEqual(r.status, status, r)
                self.assertIsNone(r.header("X-Floodgate-Reason"), "relayed, not generated")
        self.assertEqual(circuit_states(self.fg, "app", self.backends), [0, 0, 0])
        self.assertEqual(openings(self.fg, "app"), 0)
        names = set()
        for i in range(6):
            r = self.fg.get("/name?i=%d" % i)
            self.assertEqual(r.status, 200, r)
            names.add(r.body.decode())
        self.assertEqual(names, {"b0", "b1", "b2"})
        self.assertNotIn(b"circuit closed -> open", self.fg.stderr_bytes())


class OneBackendPoolKeepsBeingTried(FloodgateTestCase):
    """One backend behind a 200 ms response_timeout, a slow URL that always times out, the
    default breaker. nginx never marks the only server of an upstream group down (max_fails
    does not apply to a group of one); HAProxy marks no server down on traffic by default.
    floodgate: a few timeouts are fewer than min_requests; enough of them do open the circuit,
    but every circuit of the pool open fails open, so the pool is never blacked out."""

    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend("only").start()]
        cls.fg = cls.start_floodgate([upstream("app", cls.backends, response_timeout="200ms")],
                                     workers=1)

    def time_out(self, n, start):
        for i in range(start, start + n):
            r = self.fg.get("/slow-head?ms=1000&i=%d" % i)
            self.assertEqual(r.status, 504, r)
            self.assertEqual(r.header("X-Floodgate-Reason"), "upstream_timeout", r)

    def served(self, target):
        r = self.fg.get(target)
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.header("X-Floodgate-Reason"), r)
        self.assertEqual(r.header("X-Backend-Name"), "only")

    def test_a_one_backend_pool_whose_backend_times_out_keeps_being_tried(self):
        # Issue 13's defaults opened the circuit at the third timeout and answered the fourth
        # request, and every other one for 30 s, 503 circuit_open.
        self.time_out(4, 0)
        self.assertEqual(circuit_states(self.fg, "app", self.backends), [0])
        self.served("/name?after=4")
        # Enough of them in the window open it (the 10th verdict, 5 in a row) ...
        self.time_out(8, 4)
        self.assertEqual(circuit_states(self.fg, "app", self.backends), [1])
        self.assertEqual(openings(self.fg, "app"), 1)
        # ... and the pool still gets every request: the breaker fails open.
        self.served("/name?after=12")
        self.time_out(1, 12)
        m = self.fg.metrics()
        self.assertGreaterEqual(m.value("floodgate_circuit_fail_open_total", upstream="app"), 3)
        self.assertEqual(m.value("floodgate_circuit_rejected_total", upstream="app"), 0)


class ConfiguredStatusesOpenOnEnoughDistinctRequests(FloodgateTestCase):
    """failure_statuses = [503], the other keys at their defaults: 503s count, but a circuit
    needs min_requests (10) requests in the window and half of them failed, not three in a
    row; its opening has a line in the process log."""

    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend("b0").start()]
        cls.fg = cls.start_floodgate(
            [upstream("app", cls.backends)], workers=1,
            resilience={"circuit_breaker": {"failure_statuses": [503], "open": "60s"}})

    def test_a_circuit_opens_on_the_failure_rate_of_enough_requests_and_logs_it(self):
        address = self.backends[0].address
        # Five failures among ten requests, never two in a row: the fifth failure is the
        # ninth request, below min_requests, and the tenth is a success, which opens nothing.
        for i in range(5):
            self.assertEqual(self.fg.get("/status/503?i=%d" % i).status, 503)
            self.assertEqual(self.fg.get("/name?i=%d" % i).status, 200)
        self.assertEqual(circuit_states(self.fg, "app", self.backends), [0])
        # The eleventh: 6 of 11 failed, over 50%.
        self.assertEqual(self.fg.get("/status/503?i=5").status, 503)
        self.assertEqual(circuit_states(self.fg, "app", self.backends), [1])
        self.assertEqual(openings(self.fg, "app"), 1)
        expected = ('upstream "app" backend %s: circuit closed -> open: 6 of 11 requests failed '
                    'in the last 10s (54%%, failure_rate_percent = 50), 1 in a row; latest: '
                    'status 503; half-open in 60s' % address).encode()
        poll(lambda: expected in self.fg.stderr_bytes(), what="the opening's line in the log")


class EveryCircuitOpenFailsOpen(FloodgateTestCase):
    """Two backends that answer 503 on /status/503, failure_statuses = [503]: once both
    circuits are open a request still reaches a backend (the least recently failed), and
    floodgate_circuit_fail_open_total counts it. when_all_open = "reject" (issue 13's default,
    still available) would answer 503 circuit_open to every request of the pool."""

    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend("b%d" % i).start() for i in range(2)]
        cls.fg = cls.start_floodgate(
            [upstream("app", cls.backends)], workers=1,
            resilience={"circuit_breaker": {"failure_statuses": [503], "open": "60s"}})

    def test_with_every_circuit_open_requests_go_to_the_least_recently_failed_backend(self):
        for i in range(40):
            if circuit_states(self.fg, "app", self.backends) == [1, 1]:
                break
            r = self.fg.get("/status/503?i=%d" % i)
            self.assertEqual(r.status, 503, r)
            self.assertIsNone(r.header("X-Floodgate-Reason"), r)
        self.assertEqual(circuit_states(self.fg, "app", self.backends), [1, 1])
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_circuit_fail_open_total", upstream="app"), 0)
        r = self.fg.get("/name")
        self.assertEqual(r.status, 200, r)
        self.assertIsNone(r.header("X-Floodgate-Reason"), r)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_circuit_fail_open_total", upstream="app"), 1)
        self.assertEqual(m.value("floodgate_circuit_rejected_total", upstream="app"), 0)
        self.assertEqual(openings(self.fg, "app"), 2)


if __name__ == "__main__":
    unittest.main()
