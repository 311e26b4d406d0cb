"""Benchmark 3 of issue 14, brownout: a core and a non-core upstream on the one overload-lab
backend, the core one's goodput under a mixed load at 2x capacity against what it gets alone
(bench/adaptive/README.md)."""

import sys
import time

from adaptive_lab import (ad_tables, arrivals_text, check_configs, fmt, metric_window,
                          reasons_text, run_checked, run_one, stream_of, targets,
                          window_samples)


BO_ARMS = ("core-alone", "mix", "mix-nobrownout", "mix-recover-low", "mix-dwell",
           "mix-routecap")


CORE_UPSTREAM = """
[[upstreams]]
name = "core"
servers = ["127.0.0.1:{port}"]
keepalive = {keepalive}
keepalive_timeout = "{idle}s"

[[routes]]
host = "*"
path_prefix = "/core"
upstream = "core"
"""


def bo_config(args, arm):
    """Two upstreams on the one backend: `backend` (targets' frame, path /, not core) and
    `core` (path /core, the longer prefix wins), with the overload benchmark's ceiling."""
    brownout = {"core_routes": ["core"]}
    window = None
    caps = ""
    if arm == "mix-nobrownout":
        brownout = False
    elif arm == "mix-recover-low":
        brownout["recover_inflight_percent"] = args.bo_recover_low
    elif arm == "mix-dwell":
        window = args.bo_dwell_window_ms
    elif arm == "mix-routecap":
        brownout = False
        caps = f"\n[resilience.route_queue]\ncaps = {{ backend = {args.bo_routecap} }}\n"

    def config(port, admin, backend_port):
        return (targets.floodgate_config(port, admin, backend_port)
                + CORE_UPSTREAM.format(port=backend_port, keepalive=targets.KEEPALIVE,
                                       idle=targets.IDLE_TIMEOUT_S)
                + ad_tables(args, brownout, window) + caps)
    return config


def bo_streams(args, arm):
    cap = args.capacity
    core = args.bo_core_load * cap
    streams = [("core", "/core", [(args.bo_warmup, core), (args.bo_duration, core),
                                  (args.bo_post, core)])]
    if arm != "core-alone":
        streams.append(("noncore", "/", [
            (args.bo_warmup, args.bo_noncore_warmup_load * cap),
            (args.bo_duration, args.bo_noncore_load * cap),
            (args.bo_post, args.bo_noncore_post_load * cap)]))
    return streams


def bo_arm_text(args, arm):
    return {
        "core-alone": "core alone (no non-core load), brownout on",
        "mix": "brownout on, core_routes = [\"core\"], trigger 90 % / recover 60 % (defaults)",
        "mix-nobrownout": "brownout disabled: the adaptive ceiling alone",
        "mix-recover-low": f"brownout with recover_inflight_percent = {args.bo_recover_low}",
        "mix-dwell": f"brownout at its defaults, adaptive window = {args.bo_dwell_window_ms} ms"
                     " (brownout's dwell is one window)",
        "mix-routecap": f"brownout disabled; [resilience.route_queue] caps = {{ backend = "
                        f"{args.bo_routecap} }} (the non-core upstream)",
    }[arm]


def brownout(args, runs):
    t_start = time.monotonic()
    configs = {a: bo_config(args, a) for a in args.bo_arms}
    skipped = check_configs(args, configs)
    arms = [a for a in args.bo_arms if a not in skipped]
    per = args.bo_warmup + args.bo_duration + args.bo_post + 4
    print(f"brownout: {len(arms)} arms, about {per * len(arms) / 60:.1f} min",
          file=sys.stderr, flush=True)
    results = {}
    for arm in arms:
        run = run_checked(args, arm, lambda: run_one(args, arm, bo_streams(args, arm),
                                                     configs[arm]))
        run["test"] = "brownout"
        runs.append(run)
        results[arm] = run
        core = stream_of(run, "core")["phases"][1]
        print(f"  {arm:16s} core goodput {core['ok_done'] / core['duration_s']:.0f} req/s, "
              f"rejected {core['rejected']}, p50 {fmt(core['success_p50_ms'])} ms, others "
              f"{run['cpu']['others_cpus']:.2f} CPUs", file=sys.stderr, flush=True)
    lines = bo_report(args, results, arms, skipped)
    took = time.monotonic() - t_start
    lines += ["", f"Run time: {took / 60:.1f} min."]
    print(f"brownout took {took / 60:.1f} min", file=sys.stderr, flush=True)
    return lines


