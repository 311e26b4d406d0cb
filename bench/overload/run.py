#!/usr/bin/env python3
"""The overload lab: how the backend reached directly, HAProxy, nginx and floodgate behave when
offered more than a capacity-limited backend can serve.

Every arm sits in front of slow_backend (W worker slots x S ms of service, unbounded FIFO,
never cancels work, so capacity = W * 1000 / S req/s) and is driven by loadgen, an open-loop
generator whose clients give up after --timeout-ms. Arms:
  direct     the backend itself, unprotected
  haproxy    `server ... maxconn W` + `timeout queue` (HAProxy's queue in front of the server)
  nginx      `server ... max_conns=W` (nginx-light has no upstream queue: excess is a fast 502)
  floodgate  [upstreams.resilience] max_active_requests = W, a short pending queue with a
             pending_timeout, 503 + Retry-After beyond it
  floodgate-cap  the front in-flight cap alone ([resilience.inflight] max_inflight = W, no
             pool limit): the backend never queues, and the excess is a 429 decided before
             routing; its rejection latency is what a refusal costs (docs/resilience.md)

Tests, interleaved (for each test every arm runs once, in an order that rotates per test):
  steady Lx  --warmup s at 0.5x capacity, then --duration s at Lx (measured), L in --levels
  burst      --burst PRE,BURST,POST seconds at 1x, --burst-factor x, --post-factor x

Each run gets a fresh backend and proxy (so no run inherits another's backlog). Prints a
table and writes it, with the settings and per-run raw figures, to
bench/results/overload-<timestamp>.txt. See bench/overload/README.md for the columns.
Usage: python3 bench/overload/run.py [--arms direct,haproxy,nginx,floodgate] [--help]
"""

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

import compare  # noqa: E402  (host_cpu, versions)
import targets  # noqa: E402  (ports, process tree, CPU, Stack)

ARMS = ("direct", "haproxy", "nginx", "floodgate", "floodgate-cap")


# --- options --------------------------------------------------------------------------------

def add_lab_options(p, kept):
    """The options every script built on this lab shares: the binaries, where they are built
    and where the results go. `kept` says what --keep-dir keeps."""
    p.add_argument("--floodgate", default=os.path.join(REPO, "build-bench", "floodgate"),
                   help="floodgate binary")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build-lab"),
                   help="where slow_backend and loadgen are compiled")
    p.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="C++20 compiler")
    p.add_argument("--results-dir", default=os.path.join(BENCH, "results"))
    p.add_argument("--keep-dir", action="store_true",
                   help=f"keep each run's temporary directory ({kept})")


