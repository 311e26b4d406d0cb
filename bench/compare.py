#!/usr/bin/env python3
"""Compares floodgate with HAProxy, nginx and the backend reached directly, in ONE run.

All targets sit in front of the same loopback nginx backend (targets.py holds the configs).
Rounds are interleaved: every round runs `wrk -t1 -cC -dD --latency` once against each target,
and the order rotates each round, so drift on a noisy machine hits every target alike.
For each (round, target) it records requests/s, p50 and p99 latency, and the CPU the proxy
(and the backend) spent per completed request: the utime+stime delta from /proc/PID/stat over
the wrk run, summed over the proxy's processes and threads, divided by wrk's request count.
Then (unless --idle 0) it measures the RSS per idle keep-alive client connection of each proxy
with idle_conns.py.

With --tls the proxies' client side speaks TLS (one ECDSA P-256 certificate, TLS 1.3 as wrk
negotiates it; targets.py) and wrk connects with https. --new-connections makes every request
open a new connection (Connection: close), so with --tls each one is a full handshake: the CPU
per request is then the CPU per handshake. --flood N runs a second wrk of N connections that
each make one request and close (with --tls: a full handshake flood) against the same target
during every measured run; the measured run's latency is then that of the established
connections under the flood (the flood's own figures are reported separately).

Prints a markdown table of medians across rounds and the floodgate/HAProxy ratios, and writes
raw per-round numbers to bench/results/<timestamp>.txt. Run with --help for the options; each
one can also come from the environment variable named in its help.
"""

import argparse
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time

import targets

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}   # wrk latency units -> ms


def env(name, default):
    return os.environ.get(name, default)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=int, default=int(env("DURATION", 10)),
                   help="seconds per wrk run (DURATION, default 10)")
    p.add_argument("--rounds", type=int, default=int(env("ROUNDS", 5)),
                   help="interleaved rounds (ROUNDS, default 5)")
    p.add_argument("--connections", type=int, default=int(env("CONNECTIONS", 64)),
                   help="wrk keep-alive connections (CONNECTIONS, default 64)")
    p.add_argument("--floodgate",
                   default=env("FLOODGATE", os.path.join(REPO, "build", "floodgate")),
                   help="floodgate binary (FLOODGATE, default build/floodgate of this "
                        "checkout); if it does not exist floodgate is reported as pending")
    p.add_argument("--floodgate-prev", default=env("FLOODGATE_PREV", ""),
                   help="a previous floodgate binary (FLOODGATE_PREV): adds the target "
                        "floodgate-prev, measured in the same rounds, and the new/previous "
                        "ratios")
    p.add_argument("--targets", default=env("TARGETS", ",".join(targets.PROXIES + ("direct",))),
                   help="comma-separated subset of " + ",".join(targets.TARGETS) + " (TARGETS)")
    p.add_argument("--warmup", type=int, default=int(env("WARMUP", 2)),
                   help="seconds of unmeasured wrk per target before round 1 (WARMUP, default 2)")
    p.add_argument("--idle", type=int, default=int(env("IDLE_CONNS", 10000)),
                   help="idle connections per proxy for the RSS test, 0 to skip "
                        "(IDLE_CONNS, default 10000)")
    p.add_argument("--forward-headers", action="store_true",
                   default=env("FORWARD_HEADERS", "") not in ("", "0"),
                   help="make HAProxy and nginx add X-Forwarded-*, Via and X-Request-Id like "
                        "floodgate does (FORWARD_HEADERS=1)")
    p.add_argument("--pin-proxy", default=env("PIN_PROXY", ""),
                   help="taskset -c CPU list for the proxies (PIN_PROXY; default: no pinning)")
    p.add_argument("--pin-backend", default=env("PIN_BACKEND", ""),
                   help="taskset -c CPU list for the backend (PIN_BACKEND)")
    p.add_argument("--pin-wrk", default=env("PIN_WRK", ""),
                   help="taskset -c CPU list for wrk (PIN_WRK)")
    p.add_argument("--floodgate-extra", default=env("FLOODGATE_EXTRA", ""),
                   help="a TOML file appended to floodgate's configuration (FLOODGATE_EXTRA), "
                        "e.g. rate limit rules; with --floodgate-prev naming the same binary, "
                        "measures what the tables cost")
    p.add_argument("--floodgate-prev-extra", default=env("FLOODGATE_PREV_EXTRA", ""),
                   help="the same for floodgate-prev (FLOODGATE_PREV_EXTRA)")
    p.add_argument("--header", action="append", default=[],
                   help="a header line wrk sends with every request (repeatable), e.g. "
                        "'X-Tenant: acme'")
    p.add_argument("--tls", action="store_true", default=env("TLS", "") not in ("", "0"),
                   help="the proxies listen with TLS and wrk uses https (TLS=1); excludes "
                        "the direct target")
    p.add_argument("--new-connections", action="store_true",
                   default=env("NEW_CONNECTIONS", "") not in ("", "0"),
                   help="one request per connection, Connection: close (NEW_CONNECTIONS=1)")
    p.add_argument("--flood", type=int, default=int(env("FLOOD", 0)),
                   help="connections of a one-request-per-connection wrk run alongside every "
                        "measured run (FLOOD, default 0: none)")
    p.add_argument("--results-dir", default=env("RESULTS_DIR", os.path.join(HERE, "results")),
                   help="where the raw results file goes (RESULTS_DIR)")
    args = p.parse_args()
    args.targets = [t for t in args.targets.split(",") if t]
    if args.floodgate_prev and "floodgate-prev" not in args.targets:
        args.targets.append("floodgate-prev")
    if args.tls:
        args.targets = [t for t in args.targets if t != "direct"]
        args.idle = 0           # idle_conns.py speaks plain HTTP
    unknown = set(args.targets) - set(targets.TARGETS)
    if unknown:
        p.error(f"unknown targets: {', '.join(sorted(unknown))}")
    return args


