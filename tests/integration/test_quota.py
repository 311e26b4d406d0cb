"""The distributed quota end to end (issue 16, docs/resilience.md "The distributed quota"), on the
in-memory backend and on a real redis-server that the tests start on a loopback ephemeral port
(never the system service): exhaustion answers 429 with the window's reason, Retry-After and
X-Floodgate-Quota; a denial counts in no window; identities must resolve; shadow mode; policy
order and the stop rule; two floodgate processes sharing one Redis enforce one quota; Redis
killed (fail_open, fail_closed, local_fallback) and restarted; Redis stopped with SIGSTOP
(backend_timeout after command_timeout, nothing waits longer); SCRIPT FLUSH; a reload under load;
the in-memory backend's bound; the process log's lines for the link's failures and recoveries;
a request without the selected identity skipped or counted by its client (missing_key), and
what `floodgate check` says of it.

Timing. Windows are hours long (burst "1h", sustained "24h"), so no window ends while a test runs
unless the test starts within seconds of a wall-clock hour (Redis's TIME places the windows):
such a test would see fresh windows, and `fresh_windows` checks that a window is far from its
end before the counting starts. Nothing sleeps to order events; waits poll with deadlines."""

import json
import signal
import socket
import subprocess
import threading
import time
import unittest

from backend import Backend
from harness import floodgate_bin, free_port, poll, route, upstream
from test_front_stages import FrontTestCase

HOUR = 3600


class RedisServer:
    """A redis-server of the tests' own on 127.0.0.1 and an ephemeral port."""

    def __init__(self, *options, start=True):
        """`options` go to redis-server as they are ("--requirepass", "x"); with start=False the
        port is chosen but nothing listens on it until start()."""
        self.port = free_port()
        self.options = list(options)
        self.proc = None
        if start:
            self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", *self.options],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        poll(self.answers, timeout=10, what="redis-server answering PING")

    def answers(self):
        """Whether it answers PING (+PONG, or NOAUTH behind a password): it is listening."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout.strip()

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port


def policy(name, burst=None, sustained=None, only=None, **selector):
    p = {"name": name, "selector": selector or {"tenant": {"key": "header:x-tenant"}}}
    if only is not None:
        p["route_allowlist"] = only
    if burst is not None:
        p["burst"] = {"requests": burst, "window": "1h"}
    if sustained is not None:
        p["sustained"] = {"requests": sustained, "window": "24h"}
    return p


def quota(policies, redis=None, **keys):
    q = {"enabled": True, "policies": policies}
    if redis is not None:
        q["backend"] = {"kind": "redis", "url": redis.url(), "command_timeout": "100ms"}
    q.update(keys)
    return q


def tenant(name):
    return [("X-Tenant", name)]


def fresh_windows():
    """Starts a test's counting at least five seconds before an hour's edge (Redis's windows
    follow the wall clock): the suite's one wait, for a fact of time, not to order events."""
    left = HOUR - time.time() % HOUR
    if left < 5:
        time.sleep(left + 0.1)


class QuotaTestCase(FrontTestCase):
    def assertExhausted(self, r, reason, policy_name, window_secs):
        self.assertGenerated(r, 429, reason)
        self.assertEqual(r.header_values("x-floodgate-quota"), [policy_name], r)
        retry = int(r.header("retry-after"))
        self.assertTrue(0 < retry <= window_secs, r)

    def assertGenerated(self, r, status, reason):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.header("x-floodgate-reason"), reason, r)

    def send(self, who, fg=None, host="test.local", headers=None):
        return (fg or self.fg).request("GET", "/x", headers=tenant(who) + (headers or []),
                                       host=host)


