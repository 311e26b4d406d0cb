#!/usr/bin/env bash
# Builds floodgate's Debian package with CPack:
#   scripts/package.sh [BUILD_DIR]        (default build-package)
# leaves BUILD_DIR/packages/floodgate_<version>_<arch>.deb and, beside it, the debug symbols
# as floodgate-dbgsym_<version>_<arch>.ddeb. The binary is built as a release (-O3) with debug
# information, which the package splits off; no test code and no fault hooks are in it.
# `dpkg -i` the .deb to install; docs/operations.md, "Installing", lists what it puts where.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-package}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG -g" \
  -DFLOODGATE_TESTS=OFF -DFLOODGATE_BENCH=OFF -DFLOODGATE_FAULT_HOOKS=OFF -DFLOODGATE_PACKAGE=ON \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_BINDIR=sbin \
  -DFLOODGATE_SYSTEMD_UNIT_DIR=lib/systemd/system -DFLOODGATE_SYSUSERS_DIR=lib/sysusers.d >/dev/null
cmake --build "$dir" -j "$(nproc)"
rm -rf "$dir/packages"
(cd "$dir" && cpack -G DEB >/dev/null)
ls "$dir"/packages/*.deb "$dir"/packages/*.ddeb
