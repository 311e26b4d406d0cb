"""Failure handling end to end (issue 13): circuit breakers, the one budgeted retry to another
backend, and hedging, through the binary with real loopback backends.

- A backend that refuses connections, resets them, times out or answers 503 opens its circuit
  after failure_threshold failures (min_requests = 1, no rate rule, 503 listed in
  failure_statuses: configured here, the defaults are test_breaker_defaults.py's), gets no
  traffic while open, and comes back through a half-open probe once it answers again; /status
  and the metrics show it.
- When every backend's circuit is open: 503 circuit_open with Retry-After (reject), or the
  request goes to the backend that failed least recently (least_recently_failed); in shadow
  mode it goes to the backend and would_reject says circuit_open.
- A GET whose backend is dead succeeds on another with one retry (the access log shows both
  backends); a POST, a GET with a body, an upgrade and a malformed response are not retried.
- A pool whose every backend fails: retries sent <= 10% of primaries + 1 in the window.
- A backend killed under wrk load fails no request that could be retried.
- Hedging: with one slow backend in three, a GET that went to it is answered by another after
  `delay`; the slow attempt is cancelled (its connection closed, its counts back to 0); a POST
  is never hedged.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import unittest

from backend import Backend, RawServer
from harness import FloodgateTestCase, admin_get, chunked, free_port, poll, route, upstream

OPEN_S = 2.0  # circuit_breaker.open in these tests
SLOW_S = 1.0  # how long a "slow" backend takes to answer
THRESHOLD = 3


class FailingBackend(RawServer):
    """A backend whose behaviour the test switches: "ok" (200 with its name), "slow" (the same
    after SLOW_S), "503", "reset"
    (RST instead of a response), "timeout" (reads the request, never answers), "malformed"
    (a garbage status line), or "refuse" (its listener closed: connections are refused; the
    port is kept and listened on again when switched back). Counts the requests it read."""

    def __init__(self, name, mode):
        self.name = name
        self.mode = "ok"
        self.requests = 0
        self.cond = threading.Condition()
        self.release = threading.Event()
        super().__init__()
        self.port = int(self.address.rsplit(":", 1)[1])
        self.switch(mode)

    def switch(self, mode):
        if mode == "refuse" and self.mode != "refuse":
            super().stop()
            poll(self._refused, what="connections to %s refused" % self.address)
        elif mode != "refuse" and self.mode == "refuse":
            RawServer.__init__(self, port=self.port)  # listen again, on the same port
        self.mode = mode

    def _refused(self):
        # The listener dies once the accept thread's select() lets go of it, not at close().
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True

    def stop(self):
        self.release.set()
        if self.mode != "refuse":
            super().stop()

    def count(self):
        with self.cond:
            return self.requests

    def serve(self, sock, _state):
        sock.settimeout(30)
        try:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                _, _, buf = buf.partition(b"\r\n\r\n")
                with self.cond:
                    self.requests += 1
                mode = self.mode
                if mode == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                    return
                if mode == "timeout":
                    self.release.wait(30)
                    return
                if mode == "malformed":
                    sock.sendall(b"NOT-HTTP garbage\r\n\r\n")
                    return
                if mode == "slow" and self.release.wait(SLOW_S):
                    return
                status = b"503 Service Unavailable" if mode == "503" else b"200 OK"
                body = self.name.encode()
                sock.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\n"
                             b"X-Backend-Name: %s\r\n\r\n%s" % (len(body), body, body))
        except OSError:
            pass
        finally:
            sock.close()


def breaker(**keys):
    """Issue 13's rule, written out (issue 35 changed the defaults, test_breaker_defaults.py
    tests those): THRESHOLD failures in a row open a circuit whatever the traffic, 502, 503 and
    504 count, and every circuit open is 503 circuit_open."""
    cb = {"failure_threshold": THRESHOLD, "min_requests": 1, "failure_rate_percent": 0,
          "failure_statuses": [502, 503, 504], "when_all_open": "reject",
          "open": "%dms" % int(OPEN_S * 1000)}
    cb.update(keys)
    return cb


class CircuitBreakers(FloodgateTestCase):
    """One pool per failure kind, each a good backend and a failing one, one route each."""

    KINDS = ("refuse", "reset", "timeout", "503")

    @classmethod
    def setUpClass(cls):
        cls.good = Backend("good").start()
        cls.bad = {kind: FailingBackend("bad-" + kind, kind) for kind in cls.KINDS}
        cls.all_open = [FailingBackend("all-open-%d" % i, "503") for i in range(2)]
        ups, routes = [], []
        for kind in cls.KINDS:
            ups.append(upstream(kind, [cls.good, cls.bad[kind].address],
                                response_timeout="300ms", connect_timeout="1s"))
            routes.append(route(kind, path_prefix="/" + kind + "/"))
        ups.append(upstream("all-open", [cls.all_open[0].address]))
        routes.append(route("all-open", path_prefix="/all-open/"))
        cls.fg = cls.start_floodgate(
            ups, routes=routes, workers=1,
            resilience={"circuit_breaker": breaker(), "retry_budget": {"ratio_percent": 100}})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.good.stop()
        for b in list(cls.bad.values()) + cls.all_open:
            b.stop()

    def state(self, pool, address):
        return self.fg.metrics().value("floodgate_circuit_state", upstream=pool, backend=address)

    def failures(self, kind):
        """Attempts that reached the failing backend (a refused one: that tried to connect)."""
        if kind == "refuse":
            return self.fg.metrics().value("floodgate_upstream_connect_failures_total",
                                           upstream=kind)
        return self.bad[kind].count()

    def peer_status(self, pool, address):
        _, _, body = admin_get(self.fg.admin_port, "/status")
        p = next(p for p in json.loads(body)["pools"] if p["name"] == pool)
        return next(peer for peer in p["backends"] if peer["address"] == address)

    def test_each_failure_kind_opens_the_circuit_and_a_probe_closes_it(self):
        for kind in self.KINDS:
            with self.subTest(kind=kind):
                bad = self.bad[kind]
                address = bad.address
                # Round robin takes turns; a transport failure or a timeout is retried on the
                # good backend (a GET), so the client sees 200 while the breaker counts the
                # failures; a backend's 503 is a response, relayed.
                relayed = 200 if kind != "503" else 503
                for i in range(8 * THRESHOLD):
                    if self.failures(kind) == THRESHOLD:
                        break
                    self.assertEqual(self.state(kind, address), 0, "closed before the threshold")
                    r = self.fg.get("/%s/x?i=%d" % (kind, i))
                    self.assertIn(r.status, (200, relayed), r)
                    self.assertIsNone(r.header("X-Floodgate-Reason"), r)
                self.assertEqual(self.failures(kind), THRESHOLD)
                self.assertEqual(self.state(kind, address), 1, "open after %d failures" % THRESHOLD)
                peer = self.peer_status(kind, address)
                self.assertEqual(peer["circuit"]["state"], "open")
                self.assertGreaterEqual(peer["circuit"]["failure_streak"], THRESHOLD)
                # While open it gets nothing.
                for i in range(6):
                    r = self.fg.get("/%s/open?i=%d" % (kind, i))
                    self.assertEqual(r.status, 200, r)
                    self.assertEqual(r.header("X-Backend-Name"), "good")
                self.assertEqual(self.failures(kind), THRESHOLD, "an open backend got traffic")
                # It answers again; after `open` one probe closes the circuit.
                bad.switch("ok")
                poll(lambda: self.state(kind, address) == 2, timeout=OPEN_S + 5,
                     what="half-open after open")

                def served_by_bad():
                    return self.fg.get("/%s/probe" % kind).header("X-Backend-Name") == bad.name
                poll(served_by_bad, what="the probe reaching the recovered backend")
                self.assertEqual(self.state(kind, address), 0)
                m = self.fg.metrics()
                for frm, to in (("closed", "open"), ("open", "half_open"), ("half_open", "closed")):
                    self.assertEqual(m.value("floodgate_circuit_transitions_total", upstream=kind,
                                             backend=address, **{"from": frm, "to": to}), 1)

    def test_all_open_is_503_circuit_open_with_retry_after(self):
        bad = self.all_open[0]
        for i in range(THRESHOLD):
            r = self.fg.get("/all-open/x?i=%d" % i)
            self.assertEqual(r.status, 503)
            self.assertIsNone(r.header("X-Floodgate-Reason"), "a backend's 503 is relayed as is")
        r = self.fg.get("/all-open/x")
        self.assertEqual(r.status, 503)
        self.assertEqual(r.header("X-Floodgate-Reason"), "circuit_open")
        # Until the half-open, in whole seconds rounded up: open = 2s.
        self.assertIn(int(r.header("Retry-After")), (1, 2))
        self.assertEqual(bad.count(), THRESHOLD)
        self.assertEqual(self.fg.metrics().value("floodgate_circuit_rejected_total",
                                                 upstream="all-open"), 1)
        r = self.fg.request("HEAD", "/all-open/x")
        self.assertEqual(r.status, 503)
        self.assertEqual(r.body, b"")


class LeastRecentlyFailed(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.bad = [FailingBackend("lrf-%d" % i, "503") for i in range(2)]
        cls.fg = cls.start_floodgate(
            [upstream("app", [b.address for b in cls.bad])], workers=1,
            resilience={"circuit_breaker": breaker(when_all_open="least_recently_failed",
                                                   open="60s")})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for b in cls.bad:
            b.stop()

    def test_with_every_circuit_open_the_least_recently_failed_backend_gets_the_request(self):
        # Round robin: 2 x THRESHOLD requests open both circuits, bad[0]'s first (its last
        # failure is the older one).
        for i in range(2 * THRESHOLD):
            self.assertEqual(self.fg.get("/x?i=%d" % i).status, 503)
        m = self.fg.metrics()
        for b in self.bad:
            self.assertEqual(m.value("floodgate_circuit_state", upstream="app", backend=b.address), 1)
        before = [b.count() for b in self.bad]
        r = self.fg.get("/x")
        self.assertEqual(r.status, 503)
        self.assertIsNone(r.header("X-Floodgate-Reason"), "sent to a backend, not rejected")
        self.assertEqual(r.header("X-Backend-Name"), "lrf-0")
        # Its failure is now the latest: the next one goes to the other.
        self.assertEqual(self.fg.get("/x").header("X-Backend-Name"), "lrf-1")
        self.assertEqual([b.count() for b in self.bad], [before[0] + 1, before[1] + 1])


class ShadowBreaker(FloodgateTestCase):
    """mode = "shadow": the breaker opens on the failures, the requests still go to the backend,
    and what enforce mode would have answered is counted and logged."""

    @classmethod
    def setUpClass(cls):
        cls.bad = FailingBackend("shadow-bad", "503")
        cls.fg = cls.start_floodgate([upstream("app", [cls.bad.address])], workers=1,
                                     resilience={"circuit_breaker": breaker(mode="shadow")})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.bad.stop()

    def test_a_shadow_breaker_opens_but_refuses_nothing_and_says_what_it_would_have_done(self):
        for i in range(THRESHOLD):
            self.assertEqual(self.fg.get("/x?i=%d" % i).status, 503)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_circuit_state", upstream="app",
                                 backend=self.bad.address), 1)
        r = self.fg.get("/would")
        self.assertEqual(r.status, 503)
        self.assertIsNone(r.header("X-Floodgate-Reason"), "relayed from the backend")
        self.assertEqual(self.bad.count(), THRESHOLD + 1)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_shadow_rejections_total", stage="circuit_breaker",
                                 reason="circuit_open"), 1)
        self.assertEqual(m.value("floodgate_circuit_rejected_total", upstream="app"), 0)
        entry = poll(lambda: [e for e in self.fg.access_log_entries() if e["target"] == "/would"])
        self.assertEqual(entry[0]["would_reject"], "circuit_open")


class Retries(FloodgateTestCase):
    """A good backend and a dead one (connections refused), breakers off so that every request
    round robin sends to the dead one fails there first; and a pool whose first backend resets
    every request it has read."""

    @classmethod
    def setUpClass(cls):
        cls.good = Backend("good").start()
        cls.dead = "127.0.0.1:%d" % free_port()
        cls.malformed = FailingBackend("malformed", "malformed")
        cls.resetting = FailingBackend("resetting", "reset")
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.dead, cls.good]),
             upstream("bad-response", [cls.malformed.address, cls.good]),
             upstream("resets", [cls.resetting.address, cls.good])],
            routes=[route("bad-response", path_prefix="/malformed/"),
                    route("resets", path_prefix="/sent/"), route("app")],
            workers=1,
            resilience={"circuit_breaker": {"enabled": False},
                        "retry_budget": {"ratio_percent": 100}})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.good.stop()
        cls.malformed.stop()
        cls.resetting.stop()

    def entries_for(self, marker):
        return poll(lambda: [e for e in self.fg.access_log_entries() if marker in e["target"]],
                    what="access log entries for " + marker)

    def test_a_get_to_a_dead_backend_succeeds_on_another_with_one_retry(self):
        for method in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS"):
            with self.subTest(method=method):
                marker = "/retry-%s?" % method
                for i in range(4):  # round robin sends some of them to the dead backend first
                    r = self.fg.request(method, "%si=%d" % (marker, i))
                    self.assertEqual(r.status, 200, r)
                    self.assertIsNone(r.header("X-Floodgate-Reason"))
                entries = poll(lambda: len(self.entries_for(marker)) == 4
                               and self.entries_for(marker))
                retried = [e for e in entries if e["attempts"] == 2]
                self.assertGreaterEqual(len(retried), 1, entries)
                for e in entries:
                    self.assertEqual(e["backend"], self.good.address)
                    self.assertEqual(e["backends"], [self.dead, self.good.address]
                                     if e["attempts"] == 2 else [self.good.address])
        m = self.fg.metrics()
        self.assertGreaterEqual(m.value("floodgate_retries_total", upstream="app",
                                        outcome="succeeded"), 5)

    def test_requests_that_never_left_floodgate_are_retried_whatever_their_method(self):
        # A refused connection carried no byte of the request: no backend can have acted on
        # it, so a POST, a PATCH or a request with a body goes to the next backend (nginx
        # refuses this to non-idempotent requests unless proxy_next_upstream non_idempotent;
        # HAProxy's retry-on conn-failure retries them, as floodgate does).
        cases = [
            ("POST", "/unsent-post", [("Content-Type", "text/plain")], b"abc"),
            ("POST", "/unsent-chunked", [("Transfer-Encoding", "chunked")], chunked(b"abc")),
            ("GET", "/unsent-get-body", [], b"abc"),
            ("PATCH", "/unsent-patch", [], None),
        ]
        for method, target, headers, body in cases:
            with self.subTest(method=method, target=target):
                for i in range(4):  # round robin sends some of them to the dead backend first
                    r = self.fg.request(method, "%s?i=%d" % (target, i), headers=headers,
                                        body=body)
                    self.assertEqual(r.status, 200, r)
                    if body is not None:
                        self.assertEqual(json.loads(r.body)["body"], "abc",
                                         "the body reached the good backend whole")
                entries = poll(lambda: len(self.entries_for(target + "?")) == 4
                               and self.entries_for(target + "?"))
                retried = [e for e in entries if e["attempts"] == 2]
                self.assertGreaterEqual(len(retried), 1, entries)
                for e in retried:
                    self.assertEqual(e["backends"], [self.dead, self.good.address])

    def test_requests_that_may_not_be_retried_get_the_failure(self):
        # The resetting backend read each of these before it reset the connection: a POST or
        # PATCH may have been executed there, and a body is gone.
        cases = [
            ("POST", "/sent/post", [("Content-Type", "text/plain")], b"abc",
             "upstream_reset"),
            ("GET", "/sent/get-body", [], b"abc", "upstream_reset"),
            ("PATCH", "/sent/patch", [], None, "upstream_reset"),
            ("GET", "/no-retry-upgrade", [("Connection", "upgrade"), ("Upgrade", "websocket")],
             None, "upstream_connect_failed"),
        ]
        for method, target, headers, body, reason in cases:
            with self.subTest(method=method, target=target):
                statuses = []
                for i in range(4):
                    r = self.fg.request(method, "%s?i=%d" % (target, i), headers=headers,
                                        body=body)
                    statuses.append((r.status, r.header("X-Floodgate-Reason")))
                self.assertIn((502, reason), statuses)
                entries = poll(lambda: len(self.entries_for(target + "?")) == 4
                               and self.entries_for(target + "?"))
                self.assertTrue(all(e["attempts"] == 1 for e in entries), entries)

    def test_a_malformed_response_is_not_retried(self):
        statuses = [self.fg.get("/malformed/x?i=%d" % i).status for i in range(4)]
        self.assertIn(502, statuses)
        self.assertTrue(all(e["attempts"] == 1 for e in self.entries_for("/malformed/x")))


class RetryBudget(FloodgateTestCase):
    """Every backend of the pool refuses: retries are bounded by the budget."""

    @classmethod
    def setUpClass(cls):
        cls.dead = ["127.0.0.1:%d" % free_port() for _ in range(2)]
        cls.fg = cls.start_floodgate(
            [upstream("app", cls.dead)], workers=2,
            resilience={"circuit_breaker": {"enabled": False},
                        "retry_budget": {"ratio_percent": 10, "window": "60s"}})

    def test_a_failing_pool_retries_at_most_ten_percent_of_primaries_plus_one(self):
        n = 60
        for i in range(n):
            r = self.fg.get("/x?i=%d" % i)
            self.assertEqual(r.status, 502)
            self.assertEqual(r.header("X-Floodgate-Reason"), "upstream_connect_failed")
        m = self.fg.metrics()
        sent = m.value("floodgate_retries_total", upstream="app", outcome="sent")
        denied = m.value("floodgate_retries_total", upstream="app", outcome="denied_budget")
        self.assertLessEqual(sent, n * 10 // 100 + 1)
        self.assertGreaterEqual(sent, 1)
        self.assertEqual(sent + denied, n)
        self.assertEqual(m.value("floodgate_retries_total", upstream="app", outcome="failed"), sent)
        self.assertEqual(m.value("floodgate_retry_budget_remaining", upstream="app"), 0)


class RetryBudgetFloor(FloodgateTestCase):
    """A quiet pool whose first choice is a dead backend (weight 1000 to 1), at the default
    ratio: the ratio alone allows one retry in a window of fewer than ten requests, so a
    backend restart would turn the second and third refused request into 502s. min_retries
    (default 3) lets three through (Envoy's min_retry_concurrency is 3 as well)."""

    @classmethod
    def setUpClass(cls):
        cls.good = Backend("good").start()
        cls.dead = "127.0.0.1:%d" % free_port()
        cls.fg = cls.start_floodgate(
            [upstream("app", [(cls.dead, 1000), (cls.good, 1)])], workers=1,
            resilience={"circuit_breaker": {"enabled": False},
                        "retry_budget": {"ratio_percent": 10, "window": "60s"}})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.good.stop()

    def test_a_quiet_pool_retries_three_refused_requests_in_one_window(self):
        for i in range(3):
            r = self.fg.get("/floor?i=%d" % i)
            self.assertEqual(r.status, 200, r)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_retries_total", upstream="app", outcome="denied_budget"),
                         0)
        self.assertGreaterEqual(m.value("floodgate_retries_total", upstream="app", outcome="sent"),
                                2)


