"""Admin endpoints, metrics and the access log end to end."""

import json
import os
import re
import time
import unittest

from backend import Backend
from harness import (DEFAULT_TIMEOUT, FloodgateTestCase, admin_get, build_request, free_port, poll,
                     route, upstream)

REQUIRED_FAMILIES = [
    "floodgate_requests_total",
    "floodgate_request_duration_seconds",
    "floodgate_client_connections",
    "floodgate_upstream_connect_failures_total",
    "floodgate_upstream_timeouts_total",
    "floodgate_responses_generated_total",
]
ACCESS_LOG_KEYS = {"time", "client", "peer", "host", "method", "target", "protocol", "stream",
                   "status",
                   "bytes_in", "bytes_out", "body_bytes_sent", "upstream", "backend", "attempts",
                   "backends", "duration_ms", "upstream_connect_ms", "upstream_head_ms", "reason",
                   "rate_limit", "quota", "request_id", "would_reject", "user_agent", "referer"}


class Observability(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     routes=[route("app", host="app.test")])

    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels)

    def wait_metric_at_least(self, value, name, **labels):
        poll(lambda: self.metric(name, **labels) >= value, what="%s%r >= %s" % (name, labels, value))

    # --- the process log --------------------------------------------------------------------
    def test_start_up_logs_the_version_revision_and_configuration_file(self):
        log = self.fg.stderr_bytes().decode("utf-8", "replace")
        self.assertRegex(log, r" info floodgate: floodgate \d+\.\d+\.\d+ \(revision [0-9a-z-]+\) "
                              r"starting with " + re.escape(self.fg.config_path) + "\n")

    # --- admin ------------------------------------------------------------------------------
    def test_healthz_answers_200(self):
        status, _, _ = admin_get(self.fg.admin_port, "/healthz")
        self.assertEqual(status, 200)

    def test_metrics_are_prometheus_text_with_every_required_family(self):
        self.assertEqual(self.fg.get("/echo", host="app.test").status, 200)
        status, headers, body = admin_get(self.fg.admin_port, "/metrics")
        self.assertEqual(status, 200)
        content_type = dict((n.lower(), v) for n, v in headers).get("content-type", "")
        self.assertTrue(content_type.startswith("text/plain"), content_type)
        m = self.fg.metrics()
        for family in REQUIRED_FAMILIES:
            self.assertTrue(m.declared(family), "metric %s missing" % family)
        for suffix in ("_bucket", "_sum", "_count"):
            self.assertIn("floodgate_request_duration_seconds" + suffix, m.names())
        self.assertRegex(m.text, r'floodgate_request_duration_seconds_bucket\{[^}]*le="\+Inf"')

    # --- counters move ----------------------------------------------------------------------
    def test_requests_total_counts_by_upstream_and_class(self):
        before = self.metric("floodgate_requests_total", upstream="app", **{"class": "2xx"})
        for i in range(3):
            self.assertEqual(self.fg.get("/echo?count=%d" % i, host="app.test").status, 200)
        self.wait_metric_at_least(before + 3, "floodgate_requests_total", upstream="app",
                                  **{"class": "2xx"})

    def test_requests_answered_before_routing_count_under_empty_upstream(self):
        before = self.metric("floodgate_requests_total", upstream="", **{"class": "4xx"})
        with self.fg.conn() as c:
            c.send(b"GET /echo HTTP/1.1\r\n\r\n")  # no Host: 400 before routing
            self.assertEqual(c.read_response().status, 400)
        self.wait_metric_at_least(before + 1, "floodgate_requests_total", upstream="",
                                  **{"class": "4xx"})

    def test_responses_generated_total_counts_by_reason(self):
        before = self.metric("floodgate_responses_generated_total", reason="no_route")
        self.assertEqual(self.fg.get("/", host="nowhere.test").status, 404)
        self.wait_metric_at_least(before + 1, "floodgate_responses_generated_total", reason="no_route")

    def test_request_duration_histogram_counts_requests(self):
        before = self.metric("floodgate_request_duration_seconds_count", upstream="app")
        self.assertEqual(self.fg.get("/echo?histogram", host="app.test").status, 200)
        self.wait_metric_at_least(before + 1, "floodgate_request_duration_seconds_count",
                                  upstream="app")

    def test_client_connections_gauge_follows_open_connections(self):
        base = self.metric("floodgate_client_connections")
        conns = [self.fg.conn() for _ in range(3)]
        try:
            for c in conns:
                self.assertEqual(c.request("GET", "/echo?gauge", host="app.test").status, 200)
            poll(lambda: self.metric("floodgate_client_connections") >= base + 3,
                 what="floodgate_client_connections to count 3 more")
        finally:
            for c in conns:
                c.close()
        poll(lambda: self.metric("floodgate_client_connections") <= base,
             what="floodgate_client_connections to drop back to %s" % base)

    def test_backend_metrics_count_responses_times_bytes_and_pooled_connections(self):
        peer = dict(upstream="app", backend=self.backend.address)
        before = self.fg.metrics()
        with self.fg.conn() as c:  # one keep-alive client: the backend connection is pooled
            for i in range(5):
                self.assertEqual(c.request("GET", "/echo?backend-metrics=%d" % i,
                                           host="app.test").status, 200)
        def grown(m, name, n, **labels):
            return m.value(name, **peer, **labels) - before.value(name, **peer, **labels) >= n
        m = poll(lambda: (lambda m: m if grown(m, "floodgate_backend_responses_total", 5,
                                               **{"class": "2xx"}) else None)(self.fg.metrics()),
                 what="five 2xx responses counted for the backend")
        self.assertTrue(grown(m, "floodgate_backend_response_head_seconds_count", 5))
        self.assertTrue(grown(m, "floodgate_backend_sent_bytes_total", 5 * len("GET /echo")))
        self.assertTrue(grown(m, "floodgate_backend_received_bytes_total", 5 * len("HTTP/1.1 200")))
        self.assertTrue(grown(m, "floodgate_backend_connection_reuses_total", 1))
        self.assertGreaterEqual(m.value("floodgate_backend_connections_total", **peer), 1)
        self.assertGreaterEqual(m.value("floodgate_backend_connect_seconds_count", **peer), 1)
        # The response is counted at its head; the connection goes back to the pool only after
        # the body has been relayed, so the gauge is polled, not read once.
        poll(lambda: self.fg.metrics().value("floodgate_backend_idle_connections", **peer) >= 1,
             what="the backend connection parked in the reactor's pool")
        for family in ("floodgate_backend_client_aborts_total", "floodgate_backend_aborts_total",
                       "floodgate_backend_failures_total"):
            self.assertTrue(m.declared(family), family)

    def test_buffer_blocks_are_lent_to_a_request_in_progress_and_kept_free_after_it(self):
        held = self.fg.conn()
        try:
            held.send(build_request("GET", "/hold?key=buffers", host="app.test"))
            self.backend.wait_for_target("/hold?key=buffers")
            for pool in ("request", "response"):
                poll(lambda: self.metric("floodgate_buffer_blocks", pool=pool, state="in_use") >= 1,
                     what="a %s buffer block in use while the request is at the backend" % pool)
            self.assertGreater(self.metric("floodgate_buffer_bytes", pool="request"), 0)
            self.backend.release("buffers")
            self.assertEqual(held.read_response().status, 200)
        finally:
            held.close()
        for pool in ("request", "response"):
            poll(lambda: self.metric("floodgate_buffer_blocks", pool=pool, state="in_use") == 0
                 and self.metric("floodgate_buffer_blocks", pool=pool, state="free") >= 1,
                 what="the %s buffer block back in the pool, kept free" % pool)
        self.assertTrue(self.fg.metrics().declared("floodgate_buffer_trimmed_bytes_total"))

    @unittest.skipIf(os.environ.get("FLOODGATE_SANITIZED"), "a sanitizer replaces glibc's heap")
    def test_memory_metrics_report_glibcs_heap(self):
        m = self.fg.metrics()
        allocated = m.value("floodgate_memory_allocated_bytes")
        self.assertGreater(allocated, 0)
        self.assertGreaterEqual(m.value("floodgate_memory_heap_size_bytes"), allocated)

    # --- access log -------------------------------------------------------------------------
    def log_entry(self, key, value):
        """The first access log line whose `key` equals `value`, polled with a deadline."""
        def find():
            return next((e for e in self.fg.access_log_entries() if e.get(key) == value), None)
        try:
            return poll(find, timeout=DEFAULT_TIMEOUT, what="access log line with %s=%s" % (key, value))
        except AssertionError:
            self.fail("no access log line with %s=%r in %s within %.0fs (the log must reach the "
                      "file while floodgate runs); last lines: %r"
                      % (key, value, self.fg.access_log_path, DEFAULT_TIMEOUT,
                         self.fg.access_log_entries()[-5:]))

    def test_access_log_has_a_json_line_with_every_field_for_a_proxied_request(self):
        r = self.fg.request("POST", "/echo?logged=1", host="app.test", body=b"x" * 100,
                            headers=[("X-Request-Id", "log-proxied-1")])
        self.assertEqual(r.status, 200)
        e = self.log_entry("request_id", "log-proxied-1")
        self.assertEqual(ACCESS_LOG_KEYS - set(e), set(), e)
        self.assertEqual(e["method"], "POST")
        self.assertEqual(e["target"], "/echo?logged=1")
        self.assertEqual(e["status"], 200)
        self.assertEqual(e["upstream"], "app")
        self.assertEqual(e["backend"], self.backend.address)
        self.assertTrue(str(e["client"]).startswith("127.0.0.1"), e)
        self.assertEqual(e["peer"], e["client"], e)  # no trusted proxy: the client is the peer
        self.assertGreaterEqual(e["bytes_in"], 100)
        self.assertGreaterEqual(e["bytes_out"], len(r.body))
        self.assertIsInstance(e["duration_ms"], (int, float))
        self.assertGreaterEqual(e["duration_ms"], 0)
        self.assertTrue(e["time"], e)
        self.assertIn(e["reason"], ("", None, "-"), e)

    def test_access_log_records_generated_responses_with_their_reason(self):
        self.assertEqual(self.fg.get("/missing", host="nowhere.test",
                                     headers=[("X-Request-Id", "log-generated-1")]).status, 404)
        e = self.log_entry("target", "/missing")
        self.assertEqual(ACCESS_LOG_KEYS - set(e), set(), e)
        self.assertEqual(e["status"], 404)
        self.assertEqual(e["reason"], "no_route")
        self.assertIn(e["upstream"], ("", None, "-"), e)
        self.assertEqual(e["request_id"], "log-generated-1", "the client's X-Request-Id is the "
                         "request's id, for generated responses too: %r" % e)

    def test_access_log_has_one_line_per_request(self):
        for i in range(3):
            self.fg.get("/echo?line=%d" % i, host="app.test",
                        headers=[("X-Request-Id", "log-count-%d" % i)])
        for i in range(3):
            self.log_entry("request_id", "log-count-%d" % i)
        ids = [e.get("request_id") for e in self.fg.access_log_entries()]
        for i in range(3):
            self.assertEqual(ids.count("log-count-%d" % i), 1, ids)

    def test_access_log_cuts_targets_longer_than_4_KiB_and_marks_the_cut(self):
        target = "/echo?long=" + "a" * 5000
        self.assertEqual(self.fg.get(target, host="app.test",
                                     headers=[("X-Request-Id", "log-long-1")]).status, 200)
        e = self.log_entry("request_id", "log-long-1")
        self.assertEqual(e["target"], target[:4096] + "...")


    def test_access_log_has_host_protocol_headers_body_bytes_and_backend_times(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/echo?fields=1", host="app.test", version="HTTP/1.0",
                          headers=[("User-Agent", "fields-test/1.0"),
                                   ("Referer", "http://ref.test/page"),
                                   ("X-Request-Id", "log-fields-1")])
        self.assertEqual(r.status, 200)
        e = self.log_entry("request_id", "log-fields-1")
        self.assertEqual(ACCESS_LOG_KEYS - set(e), set(), e)
        self.assertEqual((e["host"], e["protocol"]), ("app.test", "HTTP/1.0"))
        self.assertEqual((e["user_agent"], e["referer"]), ("fields-test/1.0", "http://ref.test/page"))
        self.assertEqual(e["body_bytes_sent"], len(r.body))
        self.assertGreater(e["bytes_out"], e["body_bytes_sent"])  # the head is not body
        self.assertEqual(e["attempts"], 1)
        self.assertGreaterEqual(e["upstream_connect_ms"], 0)
        self.assertGreaterEqual(e["upstream_head_ms"], e["upstream_connect_ms"])
        self.assertEqual(e["would_reject"], "")

    def test_access_log_times_are_null_when_floodgate_answered_itself(self):
        self.fg.get("/missing-times", host="nowhere.test", headers=[("X-Request-Id", "log-null-1")])
        e = self.log_entry("request_id", "log-null-1")
        self.assertIsNone(e["upstream_connect_ms"])
        self.assertIsNone(e["upstream_head_ms"])
        self.assertGreater(e["body_bytes_sent"], 0)  # the reason's one-line body
        self.assertEqual(e["protocol"], "HTTP/1.1")

    def test_every_access_log_line_is_strict_utf8_json_whatever_the_client_sent(self):
        hostile = "\x80\xff\"\\\t\xc3\xa9 }{,\u00e9"  # latin-1 on the wire: raw bytes
        for i, (ua, referer) in enumerate([(hostile, hostile), ("x" * 3000, "\xfe" * 1500),
                                           ("", "")]):
            headers = [("X-Request-Id", "log-hostile-%d" % i)]
            if ua:
                headers += [("User-Agent", ua), ("Referer", referer)]
            self.fg.get("/echo?h=%d&%%22%%00" % i, host="app.test", headers=headers)
            self.log_entry("request_id", "log-hostile-%d" % i)
        with open(self.fg.access_log_path, "rb") as f:
            raw = f.read()
        lines = raw.split(b"\n")
        self.assertEqual(lines[-1], b"")  # every line ends with a newline
        for line in lines[:-1]:
            text = line.decode("utf-8", "strict")
            self.assertTrue(all(0x20 <= ord(ch) < 0x7f for ch in text), text)
            e = json.loads(text, strict=True)
            self.assertIsInstance(e, dict)
        e = self.log_entry("request_id", "log-hostile-0")
        # \u00XX is the byte's value: the bytes are recovered exactly.
        self.assertEqual(e["user_agent"].encode("latin-1"), hostile.encode("latin-1"))
        self.assertEqual(e["referer"].encode("latin-1"), hostile.encode("latin-1"))
        e = self.log_entry("request_id", "log-hostile-1")
        self.assertEqual(e["user_agent"], "x" * 1024 + "...")
        self.assertEqual(e["referer"], "\xfe" * 1024 + "...")
        e = self.log_entry("request_id", "log-hostile-2")
        self.assertEqual((e["user_agent"], e["referer"]), ("", ""))


