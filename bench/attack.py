#!/usr/bin/env python3
"""Honest requests served under cheap client attacks (issue 35): floodgate, HAProxy and nginx
side by side, each at the configuration compare.py uses (targets.py: nothing added against
attacks), each with a TLS listener and a plain one, in front of the same loopback nginx.

Attacks (--attacks):
  slow-readers    --slow-readers connections (default 300) to the plain listener, each with
                  a small SO_RCVBUF (--rcvbuf), that GET a large file (--large, default 4 MiB,
                  served by the backend from the run's directory) and read it at
                  --read-rate bytes/s (default 4096): they cost the proxy a connection and
                  buffers, the backend nothing once its part is sent.
  silent-sockets  --silent-tls TCP connections to the TLS listener and --silent-plain to the
                  plain one (default 300 each) that send nothing.
  baseline        no attacker: what the honest client gets from an idle proxy (not default).
An attacker whose connection the proxy closes opens it again, no sooner than --reopen seconds
after it last opened it, so the attack holds its count without turning into a connection
flood. The attackers run in a child process (non-blocking sockets, one poll per --tick).

Once the attack is established (every connection open and every slow reader receiving, or
after --ramp seconds), the honest client runs for --duration seconds: --honest-plain and
--honest-tls threads, each sending sequential GET / on a new connection (Connection: close),
--honest-rate requests per second per thread (0: back to back), each with a --timeout budget
for connect, handshake and the whole response. Each answer is counted as ok (2xx), refused
(any other status, by status and floodgate's X-Floodgate-Reason when there is one, e.g.
"503 inflight_cap") or an error (timeout, reset, TLS failure..., by kind);
latency is from connect to the last byte, p99 over the ok answers.

Every (attack, proxy) run has a fresh Stack (backend and that one proxy), stopped with its
attackers before the next run; with --rounds N the proxy order rotates each round and the
table shows medians. Prints one markdown table per attack and, per attack, floodgate's ok
count against the better of HAProxy's and nginx's (the issue's target: at least as many);
exits 1 when floodgate serves fewer. Writes the tables and the raw runs (JSON lines) to
bench/results/attack-<timestamp>.txt. Needs haproxy and nginx on the PATH.

Usage: python3 bench/attack.py [--floodgate build-bench/floodgate] [--proxies ...] [--help]
"""

import argparse
import collections
import errno
import json
import math
import multiprocessing
import os
import resource
import select
import shlex
import signal
import socket
import ssl
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import compare  # noqa: E402  (versions)
import targets  # noqa: E402  (Stack, cpu_seconds, rss_kib, exit_on_signals)

ATTACKS = ("baseline", "slow-readers", "silent-sockets")
DEFAULT_ATTACKS = ("slow-readers", "silent-sockets")
LARGE_PATH = "/attack/large.bin"     # the slow readers' file, under the Stack's directory
HONEST_REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: honest\r\nConnection: close\r\n\r\n"
SLOW_REQUEST = (f"GET {LARGE_PATH} HTTP/1.1\r\nHost: bench\r\nUser-Agent: slow-reader\r\n\r\n"
                .encode())
CONNECT_TIMEOUT_S = 2.0              # an attacker's connect that takes longer is abandoned


