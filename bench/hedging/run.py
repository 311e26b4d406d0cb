#!/usr/bin/env python3
"""The hedging-vs-tail benchmark (issue 13): p50 / p99 / p99.9 latency through a pool of three
backends of which one answers every request after 1 s, with floodgate's hedging off and on,
and the extra backend load hedging cost.

Model (see bench/hedging/README.md): three slow_backend instances in one round-robin pool, two
fast (--fast-ms of service, --fast-workers slots) and the last one slow (--slow-ms, with
--slow-workers slots: enough that it never queues, so it is a pure tail, not an overload).
loadgen sends --rate req/s, open loop (Poisson by default), --warmup s then --duration s
(measured), every client with a --timeout-ms long enough to wait for the slow backend. Arms:
  floodgate-nohedge    hedging off (the default); retry budget at its default (10 %)
  floodgate-hedge      [resilience.hedging] delay --delay, retry budget --budget-ratio (10 %)
  floodgate-hedge-all  the same with --budget-all-ratio (100 %): a budget that admits every
                       hedge (a third of the requests need one; 10 % cannot cover them)
  floodgate-least      hedging as floodgate-hedge, balance = "least_active" (not default)
  floodgate-least-nohedge  balance = "least_active", hedging off (not default): what
                       selection alone does to the tail
  haproxy, nginx       round robin, no hedging (neither hedges): the reference "off" shape

Measured: the success latency of the requests sent in the measured phase (loadgen --p999,
from their scheduled send time), every request each backend received per 100 ms
(slow_backend --stats-out, on loadgen's bucket grid), floodgate's hedge counters and retry
budget from its admin /metrics (sampled every --sample-s during the measured phase), and after
the run floodgate_backend_active and floodgate_pool_active, which must be back at 0.
Extra attempts = requests the backends received / client requests - 1, over the measured
phase. Arms are interleaved over --rounds (the order rotates per round; every arm of a round
gets the same arrival schedule). Prints a markdown table; writes it with the settings to
bench/results/hedging-<timestamp>.txt and the raw data to the .json beside it.
Usage: python3 bench/hedging/run.py [--arms floodgate-nohedge,floodgate-hedge,...]
  [--rounds N] [--help]
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import compare  # noqa: E402  (versions)
import harness  # noqa: E402  (admin_get, Metrics: the admin /metrics client and parser)
import targets  # noqa: E402  (configuration frames, ports)
from overload import run as lab  # noqa: E402  (build, floodgate_check, cpu_*)
from retry_storm import run as storm  # noqa: E402  (StormLab, Series, median, fmt, raw)

ARMS = ("floodgate-nohedge", "floodgate-hedge", "floodgate-hedge-all", "floodgate-least",
        "floodgate-least-nohedge", "haproxy", "nginx")
DEFAULT_ARMS = ("floodgate-nohedge", "floodgate-hedge", "floodgate-hedge-all", "haproxy",
                "nginx")
FLOODGATE_ARMS = tuple(a for a in ARMS if a.startswith("floodgate"))
OFF_ARM = "floodgate-nohedge"      # the p99 the others' cut is measured against
HEDGE_RESULTS = ("sent", "won_by_hedge", "won_by_primary", "cancelled")


# --- options --------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                   help="comma-separated subset of " + ",".join(ARMS))
    p.add_argument("--rounds", type=int, default=1, help="rounds of all arms, interleaved")
    p.add_argument("--fast-ms", type=float, default=2.0, help="service time of the fast two")
    p.add_argument("--fast-workers", type=int, default=32, help="slots of each fast backend")
    p.add_argument("--slow-ms", type=float, default=1000.0, help="service time of the slow one")
    p.add_argument("--slow-workers", type=int, default=512,
                   help="slots of the slow backend (>= rate x slow-ms: it never queues)")
    p.add_argument("--rate", type=float, default=250.0, help="client requests per second")
    p.add_argument("--fixed-rate", action="store_true",
                   help="arrivals at a fixed rate instead of Poisson")
    p.add_argument("--seed", type=int, default=1,
                   help="loadgen seed of round 1 (round N: seed + N - 1)")
    p.add_argument("--warmup", type=float, default=2.0,
                   help="seconds before the measured phase (opens connections)")
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds per arm")
    p.add_argument("--timeout-ms", type=float, default=5000.0, help="client timeout")
    p.add_argument("--delay", default="50ms", help="hedging.delay")
    p.add_argument("--budget-ratio", type=int, default=10,
                   help="retry_budget.ratio_percent of floodgate-hedge and floodgate-least "
                        "(and floodgate-nohedge, where it is unused)")
    p.add_argument("--budget-all-ratio", type=int, default=100,
                   help="retry_budget.ratio_percent of floodgate-hedge-all")
    p.add_argument("--budget-window", default="10s", help="retry_budget.window")
    p.add_argument("--target-cut", type=float, default=5.0,
                   help="issue 13's target: p99 cut at least this many times ...")
    p.add_argument("--target-extra-pct", type=float, default=10.0,
                   help="... for at most this many %% extra backend attempts")
    p.add_argument("--sample-s", type=float, default=1.0,
                   help="floodgate /metrics sampling period during the measured phase")
    p.add_argument("--bucket-ms", type=float, default=100.0, help="time bucket")
    lab.add_lab_options(p, "configs, logs, raw files")
    args = p.parse_args()
    lab.check_arms(p, args, ARMS)
    # The lab starts every backend with --workers / --service-ms: the fast ones' values (the
    # slow one's override them).
    args.workers, args.service_ms = args.fast_workers, args.fast_ms
    args.delay_s = storm.duration_s(args.delay)
    return args


# --- configurations -------------------------------------------------------------------------

def floodgate_config(args, arm, port, admin_port, backend_ports):
    """bench/targets.py's floodgate frame over the pool, with the arm's hedging and budget."""
    pool = 'balance = "least_active"\n' if arm.startswith("floodgate-least") else ""
    ratio = args.budget_all_ratio if arm == "floodgate-hedge-all" else args.budget_ratio
    hedging = "false" if arm.endswith("-nohedge") else "true"
    return targets.floodgate_config(port, admin_port, backend_ports, pool) + f"""
