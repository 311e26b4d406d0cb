#!/usr/bin/env bash
# Installs what is missing, builds floodgate and runs the whole test suite three times: a
# normal build (which also runs the 60-second soak, bench/soak.py), an AddressSanitizer +
# UndefinedBehaviorSanitizer build, and a ThreadSanitizer build (reactors, the admin scrape
# and shutdown cross threads); then a fourth, short lane builds the libFuzzer targets with
# clang and runs each from its corpus for a bounded time (tests/fuzz/run.sh), replaying every
# recorded regression first. Exits non-zero on any failure. This is README's test command and
# the only thing .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)

run_suite() {  # name, build dir, extra cmake args...
  local name=$1 dir=$2
  shift 2
  echo "== floodgate: $name build ($dir)"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_TESTS=ON -DFLOODGATE_BENCH=OFF "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== floodgate: $name tests"
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 300)
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
echo "== floodgate: all tests passed"
