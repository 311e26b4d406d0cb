"""Pool admission end to end ([upstreams.resilience]): a pool at max_active_requests queues
arrivals in a bounded FIFO or turns them away at once with 503, Retry-After and a reason; a
rejected request never reaches a backend; a freed slot goes to the oldest waiter; a waiter
leaves on pending_timeout, when its client goes away, or when its generation retires; a backend
at max_active_per_backend is skipped. Slow backends are /hold requests released by the test."""

import json
import signal
import threading
import unittest

from backend import Backend
from harness import (DEFAULT_TIMEOUT, FloodgateTestCase, admin_get, build_request, poll,
                     render_toml, route, upstream)
from test_upgrade import UPGRADE_HEADERS


def resilience(**keys):
    return {"resilience": keys}


class Held:
    """A request parked on the backend (/hold?key=K) on its own connection, until release()."""

    def __init__(self, test, backend, key, host):
        self.backend, self.key = backend, key
        self.conn = test.fg.conn()
        self.conn.send(build_request("GET", "/hold?key=" + key, host=host))
        backend.wait_for_target("/hold?key=" + key)

    def release(self):
        self.backend.release(self.key)
        r = self.conn.read_response()
        self.conn.close()
        return r


class AdmissionTestCase(FloodgateTestCase):
    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels) or 0

    def wait_metric(self, name, value, **labels):
        poll(lambda: self.metric(name, **labels) == value,
             what="%s%r == %r" % (name, labels, value))

    def send(self, target, host):
        c = self.fg.conn()
        c.send(build_request("GET", target, host=host))
        return c

    def assertRejected(self, r, reason, retry_after):
        self.assertGenerated(r, 503, reason)
        self.assertEqual(r.header_values("retry-after"), [str(retry_after)], r)


