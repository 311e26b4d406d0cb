#!/usr/bin/env python3
"""The retry-storm experiment (issue 13's metastable-failure test): open-loop clients that
retry every failure at once, a pool of backends whose capacity is halved for a while, and
what each proxy's own retries do to the load while capacity is short.

Model (see bench/retry_storm/README.md): --backends slow_backend instances in one pool, each
with W slots x S ms of service, an unbounded FIFO and no cancellation, so that a request whose
proxy gave up is still served (wasted work). loadgen sends --load x the pool's full capacity,
open loop, and each client retries a failed request (5xx, reset, timeout) up to
--client-retries times at once. Phases: --warmup s, --trigger s with every backend at
--degraded-workers slots (SIGUSR1; SIGUSR2 restores W), --recovery s. Every proxy has the same
per-try backend timeout (--try-timeout-ms) and one worker/thread. Arms:
  floodgate          at most one retry to another backend, within the retry budget
                     ([resilience.retry_budget] enabled, --budget-ratio %, --budget-window),
                     circuit breaker on (--breaker-threshold, --breaker-open)
  floodgate-budget-only  the budget without the breaker (circuit_breaker.enabled = false)
  floodgate-nobudget  neither budget nor breaker: floodgate's retry rules alone
  floodgate-admission the floodgate arm plus pool admission sized to the backends' slots
  haproxy            retries --proxy-retries, option redispatch 1, retry-on conn-failure
                     empty-response response-timeout 503
  nginx              proxy_next_upstream error timeout http_503, proxy_next_upstream_tries
                     --proxy-retries + 1, max_fails/fail_timeout = the breaker's settings

Measured at the backends (every request each one received, per bucket) and at the clients:
goodput before / during / after the trigger, amplification during the trigger (backend
attempts / client sends: the proxy's own; and backend attempts / original requests: with the
clients' retries), and the time from the trigger's end until goodput is back to
--recovery-ok-ratio of the offered rate, sustained. Arms are interleaved over --rounds (the
order rotates per round). Prints a markdown table; writes it with the settings to
bench/results/retry-storm-<timestamp>.txt and the raw per-bucket data to the .json beside it.
Usage: python3 bench/retry_storm/run.py [--arms floodgate,haproxy,nginx] [--rounds N] [--help]
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

import compare  # noqa: E402  (versions)
import targets  # noqa: E402  (configuration frames, ports, Stack)
from overload import run as lab  # noqa: E402  (build, Lab, floodgate_check, cpu_*)

ARMS = ("floodgate", "floodgate-budget-only", "floodgate-nobudget", "floodgate-admission",
        "haproxy", "nginx")
DEFAULT_ARMS = ARMS
FLOODGATE_ARMS = ("floodgate", "floodgate-budget-only", "floodgate-nobudget",
                  "floodgate-admission")


# --- options --------------------------------------------------------------------------------

def duration_s(text):
    """"250ms", "5s" or a bare number of seconds -> seconds."""
    text = str(text).strip()
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text[:-1]) if text.endswith("s") else float(text)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                   help="comma-separated subset of " + ",".join(ARMS))
    p.add_argument("--rounds", type=int, default=1, help="rounds of all arms, interleaved")
    p.add_argument("--backends", type=int, default=3, help="slow_backend instances in the pool")
    p.add_argument("--workers", type=int, default=8, help="slots W per backend")
    p.add_argument("--service-ms", type=float, default=40.0, help="service time S")
    p.add_argument("--degraded-workers", type=int, default=None,
                   help="slots per backend during the trigger (default: W / 2)")
    p.add_argument("--load", type=float, default=0.75, help="arrivals, x full capacity")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds before the trigger")
    p.add_argument("--trigger", type=float, default=10.0, help="seconds at reduced capacity")
    p.add_argument("--recovery", type=float, default=30.0, help="seconds after the trigger")
    p.add_argument("--timeout-ms", type=float, default=1000.0,
                   help="client timeout of each send (original or retry)")
    p.add_argument("--client-retries", type=int, default=3,
                   help="retries of a failed request by its client, sent at once")
    p.add_argument("--try-timeout-ms", type=float, default=250.0,
                   help="every proxy's per-try backend connect and response timeout")
    p.add_argument("--proxy-retries", type=int, default=3,
                   help="HAProxy `retries`; nginx tries = this + 1 (floodgate: one retry at "
                        "most, by design)")
    p.add_argument("--budget-ratio", type=int, default=10, help="retry_budget.ratio_percent")
    p.add_argument("--budget-window", default="10s", help="retry_budget.window")
    p.add_argument("--breaker-threshold", type=int, default=3,
                   help="floodgate circuit_breaker.failure_threshold and nginx max_fails")
    p.add_argument("--breaker-open", default="5s",
                   help="floodgate circuit_breaker.open and nginx fail_timeout")
    p.add_argument("--poisson", action="store_true", help="Poisson arrivals, not fixed rate")
    p.add_argument("--seed", type=int, default=1, help="loadgen seed (with --poisson)")
    p.add_argument("--bucket-ms", type=float, default=100.0, help="time bucket")
    p.add_argument("--recovery-ok-ratio", type=float, default=0.95,
                   help="recovered: originals sent in a window that eventually succeeded >= "
                        "this x those sent ...")
    p.add_argument("--recovery-window", type=float, default=1.0, help="... per window of s ...")
    p.add_argument("--recovery-hold", type=float, default=3.0,
                   help="... in consecutive windows for this many seconds")
    p.add_argument("--timeline-step", type=float, default=2.0, help="timeline rows, s")
    lab.add_lab_options(p, "configs, logs, raw files")
    args = p.parse_args()
    lab.check_arms(p, args, ARMS)
    if args.degraded_workers is None:
        args.degraded_workers = max(1, args.workers // 2)
    args.capacity = args.backends * args.workers * 1000.0 / args.service_ms
    args.degraded_capacity = args.backends * args.degraded_workers * 1000.0 / args.service_ms
    args.rate = args.load * args.capacity
    args.breaker_open_s = duration_s(args.breaker_open)
    return args


# --- configurations -------------------------------------------------------------------------

def floodgate_config(args, arm, port, admin_port, backend_ports):
    """bench/targets.py's floodgate frame, the pool of backends with the per-try timeouts,
    and issue 13's retry budget and circuit breaker."""
    t = f"{args.try_timeout_ms:g}ms"
    pool = f'connect_timeout = "{t}"\nresponse_timeout = "{t}"\n'
    if arm == "floodgate-admission":
        pool += admission_table(args)
    budget = "false" if arm == "floodgate-nobudget" else "true"
    breaker = "false" if arm in ("floodgate-nobudget", "floodgate-budget-only") else "true"
    return targets.floodgate_config(port, admin_port, backend_ports, pool) + f"""
[resilience.retry_budget]
enabled = {budget}
ratio_percent = {args.budget_ratio}
window = "{args.budget_window}"

[resilience.circuit_breaker]
enabled = {breaker}
failure_threshold = {args.breaker_threshold}
open = "{args.breaker_open_s:g}s"
min_requests = 1
failure_rate_percent = 0
failure_statuses = [502, 503, 504]
when_all_open = "reject"
"""


