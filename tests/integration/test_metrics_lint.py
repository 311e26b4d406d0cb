"""`promtool check metrics` over scrapes of /metrics taken under traffic (issue 17): every family
a configuration with every stage turned on exports, with requests succeeding, failing at a dead
backend, limited and queued while the scrapes run. promtool comes from Debian's prometheus
package (scripts/deps.sh installs the one binary); the test fails without it."""

import shutil
import subprocess
import threading

from backend import Backend
from harness import FloodgateTestCase, admin_get, free_port, poll, route, upstream

SCRAPES = 3


class PromtoolUnderTraffic(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.promtool = shutil.which("promtool")
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        dead = "127.0.0.1:%d" % free_port()
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.backend, dead],
                      resilience={"max_active_requests": 4, "max_pending_requests": 8},
                      health={"path": "/health", "interval": "200ms", "timeout": "100ms"})],
            routes=[route("app")], workers=2,
            resilience={
                "scoped_rate_limits": [{"name": "per-client", "scope": "client",
                                        "requests_per_sec": 50, "burst": 20}],
                "quota": {"enabled": True, "policies": [
                    {"name": "tenants", "selector": {"tenant": {"key": "header:x-tenant"}},
                     "burst": {"requests": 1000, "window": "1h"}}]},
                "hedging": {"enabled": True, "delay": "50ms"},
            })

    def traffic(self, stop, seen):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                r = self.fg.get("/lint-%d" % n, headers=[("X-Tenant", "t%d" % (n % 3))])
                seen.add(r.status)
            except OSError:
                pass

    def test_every_scrape_under_traffic_passes_promtool_check_metrics(self):
        self.assertIsNotNone(self.promtool, "promtool not found: run scripts/deps.sh")
        stop = threading.Event()
        seen = set()
        workers = [threading.Thread(target=self.traffic, args=(stop, seen)) for _ in range(3)]
        for t in workers:
            t.start()
        try:
            poll(lambda: 200 in seen and (429 in seen or 502 in seen), timeout=20,
                 what="traffic with successes and refusals")
            for i in range(SCRAPES):
                status, _, body = admin_get(self.fg.admin_port, "/metrics")
                self.assertEqual(status, 200)
                p = subprocess.run([self.promtool, "check", "metrics"], input=body,
                                   capture_output=True, timeout=60)
                self.assertEqual((p.returncode, p.stdout + p.stderr), (0, b""),
                                 "scrape %d:\n%s" % (i, (p.stdout + p.stderr).decode()))
        finally:
            stop.set()
            for t in workers:
                t.join()
        for family in (b"process_cpu_seconds_total", b"floodgate_build_info{",
                       b"floodgate_accepted_connections_total",
                       b"floodgate_health_transitions_total{"):
            self.assertIn(family, body)


if __name__ == "__main__":
    import unittest
    unittest.main()