# --- one measurement ------------------------------------------------------------------------

def parse_wrk(text):
    def latency(pct):
        m = re.search(rf"^\s*{pct}%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M)
        return float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m)", text, re.M)
    if not m:
        raise RuntimeError("cannot parse wrk output:\n" + text)
    requests, seconds = int(m.group(1)), float(m.group(2)) * UNITS[m.group(3)] / 1e3
    errors = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        errors += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        errors += int(m.group(1))
    return {"requests": requests, "rps": requests / seconds, "p50_ms": latency(50),
            "p99_ms": latency(99), "errors": errors}


def host_cpu():
    """(busy, steal, total) jiffies of the whole host, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    steal = v[7] if len(v) > 7 else 0
    total = sum(v[:8])
    return total - idle - steal, steal, total


def wrk_command(args, port, duration, connections, close=False):
    headers = list(args.header) + (["Connection: close"] if close else [])
    scheme = "https" if args.tls else "http"
    return (["taskset", "-c", args.pin_wrk] if args.pin_wrk else []) + [
        "wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency",
        *[a for h in headers for a in ("-H", h)], f"{scheme}://127.0.0.1:{port}/"]


def run_wrk(args, port, duration):
    cmd = wrk_command(args, port, duration, args.connections, args.new_connections)
    flood = None
    if args.flood > 0:
        # Started first and given a second to build up; it runs a second past the measured run.
        flood = subprocess.Popen(wrk_command(args, port, duration + 2, args.flood, close=True),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    if flood is not None:
        flood_out, _ = flood.communicate(timeout=duration + 60)
        f = parse_wrk(flood_out)
        print(f"  flood: {f['rps']:.0f} conn/s p99 {f['p99_ms']:.3f} ms errors {f['errors']}",
              file=sys.stderr, flush=True)
    if out.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def measure(args, stack, name):
    target = stack.targets[name]
    backend = stack.targets["backend"]
    proxy_pids, backend_pids = target.refresh_pids(), backend.refresh_pids()
    split0, backend0, wrk0, host0, t0 = (
        targets.cpu_split(proxy_pids), targets.cpu_seconds(backend_pids), children_cpu(),
        host_cpu(), time.monotonic())
    result = parse_wrk(run_wrk(args, target.port, args.duration))
    split1, backend1, wrk1, host1, t1 = (
        targets.cpu_split(proxy_pids), targets.cpu_seconds(backend_pids), children_cpu(),
        host_cpu(), time.monotonic())
    n = max(result["requests"], 1)
    user, system = split1[0] - split0[0], split1[1] - split0[1]
    proxy, backend = user + system, backend1 - backend0
    nan = float("nan")
    result["proxy_cpu_us"] = proxy * 1e6 / n if proxy_pids else nan
    # The same figure split into user and kernel time: on loopback the kernel's share (the
    # socket calls, and the peer's TCP input and wake-up that a send runs) is most of it.
    result["proxy_user_us"] = user * 1e6 / n if proxy_pids else nan
    result["proxy_sys_us"] = system * 1e6 / n if proxy_pids else nan
    result["backend_cpu_us"] = backend * 1e6 / n
    total = max(host1[2] - host0[2], 1)
    result["steal_pct"] = 100.0 * (host1[1] - host0[1]) / total
    # CPUs kept busy by processes outside the benchmark: a round with a high figure is suspect.
    busy = (host1[0] - host0[0]) / targets.CLK_TCK
    result["others_cpus"] = max(busy - proxy - backend - (wrk1 - wrk0), 0.0) / (t1 - t0)
    return result


def children_cpu():
    """utime+stime of the waited-for children of this script (wrk), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# --- reporting ------------------------------------------------------------------------------