def admission_table(args):
    """floodgate-admission: pool admission as the overload lab configures it (seed 000), sized
    to the backends' full concurrency: a request beyond it waits at most one service time in a
    short queue, then gets 503 proxy_overloaded at once, so the backends' queues stay short."""
    slots = args.backends * args.workers
    return f"""
[upstreams.resilience]
max_active_requests = {slots}
max_pending_requests = {max(1, slots // 4)}
pending_timeout = "{args.service_ms:g}ms"
retry_after = "1s"
"""


def haproxy_config(args, port, backend_ports):
    """bench/targets.py's HAProxy frame; the backend section retries (L7 retries, HAProxy 2.0+)
    on another server each time (`option redispatch 1`: plain `option redispatch` only moves
    the last retry) with the per-try timeouts."""
    t = f"{args.try_timeout_ms:g}ms"
    return targets.haproxy_config(port, backend_ports, targets.nofile_hard(), False, f"""\
    balance roundrobin
    timeout connect {t}
    timeout server {t}
    retries {args.proxy_retries}
    option redispatch 1
    retry-on conn-failure empty-response response-timeout 503
""")


def nginx_config(args, d, port, backend_ports):
    """bench/targets.py's nginx frame (error log at `crit`: nginx logs every upstream timeout
    at `error`); next upstream on error, timeout and 503, the per-try timeouts, and the
    passive failure marking (max_fails / fail_timeout) set like floodgate's breaker."""
    t = f"{args.try_timeout_ms:g}ms"
    return targets.nginx_proxy_config(
        d, port, backend_ports, targets.nofile_hard(), False,
        server_params=f"max_fails={args.breaker_threshold} "
                      f"fail_timeout={args.breaker_open_s:g}s",
        location_extra=f"""            proxy_connect_timeout {t};
            proxy_send_timeout {t};
            proxy_read_timeout {t};
            proxy_next_upstream error timeout http_503;
            proxy_next_upstream_tries {args.proxy_retries + 1};
            proxy_next_upstream_timeout 0;
""", error_level="crit")