def check_arms(p, args, arms):
    """--arms as a list, every name one of `arms` (else a usage error)."""
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = set(args.arms) - set(arms)
    if unknown:
        p.error(f"unknown arms: {', '.join(sorted(unknown))}")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated subset of "
                   + ",".join(ARMS) + "; floodgate is skipped if `floodgate check` rejects "
                   "its configuration")
    p.add_argument("--workers", type=int, default=16, help="backend slots W")
    p.add_argument("--service-ms", type=float, default=10.0, help="backend service time S")
    p.add_argument("--timeout-ms", type=float, default=1000.0, help="client timeout")
    p.add_argument("--levels", default="0.5,1,2,4", help="steady loads, x capacity")
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per level")
    p.add_argument("--warmup", type=float, default=1.0,
                   help="seconds at 0.5x before each level (opens keep-alive connections)")
    p.add_argument("--burst", default="3,5,10",
                   help="seconds before, during and after the burst; empty to skip")
    p.add_argument("--burst-factor", type=float, default=4.0, help="burst load, x capacity")
    p.add_argument("--post-factor", type=float, default=0.8, help="load after the burst")
    p.add_argument("--poisson", action="store_true", help="Poisson arrivals, not fixed rate")
    p.add_argument("--seed", type=int, default=1, help="loadgen seed (with --poisson)")
    p.add_argument("--bucket-ms", type=float, default=100.0, help="time bucket")
    p.add_argument("--recovery-ok-ratio", type=float, default=0.95,
                   help="a bucket after the burst is good if succeeded >= this x sent ...")
    p.add_argument("--recovery-p99-factor", type=float, default=3.0,
                   help="... and its success p99 <= this x service time (3, not 2: an idle "
                        "proxied path already has p99 ~1.4 x S on 2 shared CPUs)")
    p.add_argument("--recovery-hold", type=float, default=1.0,
                   help="recovered once buckets stay good for this many seconds")
    p.add_argument("--haproxy-queue-timeout-ms", type=float, default=None,
                   help="HAProxy `timeout queue` (default: half the client timeout)")
    p.add_argument("--haproxy-abortonclose", action="store_true",
                   help="add `option abortonclose` (drop queued requests whose client left)")
    p.add_argument("--fg-max-pending", type=int, default=None,
                   help="floodgate max_pending_requests (default: W / 4)")
    p.add_argument("--fg-pending-timeout-ms", type=float, default=None,
                   help="floodgate pending_timeout in ms (default: the service time)")
    p.add_argument("--fg-retry-after", default="1s", help="floodgate retry_after")
    add_lab_options(p, "configs, logs, loadgen JSON")
    args = p.parse_args()
    check_arms(p, args, ARMS)
    args.levels = [float(x) for x in args.levels.split(",") if x]
    args.burst = [float(x) for x in args.burst.split(",") if x]
    if args.burst and len(args.burst) != 3:
        p.error("--burst wants PRE,BURST,POST seconds")
    if args.haproxy_queue_timeout_ms is None:
        args.haproxy_queue_timeout_ms = args.timeout_ms / 2
    # A queue of a quarter of the slots waits about S/4 when full, so a success takes at most
    # ~1.25 x S; the deadline of one S turns a wait that would take longer away early.
    if args.fg_max_pending is None:
        args.fg_max_pending = max(1, args.workers // 4)
    if args.fg_pending_timeout_ms is None:
        args.fg_pending_timeout_ms = args.service_ms
    args.capacity = args.workers * 1000.0 / args.service_ms
    return args


# --- configurations -------------------------------------------------------------------------

def haproxy_config(args, port, backend_port):
    # Same frame as targets.haproxy_config; the lab's part is the server's `maxconn W` (at most
    # W requests on the server, the rest wait in the backend queue) and `timeout queue` (how
    # long a request may wait there before HAProxy answers 503 itself).
    maxconn = max(1000, targets.nofile_hard() - 500)
    abort = "    option abortonclose\n" if args.haproxy_abortonclose else ""
    return f"""global
    nbthread 1
    maxconn {maxconn}
    no strict-limits

defaults
    mode http
    maxconn {maxconn}
    timeout connect 5s
    timeout client {targets.IDLE_TIMEOUT_S}s
    timeout server 30s
    timeout queue {args.haproxy_queue_timeout_ms:g}ms
    timeout http-request 10s
    timeout http-keep-alive {targets.IDLE_TIMEOUT_S}s
    option http-keep-alive
    http-reuse always
{abort}
frontend fe
    bind 127.0.0.1:{port}
    default_backend be

backend be
    server s1 127.0.0.1:{backend_port} maxconn {args.workers} pool-max-conn {targets.KEEPALIVE}
"""


def nginx_config(args, d, port, backend_port):
    # targets' common frame, with the error log at `crit`: at overload nginx logs one
    # "no live upstreams" error per rejected request, which would cost it CPU and disk.
    common = targets._nginx_common(d, "nginx", targets.nofile_hard(), error_level="crit")
    return common + f"""    upstream backend {{
        server 127.0.0.1:{backend_port} max_conns={args.workers};
        keepalive {args.workers};
        keepalive_requests 1000000;
        keepalive_timeout {targets.IDLE_TIMEOUT_S}s;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def floodgate_config(args, port, admin_port, backend_port):
    """bench/targets.py's floodgate configuration with the lab's admission policy."""
    return targets.floodgate_config(port, admin_port, backend_port, f"""
[upstreams.resilience]
max_active_requests = {args.workers}
max_pending_requests = {args.fg_max_pending}
pending_timeout = "{args.fg_pending_timeout_ms:g}ms"
retry_after = "{args.fg_retry_after}"
""")


def floodgate_cap_config(args, port, admin_port, backend_port):
    """bench/targets.py's floodgate configuration with only the front in-flight cap."""
    return targets.floodgate_config(port, admin_port, backend_port) + f"""
[resilience.inflight]
max_inflight = {args.workers}
retry_after = "{args.fg_retry_after}"
"""


def floodgate_unavailable(args):
    """Why the floodgate arm cannot run (None if it can): the binary must exist and
    `floodgate check` must accept the lab's [upstreams.resilience] table."""
    return floodgate_check(args.floodgate, floodgate_config(
        args, targets.unused_port(), targets.unused_port(), targets.unused_port()))


def floodgate_check(binary, text):
    """None if BINARY exists and `floodgate check` accepts the configuration TEXT, else why
    not (its first lines). Warnings are accepted."""
    if not os.access(binary, os.X_OK):
        return f"{binary} not found"
    d = tempfile.mkdtemp(prefix="floodgate-overload-check-")
    try:
        path = os.path.join(d, "floodgate.toml")
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run([binary, "check", "-c", path], capture_output=True,
                             text=True, timeout=30)
        if out.returncode != 0:
            lines = (out.stdout + out.stderr).strip().splitlines()
            return "`floodgate check` rejects the lab config: " + "; ".join(lines[:3])
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- processes ------------------------------------------------------------------------------

def build(args):
    """Compiles slow_backend and loadgen into --build-dir when their source is newer."""
    os.makedirs(args.build_dir, exist_ok=True)
    for name in ("slow_backend", "loadgen"):
        src, out = os.path.join(HERE, name + ".cpp"), os.path.join(args.build_dir, name)
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
            continue
        cmd = [args.cxx, "-std=c++20", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-o", out, src]
        print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)


class Lab(targets.Stack):
    """One run's processes: slow_backend (one, or several with distinct names) plus at most
    one proxy, in a fresh temporary directory. Stack.stop() (run by `with`) stops them all,
    then stop() collects each backend's exit counters and calls collect() before the
    directory is removed."""

    def __init__(self, args):
        super().__init__(floodgate_bin=args.floodgate, keep_dir=True)
        self.args = args
        self.keep = args.keep_dir
        self.backend_counters = {}   # of the backend named "backend"
        self.counters_by_backend = {}
        self.backends = []           # names of the backends started

    def _spawn(self, name, argv, port):
        log = f"{self.dir}/{name}.out"
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        target = targets.Target(name, port, proc, log)
        self.targets[name] = target
        return target

    probe_timeout_s = 1.0   # of each readiness GET (a subclass with slower backends raises it)

    def _wait_ready(self, target, argv, timeout=15.0):
        deadline = time.monotonic() + timeout
        while not targets.http_get_ok(target.port, self.probe_timeout_s):
            if target.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{target.name} did not start ({shlex.join(argv)}):\n"
                                   + targets.tail(target.log))
            time.sleep(0.05)
        target.refresh_pids()

    def start_backend(self, name="backend", extra=()):
        """Starts slow_backend as NAME (its files are NAME.port and NAME.err in the run's
        directory), with EXTRA arguments after the lab's."""
        a = self.args
        argv = [os.path.join(a.build_dir, "slow_backend"), "--port", "0",
                "--workers", str(a.workers), "--service-ms", f"{a.service_ms:g}"] + list(extra)
        port_file = f"{self.dir}/{name}.port"
        with open(port_file, "w") as port_out, open(f"{self.dir}/{name}.err", "w") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=port_out,
                                    stderr=err, start_new_session=True)
        target = targets.Target(name, 0, proc, f"{self.dir}/{name}.err")
        self.targets[name] = target
        self.backends.append(name)
        deadline = time.monotonic() + 10
        while target.port == 0:
            with open(port_file) as f:
                line = f.readline()
            if line.endswith("\n"):
                target.port = int(line)
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("slow_backend did not start:\n" + targets.tail(target.log))
            else:
                time.sleep(0.02)
        self._wait_ready(target, argv)
        return target

    def start_proxy(self, arm, backend_port):
        port = targets.unused_port(self._ports | {backend_port})
        self._ports.add(port)
        d = self.dir
        if arm == "haproxy":
            path = f"{d}/haproxy.cfg"
            text = haproxy_config(self.args, port, backend_port)
            argv = ["haproxy", "-db", "-f", path]
        elif arm == "nginx":
            os.makedirs(f"{d}/nginx-temp", exist_ok=True)
            path = f"{d}/nginx.conf"
            text = nginx_config(self.args, d, port, backend_port)
            argv = ["nginx", "-p", f"{d}/", "-e", f"{d}/nginx-error.log", "-c", path]
        elif arm == "floodgate":
            admin = targets.unused_port(self._ports | {backend_port})
            self._ports.add(admin)
            path = f"{d}/floodgate.toml"
            text = floodgate_config(self.args, port, admin, backend_port)
            argv = [self.floodgate_bin, "-c", path]
        elif arm == "floodgate-cap":
            admin = targets.unused_port(self._ports | {backend_port})
            self._ports.add(admin)
            path = f"{d}/floodgate-cap.toml"
            text = floodgate_cap_config(self.args, port, admin, backend_port)
            argv = [self.floodgate_bin, "-c", path]
        else:
            raise ValueError(arm)
        with open(path, "w") as f:
            f.write(text)
        target = self._spawn(arm, argv, port)
        self._wait_ready(target, argv)
        time.sleep(0.2)                   # let nginx workers finish starting
        target.refresh_pids()
        return target

    def stop(self):
        running = [n for n in self.backends if n in self.targets]
        super().stop()
        for name in running:
            try:
                with open(f"{self.dir}/{name}.err") as f:
                    lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
                self.counters_by_backend[name] = json.loads(lines[-1]) if lines else {}
            except (OSError, ValueError):
                self.counters_by_backend[name] = {}
        self.backend_counters = self.counters_by_backend.get("backend", {})
        if running:
            self.collect()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def collect(self):
        """Called once the processes have exited, before the run's directory is removed:
        a subclass reads what they left there."""


