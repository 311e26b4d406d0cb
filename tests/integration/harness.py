"""Harness for floodgate's end-to-end tests: starts the real binary, talks raw HTTP to it.

- ``Floodgate`` writes a TOML configuration into a temporary directory, starts
  ``$FLOODGATE_BIN -c FILE`` with stdout/stderr captured to files, waits (polling with a
  deadline) until the admin ``/healthz`` answers 200 and the proxy port accepts connections, and
  stops it with SIGTERM, checking the exit code.
- ``Conn`` sends raw bytes and reads complete responses, framing and all (Content-Length,
  chunked with trailers, close-delimited, no body), so tests can check exact framing and read
  pipelined responses one after another.
- ``FloodgateTestCase`` prints floodgate's stderr tail when a test fails.

Ports are ephemeral on 127.0.0.1 only. Every wait has a deadline; nothing sleeps to order events.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

# ASan builds are slower; every deadline is generous but bounded.
DEFAULT_TIMEOUT = float(os.environ.get("FLOODGATE_IT_TIMEOUT", "10"))
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
GENERATED_BODY_LIMIT = 512  # "a short body"

HERE = os.path.dirname(os.path.abspath(__file__))


def _built_binary(variable, name, missing):
    """The executable $variable names, else build/NAME (or build-it/NAME) of this tree; skips
    the test with `missing` when there is none."""
    path = os.environ.get(variable)
    if path:
        if not os.access(path, os.X_OK):
            raise RuntimeError("%s=%s is not an executable" % (variable, path))
        return path
    for build in ("build", "build-it"):
        full = os.path.normpath(os.path.join(HERE, "../..", build, name))
        if os.access(full, os.X_OK):
            return full
    raise unittest.SkipTest(missing)


def floodgate_bin():
    return _built_binary("FLOODGATE_BIN", "floodgate", "no floodgate binary: set FLOODGATE_BIN")


def floodgate_faults_bin():
    """floodgate-faults: floodgate with the test-only fault hooks (POST /fault/...), which
    builds configured with -DFLOODGATE_FAULT_HOOKS=ON make beside floodgate."""
    return _built_binary("FLOODGATE_FAULTS_BIN", "floodgate-faults",
                         "no floodgate-faults binary (configure with -DFLOODGATE_FAULT_HOOKS=ON, "
                         "as scripts/test.sh does, or set FLOODGATE_FAULTS_BIN)")


def free_port():
    """An ephemeral port on 127.0.0.1 that nothing listens on right now."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def poll(predicate, timeout=DEFAULT_TIMEOUT, interval=0.02, what="condition"):
    """Calls predicate until it returns a truthy value (returned) or the deadline passes
    (AssertionError). Exceptions from predicate count as "not yet"."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - "not yet"
            last_error = e
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s (last error: %r)"
                                 % (timeout, what, last_error))
        time.sleep(interval)


# --- configuration -------------------------------------------------------------------------

def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join("%s = %s" % (k, toml_value(x)) for k, x in v.items()) + " }"
    raise TypeError("cannot render %r as TOML" % (v,))


def render_toml(cfg):
    """cfg: {"server": {...}, "admin": {...}, "log": {...}, "upstreams": [...], "routes": [...]}"""
    out = []
    for table in ("server", "admin", "log"):
        if table in cfg:
            out.append("[%s]" % table)
            subtables = {k: v for k, v in cfg[table].items()
                         if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
            out += ["%s = %s" % (k, toml_value(v)) for k, v in cfg[table].items()
                    if k not in subtables]
            out.append("")
            for k, entries in subtables.items():  # [[server.tls]]: arrays of tables
                for entry in entries:
                    out.append("[[%s.%s]]" % (table, k))
                    out += ["%s = %s" % (ek, toml_value(ev)) for ek, ev in entry.items()]
                    out.append("")
    for sub, keys in cfg.get("resilience", {}).items():  # [resilience.<sub>] tables
        if isinstance(keys, (list, tuple)):  # [[resilience.<sub>]]: an array of tables
            for entry in keys:
                out.append("[[resilience.%s]]" % sub)
                out += ["%s = %s" % (k, toml_value(v)) for k, v in entry.items()]
                out.append("")
            continue
        out.append("[resilience.%s]" % sub)
        out += ["%s = %s" % (k, toml_value(v)) for k, v in keys.items()]
        out.append("")
    for array in ("upstreams", "routes"):
        for entry in cfg.get(array, []):
            out.append("[[%s]]" % array)
            out += ["%s = %s" % (k, toml_value(v)) for k, v in entry.items()]
            out.append("")
    return "\n".join(out)


# For tests of how one failing request is answered, which send one backend failure after
# another on purpose: with the default circuit breaker the backend's circuit would open after
# ten of them in ten seconds (test_failure_handling.py and test_breaker_defaults.py test the
# breaker).
NO_BREAKER = {"circuit_breaker": {"enabled": False}}


def upstream(name, backends, **options):
    """An [[upstreams]] entry. backends: Backend objects, "host:port" strings, or
    (backend, weight) pairs."""
    servers = []
    for b in backends:
        if isinstance(b, tuple):
            servers.append({"address": _addr(b[0]), "weight": b[1]})
        else:
            servers.append(_addr(b))
    entry = {"name": name, "servers": servers, "connect_timeout": "2s", "response_timeout": "20s"}
    entry.update(options)
    return entry


def route(upstream_name, host="*", path_prefix="/"):
    return {"host": host, "path_prefix": path_prefix, "upstream": upstream_name}


def _addr(b):
    return b if isinstance(b, str) else b.address


# --- the floodgate process -----------------------------------------------------------------

class Floodgate:
    """One floodgate process with its own temp dir, ports and configuration."""

    def __init__(self, upstreams, routes=None, server=None, log=None, workers=1, admin=None,
                 env=None, resilience=None, wrap=None, tls=None, binary=None, h2c=False):
        self.upstreams = upstreams
        self.h2c = h2c  # the plain listener takes HTTP/2 with prior knowledge too
        self.binary = binary  # the executable; None: floodgate_bin()
        # [[server.tls]] entries; one without `listen` gets the TLS port (self.tls_port).
        self.tls = [dict(e) for e in (tls or [])]
        self.tls_port = None
        self.wrap = list(wrap or [])  # argv floodgate runs under (it must exec floodgate)
        self.resilience = resilience  # the [resilience] table, when given
        self.env = dict(env or {})  # variables added to floodgate's environment
        self.admin_overrides = dict(admin or {})  # [admin] keys besides listen (e.g. token)
        self.routes = routes if routes is not None else [route(upstreams[0]["name"])]
        self.server_overrides = dict(server or {})
        self.workers = workers
        self.log_overrides = dict(log or {})
        self.tmpdir = tempfile.mkdtemp(prefix="floodgate-it-")
        self.config_path = os.path.join(self.tmpdir, "floodgate.toml")
        self.stderr_path = os.path.join(self.tmpdir, "stderr.log")
        self.stdout_path = os.path.join(self.tmpdir, "stdout.log")
        self.access_log_path = os.path.join(self.tmpdir, "access.log")
        self.proc = None
        self.port = None
        self.admin_port = None
        self.returncode = None

    def config(self):
        server = {"listen": ["127.0.0.1:%d" % self.port], "workers": self.workers,
                  "header_timeout": "10s", "idle_timeout": "60s", "drain_timeout": "10s"}
        if os.environ.get("FLOODGATE_TEST_IO"):  # the suite's epoll lane (CMakeLists.txt)
            server["io"] = os.environ["FLOODGATE_TEST_IO"]
        server.update(self.server_overrides)
        if self.h2c:
            http2 = dict(server.get("http2", {}))
            http2["h2c_listen"] = ["127.0.0.1:%d" % self.port]
            server["http2"] = http2
        if self.tls:
            server["tls"] = [dict({"listen": ["127.0.0.1:%d" % self.tls_port]}, **e)
                             for e in self.tls]
        log = {"level": "info", "access_log": self.access_log_path, "access_log_format": "json"}
        log.update(self.log_overrides)
        admin = {"listen": "127.0.0.1:%d" % self.admin_port}
        admin.update(self.admin_overrides)
        config = {"server": server, "admin": admin,
                  "log": log, "upstreams": self.upstreams, "routes": self.routes}
        if self.resilience is not None:
            config["resilience"] = self.resilience
        return config

    def start(self):
        binary = self.binary or floodgate_bin()
        for attempt in range(3):  # a picked port can be taken by someone else before we bind it
            self.port, self.admin_port = free_port(), free_port()
            while self.admin_port == self.port:  # two picks can return the same free port
                self.admin_port = free_port()
            if self.tls:
                self.tls_port = free_port()
                while self.tls_port in (self.port, self.admin_port):
                    self.tls_port = free_port()
            with open(self.config_path, "w") as f:
                f.write(render_toml(self.config()))
            self.stderr_file = open(self.stderr_path, "wb")
            self.stdout_file = open(self.stdout_path, "wb")
            self.proc = subprocess.Popen(self.wrap + [binary, "-c", self.config_path],
                                         stdin=subprocess.DEVNULL,
                                         stdout=self.stdout_file, stderr=self.stderr_file,
                                         env={**os.environ, **self.env})
            try:
                self._wait_ready()
                return self
            except _ExitedEarly:
                self._close_files()
                if attempt < 2 and re.search(rb"in use|bind", self.stderr_bytes(), re.I):
                    continue
                raise AssertionError("floodgate exited with %s during start-up; stderr:\n%s"
                                     % (self.proc.returncode, self.stderr_tail()))
        raise AssertionError("unreachable")

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise _ExitedEarly()
            if self._healthy() and self._accepts():
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise AssertionError("floodgate not ready within %.0fs; stderr:\n%s"
                                     % (START_TIMEOUT, self.stderr_tail()))
            time.sleep(0.02)

    def _healthy(self):
        try:
            status, _, _ = admin_get(self.admin_port, "/healthz", timeout=2)
            return status == 200
        except (OSError, AssertionError):  # not listening yet, or closed on us while starting
            return False

    def _accepts(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
            return True
        except OSError:
            return False

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=STOP_TIMEOUT):
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("floodgate did not exit within %.0fs; stderr:\n%s"
                                 % (timeout, self.stderr_tail()))
        self._close_files()
        return self.returncode

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, wait, and return the exit code (None if it was not running)."""
        if self.proc is None or self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close_files()

    def _close_files(self):
        for f in (getattr(self, "stderr_file", None), getattr(self, "stdout_file", None)):
            if f is not None and not f.closed:
                f.close()

    def cleanup(self):
        self.kill()
        self._stderr_cache = self.stderr_bytes()  # still printable after a failed test
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def stderr_bytes(self):
        if getattr(self, "_stderr_cache", None) is not None:
            return self._stderr_cache
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()
        except OSError:
            return b""

    def stderr_tail(self, lines=60):
        """The last lines of floodgate's stderr; a sanitizer report is shown from its start."""
        text = self.stderr_bytes().decode("utf-8", "replace").splitlines()
        for i, line in enumerate(text):
            if "ERROR: AddressSanitizer" in line or "runtime error:" in line or "ERROR: LeakSanitizer" in line:
                return "\n".join(text[max(0, i - 5):i + 80])
        return "\n".join(text[-lines:])

    # --- conveniences -----------------------------------------------------------------------
    def conn(self, timeout=DEFAULT_TIMEOUT, source=None):
        return Conn(self.port, timeout=timeout, source=source)

    def request(self, method, target, headers=None, body=None, host="test.local", source=None,
                **kw):
        """One request on a fresh connection (from `source`, when given); returns the Response."""
        with self.conn(source=source) as c:
            return c.request(method, target, headers=headers, body=body, host=host, **kw)

    def get(self, target, **kw):
        return self.request("GET", target, **kw)

    def metrics(self):
        status, _, body = admin_get(self.admin_port, "/metrics")
        if status != 200:
            raise AssertionError("/metrics answered %d" % status)
        return Metrics(body.decode())

    def access_log_entries(self):
        try:
            with open(self.access_log_path, "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [json.loads(line) for line in data.splitlines() if line.strip().startswith("{")]


class _ExitedEarly(Exception):
    pass


def admin_get(port, path, timeout=DEFAULT_TIMEOUT):
    with Conn(port, timeout=timeout) as c:
        r = c.request("GET", path, host="127.0.0.1:%d" % port, headers=[("Connection", "close")])
    return r.status, r.headers, r.body


# --- metrics -------------------------------------------------------------------------------

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Metrics:
    """Parsed Prometheus text exposition."""

    def __init__(self, text):
        self.text = text
        self.samples = []  # (name, {labels}, float)
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = _SAMPLE.match(line)
            if m:
                labels = dict(_LABEL.findall(m.group(3) or ""))
                self.samples.append((m.group(1), labels, float(m.group(4))))

    def names(self):
        return {name for name, _, _ in self.samples}

    def declared(self, name):
        """True if the metric family appears (as a sample or a # TYPE/# HELP line)."""
        return name in self.names() or re.search(r"^# (TYPE|HELP) %s\b" % re.escape(name),
                                                   self.text, re.M) is not None

    def value(self, name, **labels):
        """Sum of the samples of `name` whose labels include `labels` (0 when none)."""
        total = 0.0
        for n, l, v in self.samples:
            if n == name and all(l.get(k) == val for k, val in labels.items()):
                total += v
        return total


# --- raw HTTP client -----------------------------------------------------------------------

class Response:
    def __init__(self):
        self.version = None
        self.status = None
        self.reason = None
        self.headers = []  # (name, value) as received
        self.raw_head = b""
        self.body = b""
        self.framing = None  # "none", "length", "chunked" or "close"
        self.complete = False  # the body ended where its framing says it ends
        self.trailers = []
        self.chunk_sizes = []

    def header_values(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def header(self, name):
        values = self.header_values(name)
        return values[0] if values else None

    def has_header(self, name):
        return bool(self.header_values(name))

    def connection_tokens(self):
        return {t.strip().lower() for v in self.header_values("connection") for t in v.split(",")
                if t.strip()}

    def json(self):
        return json.loads(self.body.decode("latin-1"))

    def __repr__(self):
        return "<Response %s %s %r framing=%s complete=%s body[:200]=%r>" % (
            self.status, self.reason, self.headers, self.framing, self.complete, self.body[:200])


class Conn:
    """A raw client connection to floodgate (or any HTTP server) with deadline-bound reads."""

    def __init__(self, port, host="127.0.0.1", timeout=DEFAULT_TIMEOUT, source=None):
        """source: the local address to connect from (any 127/8 address reaches loopback)."""
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.eof = False
        self.reset = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    # --- reading ----------------------------------------------------------------------------
    def _fill(self, deadline):
        """Reads more bytes into buf; returns False at EOF. Raises socket.timeout at deadline."""
        if self.eof:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("deadline passed while reading")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_some(self, timeout=None):
        """Whatever arrives next (b"" at EOF)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        if not self.buf:
            self._fill(deadline)
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def read_exact(self, n, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise AssertionError("connection closed after %d of %d bytes" % (len(self.buf), n))
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_line(self, deadline):
        while True:
            idx = self.buf.find(b"\n")
            if idx >= 0:
                line = bytes(self.buf[: idx + 1])
                del self.buf[: idx + 1]
                return line
            if not self._fill(deadline):
                return None

    def wait_closed(self, timeout=None):
        """Waits for EOF (or reset); returns the bytes that arrived before it. Raises
        AssertionError if the connection stays open past the deadline."""
        deadline = time.monotonic() + (timeout or self.timeout)
        try:
            while self._fill(deadline):
                pass
        except socket.timeout:
            raise AssertionError("connection still open after %.1fs (got %r)"
                                 % (timeout or self.timeout, bytes(self.buf[:200])))
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def is_open_after(self, timeout):
        """True if nothing (no data, no EOF) arrives within `timeout` seconds."""
        if self.buf or self.eof:
            return False
        try:
            return self._fill(time.monotonic() + timeout) and False
        except socket.timeout:
            return True

    def read_response(self, method="GET", timeout=None):
        """Reads one complete response (interim 1xx responses are returned as responses of
        their own). A body cut short by EOF yields complete=False instead of an exception."""
        deadline = time.monotonic() + (timeout or self.timeout)
        r = self.read_head(timeout)
        self._read_body(r, method, deadline)
        return r

    def read_head(self, timeout=None):
        """Reads a response head only; the body stays unread (see BodyReader)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        r = Response()
        head = bytearray()
        while True:
            line = self._read_line(deadline)
            if line is None:
                if not head:
                    raise ConnectionClosed("connection closed before a response (reset=%s)" % self.reset)
                raise AssertionError("connection closed inside a response head: %r" % bytes(head))
            head += line
            if not line.endswith(b"\r\n"):
                raise BadResponse("response head line without CRLF: %r" % bytes(head))
            if line == b"\r\n":
                break
        r.raw_head = bytes(head)
        lines = r.raw_head.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/") or not status_line[1].isdigit():
            raise BadResponse("malformed status line: %r" % r.raw_head)
        r.version, r.status = status_line[0], int(status_line[1])
        r.reason = status_line[2] if len(status_line) > 2 else ""
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep or not name or name != name.strip():
                    raise BadResponse("malformed header line %r in %r" % (line, r.raw_head))
                r.headers.append((name, value.strip(" \t")))
        return r

    def _read_body(self, r, method, deadline):
        te = ",".join(r.header_values("transfer-encoding")).lower()
        cl = r.header_values("content-length")
        if method == "HEAD" or 100 <= r.status < 200 or r.status in (204, 304):
            r.framing, r.complete = "none", True
        elif "chunked" in te:
            r.framing = "chunked"
            self._read_chunked(r, deadline)
        elif cl:
            r.framing = "length"
            n = int(cl[0])
            while len(self.buf) < n and self._fill(deadline):
                pass
            take = min(n, len(self.buf))
            r.body = bytes(self.buf[:take])
            del self.buf[:take]
            r.complete = take == n
        else:
            r.framing = "close"
            while self._fill(deadline):
                pass
            r.body = bytes(self.buf)
            self.buf.clear()
            r.complete = not self.reset

    def _read_chunked(self, r, deadline):
        body = bytearray()
        while True:
            line = self._read_line(deadline)
            if line is None:
                break
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise AssertionError("bad chunk-size line %r" % line)
            r.chunk_sizes.append(size)
            if size == 0:
                while True:
                    t = self._read_line(deadline)
                    if t is None:
                        r.body = bytes(body)
                        return
                    if t in (b"\r\n", b"\n"):
                        r.body, r.complete = bytes(body), True
                        return
                    name, _, value = t.decode("latin-1").strip().partition(":")
                    r.trailers.append((name, value.strip()))
            while len(self.buf) < size + 2 and self._fill(deadline):
                pass
            if len(self.buf) < size + 2:
                body += self.buf[:size]
                self.buf.clear()
                break
            body += self.buf[:size]
            if self.buf[size:size + 2] != b"\r\n":
                raise AssertionError("chunk data not followed by CRLF")
            del self.buf[: size + 2]
        r.body = bytes(body)

    def read_final_response(self, method="GET", timeout=None):
        """Skips interim (1xx other than 101) responses."""
        while True:
            r = self.read_response(method, timeout)
            if r.status >= 200 or r.status == 101:
                return r

    # --- writing requests -------------------------------------------------------------------
    def request(self, method, target, headers=None, body=None, host="test.local",
                version="HTTP/1.1", read=True):
        self.send(build_request(method, target, headers, body, host, version))
        if read:
            return self.read_final_response(method)
        return None


class TlsConn(Conn):
    """A client connection over TLS: `context` (an ssl.SSLContext) and `server_name` (SNI and,
    when the context verifies, the name checked); `session` resumes an earlier one."""

    def __init__(self, port, context, server_name, host="127.0.0.1", timeout=DEFAULT_TIMEOUT,
                 session=None):
        raw = socket.create_connection((host, port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.sock = context.wrap_socket(raw, server_hostname=server_name, session=session)
        self.buf = bytearray()
        self.eof = False
        self.reset = False


class BodyReader:
    """Reads a response body piecewise (after Conn.read_head), whatever its framing, so tests
    can observe the first bytes of a body before the backend has sent the rest."""

    def __init__(self, conn, response):
        self.conn = conn
        self.chunked = "chunked" in ",".join(response.header_values("transfer-encoding")).lower()
        self.left_in_chunk = 0
        self.done = False

    def read(self, n, timeout=None):
        """Exactly n body bytes (AssertionError if the body or the connection ends first)."""
        if not self.chunked:
            return self.conn.read_exact(n, timeout)
        deadline = time.monotonic() + (timeout or self.conn.timeout)
        out = bytearray()
        while len(out) < n:
            if self.left_in_chunk == 0:
                line = self.conn._read_line(deadline)
                if line is None:
                    raise AssertionError("connection closed inside a chunked body")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    raise AssertionError("body ended after %d of %d bytes" % (len(out), n))
                self.left_in_chunk = size
            take = min(self.left_in_chunk, n - len(out))
            out += self.conn.read_exact(take, max(deadline - time.monotonic(), 0.001))
            self.left_in_chunk -= take
            if self.left_in_chunk == 0:
                if self.conn.read_exact(2, max(deadline - time.monotonic(), 0.001)) != b"\r\n":
                    raise AssertionError("chunk data not followed by CRLF")
        return bytes(out)


class ConnectionClosed(AssertionError):
    pass


class BadResponse(AssertionError):
    pass


def build_request(method, target, headers=None, body=None, host="test.local", version="HTTP/1.1"):
    """A request in bytes. host=None sends no Host header; a body gets a Content-Length unless
    the caller's headers already frame it."""
    lines = ["%s %s %s" % (method, target, version)]
    if host is not None:
        lines.append("Host: %s" % host)
    headers = list(headers or [])
    names = {n.lower() for n, _ in headers}
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        headers.append(("Content-Length", str(len(body))))
    lines += ["%s: %s" % (n, v) for n, v in headers]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return data + (body or b"")


def chunked(*parts, trailers=()):
    """Encodes parts as a chunked body (with optional trailer fields)."""
    out = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p)
    out += b"0\r\n" + b"".join(("%s: %s\r\n" % t).encode() for t in trailers) + b"\r\n"
    return out


def refuses_connections(port):
    """True when nothing accepts on 127.0.0.1:`port` (the listeners are closed or paused)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


# --- test cases ----------------------------------------------------------------------------

class FloodgateTestCase(unittest.TestCase):
    """Prints floodgate's stderr tail when a test fails. Subclasses set cls.fg (a started
    Floodgate), usually in setUpClass via start_floodgate()."""

    fg = None
    backends = ()

    @classmethod
    def start_floodgate(cls, *args, **kwargs):
        fg = Floodgate(*args, **kwargs)
        try:
            fg.start()
        except BaseException:
            fg.cleanup()
            raise
        return fg

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.fg is not None:
                rc = cls.fg.stop()
                if rc != 0:
                    raise AssertionError("floodgate exited with %r after SIGTERM (expected 0); "
                                         "stderr:\n%s" % (rc, cls.fg.stderr_tail()))
        finally:
            if cls.fg is not None:
                cls.fg.cleanup()
            for b in cls.backends:
                b.stop()

    def setUp(self):
        fg = self.fg
        if fg is not None and fg.proc is not None and fg.returncode is None and fg.proc.poll() is not None:
            self.fail("floodgate is no longer running (exit code %r since an earlier test); stderr:\n%s"
                      % (fg.proc.returncode, fg.stderr_tail()))

    def run(self, result=None):
        before = len(result.failures) + len(result.errors) if result is not None else 0
        out = super().run(result)
        if result is not None and len(result.failures) + len(result.errors) > before:
            fg = getattr(self, "fg", None)
            if fg is not None:
                sys.stderr.write("\n--- floodgate stderr (tail) for %s ---\n%s\n---\n"
                                 % (self.id(), fg.stderr_tail()))
        return out

    # --- shared assertions ------------------------------------------------------------------
    def assertGenerated(self, r, status, reason, closes=None):
        """A response floodgate generated itself: status, X-Floodgate-Reason, text/plain,
        Content-Length matching a short non-empty body; `Connection: close` for the statuses
        that end the connection."""
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.header_values("x-floodgate-reason"), [reason], r)
        self.assertTrue((r.header("content-type") or "").startswith("text/plain"), r)
        self.assertEqual(r.framing, "length", r)
        self.assertEqual(int(r.header("content-length")), len(r.body), r)
        self.assertTrue(0 < len(r.body) <= GENERATED_BODY_LIMIT, r)
        if closes is None:
            closes = status in (400, 408, 413, 414, 431)
        if closes:
            self.assertIn("close", r.connection_tokens(), r)

    def assertNoBackendRequest(self, *backends):
        for b in backends:
            self.assertEqual(b.request_count, 0, "a request reached backend %s: %r"
                             % (b.name, [x.raw_head for x in b.snapshot()]))


class OwnFloodgateTestCase(FloodgateTestCase):
    """Each test runs its own floodgate (self.fg, started with launch()), for tests that end it
    or need one configured their way, against one backend, app-0, that the class shares."""

    @classmethod
    def setUpClass(cls):
        from backend import Backend  # the harness needs it only here
        cls.backend = Backend("app-0").start()
        cls.backends = [cls.backend]

    def setUp(self):
        self.fg = None

    def tearDown(self):
        if self.fg is not None:
            self.fg.cleanup()

    def launch(self, fg):
        """Starts `fg` as this test's floodgate; cleans it up if it cannot start."""
        self.fg = fg
        try:
            fg.start()
        except BaseException:
            fg.cleanup()
            self.fg = None
            raise
        return fg
