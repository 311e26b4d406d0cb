"""What the adaptive-admission benchmarks share (bench/adaptive/README.md): one run of
slow_backend, floodgate and one loadgen per stream, with floodgate's /metrics sampled on
loadgen's clock; a rerun when the host was busy; the ceiling's and brownout's figures over a
window of a run; the TOML of the ceiling.

Reuses the overload lab's process handling and CPU accounting (bench/overload/run.py), the
retry-storm experiment's lab with per-bucket backend counts and its results writer
(bench/retry_storm/run.py), and the hedging benchmark's /metrics scrape (bench/hedging/run.py).
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import compare  # noqa: E402  (host_cpu)
import targets  # noqa: E402  (configuration frame, ports, tail)
from hedging import run as hedging  # noqa: E402  (scrape: /metrics, parsed)
from overload import run as lab  # noqa: E402  (floodgate_check, cpu_*)
from retry_storm import run as storm  # noqa: E402  (StormLab, sleep_until_ns, fmt, median)


DIRECTIONS = ("decrease", "increase", "hold", "skipped")
fmt, median = storm.fmt, storm.median


# --- configurations -------------------------------------------------------------------------

def adaptive_tables(min_limit, max_limit, decrease, increase, high_ms, window_ms, brownout):
    """[resilience.adaptive_admission] with these values, and [resilience.brownout]: None =
    no table (floodgate's defaults: on, no core route), False = disabled, a dict = its keys."""
    text = f"""
[resilience.adaptive_admission]
enabled = true
min_limit = {min_limit}
max_limit = {max_limit}
decrease_step = {decrease}
increase_step = {increase}
high_latency = "{high_ms}ms"
window = "{window_ms}ms"
"""
    if brownout is False:
        text += "\n[resilience.brownout]\nenabled = false\n"
    elif brownout:
        text += "\n[resilience.brownout]\nenabled = true\n" + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in brownout.items())
    return text


def ad_tables(args, brownout=None, window_ms=None):
    """The tuned ceiling of the overload and brownout benchmarks."""
    return adaptive_tables(args.ad_min_limit, args.ad_max_limit, args.ad_decrease_step,
                           args.ad_increase_step, args.ad_high_latency_ms,
                           window_ms or args.ad_window_ms, brownout)


def check_configs(args, configs):
    """{arm: why} for the arms whose configuration `floodgate check` rejects."""
    skipped = {}
    for arm, config in configs.items():
        why = lab.floodgate_check(args.floodgate, config(
            targets.unused_port(), targets.unused_port(), targets.unused_port()))
        if why:
            print(f"{arm} arm skipped: {why}", file=sys.stderr)
            skipped[arm] = why
    return skipped


# --- one run --------------------------------------------------------------------------------

class AdaptiveLab(storm.StormLab):
    """The lab's processes; a floodgate arm's configuration comes from CONFIG(port, admin,
    backend_port)."""

    def __init__(self, args, config=None):
        super().__init__(args)
        self.config = config

    def proxy_config(self, arm, port, admin_port, backend_ports):
        return self.config(port, admin_port, backend_ports[0])


def sample(m, t_s):
    """What a run keeps of one /metrics scrape."""
    rejected = {f"{l.get('upstream', '')}/{l.get('reason', '')}": v for n, l, v in m.samples
                if n == "floodgate_protection_rejected_total"}
    generated = {l.get("reason", ""): v for n, l, v in m.samples
                 if n == "floodgate_responses_generated_total"}
    return {"t_s": round(t_s, 3),
            "limit": m.value("floodgate_adaptive_limit"),
            "inflight": m.value("floodgate_adaptive_inflight"),
            "decisions": {d: m.value("floodgate_adaptive_decisions_total", direction=d)
                          for d in DIRECTIONS},
            "brownout": m.value("floodgate_brownout_active"),
            "transitions": {to: m.value("floodgate_brownout_transitions_total", to=to)
                            for to in ("active", "inactive")},
            "rejected": rejected, "generated": generated}