[resilience.retry_budget]
enabled = true
ratio_percent = {ratio}
window = "{args.budget_window}"

[resilience.hedging]
enabled = {hedging}
delay = "{args.delay_s * 1000:g}ms"
safe_methods = ["GET", "HEAD"]
"""


def arm_settings(args):
    """One line per arm: what it was run with."""
    budget = f"window = {args.budget_window}"
    hedge = f"hedging delay = {args.delay_s * 1000:g} ms, safe_methods GET, HEAD"
    return {
        "floodgate-nohedge": f"hedging off; retry_budget ratio_percent = {args.budget_ratio}, "
                             f"{budget}; round_robin",
        "floodgate-hedge": f"{hedge}; retry_budget ratio_percent = {args.budget_ratio}, "
                           f"{budget}; round_robin",
        "floodgate-hedge-all": f"{hedge}; retry_budget ratio_percent = "
                               f"{args.budget_all_ratio}, {budget}; round_robin",
        "floodgate-least": f"{hedge}; retry_budget ratio_percent = {args.budget_ratio}, "
                           f"{budget}; balance = least_active",
        "floodgate-least-nohedge": f"hedging off; retry_budget ratio_percent = "
                                   f"{args.budget_ratio}, {budget}; balance = least_active",
        "haproxy": "balance roundrobin, no hedging (HAProxy has none)",
        "nginx": "round robin, no hedging (nginx has none)",
    }


class HedgeLab(storm.StormLab):
    """The retry-storm lab's pool and proxies, with two fast backends and a slow one."""

    def __init__(self, args):
        super().__init__(args)
        # A readiness GET that reaches the slow backend takes --slow-ms.
        self.probe_timeout_s = args.slow_ms / 1000 + 2.0

    def start_hedge_pool(self):
        a = self.args
        slow = ["--service-ms", f"{a.slow_ms:g}", "--workers", str(a.slow_workers)]
        return self.start_pool([[], [], slow])

    def proxy_config(self, arm, port, admin_port, backend_ports):
        if arm == "haproxy":
            return targets.haproxy_config(port, backend_ports, targets.nofile_hard(), False,
                                          "    balance roundrobin\n")
        if arm == "nginx":
            return targets.nginx_proxy_config(self.dir, port, backend_ports,
                                              targets.nofile_hard(), False)
        return floodgate_config(self.args, arm, port, admin_port, backend_ports)


# --- floodgate's /metrics -------------------------------------------------------------------

