#!/usr/bin/env python3
"""Adaptive admission and brownout in the overload lab (issue 14's three benchmarks): false
rejections at 70% load, the adaptive ceiling against a 1x/2x/4x overload instead of a hand-set
pool cap, and brownout keeping a core upstream's goodput under a mixed overload.

Model (see bench/adaptive/README.md): the overload lab's slow_backend (W slots x S ms, an
unbounded FIFO, never cancels work) and open-loop loadgen, one floodgate worker in front.
Benchmarks (--tests), each against one of the issue's targets:
  false-rejections  a backend whose service grows with its concurrency
                    (slow_backend --per-active-ms) plus --fr-outlier-percent random outliers
                    slower than high_latency; its capacity is measured (a direct overload
                    run: requests started per second while every slot is busy), then the
                    in-flight count at --fr-load x capacity (a calibration run through
                    floodgate, the ceiling far above it), then --fr-duration s at that load
                    with max_limit = --fr-max-factor x that count. Arms: adaptive (the test),
                    control (high_latency = 0.9 x the calibration's median: a controller that
                    must cut, showing that a cut turns into rejections), adaptive-brownout
                    (brownout at its defaults beside it)
  overload          the lab's backend (W=16 x S=10 ms), steady levels and burst; arms
                    floodgate (the lab's pool admission), floodgate-adaptive (no pool cap,
                    adaptive admission tuned from S and W: --ad-*) and
                    floodgate-adaptive-nobrownout; goodput against the backend's measured
                    ceiling (wrk with W connections straight at it, as the lab's README)
  brownout          two upstreams on the one lab backend: `core` (path /core, in
                    core_routes) and `backend` (path /, not core); core at --bo-core-load x
                    capacity alone, then mixed with --bo-noncore-load x capacity of the
                    other; arms core-alone, mix (brownout's default thresholds),
                    mix-nobrownout, and the settings tried against the miss (mix-recover-low,
                    mix-dwell, mix-routecap)

Every run gets fresh processes, samples floodgate's /metrics every --sample-s, and records
the CPU used by everything else on the host (others_cpus); every run first waits for a quiet
host, and one above --max-others is run again (--reruns). Prints markdown tables and each
benchmark's run time; writes them with the settings to bench/results/adaptive-<timestamp>.txt
and every run's raw data (loadgen output with its buckets, the /metrics samples, CPU) to the
.json beside it.
Usage: python3 bench/adaptive/run.py [--tests false-rejections,overload,brownout] [--help]
"""

import argparse
import os
import sys
import time

import adaptive_lab  # noqa: F401  (first: puts bench/ and the integration harness on the path)
from adaptive_lab import storm, targets
from brownout import BO_ARMS, brownout
from false_rejections import FR_ARMS, false_rejections
from overload_ceiling import OV_ARMS, overload
from overload import run as lab  # bench/overload/run.py: build, add_lab_options


TESTS = ("false-rejections", "overload", "brownout")