def bo_report(args, results, arms, skipped):
    cap = args.capacity
    lines = ["## Brownout: a core upstream under a mixed overload", "",
             f"Backend: the lab's (W={args.workers} x S={args.service_ms:g} ms, {cap:.0f} "
             f"req/s nominal), shared by two upstreams: `core` (path /core, core_routes) and "
             f"`backend` (path /, not core). Load: core {args.bo_core_load:g} x = "
             f"{args.bo_core_load * cap:.0f} req/s throughout; non-core "
             f"{args.bo_noncore_warmup_load:g} x for the {args.bo_warmup:g} s warm-up, "
             f"{args.bo_noncore_load:g} x = {args.bo_noncore_load * cap:.0f} req/s for the "
             f"{args.bo_duration:g} s overload, {args.bo_noncore_post_load:g} x for "
             f"{args.bo_post:g} s after it; {arrivals_text(args)} arrivals, client timeout "
             f"{args.timeout_ms:g} ms.",
             f"Adaptive admission as floodgate-adaptive in the overload benchmark (min "
             f"{args.ad_min_limit}, max {args.ad_max_limit}, steps {args.ad_decrease_step} / "
             f"{args.ad_increase_step}, high_latency {args.ad_high_latency_ms} ms, window "
             f"{args.ad_window_ms} ms). Arms:"]
    lines += [f"- {a}: {bo_arm_text(args, a)}." for a in arms]
    for arm, why in skipped.items():
        lines.append(f"{arm}: pending ({why}).")
    alone = results.get("core-alone")
    alone_good = None
    if alone:
        ph = stream_of(alone, "core")["phases"][1]
        alone_good = ph["ok_done"] / ph["duration_s"]
    head = ("| arm | core goodput req/s (% of alone) | target | core p50 / p99 ms "
            "| core refused (by reason) | core timeouts | non-core goodput req/s "
            "| non-core shed by brownout | non-core refused, other reasons "
            "| brownout entries (per s) / on in samples | ceiling min / mean / max "
            "| after: core / non-core goodput req/s | others CPUs |")
    lines += ["", "During the overload:", "", head, "|" + "---|" * (head.count("|") - 1)]
    t0, t1 = args.bo_warmup, args.bo_warmup + args.bo_duration
    for arm in arms:
        run = results[arm]
        core = stream_of(run, "core")["phases"]
        good = core[1]["ok_done"] / core[1]["duration_s"]
        pct = 100 * good / alone_good if alone_good else None
        target = "-" if arm == "core-alone" or pct is None else (
            "met" if pct >= 95 else "NOT met")
        w = metric_window(run, t0, t1) or {}
        rej = w.get("rejected", {})
        core_rej = {k.split("/")[1]: v for k, v in rej.items() if k.startswith("core/")}
        shed = rej.get("backend/brownout", 0)
        other = {k.split("/")[1]: v for k, v in rej.items()
                 if k.startswith("backend/") and k != "backend/brownout"}
        nc_good, nc_after = "-", "-"
        if "noncore" in run["stream_names"]:
            nc = stream_of(run, "noncore")["phases"]
            nc_good = f"{nc[1]['ok_done'] / nc[1]['duration_s']:.0f}"
            nc_after = f"{nc[2]['ok_done'] / nc[2]['duration_s']:.0f}"
        entries = w.get("to_active")
        lines.append(
            f"| {arm} | {good:.0f} ({fmt(pct)}) | {target} | "
            f"{fmt(core[1]['success_p50_ms'])} / {fmt(core[1]['success_p99_ms'])} | "
            f"{core[1]['rejected']} ({reasons_text(core_rej)}) | {core[1]['timed_out']} | "
            f"{nc_good} | {shed:.0f} | {reasons_text(other)} | "
            f"{fmt(entries, '{:.0f}')} ({fmt(entries / args.bo_duration if entries else 0)}) / "
            f"{100 * w.get('brownout_share', 0):.0f} % | "
            + (f"{w['limit_min']:.0f} / {w['limit_mean']:.1f} / {w['limit_max']:.0f}"
               if w else "-")
            + f" | {core[2]['ok_done'] / core[2]['duration_s']:.0f} / {nc_after} | "
            + "/".join(f"{o:.2f}" for o in run["others_attempts"]) + " |")
    lines += ["", "Timeline of the mixed arms (core goodput req/s by completion time per "
              "1 s / brownout entries in it / ceiling at its end):", ""]
    lines += bo_timeline(args, results, [a for a in arms if a != "core-alone"])
    return lines


def bo_timeline(args, results, arms, step_s=1.0):
    per = max(1, round(step_s * 1000 / args.bucket_ms))
    lines = ["| t s | " + " | ".join(arms) + " |", "|" + "---|" * (len(arms) + 1)]
    n = max((len(stream_of(results[a], "core")["buckets"]) for a in arms), default=0)
    for i in range(0, n, per):
        t0, t1 = i * args.bucket_ms / 1000, (i + per) * args.bucket_ms / 1000
        cells = []
        for a in arms:
            b = stream_of(results[a], "core")["buckets"][i:i + per]
            ok = sum(x["ok_done"] for x in b) / (len(b) * args.bucket_ms / 1000) if b else 0
            s = window_samples(results[a], t0, t1)
            entries = (s[-1]["transitions"]["active"] - s[0]["transitions"]["active"]
                       if len(s) >= 2 else None)
            cells.append(f"{ok:.0f} / {fmt(entries, '{:.0f}')} / "
                         + (f"{s[-1]['limit']:.0f}" if s else "-"))
        lines.append(f"| {t0:.0f}-{t1:.0f} | " + " | ".join(cells) + " |")
    return lines
