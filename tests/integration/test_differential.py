"""Differential framing check: floodgate against an independent strict HTTP/1.1 parser (h11).

Every hostile request in corpus/differential_requests.jsonl (CL.TE, TE.CL and TE.TE
obfuscations, bare CR and LF, NUL and control bytes, obs-fold, duplicate and malformed
Content-Length, oversized fields, empty field names, HTTP/1.0 with chunked, chunk-size
overflow and extensions, absolute-form and Host oddities, ...) is sent through floodgate, on
its own connection, to a backend that records the raw bytes it receives. For each case:

- either nothing reached the backend, or every byte the backend received parses in h11 (as a
  server) as complete requests with nothing left over, each canonical (see canonical_head():
  CRLF line ends, a token method, an origin-form target, HTTP/1.1, token field names, values
  without control bytes, exactly one Host without userinfo, at most one framing: one
  Content-Length of digits or Transfer-Encoding: chunked alone); a body cut short on a
  connection floodgate closed counts as nothing forwarded (see ABORTED);
- and the backend saw exactly as many requests as the client got backend answers for, so no
  request was smuggled inside another.

Every hostile response in corpus/differential_responses.jsonl is sent by a raw backend to a
plain GET; what floodgate sends the client must parse in h11 (as a client) as one complete
canonical response, or be floodgate's own 502.

All cases run; the failures are reported together at the end, each by its corpus name. The
corpus is data: it says what to send, never what floodgate answers today.
"""

import json
import os
import re
import socket
import sys
import threading
import time
import unittest

try:
    import h11
except ImportError:  # Debian's python3-h11 when another interpreter runs the suite
    sys.path.append("/usr/lib/python3/dist-packages")
    import h11

from backend import RawServer
from harness import NO_BREAKER, FloodgateTestCase, poll, upstream

HERE = os.path.dirname(os.path.abspath(__file__))
CASE_TIMEOUT = 2.0  # per case: the client reads until EOF or this long
_REPEAT = re.compile(r"\{\{(.+?)\*(\d+)\}\}", re.S)

TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
FIELD_VALUE = re.compile(rb"^([\x21-\x7e\x80-\xff]([\x20-\x7e\x80-\xff\t]*[\x21-\x7e\x80-\xff])?)?$")
HOST = re.compile(rb"^([A-Za-z0-9\-._~!$&'()*+,;=%]*|\[[0-9A-Fa-f:.]+\])(:[0-9]{0,5})?$")
ORIGIN_FORM = re.compile(rb"^/[\x21-\x7e]*$")
REASON_PHRASE = re.compile(rb"^[\t\x20-\x7e\x80-\xff]*$")


def load_corpus(name):
    cases = []
    with open(os.path.join(HERE, "corpus", name), encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            if "name" not in entry:
                continue  # the header comment
            text = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), entry["send"])
            entry["bytes"] = text.encode("latin-1") if all(ord(c) < 256 for c in text) else \
                text.encode("utf-8")
            cases.append(entry)
    return cases


# --- what "canonical" means ---------------------------------------------------------------

def _lines(head):
    """The head's lines, or a problem: every line ends in CRLF, no bare CR or LF anywhere."""
    if head.count(b"\n") != head.count(b"\r\n") or head.count(b"\r") != head.count(b"\r\n"):
        return None, "a bare CR or LF"
    return head[:-4].split(b"\r\n"), None


def _fields(lines):
    problems, fields = [], []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            problems.append("obs-fold line %r" % line[:40])
            continue
        name, colon, value = line.partition(b":")
        if not colon or not TOKEN.match(name):
            problems.append("bad field name %r" % name[:40])
            continue
        value = value.strip(b" \t")  # OWS around the value is field-line syntax (RFC 9112 5)
        if not FIELD_VALUE.match(value):
            problems.append("bad value of %s: %r" % (name.decode("latin-1"), value[:40]))
        fields.append((name.lower(), value))
    return fields, problems


def _framing(fields, problems):
    lengths = [v for n, v in fields if n == b"content-length"]
    codings = [v for n, v in fields if n == b"transfer-encoding"]
    if len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
        problems.append("Content-Length %r" % lengths)
    if len(codings) > 1 or (codings and codings[0].lower() != b"chunked"):
        problems.append("Transfer-Encoding %r" % codings)
    if lengths and codings:
        problems.append("both Content-Length and Transfer-Encoding")


