"""Benchmark 1 of issue 14, false rejections: a backend whose latency grows with its
concurrency, plus random slow outliers, offered 70 % of its measured capacity through
floodgate with adaptive admission on and a ceiling whose maximum is close to what the load
needs (bench/adaptive/README.md)."""

import math
import sys
import time

from adaptive_lab import (DIRECTIONS, adaptive_tables, arrivals_text, check_configs, fmt,
                          metric_window, reasons_text, run_checked, run_one, targets)


FR_ARMS = ("adaptive", "control", "adaptive-brownout")


def fr_config(args, arm, limits, high_ms):
    """The false-rejection arms: the lab frame, no pool limit, the ceiling LIMITS."""
    brownout = None if arm == "adaptive-brownout" else False

    def config(port, admin, backend_port):
        return targets.floodgate_config(port, admin, backend_port) + adaptive_tables(
            limits["min"], limits["max"], args.fr_decrease_step, args.fr_increase_step,
            high_ms, args.fr_window_ms, brownout)
    return config


def fr_backend(args):
    return ["--workers", str(args.fr_workers), "--service-ms", f"{args.fr_service_ms:g}",
            "--per-active-ms", f"{args.fr_per_active_ms:g}",
            "--outlier-percent", f"{args.fr_outlier_percent:g}",
            "--outlier-ms", f"{args.fr_outlier_ms:g}", "--seed", str(args.fr_seed)]


def fr_model_capacity(args):
    """The model's capacity with every slot busy: W / mean service, where a normal request
    takes S + K x (W - 1) and an outlier its outlier time."""
    p = args.fr_outlier_percent / 100
    busy = (1 - p) * (args.fr_service_ms + args.fr_per_active_ms * (args.fr_workers - 1)) \
        + p * args.fr_outlier_ms
    return args.fr_workers * 1000.0 / busy


def fr_measure_capacity(args):
    """Requests the backend started per second while every slot was busy (its FIFO never
    empty), over a direct run at 1.5x the model's capacity, less its first second."""
    rate = 1.5 * fr_model_capacity(args)
    run = run_checked(args, "capacity", lambda: run_one(
        args, "direct", [("direct", "/", [(args.fr_capacity_s, rate)])],
        backend_extra=fr_backend(args), stats=True))
    st = run["backends"]["backend"]
    bucket_s = st["bucket_ms"] / 1000
    offset = round((run["epoch_ns"] / 1e9 - st["t0_s"]) / bucket_s)
    lo, hi = offset + round(1 / bucket_s), offset + round(args.fr_capacity_s / bucket_s)
    started = st["started"][lo:hi]
    saturated = sum(1 for q in st["queued_max"][lo:hi] if q > 0)
    capacity = sum(started) / (len(started) * bucket_s)
    return capacity, {"rate": rate, "buckets": len(started), "saturated_buckets": saturated,
                      "model": fr_model_capacity(args), "run": run}


def fr_calibrate(args, rate):
    """In-flight count at RATE through floodgate, the ceiling far above it (max_limit = 0:
    the front cap): its time average (Little's law's L) and the highest sample, and the
    success latency (the control arm's high_latency is set from its median)."""
    limits = {"min": 1, "max": 0}
    phases = [(args.fr_warmup, rate), (args.fr_calibration_s, rate)]
    run = run_checked(args, "calibration", lambda: run_one(
        args, "calibration", [("main", "/", phases)],
        fr_config(args, "adaptive", limits, args.fr_high_latency_ms),
        fr_backend(args), sample_s=0.1))
    w = metric_window(run, args.fr_warmup, args.fr_warmup + args.fr_calibration_s)
    ph = run["loadgen"]["phases"][1]
    return {"inflight_mean": w["inflight_mean"], "inflight_max": w["inflight_max"],
            "p50": ph["success_p50_ms"], "p99": ph["success_p99_ms"],
            "rejected": ph["rejected"], "run": run}


def fr_summary(args, run, duration):
    ph = run["loadgen"]["phases"][1]
    w = metric_window(run, args.fr_warmup, args.fr_warmup + duration)
    whole = metric_window(run, 0, 1e9)
    return {"sent": ph["sent"], "rejected": ph["rejected"],
            "rejected_pct": 100 * ph["rejected"] / ph["sent"] if ph["sent"] else None,
            "timed_out": ph["timed_out"], "errors": ph["errors"],
            "goodput": ph["ok_done"] / ph["duration_s"], "p50": ph["success_p50_ms"],
            "p99": ph["success_p99_ms"], "window": w, "whole": whole}


