#!/usr/bin/env bash
# Installs the Debian packages floodgate builds, tests and benchmarks with.
# Only what is missing is installed; `apt-get update` runs once, and only when needed.
set -euo pipefail
packages=(build-essential cmake pkg-config python3 curl
  libboost1.81-dev node-llhttp libtomlplusplus-dev libspdlog-dev libfmt-dev
  libgtest-dev googletest libgmock-dev libbenchmark-dev libsystemd-dev libssl-dev liburing-dev
  wrk haproxy nginx-light
  clang libclang-rt-14-dev clang-tidy python3-h11 procps redis-server)
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
