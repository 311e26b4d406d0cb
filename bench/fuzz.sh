#!/usr/bin/env bash
# Longer libFuzzer runs of floodgate's fuzz targets (tests/fuzz): builds them with clang in
# build-fuzz (-DFLOODGATE_FUZZ=ON; only the http, health probe, config and core code), then
# runs each target for SECONDS, one after another, niced, and prints its executions and
# libFuzzer's final coverage line (cov: edges, ft: features, corp: corpus size). A crash
# fails the run and keeps its input (see tests/fuzz/run.sh); turn it into a regression with
#   cp ARTIFACT tests/fuzz/regressions/TARGET/NAME
#
# Usage: bench/fuzz.sh [SECONDS_PER_TARGET (default 300)] [TARGET...]
# Env: BUILD_DIR (default build-fuzz), FUZZ_ARTIFACTS (where logs and crash inputs go).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
shift || true
build=${BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_FUZZ=ON \
  -DFLOODGATE_TESTS=OFF -DFLOODGATE_BENCH=OFF >/dev/null
nice cmake --build "$build" --target floodgate_fuzz -j "$(nproc)" >/dev/null
exec nice tests/fuzz/run.sh "$build" "$seconds" "$@"
