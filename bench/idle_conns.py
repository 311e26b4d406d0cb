#!/usr/bin/env python3
"""RSS per idle keep-alive client connection of a running proxy.

Opens COUNT keep-alive connections to HOST:PORT, sends one small GET on each and reads the
whole response, then leaves them all open and idle. Reports the proxy's resident memory
(VmRSS from /proc/PID/status, summed over the given PIDs) before and after, and the difference
divided by the connections still open: KiB per idle connection. Kernel socket buffers are not
part of VmRSS, so this is the proxy's own per-connection state (buffers, parser, timers...).

File descriptors: this script raises its own soft RLIMIT_NOFILE to the hard limit and needs
COUNT + 50. The proxy needs as many as well, and must get them at start: floodgate raises its
soft limit to the hard limit itself; nginx needs worker_rlimit_nofile and worker_connections;
HAProxy derives its fd limit from maxconn (targets.py configures all three from the hard
limit). If the hard limit is too low, raise it before starting the proxies, e.g. as root in CI
`ulimit -n 65536` in the shell that starts them and this script.

Example: python3 bench/idle_conns.py --port 8080 --pid $(pidof floodgate) --count 10000
"""

import argparse
import json
import os
import resource
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import targets  # noqa: E402  (rss_kib, process_tree)

REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: idle_conns\r\n\r\n"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, action="append", required=True,
                   help="proxy process to measure; repeat for several; its descendants "
                        "(e.g. nginx workers) are included")
    p.add_argument("--count", type=int, default=10000, help="connections (default 10000)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds to wait before each RSS reading (default 2)")
    p.add_argument("--json", action="store_true", help="also print one JSON line at the end")
    return p.parse_args()


def raise_nofile(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(f"need {needed} file descriptors, hard limit is {hard}: "
                 "raise it (as root: ulimit -n 65536) or lower --count")
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def read_response(sock):
    """Reads one response with a Content-Length or chunked body; returns the status code."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if "content-length" in headers:
        done = lambda b: len(b) >= int(headers["content-length"])  # noqa: E731
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        done = lambda b: b.endswith(b"0\r\n\r\n")  # noqa: E731
    else:
        raise ConnectionError("response without Content-Length or chunked body")
    while not done(body):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        body += chunk
    return status


def open_idle(args):
    socks, failures = [], 0
    started = time.monotonic()
    for i in range(args.count):
        try:
            s = socket.create_connection((args.host, args.port), timeout=10)
            s.sendall(REQUEST)
            status = read_response(s)
            if status != 200:
                raise ConnectionError(f"status {status}")
            socks.append(s)
        except OSError as e:
            failures += 1
            if failures in (1, 10, 100):
                print(f"connection {i}: {e}", file=sys.stderr)
            if failures >= 100:
                break
        if (i + 1) % 2000 == 0:
            print(f"  {i + 1} connections open", file=sys.stderr)
    return socks, failures, time.monotonic() - started


def still_open(socks):
    """Sockets the proxy has not closed: nothing readable (no EOF, no stray data)."""
    poller = select.poll()
    for s in socks:
        poller.register(s, select.POLLIN | select.POLLRDHUP)
    return len(socks) - len(poller.poll(0))


def fd_count(pids):
    n = 0
    for pid in pids:
        try:
            n += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return n


def main():
    args = parse_args()
    raise_nofile(args.count + 50)
    pids = sorted({p for pid in args.pid for p in targets.process_tree(pid)})
    with socket.create_connection((args.host, args.port), timeout=10) as s:  # warm-up
        s.sendall(REQUEST)
        read_response(s)
    time.sleep(args.settle)
    before, fds_before = targets.rss_kib(pids), fd_count(pids)
    socks, failures, seconds = open_idle(args)
    time.sleep(args.settle)
    after, fds_after = targets.rss_kib(pids), fd_count(pids)
    open_now = still_open(socks)
    result = {"connections": len(socks), "still_open": open_now, "failures": failures,
              "open_seconds": round(seconds, 2), "rss_before_kib": before,
              "rss_after_kib": after, "proxy_fds_added": fds_after - fds_before,
              "kib_per_conn": round((after - before) / max(open_now, 1), 3)}
    print(f"pids {pids}: {len(socks)} connections opened in {seconds:.1f}s "
          f"({failures} failed), {open_now} still open, proxy fds +{fds_after - fds_before}")
    print(f"VmRSS {before} KiB -> {after} KiB: {result['kib_per_conn']:.2f} KiB "
          f"per idle connection")
    if args.json:
        print(json.dumps(result))
    for s in socks:
        s.close()
    return 0 if failures == 0 and open_now == len(socks) else 1


if __name__ == "__main__":
    sys.exit(main())
