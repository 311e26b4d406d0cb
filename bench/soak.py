#!/usr/bin/env python3
"""Soak: floodgate under steady load and churn for N minutes, watching for slow leaks.

For the whole run:
  - wrk -t1 -c32 through floodgate (2 workers) to two loopback nginx backends, in 10-second
    segments so errors are seen over time;
  - SIGHUP every 10 s, alternating two valid configurations (a new generation each time);
  - every 30 s one backend is killed (SIGKILL of its process group) and restarted 10 s later,
    the two in turn; [upstreams.health] probes route around the dead one;
  - a slowloris set: 200 connections trickling a head one field a second (floodgate's
    header_timeout answers 408 and closes; they reconnect).
Every second it samples floodgate's RSS (/proc/PID/status), open fds (/proc/PID/fd) and
/metrics (heap allocated, floodgate_memory_allocated_bytes, and what of it the buffer pools
hold, floodgate_buffer_bytes); it prints a table every 10 s and a verdict at the end. The heap
outside the buffer pools is the leak detector to read: it stays flat when nothing leaks.

Fails (exit 1) when:
  - RSS grew more than 2% from the end of warm-up (the first 30 s, through the first backend
    kill and restart, or the first fifth of a longer run) to the end of the load (medians of
    the last 10 s of each: the buffer pools give idle blocks back every 10 s, so RSS follows
    the load's concurrency up and down within that period), beyond what the buffer pools grew
    by between the two: their blocks are the load's concurrency (bounded by
    server.max_buffers_per_reactor, and given back when it falls), not a leak, and a short run
    can end on a busier moment than its warm-up did (the growth is printed either way);
  - buffer blocks stay lent out once the load has stopped and every connection has closed (a
    leak inside the pools, which the rule above does not see);
  - fds leak: after the load stops, the slowloris set closes and pooled connections expire
    (keepalive_timeout 2s), floodgate holds more fds than before the load (polled);
  - a request that could succeed failed. With health checks, a request may fail only for a
    reason a backend being killed explains, while it is explained: 502 upstream_connect_failed
    or upstream_reset and wrk socket errors within the detection window after a kill
    (fall x interval + timeout + 1 s), and 503 no_healthy_backend (never expected here: one
    backend is always up). Everything else counts: any other generated 5xx or 4xx (the
    slowloris 408s excepted), and any failure outside a kill's window.

Usage: python3 bench/soak.py [--minutes 10] [--floodgate build/floodgate] [--connections 32]
"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import targets  # noqa: E402
from harness import Floodgate, render_toml  # noqa: E402

SEGMENT = 10        # seconds per wrk run and per table row
RELOAD_EVERY = 10
KILL_EVERY = 30
DOWN_FOR = 10
TRIM_PERIOD = 10    # seconds: floodgate frees buffer blocks that stayed idle this long
SLOWLORIS = 200
HEALTH = {"path": "/healthz", "interval": "500ms", "timeout": "300ms", "fall": 2, "rise": 1}
DETECTION = 2 * 0.5 + 0.3 + 1.0  # fall x interval + timeout + slack
EXCUSED = {"upstream_connect_failed", "upstream_reset", "no_healthy_backend"}
EXPECTED = {"header_timeout"}  # the slowloris set's 408s


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--floodgate", default=os.path.join(HERE, "..", "build", "floodgate"))
    p.add_argument("--connections", type=int, default=32)
    return p.parse_args()


class NginxBackend:
    def __init__(self, root, index):
        self.dir = os.path.join(root, "backend%d" % index)
        os.makedirs(self.dir)
        os.chmod(self.dir, 0o755)  # nginx workers run as nobody when started by root
        self.port = targets.unused_port()
        self.address = "127.0.0.1:%d" % self.port
        self.argv = targets.write_config("backend", self.dir, self.port, 0)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while not targets.http_get_ok(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError("nginx backend on %d did not start" % self.port)
            time.sleep(0.05)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        # The orphaned worker dies with the group; wait until the port is free again.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.05)


class Slowloris(threading.Thread):
    """SLOWLORIS connections, each sending one more header field a second, never finishing."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stopping = threading.Event()
        self.socks = []
        self.reopened = 0

    def _open(self):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        return [s, False]

    def run(self):
        self.socks = [self._open() for _ in range(SLOWLORIS)]
        while not self.stopping.wait(1.0):  # pacing: one field per connection per second
            for entry in self.socks:
                s, started = entry
                try:
                    s.send(b"X-Slow: 1\r\n" if started else b"GET /slow HTTP/1.1\r\nHost: a\r\n")
                    entry[1] = True
                    s.recv(4096)  # a 408 (or EOF) ends this one
                    raise OSError("answered")
                except BlockingIOError:
                    continue
                except OSError:
                    s.close()
                    entry[:] = self._open()
                    self.reopened += 1
        for s, _ in self.socks:
            s.close()