# --- options --------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--floodgate", default=os.path.join(REPO, "build", "floodgate"),
                   help="floodgate binary (a Release build)")
    p.add_argument("--proxies", default=",".join(targets.PROXIES),
                   help="comma-separated subset of " + ",".join(targets.PROXIES))
    p.add_argument("--attacks", default=",".join(DEFAULT_ATTACKS),
                   help="comma-separated subset of " + ",".join(ATTACKS))
    p.add_argument("--rounds", type=int, default=1, help="rounds of every (attack, proxy)")
    p.add_argument("--duration", type=float, default=20.0,
                   help="seconds of honest requests per run, under the attack")
    p.add_argument("--ramp", type=float, default=5.0,
                   help="at most this many seconds for the attack to establish itself")
    p.add_argument("--slow-readers", type=int, default=300, help="slow-reader connections")
    p.add_argument("--large", type=int, default=4 * 1024 * 1024,
                   help="bytes of the file the slow readers request")
    p.add_argument("--read-rate", type=int, default=4096,
                   help="bytes per second each slow reader reads")
    p.add_argument("--rcvbuf", type=int, default=4096, help="slow readers' SO_RCVBUF")
    p.add_argument("--silent-tls", type=int, default=300,
                   help="silent connections to the TLS listener")
    p.add_argument("--silent-plain", type=int, default=300,
                   help="silent connections to the plain listener")
    p.add_argument("--reopen", type=float, default=1.0,
                   help="an attacker slot opens a connection at most once per this many "
                        "seconds")
    p.add_argument("--tick", type=float, default=0.2, help="the attackers' poll period, s")
    p.add_argument("--honest-plain", type=int, default=2,
                   help="honest client threads on the plain listener")
    p.add_argument("--honest-tls", type=int, default=2,
                   help="honest client threads on the TLS listener")
    p.add_argument("--honest-rate", type=float, default=25.0,
                   help="requests per second per honest thread (0: back to back)")
    p.add_argument("--timeout", type=float, default=2.0,
                   help="an honest request's budget, s (connect, handshake, response)")
    p.add_argument("--results-dir", default=os.path.join(HERE, "results"),
                   help="where the results file goes")
    args = p.parse_args(argv)
    args.proxies = [x for x in args.proxies.split(",") if x]
    args.attacks = [x for x in args.attacks.split(",") if x]
    for what, chosen, known in (("proxies", args.proxies, targets.PROXIES),
                                ("attacks", args.attacks, ATTACKS)):
        unknown = set(chosen) - set(known)
        if unknown or not chosen:
            p.error(f"--{what}: choose from {','.join(known)}")
    if "floodgate" in args.proxies and not os.access(args.floodgate, os.X_OK):
        p.error(f"floodgate binary {args.floodgate} not found: build it or give --floodgate")
    if args.honest_plain + args.honest_tls <= 0 or args.duration <= 0 or args.tick <= 0:
        p.error("need at least one honest thread, a duration and a tick above 0")
    return args


# --- HTTP heads (pure) ----------------------------------------------------------------------

def parse_head(data):
    """(status, content_length or None, head_length) of a response starting DATA, or None
    while its head is incomplete. status is 0 when the first line is not an HTTP status."""
    parsed = parse_head_reason(data)
    return parsed and parsed[:3]


def parse_head_reason(data):
    """parse_head's figures and the X-Floodgate-Reason value ("" when absent), or None."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = data[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if (len(parts) >= 2 and parts[0].startswith("HTTP/")
                               and parts[1].isdigit()) else 0
    length, reason = None, ""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length" and value.strip().isdigit():
            length = int(value.strip())
        elif name == "x-floodgate-reason":
            reason = value.strip()
    return status, length, end + 4, reason


def percentile(values, pct):
    """The nearest-rank PCT percentile of VALUES, NaN when there are none."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))      # ceil(n * pct / 100), at least 1
    return ordered[int(rank) - 1]


# --- the attackers (child process) ----------------------------------------------------------

class Slot:
    """One attacker connection: its socket (None while closed), and for a slow reader where
    it is in the current response."""
    __slots__ = ("port", "kind", "sock", "connecting", "opened_at", "next_open", "next_read",
                 "last_sent", "next_send", "head", "body_left", "got_bytes")

    def __init__(self, port, kind):
        self.port, self.kind = port, kind          # kind: "slow" or "silent"
        self.sock, self.connecting = None, False
        self.opened_at = self.next_open = self.next_read = self.last_sent = 0.0
        self.next_send = None                      # when to send the next request, if due
        self.head, self.body_left, self.got_bytes = b"", None, False


