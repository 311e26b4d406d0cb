"""Local runtime protection end to end (issue 14, docs/resilience.md): the defaults refuse
nothing of a healthy load (slow but healthy backends and long responses included); a backend
whose latency grows with concurrency drives the adaptive ceiling down, and a healthy one brings
it back up; brownout sheds an upstream that is not core and keeps a core one; the route and
global caps; shadow mode; and a reload of each key under load."""

import json
import threading
import unittest

from backend import Backend
from harness import ConnectionClosed, build_request, poll, route, upstream
from test_admission import Held
from test_front_stages import FrontTestCase

PROTECTION_REASONS = ("brownout", "adaptive_limit", "route_cap", "global_cap")


class Load:
    """`n` client threads, each on its own keep-alive connection, sending GET `target` to `host`
    in a loop until stop(); counts what comes back by (status, X-Floodgate-Reason). `target`
    may be changed while it runs. Bounded: every read has the harness's deadline."""

    def __init__(self, fg, n, target, host="test.local"):
        self.fg, self.target, self.host = fg, target, host
        self.counts = {}
        self.errors = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]
        for t in self._threads:
            t.start()

    def _run(self):
        conn = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self.fg.conn()
                conn.send(build_request("GET", self.target, host=self.host))
                r = conn.read_response()
                key = (r.status, r.header("x-floodgate-reason") or "")
                with self._lock:
                    self.counts[key] = self.counts.get(key, 0) + 1
                if "close" in r.connection_tokens():
                    conn.close()
                    conn = None
            except (ConnectionClosed, OSError) as e:
                with self._lock:
                    self.errors.append(repr(e))
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def count(self, status=None, reason=None):
        with self._lock:
            return sum(v for (s, r), v in self.counts.items()
                       if (status is None or s == status) and (reason is None or r == reason))

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)
        return self


class ProtectionTestCase(FrontTestCase):  # metric(), status(), reload()
    @classmethod
    def start_two(cls, resilience):
        """Two upstreams, core and extra, each with its own backend, routed by host."""
        cls.core, cls.extra = Backend("core").start(), Backend("extra").start()
        cls.backends = [cls.core, cls.extra]
        cls.fg = cls.start_floodgate(
            [upstream("core", [cls.core]), upstream("extra", [cls.extra])],
            routes=[route("core", host="core.test"), route("extra", host="extra.test")],
            resilience=resilience)

    def assertShed(self, r, reason, retry_after):
        self.assertGenerated(r, 503, reason)
        self.assertEqual(r.header_values("retry-after"), [retry_after], r)

    def assertNothingRefused(self):
        for reason in PROTECTION_REASONS:
            self.assertEqual(self.metric("floodgate_protection_rejected_total", reason=reason), 0,
                             reason)
            self.assertEqual(
                self.metric("floodgate_responses_generated_total", reason=reason), 0, reason)