def arm_settings(args):
    """One line per arm: what it was run with."""
    t = f"{args.try_timeout_ms:g} ms"
    breaker = (f"circuit_breaker failure_threshold = {args.breaker_threshold}, open = "
               f"{args.breaker_open_s:g}s")
    return {
        "floodgate": f"retry_budget ratio_percent = {args.budget_ratio}, window = "
                     f"{args.budget_window}; {breaker}; connect/response_timeout {t}",
        "floodgate-budget-only": f"retry_budget ratio_percent = {args.budget_ratio}, window = "
                                 f"{args.budget_window}; circuit_breaker enabled = false; "
                                 f"connect/response_timeout {t}",
        "floodgate-nobudget": f"retry_budget enabled = false; circuit_breaker enabled = false; "
                              f"connect/response_timeout {t}",
        "floodgate-admission": f"as floodgate, plus [upstreams.resilience] max_active_requests "
                               f"= {args.backends * args.workers} (the backends' slots), "
                               f"max_pending_requests = {max(1, args.backends * args.workers // 4)}, "
                               f"pending_timeout = {args.service_ms:g} ms",
        "haproxy": f"retries {args.proxy_retries}, option redispatch 1, retry-on conn-failure "
                   f"empty-response response-timeout 503; timeout connect/server {t}; no "
                   f"breaker",
        "nginx": f"proxy_next_upstream error timeout http_503, proxy_next_upstream_tries "
                 f"{args.proxy_retries + 1} (each server at most once: {args.backends} tries); "
                 f"max_fails={args.breaker_threshold} fail_timeout={args.breaker_open_s:g}s; "
                 f"proxy_connect/send/read_timeout {t}",
    }


# --- one run --------------------------------------------------------------------------------