def scrape(admin_port):
    """floodgate's /metrics, parsed (harness.Metrics), or None if it did not answer."""
    try:
        status, _, body = harness.admin_get(admin_port, "/metrics", timeout=5)
    except (OSError, AssertionError):
        return None
    return harness.Metrics(body.decode()) if status == 200 else None


def sample(m, t_s):
    """What the run keeps of one scrape: the hedge counters, the budget, the active gauges."""
    hedges = {r: m.value("floodgate_hedges_total", result=r) for r in HEDGE_RESULTS}
    budget = {l.get("upstream", ""): v for n, l, v in m.samples
              if n == "floodgate_retry_budget_remaining"}
    backend_active = {l.get("backend", ""): v for n, l, v in m.samples
                      if n == "floodgate_backend_active"}
    return {"t_s": round(t_s, 3), "hedges": hedges, "budget_remaining": budget,
            "backend_active": backend_active,
            "pool_active": m.value("floodgate_pool_active"),
            "inflight": m.value("floodgate_inflight_requests")}


def settle(admin_port, timeout_s=5.0):
    """Scrapes until floodgate_backend_active and floodgate_pool_active are all 0 (or
    TIMEOUT_S): the first scrape after the run, and how long the gauges took to reach 0
    (None: not within TIMEOUT_S)."""
    t0 = time.monotonic()
    first = last = None
    while True:
        m = scrape(admin_port)
        now = time.monotonic() - t0
        if m is not None:
            last = sample(m, now)
            first = first or last
            if last["pool_active"] == 0 and not any(last["backend_active"].values()):
                return first, last, now
        if now > timeout_s:
            return first, last, None
        time.sleep(0.1)


# --- one run --------------------------------------------------------------------------------

def run_one(args, arm, seed):
    """One arm, fresh processes: the loadgen result, each backend's per-bucket counts, the
    /metrics samples, the gauges after the run, the CPU used and the time origin."""
    with HedgeLab(args) as hl:
        pool = hl.start_hedge_pool()
        proxy = hl.start_proxy(arm, [b.port for b in pool])
        proxy_pids = proxy.refresh_pids()
        backend_pids = [pid for b in pool for pid in b.refresh_pids()]
        # loadgen starts on a bucket boundary of CLOCK_MONOTONIC, where the backends' buckets
        # start too (see retry_storm's run_one).
        bucket_ns = round(args.bucket_ms * 1e6)
        epoch = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 300_000_000) // bucket_ns
        epoch = (epoch + 1) * bucket_ns
        out = f"{hl.dir}/loadgen.json"
        cmd = [os.path.join(args.build_dir, "loadgen"), "--port", str(proxy.port),
               "--timeout-ms", f"{args.timeout_ms:g}", "--bucket-ms", f"{args.bucket_ms:g}",
               "--start-at-ns", str(epoch), "--p999", "--out", out,
               "--phase", f"{args.warmup:g}s@{args.rate:g}",
               "--phase", f"{args.duration:g}s@{args.rate:g}"]
        if not args.fixed_rate:
            cmd += ["--poisson", "--seed", str(seed)]
        cpu0 = lab.cpu_snapshot(proxy_pids, backend_pids)
        samples = []
        with open(f"{hl.dir}/loadgen.err", "w") as err:
            gen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err)
        try:
            if proxy.admin_port is not None:    # floodgate: sample the measured phase
                k = 0
                while True:
                    at = args.warmup + k * args.sample_s
                    if at > args.warmup + args.duration + 1e-9:
                        break
                    storm.sleep_until_ns(epoch + round(at * 1e9))
                    m = scrape(proxy.admin_port)
                    if m is not None:
                        samples.append(sample(m, at))
                    k += 1
            gen.wait(timeout=args.warmup + args.duration + args.timeout_ms / 1000 + 60)
        finally:
            if gen.poll() is None:
                gen.kill()
                gen.wait()
        cpu1 = lab.cpu_snapshot(proxy_pids, backend_pids)
        after = None
        if proxy.admin_port is not None:
            first, last, zero_after = settle(proxy.admin_port)
            after = {"first": first, "last": last, "zero_after_s": zero_after}
        if gen.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed:\n"
                               + targets.tail(f"{hl.dir}/loadgen.err"))
        with open(out) as f:
            result = json.load(f)
        keep_dir = hl.dir if args.keep_dir else None
    missing = [n for n, s in hl.stats.items() if s is None]
    if missing:
        raise RuntimeError(f"no per-bucket counts from {', '.join(missing)}")
    return {"arm": arm, "seed": seed, "epoch_ns": epoch, "loadgen": result,
            "backends": hl.stats, "backend_counters": hl.counters_by_backend,
            "metrics": samples, "after": after, "cpu": lab.cpu_usage(cpu0, cpu1, True),
            "dir": keep_dir}