class Hedging(FloodgateTestCase):
    """Three backends, one of which answers after SLOW_S; hedging after 50 ms."""

    @classmethod
    def setUpClass(cls):
        cls.fast = [Backend("fast-%d" % i).start() for i in range(2)]
        cls.slow = FailingBackend("slow", "slow")
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.slow.address] + cls.fast)], workers=1,
            resilience={"hedging": {"enabled": True, "delay": "50ms"},
                        "retry_budget": {"ratio_percent": 100}})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.slow.stop()
        for b in cls.fast:
            b.stop()

    def hedges(self, result):
        return self.fg.metrics().value("floodgate_hedges_total", upstream="app", result=result)

    def test_a_get_to_the_slow_backend_is_answered_by_a_hedge_and_the_slow_attempt_cancelled(self):
        for i in range(9):
            r = self.fg.get("/hedge?i=%d" % i)
            self.assertEqual(r.status, 200, r)
            self.assertNotEqual(r.header("X-Backend-Name"), "slow", "waited for the slow one")
        poll(lambda: self.slow.count() >= 1, what="the slow backend's attempts")
        sent = self.hedges("sent")
        self.assertGreaterEqual(sent, 1)
        self.assertEqual(self.hedges("won_by_hedge"), sent)
        self.assertEqual(self.hedges("cancelled"), sent)
        self.assertEqual(self.hedges("won_by_primary"), 0)
        entries = poll(lambda: len([e for e in self.fg.access_log_entries()
                                    if e["target"].startswith("/hedge?")]) == 9
                       and self.fg.access_log_entries())
        hedged = [e for e in entries if e["target"].startswith("/hedge?") and e["attempts"] == 2]
        self.assertEqual(len(hedged), sent)
        for e in hedged:
            self.assertEqual(e["backends"][0], self.slow.address)
            self.assertEqual(e["backend"], e["backends"][1])
        # The cancelled attempts hold nothing: no request in flight at the slow backend, no
        # pool slot; a cancelled attempt is not a failure, so the slow backend's circuit is closed.
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_backend_active", upstream="app",
                                 backend=self.slow.address), 0)
        self.assertEqual(m.value("floodgate_pool_active", upstream="app"), 0)
        self.assertEqual(m.value("floodgate_circuit_state", upstream="app",
                                 backend=self.slow.address), 0)

    def test_a_post_is_never_hedged(self):
        sent = self.hedges("sent")
        for i in range(3):  # round robin: one of three goes to the slow backend
            r = self.fg.request("POST", "/post?i=%d" % i, body=b"x")
            self.assertEqual(r.status, 200, r)
            if r.header("X-Backend-Name") == "slow":
                break
        else:
            self.fail("no POST reached the slow backend")
        self.assertEqual(self.hedges("sent"), sent)


