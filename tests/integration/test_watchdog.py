"""The watchdog ([resilience.watchdog], docs/operations.md "Watchdog") end to end: a reactor
stalled on purpose (the test-only fault hook POST /fault/stall of floodgate-faults, which builds
with FLOODGATE_FAULT_HOOKS=ON make beside floodgate)
makes floodgate drain (/healthz 503, new connections refused), then run restart_command once
with its arguments as configured (no shell), then serve again; without restart_command it only
reports; under systemd with WATCHDOG_USEC it withholds WATCHDOG=1 while a reactor is stalled;
`floodgate check` refuses restart_hook. Its timeout_rate cause needs timeouts on
min_timeout_spread backends at once: one slow endpoint on one backend is not a wedged floodgate,
timeouts on two backends are. Every wait polls with a deadline."""

import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
import unittest
from unittest import mock

from backend import Backend
from harness import (NO_BREAKER, Conn, Floodgate, OwnFloodgateTestCase, build_request,
                     floodgate_bin, floodgate_faults_bin, poll, refuses_connections, route,
                     upstream)
from test_systemd import NotifySocket

# Short windows so that a test takes a few seconds: a stall is seen after poll_stall_timeout
# (300 ms) plus at most one check, and acted on at the second unhealthy check in a row.
WATCHDOG = {"enabled": True, "check_interval": "100ms", "poll_stall_timeout": "300ms",
            "unhealthy_consecutive_windows": 2, "drain_grace": "2s", "restart_cooldown": "60s"}
# A stall long enough to be acted on, short enough to end well inside drain_grace (the stalled
# reactor pauses its listener once it turns again).
STALL_MS = 1200


# The fault hooks change floodgate, so like activate they need the admin token.
TOKEN = "watchdog-test-token-0123456789"


def admin_post(port, path, body):
    with Conn(port) as c:
        return c.request("POST", path, body=json.dumps(body).encode(),
                         host="127.0.0.1:%d" % port,
                         headers=[("Connection", "close"), ("Authorization", "Bearer " + TOKEN)])


def healthz(fg):
    with Conn(fg.admin_port) as c:
        r = c.request("GET", "/healthz", host="127.0.0.1", headers=[("Connection", "close")])
    return r.status, r.body.decode()


def text_of(path):
    """The file's text, "" while it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def recorder(tmp):
    """An executable in `tmp` that appends its arguments, one per line, then a line "--", to a
    file; returns (its path, the file's path)."""
    script = os.path.join(tmp, "restart.sh")
    record = os.path.join(tmp, "calls.txt")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nfor a in \"$@\"; do printf '%%s\\n' \"$a\"; done >> %s\n"
                "echo -- >> %s\n" % (record, record))
    os.chmod(script, stat.S_IRWXU)
    return script, record