# --- figures --------------------------------------------------------------------------------

def summarize(args, run):
    """The measured phase's figures of one run."""
    ph = run["loadgen"]["phases"][1]
    t0, t1 = args.warmup, args.warmup + args.duration
    window = storm.Series(args, run).window(t0, t1)
    per_backend = {name: storm.Series(args, dict(run, backends={name: st})).total(
        "received", t0, t1) for name, st in run["backends"].items()}
    s = {"sent": ph["sent"], "succeeded": ph["succeeded"], "rejected": ph["rejected"],
         "timed_out": ph["timed_out"], "errors": ph["errors"],
         "failed": ph["rejected"] + ph["timed_out"] + ph["errors"],
         "p50": ph["success_p50_ms"], "p99": ph["success_p99_ms"],
         "p999": ph.get("success_p999_ms"), "max": ph["success_max_ms"],
         "attempts": window["attempts"], "sends": window["sends"],
         "extra_pct": (100 * (window["attempts"] / window["sends"] - 1)
                       if window["sends"] else None),
         "per_backend": per_backend, "hedges": None, "budget_min": None, "after": None}
    m = run["metrics"]
    if len(m) >= 2:
        s["hedges"] = {r: m[-1]["hedges"][r] - m[0]["hedges"][r] for r in HEDGE_RESULTS}
        s["hedged_pct"] = 100 * s["hedges"]["sent"] / ph["sent"] if ph["sent"] else None
        budgets = [min(x["budget_remaining"].values()) for x in m if x["budget_remaining"]]
        s["budget_min"] = min(budgets) if budgets else None
    if run["after"] is not None and run["after"]["first"] is not None:
        first = run["after"]["first"]
        s["after"] = {"backend_active": sum(first["backend_active"].values()),
                      "pool_active": first["pool_active"],
                      "zero_after_s": run["after"]["zero_after_s"]}
    return s


fmt, median = storm.fmt, storm.median


def m_of(sums, key, sub=None):
    values = [(x[key] or {}).get(sub) if sub else x[key] for x in sums]
    return median([v for v in values if v is not None] or [None])


def after_text(sums):
    """Gauges at the first scrape after the run: "0 / 0" when clean, else the worst seen."""
    afters = [x["after"] for x in sums if x["after"] is not None]
    if not afters:
        return "-"
    backend = max(a["backend_active"] for a in afters)
    pool = max(a["pool_active"] for a in afters)
    text = f"{backend:.0f} / {pool:.0f}"
    if any(a["zero_after_s"] is None for a in afters):
        text += " (not 0 after 5 s)"
    elif backend or pool:
        text += f" (0 after {max(a['zero_after_s'] for a in afters):.1f} s)"
    return text


HEAD = ("| arm | p50 ms | p99 ms | p99.9 ms | max ms | p99 cut vs off | hedges sent "
        "(% of requests) | won by hedge / primary | cancelled | budget left min "
        "| extra backend attempts | failed | active after: backend / pool "
        "| proxy CPU % | others CPUs |")


def row(args, arm, sums, cpus, others, off_p99):
    p99 = m_of(sums, "p99")
    cut = off_p99 / p99 if off_p99 and p99 else None
    hedged = [x for x in sums if x["hedges"] is not None]
    if hedged:
        sent = m_of(hedged, "hedges", "sent")
        hedges = (f"{sent:.0f} ({fmt(m_of(hedged, 'hedged_pct'))} %) | "
                  f"{m_of(hedged, 'hedges', 'won_by_hedge'):.0f} / "
                  f"{m_of(hedged, 'hedges', 'won_by_primary'):.0f} | "
                  f"{m_of(hedged, 'hedges', 'cancelled'):.0f} | "
                  f"{fmt(m_of(hedged, 'budget_min'), '{:.0f}')}")
    else:
        hedges = "- | - | - | -"
    failed = m_of(sums, "failed")
    return (f"| {arm} | {fmt(m_of(sums, 'p50'))} | {fmt(p99)} | {fmt(m_of(sums, 'p999'))} | "
            f"{fmt(m_of(sums, 'max'), '{:.0f}')} | {fmt(cut, '{:.1f}x')} | {hedges} | "
            f"{fmt(m_of(sums, 'extra_pct'), '{:+.1f} %')} | "
            f"{fmt(failed, '{:.0f}')} of {m_of(sums, 'sent'):.0f} | {after_text(sums)} | "
            f"{fmt(median(cpus), '{:.0f}')} | {fmt(max(others), '{:.2f}')} |")