class Defaults(ProtectionTestCase):
    """No [resilience] table at all: adaptive admission, brownout and the route caps are on.
    docs/resilience.md ("What the defaults leave alone") has the arithmetic: one reactor, one
    pool of one server with keepalive 32, so the front cap is 4 x (1 + 32) = 132, the ceiling
    starts there, brownout waits for 119 in flight, the caps for 512 and 2048; this load keeps
    at most 40 in flight, none slower than high_latency (500 ms) to its head."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a], keepalive=32)])

    def test_a_healthy_load_with_slow_responses_and_long_streams_sees_no_rejection(self):
        ceiling = self.metric("floodgate_adaptive_limit")
        self.assertEqual(ceiling, 132)
        streams = []
        for i in range(8):  # long responses: head and half the body, the rest held
            c = self.fg.conn()
            c.send(build_request("GET", "/hold-body?key=long-%d&size=100000" % i))
            streams.append(c)
        slow = Load(self.fg, 16, "/slow-head?ms=300")  # slow but healthy: 300 ms to the head
        fast = Load(self.fg, 16, "/echo")
        try:
            poll(lambda: slow.count(200) >= 200 and fast.count(200) >= 2000, timeout=120,
                 what="a few seconds of traffic")
        finally:
            slow.stop()
            fast.stop()
            for i in range(8):
                self.a.release("long-%d" % i)
            for c in streams:
                r = c.read_response()
                self.assertEqual((r.status, len(r.body)), (200, 200000))
                c.close()
        self.assertEqual(slow.count(), slow.count(200), slow.counts)
        self.assertEqual(fast.count(), fast.count(200), fast.counts)
        self.assertEqual(slow.errors + fast.errors, [])
        self.assertNothingRefused()
        self.assertEqual(self.metric("floodgate_adaptive_limit"), ceiling)
        self.assertEqual(self.metric("floodgate_adaptive_decisions_total", direction="decrease"), 0)
        self.assertEqual(self.metric("floodgate_brownout_transitions_total"), 0)


class AdaptiveCeiling(ProtectionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a], keepalive=64)],
            resilience={"adaptive_admission": {"min_limit": 8, "max_limit": 48,
                                               "decrease_step": 8, "increase_step": 8,
                                               "high_latency": "100ms", "window": "50ms"},
                        "brownout": {"enabled": False}})

    def test_latency_that_grows_with_concurrency_drives_the_ceiling_down_and_health_back_up(self):
        self.assertEqual(self.metric("floodgate_adaptive_limit"), 48)
        # 48 clients at 4 ms per request in progress: 192 ms at 48, under 100 ms below 25.
        load = Load(self.fg, 48, "/load?per_ms=4")
        try:
            poll(lambda: self.metric("floodgate_adaptive_limit") <= 32, timeout=60,
                 what="the ceiling lowered")
            poll(lambda: load.count(503, "adaptive_limit") > 0, timeout=60,
                 what="requests over the lowered ceiling refused")
            self.assertGreaterEqual(self.a.load_in_progress, 0)
            load.target = "/load?base_ms=2"  # healthy again, and the ceiling is in use
            poll(lambda: self.metric("floodgate_adaptive_limit") == 48, timeout=60,
                 what="the ceiling raised back to its maximum")
        finally:
            load.stop()
        self.assertEqual(load.errors, [])
        self.assertEqual(load.count(), load.count(200) + load.count(503, "adaptive_limit"),
                         load.counts)
        self.assertGreater(self.metric("floodgate_adaptive_decisions_total", direction="decrease"), 0)
        self.assertGreater(self.metric("floodgate_adaptive_decisions_total", direction="increase"), 0)
        self.assertGreater(
            self.metric("floodgate_protection_rejected_total", upstream="a", reason="adaptive_limit"),
            0)
        poll(lambda: self.metric("floodgate_adaptive_inflight") == 0, what="every permit back")


class Brownout(ProtectionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_two({"adaptive_admission": {"min_limit": 10, "max_limit": 10},
                       "brownout": {"core_routes": ["core"]},
                       "route_queue": {"retry_after": "2s"}})

    def test_brownout_sheds_an_upstream_that_is_not_core_and_keeps_the_core_one(self):
        held = [Held(self, self.core, "b-%d" % i, "core.test") for i in range(9)]  # 90% of 10
        try:
            self.assertEqual(self.status()["adaptive_admission"],
                             {"ceiling": 10, "in_flight": 9, "min": 10, "max": 10})
            r = self.fg.get("/echo", host="extra.test")
            self.assertShed(r, "brownout", "2")
            self.assertEqual(self.extra.request_count, 0)
            self.assertEqual(self.metric("floodgate_brownout_active"), 1)
            self.assertEqual(self.status()["brownout"], {"enabled": True, "active": True})
            self.assertEqual(self.fg.get("/echo", host="core.test").status, 200)
        finally:
            for h in held:
                self.assertEqual(h.release().status, 200)
        poll(lambda: self.metric("floodgate_adaptive_inflight") == 0, what="every permit back")
        # Brownout holds for at least one window (100 ms), then the first request ends it.
        poll(lambda: self.fg.get("/echo", host="extra.test").status == 200,
             what="brownout over once its hold has passed")
        self.assertEqual(self.metric("floodgate_brownout_active"), 0)
        self.assertEqual(self.metric("floodgate_brownout_transitions_total", to="active"), 1)
        self.assertEqual(self.metric("floodgate_brownout_transitions_total", to="inactive"), 1)
        self.assertGreaterEqual(
            self.metric("floodgate_protection_rejected_total", upstream="extra", reason="brownout"),
            1)
        self.assertEqual(
            self.metric("floodgate_protection_rejected_total", upstream="core", reason="brownout"),
            0)


class RouteCaps(ProtectionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_two({"route_queue": {"caps": {"extra": 2}, "global_cap": 3,
                                       "retry_after": "4s"}})

    def test_a_full_route_cap_and_a_full_global_cap_answer_503_with_retry_after(self):
        self.assertEqual(self.metric("floodgate_route_cap", upstream="extra"), 2)
        self.assertEqual(self.metric("floodgate_route_cap", upstream="core"), 512)
        held = [Held(self, self.extra, "rc-%d" % i, "extra.test") for i in range(2)]
        try:
            self.assertShed(self.fg.get("/echo", host="extra.test"), "route_cap",
                            "4")
            self.assertEqual(self.metric("floodgate_route_cap_inflight", upstream="extra"), 2)
            held.append(Held(self, self.core, "gc-0", "core.test"))  # the third of three
            self.assertShed(self.fg.get("/echo", host="core.test"), "global_cap",
                            "4")
            self.assertEqual(self.metric("floodgate_global_cap_inflight"), 3)
            status = self.status()
            self.assertEqual(status["global_cap"], {"limit": 3, "in_flight": 3})
            pools = {p["name"]: p for p in status["pools"]}
            self.assertEqual(pools["extra"]["route_cap"], {"limit": 2, "in_flight": 2})
            self.assertEqual(pools["core"]["route_cap"], {"limit": 512, "in_flight": 1})
        finally:
            for h in held:
                self.assertEqual(h.release().status, 200)
        poll(lambda: self.metric("floodgate_global_cap_inflight") == 0, what="every permit back")
        self.assertEqual(self.metric("floodgate_route_cap_inflight", upstream="extra"), 0)
        for host in ("extra.test", "core.test"):
            self.assertEqual(self.fg.get("/echo", host=host).status, 200)
        self.assertEqual(
            self.metric("floodgate_protection_rejected_total", upstream="extra", reason="route_cap"),
            1)
        self.assertEqual(
            self.metric("floodgate_protection_rejected_total", upstream="core", reason="global_cap"),
            1)


class ShadowMode(ProtectionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={"route_queue": {"default_cap": 1, "mode": "shadow"}})

    def test_a_cap_in_shadow_mode_admits_counts_and_logs_what_it_would_refuse(self):
        held = Held(self, self.a, "sh-0", "test.local")
        try:
            r = self.fg.get("/echo?shadow")
            self.assertEqual(r.status, 200)
        finally:
            self.assertEqual(held.release().status, 200)
        self.assertEqual(self.metric("floodgate_shadow_rejections_total", stage="route_queue",
                                     reason="route_cap"), 1)
        self.assertEqual(self.metric("floodgate_protection_rejected_total"), 0)

        def logged():
            with open(self.fg.access_log_path) as f:
                for line in f:
                    rec = json.loads(line)
                    if rec.get("target", "").startswith("/echo?shadow"):
                        return rec
            return None
        rec = poll(logged, what="the access log record")
        self.assertEqual(rec.get("would_reject"), "route_cap", rec)


class ReloadUnderLoad(ProtectionTestCase):
    @classmethod
    def setUpClass(cls):
        cls.start_two(None)

    def test_each_key_reloads_under_load_without_a_failed_request(self):
        loads = [Load(self.fg, 4, "/echo", host="core.test"),
                 Load(self.fg, 4, "/echo", host="extra.test")]
        steps = [
            ({"adaptive_admission": {"max_limit": 100, "min_limit": 50, "decrease_step": 5,
                                     "increase_step": 5, "high_latency": "1s", "window": "200ms"}},
             lambda: self.metric("floodgate_adaptive_limit") == 100),
            ({"adaptive_admission": {"max_limit": 100},
              "brownout": {"core_routes": ["core"], "trigger_inflight_percent": 95,
                           "recover_inflight_percent": 50}},
             lambda: self.status()["generation"] >= 3),
            ({"route_queue": {"caps": {"extra": 300}, "default_cap": 200, "global_cap": 1000,
                              "retry_after": "3s"}},
             lambda: self.metric("floodgate_route_cap", upstream="extra") == 300
             and self.metric("floodgate_route_cap", upstream="core") == 200
             and self.metric("floodgate_global_cap") == 1000),
            ({"watchdog": {"enabled": True, "drain_grace": "10s"}},
             lambda: self.status()["generation"] >= 5),
            ({"adaptive_admission": {"enabled": False}, "brownout": {"enabled": False}},
             lambda: self.metric("floodgate_adaptive_limit") == 0),
            ({}, lambda: self.metric("floodgate_adaptive_limit") > 0
             and self.metric("floodgate_route_cap", upstream="core") == 512),
        ]
        try:
            for resilience, applied in steps:
                before = sum(l.count(200) for l in loads)
                self.reload(resilience)
                poll(applied, what="%r applied" % (resilience,))
                poll(lambda: sum(l.count(200) for l in loads) > before + 20,
                     what="traffic after the reload")
        finally:
            for l in loads:
                l.stop()
        for l in loads:
            self.assertEqual(l.errors, [])
            self.assertEqual(l.count(), l.count(200), l.counts)


if __name__ == "__main__":
    unittest.main()