class Attack:
    """Holds SPEC's connections open: [(port, kind, count)]. Single-threaded; tick() does one
    round of non-blocking work and never waits."""

    def __init__(self, spec, params):
        self.p = params
        self.slots = [Slot(port, kind) for port, kind, count in spec for _ in range(count)]
        self.chunk = max(1, int(params["read_rate"] * params["tick"]))
        self.stats = collections.Counter()
        self.statuses = collections.Counter()      # statuses of the answers attackers got

    def tick(self, now):
        for s in self.slots:
            if s.sock is None and now >= s.next_open:
                self._open(s, now)
            elif s.connecting and now - s.opened_at > CONNECT_TIMEOUT_S:
                self._close(s, now, "connect_failed")
            elif s.next_send is not None and not s.connecting and now >= s.next_send:
                self._send_request(s, now)
        poller, by_fd = select.poll(), {}
        for s in self.slots:
            if s.sock is not None:
                by_fd[s.sock.fileno()] = s
                poller.register(s.sock, select.POLLOUT if s.connecting else select.POLLIN)
        for fd, _events in poller.poll(0):
            s = by_fd[fd]
            if s.connecting:
                self._on_connected(s, now)
            elif s.kind == "silent":
                self._read(s, now, 4096)
            elif now >= s.next_read:
                # One chunk per tick; 0.9 so that a wake-up a little early does not skip one.
                s.next_read = now + 0.9 * self.p["tick"]
                self._read(s, now, self.chunk)

    def established(self):
        return all(s.sock is not None and not s.connecting and (s.kind != "slow" or s.got_bytes)
                   for s in self.slots)

    def snapshot(self):
        held = sum(1 for s in self.slots if s.sock is not None and not s.connecting)
        return {"slots": len(self.slots), "held": held, **self.stats,
                "statuses": {str(k): v for k, v in sorted(self.statuses.items())}}

    def close(self):
        for s in self.slots:
            if s.sock is not None:
                s.sock.close()
                s.sock = None

    def _open(self, s, now):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if s.kind == "slow":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.p["rcvbuf"])
        sock.setblocking(False)
        s.next_open = now + self.p["reopen"]
        err = sock.connect_ex(("127.0.0.1", s.port))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            self.stats["connect_failed"] += 1
            return
        s.sock, s.connecting, s.opened_at = sock, True, now

    def _on_connected(self, s, now):
        if s.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self._close(s, now, "connect_failed")
            return
        s.connecting = False
        self.stats["opened"] += 1
        s.head, s.body_left, s.next_read, s.got_bytes = b"", None, now, False
        if s.kind == "slow":
            self._send_request(s, now)

    def _send_request(self, s, now):
        s.next_send, s.last_sent = None, now
        try:
            s.sock.send(SLOW_REQUEST)             # a few dozen bytes: always fits
        except OSError:
            self._close(s, now, "closed_by_proxy")

    def _read(self, s, now, size):
        try:
            data = s.sock.recv(size)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(s, now, "closed_by_proxy")
            return
        self.stats["bytes_read"] += len(data)
        s.got_bytes = True
        if s.body_left is None:                    # in a head (or a silent socket's answer)
            s.head += data
            parsed = parse_head(s.head)
            if parsed is None:
                if len(s.head) > 65536:
                    s.head = b""                   # not HTTP (a TLS alert...): drop it
                return
            status, length, head_len = parsed
            self.statuses[status] += 1
            # Without a Content-Length the body runs to the close.
            s.body_left = length - (len(s.head) - head_len) if length is not None else math.inf
            s.head = b""
        else:
            s.body_left -= len(data)
        if s.body_left <= 0 and s.kind == "slow":
            # The whole response (a refusal, or a small --large): ask again, but no sooner than
            # --reopen after the last request, so that refusals do not make a request flood.
            self.stats["responses_read"] += 1
            s.body_left = None
            s.next_send = max(now, s.last_sent + self.p["reopen"])

    def _close(self, s, now, why):
        s.sock.close()
        s.sock, s.connecting, s.next_send = None, False, None
        self.stats[why] += 1
        s.next_open = max(s.next_open, now)


