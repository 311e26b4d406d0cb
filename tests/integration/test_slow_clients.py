"""Slow and stalled clients are not load (issue 35, docs/resilience.md "What the controls
count"): once a response is read to its end from the backend, the front in-flight cap, the
adaptive ceiling, the route and global caps and the pool slot stop counting the exchange, even
while the client is still reading it; a client that takes no byte of a response for
`server.send_timeout` is closed; and a client's next request never finds the slot of its
previous one still held."""

import socket
import threading
import time
import unittest

from backend import Backend, big_body
from harness import Conn, FloodgateTestCase, build_request, poll, upstream

# Far more than the buffers between the backend and a client that reads nothing (floodgate's
# own and the sockets' on both sides), so that the backend is still sending when the client
# stops reading.
LARGE = 32 * 1024 * 1024


class SlowClientTestCase(FloodgateTestCase):
    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels) or 0

    def stalled_reader(self, target, host="test.local"):
        """A connection that sends a GET for `target` and reads nothing (its receive buffer
        small, so that the response waits in floodgate)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", self.fg.port))
        s.sendall(build_request("GET", target, host=host))
        return s


class SlowReaders(SlowClientTestCase):
    """HAProxy's defaults serve every other client while 300 readers crawl through large
    responses (it caps connections, not requests); before this fix floodgate answered them
    429 inflight_cap while it and the backend sat idle."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a]),
             upstream("pooled", [cls.a],
                      resilience={"max_active_requests": 1, "max_pending_requests": 0})],
            routes=[{"host": "pooled.test", "path_prefix": "/", "upstream": "pooled"},
                    {"host": "*", "path_prefix": "/", "upstream": "a"}],
            resilience={"inflight": {"max_inflight": 4},
                        "route_queue": {"default_cap": 4, "global_cap": 4}})

    def test_readers_that_stop_reading_hold_no_slot_of_the_caps(self):
        readers = []
        try:
            for i in range(12):  # three times every cap
                readers.append(self.stalled_reader("/big?bytes=%d&r=%d" % (LARGE, i)))
                self.a.wait_for_target("/big?bytes=%d&r=%d" % (LARGE, i))
                # The client sets the pace: the front cap, the adaptive ceiling and the route
                # and global caps stop counting it.
                poll(lambda: self.metric("floodgate_inflight_requests") == 0,
                     what="reader %d's slot given back" % i)
            for i in range(10):
                r = self.fg.get("/echo?honest=%d" % i)
                self.assertEqual(r.status, 200, r)
            # A reader still gets its response, at its own pace.
            s = readers[0]
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(4096)
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:80])
        finally:
            for s in readers:
                s.close()
        for reason in ("inflight_cap", "route_cap", "global_cap", "adaptive_limit"):
            self.assertEqual(self.metric("floodgate_responses_generated_total", reason=reason),
                             0, reason)

    def test_a_reader_keeps_its_pool_slot_while_the_backend_is_still_sending(self):
        # The pool's slot is the backend's connection: it is given back once the backend's part
        # is over (the whole response in floodgate), not while the backend still sends.
        s = self.stalled_reader("/big?bytes=%d&pooled=1" % LARGE, host="pooled.test")
        try:
            self.a.wait_for_target("/big?bytes=%d&pooled=1" % LARGE)
            poll(lambda: self.metric("floodgate_inflight_requests") == 0, what="client-paced")
            self.assertEqual(self.metric("floodgate_pool_active", upstream="pooled"), 1)
            r = self.fg.request("GET", "/echo", host="pooled.test")
            self.assertGenerated(r, 503, "proxy_overloaded")
        finally:
            s.close()
        poll(lambda: self.metric("floodgate_pool_active", upstream="pooled") == 0,
             what="the slot back once the reader is gone")
        self.assertEqual(self.fg.request("GET", "/echo", host="pooled.test").status, 200)


def unsent_bytes(local_port, remote_port):
    """The bytes the kernel holds to send on the loopback TCP socket from `local_port` to
    `remote_port` (sent and unacknowledged, and unsent: /proc/net/tcp's tx_queue)."""
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote = fields[1].split(":")[1], fields[2].split(":")[1]
            if int(local, 16) == local_port and int(remote, 16) == remote_port:
                return int(fields[4].split(":")[0], 16)
    raise AssertionError("no socket %d -> %d" % (local_port, remote_port))


