"""TLS on the listeners ([[server.tls]]): the certificate chosen by SNI (exact, wildcard, the
default for an unknown or missing name), ECDSA and RSA, TLS 1.2 and 1.3, ALPN by the entry's
`alpn` (h2 first by default),
requests and keep-alive over TLS with X-Forwarded-Proto: https, large bodies both ways, the
access log's TLS fields, the handshake metrics (results, versions, duration, resumption with a
session ticket), a plain-HTTP client on the TLS port answered 400 plain_http_to_tls in the
clear, a silent client closed after handshake_timeout, `openssl s_client`, certificate files replaced and
reloaded under load (established connections kept, a broken file refused), a WebSocket
upgrade over TLS, and `check`
naming an unusable file.
Certificates come from a test CA made with the openssl command line (tls_certs.py)."""

import base64
import hashlib
import os
import signal
import socket
import ssl
import subprocess
import threading
import unittest

from backend import Backend, WS_GUID, big_body
from harness import (FloodgateTestCase, TlsConn, build_request, floodgate_bin, poll, render_toml,
                     upstream)
from tls_certs import TestCA


WS_KEY = base64.b64encode(b"0123456789abcdef").decode()
UPGRADE_HEADERS = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                   ("Sec-WebSocket-Key", WS_KEY), ("Sec-WebSocket-Version", "13")]


def client_context(ca=None, minimum=None, maximum=None, alpn=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca:
        ctx.load_verify_locations(ca)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if minimum:
        ctx.minimum_version = minimum
    if maximum:
        ctx.maximum_version = maximum
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def peer_cn(conn):
    """The CN of the certificate the server sent (binary form, parsed by openssl)."""
    der = conn.sock.getpeercert(binary_form=True)
    p = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject",
                        "-nameopt", "multiline"], input=der, capture_output=True, timeout=30)
    for line in p.stdout.decode().splitlines():
        if "commonName" in line:
            return line.split("=", 1)[1].strip()
    return None


