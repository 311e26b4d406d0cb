#!/usr/bin/env bash
# Installs what is missing, builds floodgate and runs the whole test suite three times: the
# release build (GCC, -O3 -g, what the Debian package is made of; it also runs the 60-second
# soak, bench/soak.py), an AddressSanitizer + UndefinedBehaviorSanitizer build and a
# ThreadSanitizer build, both clang -O2 -g1 (reactors, the admin scrape and shutdown cross
# threads); then a fourth, short lane builds the libFuzzer targets with clang and runs each from
# its corpus for a bounded time (tests/fuzz/run.sh), replaying every recorded regression first;
# a fifth checks the Debian package the release lane made (scripts/package.sh,
# tests/package/). Beside all of them, clang-tidy checks every file in src/ with warnings as
# errors (scripts/tidy.sh). Exits non-zero on any failure. This is README's test command and the
# only thing .ci/run calls.
#   scripts/test.sh                 every lane (what CI runs)
#   scripts/test.sh --lane LANE     one lane: release, asan, tsan, fuzz, package or tidy
# Every build uses Ninja (scripts/configure.sh) and ccache (CCACHE_DIR, default
# /var/cache/floodgate/ccache, made by scripts/deps.sh); the run ends with a table of each
# lane's times and counts. docs/testing.md says what each lane is for and how long it takes.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=(release asan tsan fuzz package tidy)
only=""
while (($#)); do
  case $1 in
    --lane)
      only=${2:-}
      [[ " ${lanes[*]} " == *" $only "* ]] || { echo "test.sh: --lane takes one of: ${lanes[*]}" >&2; exit 2; }
      shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
wanted() { [ -z "$only" ] || [ "$only" = "$1" ]; }
scripts/deps.sh
jobs=$(nproc)

# The compiler cache: outside the clone, so that every clone and every lane share it; paths are
# rewritten relative to the clone (CCACHE_BASEDIR, CCACHE_NOHASHDIR), so a fresh clone in
# another directory hits what an earlier one compiled.
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/floodgate/ccache}
if ! mkdir -p "$CCACHE_DIR" 2>/dev/null || [ ! -w "$CCACHE_DIR" ]; then
  CCACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/floodgate-ccache
  mkdir -p "$CCACHE_DIR"
fi
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# The precompiled headers (cmake/pch.cmake) are cached too: ccache then hashes the header itself
# instead of trusting the macros and timestamps it was built with. Depend mode: ccache takes a
# compilation's inputs from the dependency file the compiler writes anyway (Ninja asks for one)
# instead of running the preprocessor first, which cost a quarter more CPU on every miss.
export CCACHE_SLOPPINESS=pch_defines,time_macros CCACHE_DEPEND=true
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache

# The compilers and clang-tidy allocate and free hundreds of megabytes per file: with glibc's
# heap on transparent huge pages and no returning of memory to the kernel between files' phases,
# they take 10-15 % less CPU (clang, clang-tidy; GCC 2 %), most of it page faults. Only the
# builds and clang-tidy run so: every test runs with the caller's environment (restored in the
# subshell each lane's tests run in), so RSS figures and the soak see glibc's defaults.
user_tunables=${GLIBC_TUNABLES-}
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
callers_tunables() {  # in a subshell: the environment the caller gave for glibc's tunables
  if [ -n "$user_tunables" ]; then export GLIBC_TUNABLES=$user_tunables; else unset GLIBC_TUNABLES; fi
}
ccache --zero-stats >/dev/null