class KernelSendQueue(SlowClientTestCase):
    """A slow reader costs the kernel at most server.max_unsent_bytes of unsent response
    (TCP_NOTSENT_LOWAT). nginx and HAProxy leave it to the kernel, which grows the send buffer of
    a client that reads slowly to megabytes, filled from the backend."""

    LIMIT = 32768

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])],
                                     server={"max_unsent_bytes": cls.LIMIT})

    def test_the_kernel_holds_at_most_max_unsent_bytes_for_a_slow_reader(self):
        s = self.stalled_reader("/big?bytes=%d&queue=1" % LARGE)
        try:
            self.a.wait_for_target("/big?bytes=%d&queue=1" % LARGE)
            # Client-paced: floodgate holds all it can, so the kernel took all it would.
            poll(lambda: self.metric("floodgate_inflight_requests") == 0, what="client-paced")
            queued = unsent_bytes(self.fg.port, s.getsockname()[1])
            # The bound, plus one segment the kernel takes past it and what the reader's small
            # window lets travel.
            self.assertGreater(queued, 0)
            self.assertLessEqual(queued, self.LIMIT + 65536 + 16384)
        finally:
            s.close()


class SendTimeout(SlowClientTestCase):
    """nginx's send_timeout (60 s by default): a client that takes nothing of a response for
    that long is closed. HAProxy's `timeout client` does the same."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate([upstream("a", [cls.a])], server={"send_timeout": "1s"})

    def test_a_client_that_reads_nothing_is_closed_after_send_timeout(self):
        size = 16 * 1024 * 1024  # far more than the buffers between floodgate and the client
        before = self.metric("floodgate_client_send_timeouts_total")
        s = self.stalled_reader("/big?bytes=%d&stalled=1" % size)
        try:
            poll(lambda: self.metric("floodgate_client_send_timeouts_total") == before + 1,
                 timeout=15, what="the stalled reader closed")
            got = 0
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                got += len(chunk)
            self.assertLess(got, size)  # cut short: never presented as whole
        finally:
            s.close()
        entry = poll(lambda: [e for e in self.fg.access_log_entries()
                              if "stalled=1" in e.get("target", "")],
                     what="the access log record")[0]
        self.assertEqual(entry["status"], 200, entry)

    def test_a_client_reading_slowly_but_steadily_is_not_cut(self):
        size = 4 * 1024 * 1024
        before = self.metric("floodgate_client_send_timeouts_total")
        with Conn(self.fg.port) as c:
            c.send(build_request("GET", "/big?bytes=%d&steady=1" % size, host="test.local"))
            r = c.read_head()
            self.assertEqual(r.status, 200, r)
            # Three times send_timeout in all, a small read every 0.05 s: always progressing.
            body = bytearray(c.buf)
            c.buf.clear()
            end = time.monotonic() + 3.0
            while time.monotonic() < end:
                body += c.sock.recv(16384)
                time.sleep(0.05)
            while len(body) < size:
                chunk = c.sock.recv(65536)
                self.assertTrue(chunk, "closed after %d of %d bytes" % (len(body), size))
                body += chunk
            self.assertEqual(bytes(body), big_body(size))
        self.assertEqual(self.metric("floodgate_client_send_timeouts_total"), before)


class ClientPaceIsNotBackendLatency(SlowClientTestCase):
    """Adaptive admission samples what the backend takes, from the whole request reaching it to
    its response head: slow heads and slow uploads (mobile clients) against a fast backend
    never lower the ceiling. Before, samples were timed from the request's first byte: 45
    slow clients cut the ceiling from 136 to 64 and turned brownout on against an idle
    backend."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a], keepalive=64)],
            resilience={"adaptive_admission": {"min_limit": 8, "max_limit": 48,
                                               "decrease_step": 8, "increase_step": 8,
                                               "high_latency": "100ms", "window": "50ms"}})

    def slow_client(self, n, results):
        for i in range(n):
            with Conn(self.fg.port) as c:
                if i % 2 == 0:  # a head that takes three times high_latency to arrive
                    request = build_request("GET", "/echo?slow-head=%d" % i, host="test.local")
                    c.send(request[:20])
                    time.sleep(0.3)
                    c.send(request[20:])
                else:  # an upload that does
                    body = b"x" * 2000
                    request = build_request("POST", "/echo?slow-upload=%d" % i,
                                            host="test.local", body=body)
                    c.send(request[:-1000])
                    time.sleep(0.3)
                    c.send(request[-1000:])
                results.append(c.read_response().status)

    def test_slow_heads_and_uploads_leave_the_ceiling_alone(self):
        self.assertEqual(self.metric("floodgate_adaptive_limit"), 48)
        results = []
        threads = [threading.Thread(target=self.slow_client, args=(6, results))
                   for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(results, [200] * 96)
        self.assertEqual(self.metric("floodgate_adaptive_decisions_total", direction="decrease"),
                         0)
        self.assertEqual(self.metric("floodgate_adaptive_limit"), 48)
        self.assertEqual(self.metric("floodgate_brownout_transitions_total"), 0)


class WatchdogCountsWhatWaitsOnABackend(SlowClientTestCase):
    """The watchdog's overload cause counts the requests waiting on a backend, not those waiting
    on their clients: 131 slow uploads used to make it drain, refuse every connection and run
    restart_command against an idle backend."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        cls.fg = cls.start_floodgate(
            [upstream("a", [cls.a])],
            resilience={"inflight": {"max_inflight": 8},
                        "adaptive_admission": {"enabled": False},
                        "watchdog": {"enabled": True, "check_interval": "100ms",
                                     "overload_inflight_percent": 50, "drain_grace": "10s"}})

    def overload_windows(self):
        return self.metric("floodgate_watchdog_unhealthy_windows_total", cause="overload")

    def test_slow_uploads_are_not_overload_and_requests_at_the_backend_are(self):
        uploads = []
        try:
            for i in range(6):  # three quarters of the cap, each sending its body slowly
                c = Conn(self.fg.port)
                request = build_request("POST", "/echo?upload=%d" % i, host="test.local",
                                        body=b"x" * 1000)
                c.send(request[:-900])
                uploads.append(c)
            poll(lambda: self.metric("floodgate_inflight_requests") == 6, what="uploads in")
            # Fifteen windows with six of the eight slots held by uploads: none is overload.
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                self.assertEqual(self.overload_windows(), 0)
                time.sleep(0.05)
            for c in uploads:
                c.send(b"x" * 900)
                self.assertEqual(c.read_response().status, 200)
        finally:
            for c in uploads:
                c.close()
        # Four requests the backend holds are half the cap waiting on it: overload.
        held = []
        for i in range(4):
            c = Conn(self.fg.port)
            c.send(build_request("GET", "/hold?key=wd-%d" % i, host="test.local"))
            held.append(c)
        try:
            for i in range(4):
                self.a.wait_for_target("/hold?key=wd-%d" % i)
            poll(lambda: self.overload_windows() > 0, what="an overload window")
        finally:
            for i in range(4):
                self.a.release("wd-%d" % i)
            for c in held:
                self.assertEqual(c.read_response().status, 200)
                c.close()


class NextRequestFindsTheSlotFree(SlowClientTestCase):
    """With two reactors and a pool at a cap of one, a client that sends its next request (on a
    new connection, which may land on the other reactor) as soon as it has read an answer was
    sometimes refused 503 proxy_overloaded: the previous request's slot was given back only once
    floodgate saw its write complete, after the client already had the bytes."""

    @classmethod
    def setUpClass(cls):
        cls.a = Backend("a").start()
        cls.backends = [cls.a]
        one = {"max_active_requests": 1, "max_pending_requests": 0}
        cls.fg = cls.start_floodgate(
            [upstream("ok", [cls.a], resilience=one),
             upstream("refused", ["127.0.0.1:%d" % cls.closed_port()], resilience=one)],
            routes=[{"host": "ok.test", "path_prefix": "/", "upstream": "ok"},
                    {"host": "refused.test", "path_prefix": "/", "upstream": "refused"}],
            workers=2, resilience={"circuit_breaker": {"enabled": False}})

    @staticmethod
    def closed_port():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there: connections are refused
        return port

    def one_after_another(self, host, expected, n=150):
        statuses = {}
        for i in range(n):
            with Conn(self.fg.port) as c:
                c.send(build_request("GET", "/echo?i=%d" % i, host=host))
                r = c.read_response()
                key = (r.status, r.header("x-floodgate-reason") or "")
                statuses[key] = statuses.get(key, 0) + 1
        self.assertEqual(statuses, {expected: n})

    def test_after_a_relayed_answer(self):
        self.one_after_another("ok.test", (200, ""))

    def test_after_a_generated_answer(self):
        self.one_after_another("refused.test", (502, "upstream_connect_failed"))


if __name__ == "__main__":
    unittest.main()