def off_p99(runs, rnd=None):
    mine = [r["summary"] for r in runs if r["arm"] == OFF_ARM and rnd in (None, r["round"])]
    return m_of(mine, "p99") if mine else None


def table(args, runs, arms):
    lines = [HEAD, "|" + "---|" * (HEAD.count("|") - 1)]
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        if not mine:
            lines.append(f"| {arm} | " + " | ".join(["pending"] * (HEAD.count("|") - 2)) + " |")
            continue
        lines.append(row(args, arm, [r["summary"] for r in mine],
                         [r["cpu"]["proxy_pct"] for r in mine],
                         [r["cpu"]["others_cpus"] for r in mine], off_p99(runs)))
    return lines


def per_run_table(args, runs):
    lines = [HEAD.replace("| arm |", "| round | arm |"), "|" + "---|" * HEAD.count("|")]
    for r in runs:
        line = row(args, r["arm"], [r["summary"]], [r["cpu"]["proxy_pct"]],
                   [r["cpu"]["others_cpus"]], off_p99(runs, r["round"]))
        lines.append(f"| {r['round']} " + line)
    return lines


def backend_table(runs, arms):
    """Where the attempts went: each backend's share of the measured phase's attempts, and
    the connections it accepted over the whole run (a cancelled attempt closes its connection,
    so every hedge that wins costs the slow backend a new one); medians over rounds."""
    names = (("backend1", "fast 1"), ("backend2", "fast 2"), ("backend3", "slow"))
    lines = ["| arm | " + " | ".join(f"{label}: attempts % / connections" for _, label in names)
             + " |", "|---|---|---|---|"]
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        if not mine:
            continue
        cells = []
        for name, _ in names:
            shares = [100 * r["summary"]["per_backend"][name] / r["summary"]["attempts"]
                      for r in mine if r["summary"]["attempts"]]
            conns = [r["backend_counters"].get(name, {}).get("accepted") for r in mine]
            cells.append(f"{fmt(median(shares), '{:.1f} %')} / "
                         f"{fmt(median([c for c in conns if c is not None] or [None]), '{:.0f}')}")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


def verdicts(args, runs, arms):
    """Issue 13's target for each hedging arm: p99 cut >= --target-cut for <= --target-extra-pct
    extra attempts."""
    off = off_p99(runs)
    lines = []
    for arm in arms:
        sums = [r["summary"] for r in runs if r["arm"] == arm]
        if arm == OFF_ARM or not arm.startswith("floodgate") or not sums or not off:
            continue
        p99, extra = m_of(sums, "p99"), m_of(sums, "extra_pct")
        if p99 is None or extra is None:
            continue
        cut = off / p99
        ok_cut, ok_extra = cut >= args.target_cut, extra <= args.target_extra_pct
        verdict = "met" if ok_cut and ok_extra else "not met"
        lines.append(f"- {arm}: p99 cut {cut:.1f}x ({'>=' if ok_cut else '<'} "
                     f"{args.target_cut:g}x) for {extra:+.2f} % attempts "
                     f"({'<=' if ok_extra else '>'} {args.target_extra_pct:g} %): "
                     f"target {verdict}.")
    return lines