class CombinedAccessLog(FloodgateTestCase):
    """log.access_log_format = "combined" is nginx's combined format exactly."""
    # nginx: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
    # "$http_referer" "$http_user_agent"
    COMBINED = re.compile(r'^(?P<addr>[0-9.]+) - - \[(?P<time>\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d '
                          r'\+0000)\] "(?P<request>[^"]*)" (?P<status>\d{3}) (?P<bytes>\d+) '
                          r'"(?P<referer>[^"]*)" "(?P<ua>[^"]*)"$')

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     log={"access_log_format": "combined"})

    def lines(self):
        with open(self.fg.access_log_path, "rb") as f:
            return f.read().decode("ascii").splitlines()

    def test_a_line_is_nginxs_combined_with_referer_user_agent_protocol_and_body_bytes(self):
        with self.fg.conn() as c:
            r = c.request("GET", "/echo?combined=1", version="HTTP/1.0",
                          headers=[("User-Agent", "Mozilla/5.0 (X11; \"Linux\")"),
                                   ("Referer", "https://ref.test/a b")])
        self.assertEqual(r.status, 200)
        line = poll(lambda: [l for l in self.lines() if "/echo?combined=1" in l],
                    what="the combined line")[0]
        m = self.COMBINED.match(line)
        self.assertIsNotNone(m, line)
        self.assertEqual(m["addr"], "127.0.0.1")
        self.assertEqual(m["request"], "GET /echo?combined=1 HTTP/1.0")
        self.assertEqual((m["status"], int(m["bytes"])), ("200", len(r.body)))
        self.assertEqual(m["referer"], "https://ref.test/a b")
        self.assertEqual(m["ua"], "Mozilla/5.0 (X11; \\x22Linux\\x22)")

    def test_absent_headers_and_a_bodyless_answer_are_dashes_and_zero(self):
        self.assertEqual(self.fg.request("HEAD", "/echo?combined=2").status, 200)
        line = poll(lambda: [l for l in self.lines() if "/echo?combined=2" in l],
                    what="the combined line")[0]
        m = self.COMBINED.match(line)
        self.assertIsNotNone(m, line)
        self.assertEqual((m["request"], m["bytes"], m["referer"], m["ua"]),
                         ("HEAD /echo?combined=2 HTTP/1.1", "0", "-", "-"))