# --- one run --------------------------------------------------------------------------------

def run_one(args, arm, test):
    with Lab(args) as lab:
        backend = lab.start_backend()
        target = backend if arm == "direct" else lab.start_proxy(arm, backend.port)
        proxy_pids = target.refresh_pids() if arm != "direct" else []
        backend_pids = backend.refresh_pids()
        out = f"{lab.dir}/loadgen.json"
        cmd = [os.path.join(args.build_dir, "loadgen"), "--port", str(target.port),
               "--timeout-ms", f"{args.timeout_ms:g}", "--bucket-ms", f"{args.bucket_ms:g}",
               "--out", out]
        for seconds, rate in test["phases"]:
            cmd += ["--phase", f"{seconds:g}s@{rate:g}"]
        if args.poisson:
            cmd += ["--poisson", "--seed", str(args.seed)]
        cpu0 = cpu_snapshot(proxy_pids, backend_pids)
        total = sum(s for s, _ in test["phases"])
        done = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=total + args.timeout_ms / 1000 + 60)
        cpu1 = cpu_snapshot(proxy_pids, backend_pids)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n{done.stdout}{done.stderr}")
        with open(out) as f:
            result = json.load(f)
    result["cpu"] = cpu_usage(cpu0, cpu1, bool(proxy_pids))
    result["backend_counters"] = lab.backend_counters
    return result


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_snapshot(proxy_pids, backend_pids):
    """CPU seconds so far of the proxy, the backends and the finished children (loadgen),
    the host's busy jiffies, and the time: two of these make a cpu_usage()."""
    return (targets.cpu_seconds(proxy_pids), targets.cpu_seconds(backend_pids),
            children_cpu(), compare.host_cpu(), time.monotonic())


