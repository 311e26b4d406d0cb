"""The front of the stage chain end to end ([resilience], docs/resilience.md): the process-wide
in-flight cap (503 inflight_cap with Retry-After, exemptions for WebSockets, SSE paths and CORS
preflights, `auto` sizing, FLOODGATE_MAX_INFLIGHT), the host memory guard against a fake
meminfo file (writes 503 memory_pressure, reads pass, one read a second at most,
FLOODGATE_MEMORY_GUARD_MIN_MB), the protocol policy and its bypass attempts, shadow mode, and
reloads of these keys under load."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from backend import Backend
from harness import (DEFAULT_TIMEOUT, Floodgate, FloodgateTestCase, admin_get, build_request,
                     floodgate_bin, poll, render_toml, upstream)
from test_admission import Held
from test_upgrade import UPGRADE_HEADERS


def write_meminfo(path, available_kib, swap_free_kib=0, total_kib=8 * 1024 * 1024):
    with open(path + ".tmp", "w") as f:
        f.write("MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n"
                "SwapTotal:      %d kB\nSwapFree:       %d kB\n"
                % (total_kib, available_kib, available_kib, swap_free_kib, swap_free_kib))
    os.replace(path + ".tmp", path)


class FrontTestCase(FloodgateTestCase):
    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels) or 0

    def status(self, fg=None):
        return json.loads(admin_get((fg or self.fg).admin_port, "/status")[2])

    def reload(self, resilience):
        """Rewrites the file with `resilience`, sends SIGHUP and waits for the new generation."""
        before = self.status()["generation"]
        self.fg.resilience = resilience
        with open(self.fg.config_path, "w") as f:
            f.write(render_toml(self.fg.config()))
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.status()["generation"] > before, what="a new generation")

    def raw(self, request):
        with self.fg.conn() as c:
            c.send(request)
            return c.read_response()


class InflightCap(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={"inflight": {"max_inflight": 2, "retry_after": "3s",
                                     "exempt_path_prefixes": ["/downloads/"]}})

    def setUp(self):
        super().setUp()
        # The previous test's last slot is given back just after its client read the response.
        poll(lambda: self.metric("floodgate_inflight_requests") == 0, what="every slot free")

    def test_the_request_over_the_cap_gets_503_with_retry_after_and_never_reaches_a_backend(self):
        held = [Held(self, self.a, "cap-%d" % i, "test.local") for i in range(2)]
        try:
            self.assertEqual(self.metric("floodgate_inflight_requests"), 2)
            before = self.a.request_count
            r = self.fg.get("/over")
            self.assertGenerated(r, 503, "inflight_cap")
            self.assertEqual(r.header_values("retry-after"), ["3"])
            self.assertEqual(self.a.request_count, before)
        finally:
            for h in held:
                self.assertEqual(h.release().status, 200)
        self.assertEqual(self.fg.get("/after").status, 200)  # the slots came back
        # A slot is given back when floodgate has finished the response, just after the client
        # has read it.
        poll(lambda: self.metric("floodgate_inflight_requests") == 0, what="every slot back")
        self.assertGreaterEqual(
            self.metric("floodgate_responses_generated_total", reason="inflight_cap"), 1)

    def test_websockets_event_streams_and_exempt_paths_hold_no_slot(self):
        # A WebSocket tunnel, an SSE stream (/events suffix, the default exemption) and an
        # exempt prefix stay open while two ordinary requests still fit under the cap of 2.
        ws = self.fg.conn()
        ws.send(build_request("GET", "/ws", host="test.local", headers=UPGRADE_HEADERS))
        self.assertEqual(ws.read_response().status, 101)
        sse = self.fg.conn()
        sse.send(build_request("GET", "/feed/events?key=sse", host="test.local"))
        dl = self.fg.conn()
        dl.send(build_request("GET", "/downloads/events?key=dl", host="test.local"))
        try:
            self.a.wait_for_target("/feed/events?key=sse")
            self.a.wait_for_target("/downloads/events?key=dl")
            poll(lambda: self.metric("floodgate_inflight_requests") == 0,
                 what="no slot held by the tunnel and the streams")
            held = [Held(self, self.a, "ex-%d" % i, "test.local") for i in range(2)]
            self.assertEqual(self.metric("floodgate_inflight_requests"), 2)
            self.assertGenerated(self.fg.get("/third"), 503, "inflight_cap")
            for h in held:
                self.assertEqual(h.release().status, 200)
        finally:
            self.a.release("sse")
            self.a.release("dl")
            for c in (ws, sse, dl):
                c.close()

    def test_a_cors_preflight_is_exempt(self):
        held = [Held(self, self.a, "cors-%d" % i, "test.local") for i in range(2)]
        try:
            r = self.fg.request("OPTIONS", "/api", headers=[
                ("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST")])
            self.assertEqual(r.status, 200, r)
            plain = self.fg.request("OPTIONS", "/api")  # not a preflight: it needs a slot
            self.assertGenerated(plain, 503, "inflight_cap")
        finally:
            for h in held:
                h.release()


class UpgradeOffers(FrontTestCase):
    """Only what has become a tunnel is exempt: an upgrade offer takes its slot like any
    request, and gives it back when its 101 arrives. Before, `Connection: upgrade` with any
    Upgrade value passed the cap, the adaptive ceiling, the route caps and brownout even when
    the backend answered a plain 200."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])],
                                     resilience={"inflight": {"max_inflight": 2}})

    def test_an_upgrade_offer_at_the_cap_is_refused_like_any_request(self):
        held = [Held(self, self.a, "offer-%d" % i, "test.local") for i in range(2)]
        try:
            r = self.fg.request("GET", "/echo", headers=[("Connection", "upgrade"),
                                                         ("Upgrade", "anything/1")])
            self.assertGenerated(r, 503, "inflight_cap")
        finally:
            for h in held:
                self.assertEqual(h.release().status, 200)

    def test_an_offer_answered_200_holds_its_slot_and_a_tunnel_gives_it_back(self):
        offer = self.fg.conn()
        offer.send(build_request("GET", "/hold?key=offer", host="test.local",
                                 headers=[("Connection", "upgrade"), ("Upgrade", "x/1")]))
        self.a.wait_for_target("/hold?key=offer")
        self.assertEqual(self.metric("floodgate_inflight_requests"), 1)
        self.a.release("offer")
        self.assertEqual(offer.read_response().status, 200)
        offer.close()
        ws = self.fg.conn()
        try:
            ws.send(build_request("GET", "/ws", host="test.local", headers=UPGRADE_HEADERS))
            self.assertEqual(ws.read_response().status, 101)
            poll(lambda: self.metric("floodgate_inflight_requests") == 0,
                 what="the tunnel's slot given back at its 101")
        finally:
            ws.close()


