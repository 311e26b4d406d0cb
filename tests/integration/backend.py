"""A raw-socket HTTP/1.1 test backend for floodgate's integration tests.

One Backend listens on an ephemeral port on 127.0.0.1 and serves every connection on its own
thread, keep-alive capable. It records every request it receives (raw head, header list in
arrival order, body bytes, how the body was framed) so tests can assert exactly what reached a
backend, and it counts the connections it accepted so tests can prove connection reuse.

What it answers is chosen per request by path (see ``Backend._dispatch``):

  /echo (and any unknown path)   200, Content-Length, body = JSON of what was received
  /name                          200, body = the backend's name
  /chunked                       chunked response in several chunks, plus a trailer
  /close-delimited               no Content-Length/Transfer-Encoding, closes after the body
  /status/NNN                    that status; 204 and 304 without a body (304 keeps a CL)
  /head-test                     Content-Length 1234; the body only for GET
  /hop-response                  a response full of hop-by-hop headers
  /slow-head?ms=N                waits N ms before the head
  /load?base_ms=B&per_ms=K       waits B + K x (the /load requests in progress, this one
                                 included) ms before the head: latency that grows with load
  /hold?key=K                    waits until the test calls release(K), then 200 (so does any
                                 path ending in /events, for event streams held open)
  /hold-body?key=K&size=N        head + N body bytes, waits for release(K), then N more
  /reset-before-response         RST (SO_LINGER 0, then close) instead of a response
  /close-before-response         FIN instead of a response
  /close-mid-body                Content-Length 1000, sends 100 bytes, closes
  /bad-chunk                     chunked response whose second chunk-size line is garbage
  /malformed                     a garbage status line
  /malformed-header              a valid status line, then a header line without a colon
  /drop-next                      200 keep-alive; the NEXT request on this connection is read,
                                 marked dropped, and the connection closed without an answer
  /close-after-response          a response with Connection: close, then the backend closes
  /ws                            101 Switching Protocols to Upgrade: websocket, then echoes bytes
  /h2c                           101 to Upgrade: h2c when offered (then echoes bytes), else /echo
  /big?bytes=N                   a body of N pattern bytes (see big_body), streamed
  /raw?key=K                     the bytes the test set with set_raw(K, part, ...): the first
                                 part at once, part i once the test calls release("K/i"); the
                                 connection then stays open for the next request
Every response carries ``X-Backend-Name`` so routing and balancing tests can tell backends apart.

Waiting is bounded everywhere: a held request gives up after HOLD_LIMIT seconds.
"""

import base64
import hashlib
import json
import select
import socket
import ssl
import struct
import threading
import time
import urllib.parse

HOLD_LIMIT = 60.0
IO_TIMEOUT = 120.0