def cpu_usage(cpu0, cpu1, has_proxy):
    """CPU used between two cpu_snapshot()s: % of one CPU for the proxy, the backends and
    loadgen, and the CPUs kept busy by everything else on the host (others_cpus)."""
    wall = cpu1[4] - cpu0[4]
    proxy, back, gen = (cpu1[i] - cpu0[i] for i in range(3))
    busy = (cpu1[3][0] - cpu0[3][0]) / targets.CLK_TCK
    return {"proxy_pct": 100 * proxy / wall if has_proxy else None,
            "backend_pct": 100 * back / wall, "loadgen_pct": 100 * gen / wall,
            "others_cpus": max(busy - proxy - back - gen, 0.0) / wall}


# --- tests and figures ----------------------------------------------------------------------

def make_tests(args):
    cap = args.capacity
    tests = []
    for level in args.levels:
        phases = ([(args.warmup, 0.5 * cap)] if args.warmup > 0 else []) + \
                 [(args.duration, level * cap)]
        tests.append({"name": f"{level:g}x", "kind": "steady", "level": level,
                      "phases": phases, "measured": len(phases) - 1})
    if args.burst:
        pre, burst, post = args.burst
        tests.append({"name": "burst", "kind": "burst",
                      "phases": [(pre, cap), (burst, args.burst_factor * cap),
                                 (post, args.post_factor * cap)]})
    return tests