class StormLab(lab.Lab):
    """The overload lab's processes with a pool of backends, each writing per-bucket counts."""

    def __init__(self, args):
        super().__init__(args)
        self.stats = {}

    def start_pool(self, per_backend=None):
        """Starts the pool: one backend per entry of PER_BACKEND, a list of extra slow_backend
        arguments (default: --backends backends with --degraded-workers), each writing its
        per-bucket counts."""
        a = self.args
        if per_backend is None:
            per_backend = [["--degraded-workers", str(a.degraded_workers)]] * a.backends
        pool = []
        for i, extra in enumerate(per_backend, 1):
            name = f"backend{i}"
            pool.append(self.start_backend(name, list(extra) + [
                "--stats-out", f"{self.dir}/{name}.stats.json",
                "--stats-bucket-ms", f"{a.bucket_ms:g}"]))
        return pool

    def proxy_config(self, arm, port, admin_port, backend_ports):
        """ARM's configuration text (a subclass with other arms overrides this). Every arm
        but haproxy and nginx is a floodgate, whose admin listener is ADMIN_PORT."""
        if arm == "haproxy":
            return haproxy_config(self.args, port, backend_ports)
        if arm == "nginx":
            return nginx_config(self.args, self.dir, port, backend_ports)
        return floodgate_config(self.args, arm, port, admin_port, backend_ports)

    def start_proxy(self, arm, backend_ports):
        """Starts ARM in front of BACKEND_PORTS with proxy_config()'s configuration; the
        target's admin_port is a floodgate's admin listener (None for haproxy and nginx)."""
        port = targets.unused_port(self._ports | set(backend_ports))
        self._ports.add(port)
        d = self.dir
        admin = None
        if arm == "haproxy":
            path = f"{d}/haproxy.cfg"
            argv = ["haproxy", "-db", "-f", path]
        elif arm == "nginx":
            os.makedirs(f"{d}/nginx-temp", exist_ok=True)
            path = f"{d}/nginx.conf"
            argv = ["nginx", "-p", f"{d}/", "-e", f"{d}/nginx-error.log", "-c", path]
        else:
            admin = targets.unused_port(self._ports | set(backend_ports))
            self._ports.add(admin)
            path = f"{d}/{arm}.toml"
            argv = [self.floodgate_bin, "-c", path]
        with open(path, "w") as f:
            f.write(self.proxy_config(arm, port, admin, backend_ports))
        target = self._spawn(arm, argv, port)
        target.admin_port = admin
        self._wait_ready(target, argv)
        time.sleep(0.2)                   # let nginx workers finish starting
        target.refresh_pids()
        return target

    def collect(self):
        for name in self.backends:
            try:
                with open(f"{self.dir}/{name}.stats.json") as f:
                    self.stats[name] = json.load(f)
            except (OSError, ValueError):
                self.stats[name] = None


def sleep_until_ns(t_ns):
    delay = (t_ns - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) / 1e9
    if delay > 0:
        time.sleep(delay)


def run_one(args, arm):
    """One arm, fresh processes: returns the loadgen result, each backend's per-bucket counts
    and exit counters, the CPU used, and the shared time origin (epoch_ns)."""
    with StormLab(args) as storm:
        pool = storm.start_pool()
        ports = [b.port for b in pool]
        proxy = storm.start_proxy(arm, ports)
        proxy_pids = proxy.refresh_pids()
        backend_pids = [pid for b in pool for pid in b.refresh_pids()]
        # The first phase starts on a bucket boundary of CLOCK_MONOTONIC, where the backends'
        # buckets start too: loadgen's bucket i is then exactly backend bucket i + offset.
        bucket_ns = round(args.bucket_ms * 1e6)
        epoch = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 300_000_000) // bucket_ns
        epoch = (epoch + 1) * bucket_ns
        out = f"{storm.dir}/loadgen.json"
        cmd = [os.path.join(args.build_dir, "loadgen"), "--port", str(proxy.port),
               "--timeout-ms", f"{args.timeout_ms:g}", "--bucket-ms", f"{args.bucket_ms:g}",
               "--client-retries", str(args.client_retries), "--start-at-ns", str(epoch),
               "--out", out]
        for seconds in (args.warmup, args.trigger, args.recovery):
            cmd += ["--phase", f"{seconds:g}s@{args.rate:g}"]
        if args.poisson:
            cmd += ["--poisson", "--seed", str(args.seed)]
        cpu0 = lab.cpu_snapshot(proxy_pids, backend_pids)
        with open(f"{storm.dir}/loadgen.err", "w") as err:
            gen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err)
        try:
            for at, sig in ((args.warmup, signal.SIGUSR1),
                            (args.warmup + args.trigger, signal.SIGUSR2)):
                sleep_until_ns(epoch + round(at * 1e9))
                for b in pool:
                    b.proc.send_signal(sig)
            total = args.warmup + args.trigger + args.recovery
            gen.wait(timeout=total + (args.client_retries + 1) * args.timeout_ms / 1000 + 60)
        finally:
            if gen.poll() is None:
                gen.kill()
                gen.wait()
        cpu1 = lab.cpu_snapshot(proxy_pids, backend_pids)
        if gen.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n"
                               + targets.tail(f"{storm.dir}/loadgen.err"))
        with open(out) as f:
            result = json.load(f)
        keep_dir = storm.dir if args.keep_dir else None
    missing = [n for n, s in storm.stats.items() if s is None]
    if missing:
        raise RuntimeError(f"no per-bucket counts from {', '.join(missing)}")
    return {"arm": arm, "epoch_ns": epoch, "loadgen": result, "backends": storm.stats,
            "backend_counters": storm.counters_by_backend,
            "cpu": lab.cpu_usage(cpu0, cpu1, True), "dir": keep_dir}