COLUMNS = [("rps", "req/s", "{:.0f}"), ("p50_ms", "p50 ms", "{:.3f}"),
           ("p99_ms", "p99 ms", "{:.3f}"), ("proxy_cpu_us", "proxy CPU us/req", "{:.2f}"),
           ("proxy_user_us", "of it user", "{:.2f}"), ("proxy_sys_us", "of it kernel", "{:.2f}"),
           ("backend_cpu_us", "backend CPU us/req", "{:.2f}"), ("errors", "errors", "{:.0f}")]


def median(rounds, name, key):
    values = [r[name][key] for r in rounds if name in r and r[name][key] == r[name][key]]
    return statistics.median(values) if values else float("nan")


def fmt(spec, value):
    return "-" if value != value else spec.format(value)


def summary(args, rounds, names, idle, pending):
    lines = [f"Medians of {len(rounds)} interleaved rounds, wrk -t1 -c{args.connections} "
             f"-d{args.duration}s, "
             + ("a new connection per request" if args.new_connections else "keep-alive")
             + (", TLS" if args.tls else "")
             + (f", during a flood of {args.flood} one-request connections" if args.flood else "")
             + f", {os.cpu_count()} CPUs"
             + (", forward headers on" if args.forward_headers else "") + ".", "",
             "| target | " + " | ".join(c[1] for c in COLUMNS) + " | idle KiB/conn |",
             "|---" * (len(COLUMNS) + 2) + "|"]
    for name in names:
        if name in pending:
            lines.append(f"| {name} | " + " | ".join("pending" for _ in COLUMNS) + " | pending |")
            continue
        cells = [fmt(spec, median(rounds, name, key)) for key, _, spec in COLUMNS]
        kib = idle.get(name, {}).get("kib_per_conn", float("nan"))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {fmt('{:.2f}', kib)} |")
    others = [r[n]["others_cpus"] for r in rounds for n in r]
    if others:
        lines += ["", f"CPU used by other processes during the runs: median "
                      f"{statistics.median(others):.2f}, max {max(others):.2f} CPUs "
                      f"(of {os.cpu_count()})."]
    if "floodgate" in names and "haproxy" in names and "floodgate" not in pending:
        lines += [""] + ratio_lines(rounds, idle)
    if "floodgate" in names and "floodgate-prev" in names and not pending & set(targets.FLOODGATES):
        lines += [""] + ratio_lines(rounds, {}, "floodgate-prev", "floodgate/previous",
                                    ("", "", ""))
    return "\n".join(lines)


def ratio_lines(rounds, idle, other="haproxy", title="floodgate/HAProxy",
                goals=("target <= 0.80", "target >= 1.00", "target <= 1.00")):
    lines = []
    for (key, label), goal in zip((("proxy_cpu_us", "CPU per request"), ("rps", "requests/s"),
                                   ("p99_ms", "p99 latency")), goals):
        ratio = median(rounds, "floodgate", key) / median(rounds, other, key)
        per_round = [r["floodgate"][key] / r[other][key] for r in rounds
                     if "floodgate" in r and other in r and r[other][key]]
        lines.append(f"{title} {label}: {ratio:.2f}" + (f" ({goal})" if goal else "")
                     + "; per round: " + ", ".join(f"{x:.2f}" for x in per_round))
    if "floodgate" in idle:
        lines.append(f"floodgate RSS per idle connection: "
                     f"{idle['floodgate']['kib_per_conn']:.2f} KiB (target <= 8)")
    return lines


def raw_lines(rounds, order_log):
    keys = ["rps", "p50_ms", "p99_ms", "proxy_cpu_us", "proxy_user_us", "proxy_sys_us",
            "backend_cpu_us", "requests", "errors",
            "others_cpus", "steal_pct"]
    lines = ["round\tposition\ttarget\t" + "\t".join(keys)]
    for i, (rnd, order) in enumerate(zip(rounds, order_log), 1):
        for pos, name in enumerate(order, 1):
            r = rnd[name]
            lines.append(f"{i}\t{pos}\t{name}\t" + "\t".join(
                f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k]) for k in keys))
    return lines