def run_one(args, arm, streams, config=None, backend_extra=(), stats=False, sample_s=None):
    """One run, fresh processes: slow_backend with BACKEND_EXTRA arguments, floodgate with
    CONFIG in front (None: loadgen talks to the backend), one loadgen per stream (name, path,
    [(seconds, rate)]), all starting together on a bucket boundary. Returns each stream's
    loadgen result, the /metrics samples (every SAMPLE_S, and one after the run), the
    backend's per-bucket counts (with STATS), the CPU used."""
    sample_s = sample_s or args.sample_s
    total = max(sum(s for s, _ in phases) for _, _, phases in streams)
    with AdaptiveLab(args, config) as al:
        extra = list(backend_extra)
        if stats:
            extra += ["--stats-out", f"{al.dir}/backend.stats.json",
                      "--stats-bucket-ms", f"{args.bucket_ms:g}"]
        backend = al.start_backend("backend", extra)
        proxy = al.start_proxy(arm, [backend.port]) if config else None
        proxy_pids = proxy.refresh_pids() if proxy else []
        backend_pids = backend.refresh_pids()
        bucket_ns = round(args.bucket_ms * 1e6)
        epoch = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 300_000_000) // bucket_ns
        epoch = (epoch + 1) * bucket_ns
        gens = {}
        cpu0 = lab.cpu_snapshot(proxy_pids, backend_pids)
        for i, (name, path, phases) in enumerate(streams):
            cmd = [os.path.join(args.build_dir, "loadgen"),
                   "--port", str((proxy or backend).port), "--path", path,
                   "--timeout-ms", f"{args.timeout_ms:g}", "--bucket-ms", f"{args.bucket_ms:g}",
                   "--start-at-ns", str(epoch), "--out", f"{al.dir}/loadgen-{name}.json"]
            for seconds, rate in phases:
                cmd += ["--phase", f"{seconds:g}s@{rate:g}"]
            if args.poisson:
                cmd += ["--poisson", "--seed", str(args.seed + i)]
            with open(f"{al.dir}/loadgen-{name}.err", "w") as err:
                gens[name] = (subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=err), cmd)
        samples = []
        try:
            k = 0
            while proxy is not None and k * sample_s <= total + 1e-9:
                storm.sleep_until_ns(epoch + round(k * sample_s * 1e9))
                m = hedging.scrape(proxy.admin_port)
                if m is not None:
                    samples.append(sample(m, k * sample_s))
                k += 1
            for gen, _ in gens.values():
                gen.wait(timeout=total + args.timeout_ms / 1000 + 60)
        finally:
            for gen, _ in gens.values():
                if gen.poll() is None:
                    gen.kill()
                    gen.wait()
        cpu1 = lab.cpu_snapshot(proxy_pids, backend_pids)
        if proxy is not None:
            m = hedging.scrape(proxy.admin_port)
            if m is not None:     # after the last response: counters complete
                samples.append(dict(sample(m, (time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                                               - epoch) / 1e9), after=True))
        results = {}
        for name, (gen, cmd) in gens.items():
            if gen.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n"
                                   + targets.tail(f"{al.dir}/loadgen-{name}.err"))
            with open(f"{al.dir}/loadgen-{name}.json") as f:
                results[name] = json.load(f)
    first = streams[0][0]
    return {"arm": arm, "epoch_ns": epoch, "loadgen": results[first],
            "loadgens": {n: r for n, r in results.items() if n != first},
            "stream_names": [s[0] for s in streams], "metrics": samples,
            "backends": al.stats, "backend_counters": al.counters_by_backend,
            "cpu": lab.cpu_usage(cpu0, cpu1, proxy is not None)}


def host_busy_cpus(seconds=2.0):
    """CPUs kept busy on the host over SECONDS (nothing of the lab runs meanwhile)."""
    b0, t0 = compare.host_cpu()[0], time.monotonic()
    time.sleep(seconds)
    return (compare.host_cpu()[0] - b0) / targets.CLK_TCK / (time.monotonic() - t0)


def wait_quiet(args, label):
    """Waits (at most --quiet-wait-s) until the host is quieter than --max-others."""
    deadline = time.monotonic() + args.quiet_wait_s
    busy = host_busy_cpus()
    if busy > args.max_others:
        print(f"  {label}: host busy ({busy:.2f} CPUs), waiting for it to be quiet",
              file=sys.stderr, flush=True)
    while busy > args.max_others and time.monotonic() < deadline:
        time.sleep(8)
        busy = host_busy_cpus()


def run_checked(args, label, fn):
    """fn() until its others_cpus is at most --max-others (at most --reruns more times, after
    --rerun-wait-s each; every attempt first waits for a quiet host): the last run, with the
    others_cpus of every attempt."""
    attempts = []
    for i in range(args.reruns + 1):
        if i:
            print(f"  {label}: others {attempts[-1]:.2f} CPUs > {args.max_others:g}, "
                  f"rerun in {args.rerun_wait_s:g} s", file=sys.stderr, flush=True)
            time.sleep(args.rerun_wait_s)
        wait_quiet(args, label)
        run = fn()
        attempts.append(run["cpu"]["others_cpus"])
        if attempts[-1] <= args.max_others:
            break
    run["others_attempts"] = attempts
    return run


def stream_of(run, name):
    return run["loadgen"] if name == run["stream_names"][0] else run["loadgens"][name]


# --- /metrics figures -----------------------------------------------------------------------

def window_samples(run, t0, t1):
    """The samples taken in [t0, t1] (loadgen time, seconds)."""
    return [s for s in run["metrics"] if t0 - 1e-6 <= s["t_s"] <= t1 + 1e-6]


def delta(run, t0, t1, get):
    """GET(last sample in [t0, t1]) - GET(first): a counter's increase over the window."""
    s = window_samples(run, t0, t1)
    return get(s[-1]) - get(s[0]) if len(s) >= 2 else None


def metric_window(run, t0, t1):
    """The ceiling's and brownout's figures over [t0, t1]."""
    s = window_samples(run, t0, t1)
    if not s:
        return None
    limits = [x["limit"] for x in s]
    inflight = [x["inflight"] for x in s]
    out = {"limit_min": min(limits), "limit_max": max(limits),
           "limit_mean": sum(limits) / len(limits),
           "inflight_mean": sum(inflight) / len(inflight), "inflight_max": max(inflight),
           "brownout_share": sum(1 for x in s if x["brownout"]) / len(s),
           "decisions": {d: delta(run, t0, t1, lambda x, d=d: x["decisions"][d])
                         for d in DIRECTIONS},
           "to_active": delta(run, t0, t1, lambda x: x["transitions"]["active"]),
           "rejected": {}, "generated": {}}
    for key in ("rejected", "generated"):
        for k in s[-1][key]:
            v = delta(run, t0, t1, lambda x, k=k, key=key: x[key].get(k, 0))
            if v:
                out[key][k] = v
    return out


def arrivals_text(args):
    return "Poisson" if args.poisson else "fixed-rate"


def reasons_text(counts):
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(counts.items())) or "none"