def attack_main(spec, params, pipe, stop):
    """The child process: runs the attack until STOP is set; sends ("ready", snapshot) once
    it is established (or after the ramp) and ("done", snapshot) at the end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the parent stops us
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    attack = Attack(spec, params)
    start = time.monotonic()
    ready = False
    while not stop.is_set():
        now = time.monotonic()
        attack.tick(now)
        if not ready and (attack.established() or now - start >= params["ramp"]):
            pipe.send(("ready", {**attack.snapshot(), "after_s": round(now - start, 2)}))
            ready = True
        stop.wait(max(0.0, params["tick"] - (time.monotonic() - now)))
    pipe.send(("done", attack.snapshot()))
    attack.close()


class Attacker:
    """The parent's handle on the child process; stop() also runs on errors (kills it)."""

    def __init__(self, spec, args):
        ctx = multiprocessing.get_context("fork")
        self.stop_event = ctx.Event()
        self.pipe, child_pipe = ctx.Pipe()
        params = {"read_rate": args.read_rate, "tick": args.tick, "rcvbuf": args.rcvbuf,
                  "reopen": args.reopen, "ramp": args.ramp}
        self.proc = ctx.Process(target=attack_main, daemon=True,
                                args=(spec, params, child_pipe, self.stop_event))
        self.proc.start()

    def wait_ready(self, timeout):
        if not self.pipe.poll(timeout):
            raise RuntimeError("the attackers did not report")
        return self.pipe.recv()[1]

    def stop(self):
        self.stop_event.set()
        final = {}
        try:
            if self.pipe.poll(10):
                final = self.pipe.recv()[1]
        except (EOFError, OSError):
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        return final


# --- the honest client ----------------------------------------------------------------------

def tls_context():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def one_request(port, ctx, timeout):
    """One GET / on a new connection within TIMEOUT seconds: ("ok", status), ("refused",
    "status reason") or ("error", kind)."""
    deadline = time.monotonic() + timeout

    def left():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout()
        return remaining

    sock = None
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=left())
        if ctx is not None:
            sock = ctx.wrap_socket(sock, server_hostname="bench")   # handshake, under left()
        sock.settimeout(left())
        sock.sendall(HONEST_REQUEST)
        data, parsed = b"", None
        while True:
            sock.settimeout(left())
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            parsed = parsed or parse_head(data)
            if parsed and parsed[1] is not None and len(data) >= parsed[2] + parsed[1]:
                break
        parsed = parsed or parse_head(data)
        if parsed is None or parsed[0] == 0:
            return "error", "eof" if not data else "bad_response"
        status, length, head_len = parsed
        if length is not None and len(data) < head_len + length:
            return "error", "truncated"
        if 200 <= status < 300:
            return "ok", status
        reason = parse_head_reason(data)[3]
        return "refused", f"{status} {reason}" if reason else status
    except socket.timeout:
        return "error", "timeout"
    except ConnectionRefusedError:
        return "error", "conn_refused"
    except ConnectionResetError:
        return "error", "reset"
    except ssl.SSLError:
        return "error", "tls"
    except OSError as e:
        return "error", type(e).__name__
    finally:
        if sock is not None:
            sock.close()


def honest_worker(port, ctx, rate, timeout, until, out):
    """Sequential requests until UNTIL (monotonic), RATE per second without catching up
    after a slow one (0: back to back); appends (outcome, detail, seconds, listener) to OUT."""
    listener = "tls" if ctx is not None else "plain"
    next_at = time.monotonic()
    while True:
        now = time.monotonic()
        if now >= until:
            return
        if now < next_at:
            time.sleep(min(next_at - now, until - now))
            continue
        outcome, detail = one_request(port, ctx, timeout)
        out.append((outcome, detail, time.monotonic() - now, listener))
        if rate > 0:     # after a slow answer the next request goes at once, not a burst
            next_at = max(next_at + 1.0 / rate, time.monotonic())


def run_honest(args, target):
    """Runs the honest threads for args.duration; returns their outcomes."""
    out, ctx = [], tls_context()
    until = time.monotonic() + args.duration
    threads = [threading.Thread(target=honest_worker, daemon=True,
                                args=(port, c, args.honest_rate, args.timeout, until, out))
               for port, c, n in ((target.plain_port, None, args.honest_plain),
                                  (target.port, ctx, args.honest_tls))
               for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.duration + args.timeout + 5)
    return list(out)


def summarize(outcomes):
    """The figures of one run's honest outcomes (pure)."""
    ok = [o for o in outcomes if o[0] == "ok"]
    refused = collections.Counter(str(o[1]) for o in outcomes if o[0] == "refused")
    errors = collections.Counter(str(o[1]) for o in outcomes if o[0] == "error")
    latencies = [o[2] * 1e3 for o in ok]
    return {"attempted": len(outcomes), "ok": len(ok),
            "ok_plain": sum(1 for o in ok if o[3] == "plain"),
            "ok_tls": sum(1 for o in ok if o[3] == "tls"),
            "refused": sum(refused.values()), "errors": sum(errors.values()),
            "refused_by_status": dict(sorted(refused.items())),
            "errors_by_kind": dict(sorted(errors.items())),
            "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies, default=0.0),
            "over_100ms": sum(1 for v in latencies if v > 100)}


