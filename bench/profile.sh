#!/usr/bin/env bash
# Stable per-request cost figures for one proxy, for profiling rather than racing:
#
#  1. syscalls (in total and by name), context switches and CPU per request, counted with
#     `perf stat -p` (kernel tracepoints and software events; this VM exposes no hardware
#     counters, so `perf stat -e instructions` says "<not supported>") over `wrk -t1 -c64`;
#  2. user-space instructions per request (Ir) with `valgrind --tool=callgrind`, over exactly
#     N keep-alive requests after a warm-up, and the functions they go to. Ir does not see the
#     kernel: a syscall counts as a handful of instructions whatever it costs, so read 1 and 2
#     together.
#
# The target runs with the same configuration as in compare.py (targets.py), behind the same
# loopback nginx backend. The callgrind output is kept for kcachegrind/callgrind_annotate.
#
# Usage: bench/profile.sh [-t floodgate|haproxy|nginx] [-n REQUESTS] [-c CONNECTIONS]
#                         [-w WARMUP] [-d WRK_SECONDS] [-b FLOODGATE_BINARY] [-o OUT_DIR]
#                         [-x EXTRA_TOML] [-H 'Name: value']...
# -x appends a TOML file to floodgate's configuration (rate limit rules, say); -H adds a
# header to every request of both phases (repeatable).
# Env equivalents: TARGET, REQUESTS, CONNECTIONS, WARMUP, WRK_SECONDS, FLOODGATE, OUT_DIR,
# FLOODGATE_EXTRA.
# For symbols with line numbers build floodgate RelWithDebInfo (the default build type).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
target=${TARGET:-floodgate}
requests=${REQUESTS:-20000}
connections=${CONNECTIONS:-1}
warmup=${WARMUP:-1000}
wrk_seconds=${WRK_SECONDS:-5}
floodgate=${FLOODGATE:-$here/../build/floodgate}
out_dir=${OUT_DIR:-$here/results}
extra=${FLOODGATE_EXTRA:-}
headers=()

while getopts "t:n:c:w:d:b:o:x:H:h" opt; do
  case $opt in
    t) target=$OPTARG ;; n) requests=$OPTARG ;; c) connections=$OPTARG ;;
    w) warmup=$OPTARG ;; d) wrk_seconds=$OPTARG ;; b) floodgate=$OPTARG ;; o) out_dir=$OPTARG ;;
    x) extra=$OPTARG ;; H) headers+=("$OPTARG") ;;
    *) sed -n '2,18p' "$0"; exit 2 ;;
  esac
done
case $target in floodgate|haproxy|nginx) ;; *) echo "unknown target $target" >&2; exit 2 ;; esac
if [[ $target == floodgate && ! -x $floodgate ]]; then
  echo "floodgate binary $floodgate not found (build it first, or -b PATH)" >&2; exit 1
fi