class Watchdog(OwnFloodgateTestCase):
    """Each test runs its own floodgate (self.fg)."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="floodgate-watchdog-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def tearDown(self):
        if self.fg is not None:
            rc = self.fg.stop()
            self.fg.cleanup()
            self.assertEqual(rc, 0, "floodgate exited with %r after SIGTERM" % rc)

    def start(self, watchdog=None, fg_class=Floodgate, **kwargs):
        resilience = {"watchdog": watchdog} if watchdog is not None else None
        # drain_grace (2 s) may not be shorter than drain_timeout.
        return self.launch(fg_class(upstreams=[upstream("app", [self.backend])], workers=2,
                                    binary=floodgate_faults_bin(),
                                    server={"drain_timeout": "1s"}, resilience=resilience,
                                    admin={"token": TOKEN}, **kwargs))

    def stall(self, reactor=0, ms=STALL_MS):
        r = admin_post(self.fg.admin_port, "/fault/stall", {"reactor": reactor, "ms": ms})
        self.assertEqual(r.status, 200, r)
        return time.monotonic()

    def recorder(self):
        return recorder(self.tmp)

    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels)

    def test_a_stalled_reactor_drains_then_runs_the_restart_command_once_then_serves(self):
        script, record = self.recorder()
        command = [script, "--reason", "two words", "$HOME", ""]
        self.start(dict(WATCHDOG, restart_command=command))
        self.assertEqual(healthz(self.fg)[0], 200)
        self.stall()

        status, body = poll(lambda: (lambda s: s if s[0] == 503 else None)(healthz(self.fg)),
                            what="/healthz to answer 503 during the watchdog's drain")
        self.assertIn("watchdog", body)
        self.assertIn("poll_stall", body)
        self.assertEqual(self.metric("floodgate_watchdog_draining"), 1)
        poll(lambda: refuses_connections(self.fg.port),
             what="new connections to be refused once the stalled reactor turns again")
        self.assertEqual(text_of(record), "", "restart_command ran before drain_grace")

        poll(lambda: text_of(record).endswith("--\n"),
             what="restart_command to run after drain_grace")
        poll(lambda: healthz(self.fg)[0] == 200, what="/healthz 200 once restart_command ran")
        # Every reactor accepts again: SO_REUSEPORT spreads these over both listeners, and a
        # listener left paused would refuse some, one left unpolled would leave some unanswered.
        for _ in range(20):
            self.assertEqual(self.fg.get("/echo").status, 200)
        poll(lambda: self.metric("floodgate_watchdog_restarts_total") == 1,
             what="floodgate_watchdog_restarts_total 1")
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_watchdog_drains_total"), 1)
        self.assertEqual(m.value("floodgate_watchdog_draining"), 0)
        self.assertEqual(m.value("floodgate_watchdog_restart_failures_total"), 0)
        self.assertGreaterEqual(
            m.value("floodgate_watchdog_unhealthy_windows_total", cause="poll_stall"), 2)
        self.assertEqual(m.value("floodgate_watchdog_unhealthy_windows_total",
                                 cause="timeout_rate"), 0)
        # Once, each argument as configured: no shell, no splitting, no expansion.
        self.assertEqual(text_of(record), "--reason\ntwo words\n$HOME\n\n--\n")

    def test_without_a_restart_command_a_stall_is_only_reported(self):
        self.start(dict(WATCHDOG))
        self.stall()
        poll(lambda: self.metric("floodgate_watchdog_reports_total") >= 1,
             what="the watchdog to report the stall")
        self.assertEqual(healthz(self.fg)[0], 200)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_watchdog_drains_total"), 0)
        self.assertEqual(m.value("floodgate_watchdog_draining"), 0)
        self.assertGreaterEqual(
            m.value("floodgate_watchdog_unhealthy_windows_total", cause="poll_stall"), 2)
        self.assertEqual(self.fg.get("/echo").status, 200)  # served once the stall is over

    def test_under_systemd_a_stalled_reactor_withholds_watchdog_keep_alives(self):
        notify = NotifySocket()
        self.addCleanup(notify.close)
        with mock.patch.dict(os.environ, {"NOTIFY_SOCKET": notify.path,
                                          "WATCHDOG_USEC": "400000"}):
            self.start(watchdog=None)  # [resilience.watchdog] off: systemd's watchdog alone

        def keep_alives_until(deadline):
            arrivals = []
            while time.monotonic() < deadline:
                try:
                    _, fields = notify.receive(timeout=max(0.01, deadline - time.monotonic()))
                except AssertionError:
                    break
                if fields.get("WATCHDOG") == "1":
                    arrivals.append(time.monotonic())
            return arrivals

        before = keep_alives_until(time.monotonic() + 1.0)
        self.assertGreaterEqual(len(before), 3, "WATCHDOG=1 every 200 ms expected")
        began = self.stall(ms=1500)
        during = keep_alives_until(began + 1.3)
        after = keep_alives_until(began + 3.0)
        # Fresh means no ping unanswered for 200 ms (half of WATCHDOG_USEC): at most the
        # keep-alives of the stall's first moments, then none until the reactor turns again.
        self.assertTrue(all(t < began + 0.5 for t in during), (began, during))
        self.assertTrue(any(t > began + 1.5 for t in after), "no WATCHDOG=1 after the stall")

    def test_the_shipped_unit_asks_systemd_for_keep_alives(self):
        unit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "config",
                            "floodgate.service")
        self.assertRegex(text_of(unit), r"(?m)^WatchdogSec=30s$")

    def test_check_refuses_restart_hook_and_names_restart_command(self):
        path = os.path.join(self.tmp, "floodgate.toml")
        with open(path, "w") as f:
            f.write('[[upstreams]]\nname = "app"\nservers = ["127.0.0.1:9000"]\n'
                    '[[routes]]\nupstream = "app"\n'
                    '[resilience.watchdog]\nrestart_hook = "/usr/local/bin/restart-floodgate"\n')
        p = subprocess.run([floodgate_bin(), "check", "-c", path], capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 1, p)
        out = p.stdout.decode()
        self.assertIn("resilience.watchdog.restart_hook", out)
        self.assertIn('restart_command = ["/usr/local/bin/restart-floodgate"]', out)

    def test_floodgate_itself_has_no_fault_hooks_and_floodgate_faults_says_it_has(self):
        # The binary operators run (and the package installs) answers /fault/stall like any
        # unknown admin path, even with the token; only floodgate-faults stalls a reactor.
        self.fg = self.launch(Floodgate(upstreams=[upstream("app", [self.backend])],
                                        admin={"token": TOKEN}))
        r = admin_post(self.fg.admin_port, "/fault/stall", {"reactor": 0, "ms": 10})
        self.assertEqual(r.status, 404, r)
        plain = subprocess.run([floodgate_bin(), "--version"], capture_output=True, timeout=30)
        faults = subprocess.run([floodgate_faults_bin(), "--version"], capture_output=True,
                                timeout=30)
        self.assertNotIn(b"fault hooks", plain.stdout)
        self.assertIn(b"test fault hooks", faults.stdout)


class TimeoutRate(OwnFloodgateTestCase):
    """timeout_rate holds only when upstream timeouts spread over min_timeout_spread (2)
    backends at once. nginx (max_fails / fail_timeout) and HAProxy (observe layer7, on-error)
    judge upstream timeouts per server and take at most that server out of rotation; neither
    restarts itself over them. floodgate's watchdog judged every request of a window together,
    so 40 requests to one endpoint slower than response_timeout on one backend, while the other
    backend and routes were healthy, made it drain, refuse every connection and run
    restart_command: a restart that cures nothing, since the slow backend stays slow."""

    WATCHDOG = {"enabled": True, "check_interval": "200ms", "timeout_error_rate_percent": 50,
                "min_requests_per_window": 10, "unhealthy_consecutive_windows": 1,
                "drain_grace": "1s", "restart_cooldown": "60s"}
    SLOW = 40  # requests in each burst to the slow endpoint, all at once

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.b = Backend("b").start()
        cls.backends = [cls.a, cls.b]

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="floodgate-watchdog-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def tearDown(self):
        if self.fg is not None:
            rc = self.fg.stop()
            self.fg.cleanup()
            self.assertEqual(rc, 0, "floodgate exited with %r after SIGTERM" % rc)

    def start(self, slow_backends):
        """floodgate with pool "app" over both backends (every route but one) and pool "reports"
        over `slow_backends` with a response_timeout of 300 ms (host reports.test); a
        restart_command that records its runs."""
        self.script, self.record = recorder(self.tmp)
        resilience = dict(NO_BREAKER, watchdog=dict(self.WATCHDOG, restart_command=[self.script]),
                          inflight={"max_inflight": 0},
                          adaptive_admission={"enabled": False})
        self.launch(Floodgate(
            upstreams=[upstream("app", [self.a, self.b]),
                       upstream("reports", slow_backends, response_timeout="300ms")],
            routes=[route("reports", host="reports.test"), route("app")], workers=2,
            server={"drain_timeout": "1s"}, resilience=resilience))

    def burst(self, healthy=10):
        """SLOW requests at once to the slow endpoint (each times out), and meanwhile `healthy`
        requests to pool "app"; returns the slow requests' statuses (None: no answer, e.g.
        refused during a drain)."""
        conns = []
        try:
            for i in range(self.SLOW):
                try:
                    c = Conn(self.fg.port)
                    c.send(build_request("GET", "/slow-head?ms=1500&i=%d" % i,
                                         host="reports.test"))
                    conns.append(c)
                except OSError:
                    conns.append(None)
            for i in range(healthy):
                self.assertEqual(self.fg.get("/echo?healthy=%d" % i).status, 200)
            statuses = []
            for c in conns:
                try:
                    statuses.append(c.read_response().status if c is not None else None)
                except (OSError, AssertionError):
                    statuses.append(None)
            return statuses
        finally:
            for c in conns:
                if c is not None:
                    c.close()

    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels)

    def test_one_slow_endpoint_on_one_backend_is_not_a_wedged_process(self):
        self.start([self.a])
        for _ in range(3):
            self.assertEqual(self.burst(), [504] * self.SLOW)
        # The windows of the last burst and four more are judged within a second.
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            self.assertEqual(self.metric("floodgate_watchdog_unhealthy_windows_total",
                                         cause="timeout_rate"), 0)
            time.sleep(0.05)
        self.assertGreaterEqual(
            self.metric("floodgate_backend_failures_total", upstream="reports",
                        backend=self.a.address, reason="upstream_timeout"), 3 * self.SLOW)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_watchdog_drains_total"), 0)
        self.assertEqual(m.value("floodgate_watchdog_draining"), 0)
        self.assertEqual(healthz(self.fg)[0], 200)
        self.assertEqual(self.fg.get("/echo").status, 200)
        self.assertEqual(text_of(self.record), "", "restart_command ran")

    def test_timeouts_on_two_backends_at_once_still_drain_and_restart(self):
        self.start([self.a, self.b])

        def drained():
            self.burst(healthy=0)
            return self.metric("floodgate_watchdog_drains_total") >= 1

        poll(drained, timeout=30, what="a drain for timeouts on both backends")
        self.assertGreaterEqual(self.metric("floodgate_watchdog_unhealthy_windows_total",
                                            cause="timeout_rate"), 1)
        poll(lambda: text_of(self.record) == "--\n", what="restart_command to run once")
        poll(lambda: healthz(self.fg)[0] == 200, what="/healthz 200 once restart_command ran")
        self.assertEqual(self.fg.get("/echo").status, 200)


if __name__ == "__main__":
    unittest.main()