def false_rejections(args, runs):
    t_start = time.monotonic()
    per_run = args.fr_capacity_s + args.fr_warmup + args.fr_calibration_s + 8 + sum(
        args.fr_warmup + (args.fr_duration if a != "control" else args.fr_control_duration) + 4
        for a in args.fr_arms)
    print(f"false rejections: about {per_run / 60:.1f} min", file=sys.stderr, flush=True)
    if args.fr_capacity is None:
        capacity, cap_info = fr_measure_capacity(args)
        runs.append(dict(cap_info.pop("run"), test="false-rejections/capacity"))
    else:
        capacity, cap_info = args.fr_capacity, {"model": fr_model_capacity(args), "given": True}
    rate = args.fr_load * capacity
    print(f"  capacity {capacity:.0f} req/s (model {cap_info['model']:.0f}); load "
          f"{rate:.0f} req/s", file=sys.stderr, flush=True)
    cal = fr_calibrate(args, rate)
    runs.append(dict(cal.pop("run"), test="false-rejections/calibration"))
    max_limit = args.fr_max_limit or math.ceil(args.fr_max_factor * cal["inflight_mean"])
    limits = {"max": max_limit, "min": args.fr_min_limit or max(1, max_limit // 4)}
    control_ms = max(1, round(args.fr_control_factor * cal["p50"]))
    print(f"  in flight at the load: mean {cal['inflight_mean']:.1f}, highest sample "
          f"{cal['inflight_max']:.0f}; ceiling {limits['min']}..{limits['max']}",
          file=sys.stderr, flush=True)
    rows = []
    for arm in args.fr_arms:
        duration = args.fr_control_duration if arm == "control" else args.fr_duration
        high = control_ms if arm == "control" else args.fr_high_latency_ms
        phases = [(args.fr_warmup, rate), (duration, rate)]
        config = fr_config(args, arm, limits, high)
        if check_configs(args, {arm: config}):
            continue
        run = run_checked(args, arm, lambda: run_one(
            args, arm, [("main", "/", phases)], config, fr_backend(args)))
        run["test"] = "false-rejections"
        runs.append(run)
        s = fr_summary(args, run, duration)
        rows.append((arm, high, duration, s, run))
        w = s["window"]
        print(f"  {arm:18s} rejected {s['rejected']} of {s['sent']} "
              f"({fmt(s['rejected_pct'], '{:.3f}')} %), decreases "
              f"{fmt(w['decisions']['decrease'], '{:.0f}')}, ceiling {w['limit_min']:.0f}.."
              f"{w['limit_max']:.0f}, p50/p99 {fmt(s['p50'])}/{fmt(s['p99'])} ms, others "
              f"{run['cpu']['others_cpus']:.2f} CPUs", file=sys.stderr, flush=True)
    lines = fr_report(args, capacity, cap_info, rate, cal, limits, rows)
    took = time.monotonic() - t_start
    lines += ["", f"Run time: {took / 60:.1f} min."]
    print(f"false rejections took {took / 60:.1f} min", file=sys.stderr, flush=True)
    return lines


def fr_report(args, capacity, cap_info, rate, cal, limits, rows):
    how = ("given (--fr-capacity)" if cap_info.get("given") else
           f"measured: requests the backend started per second while every slot was busy, "
           f"over {cap_info['buckets']} buckets of {args.bucket_ms:g} ms of a direct run at "
           f"{cap_info['rate']:.0f} req/s ({cap_info['saturated_buckets']} of them with a "
           f"non-empty FIFO)")
    lines = ["## False rejections", "",
             f"Backend: slow_backend W={args.fr_workers} slots, service {args.fr_service_ms:g} ms "
             f"+ {args.fr_per_active_ms:g} ms per other request in service, "
             f"{args.fr_outlier_percent:g} % random outliers of {args.fr_outlier_ms:g} ms. "
             f"Capacity {capacity:.0f} req/s, {how}; the model says {cap_info['model']:.0f}.",
             f"Load: {args.fr_load:g} x capacity = {rate:.0f} req/s, {arrivals_text(args)}, "
             f"{args.fr_warmup:g} s warm-up then the measured phase; client timeout "
             f"{args.timeout_ms:g} ms.",
             f"Calibration ({args.fr_calibration_s:g} s at the load, ceiling at the front cap, "
             f"in-flight sampled every 0.1 s): in flight mean {cal['inflight_mean']:.1f} "
             f"(Little's law), highest sample {cal['inflight_max']:.0f}; success p50 / p99 "
             f"{fmt(cal['p50'])} / {fmt(cal['p99'])} ms; {cal['rejected']} rejected.",
             f"Ceiling: max_limit = {limits['max']} ({limits['max'] / cal['inflight_mean']:.2f}"
             f" x the mean in flight), min_limit = {limits['min']}, decrease_step = "
             f"{args.fr_decrease_step}, increase_step = {args.fr_increase_step}, window = "
             f"{args.fr_window_ms} ms; brownout disabled except in adaptive-brownout (its "
             f"defaults); no pool limit.", ""]
    head = ("| arm | high_latency ms | measured s | sent | rejected (%) | by reason "
            "| decreases / increases / holds / skipped | ceiling min / max seen "
            "| in flight mean / max seen | goodput req/s (% of offered) | succ p50 / p99 ms "
            "| timeouts | errors | others CPUs |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for arm, high, duration, s, run in rows:
        w = s["window"]
        d = w["decisions"]
        lines.append(
            f"| {arm} | {high} | {duration:g} | {s['sent']} | {s['rejected']} "
            f"({fmt(s['rejected_pct'], '{:.3f}')} %) | {reasons_text(w['rejected'])} | "
            + " / ".join(fmt(d[x], '{:.0f}') for x in DIRECTIONS)
            + f" | {w['limit_min']:.0f} / {w['limit_max']:.0f} | {w['inflight_mean']:.1f} / "
            f"{w['inflight_max']:.0f} | {s['goodput']:.0f} ({100 * s['goodput'] / rate:.1f}) | "
            f"{fmt(s['p50'])} / {fmt(s['p99'])} | {s['timed_out']} | {s['errors']} | "
            + "/".join(f"{o:.2f}" for o in run["others_attempts"]) + " |")
    lines.append("")
    for arm, _, _, s, _ in rows:
        if arm == "adaptive":
            ok = s["rejected_pct"] is not None and s["rejected_pct"] <= 0.1
            whole = s["whole"]["decisions"]["decrease"] if s["whole"] else None
            lines.append(f"- Target (adaptive admission rejects at most 0.1 %): "
                         f"{fmt(s['rejected_pct'], '{:.3f}')} %: {'met' if ok else 'not met'}; "
                         f"decreases over the whole run, warm-up included: "
                         f"{fmt(whole, '{:.0f}')}.")
    return lines