class WrkLoop(threading.Thread):
    """wrk in SEGMENT-second runs until stopped; each run's counts are kept."""

    def __init__(self, port, connections):
        super().__init__(daemon=True)
        self.port, self.connections = port, connections
        self.stopping = threading.Event()
        self.segments = []  # (start, end, requests, non2xx, socket_errors)

    def run(self):
        while not self.stopping.is_set():
            start = time.monotonic()
            out = subprocess.run(["wrk", "-t1", "-c%d" % self.connections, "-d%ds" % SEGMENT,
                                  "http://127.0.0.1:%d/" % self.port],
                                 capture_output=True, text=True).stdout
            self.segments.append((start, time.monotonic()) + parse_wrk(out))


def parse_wrk(text):
    requests = non2xx = errors = 0
    for line in text.splitlines():
        line = line.strip()
        if "requests in" in line:
            requests = int(line.split()[0])
        elif line.startswith("Non-2xx or 3xx responses:"):
            non2xx = int(line.split(":")[1])
        elif line.startswith("Socket errors:"):
            errors = sum(int(part.split()[1]) for part in line.split(":", 1)[1].split(","))
    return requests, non2xx, errors


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def generated(m):
    return {labels["reason"]: v for name, labels, v in m.samples
            if name == "floodgate_responses_generated_total"}


def allocated_bytes(m):
    """Heap bytes floodgate has allocated (glibc, all threads)."""
    return sum(v for name, _, v in m.samples if name == "floodgate_memory_allocated_bytes")


def buffer_bytes(m):
    """Bytes floodgate's buffer pools hold (lent out and kept free), all reactors."""
    return sum(v for name, _, v in m.samples if name == "floodgate_buffer_bytes")


def in_use_blocks(m):
    """Buffer blocks the reactors have lent out (to requests in progress), all pools."""
    return sum(v for name, labels, v in m.samples
               if name == "floodgate_buffer_blocks" and labels.get("state") == "in_use")


def upstreams(backends, keepalive):
    return [{"name": "app", "servers": [b.address for b in backends], "balance": "round_robin",
             "connect_timeout": "1s", "response_timeout": "5s", "keepalive": keepalive,
             "keepalive_timeout": "2s", "health": HEALTH}]