def goodput_pct(args, phase):
    """2xx responses received within the client timeout DURING the phase, per second, as %
    of capacity (by completion time: counting by send time would credit a short phase with
    the responses its queue delivers after it ended)."""
    return 100.0 * phase["ok_done"] / phase["duration_s"] / args.capacity


def bucket_good(args, b):
    p99 = b["success_p99_ms"]
    return (b["sent"] > 0 and b["succeeded"] >= args.recovery_ok_ratio * b["sent"]
            and p99 is not None and p99 <= args.recovery_p99_factor * args.service_ms)


def recovery(args, result):
    """(seconds, bad buckets): the time from the end of the burst to the start of the first
    run of --recovery-hold seconds of consecutive good buckets in the post-burst phase (None:
    no such run before the phase ended), and how many post-burst buckets were not good."""
    post = result["phases"][2]
    start, end = post["start_s"], post["start_s"] + post["duration_s"]
    buckets = [b for b in result["buckets"] if start - 1e-6 <= b["t_s"] < end - 1e-6]
    good = [bucket_good(args, b) for b in buckets]
    hold = max(1, round(args.recovery_hold * 1000 / args.bucket_ms))
    bad = good.count(False)
    run = 0
    for i, ok in enumerate(good):
        run = run + 1 if ok else 0
        if run == hold:
            return buckets[i + 1 - hold]["t_s"] - start, bad
    return None, bad


def fmt(value, spec="{:.1f}"):
    return "-" if value is None else spec.format(value)


