"""TLS to a pool's backends ([upstreams.tls]): verification of the chain and the name by
default, a refused certificate answered 502 upstream_tls_failed and never retried, mutual TLS,
pooled keep-alive TLS connections reused, and `check` naming unusable files. The backends are
Python's ssl over tests/integration/backend.py; the certificates come from a test CA."""

import os
import ssl
import subprocess
import unittest

from backend import Backend, RawServer
from harness import FloodgateTestCase, floodgate_bin, poll, render_toml, route, upstream
from tls_certs import TestCA


def server_context(cert, key, client_ca=None, maximum=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.load_verify_locations(client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    if maximum:
        ctx.maximum_version = maximum
    return ctx


class PlainHttpServer(RawServer):
    """A plain HTTP server that answers whatever arrives (a ClientHello too) with 400 and
    closes, as nginx does on its plain port."""

    def serve(self, sock, state):
        try:
            sock.settimeout(5)
            sock.recv(4096)
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
        except OSError:
            pass
        finally:
            sock.close()


class BackendTls(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        ca = cls.ca
        good = ca.leaf("backend", ["backend.test"])
        other = ca.leaf("other", ["other.test"], kind="rsa")
        expired = ca.leaf("expired", ["backend.test"], not_after="20210101000000Z")
        cls.client_cert, cls.client_key = ca.leaf("floodgate", ["floodgate.test"])
        cls.good = Backend("good", tls=server_context(*good)).start()
        cls.wrong_name = Backend("wrong-name", tls=server_context(*other)).start()
        cls.expired = Backend("expired", tls=server_context(*expired)).start()
        cls.mutual = Backend("mutual", tls=server_context(*good, client_ca=ca.cert)).start()
        # TLS 1.2 only, so that the missing client certificate fails the handshake itself.
        cls.mutual12 = Backend("mutual-1.2", tls=server_context(
            *good, client_ca=ca.cert, maximum=ssl.TLSVersion.TLSv1_2)).start()
        cls.plain = PlainHttpServer()
        # A certificate for the name "localhost" only, no IP address in it.
        cls.by_name = Backend("by-name", tls=server_context(*ca.leaf("localhost", ["localhost"])))
        cls.by_name.start()
        cls.backends = [cls.good, cls.wrong_name, cls.expired, cls.mutual, cls.mutual12,
                        cls.by_name]
        tls = {"enabled": True, "ca_file": ca.cert, "server_name": "backend.test"}
        mtls = dict(tls, certificate=cls.client_cert, private_key=cls.client_key)
        cls.fg = cls.start_floodgate(
            [upstream("good", [cls.good], tls=tls),
             upstream("wrong-name", [cls.wrong_name], tls=tls),
             upstream("expired", [cls.expired], tls=tls),
             upstream("mutual", [cls.mutual], tls=mtls),
             upstream("no-client-cert", [cls.mutual12], tls=tls),
             upstream("plain-backend", [cls.plain.address], tls=tls),
             upstream("unverified", [cls.wrong_name], tls=dict(tls, verify=False)),
             upstream("retry", [cls.wrong_name, cls.good], tls=tls),
             upstream("by-name", ["localhost:%d" % cls.by_name.port],
                      tls={"enabled": True, "ca_file": ca.cert})],
            routes=[route(name, path_prefix="/%s/" % name) for name in
                    ("good", "wrong-name", "expired", "mutual", "no-client-cert",
                     "plain-backend", "unverified", "retry", "by-name")],
            workers=1,
            resilience={"circuit_breaker": {"enabled": False},
                        "retry_budget": {"ratio_percent": 100}})

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.plain.stop()
            cls.ca.cleanup()

    def assert_tls_failed(self, path):
        r = self.fg.get(path)
        self.assertEqual(r.status, 502, r)
        self.assertEqual(r.header("X-Floodgate-Reason"), "upstream_tls_failed", r)
        return r

    def test_a_verified_backend_serves_over_tls(self):
        r = self.fg.get("/good/hello")
        self.assertEqual(r.status, 200, r)
        seen = self.good.wait_for_target("/good/hello")
        self.assertEqual(seen.header("x-forwarded-proto"), "http")

    def test_a_server_written_as_a_name_is_verified_by_that_name(self):
        # servers = ["localhost:P"] connects to 127.0.0.1 and verifies "localhost", the name it
        # was written with (its certificate has no IP address). Before, floodgate verified
        # the address it connected to and refused the certificate.
        r = self.fg.get("/by-name/hello")
        self.assertEqual(r.status, 200, r)
        self.by_name.wait_for_target("/by-name/hello")

    def test_pooled_tls_connections_are_reused(self):
        before = self.good.connections_accepted
        with self.fg.conn() as c:
            for i in range(5):
                r = c.request("GET", "/good/reuse-%d" % i)
                self.assertEqual(r.status, 200, r)
        with self.fg.conn() as c:
            self.assertEqual(c.request("GET", "/good/reuse-again").status, 200)
        self.assertLessEqual(self.good.connections_accepted - before, 1)
        reuses = self.fg.metrics().value("floodgate_backend_connection_reuses_total", upstream="good",
                                         backend=self.good.address)
        self.assertGreaterEqual(reuses, 5)

    def test_a_certificate_for_another_name_is_refused(self):
        self.assert_tls_failed("/wrong-name/x")
        poll(lambda: self.wrong_name.tls_failures >= 1, what="the backend's failed handshake")
        self.assertEqual([r for r in self.wrong_name.snapshot()
                          if r.target.startswith("/wrong-name/")], [])

    def test_an_expired_certificate_is_refused(self):
        self.assert_tls_failed("/expired/x")
        self.assertEqual(self.expired.request_count, 0)

    def test_the_process_log_says_why_the_certificate_was_refused(self):
        self.assert_tls_failed("/expired/why")
        poll(lambda: b"certificate has expired" in self.fg.stderr_bytes(),
             what="the refusal's reason in the process log")

    def test_mutual_tls_presents_the_client_certificate(self):
        r = self.fg.get("/mutual/x")
        self.assertEqual(r.status, 200, r)

    def test_a_backend_that_wants_a_client_certificate_refuses_a_pool_without_one(self):
        self.assert_tls_failed("/no-client-cert/x")
        self.assertEqual(self.mutual12.request_count, 0)

    def test_a_plain_http_backend_on_a_tls_pool_is_a_tls_failure(self):
        self.assert_tls_failed("/plain-backend/x")

    def test_verify_false_accepts_any_certificate(self):
        r = self.fg.get("/unverified/x")
        self.assertEqual(r.status, 200, r)

    def test_a_failed_handshake_is_retried_on_another_backend(self):
        # Round robin sends some of the requests to the wrong-name backend first: its handshake
        # fails before any byte of the request is sent, so no backend can have acted on it and
        # the request goes to the good one (docs/resilience.md, "A request that never left
        # floodgate"). The failure still counts against the wrong-name backend.
        statuses = [self.fg.get("/retry/%d" % i) for i in range(4)]
        for r in statuses:
            self.assertEqual(r.status, 200, r)
        entries = poll(lambda: len([e for e in self.fg.access_log_entries()
                                    if e["target"].startswith("/retry/")]) == 4
                       and [e for e in self.fg.access_log_entries()
                            if e["target"].startswith("/retry/")])
        retried = [e for e in entries if e["attempts"] == 2]
        self.assertGreaterEqual(len(retried), 1, entries)
        for e in retried:
            self.assertEqual(e["backends"], [self.wrong_name.address, self.good.address], e)
        failures = self.fg.metrics().value("floodgate_backend_failures_total", upstream="retry",
                                           backend=self.wrong_name.address,
                                           reason="upstream_tls_failed")
        self.assertGreaterEqual(failures, len(retried))


class BackendTlsHealthChecks(FloodgateTestCase):
    """Active health checks of a TLS pool speak TLS with the pool's own context: a backend
    whose certificate verifies is probed and up, one whose certificate names another host is
    marked down and the log says why."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        good = cls.ca.leaf("backend", ["backend.test"])
        other = cls.ca.leaf("other", ["other.test"])
        cls.good = Backend("good", tls=server_context(*good)).start()
        cls.wrong_name = Backend("wrong-name", tls=server_context(*other)).start()
        cls.backends = [cls.good, cls.wrong_name]
        cls.fg = cls.start_floodgate(
            [upstream("app", cls.backends,
                      tls={"enabled": True, "ca_file": cls.ca.cert, "server_name": "backend.test"},
                      health={"path": "/healthz", "interval": "200ms", "timeout": "1s",
                              "fall": 2, "rise": 2})],
            routes=[route("app")], workers=1,
            resilience={"circuit_breaker": {"enabled": False}})

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def up(self, b):
        return self.fg.metrics().value("floodgate_backend_up", upstream="app", backend=b.address)

    def test_a_backend_with_a_verified_certificate_is_probed_over_tls_and_up(self):
        probe = self.good.wait_for_target("/healthz")
        self.assertEqual(probe.header("user-agent"), "floodgate-health")
        poll(lambda: self.fg.metrics().value("floodgate_health_probes_total", upstream="app",
                                             backend=self.good.address, result="success") >= 2,
             what="successful probes of the good backend")
        self.assertEqual(self.up(self.good), 1)

    def test_a_backend_whose_certificate_names_another_host_is_marked_down_with_the_reason(self):
        poll(lambda: self.up(self.wrong_name) == 0, timeout=15,
             what="the wrong-name backend to be marked down")
        self.assertEqual([r for r in self.wrong_name.snapshot() if r.target == "/healthz"], [])
        poll(lambda: b"hostname mismatch" in self.fg.stderr_bytes(),
             what="the refusal's reason in the health log line")
        for i in range(4):
            r = self.fg.get("/name?i=%d" % i)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b"good")


class BackendTlsConfiguration(unittest.TestCase):
    """`floodgate check` on [upstreams.tls]."""

    @classmethod
    def setUpClass(cls):
        cls.ca = TestCA()
        cls.cert, cls.key = cls.ca.leaf("c", ["c.test"])
        cls.other_cert, cls.other_key = cls.ca.leaf("o", ["o.test"])

    @classmethod
    def tearDownClass(cls):
        cls.ca.cleanup()

    def check(self, tls, **extra):
        up = {"name": "app", "servers": ["127.0.0.1:9"], "tls": tls}
        up.update(extra)
        cfg = {"server": {"listen": ["127.0.0.1:18080"]}, "upstreams": [up],
               "routes": [{"upstream": "app"}]}
        path = os.path.join(self.ca.dir, "check.toml")
        with open(path, "w") as f:
            f.write(render_toml(cfg))
        p = subprocess.run([floodgate_bin(), "check", "-c", path], capture_output=True,
                           timeout=30)
        return p.returncode, p.stdout.decode() + p.stderr.decode()

    def test_a_valid_table_passes(self):
        rc, out = self.check({"enabled": True, "ca_file": self.ca.cert,
                              "certificate": self.cert, "private_key": self.key})
        self.assertEqual(rc, 0, out)

    def test_a_missing_ca_file_is_named_with_the_reason(self):
        missing = os.path.join(self.ca.dir, "nope.pem")
        rc, out = self.check({"enabled": True, "ca_file": missing})
        self.assertEqual(rc, 1, out)
        self.assertIn("upstreams[0].tls.ca_file", out)
        self.assertIn(missing, out)
        self.assertIn("No such file or directory", out)

    def test_a_ca_file_that_is_not_pem_is_refused_with_openssls_reason(self):
        rc, out = self.check({"enabled": True, "ca_file": self.ca.dir + "/c.ext"})
        self.assertEqual(rc, 1, out)
        self.assertIn("is not a usable PEM certificate bundle", out)

    def test_a_client_key_of_another_certificate_is_refused(self):
        rc, out = self.check({"enabled": True, "ca_file": self.ca.cert,
                              "certificate": self.cert, "private_key": self.other_key})
        self.assertEqual(rc, 1, out)
        self.assertIn("upstreams[0].tls.private_key", out)
        self.assertIn("does not belong to the certificate", out)

    def test_a_certificate_without_its_key_is_refused(self):
        rc, out = self.check({"enabled": True, "certificate": self.cert})
        self.assertEqual(rc, 1, out)
        self.assertIn("needs both certificate and private_key", out)

    def test_verify_false_is_a_warning(self):
        rc, out = self.check({"enabled": True, "verify": False})
        self.assertEqual(rc, 0, out)
        self.assertIn("upstreams[0].tls.verify", out)
        self.assertIn("accepts any certificate", out)

    def test_health_checks_on_a_tls_pool_pass(self):
        rc, out = self.check({"enabled": True}, health={"path": "/healthz"})
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
