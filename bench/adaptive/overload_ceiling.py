"""Benchmark 2 of issue 14: the overload lab's 1x / 2x / 4x open-loop overload and burst with
the adaptive ceiling in place of a hand-set pool cap, beside the lab's floodgate arm; goodput
against the backend's measured ceiling with W requests in flight (bench/adaptive/README.md)."""

import re
import subprocess
import sys
import time

from adaptive_lab import (AdaptiveLab, ad_tables, check_configs, fmt, lab, metric_window,
                          reasons_text, run_checked, run_one, targets)


OV_ARMS = ("floodgate", "floodgate-adaptive", "floodgate-adaptive-nobrownout")


def ov_config(args, arm):
    def config(port, admin, backend_port):
        if arm == "floodgate":
            return lab.floodgate_config(args, port, admin, backend_port)
        brownout = False if arm == "floodgate-adaptive-nobrownout" else None
        return targets.floodgate_config(port, admin, backend_port) + ad_tables(args, brownout)
    return config


def measure_ceiling(args):
    """The backend's ceiling with exactly W requests in flight: wrk with W connections
    straight at a fresh slow_backend (bench/overload/README.md's `direct`-at-W figure)."""
    def one():
        with AdaptiveLab(args) as al:
            backend = al.start_backend("backend")
            pids = backend.refresh_pids()
            cpu0 = lab.cpu_snapshot([], pids)
            out = subprocess.run(["wrk", "-t1", f"-c{args.workers}", f"-d{args.ceiling_s:g}s",
                                  f"http://127.0.0.1:{backend.port}/"],
                                 capture_output=True, text=True, timeout=args.ceiling_s + 30)
            cpu1 = lab.cpu_snapshot([], pids)
        m = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
        if not m:
            raise RuntimeError("wrk failed:\n" + out.stdout + out.stderr)
        # wrk is a child like loadgen, so the CPU accounting is the lab's.
        return {"cpu": lab.cpu_usage(cpu0, cpu1, False), "rps": float(m.group(1))}
    r = run_checked(args, "ceiling", one)
    return r["rps"], r["others_attempts"]