class InflightSizing(FrontTestCase):
    def start_with(self, env=None, resilience=None, workers=1):
        a = Backend("a").start()
        self.addCleanup(a.stop)
        fg = Floodgate([upstream("a", [a, a], keepalive=8)], workers=workers, env=env,
                       resilience=resilience)
        self.addCleanup(fg.cleanup)
        return fg

    def test_auto_is_four_times_reactors_plus_pool_capacity_in_the_log_and_status(self):
        fg = self.start_with(workers=2).start()
        try:
            limit = self.status(fg)["inflight"]["limit"]
            self.assertEqual(limit, 4 * (2 + 2 * 8))  # two reactors, two servers x keepalive 8
            poll(lambda: b"in-flight cap: 72 requests (resilience.inflight.max_inflight = auto)"
                 in fg.stderr_bytes(), what="the resolved cap in the log")
        finally:
            self.assertEqual(fg.stop(), 0)

    def test_auto_has_a_floor_of_32(self):
        a = Backend("a").start()
        self.addCleanup(a.stop)
        fg = Floodgate([upstream("a", [a], keepalive=1)])
        self.addCleanup(fg.cleanup)
        fg.start()
        try:
            self.assertEqual(self.status(fg)["inflight"]["limit"], 32)
        finally:
            fg.stop()

    def test_the_environment_overrides_the_key(self):
        fg = self.start_with(env={"FLOODGATE_MAX_INFLIGHT": "7"},
                             resilience={"inflight": {"max_inflight": 100}}).start()
        try:
            self.assertEqual(self.status(fg)["inflight"]["limit"], 7)
        finally:
            fg.stop()

    def test_a_bad_override_refuses_to_start(self):
        for var, value in (("FLOODGATE_MAX_INFLIGHT", "lots"), ("FLOODGATE_MAX_INFLIGHT", "-1"),
                           ("FLOODGATE_MEMORY_GUARD_MIN_MB", "1.5"),
                           ("FLOODGATE_MEMORY_GUARD_MIN_MB", "auto?")):
            with self.subTest(var=var, value=value):
                fg = self.start_with(env={var: value})
                fg.port, fg.admin_port = 1, 2  # never bound: it must not get that far
                with open(fg.config_path, "w") as f:
                    f.write(render_toml(fg.config()))
                p = subprocess.run([floodgate_bin(), "-c", fg.config_path],
                                   env={**os.environ, var: value}, capture_output=True,
                                   timeout=DEFAULT_TIMEOUT)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(var.encode(), p.stderr)

    def test_zero_turns_the_cap_off(self):
        fg = self.start_with(resilience={"inflight": {"max_inflight": 0}}).start()
        try:
            self.assertEqual(self.status(fg)["inflight"]["limit"], 0)
            poll(lambda: b"in-flight cap: off" in fg.stderr_bytes(), what="the cap off in the log")
        finally:
            fg.stop()


