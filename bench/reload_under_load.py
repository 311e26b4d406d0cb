#!/usr/bin/env python3
"""Reload under load: wrk at full speed through floodgate while floodgate is reloaded N times
(SIGHUP, alternating two valid files), against a run of the same length without reloads.

Checks, and exits 1 if any fails:
  - zero non-2xx/3xx responses and zero socket errors in the run with reloads;
  - every reload activated a new generation (GET /config ends at N + 1);
  - a WebSocket tunnel opened before the first reload still echoes after the last.
Prints wrk's requests/s and p50/p99 for both runs.

The two files differ in what a reload can change: a second route and pool, the balancer and
keep-alive settings. The tunnel goes to a small Python echo backend (tests/integration's
test backend) on its own route; the load goes to the same loopback nginx backend as
compare.py.

Usage: python3 bench/reload_under_load.py [--floodgate build-bench/floodgate] [--reloads 50]
                                          [--duration 10] [--connections 64]
"""

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import compare  # noqa: E402
import targets  # noqa: E402
from backend import Backend  # noqa: E402


def floodgate_toml(port, admin, backend_port, ws_port, variant):
    """Variant 0 and 1 are both valid and differ in routes, pools and policies."""
    extra_pool = "" if variant == 0 else """
[[upstreams]]
name = "spare"
servers = ["127.0.0.1:%d"]
balance = "least_active"
""" % backend_port
    extra_route = "" if variant == 0 else """
[[routes]]
host = "*"
path_prefix = "/spare"
upstream = "spare"
"""
    return f"""[server]
listen = ["127.0.0.1:{port}"]
workers = 1
idle_timeout = "60s"

[admin]
listen = "127.0.0.1:{admin}"

[log]
level = "warn"
access_log = "off"

[[upstreams]]
name = "backend"
servers = ["127.0.0.1:{backend_port}"]
balance = "{'round_robin' if variant == 0 else 'p2c'}"
keepalive = {64 if variant == 0 else 128}
keepalive_timeout = "60s"

[[upstreams]]
name = "ws"
servers = ["127.0.0.1:{ws_port}"]
{extra_pool}
[[routes]]
host = "*"
path_prefix = "/"
upstream = "backend"

[[routes]]
host = "*"
path_prefix = "/ws"
upstream = "ws"
{extra_route}"""


def wrk(port, duration, connections):
    """wrk's figures, parsed like compare.py's; "errors" counts socket errors and non-2xx/3xx."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency",
                          f"http://127.0.0.1:{port}/"], capture_output=True, text=True,
                         check=True).stdout
    return compare.parse_wrk(out)


def open_tunnel(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(b"0123456789abcdef").decode()
    s.sendall((f"GET /ws HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError("tunnel closed during the upgrade")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError("no 101: %r" % head[:100])
    return s


def echoes(s, payload):
    s.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = s.recv(4096)
        if not chunk:
            return False
        got += chunk
    return got == payload


def generation(admin):
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/config", timeout=5) as r:
        return json.load(r)["generation"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--floodgate", default=os.path.join(HERE, "..", "build", "floodgate"))
    p.add_argument("--reloads", type=int, default=50)
    p.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    p.add_argument("--connections", type=int, default=64)
    args = p.parse_args()

    stack = targets.Stack()
    ws = Backend("ws").start()
    fg = None
    try:
        backend = stack.start("backend")
        port = targets.unused_port({backend.port})
        admin = targets.unused_port({backend.port, port})
        path = os.path.join(stack.dir, "floodgate.toml")
        files = [floodgate_toml(port, admin, backend.port, ws.port, v) for v in (0, 1)]
        with open(path, "w") as f:
            f.write(files[0])
        fg = subprocess.Popen([args.floodgate, "-c", path], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(stack.dir, "floodgate.out"), "w"))
        deadline = time.monotonic() + 15
        while not targets.http_get_ok(port):
            if fg.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("floodgate did not start")
            time.sleep(0.05)
        wrk(port, 2, args.connections)  # warm-up
        quiet = wrk(port, args.duration, args.connections)

        tunnel = open_tunnel(port)
        tunnel_before = echoes(tunnel, b"before-reloads")
        start_generation = generation(admin)
        load = subprocess.Popen(["python3", "-c", "import sys; sys.path.insert(0, %r)\n"
                                 "import reload_under_load as r, json\n"
                                 "print(json.dumps(r.wrk(%d, %d, %d)))"
                                 % (HERE, port, args.duration, args.connections)],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        interval = max(0.01, (args.duration - 1.5) / args.reloads)
        for i in range(args.reloads):
            with open(path + ".new", "w") as f:
                f.write(files[(i + 1) % 2])
            os.replace(path + ".new", path)  # atomic: floodgate never reads half a file
            fg.send_signal(signal.SIGHUP)
            time.sleep(interval)
        reloaded = json.loads(load.communicate()[0])
        deadline = time.monotonic() + 10
        while generation(admin) < start_generation + args.reloads and time.monotonic() < deadline:
            time.sleep(0.05)
        end_generation = generation(admin)
        tunnel_after = echoes(tunnel, b"after-%d-reloads" % args.reloads)
        tunnel.close()
    finally:
        if fg is not None and fg.poll() is None:
            fg.send_signal(signal.SIGTERM)
            fg.wait(30)
        ws.stop()
        stack.stop()

    print(f"wrk -t1 -c{args.connections} -d{args.duration}s, floodgate 1 worker, "
          f"{args.reloads} SIGHUP reloads alternating two files")
    print("| run | req/s | p50 ms | p99 ms | errors (non-2xx/3xx + socket) |")
    print("|---|---|---|---|---|")
    for name, r in (("no reloads", quiet), (f"{args.reloads} reloads", reloaded)):
        print(f"| {name} | {r['rps']:.0f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | "
              f"{r['errors']} |")
    print(f"generations: {start_generation} -> {end_generation}; "
          f"tunnel echoes before: {tunnel_before}, after: {tunnel_after}")
    ok = (reloaded["errors"] == 0 and tunnel_before
          and tunnel_after and end_generation == start_generation + args.reloads)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
