#!/usr/bin/env python3
"""The distributed quota's benchmark (issue 16, docs/BENCHMARKS.md): what one quota policy costs a
request it admits, on Redis and on the in-memory backend, against no quota, and what Redis
sustains for floodgate's script.

It starts its own redis-server on a loopback ephemeral port (never the system service), then runs
bench/compare.py twice with one floodgate binary as both arms, interleaved round by round:
  1. one policy on Redis (floodgate) against no quota (floodgate-prev);
  2. the same policy on the in-memory backend against no quota.
The policy selects by a tenant header that wrk sends with every request (one hot key: the worst
case for Redis, every decision on one key) and has windows far above the benchmark's rate, so no
request is refused. compare.py reports requests/s, p50 and p99 latency and proxy CPU per request
of each arm: the differences are what the quota adds (the Redis round trip at p50 and p99).
Then redis-benchmark runs the script itself (EVALSHA, pipelined) for the decisions per second
one Redis core sustains, the figure behind docs/resilience.md's arithmetic for many instances.

Every option not listed here goes to compare.py (e.g. --duration, --rounds, --connections).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

POLICY = """
[[resilience.quota.policies]]
name = "bench"
selector = { route = true, tenant = { key = "header:x-tenant" } }
burst = { requests = 1000000000, window = "1s" }
sustained = { requests = 1000000000, window = "1h" }
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(port):
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--daemonize", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not redis_ping(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            sys.exit(f"redis-server did not start on port {port}")
        time.sleep(0.05)
    return proc


def quota_toml(backend):
    head = "[resilience.quota]\nenabled = true\nbackend_failure_policy = \"fail_open\"\n"
    return head + backend + POLICY


def script_throughput(port):
    """Decisions per second redis-benchmark gets through floodgate's script on this Redis."""
    script = quota_script_source()
    sha = subprocess.run(["redis-cli", "-p", str(port), "SCRIPT", "LOAD", script],
                         check=True, capture_output=True, text=True).stdout.strip()
    results = {}
    for pipeline in (1, 16):
        out = subprocess.run(
            ["redis-benchmark", "-p", str(port), "-n", "200000", "-c", "32", "-P", str(pipeline),
             "-q", "EVALSHA", sha, "2", "bench:{k}:burst", "bench:{k}:sustained",
             "1000000000", "1000", "1", "1000000000", "3600000", "2"],
            check=True, capture_output=True, text=True).stdout
        # "EVALSHA ...: 123456.79 requests per second, p50=0.111 msec" (the last report line)
        line = [l for l in out.replace("\r", "\n").splitlines() if "requests per second" in l][-1]
        results[pipeline] = float(line.split("requests per second")[0].split()[-1])
    return results


def quota_script_source():
    """The script floodgate loads, read from the source so the benchmark runs the same one."""
    path = os.path.join(REPO, "src", "proxy", "quota_stage.cpp")
    text = open(path).read()
    start = text.index('R"(', text.index("kScript")) + 3
    return text[start:text.index(')"', start)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--floodgate", default=os.path.join(REPO, "build-bench", "floodgate"))
    p.add_argument("--skip-compare", action="store_true",
                   help="only measure the script's throughput on Redis")
    args, rest = p.parse_known_args()
    port = free_port()
    redis = start_redis(port)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            arms = {
                "redis": quota_toml("[resilience.quota.backend]\nkind = \"redis\"\n"
                                    f"url = \"redis://127.0.0.1:{port}/0\"\n"),
                "in_memory": quota_toml(""),
            }
            if not args.skip_compare:
                for name, toml in arms.items():
                    path = os.path.join(tmp, name + ".toml")
                    with open(path, "w") as f:
                        f.write(toml)
                    print(f"== quota on {name} (floodgate) vs no quota (floodgate-prev)",
                          flush=True)
                    subprocess.run([sys.executable, os.path.join(REPO, "bench", "compare.py"),
                                    "--floodgate", args.floodgate,
                                    "--floodgate-prev", args.floodgate,
                                    "--targets", "floodgate", "--idle", "0",
                                    "--floodgate-extra", path, "--header", "X-Tenant: acme",
                                    *rest], check=True)
            throughput = script_throughput(port)
            print("== floodgate's script on this Redis (redis-benchmark, 32 clients, one key)")
            for pipeline, rate in sorted(throughput.items()):
                print(f"pipeline {pipeline:2d}: {rate:,.0f} decisions/s")
    finally:
        redis.kill()
        redis.wait()


if __name__ == "__main__":
    main()