tmp=$(mktemp -d /tmp/floodgate-profile-XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# An unused port other than the ones given as a comma-separated list in $1.
port() {
  python3 -c "import sys; sys.path.insert(0, '$here'); import targets
print(targets.unused_port([${1:-}]))"
}

# Starts the command in "$@" (stdout+stderr to $tmp/$name.out) and waits for a 200 on $port
# to a request with the -H headers (a quota policy refuses one without its identity).
start() {
  local name=$1 port=$2; shift 2
  local curl_headers=()
  for h in "${headers[@]}"; do curl_headers+=(-H "$h"); done
  "$@" >"$tmp/$name.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 600); do
    curl -sf -o /dev/null "${curl_headers[@]}" "http://127.0.0.1:$port/" && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "$name did not start:" >&2; tail -20 "$tmp/$name.out" >&2; exit 1
}

# Config for $target; for nginx, a single process so that the worker is the process we profile.
target_command() {
  local cmd
  cmd=$(FLOODGATE_EXTRA="$extra" python3 "$here/targets.py" config "$target" "$tmp" \
    "$target_port" "$backend_port" "$floodgate")
  [[ $target == nginx ]] && sed -i 's/^master_process on;/master_process off;/' "$tmp/nginx.conf"
  echo "$cmd"
}

# Runs "$@" in the background and waits for it, so that a signal reaches the trap at once
# instead of after the command; cleanup stops the command if that happens.
run() {
  "$@" &
  pids+=("$!")
  local rc=0
  wait "$!" || rc=$?
  unset 'pids[-1]'
  return "$rc"
}

# Sends $1 requests over $connections keep-alive connections; fails on anything but 200.
cat >"$tmp/drive.py" <<'EOF'
import http.client, sys, threading
port, total, conns = (int(x) for x in sys.argv[1:4])
headers = dict(h.split(": ", 1) for h in sys.argv[4:])
errors = []
def client(n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(n):
        c.request("GET", "/", headers=headers)
        r = c.getresponse(); r.read()
        if r.status != 200:
            errors.append(r.status)
threads = [threading.Thread(target=client, args=(total // conns + (i < total % conns),))
           for i in range(conns)]
for t in threads: t.start()
for t in threads: t.join()
sys.exit(f"{len(errors)} non-200 responses" if errors else 0)
EOF
drive() { run python3 "$tmp/drive.py" "$target_port" "$1" "$connections" "${headers[@]}"; }
wrk_headers=()
for h in "${headers[@]}"; do wrk_headers+=(-H "$h"); done

# Phase 1: syscalls, context switches and CPU per request under wrk, counted by perf stat.
perf_phase() {
  echo "== $target: perf stat over wrk -t1 -c64 -d${wrk_seconds}s"
  start "$target" "$target_port" "${cmd[@]}"
  local target_pid=${pids[-1]} perf_pid n
  run wrk -t1 -c64 -d2s "${wrk_headers[@]}" "http://127.0.0.1:$target_port/" >/dev/null  # warm-up
  perf stat -x, -o "$tmp/perf.csv" -p "$target_pid" \
    -e 'raw_syscalls:sys_enter,context-switches,task-clock,syscalls:sys_enter_*' &
  perf_pid=$!
  pids+=("$perf_pid")
  sleep 0.2
  run wrk -t1 -c64 -d"${wrk_seconds}s" "${wrk_headers[@]}" "http://127.0.0.1:$target_port/" \
    >"$tmp/wrk.out"
  kill -INT "$perf_pid"; wait "$perf_pid" || true
  unset 'pids[-1]'
  n=$(awk '/requests in/ {print $1}' "$tmp/wrk.out")
  awk -F, -v n="$n" '
    $3 == "raw_syscalls:sys_enter" { printf "  syscalls per request:          %.2f\n", $1 / n }
    $3 == "context-switches"       { printf "  context switches per request:  %.3f\n", $1 / n }
    $3 == "task-clock"             { printf "  CPU per request (task-clock):  %.2f us\n",
                                           $1 * 1000 / n }
  ' "$tmp/perf.csv"
  awk -F, -v n="$n" '$3 ~ /^syscalls:sys_enter_/ && $1 / n >= 0.01 {
      sub("syscalls:sys_enter_", "", $3); printf "%10.3f  %s\n", $1 / n, $3 }' "$tmp/perf.csv" |
    sort -rn | sed 's/^/    /'
  echo "    (per request, by syscall)"
  echo "  ($n requests; perf stat adds overhead: compare these only with each other)"
  kill -TERM "$target_pid"; wait "$target_pid" 2>/dev/null || true
  unset 'pids[-1]'
}

# Phase 2: user-space instructions per request over exactly $requests requests, by callgrind.
callgrind_phase() {
  echo "== $target: callgrind over $requests requests on $connections connection(s)"
  mkdir -p "$out_dir"
  local out vg_pid dumps ir
  out="$out_dir/callgrind-$target-$(date +%Y%m%d-%H%M%S).out"
  start "$target-callgrind" "$target_port" \
    valgrind --tool=callgrind --callgrind-out-file="$tmp/callgrind.%p" "${cmd[@]}"
  vg_pid=${pids[-1]}
  drive "$warmup"
  callgrind_control --zero "$vg_pid" >/dev/null 2>&1
  drive "$requests"
  callgrind_control --dump=measured "$vg_pid" >/dev/null 2>&1
  dumps=("$tmp"/callgrind."$vg_pid".*)
  cp "${dumps[0]}" "$out"
  ir=$(awk '/^totals:/ {print $2}' "$out")
  awk -v ir="$ir" -v n="$requests" 'BEGIN {
    printf "  instructions per request (Ir): %.0f  (%.0f Ir over %d requests)\n", ir / n, ir, n }'
  echo "  callgrind output: $out"
  echo "== top functions by exclusive Ir (frames still on the stack at the dump, the main loop"
  echo "   and below, show the whole total and are left out)"
  callgrind_annotate --threshold=100 --auto=no "$out" 2>/dev/null |
    sed -n '/file:function/,$p' | sed 1,2d | grep -v '(100.0%)' | head -30
}

if ! command -v valgrind >/dev/null; then
  echo "valgrind not found (apt-get install valgrind)" >&2; exit 1
fi
backend_port=$(port)
target_port=$(port "$backend_port")
read -r -a backend_cmd <<<"$(python3 "$here/targets.py" config backend "$tmp" "$backend_port" 0)"
start backend "$backend_port" "${backend_cmd[@]}"
read -r -a cmd <<<"$(target_command)"
if command -v perf >/dev/null; then
  perf_phase
else
  echo "== perf not found (apt-get install linux-perf): syscall counts skipped"
fi
callgrind_phase