# --- one run --------------------------------------------------------------------------------

def attack_spec(args, attack, target):
    if attack == "slow-readers":
        return [(target.plain_port, "slow", args.slow_readers)]
    if attack == "silent-sockets":
        return [(target.port, "silent", args.silent_tls),
                (target.plain_port, "silent", args.silent_plain)]
    return []


def large_location(d, size):
    """Writes the slow readers' file of SIZE bytes under D; the backend's location for it."""
    folder = os.path.join(d, "www", os.path.dirname(LARGE_PATH).lstrip("/"))
    os.makedirs(folder, mode=0o755, exist_ok=True)
    for part in (os.path.join(d, "www"), folder):
        os.chmod(part, 0o755)                      # nginx workers run as nobody under root
    path = os.path.join(d, "www", LARGE_PATH.lstrip("/"))
    with open(path, "wb") as f:
        block = bytes(range(256)) * 256            # 64 KiB
        for offset in range(0, size, len(block)):
            f.write(block[:min(len(block), size - offset)])
    os.chmod(path, 0o644)
    return (f"        location {os.path.dirname(LARGE_PATH)}/ {{\n"
            f"            root {d}/www;\n"
            f"            default_type application/octet-stream;\n        }}\n")


def run_one(args, attack, proxy):
    """One (attack, proxy) run on a fresh Stack; returns its figures."""
    with targets.Stack(args.floodgate, tls=True, plain_listener=True) as stack:
        stack.backend_locations = large_location(stack.dir, args.large)
        stack.start("backend")
        target = stack.start(proxy)
        attacker = Attacker(attack_spec(args, attack, target), args)
        try:
            ready = attacker.wait_ready(args.ramp + 10)
            pids = target.refresh_pids()
            cpu0 = targets.cpu_seconds(pids)
            outcomes = run_honest(args, target)
            cpu = targets.cpu_seconds(pids) - cpu0
            rss = targets.rss_kib(target.refresh_pids())
        finally:
            final = attacker.stop()
    result = {"attack": attack, "proxy": proxy, **summarize(outcomes),
              "proxy_cpu_s": cpu, "proxy_rss_mib": rss / 1024,
              "attack_ready": ready, "attack_end": final}
    return result


def progress(r):
    end = r["attack_end"]
    print(f"{r['attack']:14s} {r['proxy']:9s} ok {r['ok']}/{r['attempted']} "
          f"refused {r['refused_by_status'] or 0} errors {r['errors_by_kind'] or 0} "
          f"p99 {r['p99_ms']:.1f} ms max {r['max_ms']:.0f} ms ({r['over_100ms']} over 100 ms); "
          f"attackers held {end.get('held', 0)}/"
          f"{end.get('slots', 0)}, closed by the proxy {end.get('closed_by_proxy', 0)}, "
          f"ready after {r['attack_ready'].get('after_s', '-')} s",
          file=sys.stderr, flush=True)


# --- reporting (pure) -----------------------------------------------------------------------

def median_of(runs, key):
    values = [r[key] for r in runs if r[key] == r[key]]
    return statistics.median(values) if values else float("nan")


def counts(runs, key):
    total = collections.Counter()
    for r in runs:
        total.update(r[key])
    return ", ".join(f"{k}: {v}" for k, v in sorted(total.items())) or "-"


def fmt(value, spec="{:.0f}"):
    return "-" if value != value else spec.format(value)