# --- figures --------------------------------------------------------------------------------

class Series:
    """A run's per-bucket figures on loadgen's bucket grid (bucket i = [i, i+1) x bucket from
    the start of the first phase): loadgen's, and the sums over the backends."""

    BACKEND = ("received", "responded", "discarded", "queued_max")

    def __init__(self, args, run):
        self.bucket_s = args.bucket_ms / 1000
        lg = run["loadgen"]["buckets"]
        self.n = len(lg)
        self.lg = {k: [b.get(k) or 0 for b in lg]
                   for k in ("sent", "succeeded", "rejected", "timed_out", "errors", "ok_done",
                             "originals", "originals_succeeded", "retries_sent")}
        self.statuses = [b.get("statuses", {}) for b in lg]
        epoch_s = run["epoch_ns"] / 1e9
        self.be = {k: [0] * self.n for k in self.BACKEND}
        self.wait_max = [0.0] * self.n
        for st in run["backends"].values():
            offset = round((epoch_s - st["t0_s"]) / self.bucket_s)
            for i in range(self.n):
                j = i + offset
                if 0 <= j < len(st["received"]):
                    for k in self.BACKEND:
                        self.be[k][i] += st[k][j]
                    self.wait_max[i] = max(self.wait_max[i], st["wait_max_ms"][j])

    def idx(self, t_s):
        return max(0, min(self.n, round(t_s / self.bucket_s)))

    def total(self, key, t0, t1):
        src = self.be if key in self.BACKEND else self.lg
        return sum(src[key][self.idx(t0):self.idx(t1)])

    def window(self, t0, t1):
        """Figures of the window [t0, t1) seconds."""
        originals = self.total("originals", t0, t1)
        sends = self.total("sent", t0, t1)
        attempts = self.total("received", t0, t1)
        ok = self.total("ok_done", t0, t1)
        completed = self.total("responded", t0, t1) + self.total("discarded", t0, t1)
        statuses = {}
        for s in self.statuses[self.idx(t0):self.idx(t1)]:
            for code, count in s.items():
                statuses[code] = statuses.get(code, 0) + count
        lo, hi = self.idx(t0), self.idx(t1)
        return {
            "originals": originals, "sends": sends, "attempts": attempts, "ok_done": ok,
            "goodput_pct": 100 * ok / originals if originals else None,
            "proxy_amp": attempts / sends if sends else None,
            "total_amp": attempts / originals if originals else None,
            "wasted_pct": 100 * max(0.0, 1 - ok / completed) if completed else None,
            "queue_max": max(self.be["queued_max"][lo:hi], default=0),
            "wait_max_ms": max(self.wait_max[lo:hi], default=0.0),
            "timed_out": self.total("timed_out", t0, t1),
            "errors": self.total("errors", t0, t1),
            "statuses": statuses,
        }

    def recovery(self, args, start, end):
        """Seconds from START until the first of --recovery-hold / --recovery-window
        consecutive windows of --recovery-window s in which the originals sent that
        eventually succeeded are >= --recovery-ok-ratio of those sent (None: not before
        END)."""
        per = max(1, round(args.recovery_window / self.bucket_s))
        windows = max(1, round(args.recovery_hold / args.recovery_window))
        lo, hi = self.idx(start), self.idx(end)

        def good(i):
            sent = sum(self.lg["originals"][i:i + per])
            ok = sum(self.lg["originals_succeeded"][i:i + per])
            return sent > 0 and ok >= args.recovery_ok_ratio * sent

        for i in range(lo, hi - per * windows + 1):
            if all(good(i + k * per) for k in range(windows)):
                return (i - lo) * self.bucket_s
        return None


