"""HTTP/2 attacks from one client, each with the GOAWAY (or answer) floodgate gives it and, for
the floods, another client's requests served meanwhile: Rapid Reset (HEADERS + RST_STREAM in a
loop), the CONTINUATION flood, a header block that decodes past the cap (HPACK indexing, and
cookies), PING and zero-length DATA floods, too many streams at once. Raw frames are written
with Debian's python3-h2 (h2.connection for what a client may send, by hand for the rest)."""

import socket
import struct
import sys
import threading
import time
import unittest

try:
    import h2.config
except ImportError:  # Debian's python3-h2 when another interpreter runs the suite
    sys.path.append("/usr/lib/python3/dist-packages")
    import h2.config
import h2.connection  # noqa: E402 (after the path above)
import h2.events  # noqa: E402
import h2.exceptions  # noqa: E402
import h2.settings  # noqa: E402

from backend import Backend
from harness import DEFAULT_TIMEOUT, FloodgateTestCase, poll, upstream

ENHANCE_YOUR_CALM = 0xB
NO_ERROR = 0x0


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


class H2Client:
    """A raw HTTP/2 client over h2c: python3-h2's state machine for what it allows, raw frames
    for the rest; collects the server's events."""

    def __init__(self, port, window=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEFAULT_TIMEOUT)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                      validate_outbound_headers=False))
        self.conn.initiate_connection()
        if window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.flush()
        self.events = []
        self.responses = {}  # stream id -> status
        self.resets = {}  # stream id -> error code
        self.goaway = None  # (error code, last stream id) of the last GOAWAY
        self.goaways = []  # every GOAWAY's (error code, last stream id), from the raw frames
        self.raw = b""
        self.max_streams = None  # the SETTINGS_MAX_CONCURRENT_STREAMS floodgate advertises
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def ignore_stream_limit(self):
        """From now on the client opens streams past floodgate's limit, as an attacker would."""
        settings = self.conn.remote_settings
        settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = 1000
        settings.acknowledge()

    def send_raw(self, data):
        self.sock.sendall(data)

    def get(self, path, headers=(), end_stream=True):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"),
                                     (":authority", "a.test"), (":path", path), *headers],
                               end_stream=end_stream)
        self.flush()
        return sid

    def pump(self, timeout=0.2):
        """Reads what the server sent within `timeout`; False once the connection is closed."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, BlockingIOError):
            return True
        except (ConnectionResetError, BrokenPipeError):
            self.closed = True
            return False
        if not data:
            self.closed = True
            return False
        self.note_goaways(data)
        try:
            events = self.conn.receive_data(data)
        except (h2.exceptions.ProtocolError, KeyError):
            events = []  # frames for streams python3-h2 did not open (raw ones)
        for e in events:
            self.events.append(e)
            if isinstance(e, h2.events.ResponseReceived):
                self.responses[e.stream_id] = int(dict(e.headers)[":status"])
            elif isinstance(e, h2.events.RemoteSettingsChanged):
                changed = e.changed_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
                if changed is not None:
                    self.max_streams = changed.new_value
            elif isinstance(e, h2.events.StreamReset):
                self.resets[e.stream_id] = e.error_code
            elif isinstance(e, h2.events.DataReceived):
                self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        try:
            self.flush()
        except OSError:
            pass
        return True

    def note_goaways(self, data):
        """GOAWAY frames, read from the bytes themselves (python3-h2 stops at the first)."""
        self.raw += data
        if self.raw.startswith(b"PRI"):  # never: the server sends no preface
            return
        while len(self.raw) >= 9:
            length = int.from_bytes(self.raw[:3], "big")
            if len(self.raw) < 9 + length:
                break
            if self.raw[3] == 0x7:
                payload = self.raw[9:9 + length]
                last = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
                self.goaways.append((int.from_bytes(payload[4:8], "big"), last))
                self.goaway = self.goaways[-1]
            self.raw = self.raw[9 + length:]

    def pump_until(self, predicate, what, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for " + what)
            if not self.pump() and not predicate():
                raise AssertionError("connection closed waiting for " + what)

    def wait_closed(self, timeout=DEFAULT_TIMEOUT):
        deadline = time.monotonic() + timeout
        while self.pump() and time.monotonic() < deadline:
            pass
        return self.closed

    def close(self):
        self.sock.close()


class Bystander:
    """Another client's requests, one connection, while an attack runs: how many succeed."""

    def __init__(self, port):
        self.port = port
        self.ok = 0
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        try:
            c = H2Client(self.port)
            while not self.stop.is_set():
                sid = c.get("/echo?bystander=1")
                c.pump_until(lambda: sid in c.responses or sid in c.resets, "a bystander answer")
                if c.responses.get(sid) == 200:
                    self.ok += 1
                else:
                    self.failed += 1
            c.close()
        except Exception:  # counted: the assertion below says what the attack cost
            self.failed += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(DEFAULT_TIMEOUT)


