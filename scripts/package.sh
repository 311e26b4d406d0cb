#!/usr/bin/env bash
# Builds floodgate's Debian package with CPack:
#   scripts/package.sh [--with-tests] [BUILD_DIR]        (default build-package)
# leaves BUILD_DIR/packages/floodgate_<version>_<arch>.deb and, beside it, the debug symbols
# as floodgate-dbgsym_<version>_<arch>.ddeb. The binary is built as a release (-O3) with debug
# information, which the package splits off; no fault hook is in it (src/app/fault_hooks.h).
# `dpkg -i` the .deb to install; docs/operations.md, "Installing", lists what it puts where.
# --with-tests builds the test suite in the same directory too (the unit tests, their own code
# at -O0 -g1, and floodgate-faults, the binary with the test-only fault hooks, which is never
# packaged): that is scripts/test.sh's release lane, whose tests so run on the very objects
# that are packaged.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=(-DFLOODGATE_TESTS=OFF -DFLOODGATE_FAULT_HOOKS=OFF)
if [ "${1:-}" = --with-tests ]; then
  tests=(-DFLOODGATE_TESTS=ON -DFLOODGATE_FAULT_HOOKS=ON "-DFLOODGATE_TEST_CODE_FLAGS=-O0 -g1")
  shift
fi
dir=${1:-build-package}
scripts/configure.sh "$dir" gcc -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG -g" \
  "${tests[@]}" -DFLOODGATE_BENCH=OFF -DFLOODGATE_PACKAGE=ON \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_BINDIR=sbin \
  -DFLOODGATE_SYSTEMD_UNIT_DIR=lib/systemd/system -DFLOODGATE_SYSUSERS_DIR=lib/sysusers.d
cmake --build "$dir" -j "$(nproc)"
rm -rf "$dir/packages"
(cd "$dir" && cpack -G DEB >/dev/null)
ls "$dir"/packages/*.deb "$dir"/packages/*.ddeb
