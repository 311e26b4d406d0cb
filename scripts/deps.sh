#!/usr/bin/env bash
# Installs the Debian packages floodgate builds, tests and benchmarks with.
# Only what is missing is installed; `apt-get update` runs once, and only when needed.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config python3 curl
  libboost1.81-dev node-llhttp libtomlplusplus-dev libspdlog-dev libfmt-dev
  libgtest-dev googletest libgmock-dev libbenchmark-dev libsystemd-dev libssl-dev openssl liburing-dev
  wrk haproxy nginx-light
  clang libclang-rt-14-dev clang-tidy python3-h11 procps redis-server groff-base ccache
  libnghttp2-dev nghttp2-client python3-h2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "floodgate: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The distribution's nginx, haproxy and redis services are not ours: the benchmark and the
  # quota tests start their own.
  for svc in nginx haproxy redis-server; do
    $sudo systemctl disable --now "$svc" >/dev/null 2>&1 || $sudo service "$svc" stop >/dev/null 2>&1 || true
  done
fi

# promtool, to lint a scrape of /metrics in the test command: only the one binary, taken from
# Debian's prometheus package without installing the package (which would add a Prometheus
# server and its service).
if ! command -v promtool >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "floodgate: installing promtool from Debian's prometheus package"
  if ! (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); then
    $sudo apt-get update -qq
    (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1)
  fi
  dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
  $sudo install -m 0755 "$work/usr/bin/promtool" /usr/local/bin/promtool
fi

# The compiler cache of scripts/test.sh and clang-tidy's clean results (scripts/tidy.sh), shared
# by every clone on this machine.
for dir in /var/cache/floodgate/ccache /var/cache/floodgate/tidy; do
  if [ ! -d "$dir" ]; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo mkdir -p "$dir" 2>/dev/null || true
    [ "$(id -u)" -eq 0 ] || $sudo chown "$(id -u):$(id -g)" "$dir" 2>/dev/null || true
  fi
done