class MemoryGuard(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="floodgate-meminfo-")
        cls.meminfo = os.path.join(cls.dir, "meminfo")
        write_meminfo(cls.meminfo, available_kib=50 * 1024)  # 50 MiB, no swap
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={"memory_guard": {"min_available": 100, "meminfo": cls.meminfo}})

    def tearDown(self):
        write_meminfo(self.meminfo, available_kib=50 * 1024)
        poll(lambda: self.status()["memory_guard"]["under_pressure"], what="pressure again")

    def test_writes_are_refused_under_the_floor_and_reads_pass(self):
        poll(lambda: self.status()["memory_guard"]["under_pressure"], what="the first sample")
        before = self.a.request_count
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            r = self.fg.request(method, "/w", body=b"x")
            self.assertGenerated(r, 503, "memory_pressure")
        self.assertEqual(self.a.request_count, before)
        for method in ("GET", "HEAD", "OPTIONS"):
            self.assertEqual(self.fg.request(method, "/r").status, 200, method)
        self.assertEqual(self.metric("floodgate_memory_guard_floor_bytes"), 100 * 1024 * 1024)
        self.assertEqual(self.metric("floodgate_memory_guard_available_bytes"), 50 * 1024 * 1024)

    def test_swap_counts_and_recovery_is_seen_within_a_second_or_two(self):
        write_meminfo(self.meminfo, available_kib=50 * 1024, swap_free_kib=60 * 1024)
        poll(lambda: self.fg.request("POST", "/w", body=b"x").status == 200,
             what="writes once swap lifts the total over the floor")

    def test_the_file_is_read_at_most_once_a_second(self):
        first = self.metric("floodgate_memory_guard_samples_total")
        started = time.monotonic()
        time.sleep(2.5)  # measuring a rate: the wait is the measurement, not an ordering
        reads = self.metric("floodgate_memory_guard_samples_total") - first
        elapsed = time.monotonic() - started
        self.assertGreaterEqual(reads, 1)
        self.assertLessEqual(reads, int(elapsed) + 1)


class ProtocolPolicy(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={"protocol": {"allowed_methods": ["GET", "HEAD", "POST"],
                                     "denied_path_prefixes": ["/admin"]}})

    def test_a_method_not_allowed_gets_405_with_allow(self):
        before = self.a.request_count
        for method in ("DELETE", "PATCH", "OPTIONS"):
            r = self.raw(("%s /x HTTP/1.1\r\nHost: a\r\n\r\n" % method).encode())
            self.assertGenerated(r, 405, "method_not_allowed")
            self.assertEqual(r.header("allow"), "GET, HEAD, POST")
        # Methods are case-sensitive (RFC 9110 section 9.1): "get" is not GET but another
        # token, which the list does not allow; so are extension methods.
        for method in ("get", "Post", "QUERY", "VERSION-CONTROL"):
            r = self.raw(("%s /x HTTP/1.1\r\nHost: a\r\n\r\n" % method).encode())
            self.assertGenerated(r, 405, "method_not_allowed")
        self.assertEqual(self.a.request_count, before)
        self.assertEqual(self.fg.get("/x").status, 200)

    def test_a_denied_path_is_refused_however_it_is_spelled(self):
        before = self.a.request_count
        for target in ("/admin", "/admin/users", "/%61dmin", "/x/../admin", "//admin",
                       "/./admin/", "/a/%2e%2e/admin",
                       "http://test.local/admin"):
            r = self.raw(("GET %s HTTP/1.1\r\nHost: test.local\r\n\r\n" % target).encode())
            self.assertGenerated(r, 403, "denied_path")
        self.assertEqual(self.a.request_count, before)

    def test_the_backend_receives_an_allowed_target_as_sent(self):
        r = self.raw(b"GET /%70ublic/./x HTTP/1.1\r\nHost: test.local\r\n\r\n")
        self.assertEqual(r.status, 200, r)
        self.a.wait_for_target("/%70ublic/./x")

    def test_an_absolute_form_authority_differing_from_host_is_400(self):
        r = self.raw(b"GET http://other.example/x HTTP/1.1\r\nHost: test.local\r\n\r\n")
        self.assertGenerated(r, 400, "authority_mismatch", closes=False)  # framing is sound
        same = self.raw(b"GET http://TEST.local:80/x HTTP/1.1\r\nHost: test.local\r\n\r\n")
        self.assertEqual(same.status, 200, same)

    def test_connect_is_refused_when_not_allowed(self):
        r = self.raw(b"CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\n\r\n")
        self.assertGenerated(r, 405, "connect_denied")
        self.assertIn("GET", r.header("allow"))

    def test_a_malformed_connect_target_is_400(self):
        r = self.raw(b"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n")
        self.assertGenerated(r, 400, "bad_request")