class BackendFailuresInTheProcessLog(FloodgateTestCase):
    """A dead backend under load: its failures reach the process log as nginx's error log has
    them, one line a second at most (two reactors sharing the throttle), counting the rest."""

    @classmethod
    def setUpClass(cls):
        cls.dead = "127.0.0.1:%d" % free_port()
        cls.fg = cls.start_floodgate([upstream("app", [cls.dead])], workers=2,
                                     resilience={"circuit_breaker": {"enabled": False}})

    def lines(self):
        log = self.fg.stderr_bytes().decode("utf-8", "replace")
        return [l for l in log.splitlines()
                if 'upstream "app" backend %s: connect failed' % self.dead in l]

    def test_a_refused_connect_is_logged_once_a_second_with_the_count_of_the_rest(self):
        started = time.monotonic()
        for i in range(40):
            self.assertEqual(self.fg.get("/dead-%d?q=\"x\"" % i).status, 502)
        elapsed = time.monotonic() - started
        lines = poll(self.lines, what="a line about the dead backend")
        self.assertLessEqual(len(lines), int(elapsed) + 2, "\n".join(lines))
        first = lines[0]
        self.assertIn(" warning floodgate: ", first)
        self.assertIn("connect failed (Connection refused) [upstream_connect_failed]; "
                      "client 127.0.0.1, request \"GET /dead-0?q=\\x22x\\x22\"", first)
        self.assertNotIn("more like it", first)
        # The next line, a second later, stands for what was held back meanwhile.
        def counted():
            self.fg.get("/dead-more")
            return [l for l in self.lines() if "more like it since the last line" in l]
        poll(counted, timeout=15, interval=0.1, what="a line counting the suppressed failures")
        lines = self.lines()
        represented = sum(1 + int(re.search(r"; (\d+) more like it", l).group(1))
                          if "more like it" in l else 1 for l in lines)
        failures = self.fg.metrics().value("floodgate_upstream_connect_failures_total",
                                          upstream="app")
        self.assertGreater(represented, len(lines))
        self.assertLessEqual(represented, failures)
        m = self.fg.metrics()
        self.assertEqual(m.value("floodgate_backend_failures_total", upstream="app",
                                 backend=self.dead, reason="upstream_connect_failed"),
                         m.value("floodgate_upstream_connect_failures_total", upstream="app"))