# --- options --------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--tests", default=",".join(TESTS), help="comma-separated subset of "
                   + ",".join(TESTS))
    p.add_argument("--timeout-ms", type=float, default=1000.0, help="client timeout")
    p.add_argument("--bucket-ms", type=float, default=100.0, help="loadgen time bucket")
    p.add_argument("--sample-s", type=float, default=0.5, help="/metrics sampling period")
    p.add_argument("--poisson", action="store_true", help="Poisson arrivals, not fixed rate")
    p.add_argument("--seed", type=int, default=1,
                   help="loadgen seed (with --poisson; a run's second stream: seed + 1)")
    p.add_argument("--max-others", type=float, default=0.3,
                   help="a run whose others_cpus is above this competed: run it again")
    p.add_argument("--reruns", type=int, default=2, help="at most this many reruns per run")
    p.add_argument("--rerun-wait-s", type=float, default=10.0, help="pause before a rerun")
    p.add_argument("--quiet-wait-s", type=float, default=600.0,
                   help="before each run, wait at most this long for the host's busy CPUs "
                        "to fall to --max-others")

    g = p.add_argument_group("false-rejections")
    g.add_argument("--fr-arms", default="adaptive,control,adaptive-brownout",
                   help="comma-separated subset of " + ",".join(FR_ARMS))
    g.add_argument("--fr-workers", type=int, default=128, help="backend slots")
    g.add_argument("--fr-service-ms", type=float, default=40.0, help="base service time")
    g.add_argument("--fr-per-active-ms", type=float, default=0.3,
                   help="service grows by this per other request in service")
    g.add_argument("--fr-outlier-percent", type=float, default=3.0,
                   help="share of requests that are slow outliers")
    g.add_argument("--fr-outlier-ms", type=float, default=300.0,
                   help="service time of an outlier (above --fr-high-latency-ms)")
    g.add_argument("--fr-seed", type=int, default=1, help="backend seed of the outlier draws")
    g.add_argument("--fr-capacity", type=float, default=None,
                   help="capacity in req/s (default: measured by a direct overload run)")
    g.add_argument("--fr-capacity-s", type=float, default=5.0,
                   help="length of the capacity run (its first second is not counted)")
    g.add_argument("--fr-load", type=float, default=0.7, help="offered load, x capacity")
    g.add_argument("--fr-calibration-s", type=float, default=10.0,
                   help="length of the in-flight calibration run")
    g.add_argument("--fr-warmup", type=float, default=2.0, help="seconds before the measure")
    g.add_argument("--fr-duration", type=float, default=60.0, help="measured seconds")
    g.add_argument("--fr-control-duration", type=float, default=20.0,
                   help="measured seconds of the control arm")
    g.add_argument("--fr-control-factor", type=float, default=0.9,
                   help="the control arm's high_latency = this x the calibration's median "
                        "latency (most healthy samples bad: it must cut)")
    g.add_argument("--fr-high-latency-ms", type=int, default=150,
                   help="high_latency (the operator's: about twice the healthy latency)")
    g.add_argument("--fr-max-factor", type=float, default=1.4,
                   help="max_limit = this x the mean in-flight count at the load")
    g.add_argument("--fr-max-limit", type=int, default=None, help="max_limit (default: above)")
    g.add_argument("--fr-min-limit", type=int, default=None,
                   help="min_limit (default: max_limit / 4)")
    g.add_argument("--fr-decrease-step", type=int, default=16, help="decrease_step")
    g.add_argument("--fr-increase-step", type=int, default=16, help="increase_step")
    g.add_argument("--fr-window-ms", type=int, default=100, help="window")

    g = p.add_argument_group("overload (and brownout: the same backend and ceiling)")
    g.add_argument("--arms", default=",".join(OV_ARMS),
                   help="comma-separated subset of " + ",".join(OV_ARMS))
    g.add_argument("--workers", type=int, default=16, help="backend slots W")
    g.add_argument("--service-ms", type=float, default=10.0, help="backend service time S")
    g.add_argument("--levels", default="1,2,4", help="steady loads, x capacity")
    g.add_argument("--duration", type=float, default=10.0, help="measured seconds per level")
    g.add_argument("--warmup", type=float, default=1.0,
                   help="seconds at 0.5x before each level (opens keep-alive connections)")
    g.add_argument("--burst", default="3,5,10",
                   help="seconds before, during and after the burst; empty to skip")
    g.add_argument("--burst-factor", type=float, default=4.0, help="burst load, x capacity")
    g.add_argument("--post-factor", type=float, default=0.8, help="load after the burst")
    g.add_argument("--recovery-ok-ratio", type=float, default=0.95, help="as the lab's")
    g.add_argument("--recovery-p99-factor", type=float, default=3.0, help="as the lab's")
    g.add_argument("--recovery-hold", type=float, default=1.0, help="as the lab's")
    g.add_argument("--ceiling-s", type=float, default=5.0,
                   help="wrk run measuring the backend's ceiling with W connections")
    g.add_argument("--ceiling-rps", type=float, default=None,
                   help="the measured ceiling in req/s (skips the wrk run)")
    g.add_argument("--settle-s", type=float, default=3.0,
                   help="the 100 ms buckets' p99 is also reported from this long into a phase")
    g.add_argument("--ad-high-latency-factor", type=float, default=1.5,
                   help="high_latency = this x S")
    g.add_argument("--ad-min-limit", type=int, default=None, help="min_limit (default W / 2)")
    g.add_argument("--ad-max-limit", type=int, default=None, help="max_limit (default 4 x W)")
    g.add_argument("--ad-decrease-step", type=int, default=None,
                   help="decrease_step (default W / 4)")
    g.add_argument("--ad-increase-step", type=int, default=1, help="increase_step")
    g.add_argument("--ad-window-ms", type=int, default=100, help="window")

    g = p.add_argument_group("brownout")
    g.add_argument("--bo-arms",
                   default=",".join(BO_ARMS),
                   help="comma-separated subset of " + ",".join(BO_ARMS))
    g.add_argument("--bo-core-load", type=float, default=0.5, help="core load, x capacity")
    g.add_argument("--bo-noncore-load", type=float, default=1.5,
                   help="non-core load in the mix, x capacity")
    g.add_argument("--bo-noncore-warmup-load", type=float, default=0.2,
                   help="non-core load during the warm-up")
    g.add_argument("--bo-noncore-post-load", type=float, default=0.3,
                   help="non-core load after the overload (does it come back?)")
    g.add_argument("--bo-warmup", type=float, default=1.0, help="seconds before the overload")
    g.add_argument("--bo-duration", type=float, default=10.0, help="seconds of the overload")
    g.add_argument("--bo-post", type=float, default=5.0, help="seconds after it")
    g.add_argument("--bo-recover-low", type=int, default=20,
                   help="recover_inflight_percent of mix-recover-low")
    g.add_argument("--bo-dwell-window-ms", type=int, default=1000,
                   help="adaptive window of mix-dwell (brownout's dwell is one window)")
    g.add_argument("--bo-routecap", type=int, default=None,
                   help="route_queue cap of the non-core upstream in mix-routecap (default "
                        "W / 2)")
    lab.add_lab_options(p, "configs, logs")
    args = p.parse_args()
    args.tests = [t for t in args.tests.split(",") if t]
    if set(args.tests) - set(TESTS):
        p.error(f"unknown tests: {', '.join(sorted(set(args.tests) - set(TESTS)))}")
    for name, known in (("fr_arms", FR_ARMS), ("arms", OV_ARMS), ("bo_arms", BO_ARMS)):
        arms = [a for a in getattr(args, name).split(",") if a]
        if set(arms) - set(known):
            p.error(f"unknown arms: {', '.join(sorted(set(arms) - set(known)))}")
        setattr(args, name, arms)
    args.levels = [float(x) for x in args.levels.split(",") if x]
    args.burst = [float(x) for x in args.burst.split(",") if x]
    if args.burst and len(args.burst) != 3:
        p.error("--burst wants PRE,BURST,POST seconds")
    # What bench/overload/run.py's helpers read: the lab's floodgate arm and HAProxy's queue
    # (named in its settings lines), the arrivals.
    args.capacity = args.workers * 1000.0 / args.service_ms
    args.fg_max_pending = max(1, args.workers // 4)
    args.fg_pending_timeout_ms = args.service_ms
    args.fg_retry_after = "1s"
    args.haproxy_queue_timeout_ms, args.haproxy_abortonclose = args.timeout_ms / 2, False
    w = args.workers
    args.ad_min_limit = args.ad_min_limit or max(1, w // 2)
    args.ad_max_limit = args.ad_max_limit or 4 * w
    args.ad_decrease_step = args.ad_decrease_step or max(1, w // 4)
    args.ad_high_latency_ms = max(1, round(args.ad_high_latency_factor * args.service_ms))
    args.bo_routecap = args.bo_routecap or max(1, w // 2)
    return args


# --- main -----------------------------------------------------------------------------------

def main():
    args = parse_args()
    targets.exit_on_signals()
    lab.build(args)
    t0 = time.monotonic()
    runs, sections = [], []
    if "false-rejections" in args.tests:
        sections += ["", *false_rejections(args, runs)]
    if "overload" in args.tests:
        sections += ["", *overload(args, runs)]
    if "brownout" in args.tests:
        sections += ["", *brownout(args, runs)]
    took = time.monotonic() - t0
    others = [r["cpu"]["others_cpus"] for r in runs]
    text = "\n".join(["# Adaptive admission and brownout (issue 14)", *sections, "",
                      f"CPU used by processes outside the lab during the runs kept: max "
                      f"{max(others, default=0):.2f} of {os.cpu_count()} CPUs. Total run time "
                      f"{took / 60:.1f} min."])
    print(text)
    stem = storm.write_results(args, "adaptive", text, runs, {})
    print(f"\nresults: {stem}.txt, raw data: {stem}.json")
    print(f"total run time {took / 60:.1f} min", file=sys.stderr)


if __name__ == "__main__":
    main()