class AuthorityHostMatchOff(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={"protocol": {"enforce_authority_host_match": False}})

    def test_the_absolute_form_authority_replaces_host(self):
        r = self.raw(b"GET http://authority.example/echo/abs HTTP/1.1\r\n"
                     b"Host: other.example\r\n\r\n")
        self.assertEqual(r.status, 200, r)
        rec = self.a.wait_for_target("/echo/abs")
        self.assertEqual(rec.header_values("host"), ["authority.example"])


class ShadowMode(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="floodgate-meminfo-")
        cls.meminfo = os.path.join(cls.dir, "meminfo")
        write_meminfo(cls.meminfo, available_kib=10 * 1024)
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={
                "inflight": {"max_inflight": 1, "mode": "shadow"},
                "memory_guard": {"min_available": 100, "meminfo": cls.meminfo, "mode": "shadow"},
                "protocol": {"denied_path_prefixes": ["/admin"], "mode": "shadow"}})

    def shadow(self, stage, reason):
        return self.metric("floodgate_shadow_rejections_total", stage=stage, reason=reason)

    def test_each_stage_admits_counts_and_logs_what_it_would_refuse(self):
        r = self.fg.get("/admin/x")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.shadow("protocol", "denied_path"), 1)
        poll(lambda: self.status()["memory_guard"]["under_pressure"], what="the first sample")
        self.assertEqual(self.fg.request("POST", "/w", body=b"x").status, 200)
        self.assertGreaterEqual(self.shadow("memory_guard", "memory_pressure"), 1)
        held = Held(self, self.a, "shadow", "test.local")
        try:
            self.assertEqual(self.fg.get("/second").status, 200)  # over the cap of 1
        finally:
            held.release()
        self.assertGreaterEqual(self.shadow("inflight", "inflight_cap"), 1)
        records = poll(lambda: [x for x in self.fg.access_log_entries()]
                       if any(x["target"] == "/second" for x in self.fg.access_log_entries())
                       else None, what="the access log records")
        by_target = {x["target"]: x for x in records}
        self.assertEqual(by_target["/admin/x"]["would_reject"], "denied_path")
        self.assertEqual(by_target["/second"]["would_reject"], "inflight_cap")
        self.assertEqual(by_target["/w"]["would_reject"], "memory_pressure")
        self.assertEqual(self.metric("floodgate_responses_generated_total", reason="denied_path"),
                         0)