class HeapAllocationsBase:
    LOG = {}
    POOL = {}
    WORKERS = 1
    RESILIENCE = None

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend], **cls.POOL)],
                                     routes=[route("app", host="app.test")], log=cls.LOG,
                                     workers=cls.WORKERS, resilience=cls.RESILIENCE)

    def test_keep_alive_requests_make_no_heap_allocation_on_reactor_threads(self):
        """Connections allocate once; requests on them (GET and POST, concurrently) never."""
        import threading
        clients = 12
        errors = []
        warm = threading.Barrier(clients + 1)
        measured = threading.Barrier(clients + 1)

        def exchange(c, n, i):
            if i % 3 == 0:
                r = c.request("POST", "/echo?heap-%d-%d" % (n, i), host="app.test",
                              body=b"x" * 3000)
            else:
                r = c.request("GET", "/echo?heap-%d-%d" % (n, i), host="app.test")
            if r.status != 200:
                errors.append(r)

        def client(n):
            try:
                with self.fg.conn() as c:
                    for i in range(6):  # opens the connection, fills the backend pools
                        exchange(c, n, i)
                    warm.wait(DEFAULT_TIMEOUT)
                    measured.wait(DEFAULT_TIMEOUT)
                    for i in range(6, 30):
                        exchange(c, n, i)
            except Exception as e:  # reported below, with the counter
                errors.append(e)
                warm.abort()
                measured.abort()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        warm.wait(DEFAULT_TIMEOUT)
        before = self.fg.metrics().value("floodgate_reactor_heap_allocations_total")
        backend_connections = self.backend.connections_accepted
        measured.wait(DEFAULT_TIMEOUT)
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        # 288 requests on the same client connections: the only allocation allowed is one per
        # backend connection opened meanwhile (the pools usually hold enough already).
        opened = self.backend.connections_accepted - backend_connections
        self.assertEqual(
            self.fg.metrics().value("floodgate_reactor_heap_allocations_total"), before + opened)
        self.assertGreater(before, 0)  # the connections themselves were counted