class PoolAdmission(AdmissionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.capped = Backend("capped").start()
        cls.queued = Backend("queued").start()
        cls.timed = Backend("timed").start()
        cls.per_backend = Backend("per-backend").start()
        cls.backends = [cls.capped, cls.queued, cls.timed, cls.per_backend]
        cls.fg = cls.start_floodgate(
            [upstream("capped", [cls.capped], **resilience(max_active_requests=2,
                                                           retry_after="3s")),
             upstream("queued", [cls.queued], **resilience(
                 max_active_requests=1, max_pending_requests=8, pending_timeout="10s")),
             upstream("timed", [cls.timed], **resilience(
                 max_active_requests=1, max_pending_requests=1, pending_timeout="300ms",
                 retry_after="1500ms")),
             upstream("per-backend", [cls.per_backend], **resilience(max_active_per_backend=1))],
            routes=[route("capped", host="capped.test"), route("queued", host="queued.test"),
                    route("timed", host="timed.test"),
                    route("per-backend", host="per-backend.test")],
            workers=2)

    def setUp(self):
        super().setUp()
        # floodgate frees a request's slot once the last write of its response has completed,
        # which can be just after the client (the previous test) read it: start every test
        # from idle pools, so that an exact gauge below means this test's requests.
        for name in ("capped", "queued", "timed", "per-backend"):
            self.wait_metric("floodgate_pool_active", 0, upstream=name)

    def test_the_request_beyond_the_limit_gets_503_with_retry_after_and_never_reaches_a_backend(self):
        before = self.metric("floodgate_pool_rejected_total", upstream="capped",
                             reason="proxy_overloaded")
        held = [Held(self, self.capped, "cap-%d" % i, "capped.test") for i in range(2)]
        self.wait_metric("floodgate_pool_active", 2, upstream="capped")
        seen = self.capped.request_count
        self.assertRejected(self.fg.get("/third", host="capped.test"), "proxy_overloaded", 3)
        self.assertEqual(self.capped.request_count, seen)
        self.assertEqual(self.metric("floodgate_pool_rejected_total", upstream="capped",
                                     reason="proxy_overloaded"), before + 1)
        for h in held:
            self.assertEqual(h.release().status, 200)
        self.wait_metric("floodgate_pool_active", 0, upstream="capped")
        self.assertEqual(self.fg.get("/after", host="capped.test").status, 200)

    def test_a_rejection_keeps_the_client_connection_open(self):
        held = [Held(self, self.capped, "cap-ka-%d" % i, "capped.test") for i in range(2)]
        with self.fg.conn() as c:
            self.assertRejected(c.request("GET", "/x", host="capped.test"), "proxy_overloaded", 3)
            for h in held:
                h.release()
            self.assertEqual(c.request("GET", "/y", host="capped.test").status, 200)

    def test_a_queued_request_is_served_when_a_slot_frees(self):
        first = Held(self, self.queued, "q-first", "queued.test")
        waiting = self.send("/waited", "queued.test")
        self.wait_metric("floodgate_pool_pending", 1, upstream="queued")
        self.assertFalse(any(r.target == "/waited" for r in self.queued.snapshot()))
        self.assertEqual(first.release().status, 200)
        self.assertEqual(waiting.read_response().status, 200)
        waiting.close()
        self.wait_metric("floodgate_pool_pending", 0, upstream="queued")
        self.wait_metric("floodgate_pool_active", 0, upstream="queued")

    def test_waiters_reach_the_backend_in_arrival_order(self):
        first = Held(self, self.queued, "q-fifo", "queued.test")
        waiting = []
        for i in range(5):  # each arrives only once the one before it is parked
            waiting.append(self.send("/fifo-%d" % i, "queued.test"))
            self.wait_metric("floodgate_pool_pending", i + 1, upstream="queued")
        self.queued.reset_records()
        first.release()
        for c in waiting:
            self.assertEqual(c.read_response().status, 200)
            c.close()
        self.assertEqual([r.target for r in self.queued.snapshot()],
                         ["/fifo-%d" % i for i in range(5)])

    def test_a_waiter_gets_503_pending_timeout_after_pending_timeout(self):
        before = self.metric("floodgate_pool_rejected_total", upstream="timed",
                             reason="pending_timeout")
        first = Held(self, self.timed, "t-first", "timed.test")
        seen = self.timed.request_count
        self.assertRejected(self.fg.get("/late", host="timed.test"), "pending_timeout", 2)
        self.assertEqual(self.timed.request_count, seen)
        self.assertEqual(self.metric("floodgate_pool_rejected_total", upstream="timed",
                                     reason="pending_timeout"), before + 1)
        self.assertEqual(first.release().status, 200)

    def test_a_full_queue_turns_the_next_arrival_away_at_once(self):
        first = Held(self, self.timed, "t-full", "timed.test")
        # The queue of one fills with a waiter, then the next arrival is over both limits.
        waiting = self.send("/waiting", "timed.test")
        self.wait_metric("floodgate_pool_pending", 1, upstream="timed")
        self.assertRejected(self.fg.get("/over", host="timed.test"), "proxy_overloaded", 2)
        self.assertRejected(waiting.read_response(), "pending_timeout", 2)
        waiting.close()
        first.release()

    def test_a_client_that_goes_away_while_queued_leaves_the_queue(self):
        before = self.metric("floodgate_pool_queue_abandoned_total", upstream="queued")
        first = Held(self, self.queued, "q-gone", "queued.test")
        gone = self.send("/gone", "queued.test")
        self.wait_metric("floodgate_pool_pending", 1, upstream="queued")
        gone.close()
        self.wait_metric("floodgate_pool_pending", 0, upstream="queued")
        self.assertEqual(self.metric("floodgate_pool_queue_abandoned_total", upstream="queued"),
                         before + 1)
        first.release()
        self.wait_metric("floodgate_pool_active", 0, upstream="queued")
        self.assertFalse(any(r.target == "/gone" for r in self.queued.snapshot()))

    def test_a_backend_at_its_per_backend_cap_is_skipped_and_none_left_gives_503(self):
        held = Held(self, self.per_backend, "pb", "per-backend.test")
        self.wait_metric("floodgate_backend_active", 1, upstream="per-backend",
                         backend="127.0.0.1:%d" % self.per_backend.port)
        r = self.fg.get("/none-left", host="per-backend.test")
        self.assertRejected(r, "no_eligible_backend", 1)
        self.assertEqual(held.release().status, 200)
        self.wait_metric("floodgate_pool_active", 0, upstream="per-backend")
        self.assertEqual(self.fg.get("/again", host="per-backend.test").status, 200)

    def test_an_upgrade_tunnel_holds_its_slot_until_it_closes(self):
        with self.fg.conn() as ws:
            ws.send(build_request("GET", "/ws", headers=UPGRADE_HEADERS, host="capped.test"))
            self.assertEqual(ws.read_response().status, 101)
            held = Held(self, self.capped, "cap-ws", "capped.test")
            self.assertRejected(self.fg.get("/x", host="capped.test"), "proxy_overloaded", 3)
            held.release()
        self.wait_metric("floodgate_pool_active", 0, upstream="capped")
        self.assertEqual(self.fg.get("/y", host="capped.test").status, 200)

    def test_a_backend_failure_frees_the_slot(self):
        r = self.fg.get("/reset-before-response", host="capped.test")
        self.assertGenerated(r, 502, "upstream_reset")
        self.wait_metric("floodgate_pool_active", 0, upstream="capped")
        held = [Held(self, self.capped, "cap-after-fault-%d" % i, "capped.test") for i in range(2)]
        for h in held:  # both slots were free again
            self.assertEqual(h.release().status, 200)

    def test_a_client_that_goes_away_mid_request_frees_the_slot_when_the_backend_answers(self):
        # The backend is still working on the request: its slot stays taken until it answers
        # (docs/configuration.md), then it is freed exactly once.
        gone = Held(self, self.capped, "cap-client-gone", "capped.test")
        gone.conn.close()
        self.assertEqual(self.metric("floodgate_pool_active", upstream="capped"), 1)
        self.capped.release("cap-client-gone")
        self.wait_metric("floodgate_pool_active", 0, upstream="capped")

    def test_the_pool_gauges_show_the_configured_limits(self):
        self.assertEqual(self.metric("floodgate_pool_limit", upstream="capped"), 2)
        self.assertEqual(self.metric("floodgate_pool_limit", upstream="per-backend"), 0)
        self.assertTrue(self.fg.metrics().declared("floodgate_pool_queue_wait_seconds"))


class AdmissionReloads(AdmissionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.backend], **resilience(max_active_requests=4))],
            routes=[route("app")], server={"retirement_grace": "1s"}, workers=2)
        cls.base = cls.fg.config()

    def setUp(self):
        super().setUp()
        if self.fg.config() != self.base:
            self.reload(self.base)

    def generation(self):
        return json.loads(admin_get(self.fg.admin_port, "/config")[2])["generation"]

    def reload(self, cfg):
        before = self.generation()
        self.fg.upstreams, self.fg.routes = cfg["upstreams"], cfg["routes"]
        with open(self.fg.config_path, "w") as f:
            f.write(render_toml(cfg))
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.generation() > before, what="a new generation")

    def with_resilience(self, **keys):
        cfg = json.loads(json.dumps(self.base))
        cfg["upstreams"][0]["resilience"] = keys
        return cfg

    def test_lowering_the_limit_lets_active_requests_finish_and_active_falls_to_it(self):
        held = [Held(self, self.backend, "lower-%d" % i, "test.local") for i in range(4)]
        self.wait_metric("floodgate_pool_active", 4, upstream="app")
        self.reload(self.with_resilience(max_active_requests=2))
        self.assertEqual(self.metric("floodgate_pool_limit", upstream="app"), 2)
        self.assertRejected(self.fg.get("/new"), "proxy_overloaded", 1)
        active = [4]
        for h in held:  # each release lowers active by one; nothing is cut
            self.assertEqual(h.release().status, 200)
            self.wait_metric("floodgate_pool_active", active[-1] - 1, upstream="app")
            active.append(active[-1] - 1)
            if active[-1] >= 2:
                self.assertRejected(self.fg.get("/still-over"), "proxy_overloaded", 1)
        self.assertEqual(self.fg.get("/under").status, 200)

    def test_raising_the_limit_admits_waiters_at_once(self):
        self.reload(self.with_resilience(max_active_requests=1, max_pending_requests=4,
                                         pending_timeout="1s"))
        first = Held(self, self.backend, "raise-first", "test.local")
        waiting = self.send("/hold?key=raise-second", "test.local")
        self.wait_metric("floodgate_pool_pending", 1, upstream="app")
        self.reload(self.with_resilience(max_active_requests=2, max_pending_requests=4,
                                         pending_timeout="1s"))
        self.backend.wait_for_target("/hold?key=raise-second")
        self.backend.release("raise-second")
        self.assertEqual(waiting.read_response().status, 200)
        waiting.close()
        first.release()

    def test_a_waiter_still_queued_when_its_generation_retires_gets_generation_retired(self):
        self.reload(self.with_resilience(max_active_requests=1, max_pending_requests=4))
        first = Held(self, self.backend, "retire-first", "test.local")
        waiting = self.send("/retire-waiter", "test.local")
        self.wait_metric("floodgate_pool_pending", 1, upstream="app")
        # A new generation with the same limits; the old one retires after retirement_grace
        # (1s) with the held request still on it, which wakes the waiter.
        self.reload(self.with_resilience(max_active_requests=1, max_pending_requests=4,
                                         retry_after="2s"))
        r = waiting.read_response(timeout=10)
        self.assertGenerated(r, 503, "generation_retired")
        waiting.close()
        self.assertEqual(first.release().status, 200)
        self.assertFalse(any(r.target == "/retire-waiter" for r in self.backend.snapshot()))


class ManyWaiters(AdmissionTestCase):
    """Concurrent clients against a pool of 2 with a queue: every request is answered exactly
    once, 200 or a 503 with a pool reason, and the pool ends empty."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("busy").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate(
            [upstream("busy", [cls.backend], **resilience(
                max_active_requests=2, max_pending_requests=6, pending_timeout="2s"))],
            routes=[route("busy")], workers=2)

    def test_every_request_is_answered_once_and_the_pool_ends_empty(self):
        results, lock = [], threading.Lock()

        def client(i):
            for j in range(10):
                r = self.fg.get("/slow-head?ms=5&i=%d-%d" % (i, j))
                with lock:
                    results.append((r.status, r.header("x-floodgate-reason")))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEFAULT_TIMEOUT * 6)
        self.assertEqual(len(results), 120)
        for status, reason in results:
            self.assertIn((status, reason if status != 200 else None),
                          [(200, None), (503, "proxy_overloaded"), (503, "pending_timeout")])
        self.wait_metric("floodgate_pool_active", 0, upstream="busy")
        self.wait_metric("floodgate_pool_pending", 0, upstream="busy")
        self.assertGreater(sum(1 for s, _ in results if s == 200), 0)


if __name__ == "__main__":
    unittest.main()