class EchoServer:
    """A plain TCP server that echoes what it receives on each connection (a CONNECT target)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn):
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                conn.sendall(data)

    def close(self):
        self.sock.close()


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ConnectTunnels(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = EchoServer()
        cls.refused = closed_port()
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], resilience={"protocol": {
            "allow_connect": True,
            "connect_allowed_authorities": ["127.0.0.1:%d" % cls.echo.port,
                                            "localhost:%d" % cls.echo.port,
                                            "127.0.0.1:%d" % cls.refused]},
            "inflight": {"max_inflight": 1}})

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.echo.close()

    def tunnel(self, authority):
        c = self.fg.conn()
        c.send(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)).encode())
        return c

    def test_a_tunnel_to_an_allowed_authority_relays_bytes_both_ways(self):
        for authority in ("127.0.0.1:%d" % self.echo.port, "localhost:%d" % self.echo.port):
            with self.subTest(authority=authority):
                c = self.tunnel(authority)
                try:
                    head = c.read_head()
                    self.assertEqual(head.status, 200, head)
                    for chunk in (b"hello", b"x" * 100000):
                        c.send(chunk)
                        self.assertEqual(c.read_exact(len(chunk)), chunk)
                finally:
                    c.close()
        named = "localhost:%d" % self.echo.port
        records = poll(lambda: [x for x in self.fg.access_log_entries()
                                if x["method"] == "CONNECT" and x["status"] == 200
                                and x["target"] == named] or None,
                       what="the tunnel to %s in the access log" % named)
        # What the log says of a tunnel comes from its request head, which the relayed bytes
        # (the 100,000 "x" above) must not overwrite.
        self.assertEqual(records[0]["backend"], named)
        for r in self.fg.access_log_entries():
            if r["status"] == 200 and r["method"] == "CONNECT":
                self.assertEqual(r["backend"], r["target"], r)

    def test_a_tunnel_holds_no_slot_of_the_inflight_cap(self):
        c = self.tunnel("127.0.0.1:%d" % self.echo.port)
        try:
            self.assertEqual(c.read_head().status, 200)
            self.assertEqual(self.fg.get("/while-tunnelling").status, 200)  # cap of 1
        finally:
            c.close()

    def test_an_authority_outside_the_allowlists_is_403(self):
        before = self.echo.accepted
        for authority in ("127.0.0.2:%d" % self.echo.port, "127.0.0.1:1", "example.com:443"):
            with self.subTest(authority=authority):
                with self.tunnel(authority) as c:
                    self.assertGenerated(c.read_response(), 403, "connect_denied")
        self.assertEqual(self.echo.accepted, before)

    def test_a_refused_target_is_502(self):
        with self.tunnel("127.0.0.1:%d" % self.refused) as c:
            self.assertGenerated(c.read_response(), 502, "upstream_connect_failed")


class ConnectByPort(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.echo = EchoServer()
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], resilience={"protocol": {
            "allow_connect": True, "connect_allowed_ports": [cls.echo.port]}})

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.echo.close()

    def test_a_listed_port_is_allowed_on_any_host_and_another_port_is_not(self):
        c = self.fg.conn()
        c.send(b"CONNECT localhost:%d HTTP/1.1\r\nHost: x\r\n\r\n" % self.echo.port)
        try:
            self.assertEqual(c.read_head().status, 200)
            c.send(b"ping")
            self.assertEqual(c.read_exact(4), b"ping")
        finally:
            c.close()
        with self.fg.conn() as c:
            c.send(b"CONNECT localhost:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (self.echo.port + 1))
            self.assertGenerated(c.read_response(), 403, "connect_denied")
        with self.fg.conn() as c:  # a name that does not resolve
            c.send(b"CONNECT no-such-host.invalid:%d HTTP/1.1\r\nHost: x\r\n\r\n"
                   % self.echo.port)
            self.assertGenerated(c.read_response(), 502, "upstream_connect_failed")


class ReloadUnderLoad(FrontTestCase):
    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])])

    def test_every_front_key_reloads_without_a_failed_request(self):
        stop = threading.Event()
        failures, done = [], [0]

        def load():
            while not stop.is_set():
                try:
                    r = self.fg.get("/load")
                    if r.status != 200:
                        failures.append(r.status)
                    done[0] += 1
                except OSError as e:  # pragma: no cover - reported below
                    failures.append(repr(e))

        workers = [threading.Thread(target=load) for _ in range(4)]
        for w in workers:
            w.start()
        try:
            for resilience in (
                    {"inflight": {"max_inflight": 500, "retry_after": "2s",
                                  "exempt_methods": ["OPTIONS"], "mode": "shadow"}},
                    {"memory_guard": {"min_available": 1, "mode": "shadow"}},
                    {"protocol": {"allowed_methods": ["GET", "POST"],
                                  "denied_path_prefixes": ["/private"]}},
                    {"inflight": {"max_inflight": "auto"}}):
                self.reload(resilience)
                if "protocol" in resilience:
                    self.assertGenerated(self.fg.get("/private/x"), 403, "denied_path")
        finally:
            stop.set()
            for w in workers:
                w.join()
        self.assertEqual(failures, [])
        self.assertGreater(done[0], 0)


if __name__ == "__main__":
    unittest.main()