class InMemoryQuota(QuotaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.app])],
            resilience={"quota": quota([
                policy("tenants", burst=3, sustained=100),
                policy("clients", burst=100000, client={"key": "peer_ip"},
                       token={"key": "bearer_token"}),
            ])})

    def setUp(self):
        fresh_windows()

    def send(self, who, fg=None, host="test.local", headers=None):
        """With the bearer token the second policy needs, unless `headers` are given."""
        return super().send(who, fg, host, headers or [("Authorization", "Bearer t")])

    def test_an_exhausted_burst_is_429_with_retry_after_and_the_policy(self):
        for _ in range(3):
            self.assertEqual(self.send("burst").status, 200)
        self.assertExhausted(self.send("burst"), "burst_quota_exhausted", "tenants", HOUR)
        self.assertEqual(self.send("another").status, 200)  # identities are counted apart
        entry = poll(lambda: [e for e in self.fg.access_log_entries()
                              if e.get("reason") == "burst_quota_exhausted"],
                     what="the access log record")[0]
        self.assertEqual(entry["quota"], "tenants")

    def test_a_missing_or_overlong_identity_is_refused_without_a_fallback(self):
        r = self.fg.request("GET", "/x", headers=[("Authorization", "Bearer t")])
        self.assertGenerated(r, 429, "selector_identity_missing")
        self.assertEqual(r.header_values("x-floodgate-quota"), ["tenants"], r)
        self.assertFalse(r.has_header("retry-after"), r)
        r = self.send("x" * 257, headers=[("Authorization", "Bearer t")])
        self.assertGenerated(r, 429, "selector_identity_invalid")
        r = self.fg.request("GET", "/x", headers=tenant("id-ok"))  # no token: the second's
        self.assertGenerated(r, 429, "selector_identity_missing")
        self.assertEqual(r.header_values("x-floodgate-quota"), ["clients"], r)

    def test_the_backend_holds_at_most_4096_buckets(self):
        live = int(self.metric("floodgate_quota_buckets", table="in_memory"))
        names = ["bound-%d" % i for i in range(4098 - live)]  # one more than there is room for
        statuses = []
        with self.fg.conn() as c:
            for at in range(0, len(names), 200):  # pipelined, 200 at a time
                batch = names[at:at + 200]
                c.send(b"".join(b"GET /x HTTP/1.1\r\nHost: t\r\nX-Tenant: %s\r\n"
                                b"Authorization: Bearer b\r\n\r\n" % n.encode() for n in batch))
                statuses += [c.read_response().status for _ in batch]
        first = statuses.index(503)
        self.assertEqual(set(statuses[:first]), {200})
        self.assertEqual(self.metric("floodgate_quota_buckets", table="in_memory"), 4096)
        r = self.send("bound-new", headers=[("Authorization", "Bearer b")])
        self.assertGenerated(r, 503, "backend_unavailable")
        self.assertEqual(self.send("bound-0", headers=[("Authorization", "Bearer b")]).status,
                         200)  # a known identity still has its bucket


class ShadowQuota(QuotaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.app])],
            resilience={"quota": quota([policy("watch", burst=1)], enforcement="shadow")})

    def test_a_shadow_denial_is_counted_and_the_request_served(self):
        fresh_windows()
        self.assertEqual(self.send("s").status, 200)
        self.assertEqual(self.send("s").status, 200)
        self.assertEqual(self.metric("floodgate_shadow_rejections_total", stage="quota",
                                     reason="burst_quota_exhausted"), 1)
        self.assertEqual(self.metric("floodgate_quota_decisions_total", policy="watch",
                                     outcome="burst_quota_exhausted"), 1)
        entry = poll(lambda: [e for e in self.fg.access_log_entries()
                              if e.get("would_reject") == "burst_quota_exhausted"],
                     what="the access log record")[0]
        self.assertEqual(entry["quota"], "watch")