class HeapAllocationsWithoutAccessLog(HeapAllocationsBase, FloodgateTestCase):
    LOG = {"access_log": "off"}


class HeapAllocationsWithJsonAccessLog(HeapAllocationsBase, FloodgateTestCase):
    LOG = {"access_log_format": "json"}


class HeapAllocationsWithCombinedAccessLog(HeapAllocationsBase, FloodgateTestCase):
    LOG = {"access_log_format": "combined"}


class HeapAllocationsWithEveryFrontStage(HeapAllocationsBase, FloodgateTestCase):
    """The in-flight cap (with exemptions), the memory guard and the protocol policy, enforcing:
    every request passes all three without allocating."""
    RESILIENCE = {
        "inflight": {"max_inflight": 1000, "exempt_methods": ["OPTIONS"],
                     "exempt_path_prefixes": ["/downloads/"]},
        "memory_guard": {"min_available": 1},
        "protocol": {"allowed_methods": ["GET", "POST", "HEAD"],
                     "denied_path_prefixes": ["/admin", "/internal/"]}}


class HeapAllocationsWithEveryFrontStageInShadowMode(HeapAllocationsBase, FloodgateTestCase):
    """Every front stage in shadow mode and set to refuse: each request is counted as a
    would-reject by all three (and logged with would_reject) without allocating."""
    LOG = {"access_log_format": "json"}
    RESILIENCE = {
        "inflight": {"max_inflight": 1, "mode": "shadow"},
        "memory_guard": {"min_available": 1 << 30, "mode": "shadow"},
        "protocol": {"allowed_methods": ["HEAD"], "mode": "shadow"}}


class HeapAllocationsWithAdmissionQueue(HeapAllocationsBase, FloodgateTestCase):
    """12 clients on a pool of 3 slots: requests park in the queue and are granted across the
    two reactors, through the poller's inbox, without allocating."""
    LOG = {"access_log": "off"}
    POOL = {"resilience": {"max_active_requests": 3, "max_pending_requests": 64,
                           "pending_timeout": "10s"}}
    WORKERS = 2

    def test_requests_waited_in_the_queue(self):
        self.test_keep_alive_requests_make_no_heap_allocation_on_reactor_threads()
        waited = self.fg.metrics().value("floodgate_pool_queue_wait_seconds_count", upstream="app")
        self.assertGreater(waited, 0)


if __name__ == "__main__":
    unittest.main()