def main():
    args = parse_args()
    os.environ["FLOODGATE_BIN"] = os.path.abspath(args.floodgate)  # what harness.Floodgate runs
    duration = args.minutes * 60
    # Warm-up lasts until every kind of event has happened once (the first kill and restart of
    # a backend come 15-25 s in: the first connect failures, health transitions and log
    # lines allocate what they need then), or the first fifth of a longer run.
    warmup = max(KILL_EVERY / 2 + DOWN_FOR + 5, duration / 5)
    root = tempfile.mkdtemp(prefix="floodgate-soak-")
    backends = [NginxBackend(root, i) for i in range(2)]
    for b in backends:
        b.start()
    fg = Floodgate(upstreams(backends, 32), workers=2, log={"access_log": "off", "level": "warn"})
    fg.upstreams = upstreams(backends, 32)
    fg.start()
    pid = fg.proc.pid
    problems = []
    try:
        time.sleep(1.0)  # pacing: let the first health probes settle before the baseline
        fds_before = fds(pid)
        wrk, loris = WrkLoop(fg.port, args.connections), Slowloris(fg.port)
        wrk.start()
        loris.start()
        t0 = time.monotonic()
        samples, kills, last_gen = [], [], generated(fg.metrics())
        down, next_reload, next_kill, victim, reloads = None, RELOAD_EVERY, KILL_EVERY / 2, 0, 0
        print("%6s %9s %9s %9s %5s %9s %8s %7s %s" % (
            "t(s)", "RSS(MiB)", "heap(MiB)", "buf(MiB)", "fds", "req/s", "non2xx", "sockerr",
            "generated since last row"))
        row_gen = dict(last_gen)
        while True:
            t = time.monotonic() - t0
            if t >= duration:
                break
            if t >= next_reload:
                keep = 32 if reloads % 2 else 16
                fg.upstreams = upstreams(backends, keep)
                with open(fg.config_path, "w") as f:
                    f.write(render_toml(fg.config()))
                fg.signal(signal.SIGHUP)
                reloads += 1
                next_reload += RELOAD_EVERY
            if down is None and t >= next_kill:
                backends[victim].kill()
                kills.append(time.monotonic())
                down, next_kill = (victim, t + DOWN_FOR), next_kill + KILL_EVERY
                victim = 1 - victim
            if down is not None and t >= down[1]:
                backends[down[0]].start()
                down = None
            m = fg.metrics()
            gen = generated(m)
            now = time.monotonic()
            samples.append((now - t0, rss_kib(pid), fds(pid), buffer_bytes(m), allocated_bytes(m)))
            for reason, v in gen.items():
                delta = v - last_gen.get(reason, 0)
                if delta <= 0 or reason in EXPECTED:
                    continue
                explained = reason in EXCUSED and any(k <= now and now - 1.0 <= k + DETECTION
                                                      for k in kills)
                if not explained:
                    problems.append("t=%.0fs: %d x %s not explained by a killed backend"
                                    % (now - t0, delta, reason))
            last_gen = gen
            if len(samples) % SEGMENT == 0:
                seg = wrk.segments[-1] if wrk.segments else (0, 1, 0, 0, 0)
                moved = {r: int(v - row_gen.get(r, 0)) for r, v in gen.items()
                         if v - row_gen.get(r, 0) > 0}
                row_gen = dict(gen)
                print("%6.0f %9.1f %9.1f %9.1f %5d %9.0f %8d %7d %s" % (
                    now - t0, samples[-1][1] / 1024, samples[-1][4] / 2**20,
                    samples[-1][3] / 2**20, samples[-1][2],
                    seg[2] / max(seg[1] - seg[0], 1e-9), seg[3], seg[4],
                    " ".join("%s=%d" % kv for kv in sorted(moved.items())) or "-"), flush=True)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))  # pacing: one sample a second
        wrk.stopping.set()
        loris.stopping.set()
        wrk.join(SEGMENT + 15)
        loris.join(10)
        if down is not None:
            backends[down[0]].start()
        # RSS: warm-up end vs load end.
        window = [s for s in samples if warmup - TRIM_PERIOD <= s[0] <= warmup] or samples[:1]
        last = samples[-TRIM_PERIOD:]
        base = statistics.median(s[1] for s in window)
        end = statistics.median(s[1] for s in last)
        pools = max(0.0, statistics.median(s[3] for s in last)
                    - statistics.median(s[3] for s in window)) / 1024
        growth = (end - base) / base * 100
        beyond = (end - base - pools) / base * 100
        print("RSS: %.1f MiB after warm-up (%.0fs), %.1f MiB at the end: %+.2f%%; the buffer "
              "pools grew %.2f MiB: %+.2f%% beyond them"
              % (base / 1024, warmup, end / 1024, growth, pools / 1024, beyond))
        # The heap outside the buffer pools: flat unless something leaks (reported, not judged:
        # the two figures are read a moment apart, so it moves by a few buffer blocks).
        other = [statistics.median(s[4] - s[3] for s in w) for w in (window, last)]
        print("heap outside the buffer pools: %.2f MiB after warm-up, %.2f MiB at the end"
              % (other[0] / 2**20, other[1] / 2**20))
        if beyond > 2.0:
            problems.append("RSS grew %.2f%% after warm-up beyond the buffer pools' growth "
                            "(limit 2%%)" % beyond)
        # wrk: socket errors and non-2xx outside the kill windows.
        total = sum(s[2] for s in wrk.segments)
        for start, stop, _, non2xx, errors in wrk.segments:
            killed = any(start - DETECTION <= k <= stop for k in kills)
            if (non2xx or errors) and not killed:
                problems.append("wrk segment at t=%.0fs: %d non-2xx, %d socket errors, no kill"
                                % (start - t0, non2xx, errors))
        print("wrk: %d requests in %d segments; %d non-2xx, %d socket errors; %d reloads, "
              "%d kills, %d slowloris reconnects" % (
                  total, len(wrk.segments), sum(s[3] for s in wrk.segments),
                  sum(s[4] for s in wrk.segments), reloads, len(kills), loris.reopened))
        # fds: back to where they were once connections close and pooled ones expire.
        deadline = time.monotonic() + 15
        after = fds(pid)
        while after > fds_before and time.monotonic() < deadline:
            time.sleep(0.2)  # polling with a deadline
            after = fds(pid)
        print("fds: %d before the load, %d after" % (fds_before, after))
        lent = in_use_blocks(fg.metrics())
        print("buffer blocks lent out after the load: %d" % lent)
        if after <= fds_before and lent:
            problems.append("%d buffer blocks still lent out with every connection closed" % lent)
        if after > fds_before:
            problems.append("fd leak: %d fds before the load, %d after" % (fds_before, after))
        if fg.proc.poll() is not None:
            problems.append("floodgate exited with %s" % fg.proc.returncode)
    finally:
        if fg.proc.poll() is not None or problems:
            print("--- floodgate stderr (tail) ---\n" + fg.stderr_tail(30))
        rc = fg.stop()
        fg.cleanup()
        for b in backends:
            b.kill()
        if rc not in (0, None):
            problems.append("floodgate exited %s after SIGTERM" % rc)
    for p in problems[:40]:
        print("FAIL:", p)
    print("soak: %s" % ("FAILED" if problems else "passed"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
