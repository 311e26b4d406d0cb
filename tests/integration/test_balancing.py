"""Balancers end to end: weighted round robin follows the weights, least_active sends new
requests to the backend with fewer requests in flight (counted process-wide, across reactors),
and p2c spreads idle load and steers away from a busy backend."""

import collections
import unittest

from backend import Backend
from harness import FloodgateTestCase, build_request, poll, route, upstream


def names_of(fg, host, n, path="/name"):
    """Sends n sequential requests, each on a new connection; returns the backend names."""
    out = []
    for _ in range(n):
        r = fg.get(path, host=host)
        assert r.status == 200, r
        out.append(r.body.decode())
    return out


class RoundRobin(FloodgateTestCase):
    """One reactor, so the rotation is observable exactly."""

    @classmethod
    def setUpClass(cls):
        cls.a, cls.b, cls.c, cls.d = (Backend(n).start() for n in ("a", "b", "c", "d"))
        cls.backends = [cls.a, cls.b, cls.c, cls.d]
        cls.fg = cls.start_floodgate(
            [upstream("weighted", [(cls.a, 1), (cls.b, 3)], balance="round_robin"),
             upstream("equal", [cls.c, cls.d], balance="round_robin")],
            routes=[route("weighted", host="weighted.test"), route("equal", host="equal.test")],
            workers=1)

    def test_weighted_round_robin_distributes_by_weight(self):
        counts = collections.Counter(names_of(self.fg, "weighted.test", 40))
        self.assertEqual(counts, {"a": 10, "b": 30})

    def test_equal_weights_alternate(self):
        names = names_of(self.fg, "equal.test", 10)
        self.assertEqual(collections.Counter(names), {"c": 5, "d": 5})
        self.assertTrue(all(x != y for x, y in zip(names, names[1:])), names)

    def test_round_robin_also_rotates_requests_on_one_keep_alive_connection(self):
        with self.fg.conn() as c:
            names = [c.request("GET", "/name", host="equal.test").body.decode() for _ in range(6)]
        self.assertEqual(collections.Counter(names), {"c": 3, "d": 3})


class _Busy:
    """Holds one request in flight on whichever backend the balancer picks."""

    def __init__(self, fg, backends, key, host):
        self.fg, self.backends, self.key = fg, backends, key
        self.conn = fg.conn()
        self.target = "/hold?key=%s" % key
        self.conn.send(build_request("GET", self.target, host=host))
        self.backend = poll(lambda: next((b for b in backends if any(
            r.target == self.target for r in b.snapshot())), None), what="the held request")

    def release(self):
        self.backend.release(self.key)
        r = self.conn.read_response()
        self.conn.close()
        assert r.status == 200, r


def load_one_backend(fg, backends, prefix, host):
    """Holds requests until one backend has two in flight, then releases those held on the
    other; returns (busy backend, held requests). A request that just completed may still count
    as in flight for a moment after its response reached the client, so a margin of two keeps
    "fewer in flight" unambiguous for the sequential requests that follow."""
    held = []
    for i in range(8):
        held.append(_Busy(fg, backends, "%s-%d" % (prefix, i), host))
        load = collections.Counter(h.backend.name for h in held)
        busy = max(load, key=load.get)
        if load[busy] >= 2:
            for h in held:
                if h.backend.name != busy:
                    h.release()
            kept = [h for h in held if h.backend.name == busy]
            return kept[0].backend, kept
    raise AssertionError("could not load one backend: %r" % load)


class LeastActive(FloodgateTestCase):
    """Two reactors: the in-flight count must be shared between them."""

    @classmethod
    def setUpClass(cls):
        cls.p, cls.q = Backend("p").start(), Backend("q").start()
        cls.backends = [cls.p, cls.q]
        cls.fg = cls.start_floodgate([upstream("app", [cls.p, cls.q], balance="least_active")],
                                     workers=2)

    def test_least_active_sends_a_second_request_to_the_other_backend(self):
        first = _Busy(self.fg, self.backends, "least-active-a", "app.test")
        try:
            second = _Busy(self.fg, self.backends, "least-active-b", "app.test")
            try:
                self.assertIsNot(first.backend, second.backend,
                                 "both held requests went to %s" % first.backend.name)
            finally:
                second.release()
        finally:
            first.release()

    def test_least_active_prefers_the_backend_with_fewer_requests_in_flight(self):
        busy, held = load_one_backend(self.fg, self.backends, "least-active-c", "app.test")
        try:
            idle = self.q if busy is self.p else self.p
            names = names_of(self.fg, "app.test", 12)
            self.assertEqual(collections.Counter(names), {idle.name: 12},
                             "busy backend %s got requests" % busy.name)
        finally:
            for h in held:
                h.release()


class PowerOfTwoChoices(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.r, cls.s = Backend("r").start(), Backend("s").start()
        cls.backends = [cls.r, cls.s]
        cls.fg = cls.start_floodgate([upstream("app", [cls.r, cls.s], balance="p2c")], workers=2)

    def test_p2c_spreads_requests_over_idle_backends(self):
        counts = collections.Counter(names_of(self.fg, "app.test", 40))
        self.assertGreaterEqual(counts["r"], 5, counts)
        self.assertGreaterEqual(counts["s"], 5, counts)

    def test_p2c_steers_most_requests_away_from_a_busy_backend(self):
        busy, held = load_one_backend(self.fg, self.backends, "p2c", "app.test")
        try:
            idle = self.s if busy is self.r else self.r
            counts = collections.Counter(names_of(self.fg, "app.test", 40))
            # Distinct choices always pick the idle one; even sampling with replacement picks it
            # with p = 3/4, so more than half is a safe bound.
            self.assertGreater(counts[idle.name], 20, counts)
        finally:
            for h in held:
                h.release()


if __name__ == "__main__":
    unittest.main()