def canonical_request_head(head):
    """The problems that make a forwarded request head non-canonical (empty when none)."""
    lines, why = _lines(head)
    if why:
        return [why]
    parts = lines[0].split(b" ")
    problems = []
    if len(parts) != 3 or not TOKEN.match(parts[0]) or parts[2] != b"HTTP/1.1":
        problems.append("request line %r" % lines[0][:80])
    elif not (ORIGIN_FORM.match(parts[1]) and b"#" not in parts[1]) and \
            not (parts[1] == b"*" and parts[0] == b"OPTIONS"):
        problems.append("target %r" % parts[1][:80])
    fields, more = _fields(lines[1:])
    problems += more
    hosts = [v for n, v in fields if n == b"host"]
    if len(hosts) != 1 or not HOST.match(hosts[0]):
        problems.append("Host %r" % [h[:40] for h in hosts])
    _framing(fields, problems)
    return problems


def canonical_response_head(head):
    lines, why = _lines(head)
    if why:
        return [why]
    m = re.match(rb"^HTTP/1\.1 ([1-5][0-9][0-9]) (.*)$", lines[0], re.S)
    problems = []
    if not m or not REASON_PHRASE.match(m.group(2)):
        problems.append("status line %r" % lines[0][:80])
    fields, more = _fields(lines[1:])
    problems += more
    _framing(fields, problems)
    return problems


# --- the request direction's backend ----------------------------------------------------------

def _answer(conn):
    """Moves an h11 server connection past the response (RecordingBackend.ANSWER)."""
    conn.send(h11.Response(status_code=200, headers=[("Content-Length", "2")]))
    conn.send(h11.Data(data=b"ok"))
    conn.send(h11.EndOfMessage())
    conn.start_next_cycle()


class RecordingBackend(RawServer):
    """Answers every request h11 parses with 200 and records, per connection, the raw bytes
    received and what h11 made of them (requests, leftover bytes, errors)."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Diff-Backend: 1\r\n\r\nok"

    def __init__(self):
        self.lock = threading.Lock()
        self.conns = []  # dicts: raw, requests [(head bytes, body bytes)], error, done
        super().__init__(backlog=256)

    def take(self):
        with self.lock:
            out, self.conns = self.conns, []
        return out

    def quiet(self):
        """Every connection floodgate opened was accepted and has ended."""
        def done():
            with self.lock:
                return all(c["done"] for c in self.conns)
        return self.settled(done)

    def on_accept(self):
        rec = {"raw": bytearray(), "requests": [], "error": None, "done": False}
        with self.lock:
            self.conns.append(rec)
        return rec

    def serve(self, sock, rec):
        sock.settimeout(10)
        conn = h11.Connection(h11.SERVER)
        body = bytearray()
        try:
            while True:
                data = sock.recv(65536)
                rec["raw"] += data
                conn.receive_data(data)
                while True:
                    ev = conn.next_event()
                    if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
                        break
                    if isinstance(ev, h11.Data):
                        body += ev.data
                    elif isinstance(ev, h11.EndOfMessage):
                        rec["requests"].append(bytes(body))
                        body.clear()
                        sock.sendall(self.ANSWER)
                        _answer(conn)
                if not data:
                    if conn.their_state not in (h11.IDLE, h11.CLOSED, h11.DONE) or conn.trailing_data[0]:
                        rec["error"] = "connection ended inside a request (%d bytes left over)" \
                            % len(conn.trailing_data[0])
                    break
        except h11.RemoteProtocolError as e:
            rec["error"] = "h11: %s" % e
        except OSError as e:
            rec["error"] = "socket: %s" % e
        finally:
            sock.close()
            rec["done"] = True


def request_heads(raw):
    """The raw heads of the requests in a byte stream h11 accepted, in order (h11 tells the
    body lengths; a head ends at the first CRLFCRLF after the previous message)."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(bytes(raw))
    conn.receive_data(b"")
    heads, pos = [], 0
    while True:
        try:
            ev = conn.next_event()
        except h11.RemoteProtocolError:
            break
        if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
            break
        if isinstance(ev, h11.Request):
            end = raw.find(b"\r\n\r\n", pos)
            end = len(raw) if end < 0 else end + 4
            heads.append(bytes(raw[pos:end]))
        if isinstance(ev, h11.EndOfMessage):
            pos = len(raw) - len(conn.trailing_data[0])
            _answer(conn)
    return heads


