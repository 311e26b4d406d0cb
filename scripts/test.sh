#!/usr/bin/env bash
# Installs what is missing, builds floodgate and runs the whole test suite three times: a
# normal build (which also runs the 60-second soak, bench/soak.py), an AddressSanitizer +
# UndefinedBehaviorSanitizer build, and a ThreadSanitizer build (reactors, the admin scrape
# and shutdown cross threads); then a fourth, short lane builds the libFuzzer targets with
# clang and runs each from its corpus for a bounded time (tests/fuzz/run.sh), replaying every
# recorded regression first; a fifth builds the Debian package and checks what it installs
# (scripts/package.sh, tests/package/). Beside all of them, clang-tidy checks every file in src/ with
# warnings as errors (scripts/tidy.sh). Exits non-zero on any failure. This is README's test
# command and the only thing .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)

# clang-tidy runs in the background at idle priority (SCHED_IDLE: any other task on a core
# preempts it at once), so it takes only the CPU the builds and tests leave; its result is read
# between lanes, and waited for at the end. Its own process group (set -m) so that an early exit
# can end all of it; the same session, so the idle priority counts against the lanes.
tidy_log=$(mktemp /tmp/floodgate-tidy-log.XXXXXX)
idle=(chrt --idle 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
set -m
"${idle[@]}" scripts/tidy.sh build-tidy "$jobs" >"$tidy_log" 2>&1 &
tidy_pid=$!
set +m
tidy_running() {  # by pid and command line: pids are reused, and tidy may have been reaped
  [ -n "$tidy_pid" ] && ps -o args= -p "$tidy_pid" 2>/dev/null | grep -q 'scripts/tidy\.sh'
}
trap 'if tidy_running; then kill -- -"$tidy_pid" 2>/dev/null; fi; rm -f "$tidy_log"' EXIT
tidy_result() {  # [wait]: once clang-tidy has finished (or, with `wait`, when it does), prints
  # its output and fails the run if it failed
  [ -n "$tidy_pid" ] || return 0
  if [ "${1:-}" != wait ] && tidy_running; then return 0; fi
  # Nothing else of ours is left to run: what remains of it gets normal priority, so that
  # another load on the machine cannot starve it (twice: xargs may start one more meanwhile).
  local p _
  for _ in 1 2; do
    tidy_running || break
    for p in $(pgrep --pgroup "$tidy_pid" || true); do
      chrt --other -p 0 "$p" >/dev/null 2>&1 || true
      renice -n 0 -p "$p" >/dev/null 2>&1 || true
    done
  done
  local waited=$SECONDS rc=0
  wait "$tidy_pid" || rc=$?
  tidy_pid=""
  cat "$tidy_log"
  echo "== floodgate: clang-tidy done ($((SECONDS - waited))s waited for it)"
  return "$rc"
}

run_suite() {  # name, build dir, extra cmake args...
  local name=$1 dir=$2
  shift 2
  echo "== floodgate: $name build ($dir)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_TESTS=ON -DFLOODGATE_BENCH=OFF \
    -DFLOODGATE_FAULT_HOOKS=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== floodgate: $name tests"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 300)
  tidy_result
}

run_suite release build
# Sanitizers: leaks and undefined behaviour fail the run.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_suite "asan+ubsan" build-asan -DFLOODGATE_SANITIZE=ON
unset ASAN_OPTIONS UBSAN_OPTIONS
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
run_suite tsan build-tsan -DFLOODGATE_TSAN=ON -DCMAKE_CXX_FLAGS=-Wno-tsan
unset TSAN_OPTIONS
# Fuzzing: only the http, health probe, config and core code, built with clang.
echo "== floodgate: fuzz build (build-fuzz)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_FUZZ=ON \
  -DFLOODGATE_TESTS=OFF -DFLOODGATE_BENCH=OFF >/dev/null
cmake --build build-fuzz --target floodgate_fuzz -j "$jobs"
echo "== floodgate: fuzz (${FUZZ_SECONDS:-15}s per target)"
tests/fuzz/run.sh build-fuzz "${FUZZ_SECONDS:-15}"
# The Debian package: built as an operator would (scripts/package.sh, a release build without
# test code), unpacked into a scratch root and checked (tests/package/test_package.py).
echo "== floodgate: package build (build-package)"
scripts/package.sh build-package
echo "== floodgate: package tests"
FLOODGATE_PACKAGES=build-package/packages python3 -B -m unittest -v tests/package/test_package.py
tidy_result wait
echo "== floodgate: all tests passed"