# The summary: one row per lane that ran (build seconds, test seconds, tests passed and failed),
# printed at exit whatever the outcome.
summary=()
lane_row() {  # lane, build s, test s, passed, failed
  summary+=("$(printf '| %-8s | %7s | %7s | %7s | %6s |' "$@")")
}
lane_result() {  # lane, build s, test s, exit status, what the passed column says on success
  if [ "$4" -eq 0 ]; then lane_row "$1" "$2" "$3" "$5" 0; else lane_row "$1" "$2" "$3" - fails; fi
}
print_summary() {  # the run's exit status
  local rc=$1
  echo "== floodgate: summary ($((SECONDS / 60))m$((SECONDS % 60))s in all$([ "$rc" -eq 0 ] || echo ", FAILED"))"
  echo "| lane     | build s |  test s |  passed | failed |"
  echo "|----------|---------|---------|---------|--------|"
  local row
  for row in "${summary[@]}"; do echo "$row"; done
  ccache --print-stats 2>/dev/null | awk '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hit += $2 }
    $1 == "cache_miss" { miss += $2 }
    END { if (hit + miss > 0) printf "ccache: %d of %d compilations from the cache (%.0f%%)\n", hit, hit + miss, 100 * hit / (hit + miss) }' || true
  return "$rc"
}

# clang-tidy runs in the background at idle priority (SCHED_IDLE: any other task on a core
# preempts it at once), so it takes only the CPU the builds and tests leave; its result is read
# between lanes, and waited for at the end. Its own process group (set -m) so that an early exit
# can end all of it; the same session, so the idle priority counts against the lanes.
tidy_log=$(mktemp /tmp/floodgate-tidy-log.XXXXXX)
tidy_pid=""
tidy_started=$SECONDS
if wanted tidy; then
  idle=(chrt --idle 0)
  "${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
  set -m
  "${idle[@]}" scripts/tidy.sh build-tidy "$jobs" >"$tidy_log" 2>&1 &
  tidy_pid=$!
  set +m
fi
tidy_running() {  # by pid and command line: pids are reused, and tidy may have been reaped
  [ -n "$tidy_pid" ] && ps -o args= -p "$tidy_pid" 2>/dev/null | grep -q 'scripts/tidy\.sh'
}
on_exit() {  # the summary, and no clang-tidy left running, whatever the outcome. Without errexit:
  # under it a failed run's non-zero status stopped the trap before the kill, and clang-tidy
  # went on writing its cache after the run had ended.
  local rc=$?
  set +e
  print_summary "$rc"
  if tidy_running; then kill -- -"$tidy_pid" 2>/dev/null; fi
  rm -f "$tidy_log"
  exit "$rc"
}
trap on_exit EXIT
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
  local files
  files=$(sed -n 's/^== floodgate: clang-tidy .*), \([0-9]*\) files.*/\1/p' "$tidy_log")
  lane_result tidy - "$((SECONDS - tidy_started))" "$rc" "${files:-?}"
  return "$rc"
}

run_suite() {  # lane, build dir, ctest jobs, build command...: builds with the command, then
  # runs ctest in the dir with that many tests at once
  local name=$1 dir=$2 test_jobs=$3
  shift 3
  local start=$SECONDS built tested rc=0 out
  echo "== floodgate: $name build ($dir)"
  "$@" || { lane_row "$name" "$((SECONDS - start))" - - -; return 1; }
  built=$((SECONDS - start))
  echo "== floodgate: $name tests"
  out=$(mktemp /tmp/floodgate-ctest.XXXXXX)
  (cd "$dir" && callers_tunables && ctest --output-on-failure -j "$test_jobs" --timeout 300) 2>&1 |
    tee "$out" || rc=$?
  tested=$((SECONDS - start - built))
  # ctest's last count: "NN% tests passed, F tests failed out of T"
  local failed="" total=""
  read -r failed total < <(sed -n 's/.* tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\1 \2/p' "$out" | tail -1) || true
  rm -f "$out"
  lane_row "$name" "$built" "$tested" "$((${total:-0} - ${failed:-0}))" "${failed:-?}"
  ((rc == 0)) || return "$rc"
  tidy_result
}