def ov_row_extra(args, test, r, ceiling):
    """Figures of a steady run's measured phase beside the lab's columns: goodput (req/s and %
    of the ceiling), the controller's /metrics window, how long the ceiling took to come down
    to 2 x W (None: it never did), and the success p99 of the 100 ms buckets sent after the
    first --settle-s of the phase (median and highest): the phase's p99 mixes the settling
    in."""
    ph = r["phases"][test["measured"]]
    t0, t1 = ph["start_s"], ph["start_s"] + ph["duration_s"]
    w = metric_window(r, t0, t1)
    good = ph["ok_done"] / ph["duration_s"]
    settled = next((s["t_s"] - t0 for s in r["metrics"]
                    if t0 <= s["t_s"] <= t1 and s["limit"] <= 2 * args.workers), None)
    p99s = sorted(b["success_p99_ms"] for b in r["buckets"]
                  if t0 + args.settle_s - 1e-6 <= b["t_s"] < t1 - 1e-6
                  and b["success_p99_ms"] is not None)
    later = (p99s[len(p99s) // 2], p99s[-1]) if p99s else (None, None)
    return good, 100 * good / ceiling, w, settled, later


def overload(args, runs):
    t_start = time.monotonic()
    configs = {a: ov_config(args, a) for a in args.arms}
    skipped = check_configs(args, configs)
    arms = [a for a in args.arms if a not in skipped]
    tests = lab.make_tests(args)
    est = sum(sum(s for s, _ in t["phases"]) + 4 for t in tests) * len(arms) + args.ceiling_s + 3
    print(f"overload: {len(tests)} tests x {len(arms)} arms, about {est / 60:.1f} min",
          file=sys.stderr, flush=True)
    if args.ceiling_rps is None:
        args.ceiling_rps, args.ceiling_others = measure_ceiling(args)
    print(f"  backend ceiling with {args.workers} in flight: {args.ceiling_rps:.0f} req/s "
          f"({100 * args.ceiling_rps / args.capacity:.1f} % of {args.capacity:.0f})",
          file=sys.stderr, flush=True)
    results = {}
    for i, test in enumerate(tests):
        order = arms[i % len(arms):] + arms[:i % len(arms)] if arms else []
        for arm in order:
            run = run_checked(args, f"{test['name']} {arm}", lambda: run_one(
                args, arm, [("main", "/", test["phases"])], configs[arm]))
            run["test"] = f"overload/{test['name']}"
            runs.append(run)
            r = dict(run["loadgen"], cpu=run["cpu"], metrics=run["metrics"],
                     others_attempts=run["others_attempts"])
            results[(test["name"], arm)] = r
            last = r["phases"][test.get("measured", len(r["phases"]) - 1)]
            print(f"  {test['name']:6s} {arm:30s} goodput {lab.goodput_pct(args, last):5.1f}%cap "
                  f"p50 {fmt(last['success_p50_ms'])} ms rej {last['rejected']} timeouts "
                  f"{last['timed_out']} others {run['cpu']['others_cpus']:.2f} CPUs",
                  file=sys.stderr, flush=True)
    lines = ov_report(args, tests, results, args.arms, skipped)
    took = time.monotonic() - t_start
    lines += ["", f"Run time: {took / 60:.1f} min."]
    print(f"overload took {took / 60:.1f} min", file=sys.stderr, flush=True)
    return lines


def ov_report(args, tests, results, arms, skipped):
    ceiling = args.ceiling_rps
    lines = ["## Overload: the adaptive ceiling instead of a pool cap", ""] + \
        lab.settings_lines(args)[:2] + [
        f"floodgate-adaptive: no pool limit; [resilience.adaptive_admission] min_limit = "
        f"{args.ad_min_limit}, max_limit = {args.ad_max_limit}, decrease_step = "
        f"{args.ad_decrease_step}, increase_step = {args.ad_increase_step}, high_latency = "
        f"{args.ad_high_latency_ms} ms ({args.ad_high_latency_factor:g} x S), window = "
        f"{args.ad_window_ms} ms; brownout at its defaults (on, no core route: it sheds "
        f"everything while on); -nobrownout: brownout disabled.",
        f"floodgate: the lab's arm (max_active_requests = {args.workers}, max_pending_requests "
        f"= {args.fg_max_pending}, pending_timeout = {args.fg_pending_timeout_ms:g}ms), the "
        f"local protection at its defaults.",
        f"Backend ceiling: {ceiling:.0f} req/s = {100 * ceiling / args.capacity:.1f} % of "
        f"the nominal {args.capacity:.0f} (wrk -t1 -c{args.workers} -d{args.ceiling_s:g}s "
        f"straight at slow_backend" + (", given" if "ceiling_others" not in vars(args) else
                                       ", others " + "/".join(
                                           f"{o:.2f}" for o in args.ceiling_others) + " CPUs")
        + ")."]
    for arm, why in skipped.items():
        lines.append(f"{arm}: pending ({why}).")
    lines += ["", "### Steady load (the lab's columns)", ""]
    lines += lab.steady_table(args, tests, results, arms)
    head = ("| load | arm | goodput req/s | % of the ceiling | succ p50 ms (<= "
            f"{1.5 * args.service_ms:g}) | targets | ceiling min / mean / max "
            f"| ceiling <= {2 * args.workers} after s | bucket p99 after {args.settle_s:g} s: "
            "median / max ms | in flight mean "
            "| decreases / increases / skipped | brownout on (share of samples, entries) "
            "| refusals by reason (floodgate's 503s) | others CPUs |")
    lines += ["", "### Against the targets (goodput >= 95 % of the ceiling, success p50 <= "
              "1.5 x S), with the controller's figures from /metrics", "",
              head, "|" + "---|" * (head.count("|") - 1)]
    for test in tests:
        if test["kind"] != "steady":
            continue
        for arm in arms:
            r = results.get((test["name"], arm))
            if r is None:
                continue
            good, pct, w, settled, later = ov_row_extra(args, test, r, ceiling)
            p50 = r["phases"][test["measured"]]["success_p50_ms"]
            ok = pct >= 95 and p50 is not None and p50 <= 1.5 * args.service_ms
            lines.append(ov_row(test["name"], arm, good, pct, p50, ok, w, r, settled, later))
    for test in tests:
        if test["kind"] == "burst":
            run_arms = [a for a in arms if (test["name"], a) in results]
            lines += ["", "### Burst and recovery (the lab's columns)", ""]
            lines += lab.burst_table(args, test, results, arms)
            lines += ["", "Burst timeline (goodput %cap by completion time / highest success "
                      "p99 of the 100 ms buckets sent in each 0.5 s):", ""]
            lines += lab.burst_timeline(args, test, results, run_arms)
            lines += ["", "Ceiling during the burst (floodgate_adaptive_limit / "
                      "floodgate_adaptive_inflight / brownout_active, sampled every "
                      f"{args.sample_s:g} s):", ""]
            lines += ceiling_timeline(results, test["name"], run_arms)
    return lines


def ov_row(name, arm, good, pct, p50, ok, w, r, settled, later):
    if w is None:
        ctl = "- | - | - | - | - | - | -"
    else:
        d = w["decisions"]
        refusals = dict(w["rejected"])
        for k, v in w["generated"].items():    # pool admission's 503s are generated answers
            if not any(k == key.split("/")[-1] for key in refusals):
                refusals[k] = v
        ctl = (f"{w['limit_min']:.0f} / {w['limit_mean']:.1f} / {w['limit_max']:.0f} | "
               f"{fmt(settled, '{:.1f}')} | {fmt(later[0])} / {fmt(later[1])} | "
               f"{w['inflight_mean']:.1f} | "
               + " / ".join(fmt(d[x], '{:.0f}') for x in ("decrease", "increase", "skipped"))
               + f" | {100 * w['brownout_share']:.0f} %, {fmt(w['to_active'], '{:.0f}')} | "
               f"{reasons_text(refusals)}")
    return (f"| {name} | {arm} | {good:.0f} | {pct:.1f} | {fmt(p50, '{:.2f}')} | "
            f"{'met' if ok else 'NOT met'} | {ctl} | "
            + "/".join(f"{o:.2f}" for o in r["others_attempts"]) + " |")


def ceiling_timeline(results, name, arms):
    lines = ["| t s | " + " | ".join(arms) + " |", "|" + "---|" * (len(arms) + 1)]
    series = {a: results[(name, a)]["metrics"] for a in arms}
    times = sorted({s["t_s"] for a in arms for s in series[a] if not s.get("after")})
    for t in times:
        cells = []
        for a in arms:
            s = next((x for x in series[a] if x["t_s"] == t), None)
            cells.append("-" if s is None else
                         f"{s['limit']:.0f} / {s['inflight']:.0f} / {s['brownout']:.0f}")
        lines.append(f"| {t:.1f} | " + " | ".join(cells) + " |")
    return lines