class Http2Attacks(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.backend])], h2c=True,
            server={"http2": {"glitch_threshold": 20, "max_concurrent_streams": 20,
                              "max_header_list_bytes": 4096, "max_continuations": 4}})

    def client(self, **kw):
        c = H2Client(self.fg.port, **kw)
        self.addCleanup(c.close)
        c.pump_until(lambda: any(isinstance(e, h2.events.RemoteSettingsChanged)
                                 for e in c.events), "floodgate's SETTINGS")
        return c

    def test_rapid_reset_ends_the_connection_with_enhance_your_calm(self):
        with Bystander(self.fg.port) as other:
            c = self.client()
            # The backend holds what it gets: a reset frees no stream slot while it works, so
            # the resets alone must end the connection.
            self.addCleanup(self.backend.release, "rapid")
            block = c.conn.encoder.encode([(":method", "GET"), (":scheme", "http"),
                                           (":authority", "a.test"), (":path", "/hold?key=rapid")])
            # HEADERS then RST_STREAM(CANCEL), stream after stream, as fast as the socket takes
            # them (raw frames: the attacker ignores floodgate's first, graceful GOAWAY).
            for i in range(300):
                sid = 1 + 2 * i
                try:
                    c.send_raw(frame(0x1, 0x5, sid, block) +
                               frame(0x3, 0x0, sid, struct.pack(">I", 0x8)))
                except OSError:
                    break  # floodgate closed the connection
                c.pump(0)
            c.wait_closed()
            poll(lambda: other.ok >= 3, what="the bystander's requests")
        self.assertTrue(c.closed)
        self.assertEqual(c.goaways[0][0], NO_ERROR)  # 75 % of the threshold: graceful
        self.assertEqual(c.goaways[-1][0], ENHANCE_YOUR_CALM)
        self.assertEqual(other.failed, 0)
        m = self.fg.metrics()
        self.assertGreaterEqual(m.value("floodgate_http2_glitches_total", kind="reset_unanswered"),
                                15)
        self.assertGreaterEqual(m.value("floodgate_http2_goaways_total", code="enhance_your_calm"),
                                1)

    def test_a_continuation_flood_ends_the_connection(self):
        c = self.client()
        block = c.conn.encoder.encode([(":method", "GET"), (":scheme", "http"),
                                       (":authority", "a.test"), (":path", "/echo")])
        c.send_raw(frame(0x1, 0x0, 1, block))  # HEADERS without END_HEADERS
        for _ in range(50):
            try:
                c.send_raw(frame(0x9, 0x0, 1, b"\x82"))  # 1-byte CONTINUATION, never the last
            except OSError:
                break
        self.assertTrue(c.wait_closed())
        self.assertIsNotNone(c.goaway)
        self.assertNotEqual(c.goaway[0], NO_ERROR)
        self.assertEqual(self.fg.get("/echo?after=continuation").status, 200)

    def test_a_header_block_decoding_past_twice_the_cap_ends_the_connection(self):
        c = self.client()
        # One large field, then the same again and again: each repeat is one byte of HPACK (an
        # index into the dynamic table) that decodes to the whole field.
        c.get("/echo?bomb=1", headers=[("x-bomb", "b" * 1000)] * 40)
        self.assertTrue(c.wait_closed())
        self.assertEqual(c.goaway[0], ENHANCE_YOUR_CALM)

    def test_cookies_past_the_decoded_cap_are_answered_431(self):
        c = self.client()
        sid = c.get("/echo?cookies=1",
                    headers=[("cookie", "k%d=%s" % (i, "v" * 60)) for i in range(60)])
        c.pump_until(lambda: sid in c.responses, "the answer")
        self.assertEqual(c.responses[sid], 431)
        self.assertFalse(c.closed)

    def test_a_ping_flood_with_the_socket_never_read_ends_the_connection(self):
        with Bystander(self.fg.port) as other:
            c = self.client()
            try:
                for i in range(5000):
                    c.send_raw(frame(0x6, 0x0, 0, struct.pack(">Q", i)))
            except OSError:
                pass  # floodgate closed it
            self.assertTrue(c.wait_closed())
            poll(lambda: other.ok >= 3, what="the bystander's requests")
        self.assertEqual(other.failed, 0)

    def test_a_zero_length_data_flood_ends_the_connection(self):
        c = self.client()
        sid = c.get("/echo?upload=1", end_stream=False)
        try:
            for _ in range(500):
                c.send_raw(frame(0x0, 0x0, sid, b""))
        except OSError:
            pass
        self.assertTrue(c.wait_closed())
        self.assertEqual(c.goaway[0], ENHANCE_YOUR_CALM)

    def test_streams_beyond_the_limit_wait_unread_and_are_all_answered(self):
        c = self.client()
        c.ignore_stream_limit()
        before = self.backend.request_count
        keys = ["many-%d" % i for i in range(30)]
        sids = [c.get("/hold?key=" + k) for k in keys]
        # max_concurrent_streams is 20: 20 streams reach the backend, the other 10 wait unread
        # in floodgate (not refused) until streams end.
        self.backend.wait_for_requests(before + 20)
        c.pump(0.3)
        self.assertEqual(self.backend.request_count, before + 20)
        self.assertEqual(c.resets, {})
        for k in keys:
            self.backend.release(k)
        c.pump_until(lambda: all(s in c.responses for s in sids), "every answer")
        self.assertEqual(sorted(set(c.responses[s] for s in sids)), [200])


