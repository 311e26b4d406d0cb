#!/usr/bin/env bash
# Installs what is missing, builds floodgate, starts the demo backend (127.0.0.1:9000 and
# 127.0.0.1:9001) and runs floodgate in the foreground with config/floodgate.toml.
# Then: curl -i http://127.0.0.1:8080/     Stop with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOODGATE_BENCH=OFF >/dev/null
cmake --build build -j "$(nproc)" --target floodgate
python3 scripts/demo-backend.py 127.0.0.1:9000 127.0.0.1:9001 &
backend=$!
trap 'kill $backend 2>/dev/null || true' EXIT
# Wait (bounded) until the demo backend accepts connections.
for _ in $(seq 1 50); do
  if (exec 3<>/dev/tcp/127.0.0.1/9000) 2>/dev/null; then break; fi
  sleep 0.1
done
echo "floodgate: try  curl -i http://127.0.0.1:8080/   (Ctrl-C to stop)"
build/floodgate -c config/floodgate.toml