def versions(args):
    def first_line(cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (out.stdout + out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unavailable"
    fg = args.floodgate
    fg_info = (f"{fg} (modified {time.ctime(os.path.getmtime(fg))})" if os.path.exists(fg)
               else f"{fg} (missing)")
    return [f"floodgate: {fg_info}", f"haproxy: {first_line(['haproxy', '-v'])}",
            f"nginx: {first_line(['nginx', '-v'])}", f"wrk: {first_line(['wrk', '-v'])}",
            f"kernel: {os.uname().release}, CPUs: {os.cpu_count()}, "
            f"fd hard limit: {targets.nofile_hard()}"]


# --- idle connections -----------------------------------------------------------------------

def idle_test(args, stack, name):
    target = stack.targets[name]
    cmd = [sys.executable, os.path.join(HERE, "idle_conns.py"), "--port", str(target.port),
           "--count", str(args.idle), "--json"]
    for pid in target.refresh_pids():
        cmd += ["--pid", str(pid)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stderr.write(out.stderr)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": (out.stdout + out.stderr).strip().splitlines()[-1:]}


# --- main -----------------------------------------------------------------------------------

def main():
    args = parse_args()
    targets.exit_on_signals()
    names = list(args.targets)
    pending = set()
    if "floodgate" in names and not os.access(args.floodgate, os.X_OK):
        print(f"floodgate binary {args.floodgate} not found: reported as pending",
              file=sys.stderr)
        pending.add("floodgate")
    if "floodgate-prev" in names and not os.access(args.floodgate_prev, os.X_OK):
        print(f"previous floodgate binary {args.floodgate_prev!r} not found: reported as "
              "pending", file=sys.stderr)
        pending.add("floodgate-prev")
    active = [n for n in names if n not in pending]
    pins = {"backend": args.pin_backend,
            **{p: args.pin_proxy for p in targets.PROXIES + ("floodgate-prev",)}}
    rounds, order_log, idle = [], [], {}
    extra = {kind: open(path).read() for kind, path in
             (("floodgate", args.floodgate_extra), ("floodgate-prev", args.floodgate_prev_extra))
             if path}
    with targets.Stack(args.floodgate, args.forward_headers, pins,
                       floodgate_prev_bin=args.floodgate_prev, extra_toml=extra,
                       headers=args.header, tls=args.tls) as stack:
        stack.start("backend")
        for name in active:
            stack.start(name)
        for name in active:
            if args.warmup > 0:
                run_wrk(args, stack.targets[name].port, args.warmup)
        for i in range(args.rounds):
            order = active[i % len(active):] + active[:i % len(active)]
            rnd = {}
            for name in order:
                rnd[name] = measure(args, stack, name)
                r = rnd[name]
                print(f"round {i + 1}/{args.rounds} {name:9s} {r['rps']:9.0f} req/s "
                      f"p50 {r['p50_ms']:.3f} ms p99 {r['p99_ms']:.3f} ms "
                      f"proxy {r['proxy_cpu_us']:.2f} us/req "
                      f"backend {r['backend_cpu_us']:.2f} us/req errors {r['errors']} "
                      f"others {r['others_cpus']:.2f} CPUs",
                      file=sys.stderr, flush=True)
            rounds.append(rnd)
            order_log.append(order)
        if args.idle > 0:
            for name in active:
                if name in targets.PROXIES:
                    idle[name] = idle_test(args, stack, name)
                    print(f"idle {name}: {json.dumps(idle[name])}", file=sys.stderr)
    table = summary(args, rounds, names, idle, pending)
    print(table)
    write_results(args, rounds, order_log, idle, table)


def write_results(args, rounds, order_log, idle, table):
    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, time.strftime("%Y%m%d-%H%M%S") + ".txt")
    with open(path, "w") as f:
        f.write("# " + shlex.join([sys.executable] + sys.argv) + "\n")
        f.write("# " + json.dumps({k: v for k, v in vars(args).items()}) + "\n")
        f.write("".join(f"# {line}\n" for line in versions(args)) + "\n")
        f.write("\n".join(raw_lines(rounds, order_log)) + "\n\n")
        for name, result in idle.items():
            f.write(f"idle\t{name}\t{json.dumps(result)}\n")
        f.write("\n" + table + "\n")
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