CHUNKED_PARTS = [b"first chunk;", b"second chunk;", b"x" * 5000, b"last"]
CHUNKED_BODY = b"".join(CHUNKED_PARTS)
CLOSE_DELIMITED_BODY = b"".join(b"close-delimited line %04d\n" % i for i in range(400))
HEAD_TEST_LENGTH = 1234
MID_BODY_DECLARED = 1000
MID_BODY_SENT = 100
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def big_body(n):
    """The deterministic body of /big?bytes=N."""
    pattern = bytes(range(251)) * (65536 // 251 + 1)
    out = bytearray()
    while len(out) < n:
        out += pattern[: min(len(pattern), n - len(out))]
    return bytes(out)


class ClientGone(Exception):
    """The peer (floodgate) closed or reset the connection."""


class RawServer:
    """A loopback listener that hands each accepted socket to `serve(sock, state)` on a thread
    of its own; `state` is what `on_accept()` returns (None by default). For backends that
    speak raw bytes on purpose (tests/integration/test_differential.py, test_faults.py).

    settled(check) tells, exactly, that no connection is waiting to be accepted and `check()`
    holds: a connection is accepted and given its state under one lock, and the kernel's accept
    queue is read under the same lock, so a connection is always either still queued or already
    known to the subclass, never in between."""

    def __init__(self, backlog=64, port=0):
        """port: 0 for an ephemeral one; a stopped server's port to listen there again."""
        self.listener = socket.create_server(("127.0.0.1", port), backlog=backlog)
        self.listener.setblocking(False)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self._accepting = threading.Lock()
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self._stopped.set()
        with self._accepting:
            self.listener.close()

    def on_accept(self):
        return None

    def serve(self, sock, state):
        raise NotImplementedError

    def queued(self):
        """Connections the kernel has established and nobody has accepted yet (TCP_INFO of a
        listening socket: tcpi_unacked is its accept queue length)."""
        info = self.listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        return struct.unpack_from("I", info, 24)[0]

    def settled(self, check):
        with self._accepting:
            return self.queued() == 0 and check()

    def _accept(self):
        while not self._stopped.is_set():
            try:
                readable, _, _ = select.select([self.listener], [], [], 0.2)  # 0.2 s: see stop()
            except (OSError, ValueError):
                return
            if not readable:
                continue
            with self._accepting:
                if self._stopped.is_set():
                    return
                try:
                    sock, _ = self.listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return
                state = self.on_accept()
            threading.Thread(target=self.serve, args=(sock, state), daemon=True).start()


class RecordedRequest:
    """One request as it reached the backend. Created as soon as the head is parsed, so tests
    can observe a request whose body is still arriving; ``complete`` turns True once the whole
    body was read, ``aborted`` when the connection ended before that."""

    def __init__(self, conn_id, raw_head, method, target, version, headers):
        self.conn_id = conn_id
        self.raw_head = raw_head
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers  # list of (name, value) in arrival order, names as sent
        self.body = bytearray()
        self.body_framing = "none"  # "none", "length" or "chunked"
        self.chunk_sizes = []
        self.trailers = []
        self.complete = False
        self.aborted = False
        self.dropped = False  # closed by the backend without an answer (/drop-next)

    @property
    def path(self):
        return self.target.split("?", 1)[0]

    def header_values(self, name):
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def header(self, name):
        values = self.header_values(name)
        return values[0] if values else None

    def has_header(self, name):
        return bool(self.header_values(name))

    def to_json(self):
        return {
            "method": self.method,
            "target": self.target,
            "version": self.version,
            "headers": [[n, v] for n, v in self.headers],
            "body_framing": self.body_framing,
            "body": bytes(self.body).decode("latin-1"),
            "trailers": [[n, v] for n, v in self.trailers],
        }


class _Conn:
    """Buffered reads over one accepted socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def fill(self):
        try:
            data = self.sock.recv(65536)
        except (ConnectionError, OSError):
            raise ClientGone()
        if not data:
            raise ClientGone()
        self.buf += data

    def read_until(self, marker, limit=1 << 20):
        while True:
            idx = self.buf.find(marker)
            if idx >= 0:
                out = bytes(self.buf[: idx + len(marker)])
                del self.buf[: idx + len(marker)]
                return out
            if len(self.buf) > limit:
                raise ClientGone()
            self.fill()

    def read_exact(self, n, sink=None):
        out = bytearray()
        while len(out) < n:
            if not self.buf:
                self.fill()
            take = min(n - len(out), len(self.buf))
            piece = bytes(self.buf[:take])
            del self.buf[:take]
            out += piece
            if sink is not None:
                sink(piece)
        return bytes(out)

    def send(self, data):
        try:
            self.sock.sendall(data)
        except (ConnectionError, OSError):
            raise ClientGone()


class Backend:
    """A threaded loopback HTTP/1.1 server that records what reaches it."""

    def __init__(self, name=None, backlog=128, port=0, host="127.0.0.1", tls=None):
        """port: 0 for an ephemeral one; a stopped backend's port to start it again there.
        host: another loopback address (127.0.0.2) for two backends on one port.
        tls: an ssl.SSLContext (server side) to speak HTTPS; handshakes that fail are counted
        in tls_failures."""
        self.tls = tls
        self.tls_failures = 0
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(backlog)
        self.port = self.listener.getsockname()[1]
        self.address = "%s:%d" % (host, self.port)
        self.name = name or self.address
        self.cond = threading.Condition()
        self.requests = []
        self.connections_accepted = 0
        self.connections_closed = 0
        self.ws_events = []  # ("open", conn_id) / ("peer-closed", conn_id)
        self._gates = {}
        self._raw = {}  # key -> [bytes, ...] for /raw
        self._socks = set()
        self._lock = threading.Lock()
        self.load_in_progress = 0  # /load requests being served now
        self._stopping = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    # --- life cycle -------------------------------------------------------------------------
    def start(self):
        self._thread.start()
        return self

    def stop(self):
        with self.cond:
            self._stopping = True
            for gate in self._gates.values():
                gate.set()
            socks = list(self._socks)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- what tests use ---------------------------------------------------------------------
    @property
    def request_count(self):
        with self.cond:
            return len(self.requests)

    def snapshot(self):
        with self.cond:
            return list(self.requests)

    def wait_for(self, predicate, timeout=10.0, what="condition"):
        """Waits until predicate(self) is true (evaluated under the lock, re-checked on every
        change); returns its value or raises AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate(self)
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("backend %s: timed out waiting for %s" % (self.name, what))
                self.cond.wait(min(remaining, 0.1))

    def wait_for_requests(self, n, timeout=10.0):
        return self.wait_for(lambda b: len(b.requests) >= n and list(b.requests),
                             timeout, "%d requests" % n)

    def wait_for_target(self, target, timeout=10.0):
        """The first recorded request with this exact target."""
        def find(b):
            for r in b.requests:
                if r.target == target:
                    return r
            return None
        return self.wait_for(find, timeout, "a request for %s" % target)

    def set_raw(self, key, *parts):
        """What /raw?key=K answers: raw bytes, sent part by part (see the module docstring)."""
        with self.cond:
            self._raw[key] = list(parts)

    def release(self, key):
        with self.cond:
            self._gate(key).set()

    def reset_records(self):
        with self.cond:
            self.requests.clear()
            self.ws_events.clear()
            self.connections_accepted = 0
            self.connections_closed = 0

    # --- serving ----------------------------------------------------------------------------
    def _gate(self, key):
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = threading.Event()
        return gate

    def _accept_loop(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.cond:
                if self._stopping:
                    sock.close()
                    return
                self.connections_accepted += 1
                conn_id = self.connections_accepted
                self._socks.add(sock)
                self.cond.notify_all()
            threading.Thread(target=self._serve, args=(sock, conn_id), daemon=True).start()

    def _serve(self, sock, conn_id):
        sock.settimeout(IO_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            plain = sock
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except (OSError, ssl.SSLError):
                with self.cond:
                    self.tls_failures += 1
                    self._socks.discard(plain)
                    self.cond.notify_all()
                plain.close()
                return
            with self.cond:
                self._socks.discard(plain)
                self._socks.add(sock)
        conn = _Conn(sock)
        drop_next = False
        try:
            while True:
                rec = self._read_request(conn, conn_id)
                if rec is None:
                    break
                if drop_next:  # the keep-alive connection "timed out" just as it was reused
                    with self.cond:
                        rec.dropped = True
                        self.cond.notify_all()
                    break
                drop_next = rec.path == "/drop-next"
                keep = self._dispatch(conn, rec)
                if not keep:
                    break
        except ClientGone:
            pass
        except Exception as e:  # a bug in the backend itself: make it visible
            import traceback
            traceback.print_exc()
            try:
                sock.sendall(b"HTTP/1.1 599 Backend Bug\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (len(str(e)), str(e).encode()))
            except OSError:
                pass
        finally:
            with self.cond:
                self._socks.discard(sock)
                self.connections_closed += 1
                self.cond.notify_all()
            try:
                sock.close()
            except OSError:
                pass

    def _read_request(self, conn, conn_id):
        try:
            raw_head = conn.read_until(b"\r\n\r\n")
        except ClientGone:
            return None
        lines = raw_head[:-4].split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ")
        if len(parts) != 3:
            raise ValueError("backend got a bad request line: %r" % lines[0])
        method, target, version = parts
        headers = []
        for line in lines[1:]:
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise ValueError("backend got a bad header line: %r" % line)
            headers.append((name, value.strip(" \t")))
        rec = RecordedRequest(conn_id, raw_head, method, target, version, headers)
        with self.cond:
            self.requests.append(rec)
            self.cond.notify_all()
        try:
            self._read_body(conn, rec)
        except ClientGone:
            with self.cond:
                rec.aborted = True
                self.cond.notify_all()
            raise
        with self.cond:
            rec.complete = True
            self.cond.notify_all()
        return rec

    def _append_body(self, rec, piece):
        with self.cond:
            rec.body += piece
            self.cond.notify_all()

    def _read_body(self, conn, rec):
        te = [v.lower() for v in rec.header_values("transfer-encoding")]
        cl = rec.header_values("content-length")
        if te:
            if te != ["chunked"] or cl:
                raise ValueError("backend got ambiguous framing: TE=%r CL=%r" % (te, cl))
            rec.body_framing = "chunked"
            while True:
                size_line = conn.read_until(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                rec.chunk_sizes.append(size)
                if size == 0:
                    break
                conn.read_exact(size, lambda p: self._append_body(rec, p))
                if conn.read_exact(2) != b"\r\n":
                    raise ValueError("backend got a chunk without CRLF")
            while True:
                line = conn.read_until(b"\r\n")
                if line == b"\r\n":
                    break
                name, _, value = line[:-2].decode("latin-1").partition(":")
                rec.trailers.append((name, value.strip()))
        elif cl:
            if len(cl) != 1:
                raise ValueError("backend got several Content-Length headers: %r" % cl)
            rec.body_framing = "length"
            conn.read_exact(int(cl[0]), lambda p: self._append_body(rec, p))

    # --- responses --------------------------------------------------------------------------
    def _head(self, status, reason, headers):
        lines = ["HTTP/1.1 %d %s" % (status, reason), "X-Backend-Name: %s" % self.name]
        lines += ["%s: %s" % (n, v) for n, v in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _wants_close(self, rec):
        conn_values = ",".join(rec.header_values("connection")).lower()
        tokens = [t.strip() for t in conn_values.split(",")]
        if "close" in tokens:
            return True
        return rec.version == "HTTP/1.0" and "keep-alive" not in tokens

    def _simple(self, conn, rec, status, reason, body, headers=(), content_type="text/plain"):
        close = self._wants_close(rec)
        hdrs = [("Content-Type", content_type), ("Content-Length", str(len(body)))] + list(headers)
        if close:
            hdrs.append(("Connection", "close"))
        out = self._head(status, reason, hdrs)
        if rec.method != "HEAD":
            out += body
        conn.send(out)
        return not close

    def _dispatch(self, conn, rec):
        query = urllib.parse.parse_qs(rec.target.partition("?")[2])
        q = lambda k, d=None: query.get(k, [d])[0]
        path = rec.path
        if path == "/name":
            return self._simple(conn, rec, 200, "OK", self.name.encode())
        if path == "/chunked":
            return self._chunked(conn, rec)
        if path == "/close-delimited":
            conn.send(self._head(200, "OK", [("Content-Type", "text/plain"), ("Connection", "close")]))
            for i in range(0, len(CLOSE_DELIMITED_BODY), 3000):
                conn.send(CLOSE_DELIMITED_BODY[i:i + 3000])
            return False
        if path.startswith("/status/"):
            return self._status(conn, rec, int(path[len("/status/"):]))
        if path == "/head-test":
            return self._simple(conn, rec, 200, "OK", b"h" * HEAD_TEST_LENGTH)
        if path == "/hop-response":
            return self._simple(conn, rec, 200, "OK", b"hop", [
                ("Connection", "X-Resp-Hop, keep-alive"), ("X-Resp-Hop", "secret"),
                ("Keep-Alive", "timeout=5"), ("Proxy-Connection", "keep-alive"),
                ("Trailer", "X-Nothing"), ("Upgrade", "foo/1"), ("X-Resp-Keep", "kept")])
        if path == "/load":
            with self._lock:
                self.load_in_progress += 1
                busy = self.load_in_progress
            try:
                time.sleep((float(q("base_ms", "0")) + float(q("per_ms", "0")) * busy) / 1000.0)
                return self._simple(conn, rec, 200, "OK", b"load %d" % busy)
            finally:
                with self._lock:
                    self.load_in_progress -= 1
        if path == "/slow-head":
            time.sleep(int(q("ms", "1000")) / 1000.0)
            return self._simple(conn, rec, 200, "OK", rec.target.encode())
        if path == "/hold" or path.endswith("/events"):  # held streams, e.g. /feed/events
            self._wait_gate(q("key", ""))
            return self._simple(conn, rec, 200, "OK", b"released " + q("key", "").encode())
        if path == "/hold-body":
            size = int(q("size", "1000"))
            conn.send(self._head(200, "OK", [("Content-Length", str(2 * size))]) + b"a" * size)
            self._wait_gate(q("key", ""))
            conn.send(b"b" * size)
            return not self._wants_close(rec)
        if path == "/reset-before-response":
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if path == "/close-before-response":
            return False
        if path == "/close-mid-body":
            conn.send(self._head(200, "OK", [("Content-Length", str(MID_BODY_DECLARED))])
                      + b"m" * MID_BODY_SENT)
            return False
        if path == "/bad-chunk":
            conn.send(self._head(200, "OK", [("Transfer-Encoding", "chunked")]) + b"5\r\nhello\r\n")
            conn.send(b"zz-not-hex\r\nwhatever\r\n")
            return False
        if path == "/malformed":
            conn.send(b"THIS IS NOT HTTP\r\n\r\n")
            return False
        if path == "/malformed-header":
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nthis line has no colon\r\n\r\nok")
            return False
        if path == "/close-after-response":
            self._simple(conn, rec, 200, "OK", b"bye", [("Connection", "close")])
            return False
        if path == "/raw":
            return self._raw_response(conn, q("key", ""))
        if path == "/ws":
            return self._websocket(conn, rec, q)
        if path == "/h2c":
            return self._h2c(conn, rec)
        if path == "/big":
            n = int(q("bytes", "1048576"))
            conn.send(self._head(200, "OK", [("Content-Type", "application/octet-stream"),
                                             ("Content-Length", str(n))]))
            if rec.method != "HEAD":
                body = big_body(n)
                for i in range(0, n, 65536):
                    conn.send(body[i:i + 65536])
            return not self._wants_close(rec)
        body = json.dumps(dict(rec.to_json(), backend=self.name)).encode()
        return self._simple(conn, rec, 200, "OK", body, content_type="application/json")

    def _raw_response(self, conn, key):
        with self.cond:
            parts = self._raw.get(key) or [b"HTTP/1.1 599 No Raw Response Set\r\nContent-Length: 0\r\n\r\n"]
        for i, part in enumerate(parts):
            if i > 0:
                self._wait_gate("%s/%d" % (key, i))
            conn.send(part)
        return True  # never close first: whatever floodgate decides, it decides on these bytes

    def _wait_gate(self, key):
        with self.cond:
            gate = self._gate(key)
        gate.wait(HOLD_LIMIT)

    def _status(self, conn, rec, status):
        close = self._wants_close(rec)
        extra = [("Connection", "close")] if close else []
        if status in (204, 304):
            hdrs = [("ETag", '"v1"')] if status == 304 else []
            if status == 304:
                hdrs.append(("Content-Length", "50"))  # the selected representation's length
            conn.send(self._head(status, "No Content" if status == 204 else "Not Modified", hdrs + extra))
            return not close
        return self._simple(conn, rec, status, "Status", b"status %d\n" % status)

    def _chunked(self, conn, rec):
        close = self._wants_close(rec)
        hdrs = [("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked"),
                ("Trailer", "X-Backend-Trailer")]
        if close:
            hdrs.append(("Connection", "close"))
        conn.send(self._head(200, "OK", hdrs))
        if rec.method != "HEAD":
            for part in CHUNKED_PARTS:
                conn.send(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            conn.send(b"0\r\nX-Backend-Trailer: trailer-value\r\n\r\n")
        return not close

    def _h2c(self, conn, rec):
        """An h2c upgrade offer is accepted (101, then bytes echoed, standing in for HTTP/2);
        without one, the usual JSON echo."""
        offers = [t.strip().lower() for v in rec.header_values("upgrade") for t in v.split(",")]
        connection = ",".join(rec.header_values("connection")).lower()
        if "h2c" not in offers or "upgrade" not in connection:
            body = json.dumps(dict(rec.to_json(), backend=self.name)).encode()
            return self._simple(conn, rec, 200, "OK", body, content_type="application/json")
        conn.send(self._head(101, "Switching Protocols", [("Upgrade", "h2c"), ("Connection", "Upgrade")]))
        try:
            data = bytes(conn.buf)
            conn.buf.clear()
            while True:
                if data:
                    conn.send(data)
                data = conn.sock.recv(65536)
                if not data:
                    break
        except (ConnectionError, OSError, ClientGone):
            pass
        return False

    def _websocket(self, conn, rec, q):
        upgrade = (rec.header("upgrade") or "").lower()
        connection = ",".join(rec.header_values("connection")).lower()
        if upgrade != "websocket" or "upgrade" not in connection:
            return self._simple(conn, rec, 426, "Upgrade Required", b"upgrade required\n",
                                [("Upgrade", "websocket")])
        key = rec.header("sec-websocket-key") or ""
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        conn.send(self._head(101, "Switching Protocols", [
            ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", accept)]))
        with self.cond:
            self.ws_events.append(("open", rec.conn_id))
            self.cond.notify_all()
        close_after = int(q("close_after", "0"))
        echoed = 0
        if conn.buf:
            data, conn.buf = bytes(conn.buf), bytearray()
            conn.send(data)
            echoed += len(data)
        try:
            while not close_after or echoed < close_after:
                data = conn.sock.recv(65536)
                if not data:
                    break
                conn.send(data)
                echoed += len(data)
        except (ConnectionError, OSError, ClientGone):
            pass
        with self.cond:
            self.ws_events.append(("closed" if close_after and echoed >= close_after else "peer-closed",
                                   rec.conn_id))
            self.cond.notify_all()
        return False


def start_backends(*names):
    return [Backend(name).start() for name in names]
