"""Active health checks end to end ([upstreams.health]): the health task marks a backend that
stops answering down within fall x interval + timeout, requests skip it, it comes back up after
rise successes once it answers again, and when every backend is down requests get 503
no_healthy_backend. GET /status and the metrics show the same."""

import json
import signal
import time
import unittest

from backend import Backend
from harness import FloodgateTestCase, admin_get, poll, render_toml, route, upstream

INTERVAL_S, TIMEOUT_S, FALL, RISE = 0.2, 0.2, 2, 2
HEALTH = {"health": {"path": "/healthz", "interval": "200ms", "timeout": "200ms",
                     "fall": FALL, "rise": RISE, "expect_status": "200-299"}}
# The bound the issue gives for "marked down", plus room for a busy machine (scheduling, ASan).
DOWN_WITHIN_S = FALL * INTERVAL_S + TIMEOUT_S + 3.0


class HealthChecks(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend("b%d" % i).start() for i in range(3)]
        cls.fg = cls.start_floodgate([upstream("app", cls.backends, **HEALTH)],
                                     routes=[route("app")], workers=2)

    def peer_up(self, b):
        return self.fg.metrics().value("floodgate_backend_up", upstream="app",
                                       backend=b.address)

    def status(self):
        code, _, body = admin_get(self.fg.admin_port, "/status")
        self.assertEqual(code, 200)
        return json.loads(body)

    def peer_status(self, b):
        pool = next(p for p in self.status()["pools"] if p["name"] == "app")
        return next(p for p in pool["backends"] if p["address"] == b.address)

    def names_served(self, n):
        names = set()
        for i in range(n):
            r = self.fg.get("/name?i=%d" % i)
            self.assertEqual(r.status, 200, r)
            names.add(r.body.decode())
        return names

    def restart(self, i):
        old = self.backends[i]
        self.backends[i] = Backend(old.name, port=old.port).start()
        return self.backends[i]

    def test_a_dead_backend_is_marked_down_skipped_and_brought_back_up(self):
        poll(lambda: all(self.peer_up(b) == 1 for b in self.backends), what="all peers up")
        poll(lambda: self.peer_status(self.backends[0])["last_probe"] == "success",
             what="a first successful probe")
        victim = self.backends[1]
        victim.stop()
        stopped = time.monotonic()
        poll(lambda: self.peer_up(victim) == 0, timeout=DOWN_WITHIN_S + 5,
             what="the stopped backend to be marked down")
        self.assertLess(time.monotonic() - stopped, DOWN_WITHIN_S)
        status = self.peer_status(victim)
        self.assertFalse(status["up"])
        self.assertGreaterEqual(status["failure_streak"], FALL)
        self.assertIn(status["last_probe"], ("failure", "timeout"))
        self.assertEqual(self.names_served(12), {"b0", "b2"})
        self.assertGreaterEqual(self.fg.metrics().value(
            "floodgate_health_probes_total", upstream="app", backend=victim.address,
            result="failure") + self.fg.metrics().value(
            "floodgate_health_probes_total", upstream="app", backend=victim.address,
            result="timeout"), FALL)
        back = self.restart(1)
        poll(lambda: self.peer_up(back) == 1, what="the restarted backend to be marked up")
        self.assertGreaterEqual(self.peer_status(back)["success_streak"], RISE)
        poll(lambda: "b1" in self.names_served(6), what="requests to reach b1 again")

    def test_failing_requests_never_mark_a_backend_down(self):
        # Requests that the backends reset are passive failures: only probes decide `down`.
        for _ in range(3 * FALL):
            self.assertGenerated(self.fg.get("/reset-before-response"), 502, "upstream_reset")
        for b in self.backends:
            self.assertEqual(self.peer_up(b), 1)
            self.assertFalse(self.peer_status(b)["failure_streak"])

    def test_every_backend_down_gives_503_no_healthy_backend(self):
        for b in self.backends:
            b.stop()
        try:
            for b in self.backends:
                poll(lambda b=b: self.peer_up(b) == 0, timeout=DOWN_WITHIN_S + 5,
                     what="%s to be marked down" % b.name)
            r = self.fg.get("/x")
            self.assertGenerated(r, 503, "no_healthy_backend")
            self.assertEqual(self.fg.metrics().value("floodgate_pool_active", upstream="app"), 0)
        finally:
            for i in range(3):
                self.restart(i)
        for b in self.backends:
            poll(lambda b=b: self.peer_up(b) == 1, what="%s back up" % b.name)
        self.assertEqual(self.fg.get("/x").status, 200)


class HealthReloads(FloodgateTestCase):
    """A reload that adds [upstreams.health] starts probing; one that removes it brings every
    peer back up and stops probing."""

    @classmethod
    def setUpClass(cls):
        cls.live = Backend("live").start()
        cls.dead = Backend("dead")  # bound, never serving: probes are refused or time out
        cls.dead.listener.close()
        cls.backends = [cls.live]
        cls.fg = cls.start_floodgate([upstream("app", [cls.live, cls.dead.address])],
                                     routes=[route("app")])

    def generation(self):
        return json.loads(admin_get(self.fg.admin_port, "/config")[2])["generation"]

    def reload(self, health):
        cfg = self.fg.config()
        cfg["upstreams"][0].pop("health", None)
        if health:
            cfg["upstreams"][0]["health"] = health
        before = self.generation()
        self.fg.upstreams = cfg["upstreams"]
        with open(self.fg.config_path, "w") as f:
            f.write(render_toml(cfg))
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.generation() > before, what="a new generation")

    def up(self, address):
        return self.fg.metrics().value("floodgate_backend_up", upstream="app", backend=address)

    def test_adding_and_removing_health_checks_on_reload(self):
        self.assertEqual(self.up(self.dead.address), 1)  # no checks: up, never probed
        self.reload(HEALTH["health"])
        poll(lambda: self.up(self.dead.address) == 0, timeout=DOWN_WITHIN_S + 5,
             what="the dead peer to be marked down once checks start")
        self.assertEqual(self.up(self.live.address), 1)
        for _ in range(4):  # only the live peer serves
            self.assertEqual(self.fg.get("/name").body, b"live")
        self.reload(None)
        poll(lambda: self.up(self.dead.address) == 1, what="every peer up without checks")


class NoHealthChecks(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("only").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])], routes=[route("app")])

    def test_a_pool_without_health_checks_is_never_probed(self):
        self.assertEqual(self.fg.get("/x").status, 200)
        code, _, body = admin_get(self.fg.admin_port, "/status")
        peer = json.loads(body)["pools"][0]["backends"][0]
        self.assertEqual((peer["up"], peer["checked"], peer["last_probe"]), (True, False, None))
        self.assertFalse(any(r.target == "/healthz" for r in self.backend.snapshot()))


if __name__ == "__main__":
    unittest.main()