class RedisQuota(QuotaTestCase):
    """Two floodgate processes on one Redis."""

    POLICIES = [
        policy("first", burst=2, sustained=3, only=["order"]),
        policy("second", burst=10, only=["order"]),
        policy("shared", burst=5, only=["shared"]),
        policy("both", burst=2, sustained=3, only=["both"]),
        policy("reloaded", burst=5, only=["reload"]),
    ]
    UPSTREAMS = ("order", "shared", "both", "reload")

    @classmethod
    def setUpClass(cls):
        cls.redis = RedisServer()
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        ups = [upstream(name, [cls.app]) for name in cls.UPSTREAMS]
        routes = [route(name, host=name + ".test") for name in cls.UPSTREAMS]
        cls.fg = cls.start_floodgate(ups, routes=routes, workers=2,
                                     resilience={"quota": quota(cls.POLICIES, cls.redis)})
        cls.fg2 = cls.start_floodgate(ups, routes=routes, workers=2,
                                      resilience={"quota": quota(cls.POLICIES, cls.redis)})

    @classmethod
    def tearDownClass(cls):
        try:
            cls.fg2.stop()
            cls.fg2.cleanup()
            super().tearDownClass()
        finally:
            cls.redis.kill()

    def setUp(self):
        fresh_windows()

    def keys(self, pattern):
        return sorted(k for k in self.redis.cli("--scan", "--pattern", pattern).split() if k)

    def test_two_instances_on_one_redis_enforce_one_quota(self):
        statuses = [self.send("one", fg=fg, host="shared.test").status
                    for _ in range(6) for fg in (self.fg, self.fg2)]
        self.assertEqual(statuses.count(200), 5, statuses)
        self.assertEqual(statuses.count(429), 7, statuses)

    def test_a_denial_counts_in_no_window_and_keys_hold_no_raw_identity(self):
        for _ in range(2):
            self.assertEqual(self.send("acme", host="both.test").status, 200)
        for _ in range(3):
            self.assertExhausted(self.send("acme", host="both.test"), "burst_quota_exhausted",
                                 "both", HOUR)
        burst, sustained = self.keys("floodgate:quota:{both:*")
        self.assertTrue(burst.endswith("}:burst") and sustained.endswith("}:sustained"))
        self.assertNotIn("acme", burst + sustained)
        self.assertEqual(self.redis.cli("GET", burst), "2")
        self.assertEqual(self.redis.cli("GET", sustained), "2")  # the denials took nothing
        ttl = int(self.redis.cli("PTTL", sustained))
        self.assertTrue(0 < ttl <= 24 * HOUR * 1000, ttl)

    def test_policies_run_in_order_and_an_enforced_denial_stops_the_later_ones(self):
        for _ in range(2):
            self.assertEqual(self.send("ord", host="order.test").status, 200)
        for _ in range(4):
            r = self.send("ord", host="order.test")
            self.assertExhausted(r, "burst_quota_exhausted", "first", HOUR)
        (second,) = self.keys("floodgate:quota:{second:*")
        self.assertEqual(self.redis.cli("GET", second), "2")

    def test_a_flushed_script_is_loaded_again(self):
        before = self.metric("floodgate_quota_redis_noscript_total")
        self.redis.cli("SCRIPT", "FLUSH")
        for fg in (self.fg, self.fg, self.fg2):
            self.assertEqual(self.send("flush-%d" % id(fg), fg=fg, host="shared.test").status, 200)
        self.assertGreater(self.metric("floodgate_quota_redis_noscript_total"), before)

    def test_a_reload_changing_the_policies_under_load_answers_only_200_and_429(self):
        seen, stop = [], threading.Event()

        def load():
            with self.fg.conn() as c:
                while not stop.is_set():
                    c.send(b"GET /x HTTP/1.1\r\nHost: reload.test\r\nX-Tenant: r\r\n\r\n")
                    seen.append(c.read_response().status)

        t = threading.Thread(target=load)
        t.start()
        try:
            poll(lambda: len(seen) > 20, what="traffic before the reload")
            changed = self.POLICIES[:4] + [policy("reloaded", burst=50, only=["reload"])]
            self.reload({"quota": quota(changed, self.redis)})
            n = len(seen)
            poll(lambda: len(seen) > n + 20, what="traffic after the reload")
        finally:
            stop.set()
            t.join()
        self.assertEqual(set(seen) - {200, 429}, set(), seen)
        self.assertGreater(seen.count(200), 5)  # the new limit applies to the same counter