sanitizer_build() {  # build dir, compiler, cmake args...: a sanitizer lane's build, at -O2 with
  # line tables only (-g1): the sanitizers' reports still name every frame's file and line
  # (docs/testing.md). The unit tests' own code is not optimised (-O0: it halves their compile
  # time under the sanitizers; the code under test stays -O2). Each unit-test executable runs
  # as one process: a sanitized process takes about 0.1 s to start, more than most unit tests.
  # The end-to-end modules run once, on the io_uring loop; the release lane runs their epoll
  # copy too.
  local dir=$1 compiler=$2 flags="-O2 -g1 -DNDEBUG"
  shift 2
  scripts/configure.sh "$dir" "$compiler" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
    -DFLOODGATE_TESTS=ON -DFLOODGATE_BENCH=OFF -DFLOODGATE_FAULT_HOOKS=ON \
    -DFLOODGATE_UNIT_TEST_PROCESS=executable "-DFLOODGATE_TEST_CODE_FLAGS=-O0 -g1" \
    -DFLOODGATE_TEST_EPOLL_COPY=OFF "$@" &&
    cmake --build "$dir" -j "$jobs"
}

lane_built=""  # a lane without ctest sets it (mark_built) when its build is done
mark_built() { lane_built=$SECONDS; }
timed_lane() {  # lane, command...: a lane without ctest (fuzz, package)
  local name=$1 start=$SECONDS rc=0
  shift
  lane_built=""
  "$@" || rc=$?
  local built=- tested=$((SECONDS - start))
  if [ -n "$lane_built" ]; then built=$((lane_built - start)) tested=$((SECONDS - lane_built)); fi
  lane_result "$name" "$built" "$tested" "$rc" ok
  return "$rc"
}

fuzz_lane() {
  # Fuzzing: only the http, health probe, config and core code, built with clang.
  echo "== floodgate: fuzz build (build-fuzz)"
  # (timed_lane runs this in a condition, where `set -e` does not stop it: each step is chained)
  scripts/configure.sh build-fuzz clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_FUZZ=ON \
    -DFLOODGATE_TESTS=OFF -DFLOODGATE_BENCH=OFF &&
    cmake --build build-fuzz --target floodgate_fuzz -j "$jobs" && mark_built &&
    echo "== floodgate: fuzz (${FUZZ_SECONDS:-15}s per target)" &&
    (callers_tunables && tests/fuzz/run.sh build-fuzz "${FUZZ_SECONDS:-15}")
}

package_lane() {
  # The Debian package (scripts/package.sh: a release build, -O3 -g, no fault hooks), unpacked
  # into a scratch root and checked (tests/package/test_package.py). After the release lane it
  # is that lane's package, made from the objects its tests ran on; alone, its own build.
  local dir=build
  if [ "$package_built" != yes ]; then
    dir=build-package
    echo "== floodgate: package build ($dir)"
    scripts/package.sh "$dir" || return
  fi
  mark_built &&
    echo "== floodgate: package tests ($dir/packages)" &&
    (callers_tunables && FLOODGATE_PACKAGES=$dir/packages python3 -B -m unittest -v \
      tests/package/test_package.py)
}

# The release lane builds what the package is made of (scripts/package.sh --with-tests: GCC,
# Release -O3 -g) with the test suite beside it, and makes the package. Its tests run two per
# core: the end-to-end modules mostly wait on sockets and timers (the soak still runs alone,
# RUN_SERIAL). Sanitized processes are several times slower, so those lanes run one per core.
package_built=no
if wanted release; then
  run_suite release build "$((jobs * 2))" scripts/package.sh --with-tests build
  package_built=yes
fi
if wanted asan; then
  # Sanitizers: leaks and undefined behaviour fail the run.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite asan build-asan "$jobs" sanitizer_build build-asan clang -DFLOODGATE_SANITIZE=ON
fi
if wanted tsan; then
  # clang: it builds this lane in half GCC's time. Its TSan runtime owns operator new, so the
  # heap count there comes from the sanitizer's allocation hook (src/core/heap_count.cpp).
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    run_suite tsan build-tsan "$jobs" sanitizer_build build-tsan clang -DFLOODGATE_TSAN=ON
fi
if wanted fuzz; then timed_lane fuzz fuzz_lane; fi
if wanted package; then timed_lane package package_lane; fi
tidy_result wait
echo "== floodgate: all tests passed"