class TlsListeners(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        a_cert, a_key = cls.ca.leaf("a", ["a.test", "*.a.test"], kind="ec")
        b_cert, b_key = cls.ca.leaf("b", ["b.test"], kind="rsa")
        d_cert, d_key = cls.ca.leaf("default", ["default.test"], kind="ec")
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate(
            [upstream("app", [cls.backend])],
            server={"header_timeout": "2s", "handshake_timeout": "1s"},
            tls=[{"certificate": a_cert, "private_key": a_key,
                  "server_names": ["a.test", "*.a.test"]},
                 {"certificate": b_cert, "private_key": b_key, "server_names": ["b.test"],
                  "alpn": ["http/1.1"]},
                 {"certificate": d_cert, "private_key": d_key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def conn(self, name, **kw):
        return TlsConn(self.fg.tls_port, client_context(self.ca.cert, **kw), name)

    # --- certificates by SNI ----------------------------------------------------------------
    def test_sni_picks_the_certificate_of_the_name_and_it_verifies(self):
        with self.conn("a.test") as c:
            self.assertEqual(peer_cn(c), "a.test")
        with self.conn("b.test") as c:
            self.assertEqual(peer_cn(c), "b.test")
            self.assertIn("RSA", c.sock.cipher()[0] if c.sock.version() == "TLSv1.2" else "RSA")

    def test_a_wildcard_name_matches_one_label(self):
        with self.conn("www.a.test") as c:
            self.assertEqual(peer_cn(c), "a.test")
        with TlsConn(self.fg.tls_port, client_context(), "x.www.a.test") as c:
            self.assertEqual(peer_cn(c), "default.test")

    def test_a_name_with_a_trailing_dot_gets_the_certificate_of_the_name(self):
        # "a.test." is the fully qualified "a.test", which routes match too; nginx and HAProxy
        # also pick its certificate. Before, it got the default one.
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.fg.tls_port,
                            "-servername", "a.test."], input=b"", capture_output=True, timeout=30)
        out = (p.stdout + p.stderr).decode(errors="replace")
        self.assertRegex(out, r"subject=.*CN ?= ?a\.test\b", out)

    def test_an_unknown_or_missing_name_gets_the_default_certificate(self):
        with TlsConn(self.fg.tls_port, client_context(), "unknown.test") as c:
            self.assertEqual(peer_cn(c), "default.test")
        with TlsConn(self.fg.tls_port, client_context(), None) as c:
            self.assertEqual(peer_cn(c), "default.test")

    # --- versions and ALPN ------------------------------------------------------------------
    def test_tls_1_2_and_1_3_are_both_served(self):
        with self.conn("a.test", maximum=ssl.TLSVersion.TLSv1_2) as c:
            self.assertEqual(c.sock.version(), "TLSv1.2")
            self.assertEqual(c.request("GET", "/echo?v=12", host="a.test").status, 200)
        with self.conn("a.test", minimum=ssl.TLSVersion.TLSv1_3) as c:
            self.assertEqual(c.sock.version(), "TLSv1.3")
            self.assertEqual(c.request("GET", "/echo?v=13", host="a.test").status, 200)

    def test_alpn_picks_the_entrys_first_protocol_the_client_offers(self):
        with self.conn("a.test", alpn=["http/1.1", "h2"]) as c:
            self.assertEqual(c.sock.selected_alpn_protocol(), "h2")
        with self.conn("a.test", alpn=["http/1.1"]) as c:
            self.assertEqual(c.sock.selected_alpn_protocol(), "http/1.1")
            self.assertEqual(c.request("GET", "/echo?alpn=1", host="a.test").status, 200)

    def test_an_entry_without_h2_answers_nothing_to_h2_alone(self):
        # The entry SNI chose decides (b.test's alpn is http/1.1 alone).
        with self.conn("b.test", alpn=["h2", "http/1.1"]) as c:
            self.assertEqual(c.sock.selected_alpn_protocol(), "http/1.1")
        with self.conn("b.test", alpn=["h2"]) as c:
            self.assertIsNone(c.sock.selected_alpn_protocol())

    # --- requests over TLS ------------------------------------------------------------------
    def test_requests_over_tls_are_forwarded_with_x_forwarded_proto_https(self):
        with self.conn("a.test") as c:
            for i in range(3):  # keep-alive over one session
                r = c.request("GET", "/echo?tls=%d" % i, host="a.test")
                self.assertEqual(r.status, 200, r)
                self.assertNotIn("close", r.connection_tokens(), r)
        rec = self.backend.wait_for_target("/echo?tls=2")
        self.assertEqual(rec.header_values("X-Forwarded-Proto"), ["https"])
        plain = self.fg.get("/echo?plain=1")
        self.assertEqual(plain.status, 200, plain)
        self.assertEqual(self.backend.wait_for_target("/echo?plain=1")
                         .header_values("X-Forwarded-Proto"), ["http"])

    def test_large_bodies_cross_tls_both_ways(self):
        body = big_body(256 << 10)
        with self.conn("a.test") as c:
            r = c.request("POST", "/echo?upload=1", body=body, host="a.test")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["body"].encode("latin-1"), body)
            r = c.request("GET", "/big?bytes=%d" % (4 << 20), host="a.test")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, big_body(4 << 20))

    def test_access_log_records_the_tls_version_and_cipher(self):
        with self.conn("a.test", minimum=ssl.TLSVersion.TLSv1_3) as c:
            cipher = c.sock.cipher()[0]
            self.assertEqual(c.request("GET", "/echo?logged=tls", host="a.test").status, 200)
        entry = poll(lambda: next((e for e in self.fg.access_log_entries()
                                   if e.get("target") == "/echo?logged=tls"), None),
                     what="the access log line")
        self.assertEqual(entry["tls_version"], "TLSv1.3")
        self.assertEqual(entry["tls_cipher"], cipher)

    # --- handshakes -------------------------------------------------------------------------
    def test_handshakes_are_counted_by_result_and_version_with_their_duration(self):
        before = self.fg.metrics()
        ok13 = before.value("floodgate_tls_handshakes_total", result="ok", version="1.3")
        ok12 = before.value("floodgate_tls_handshakes_total", result="ok", version="1.2")
        count = before.value("floodgate_tls_handshake_duration_seconds_count")
        with self.conn("a.test", minimum=ssl.TLSVersion.TLSv1_3):
            pass
        with self.conn("a.test", maximum=ssl.TLSVersion.TLSv1_2):
            pass
        poll(lambda: self.fg.metrics().value("floodgate_tls_handshakes_total", result="ok",
                                             version="1.2") == ok12 + 1, what="1.2 counted")
        after = self.fg.metrics()
        self.assertEqual(after.value("floodgate_tls_handshakes_total", result="ok",
                                     version="1.3"), ok13 + 1)
        self.assertEqual(after.value("floodgate_tls_handshake_duration_seconds_count"),
                         count + 2)

    def test_a_session_ticket_resumes_the_session_and_is_counted(self):
        ctx = client_context(self.ca.cert, minimum=ssl.TLSVersion.TLSv1_3)
        with TlsConn(self.fg.tls_port, ctx, "a.test") as c:
            self.assertEqual(c.request("GET", "/echo?ticket=1", host="a.test").status, 200)
            session = c.sock.session  # the ticket came after the handshake, with the response
        before = self.fg.metrics().value("floodgate_tls_resumptions_total")
        with TlsConn(self.fg.tls_port, ctx, "a.test", session=session) as c:
            self.assertEqual(c.request("GET", "/echo?ticket=2", host="a.test").status, 200)
            self.assertTrue(c.sock.session_reused)
        poll(lambda: self.fg.metrics().value("floodgate_tls_resumptions_total") == before + 1,
             what="the resumption counted")

    def test_plain_http_on_the_tls_port_is_answered_400_in_the_clear(self):
        """nginx answers "400 The plain HTTP request was sent to HTTPS port"; floodgate answers
        its own 400 plain_http_to_tls in plain text, then closes; the handshake counts as
        failed."""
        before = self.fg.metrics().value("floodgate_tls_handshakes_total", result="failed",
                                         version="unknown")
        generated = self.fg.metrics().value("floodgate_responses_generated_total",
                                            reason="plain_http_to_tls")
        for request in (b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
                        b"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"):
            s = socket.create_connection(("127.0.0.1", self.fg.tls_port), timeout=10)
            got = b""
            try:
                s.sendall(request)
                while True:
                    data = s.recv(4096)
                    if not data:
                        break
                    got += data
            finally:
                s.close()
            self.assertTrue(got.startswith(b"HTTP/1.1 400 Bad Request\r\n"), got)
            self.assertIn(b"X-Floodgate-Reason: plain_http_to_tls\r\n", got)
            self.assertIn(b"Connection: close\r\n", got)
            self.assertTrue(got.endswith(b"https:// URL)\n"), got)
        poll(lambda: self.fg.metrics().value("floodgate_tls_handshakes_total", result="failed",
                                             version="unknown") == before + 2,
             what="the failed handshakes counted")
        self.assertEqual(self.fg.metrics().value("floodgate_responses_generated_total",
                                                 reason="plain_http_to_tls"), generated + 2)

    def test_a_client_that_never_finishes_the_handshake_is_closed_after_handshake_timeout(self):
        before = self.fg.metrics().value("floodgate_tls_handshakes_total", result="timeout",
                                         version="unknown")
        s = socket.create_connection(("127.0.0.1", self.fg.tls_port), timeout=15)
        try:
            self.assertEqual(s.recv(4096), b"")  # closed by floodgate, nothing sent
        finally:
            s.close()
        poll(lambda: self.fg.metrics().value("floodgate_tls_handshakes_total", result="timeout",
                                             version="unknown") == before + 1,
             what="the timeout counted")

    def test_openssl_s_client_negotiates_tls_1_2_with_the_named_certificate(self):
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.fg.tls_port,
                            "-servername", "b.test", "-tls1_2", "-CAfile", self.ca.cert,
                            "-verify_return_error", "-brief"],
                           input=b"", capture_output=True, timeout=30)
        out = (p.stdout + p.stderr).decode()
        self.assertIn("Protocol version: TLSv1.2", out)
        self.assertIn("CN = b.test", out)
        self.assertIn("Verification: OK", out)