class Http2SlowReader(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])], h2c=True,
                                     server={"send_timeout": "1s", "idle_timeout": "1s"})

    def test_a_stream_whose_window_stays_shut_is_cut_after_send_timeout(self):
        c = H2Client(self.fg.port, window=0)  # the client never lets a DATA byte come
        self.addCleanup(c.close)
        sid = c.get("/big?bytes=1000000")
        c.pump_until(lambda: sid in c.resets, "the stream's reset")
        self.assertEqual(c.resets[sid], 0x8)  # CANCEL
        self.assertEqual(c.responses.get(sid), 200)  # its head had come
        # The connection and floodgate go on.
        sid2 = c.get("/echo?after=slow")
        c.conn.increment_flow_control_window(1 << 20, stream_id=None)
        c.conn.increment_flow_control_window(1 << 20, stream_id=sid2)
        c.flush()
        c.pump_until(lambda: sid2 in c.responses, "the next answer")
        self.assertEqual(c.responses[sid2], 200)


    def test_a_request_body_that_never_comes_is_ended_after_idle_timeout(self):
        c = H2Client(self.fg.port)
        self.addCleanup(c.close)
        before = self.backend.request_count
        sid = c.get("/echo?upload=never", end_stream=False)  # HEADERS, then nothing
        c.pump_until(lambda: sid in c.resets, "the stream's reset")
        self.assertEqual(c.resets[sid], 0x8)  # CANCEL
        # The backend never got a whole request to answer, and its slot is back.
        sid2 = c.get("/echo?after=stall")
        c.pump_until(lambda: sid2 in c.responses, "the next answer")
        self.assertEqual(c.responses[sid2], 200)
        self.assertLessEqual(self.backend.request_count - before, 2)


class Http2UnderPressure(FloodgateTestCase):
    """The advertised stream limit shrinks while the front in-flight cap is three quarters
    full, and comes back once it is below half."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.backend])], h2c=True,
            server={"http2": {"max_concurrent_streams": 20, "min_concurrent_streams": 2}},
            resilience={"inflight": {"max_inflight": 4}})

    def test_the_stream_limit_shrinks_under_pressure_and_comes_back(self):
        held = [threading.Thread(target=self.fg.get, args=("/hold?key=pressure",), daemon=True)
                for _ in range(3)]
        for t in held:
            t.start()
        self.backend.wait_for_requests(3)
        c = H2Client(self.fg.port)
        self.addCleanup(c.close)
        c.pump_until(lambda: c.max_streams == 2, "the shrunk limit")
        self.backend.release("pressure")
        for t in held:
            t.join(DEFAULT_TIMEOUT)
        # The next frames the connection reads find the cap below half: the limit comes back.
        c.conn.ping(b"12345678")
        c.flush()
        c.pump_until(lambda: c.max_streams == 20, "the limit back")


if __name__ == "__main__":
    unittest.main()