@unittest.skipUnless(shutil.which("wrk"), "wrk is not installed (scripts/deps.sh installs it)")
class KillUnderLoad(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backends = [Backend("b%d" % i).start() for i in range(3)]
        cls.fg = cls.start_floodgate([upstream("app", cls.backends)], workers=2,
                                     log={"access_log": "off"})

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for b in cls.backends:
            b.stop()

    def test_a_backend_killed_under_load_fails_no_request_that_could_be_retried(self):
        wrk = subprocess.Popen(["wrk", "-t1", "-c8", "-d4s", "http://127.0.0.1:%d/name"
                                % self.fg.port], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            victim = self.backends[1]
            victim.wait_for(lambda b: len(b.requests) >= 200, timeout=10, what="load on b1")
            victim.stop()
            out, _ = wrk.communicate(timeout=30)
        finally:
            if wrk.poll() is None:
                wrk.kill()
                wrk.wait()
        text = out.decode()
        self.assertRegex(text, r"requests in", text)
        self.assertNotIn("Non-2xx", text)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_responses_generated_total",
                                 reason="upstream_connect_failed") or 0, 0)
        self.assertEqual(m.value("floodgate_responses_generated_total",
                                 reason="upstream_reset") or 0, 0)
        self.assertEqual(m.value("floodgate_circuit_state", upstream="app",
                                 backend=self.backends[1].address), 1)


if __name__ == "__main__":
    unittest.main()