class TlsCertificateReload(FloodgateTestCase):
    """SIGHUP with replaced certificate files: new handshakes get the new certificate while
    requests keep flowing, an established TLS connection carries on, and a broken file keeps
    the old certificate with the reason in the log."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cls.first = cls.ca.leaf("first", ["r.test"])
        cls.second = cls.ca.leaf("second", ["r.test", "second.r.test"])
        cls.cert = os.path.join(cls.ca.dir, "live.pem")
        cls.key = os.path.join(cls.ca.dir, "live.key")
        cls.install(cls.first)
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     tls=[{"certificate": cls.cert, "private_key": cls.key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    @classmethod
    def install(cls, pair):
        for src, dst in zip(pair, (cls.cert, cls.key)):
            with open(src, "rb") as f, open(dst + ".new", "wb") as g:
                g.write(f.read())
            os.replace(dst + ".new", dst)  # as a certificate manager swaps files

    def names(self):
        with TlsConn(self.fg.tls_port, client_context(self.ca.cert), "r.test") as c:
            der = c.sock.getpeercert()
            return sorted(v for k, v in der.get("subjectAltName", ()) if k == "DNS")

    def reloads(self, result):
        return self.fg.metrics().value("floodgate_config_reloads_total", result=result)

    def test_new_files_apply_to_new_handshakes_and_established_connections_carry_on(self):
        self.assertEqual(self.names(), ["r.test"])
        established = TlsConn(self.fg.tls_port, client_context(self.ca.cert), "r.test")
        self.assertEqual(established.request("GET", "/echo?before", host="r.test").status, 200)
        failures, done, served = [], threading.Event(), [0]

        def load():  # requests on fresh TLS connections all through the reload
            while not done.is_set():
                try:
                    with TlsConn(self.fg.tls_port, client_context(self.ca.cert), "r.test") as c:
                        r = c.request("GET", "/echo?during", host="r.test")
                        if r.status != 200:
                            failures.append(r.status)
                        served[0] += 1
                except Exception as e:  # noqa: BLE001 - any failure is the test's failure
                    failures.append(repr(e))

        t = threading.Thread(target=load)
        t.start()
        try:
            poll(lambda: served[0] >= 5, what="requests before the reload")
            ok = self.reloads("ok")
            self.install(self.second)
            self.fg.signal(signal.SIGHUP)
            poll(lambda: self.reloads("ok") == ok + 1, what="the reload")
            poll(lambda: self.names() == ["r.test", "second.r.test"], what="the new certificate")
            at_reload = served[0]
            poll(lambda: served[0] >= at_reload + 5, what="requests after the reload")
        finally:
            done.set()
            t.join(30)
        self.assertEqual(failures, [])
        with established:
            self.assertEqual(established.request("GET", "/echo?after", host="r.test").status, 200)
        self.install(self.first)
        ok = self.reloads("ok")
        self.fg.signal(signal.SIGHUP)
        poll(lambda: self.reloads("ok") == ok + 1, what="the reload back")

    def test_a_session_ticket_from_before_a_reload_resumes_after_it(self):
        # The ticket keys are the process's, rotated on their own period, not the generation's.
        ctx = client_context(self.ca.cert, minimum=ssl.TLSVersion.TLSv1_3)
        with TlsConn(self.fg.tls_port, ctx, "r.test") as c:
            self.assertEqual(c.request("GET", "/echo?ticket", host="r.test").status, 200)
            session = c.sock.session
        before = self.names()
        ok = self.reloads("ok")
        self.install(self.second if before == ["r.test"] else self.first)
        try:
            self.fg.signal(signal.SIGHUP)
            poll(lambda: self.reloads("ok") == ok + 1, what="the reload")
            with TlsConn(self.fg.tls_port, ctx, "r.test", session=session) as c:
                self.assertEqual(c.request("GET", "/echo?resumed", host="r.test").status, 200)
                self.assertTrue(c.sock.session_reused)
        finally:
            self.install(self.first if before == ["r.test"] else self.second)
            ok = self.reloads("ok")
            self.fg.signal(signal.SIGHUP)
            poll(lambda: self.reloads("ok") == ok + 1, what="the reload back")

    def test_a_broken_certificate_file_keeps_the_old_certificate_and_says_why(self):
        before = self.names()
        errors = self.reloads("error")
        with open(self.cert, "w") as f:
            f.write("not a certificate\n")
        try:
            self.fg.signal(signal.SIGHUP)
            poll(lambda: self.reloads("error") == errors + 1, what="the refused reload")
            self.assertEqual(self.names(), before)
            poll(lambda: b"is not a usable PEM certificate chain" in self.fg.stderr_bytes(),
                 what="the reason in the log")
        finally:
            self.install(self.first if before == ["r.test"] else self.second)


class TlsWebSocket(FloodgateTestCase):
    """A WebSocket upgrade over a TLS listener: the 101, then the tunnel's bytes both ways
    through the TLS engine, and either side's close reaching the other."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cert, key = cls.ca.leaf("ws", ["ws.test"], kind="ec")
        cls.backend = Backend("ws").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     tls=[{"certificate": cert, "private_key": key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def open_tunnel(self, target):
        c = TlsConn(self.fg.tls_port, client_context(self.ca.cert), "ws.test")
        c.send(build_request("GET", target, host="ws.test", headers=UPGRADE_HEADERS))
        r = c.read_response()
        self.assertEqual(r.status, 101, r)
        expected = base64.b64encode(hashlib.sha1((WS_KEY + WS_GUID).encode()).digest()).decode()
        self.assertEqual(r.header("sec-websocket-accept"), expected, r)
        rec = self.backend.wait_for_target(target)
        self.assertEqual(rec.header_values("x-forwarded-proto"), ["https"])
        return c, rec

    def test_the_tunnel_carries_bytes_both_ways_through_tls(self):
        c, _ = self.open_tunnel("/ws?tls-small")
        with c:
            for payload in (b"ping", b"\x00\xff\r\n\r\nGET / HTTP/1.1\r\n\r\n", b"x" * 1000):
                c.send(payload)
                self.assertEqual(c.read_exact(len(payload)), payload)

    def test_the_tunnel_carries_a_large_transfer_over_many_tls_records(self):
        # One thread: an SSL object must not be read and written from two at once.
        payload = os.urandom(1024 * 1024)
        c, _ = self.open_tunnel("/ws?tls-large")
        with c:
            echoed = bytearray()
            for i in range(0, len(payload), 64 * 1024):
                c.send(payload[i:i + 64 * 1024])
                echoed += c.read_exact(min(64 * 1024, len(payload) - i), timeout=30)
        self.assertTrue(bytes(echoed) == payload, "the TLS tunnel corrupted the byte stream")

    def test_the_client_closing_reaches_the_backend(self):
        c, rec = self.open_tunnel("/ws?tls-client-closes")
        c.close()
        self.backend.wait_for(lambda b: ("peer-closed", rec.conn_id) in b.ws_events,
                              what="the backend to see the TLS tunnel close")

    def test_the_backend_closing_reaches_the_client(self):
        c, _ = self.open_tunnel("/ws?close_after=5")
        with c:
            c.send(b"12345")
            self.assertEqual(c.read_exact(5), b"12345")
            self.assertEqual(c.wait_closed(), b"")


class TlsHandshakesUnderTheInflightCap(FloodgateTestCase):
    """A TLS handshake holds a slot of the front in-flight cap from its complete ClientHello to
    its end: at the cap a new handshake ends with an alert before any signature (never
    answered in plain text) and counts as refused; a finished handshake gives its slot back."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cert, key = cls.ca.leaf("cap", ["cap.test"], kind="ec")
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     resilience={"inflight": {"max_inflight": 1}},
                                     tls=[{"certificate": cert, "private_key": key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def metric(self, name, **labels):
        return self.fg.metrics().value(name, **labels)

    def test_at_the_cap_a_new_tls_handshake_is_refused_with_an_alert(self):
        refused = self.metric("floodgate_tls_handshakes_total", result="refused",
                              version="unknown")
        held = self.fg.conn()  # the plain listener: one request takes the only slot
        try:
            held.send(build_request("GET", "/hold?key=tls-cap"))
            self.backend.wait_for_target("/hold?key=tls-cap")
            poll(lambda: self.metric("floodgate_inflight_requests") == 1, what="the slot taken")
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                TlsConn(self.fg.tls_port, client_context(self.ca.cert), "cap.test").close()
            poll(lambda: self.metric("floodgate_tls_handshakes_total", result="refused",
                                     version="unknown") == refused + 1,
                 what="the refused handshake counted")
            self.backend.release("tls-cap")
            self.assertEqual(held.read_response().status, 200)
        finally:
            held.close()
        poll(lambda: self.metric("floodgate_inflight_requests") == 0, what="the slot back")
        with TlsConn(self.fg.tls_port, client_context(self.ca.cert), "cap.test") as c:
            self.assertEqual(c.request("GET", "/echo?after-cap", host="cap.test").status, 200)
            # Established and idle between requests: the handshake's slot was given back.
            poll(lambda: self.metric("floodgate_inflight_requests") == 0,
                 what="no slot held by an established TLS connection")
            self.assertEqual(c.request("GET", "/echo?again", host="cap.test").status, 200)


class EarlyDataClient(FloodgateTestCase):
    """A floodgate with one TLS 1.3 listener and `openssl s_client` sessions that try early
    data (0-RTT): a ticket from a full handshake (-sess_out), then a resumption that sends a
    request from a file as early data (-sess_in -early_data)."""

    allow_0rtt = True
    mode = "enforce"  # resilience.protocol.mode

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cert, key = cls.ca.leaf("early", ["early.test"], kind="ec")
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     resilience={"protocol": {"allow_0rtt": cls.allow_0rtt,
                                                              "mode": cls.mode}},
                                     tls=[{"certificate": cert, "private_key": key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def s_client(self, *args, data=b""):
        p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.fg.tls_port,
                            "-servername", "early.test", "-tls1_3", "-CAfile", self.ca.cert,
                            "-ign_eof"] + list(args),
                           input=data, capture_output=True, timeout=30)
        return (p.stdout + p.stderr).decode(errors="replace")

    def session(self, name):
        """A session ticket from a full handshake."""
        path = os.path.join(self.ca.dir, name + ".sess")
        out = self.s_client("-sess_out", path,
                            data=b"GET /echo?ticket HTTP/1.1\r\nHost: early.test\r\n"
                                 b"Connection: close\r\n\r\n")
        self.assertIn("HTTP/1.1 200", out)
        self.assertTrue(os.path.getsize(path) > 0, out)
        return path

    def early(self, name, request):
        path = os.path.join(self.ca.dir, name + ".req")
        with open(path, "wb") as f:
            f.write(request)
        return self.s_client("-sess_in", self.session(name), "-early_data", path)


class TlsEarlyData(EarlyDataClient):
    """resilience.protocol.allow_0rtt = true: a resumed TLS 1.3 session may send its first
    requests in early data (0-RTT). A GET there is forwarded with Early-Data: 1, a POST is
    answered 425 too_early and never reaches the backend, and a request after the handshake
    carries no Early-Data."""

    def test_a_get_in_early_data_is_forwarded_with_early_data_1(self):
        out = self.early("get", b"GET /echo?early-get HTTP/1.1\r\nHost: early.test\r\n"
                                b"Connection: close\r\n\r\n")
        self.assertIn("Early data was accepted", out)
        self.assertIn("HTTP/1.1 200", out)
        seen = self.backend.wait_for_target("/echo?early-get")
        self.assertEqual(seen.header("early-data"), "1")

    def test_a_post_in_early_data_is_answered_425_too_early(self):
        out = self.early("post", b"POST /echo?early-post HTTP/1.1\r\nHost: early.test\r\n"
                                 b"Content-Length: 5\r\nConnection: close\r\n\r\nhello")
        self.assertIn("Early data was accepted", out)
        self.assertIn("HTTP/1.1 425 Too Early", out)
        self.assertIn("X-Floodgate-Reason: too_early", out)
        self.assertEqual([r for r in self.backend.snapshot() if "early-post" in r.target], [])
        poll(lambda: self.fg.metrics().value("floodgate_responses_generated_total",
                                             reason="too_early") >= 1,
             what="the 425 counted")

    def test_a_clients_early_data_0_does_not_hide_early_data_from_the_backend(self):
        out = self.early("zero", b"GET /echo?early-zero HTTP/1.1\r\nHost: early.test\r\n"
                                 b"Early-Data: 0\r\nConnection: close\r\n\r\n")
        self.assertIn("Early data was accepted", out)
        seen = self.backend.wait_for_target("/echo?early-zero")
        self.assertEqual(seen.header_values("early-data"), ["1"])

    def test_a_request_after_the_handshake_carries_no_early_data(self):
        with TlsConn(self.fg.tls_port, client_context(self.ca.cert), "early.test") as c:
            self.assertEqual(c.request("POST", "/echo?after", body=b"x",
                                       host="early.test").status, 200)
        seen = self.backend.wait_for_target("/echo?after")
        self.assertIsNone(seen.header("early-data"))


class TlsEarlyDataInShadowMode(EarlyDataClient):
    """The protocol table in shadow mode observes its traffic rules without enforcing them,
    but early data's method check is replay protection, not traffic policy: a POST in early
    data is still answered 425 (before, shadow mode let a replayed POST reach the backend
    twice)."""

    mode = "shadow"

    def test_a_post_in_early_data_is_answered_425_in_shadow_mode_too(self):
        out = self.early("shadow-post", b"POST /echo?shadow-post HTTP/1.1\r\n"
                                        b"Host: early.test\r\nContent-Length: 5\r\n"
                                        b"Connection: close\r\n\r\nhello")
        self.assertIn("Early data was accepted", out)
        self.assertIn("HTTP/1.1 425 Too Early", out)
        self.assertEqual([r for r in self.backend.snapshot() if "shadow-post" in r.target], [])


class TlsEarlyDataOff(EarlyDataClient):
    """allow_0rtt = false (the default): tickets allow no early data, so a resuming client
    sends none and nothing reaches the backend before the handshake ends."""

    allow_0rtt = False

    def test_a_resuming_client_cannot_send_early_data(self):
        out = self.early("off", b"GET /echo?early-off HTTP/1.1\r\nHost: early.test\r\n"
                                b"Connection: close\r\n\r\n")
        self.assertIn("Reused, TLSv1.3", out)
        self.assertNotIn("Early data was accepted", out)
        self.assertEqual([r for r in self.backend.snapshot() if "early-off" in r.target], [])


class TlsConfiguration(unittest.TestCase):
    """`floodgate check` on [[server.tls]] entries: every file error names the file and the
    reason, at the key's position."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cls.cert, cls.key = cls.ca.leaf("a", ["a.test"])
        cls.other_cert, cls.other_key = cls.ca.leaf("o", ["o.test"])

    @classmethod
    def tearDownClass(cls):
        cls.ca.cleanup()

    def check(self, tls, listen=None):
        server = {"listen": listen or ["127.0.0.1:18080"], "tls": tls}
        cfg = {"server": server, "upstreams": [{"name": "app", "servers": ["127.0.0.1:9"]}],
               "routes": [{"upstream": "app"}]}
        path = os.path.join(self.ca.dir, "check.toml")
        with open(path, "w") as f:
            f.write(render_toml(cfg))
        p = subprocess.run([floodgate_bin(), "check", "-c", path], capture_output=True,
                           timeout=30)
        return p.returncode, p.stdout.decode() + p.stderr.decode()

    def test_a_valid_entry_passes(self):
        rc, out = self.check([{"listen": ["127.0.0.1:18443"], "certificate": self.cert,
                               "private_key": self.key}])
        self.assertEqual(rc, 0, out)

    def test_a_missing_certificate_file_is_named_with_the_reason(self):
        missing = os.path.join(self.ca.dir, "nope.pem")
        rc, out = self.check([{"listen": ["127.0.0.1:18443"], "certificate": missing,
                               "private_key": self.key}])
        self.assertEqual(rc, 1, out)
        self.assertIn("server.tls[0].certificate", out)
        self.assertIn(missing, out)
        self.assertIn("No such file or directory", out)

    def test_a_key_of_another_certificate_is_refused(self):
        rc, out = self.check([{"listen": ["127.0.0.1:18443"], "certificate": self.cert,
                               "private_key": self.other_key}])
        self.assertEqual(rc, 1, out)
        self.assertIn("server.tls[0].private_key", out)
        self.assertIn("does not belong to the certificate", out)

    def test_a_file_that_is_not_pem_is_refused_with_openssls_reason(self):
        rc, out = self.check([{"listen": ["127.0.0.1:18443"], "certificate": self.ca.dir +
                               "/a.ext", "private_key": self.key}])
        self.assertEqual(rc, 1, out)
        self.assertIn("is not a usable PEM certificate chain", out)

    def test_an_address_cannot_be_both_plain_and_tls(self):
        rc, out = self.check([{"listen": ["127.0.0.1:18080"], "certificate": self.cert,
                               "private_key": self.key}])
        self.assertEqual(rc, 1, out)
        self.assertIn("never both", out)

    def test_a_name_served_twice_on_a_listener_is_refused(self):
        rc, out = self.check([
            {"listen": ["127.0.0.1:18443"], "certificate": self.cert, "private_key": self.key,
             "server_names": ["a.test"]},
            {"listen": ["127.0.0.1:18443"], "certificate": self.other_cert,
             "private_key": self.other_key, "server_names": ["A.test"]}])
        self.assertEqual(rc, 1, out)
        self.assertIn("server.tls[1].server_names", out)

    def test_a_relative_path_is_refused(self):
        rc, out = self.check([{"listen": ["127.0.0.1:18443"], "certificate": "a.pem",
                               "private_key": self.key}])
        self.assertEqual(rc, 1, out)
        self.assertIn("absolute path", out)


if __name__ == "__main__":
    unittest.main()