def exchange(port, data, timeout=CASE_TIMEOUT):
    """Sends data on a new connection, half-closes, reads until EOF or the deadline."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = bytearray()
    try:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # floodgate may refuse and close before reading everything
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    return bytes(out)


# A body cut short on a connection floodgate closed, the client getting no backend answer:
# floodgate streams a body, so a request whose client stopped sending (or whose body floodgate
# refused after forwarding the head) ends as a prefix the backend never sees completed. That
# is safe; a complete message that is not canonical, or a smuggled one, is not.
ABORTED = "h11: peer closed connection without sending complete message body"


def backend_answers(data):
    """How many of the responses the client got came from the recording backend."""
    return data.count(b"\r\nX-Diff-Backend: 1\r\n")


class DifferentialRequests(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = RecordingBackend()
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend.address], keepalive=0)],
                                     server={"header_timeout": "2s"})

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.backend.stop()

    def check_case(self, case):
        answer = exchange(self.fg.port, case["bytes"])
        # Everything this case started ends before the next case: floodgate has no request at a
        # backend (it counts one before it connects) and the backend has seen every connection
        # end, so a late connection is never taken for the next case's.
        poll(lambda: self.fg.metrics().value("floodgate_backend_active") == 0
             and self.fg.metrics().value("floodgate_client_connections") == 0,
             timeout=5, what="floodgate to end the requests of %s" % case["name"])
        poll(self.backend.quiet, timeout=5, what="the backend connections of %s to end" % case["name"])
        conns = self.backend.take()
        problems, seen = [], 0
        for c in conns:
            if not c["raw"]:
                continue
            aborted = c["error"] and c["error"].startswith(ABORTED) and backend_answers(answer) == 0
            if c["error"] and not aborted:
                problems.append(c["error"])
            seen += len(c["requests"])
            for head in request_heads(c["raw"]):
                problems += canonical_request_head(head)
        answered = backend_answers(answer)
        if seen != answered:
            problems.append("the backend saw %d request(s), the client got %d backend answer(s)"
                            % (seen, answered))
        return problems

    def test_every_forwarded_request_is_canonical_or_nothing_is_forwarded(self):
        cases = load_corpus("differential_requests.jsonl")
        self.assertGreaterEqual(len(cases), 150)
        failures = []
        for case in cases:
            problems = self.check_case(case)
            if problems:
                failures.append("%s: %s" % (case["name"], "; ".join(problems[:3])))
        self.assertEqual(failures, [], "%d of %d request cases forwarded something non-canonical:\n  %s"
                         % (len(failures), len(cases), "\n  ".join(failures)))


class ScriptedBackend(RawServer):
    """Answers each connection's first request head with the bytes of the current case, then
    closes."""

    def __init__(self):
        self.answer = b""
        super().__init__()

    def on_accept(self):
        return self.answer  # the case current when the connection arrived

    def serve(self, sock, answer):
        sock.settimeout(10)
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            sock.sendall(answer)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except OSError:
            pass
        finally:
            sock.close()


def check_response(data, method, truncated=False):
    """Problems with what floodgate sent the client (empty when canonical or a 502). When the
    backend's own message is `truncated` (it closes mid-body), the client must get a 502 or
    a canonical head followed by a body that visibly ends early, never a complete message."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/r", headers=[("Host", "a"), ("Connection", "close")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    if not truncated:  # for a truncated one, h11 waiting for more is the expected outcome
        conn.receive_data(b"")
    heads, status = [], None
    pos = 0
    try:
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                if truncated and heads:
                    return canonical_response_head(heads[-1])
                return ["the response is incomplete (%d bytes)" % len(data)]
            if isinstance(ev, (h11.InformationalResponse, h11.Response)):
                end = data.find(b"\r\n\r\n", pos)
                heads.append(data[pos:end + 4])
                pos = end + 4
                status = ev.status_code
            if isinstance(ev, h11.EndOfMessage):
                break
            if isinstance(ev, h11.ConnectionClosed):
                return ["the connection closed before a response"]
    except h11.RemoteProtocolError as e:
        return ["h11: %s" % e]
    if conn.trailing_data[0]:
        return ["%d bytes after the response" % len(conn.trailing_data[0])]
    if status == 502:
        return []
    if truncated:
        return ["a response the backend cut short reached the client complete"]
    problems = []
    for head in heads:
        problems += canonical_response_head(head)
    return problems


class DifferentialResponses(FloodgateTestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = ScriptedBackend()
        cls.fg = cls.start_floodgate([upstream("app", [cls.backend.address], keepalive=0,
                                               response_timeout="2s")], resilience=NO_BREAKER)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.backend.stop()

    def test_every_response_reaches_the_client_canonical_or_as_a_502(self):
        cases = load_corpus("differential_responses.jsonl")
        failures = []
        for case in cases:
            method = case.get("method", "GET")
            self.backend.answer = case["bytes"]
            request = ("%s /r HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" % method).encode()
            problems = check_response(exchange(self.fg.port, request, timeout=3.0), method,
                                      case.get("truncated", False))
            if problems:
                failures.append("%s: %s" % (case["name"], "; ".join(problems[:3])))
        self.assertEqual(failures, [], "%d of %d response cases reached the client non-canonical:\n  %s"
                         % (len(failures), len(cases), "\n  ".join(failures)))


if __name__ == "__main__":
    unittest.main()