class RedisMissingKey(QuotaTestCase):
    """missing_key on policies keyed by a tenant header, in Redis (issue 35): "skip" lets a
    request without the tenant through uncounted, "peer" counts it by its client's address (from
    the trusted proxy 127.0.0.2, the X-Forwarded-For address it appended). The default, "refuse"
    (429 selector_identity_missing), is InMemoryQuota's. nginx does not count a request whose
    limit_req key is empty, which is "skip"."""

    @classmethod
    def setUpClass(cls):
        cls.redis = RedisServer()
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        skip = dict(policy("anon-skip", burst=2, only=["skip"]), missing_key="skip")
        peer = dict(policy("anon-peer", burst=1, only=["peer"]), missing_key="peer")
        names = ("skip", "peer")
        cls.fg = cls.start_floodgate(
            [upstream(name, [cls.app]) for name in names],
            routes=[route(name, host=name + ".test") for name in names],
            server={"trusted_proxies": ["127.0.0.2"]},
            resilience={"quota": quota([skip, peer], cls.redis)})

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.redis.kill()

    def setUp(self):
        fresh_windows()

    def anonymous(self, host, client=None):
        if client is None:
            return self.fg.request("GET", "/x", host=host)
        return self.fg.request("GET", "/x", host=host, source="127.0.0.2",
                               headers=[("X-Forwarded-For", client)])

    def test_skip_lets_a_request_without_the_tenant_through_uncounted(self):
        skipped = self.metric("floodgate_quota_decisions_total", policy="anon-skip",
                              outcome="skipped")
        for _ in range(5):  # burst 2: were they counted, the third would be refused
            self.assertEqual(self.anonymous("skip.test").status, 200)
        self.assertEqual(self.metric("floodgate_quota_decisions_total", policy="anon-skip",
                                     outcome="skipped") - skipped, 5)
        for _ in range(2):
            self.assertEqual(self.send("t", host="skip.test").status, 200)
        self.assertExhausted(self.send("t", host="skip.test"), "burst_quota_exhausted",
                             "anon-skip", HOUR)

    def test_peer_counts_a_request_without_the_tenant_by_its_client(self):
        self.assertEqual(self.anonymous("peer.test", "198.51.100.1").status, 200)
        self.assertExhausted(self.anonymous("peer.test", "198.51.100.1"),
                             "burst_quota_exhausted", "anon-peer", HOUR)
        self.assertEqual(self.anonymous("peer.test", "198.51.100.2").status, 200)
        keys = sorted(k for k in self.redis.cli("--scan", "--pattern",
                                                "floodgate:quota:{anon-peer*").split() if k)
        self.assertEqual(len(keys), 2, keys)  # one per client, and no raw address in them
        self.assertFalse([k for k in keys if "198.51.100" in k], keys)

    def test_check_notes_what_each_policy_does_without_the_tenant(self):
        p = subprocess.run([floodgate_bin(), "check", "-c", self.fg.config_path, "--format",
                            "json"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        notes = {n["path"]: n["message"] for n in json.loads(p.stdout)["notes"]}
        without = 'a request without selector.tenant.key = "header:x-tenant" '
        self.assertEqual(notes, {
            "resilience.quota.policies[0].missing_key":
                without + "is not counted by this policy and passes it (missing_key = \"skip\"); "
                'floodgate_quota_decisions_total{outcome="skipped"} counts such requests',
            "resilience.quota.policies[1].missing_key":
                without + "is counted with its client's address in place of the missing "
                "identity (as client_ip gives it, server.trusted_proxies honoured), one count "
                'per client (missing_key = "peer")'})


class RedisFailures(QuotaTestCase):
    """One Redis and three floodgates that differ in what they do when it fails."""

    @classmethod
    def setUpClass(cls):
        cls.redis = RedisServer()
        cls.app = Backend("app").start()
        cls.backends = [cls.app]
        ups = [upstream("app", [cls.app])]
        policies = [policy("p", burst=2)]
        cls.open = cls.start_floodgate(ups, resilience={"quota": quota(
            policies, cls.redis, backend_failure_policy="fail_open")})
        cls.fg = cls.start_floodgate(ups, resilience={"quota": quota(
            policies, cls.redis, backend_failure_policy="fail_closed")})
        cls.fallback = cls.start_floodgate(ups, resilience={"quota": quota(
            policies, cls.redis, backend_failure_policy="fail_closed",
            local_fallback={"max_entries": 100})})
        cls.others = (cls.open, cls.fallback)

    @classmethod
    def tearDownClass(cls):
        try:
            for fg in cls.others:
                fg.stop()
                fg.cleanup()
            super().tearDownClass()
        finally:
            cls.redis.kill()

    def setUp(self):
        fresh_windows()
        if self.redis.proc.poll() is not None:
            self.redis.start()
        self.recovered()

    def recovered(self):
        """Each instance's link is ready again and decides on Redis (not on its fallback)."""
        for fg in (self.open, self.fg, self.fallback):
            poll(lambda: fg.metrics().value("floodgate_quota_redis_links_ready") == 1,
                 timeout=15, what="the link to Redis ready again")
            before = fg.metrics().value("floodgate_quota_backend_decisions_total", backend="redis")
            self.assertEqual(self.send("probe-%d" % time.monotonic_ns(), fg=fg).status, 200)
            self.assertEqual(fg.metrics().value("floodgate_quota_backend_decisions_total",
                                                backend="redis"), before + 1)

    def test_a_dead_redis_is_fail_open_fail_closed_or_the_local_fallback(self):
        self.redis.kill()
        self.assertEqual(self.send("dead", fg=self.open).status, 200)
        started = time.monotonic()
        r = self.send("dead", fg=self.fg)
        self.assertGenerated(r, 503, "backend_unavailable")
        self.assertEqual(r.header("retry-after"), "1", r)
        self.assertEqual(r.header_values("x-floodgate-quota"), ["p"], r)
        self.assertLess(time.monotonic() - started, 2)
        statuses = [self.send("dead", fg=self.fallback).status for _ in range(4)]
        self.assertEqual(statuses, [200, 200, 429, 429])  # the instance's own counters
        self.assertExhausted(self.send("dead", fg=self.fallback), "burst_quota_exhausted", "p",
                             HOUR)
        self.assertGreater(self.fallback.metrics().value(
            "floodgate_quota_backend_decisions_total", backend="fallback"), 0)
        self.redis.start()  # on the same port: floodgate recovers by itself
        self.recovered()

    def test_a_stalled_redis_is_backend_timeout_after_command_timeout(self):
        self.redis.proc.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            r = self.send("stalled", fg=self.fg)
            elapsed = time.monotonic() - started
            self.assertGenerated(r, 503, "backend_timeout")
            self.assertGreaterEqual(elapsed, 0.09)
            self.assertLess(elapsed, 2)
            started = time.monotonic()
            r = self.send("stalled", fg=self.fg)  # the link now fails fast while it probes
            self.assertEqual(r.status, 503, r)
            self.assertLess(time.monotonic() - started, 2)
        finally:
            self.redis.proc.send_signal(signal.SIGCONT)
        self.recovered()
        self.assertGreater(self.metric("floodgate_quota_redis_timeouts_total"), 0)


class RedisLinkLog(QuotaTestCase):
    """The process log says why the quota's answers are 503s (issue 35). Before, a wrong
    password, a Redis that could not be reached, or one that stalled turned every quota decision
    into the failure policy's answer and nothing was logged: the operator saw 503s
    backend_error / backend_unavailable and had to guess."""

    fg = None

    def tearDown(self):
        for r in getattr(self, "servers", []):
            if r.proc is not None and r.proc.poll() is None:
                r.kill()
        if self.fg is not None:
            self.fg.stop()
            self.fg.cleanup()
            self.fg = None

    def start_with(self, url):
        self.app = Backend("app").start()
        self.addCleanup(self.app.stop)
        self.fg = self.start_floodgate([upstream("app", [self.app])], resilience={"quota": quota(
            [policy("p", burst=2)], backend_failure_policy="fail_closed",
            backend={"kind": "redis", "url": url, "command_timeout": "100ms"})})

    def log(self):
        return self.fg.stderr_bytes().decode("utf-8", "replace")

    def test_a_wrong_password_is_logged_with_redis_s_reason_and_not_the_password(self):
        redis = RedisServer("--requirepass", "the-right-one")
        self.servers = [redis]
        self.start_with("redis://:not-the-password-42@127.0.0.1:%d/0" % redis.port)
        r = self.send("w")
        self.assertEqual(r.status, 503, r)
        self.assertIn(r.header("x-floodgate-reason"), ("backend_error", "backend_unavailable"), r)
        where = "Redis at 127.0.0.1:%d: AUTH failed (" % redis.port
        line = poll(lambda: [l for l in self.log().splitlines() if where in l],
                    what="the AUTH failure in the log")[0]
        self.assertTrue("WRONGPASS" in line or "invalid password" in line, line)
        self.assertIn("backend_failure_policy", line)
        self.assertIn("next connect in", line)
        self.assertNotIn("not-the-password-42", self.log())
        self.assertNotIn("the-right-one", self.log())

    def test_an_unreachable_redis_is_logged_then_its_recovery(self):
        redis = RedisServer(start=False)
        self.servers = [redis]
        self.start_with(redis.url())
        self.assertEqual(self.send("u").status, 503)
        where = "Redis at 127.0.0.1:%d: connect failed (" % redis.port
        poll(lambda: where in self.log(), what="the connect failure in the log")
        self.assertNotIn("reachable again", self.log())
        redis.start()  # the link's next probe finds it by itself
        line = poll(lambda: [l for l in self.log().splitlines()
                             if "Redis at 127.0.0.1:%d is reachable again after" % redis.port in l],
                    timeout=15, what="the recovery line")[0]
        self.assertRegex(line, r"after \d+ failure\(s\) over \d+\.\d s")
        self.assertEqual(self.send("u").status, 200)


if __name__ == "__main__":
    unittest.main()