def attack_table(attack, by_proxy, rounds):
    """The markdown table of one attack; BY_PROXY: proxy -> its runs."""
    note = f" (medians of {rounds} rounds; refusals and errors of all rounds)" if rounds > 1 else ""
    lines = [f"### {attack}{note}", "",
             "| proxy | honest attempted | ok | of them plain / TLS | refused | by status "
             "| errors | by kind | p99 ms (ok) | attackers held at end | closed by the proxy "
             "| proxy CPU s | proxy RSS MiB |",
             "|---" * 13 + "|"]
    for proxy, runs in by_proxy.items():
        ends = [r["attack_end"] for r in runs]
        held = statistics.median([e.get("held", 0) for e in ends]) if ends else 0
        slots = ends[0].get("slots", 0) if ends else 0
        closed = statistics.median([e.get("closed_by_proxy", 0) for e in ends]) if ends else 0
        lines.append(
            f"| {proxy} | {fmt(median_of(runs, 'attempted'))} | {fmt(median_of(runs, 'ok'))} "
            f"| {fmt(median_of(runs, 'ok_plain'))} / {fmt(median_of(runs, 'ok_tls'))} "
            f"| {fmt(median_of(runs, 'refused'))} | {counts(runs, 'refused_by_status')} "
            f"| {fmt(median_of(runs, 'errors'))} | {counts(runs, 'errors_by_kind')} "
            f"| {fmt(median_of(runs, 'p99_ms'), '{:.1f}')} | {held:.0f} / {slots} "
            f"| {closed:.0f} | {fmt(median_of(runs, 'proxy_cpu_s'), '{:.2f}')} "
            f"| {fmt(median_of(runs, 'proxy_rss_mib'), '{:.1f}')} |")
    return lines


def verdict(attack, by_proxy):
    """(line, met or None): floodgate's median ok against the better of the others'."""
    others = {p: median_of(runs, "ok") for p, runs in by_proxy.items() if p != "floodgate"}
    if "floodgate" not in by_proxy or not others:
        return f"{attack}: no comparison (needs floodgate and HAProxy or nginx)", None
    best = max(others, key=others.get)
    mine = median_of(by_proxy["floodgate"], "ok")
    met = mine >= others[best]
    return (f"{attack}: floodgate served {mine:.0f} honest requests, the better of "
            f"{' and '.join(others)} ({best}) {others[best]:.0f}: "
            f"{'met' if met else 'NOT met'} (target: floodgate >= the better)"), met


def report(args, results):
    lines = [f"Honest client: {args.honest_plain} plain + {args.honest_tls} TLS threads, "
             f"{'back to back' if args.honest_rate <= 0 else f'{args.honest_rate:g} req/s each'}"
             f", a new connection per request, {args.timeout:g} s budget, {args.duration:g} s "
             f"under each attack; slow readers: {args.slow_readers} x {args.large} bytes at "
             f"{args.read_rate} B/s (SO_RCVBUF {args.rcvbuf}); silent sockets: "
             f"{args.silent_tls} TLS + {args.silent_plain} plain; {os.cpu_count()} CPUs.", ""]
    verdicts = []
    for attack in args.attacks:
        by_proxy = {p: [r for r in results if r["attack"] == attack and r["proxy"] == p]
                    for p in args.proxies}
        lines += attack_table(attack, by_proxy, args.rounds) + [""]
        if attack != "baseline":
            verdicts.append(verdict(attack, by_proxy))
    lines += [v[0] for v in verdicts]
    failed = any(met is False for _, met in verdicts)
    return "\n".join(lines), failed


def write_results(args, results, table):
    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, "attack-" + time.strftime("%Y%m%d-%H%M%S") + ".txt")
    with open(path, "w") as f:
        f.write("# " + shlex.join([sys.executable] + sys.argv) + "\n")
        f.write("".join(f"# {line}\n" for line in compare.versions(args)) + "\n")
        for r in results:
            f.write(json.dumps(r) + "\n")
        f.write("\n" + table + "\n")
    return path


# --- main -----------------------------------------------------------------------------------

def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main():
    args = parse_args()
    targets.exit_on_signals()
    raise_nofile()
    needed = args.slow_readers + args.silent_tls + args.silent_plain + 100
    if needed > resource.getrlimit(resource.RLIMIT_NOFILE)[0]:
        sys.exit(f"the attackers need {needed} file descriptors: raise the hard limit")
    results = []
    for i in range(args.rounds):
        order = args.proxies[i % len(args.proxies):] + args.proxies[:i % len(args.proxies)]
        for attack in args.attacks:
            for proxy in order:
                results.append(run_one(args, attack, proxy))
                progress(results[-1])
    table, failed = report(args, results)
    print(table)
    print(f"\nraw results: {write_results(args, results, table)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
