#!/usr/bin/env bash
# Looks for flaky end-to-end tests: runs the integration modules of a built tree N times, as
# the test command's release lane does (ctest -j, twice nproc), while one core is kept busy by
# a load of the flake hunt's own, then prints one row per module that ran: runs, failures,
# and where the first failure's output is. Exits non-zero when any module failed at least once.
#   scripts/flake_hunt.sh [N [BUILD_DIR [REGEX]]]
#     N          runs (default 20)
#     BUILD_DIR  a configured and built tree (default build: scripts/test.sh --lane release)
#     REGEX      ctest -R filter (default ^integration\.: both event loops of every module)
# Env: FLAKE_LOAD=0 runs without the background load; FLAKE_DIR keeps the logs there
# (default a new directory under /tmp, printed); FLAKE_JOBS tests at once (default twice nproc,
# as the release lane; nproc is what the sanitizer lanes run). docs/testing.md, "The flake hunt".
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
build=${2:-build}
regex=${3:-'^integration\.'}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "flake_hunt: N must be a positive number, not '$runs'" >&2; exit 2; }
[ -f "$build/CTestTestfile.cmake" ] || {
  echo "flake_hunt: $build is not a built tree (scripts/test.sh --lane release builds one)" >&2; exit 2; }
logs=${FLAKE_DIR:-$(mktemp -d /tmp/floodgate-flake-hunt.XXXXXX)}
mkdir -p "$logs"
jobs=${FLAKE_JOBS:-$(($(nproc) * 2))}

# The load: one busy process at the lowest priority that still takes a core from the tests
# whenever the scheduler gives it one (stress-ng --cpu 1 where installed, else a shell loop).
load_pid=""
stop_load() { if [ -n "$load_pid" ]; then kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; fi; }
trap stop_load EXIT
if [ "${FLAKE_LOAD:-1}" != 0 ]; then
  if command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu 1 --quiet >/dev/null 2>&1 &
  else
    bash -c 'while :; do :; done' &
  fi
  load_pid=$!
fi

echo "flake_hunt: $runs runs of ctest -R '$regex' in $build, -j $jobs, load $([ -n "$load_pid" ] && echo on || echo off); logs in $logs"
start=$SECONDS
for ((i = 1; i <= runs; i++)); do
  t0=$SECONDS
  (cd "$build" && ctest -R "$regex" -j "$jobs" --timeout 300 --output-on-failure) >"$logs/run-$i.txt" 2>&1 || true
  cp "$build/Testing/Temporary/LastTest.log" "$logs/run-$i.LastTest.log" 2>/dev/null || true
  failed=$(grep -c -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*|Not Run|Exception)' "$logs/run-$i.txt" || true)
  echo "flake_hunt: run $i of $runs: $failed failed ($((SECONDS - t0))s)"
done

# One row per module: every "N/M Test #K: NAME ..... Passed|***Failed|..." line of every run.
echo
echo "flake_hunt: $runs runs in $((SECONDS - start))s"
echo "| module | runs | failures | first failure |"
echo "|---|---|---|---|"
status=0
for ((i = 1; i <= runs; i++)); do
  sed -n -E "s/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .*(Passed|\*\*\*[A-Za-z]+|Not Run|Exception).*/\1 \2 $i/p" "$logs/run-$i.txt"
done | awk -v logs="$logs" '
  { runs[$1]++
    if ($2 != "Passed") {
      fails[$1]++
      if (!($1 in first)) first[$1] = $3
      if (earliest == "" || $3 < earliest_run) { earliest = $1; earliest_run = $3 }
    } }
  END {
    for (m in runs) {
      where = (m in first) ? sprintf("run %d: %s/run-%d.LastTest.log", first[m], logs, first[m]) : "-"
      printf "| %s | %d | %d | %s |\n", m, runs[m], fails[m] + 0, where
    }
    if (earliest != "") printf "%s %d\n", earliest, earliest_run > (logs "/first-failure.txt")
  }' | sort >"$logs/table.txt"
cat "$logs/table.txt"
if [ -s "$logs/first-failure.txt" ]; then
  status=1
  read -r module run <"$logs/first-failure.txt"
  echo
  echo "flake_hunt: the first failure, $module in run $run (the end of its output):"
  awk -v m="$module" '
    index($0, "Testing: " m) && $0 ~ ("Testing: " m "$") { on = 1 }
    on { print }
    on && index($0, "\"" m "\" end time") == 1 { exit }' "$logs/run-$run.LastTest.log" | tail -60
fi
exit "$status"