def settings_lines(args):
    share = 1 / 3
    lines = [
        f"Backends: one round-robin pool of 3 slow_backend instances: 2 fast ("
        f"{args.fast_ms:g} ms of service, {args.fast_workers} slots) and 1 slow "
        f"({args.slow_ms:g} ms, {args.slow_workers} slots); none queues at the offered rate.",
        f"Clients: loadgen, open loop, {'fixed-rate' if args.fixed_rate else 'Poisson'} "
        f"arrivals at {args.rate:g} req/s, {args.warmup:g} s warm-up then {args.duration:g} s "
        f"measured; client timeout {args.timeout_ms:g} ms. Latency: successful requests sent "
        f"in the measured phase, from their scheduled send time.",
        "Every proxy: one worker/thread, keep-alive to the backends, no concurrency limit.",
    ]
    lines += [f"{arm}: {text}." for arm, text in arm_settings(args).items() if arm in args.arms]
    lines.append(
        "p99 cut vs off = floodgate-nohedge's p99 / the arm's; hedges = floodgate_hedges_total "
        "over the measured phase (from /metrics); budget left min = the lowest "
        f"floodgate_retry_budget_remaining seen (sampled every {args.sample_s:g} s); extra "
        "backend attempts = requests the 3 backends received in the measured phase / client "
        "requests sent in it - 1; failed = non-2xx + timeouts + errors; active after = "
        "floodgate_backend_active (summed over the backends) / floodgate_pool_active at the "
        "first scrape after the last response.")
    lines.append(
        f"Arithmetic: round robin sends {100 * share:.1f} % of first attempts to the slow "
        f"backend, so a p99 below {args.slow_ms:g} ms needs >= {100 * share - 1:.1f} % of "
        f"requests hedged (>= {100 * share - 1:.1f} % extra attempts); a budget of "
        f"{args.budget_ratio} % leaves ~{100 * share - args.budget_ratio:.0f} % of requests "
        f"at {args.slow_ms:g} ms, above the p99 and p99.9 ranks.")
    return lines


def report(args, runs, arms, skipped):
    lines = ["# Hedging vs tail", ""] + settings_lines(args)
    for arm, why in skipped.items():
        lines.append(f"{arm}: pending ({why}).")
    rounds = max((r["round"] for r in runs), default=0)
    lines += ["", f"## Results ({rounds} round{'s' if rounds != 1 else ''}"
                  f"{', medians' if rounds > 1 else ''})", ""] + table(args, runs, arms)
    lines += ["", f"Issue 13's target (p99 cut >= {args.target_cut:g}x for <= "
                  f"{args.target_extra_pct:g} % extra attempts):", ""]
    lines += verdicts(args, runs, arms)
    lines += ["", "By backend: % of the attempts in the measured phase / connections accepted "
                  "over the whole run:", ""]
    lines += backend_table(runs, arms)
    if rounds > 1:
        lines += ["", "Per run:", ""] + per_run_table(args, runs)
    others = [r["cpu"]["others_cpus"] for r in runs]
    if others:
        lines += ["", f"CPU used by processes outside the experiment during the runs: max "
                      f"{max(others):.2f} of {os.cpu_count()} CPUs."]
    return "\n".join(lines)


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
                [targets.unused_port() for _ in range(3)]))
            if why:
                print(f"{arm} arm skipped: {why}", file=sys.stderr)
                skipped[arm] = why
    arms = [a for a in args.arms if a not in skipped]
    per_run = args.warmup + args.duration + 4
    print(f"hedging: {args.rounds} round(s) x {len(arms)} arms, about "
          f"{args.rounds * len(arms) * per_run / 60:.1f} min", file=sys.stderr, flush=True)
    runs = []
    for rnd in range(1, args.rounds + 1):
        k = (rnd - 1) % len(arms) if arms else 0
        for arm in arms[k:] + arms[:k]:
            run = run_one(args, arm, args.seed + rnd - 1)
            run["round"] = rnd
            run["summary"] = s = summarize(args, run)
            runs.append(run)
            hedges = s["hedges"] or {}
            print(f"round {rnd} {arm:19s} p50/p99/p99.9 {fmt(s['p50'])}/{fmt(s['p99'])}/"
                  f"{fmt(s['p999'])} ms, extra attempts {fmt(s['extra_pct'], '{:+.1f}')} %, "
                  f"hedges sent {hedges.get('sent', '-')}, failed {s['failed']}, "
                  f"others {run['cpu']['others_cpus']:.2f} CPUs"
                  + (f" (kept {run['dir']})" if run["dir"] else ""),
                  file=sys.stderr, flush=True)
    text = report(args, runs, args.arms, skipped)
    print(text)
    stem = storm.write_results(args, "hedging", text, runs, skipped)
    print(f"\nresults: {stem}.txt, raw data: {stem}.json")


if __name__ == "__main__":
    main()