def summarize(args, run):
    s = Series(args, run)
    w, t, r = args.warmup, args.trigger, args.recovery
    return {"before": s.window(0, w), "during": s.window(w, w + t),
            "after": s.window(w + t, w + t + r), "recovery_s": s.recovery(args, w + t, w + t + r)}


def fmt(value, spec="{:.1f}"):
    return "-" if value is None else spec.format(value)


def median(values):
    """Median of VALUES, None counting as larger than any number (not recovered, no data);
    None if empty or if the middle is None."""
    if not values:
        return None
    ordered = sorted(values, key=lambda v: float("inf") if v is None else v)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    a, b = ordered[n // 2 - 1], ordered[n // 2]
    return None if a is None or b is None else (a + b) / 2


def status_mix(statuses, limit=4):
    top = sorted(statuses.items(), key=lambda kv: -kv[1])[:limit]
    return " ".join(f"{code}:{count}" for code, count in top) or "-"


HEAD = ("| arm | goodput % before / during / after | amp during: proxy / total "
        "| amp after: proxy / total | recovery s | wasted % during / after "
        "| backend queue max | non-2xx during (status:count) | timeouts during "
        "| proxy CPU % | others CPUs |")


def row(args, arm, sums, cpus, others):
    def m(phase, key):
        return median([x[phase][key] for x in sums])
    rec = median([x["recovery_s"] for x in sums])
    queue = median([max(x["during"]["queue_max"], x["after"]["queue_max"]) for x in sums])
    # A recovery must be held for --recovery-hold s, so none can start later than this:
    rec_text = f"{rec:.1f}" if rec is not None else f"> {args.recovery - args.recovery_hold:g}"
    statuses = {}
    for x in sums:
        for code, count in x["during"]["statuses"].items():
            if not code.startswith("2"):
                statuses[code] = statuses.get(code, 0) + count // len(sums)
    return (f"| {arm} | {fmt(m('before', 'goodput_pct'), '{:.0f}')} / "
            f"{fmt(m('during', 'goodput_pct'), '{:.0f}')} / "
            f"{fmt(m('after', 'goodput_pct'), '{:.0f}')} | "
            f"{fmt(m('during', 'proxy_amp'), '{:.2f}')} / "
            f"{fmt(m('during', 'total_amp'), '{:.2f}')} | "
            f"{fmt(m('after', 'proxy_amp'), '{:.2f}')} / "
            f"{fmt(m('after', 'total_amp'), '{:.2f}')} | {rec_text} | "
            f"{fmt(m('during', 'wasted_pct'), '{:.0f}')} / "
            f"{fmt(m('after', 'wasted_pct'), '{:.0f}')} | "
            f"{fmt(queue, '{:.0f}')} | "
            f"{status_mix(statuses)} | {fmt(m('during', 'timed_out'), '{:.0f}')} | "
            f"{fmt(median(cpus), '{:.0f}')} | {fmt(max(others), '{:.2f}')} |")


def table(args, runs, arms):
    lines = [HEAD, "|" + "---|" * (HEAD.count("|") - 1)]
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        if not mine:
            lines.append(f"| {arm} | " + " | ".join(["pending"] * (HEAD.count("|") - 2)) + " |")
            continue
        lines.append(row(args, arm, [r["summary"] for r in mine],
                         [r["cpu"]["proxy_pct"] for r in mine],
                         [r["cpu"]["others_cpus"] for r in mine]))
    return lines


def per_run_table(args, runs):
    lines = [HEAD.replace("| arm |", "| round | arm |"), "|" + "---|" * HEAD.count("|")]
    for r in runs:
        line = row(args, r["arm"], [r["summary"]], [r["cpu"]["proxy_pct"]],
                   [r["cpu"]["others_cpus"]])
        lines.append(f"| {r['round']} " + line)
    return lines


def timeline(args, runs, arms):
    """Per --timeline-step, each arm's goodput (% of the originals offered, by completion) /
    proxy amplification / total amplification, from the first round's run."""
    first = {}
    for r in runs:
        first.setdefault(r["arm"], Series(args, r))
    arms = [a for a in arms if a in first]
    head = "| t s | phase | " + " | ".join(f"{a} good% / amp proxy / amp total" for a in arms)
    lines = [head + " |", "|" + "---|" * (len(arms) + 2)]
    end = args.warmup + args.trigger + args.recovery
    t = 0.0
    while t < end - 1e-9:
        t1 = min(end, t + args.timeline_step)
        phase = ("warm-up" if t < args.warmup else
                 "TRIGGER" if t < args.warmup + args.trigger else "recovery")
        cells = []
        for a in arms:
            w = first[a].window(t, t1)
            cells.append(f"{fmt(w['goodput_pct'], '{:.0f}')} / {fmt(w['proxy_amp'], '{:.2f}')}"
                         f" / {fmt(w['total_amp'], '{:.2f}')}")
        lines.append(f"| {t:g} | {phase} | " + " | ".join(cells) + " |")
        t = t1
    return lines


def settings_lines(args):
    lines = [
        f"Backends: {args.backends} x slow_backend, W={args.workers} slots x S="
        f"{args.service_ms:g} ms each (unbounded FIFO, never cancels work): capacity "
        f"{args.capacity:.0f} req/s, {args.degraded_capacity:.0f} req/s during the trigger "
        f"({args.degraded_workers} slots each).",
        f"Clients: loadgen, open loop, {'Poisson' if args.poisson else 'fixed-rate'} "
        f"arrivals at {args.rate:.0f} req/s ({args.load:g} x capacity, "
        f"{args.rate / args.degraded_capacity:.2f} x the reduced capacity); each send times "
        f"out after {args.timeout_ms:g} ms; a failure (5xx, reset, timeout) is retried at "
        f"once, up to {args.client_retries} times.",
        f"Phases: {args.warmup:g} s warm-up, {args.trigger:g} s trigger (capacity halved), "
        f"{args.recovery:g} s recovery. Every proxy: one worker/thread, per-try backend "
        f"timeout {args.try_timeout_ms:g} ms, no concurrency limit.",
    ]
    lines += [f"{arm}: {text}." for arm, text in arm_settings(args).items() if arm in args.arms]
    lines.append(
        "goodput = original requests that eventually succeeded, completed in the phase, as % "
        "of the originals offered in it; amp proxy = requests received by the backends / "
        "client sends (originals + client retries) in the phase; amp total = received / "
        "originals; wasted = 1 - client successes / backend completions; recovery = from the "
        f"end of the trigger to the first {args.recovery_hold:g} s of consecutive "
        f"{args.recovery_window:g} s windows in which >= {args.recovery_ok_ratio:g} of the "
        f"originals sent eventually succeeded (\"> N\": never within the recovery phase).")
    return lines


def report(args, runs, arms, skipped):
    lines = ["# Retry-storm experiment", ""] + settings_lines(args)
    for arm, why in skipped.items():
        lines.append(f"{arm}: pending ({why}).")
    rounds = max((r["round"] for r in runs), default=0)
    lines += ["", f"## Results ({rounds} round{'s' if rounds != 1 else ''}"
                  f"{', medians' if rounds > 1 else ''})", ""] + table(args, runs, arms)
    if rounds > 1:
        lines += ["", "Per run:", ""] + per_run_table(args, runs)
    lines += ["", f"Timeline (round 1), per {args.timeline_step:g} s:", ""]
    lines += timeline(args, runs, arms)
    others = [r["cpu"]["others_cpus"] for r in runs]
    if others:
        lines += ["", f"CPU used by processes outside the experiment during the runs: max "
                      f"{max(others):.2f} of {os.cpu_count()} CPUs."]
    return "\n".join(lines)


def raw(run):
    """A run's raw data for the JSON file: loadgen's figures with its buckets as columns,
    the backends' per-bucket counts as they wrote them."""
    lg = dict(run["loadgen"])
    buckets = lg.pop("buckets")
    columns = {}
    for b in buckets:
        for k, v in b.items():
            columns.setdefault(k, []).append(v)
    lg["buckets"] = columns
    return {k: v for k, v in run.items() if k not in ("loadgen", "dir")} | {"loadgen": lg}


# --- main -----------------------------------------------------------------------------------

def main():
    args = parse_args()
    targets.exit_on_signals()
    lab.build(args)
    skipped = {}
    for arm in FLOODGATE_ARMS:
        if arm in args.arms:
            why = lab.floodgate_check(args.floodgate, floodgate_config(
                args, arm, targets.unused_port(), targets.unused_port(),
                [targets.unused_port() for _ in range(args.backends)]))
            if why:
                print(f"{arm} arm skipped: {why}", file=sys.stderr)
                skipped[arm] = why
    arms = [a for a in args.arms if a not in skipped]
    per_run = args.warmup + args.trigger + args.recovery + 6
    print(f"retry storm: {args.rounds} round(s) x {len(arms)} arms, about "
          f"{args.rounds * len(arms) * per_run / 60:.1f} min", file=sys.stderr, flush=True)
    runs = []
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(arms) if arms else 0
        for arm in arms[k:] + arms[:k]:
            run = run_one(args, arm)
            run["round"] = rnd
            run["summary"] = summarize(args, run)
            runs.append(run)
            s = run["summary"]
            print(f"round {rnd} {arm:18s} goodput {fmt(s['before']['goodput_pct'], '{:.0f}')}"
                  f"/{fmt(s['during']['goodput_pct'], '{:.0f}')}"
                  f"/{fmt(s['after']['goodput_pct'], '{:.0f}')}% amp during "
                  f"{fmt(s['during']['proxy_amp'], '{:.2f}')} proxy "
                  f"{fmt(s['during']['total_amp'], '{:.2f}')} total, "
                  + (f"recovery {s['recovery_s']:.1f} s" if s["recovery_s"] is not None
                     else "not recovered")
                  + f", others {run['cpu']['others_cpus']:.2f} CPUs"
                  + (f" (kept {run['dir']})" if run["dir"] else ""),
                  file=sys.stderr, flush=True)
    text = report(args, runs, args.arms, skipped)
    print(text)
    stem = write_results(args, "retry-storm", text, runs, skipped)
    print(f"\nresults: {stem}.txt, raw per-bucket data: {stem}.json")


def write_results(args, prefix, text, runs, skipped):
    """The report as bench/results/PREFIX-<time>.txt (with the command, settings and versions)
    and every run's raw data (raw()) beside it as .json; returns the path without extension."""
    os.makedirs(args.results_dir, exist_ok=True)
    stem = os.path.join(args.results_dir, time.strftime(prefix + "-%Y%m%d-%H%M%S"))
    command = shlex.join([sys.executable] + sys.argv)
    with open(stem + ".txt", "w") as f:
        f.write("# " + command + "\n")
        f.write("# " + json.dumps(vars(args)) + "\n")
        f.write("".join(f"# {line}\n" for line in compare.versions(args)) + "\n")
        f.write(text + "\n")
    with open(stem + ".json", "w") as f:
        json.dump({"command": command, "settings": vars(args), "versions": compare.versions(args),
                   "skipped": skipped, "runs": [raw(r) for r in runs]}, f,
                  separators=(",", ":"))
        f.write("\n")
    return stem


if __name__ == "__main__":
    main()
