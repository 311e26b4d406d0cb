"""HTTP/2 from clients end to end, with real clients: curl and h2load, with prior knowledge on
a listener of server.http2.h2c_listen and by ALPN on a TLS listener, each stream one request
through floodgate to an HTTP/1.1 backend: heads mapped both ways, bodies both ways, floodgate's
own answers, many streams on one connection, and HTTP/1.1 still served on the same listener."""

import json
import shutil
import subprocess
import unittest

from backend import Backend, big_body
from harness import FloodgateTestCase, poll, route, upstream

CURL = shutil.which("curl")
H2LOAD = shutil.which("h2load")


def curl(*args, data=None, timeout=30, h2c=True):
    """curl over h2c (prior knowledge), or as `args` say: (status, headers dict of lists, body
    bytes, status line)."""
    cmd = [CURL, "-s", "-S", *(["--http2-prior-knowledge"] if h2c else []), "-D", "-", "-o", "-",
           *args]
    out = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout)
    if out.returncode != 0:
        raise AssertionError("curl %s failed (%d): %s" % (args, out.returncode, out.stderr))
    raw = out.stdout
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers, body, lines[0]


@unittest.skipUnless(CURL, "curl is not installed")
class Http2PriorKnowledge(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     routes=[route("app", host="127.0.0.1")], h2c=True)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.fg.port, path)

    def test_a_get_is_forwarded_to_the_http11_backend_and_answered_over_http2(self):
        status, headers, body, line = curl(self.url("/echo?q=1"), "-H", "x-trace: abc")
        self.assertEqual(line.split()[0], "HTTP/2")
        self.assertEqual(status, 200)
        rec = json.loads(body)
        self.assertEqual(rec["method"], "GET")
        self.assertEqual(rec["target"], "/echo?q=1")
        self.assertEqual(rec["version"], "HTTP/1.1")
        sent = {n.lower(): v for n, v in rec["headers"]}
        self.assertEqual(sent["host"], "127.0.0.1:%d" % self.fg.port)
        self.assertEqual(sent["x-trace"], "abc")
        self.assertIn("x-request-id", sent)
        self.assertEqual(headers["x-backend-name"], ["app-0"])
        # No connection-specific field reaches an HTTP/2 client.
        for name in ("connection", "keep-alive", "transfer-encoding"):
            self.assertNotIn(name, headers)

    def test_the_access_log_says_http2(self):
        curl(self.url("/echo?logged=h2"))
        entry = poll(lambda: next((e for e in self.fg.access_log_entries()
                                   if e.get("target") == "/echo?logged=h2"), None),
                     what="the access record")
        self.assertEqual(entry["protocol"], "HTTP/2.0")
        self.assertEqual(entry["stream"], 1)
        self.assertEqual(entry["status"], 200)
        m = self.fg.metrics()
        self.assertGreaterEqual(m.value("floodgate_http2_connections_total", via="h2c"), 1)
        self.assertGreaterEqual(m.value("floodgate_http2_streams_total"), 1)

    def test_a_large_response_body_arrives_whole_under_flow_control(self):
        status, _, body, _ = curl(self.url("/big?bytes=3000000"))
        self.assertEqual(status, 200)
        self.assertEqual(len(body), 3000000)
        self.assertEqual(body, big_body(3000000))

    def test_a_chunked_backend_body_arrives_as_data_frames(self):
        status, headers, body, _ = curl(self.url("/chunked"))
        self.assertEqual(status, 200)
        self.assertNotIn("transfer-encoding", headers)
        self.assertGreater(len(body), 0)

    def test_a_request_body_with_content_length_reaches_the_backend_intact(self):
        payload = big_body(300000)
        status, _, body, _ = curl(self.url("/echo?upload=cl"), "--data-binary", "@-",
                                  "-H", "content-type: application/octet-stream", data=payload)
        self.assertEqual(status, 200)
        rec = json.loads(body)
        self.assertEqual(rec["method"], "POST")
        self.assertEqual(rec["body"].encode("latin-1"), payload)
        self.assertEqual(rec["body_framing"], "length")

    def test_a_request_body_of_no_declared_length_is_chunked_to_the_backend(self):
        payload = big_body(200000)
        status, _, body, _ = curl(self.url("/echo?upload=stream"), "-T", "-",
                                  "-H", "content-length:", data=payload)
        self.assertEqual(status, 200)
        rec = json.loads(body)
        self.assertEqual(rec["body"].encode("latin-1"), payload)
        self.assertEqual(rec["body_framing"], "chunked")

    def test_floodgates_own_answer_comes_as_an_http2_response_with_its_reason(self):
        # No route serves the host "elsewhere.test".
        status, headers, body, _ = curl(self.url("/echo"), "-H", "host: elsewhere.test")
        self.assertEqual(status, 404)
        self.assertEqual(headers["x-floodgate-reason"], ["no_route"])
        self.assertTrue(body.startswith(b"no_route"), body)

    def test_http11_is_still_served_on_the_same_listener(self):
        r = self.fg.get("/echo?plain=1", host="127.0.0.1")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(json.loads(r.body)["target"], "/echo?plain=1")

    @unittest.skipUnless(H2LOAD, "h2load is not installed")
    def test_many_concurrent_streams_on_few_connections_are_all_answered(self):
        out = subprocess.run([H2LOAD, "-n", "400", "-c", "2", "-m", "20", self.url("/echo")],
                             capture_output=True, text=True, timeout=60)
        self.assertIn("400 succeeded", out.stdout, out.stdout + out.stderr)
        self.assertIn("400 2xx", out.stdout, out.stdout)