def steady_table(args, tests, results, arms):
    head = ("| load | arm | goodput %cap | succ p50 ms | succ p99 ms | rejected | rej p50 ms "
            "| rej p99 ms | timeouts | errors | proxy CPU % | gen lag p99 ms | others CPUs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for test in tests:
        if test["kind"] != "steady":
            continue
        for arm in arms:
            r = results.get((test["name"], arm))
            if r is None:
                lines.append(f"| {test['name']} | {arm} | " + " | ".join(["pending"] * 11) + " |")
                continue
            ph = r["phases"][test["measured"]]
            lines.append(
                f"| {test['name']} | {arm} | {goodput_pct(args, ph):.1f} | "
                f"{fmt(ph['success_p50_ms'], '{:.2f}')} | {fmt(ph['success_p99_ms'], '{:.2f}')} | "
                f"{ph['rejected']} | {fmt(ph['reject_p50_ms'], '{:.3f}')} | "
                f"{fmt(ph['reject_p99_ms'], '{:.3f}')} | {ph['timed_out']} | {ph['errors']} | "
                f"{fmt(r['cpu']['proxy_pct'], '{:.0f}')} | {fmt(r['send_lag_p99_ms'], '{:.2f}')} | "
                f"{r['cpu']['others_cpus']:.2f} |")
    return lines


def burst_table(args, test, results, arms):
    head = ("| arm | goodput %cap before / during / after | rejected | rej p50 ms | rej p99 ms "
            "| timeouts | errors | succ p99 ms during | recovery s | bad buckets after "
            "| gen lag p99 ms | others CPUs |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for arm in arms:
        r = results.get((test["name"], arm))
        if r is None:
            lines.append(f"| {arm} | " + " | ".join(["pending"] * 11) + " |")
            continue
        ph = r["phases"]
        rej = rejection_percentiles(ph)
        seconds, bad = recovery(args, r)
        rec = f"{seconds:.1f}" if seconds is not None else f"> {ph[2]['duration_s']:g}"
        lines.append(
            f"| {arm} | " + " / ".join(f"{goodput_pct(args, p):.0f}" for p in ph) + " | "
            f"{sum(p['rejected'] for p in ph)} | {fmt(rej[0], '{:.3f}')} | "
            f"{fmt(rej[1], '{:.3f}')} | {sum(p['timed_out'] for p in ph)} | "
            f"{sum(p['errors'] for p in ph)} | {fmt(ph[1]['success_p99_ms'], '{:.1f}')} | "
            f"{rec} | {bad} | {fmt(r['send_lag_p99_ms'], '{:.2f}')} | "
            f"{r['cpu']['others_cpus']:.2f} |")
    return lines


def rejection_percentiles(phases):
    """Rejection p50/p99 of the phase with the most rejections (the burst, in practice):
    percentiles cannot be merged exactly from per-phase figures."""
    best = max(phases, key=lambda p: p["rejected"])
    if best["rejected"] == 0:
        return None, None
    return best["reject_p50_ms"], best["reject_p99_ms"]


def burst_timeline(args, test, results, arms, step_s=0.5):
    """Per STEP_S: goodput (%cap, by completion time) and the highest success p99 of the
    100 ms buckets (by send time) in it."""
    per = max(1, round(step_s * 1000 / args.bucket_ms))
    head = "| t s | " + " | ".join(f"{a} %cap / p99 ms" for a in arms) + " |"
    lines = [head, "|" + "---|" * (len(arms) + 1)]
    series = {a: results[(test["name"], a)]["buckets"] for a in arms
              if (test["name"], a) in results}
    n = max((len(s) for s in series.values()), default=0)
    for i in range(0, n, per):
        cells = []
        for a in arms:
            chunk = series.get(a, [])[i:i + per]
            if not chunk:
                cells.append("-")
                continue
            secs = len(chunk) * args.bucket_ms / 1000
            ok = sum(b["ok_done"] for b in chunk) / secs / args.capacity * 100
            p99s = [b["success_p99_ms"] for b in chunk if b["success_p99_ms"] is not None]
            cells.append(f"{ok:.0f} / {max(p99s):.0f}" if p99s else f"{ok:.0f} / -")
        lines.append(f"| {i * args.bucket_ms / 1000:.1f} | " + " | ".join(cells) + " |")
    return lines


def settings_lines(args):
    fg_pending = (f"max_active_requests = {args.workers}, max_pending_requests = "
                  f"{args.fg_max_pending}, pending_timeout = {args.fg_pending_timeout_ms:g}ms, "
                  f"retry_after = {args.fg_retry_after}")
    return [
        f"Backend: slow_backend W={args.workers} slots x S={args.service_ms:g} ms, capacity "
        f"{args.capacity:.0f} req/s, unbounded FIFO, serves requests whose client left.",
        f"Clients: loadgen, open loop, {'Poisson' if args.poisson else 'fixed-rate'} "
        f"arrivals, client timeout {args.timeout_ms:g} ms, latencies from the scheduled send "
        f"time.",
        f"haproxy: server maxconn {args.workers}, timeout queue "
        f"{args.haproxy_queue_timeout_ms:g}ms"
        + (", option abortonclose" if args.haproxy_abortonclose else ", no abortonclose")
        + "; nginx: server max_conns=" + str(args.workers) + " (no queue); floodgate: "
        + fg_pending + ".",
        f"Steady: {args.warmup:g} s at 0.5x, then {args.duration:g} s measured. Burst: "
        + (f"{args.burst[0]:g} s at 1x, {args.burst[1]:g} s at {args.burst_factor:g}x, "
           f"{args.burst[2]:g} s at {args.post_factor:g}x." if args.burst else "skipped."),
        f"Goodput = 2xx responses received within the client timeout during the phase, per "
        f"second, as % of capacity. Recovery = time from the end of the burst to the start of "
        f"the first {args.recovery_hold:g} s run of consecutive good {args.bucket_ms:g} ms "
        f"buckets (by send time); good = succeeded >= {args.recovery_ok_ratio:g} x sent and "
        f"success p99 <= {args.recovery_p99_factor * args.service_ms:g} ms.",
    ]


def report(args, tests, results, arms, skipped):
    lines = ["# Overload lab", ""] + settings_lines(args)
    for arm, why in skipped.items():
        lines.append(f"{arm}: pending ({why}).")
    lines += ["", "## Steady load", ""] + steady_table(args, tests, results, arms)
    for test in tests:
        if test["kind"] == "burst":
            run_arms = [a for a in arms if (test["name"], a) in results]
            lines += ["", "## Burst and recovery", ""] + burst_table(args, test, results, arms)
            lines += ["", "Burst timeline (goodput %cap by completion time / highest success "
                      "p99 of the 100 ms buckets sent in each 0.5 s):", ""]
            lines += burst_timeline(args, test, results, run_arms)
    others = [r["cpu"]["others_cpus"] for r in results.values()]
    if others:
        lines += ["", f"CPU used by processes outside the lab during the runs: max "
                      f"{max(others):.2f} of {os.cpu_count()} CPUs."]
    return "\n".join(lines)


def raw_lines(results):
    lines = ["# raw: one JSON object per run (buckets omitted)"]
    for (test, arm), r in results.items():
        slim = {k: v for k, v in r.items() if k != "buckets"}
        lines.append(json.dumps({"test": test, "arm": arm, **slim}, separators=(",", ":")))
    return lines


# --- main -----------------------------------------------------------------------------------

def main():
    args = parse_args()
    targets.exit_on_signals()
    build(args)
    skipped = {}
    for arm in ("floodgate", "floodgate-cap"):
        if arm in args.arms:
            why = floodgate_unavailable(args)
            if why:
                print(f"{arm} arm skipped: {why}", file=sys.stderr)
                skipped[arm] = why
    arms = [a for a in args.arms if a not in skipped]
    tests = make_tests(args)
    total = sum(sum(s for s, _ in t["phases"]) + 3 for t in tests) * len(arms)
    print(f"overload lab: {len(tests)} tests x {len(arms)} arms, about {total / 60:.1f} min",
          file=sys.stderr, flush=True)
    results = {}
    for i, test in enumerate(tests):
        order = arms[i % len(arms):] + arms[:i % len(arms)] if arms else []
        for arm in order:
            r = run_one(args, arm, test)
            results[(test["name"], arm)] = r
            last = r["phases"][test.get("measured", len(r["phases"]) - 1)]
            print(f"{test['name']:6s} {arm:9s} goodput {goodput_pct(args, last):5.1f}%cap "
                  f"ok {last['succeeded']} rej {last['rejected']} timeout {last['timed_out']} "
                  f"err {last['errors']} succ p99 {fmt(last['success_p99_ms'], '{:.1f}')} ms "
                  f"rej p99 {fmt(last['reject_p99_ms'], '{:.3f}')} ms "
                  f"lag p99 {fmt(r['send_lag_p99_ms'], '{:.2f}')} ms "
                  f"others {r['cpu']['others_cpus']:.2f} CPUs"
                  + (f" recovery {fmt(recovery(args, r)[0])} s" if test["kind"] == "burst"
                     else ""), file=sys.stderr, flush=True)
    text = report(args, tests, results, args.arms, skipped)
    print(text)
    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, time.strftime("overload-%Y%m%d-%H%M%S.txt"))
    with open(path, "w") as f:
        f.write("# " + shlex.join([sys.executable] + sys.argv) + "\n")
        f.write("# " + json.dumps({k: v for k, v in vars(args).items()}) + "\n")
        f.write("".join(f"# {line}\n" for line in compare.versions(args)) + "\n")
        f.write(text + "\n\n" + "\n".join(raw_lines(results)) + "\n")
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
