"""Shedding in the process log (log.shed_summary_interval; docs/operations.md, "The process
log"): while floodgate refuses requests for the load or a limit, one warning per upstream and
reason each interval, with the number refused in it and the status the clients got; `upstream=-`
for a refusal before routing (the front in-flight cap); what shadow mode would have refused;
and one line per upstream once it stops refusing, with the total. The interval is 1s here, so
every wait is a poll of a few seconds at most.

Before, refusals reached the metrics only: an operator tailing the journal saw nothing of an
incident. nginx writes one error-log line per request limit_req or limit_conn refuses (an
attack writes as many lines as requests); HAProxy marks each refused request in its request
log (termination state sQ, PR, ...) and logs nothing that sums them. The statuses are read from
the responses, never written here: which status a reason answers with may change."""

import re
import unittest

from backend import Backend
from harness import FloodgateTestCase, poll, route, upstream
from test_admission import Held

INTERVAL = "1s"

SHED = re.compile(r" warning floodgate: shedding: upstream=(\S+) reason=(\S+) refused=(\d+) "
                  r"in the last (\d+(?:\.\d)?s) \(status (\d+)\)$")
ENDED = re.compile(r" info floodgate: shedding ended: upstream=(\S+) refused=(\d+) "
                   r"over (\d+(?:\.\d)?s)$")
SHADOW = re.compile(r" info floodgate: shedding \(shadow\): reason=(\S+) would_refuse=(\d+) "
                    r"in the last (\d+(?:\.\d)?s)$")
SHADOW_ENDED = re.compile(r" info floodgate: shedding ended \(shadow\): would_refuse=(\d+) "
                          r"over (\d+(?:\.\d)?s)$")


class ShedLogTestCase(FloodgateTestCase):
    def lines(self):
        return self.fg.stderr_bytes().decode("utf-8", "replace").splitlines()

    def matches(self, pattern):
        """(line number, match) of every process-log line matching `pattern`."""
        return [(n, m) for n, m in enumerate(pattern.search(l) for l in self.lines()) if m]

    def shed(self, upstream_name, reason):
        return [(n, m) for n, m in self.matches(SHED)
                if m.group(1) == upstream_name and m.group(2) == reason]

    def ended(self, upstream_name):
        return [(n, m) for n, m in self.matches(ENDED) if m.group(1) == upstream_name]

    def refuse(self, count, host, target, reason):
        """`count` requests that floodgate refuses for `reason`; the statuses they got."""
        statuses = set()
        for i in range(count):
            r = self.fg.get("%s-%d" % (target, i), host=host)
            self.assertEqual(r.header_values("x-floodgate-reason"), [reason], r)
            statuses.add(r.status)
        return statuses

    def assertSummarised(self, upstream_name, reason, refused, statuses):
        """The warnings for (upstream, reason) add up to `refused` (one interval or a few), each
        with the status the clients got; then the upstream's "ended" line(s) add up to the same,
        after the last warning."""
        def summed():
            return sum(int(m.group(3)) for _, m in self.shed(upstream_name, reason)) == refused
        poll(summed, what="shedding lines for upstream=%s reason=%s summing to %d"
             % (upstream_name, reason, refused))
        lines = self.shed(upstream_name, reason)
        self.assertEqual({int(m.group(5)) for _, m in lines}, statuses)
        for _, m in lines:
            self.assertGreater(int(m.group(3)), 0)
        poll(lambda: sum(int(m.group(2)) for _, m in self.ended(upstream_name)) == refused,
             what="shedding ended: upstream=%s refused=%d" % (upstream_name, refused))
        self.assertGreater(self.ended(upstream_name)[-1][0], lines[-1][0])


class SheddingByUpstream(ShedLogTestCase):
    """Refusals after routing, by the upstream they were for: a pool at its limit (two reactors
    refusing, summed) and a scoped rate limit (which no per-upstream metric counts); and a rule
    in shadow mode, which refuses nothing and is summed as what it would have refused."""

    @classmethod
    def setUpClass(cls):
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        cls.fg = cls.start_floodgate(
            [upstream("api", [cls.app], resilience={"max_active_requests": 1}),
             upstream("web", [cls.app]),
             upstream("limited", [cls.app]), upstream("shadowed", [cls.app])],
            routes=[route("api", host="api.test"), route("web", host="web.test"),
                    route("limited", host="limited.test"),
                    route("shadowed", host="shadowed.test")],
            workers=2, log={"shed_summary_interval": INTERVAL},
            resilience={"scoped_rate_limits": [
                {"name": "slow", "scope": "route", "requests_per_sec": 1, "burst": 1,
                 "route_allowlist": ["limited"]},
                {"name": "watch", "scope": "route", "requests_per_sec": 1, "burst": 1,
                 "route_allowlist": ["shadowed"], "mode": "shadow"}]})

    def test_a_pool_at_its_limit_is_summed_per_interval_then_said_to_have_ended(self):
        held = Held(self, self.app, "api-held", "api.test")
        try:
            self.assertEqual(self.fg.get("/served", host="web.test").status, 200)
            statuses = self.refuse(12, "api.test", "/over", "proxy_overloaded")
        finally:
            self.assertEqual(held.release().status, 200)
        self.assertSummarised("api", "proxy_overloaded", 12, statuses)
        self.assertEqual([m.group(0) for _, m in self.matches(SHED) if m.group(1) == "web"], [])

    def test_a_rate_limit_is_summed_under_the_upstream_it_refused_for(self):
        refused, statuses = 0, set()
        for i in range(8):
            r = self.fg.get("/limited-%d" % i, host="limited.test")
            if r.header_values("x-floodgate-reason") == ["rate_limited"]:
                refused += 1
                statuses.add(r.status)
            else:
                self.assertEqual(r.status, 200, r)
        self.assertGreater(refused, 0)
        self.assertSummarised("limited", "rate_limited", refused, statuses)
        self.assertEqual([m.group(0) for _, m in self.matches(SHED)
                          if m.group(2) == "rate_limited" and m.group(1) != "limited"], [])

    def test_shadow_mode_is_summed_as_what_it_would_have_refused(self):
        for i in range(6):
            self.assertEqual(self.fg.get("/watched-%d" % i, host="shadowed.test").status, 200)
        would = self.fg.metrics().value("floodgate_shadow_rejections_total", stage="rate_limit",
                                        reason="rate_limited")
        self.assertGreater(would, 0)
        poll(lambda: sum(int(m.group(2)) for _, m in self.matches(SHADOW)
                         if m.group(1) == "rate_limited") == would,
             what="shedding (shadow) lines summing to %d" % would)
        poll(lambda: sum(int(m.group(1)) for _, m in self.matches(SHADOW_ENDED)) == would,
             what="shedding ended (shadow): would_refuse=%d" % would)
        self.assertEqual([m.group(0) for _, m in self.matches(SHED)
                          if m.group(1) == "shadowed"], [])


class SheddingBeforeRouting(ShedLogTestCase):
    """The front in-flight cap refuses before a route is chosen: `upstream=-`."""

    @classmethod
    def setUpClass(cls):
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.app])], routes=[route("app", host="app.test")],
            log={"shed_summary_interval": INTERVAL},
            resilience={"inflight": {"max_inflight": 1}})

    def test_the_in_flight_cap_is_summed_under_a_dash(self):
        held = Held(self, self.app, "front-held", "app.test")
        try:
            statuses = self.refuse(9, "app.test", "/over", "inflight_cap")
        finally:
            self.assertEqual(held.release().status, 200)
        self.assertSummarised("-", "inflight_cap", 9, statuses)


if __name__ == "__main__":
    unittest.main()
