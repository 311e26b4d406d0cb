#!/usr/bin/env bash
# Runs floodgate's libFuzzer targets: first every regression input in regressions/<target>/
# (each must pass), then fuzzing for SECONDS from corpus/<target>/. New inputs go to a
# temporary directory, never into the repository; a crash's input is kept in $FUZZ_ARTIFACTS
# (default: a temporary directory, printed) and fails the run. Targets run side by side, one
# per core (FUZZ_JOBS overrides), each for SECONDS.
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]   (targets: request response probe config resp h2)
# Prints each target's final libFuzzer line (executions, cov:, ft:) and stats.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1 seconds=$2
shift 2
targets=("$@")
((${#targets[@]})) || targets=(request response probe config resp h2)
artifacts=${FUZZ_ARTIFACTS:-$(mktemp -d /tmp/floodgate-fuzz-artifacts.XXXXXX)}
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target: its regressions, then fuzzing; prints its result, returns non-zero on a failure.
run_target() {
  local t=$1 bin=$build/tests/fuzz/${1}_fuzz
  [ -x "$bin" ] || { echo "fuzz: $bin is missing (build --target floodgate_fuzz)"; return 2; }
  shopt -s nullglob
  local regressions=("$here/regressions/$t"/*)
  shopt -u nullglob
  if ((${#regressions[@]})); then
    if ! "$bin" -rss_limit_mb=2048 "${regressions[@]}" >"$artifacts/$t-regressions.log" 2>&1; then
      echo "fuzz: $t: a regression input fails:"; tail -40 "$artifacts/$t-regressions.log"
      return 1
    fi
    echo "fuzz: $t: ${#regressions[@]} regression input(s) pass"
  fi
  local work log=$artifacts/$t.log rc=0
  work=$(mktemp -d /tmp/floodgate-fuzz-$t.XXXXXX)
  if "$bin" "$work" "$here/corpus/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" >"$log" 2>&1; then
    local done_line execs rate
    done_line=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "fuzz: $t: ${seconds}s, $execs executions ($rate/s), final: $done_line"
  else
    echo "fuzz: $t: CRASH (input saved under $artifacts/$t-*):"
    grep -E 'fuzz property violated|ERROR: |runtime error|SUMMARY|Test unit written' "$log" | head -20
    rc=1
  fi
  rm -rf "$work"
  return "$rc"
}

# The targets run FUZZ_JOBS at a time (default one per core), each fuzzing on its own core for
# SECONDS; their results are printed in the order given.
max_jobs=${FUZZ_JOBS:-$(nproc)}
pids=()
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n || true; done
  run_target "$t" >"$artifacts/$t.result" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$artifacts/${targets[$i]}.result"
done
[ "$status" -eq 0 ] && echo "fuzz: all targets passed (logs in $artifacts)"
exit "$status"