@unittest.skipUnless(CURL, "curl is not installed")
class Http2OverTls(FloodgateTestCase):
    """h2 chosen by ALPN on a TLS listener (the entry's alpn offers it by default)."""

    @classmethod
    def setUpClass(cls):
        from tls_certs import TestCA
        cls.ca = TestCA()
        cert, key = cls.ca.leaf("a", ["a.test"], kind="ec")
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])],
                                     tls=[{"certificate": cert, "private_key": key}])

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.ca.cleanup()

    def https(self, path, *args):
        return curl("--http2", "--cacert", self.ca.cert, "--resolve",
                    "a.test:%d:127.0.0.1" % self.fg.tls_port,
                    "https://a.test:%d%s" % (self.fg.tls_port, path), *args, h2c=False)

    def test_a_tls_client_offering_h2_speaks_http2_through_floodgate(self):
        status, _, body, line = self.https("/echo?tls=h2")
        self.assertEqual(line.split()[0], "HTTP/2")
        self.assertEqual(status, 200)
        rec = json.loads(body)
        sent = {n.lower(): v for n, v in rec["headers"]}
        self.assertEqual(sent["x-forwarded-proto"], "https")
        self.assertEqual(sent["host"], "a.test:%d" % self.fg.tls_port)

    def test_a_large_body_both_ways_over_tls(self):
        payload = big_body(500000)
        status, _, body, _ = self.https("/echo?tls=upload", "--data-binary", "@" + self._file(payload))
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["body"].encode("latin-1"), payload)
        status, _, body, _ = self.https("/big?bytes=2000000")
        self.assertEqual(body, big_body(2000000))

    def _file(self, data):
        import tempfile
        f = tempfile.NamedTemporaryFile(delete=False, dir=self.fg.tmpdir)
        f.write(data)
        f.close()
        return f.name

    def test_a_client_offering_http11_alone_gets_http11(self):
        out = subprocess.run([CURL, "-s", "--http1.1", "--cacert", self.ca.cert, "--resolve",
                              "a.test:%d:127.0.0.1" % self.fg.tls_port, "-o", "/dev/null",
                              "-w", "%{http_version} %{http_code}",
                              "https://a.test:%d/echo" % self.fg.tls_port],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout, "1.1 200", out.stderr)


@unittest.skipUnless(CURL, "curl is not installed")
class Http2NotOffered(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend])])

    def test_a_listener_outside_h2c_listen_does_not_speak_http2(self):
        out = subprocess.run([CURL, "-s", "--http2-prior-knowledge", "-o", "/dev/null",
                              "-w", "%{http_code}", "http://127.0.0.1:%d/echo" % self.fg.port],
                             capture_output=True, text=True, timeout=30)
        self.assertNotEqual(out.stdout, "200")
        self.assertNoBackendRequest(self.backend)


if __name__ == "__main__":
    unittest.main()
