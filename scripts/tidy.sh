#!/usr/bin/env bash
# Runs clang-tidy with .clang-tidy's checks over every translation unit in src/, warnings as
# errors. floodgate's own headers (include/floodgate/ and the private headers in src/) are
# checked through the translation units that include them; third-party headers (Asio, spdlog,
# toml++, ...) are parsed but never reported. Exits non-zero, printing each warning once, when
# any check fires or a file does not compile; prints its wall time either way.
#   scripts/tidy.sh [--all] [BUILD_DIR [JOBS]]     (defaults: build-tidy, nproc)
# A file that passed before with the same input (scripts/tidy_keys.py: its preprocessed text,
# so its own and every included header's content, its flags, clang-tidy's version and
# .clang-tidy) is not checked again: clean results are kept by that key in FLOODGATE_TIDY_CACHE
# (default /var/cache/floodgate/tidy, made by scripts/deps.sh). --all checks every file.
# BUILD_DIR is configured (with the fault hooks, so that src/app/fault_hooks.cpp is in its
# compilation database), and only its generated header (floodgate_revision.h, for
# src/app/version.cpp) is built: clang-tidy needs compile_commands.json and that header. It is
# configured with clang so the flags are clang's.
# Needs scripts/deps.sh's packages; installs Debian's clang-tidy (14 on Debian 12) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)  # physical, as cmake and so the compilation database spell it
all=no
if [ "${1:-}" = --all ]; then all=yes; shift; fi
build=${1:-build-tidy}
jobs=${2:-$(nproc)}
start=$SECONDS

if ! dpkg-query -W -f='${Status}' clang-tidy 2>/dev/null | grep -q "install ok installed"; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "tidy: installing clang-tidy"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-tidy >/dev/null
fi

CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DFLOODGATE_TESTS=OFF -DFLOODGATE_BENCH=OFF \
  -DFLOODGATE_PCH=OFF -DFLOODGATE_FAULT_HOOKS=ON >/dev/null
cmake --build "$build" --target floodgate_revision >/dev/null

# The translation units: every src/ entry of the compilation database; a .cpp under src/ that
# no target compiles would go unchecked, so that fails the run.
mapfile -t units < <(python3 - "$build/compile_commands.json" "$root/src/" <<'EOF'
import json, os, sys
db, prefix = sys.argv[1], sys.argv[2]
files = {os.path.normpath(os.path.join(e["directory"], e["file"])) for e in json.load(open(db))}
print("\n".join(sorted(f for f in files if f.startswith(prefix))))
EOF
)
mapfile -t sources < <(find "$root/src" -name '*.cpp')
missing=$(LC_ALL=C comm -13 <(printf '%s\n' "${units[@]}" | LC_ALL=C sort) \
  <(printf '%s\n' "${sources[@]}" | LC_ALL=C sort))
if [ -n "$missing" ]; then
  echo "tidy: not in $build/compile_commands.json, so not checked:"; echo "$missing"
  exit 1
fi

logs=$(mktemp -d /tmp/floodgate-tidy.XXXXXX)
trap 'rm -rf "$logs"' EXIT
# Reported: the main file always, and headers under include/floodgate/ and src/ of this tree.
filter="^$(printf '%s' "$root" | sed 's/[][\\.*^$+?(){}|]/\\&/g')/(include/floodgate|src)/"

# The cache of clean results: one empty file per key that passed.
cache=${FLOODGATE_TIDY_CACHE:-/var/cache/floodgate/tidy}
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/floodgate-tidy
  mkdir -p "$cache"
fi
# (The header filter's part of the key leaves out the clone's directory.)
python3 -B scripts/tidy_keys.py "$build" "$jobs" "/(include/floodgate|src)/" "${units[@]}" >"$logs/keys"
declare -A key_of=()
todo=()
while read -r key file; do
  key_of[$file]=$key
  if [ "$all" = yes ] || [ ! -e "$cache/$key" ]; then todo+=("$file"); fi
done <"$logs/keys"
echo "== floodgate: clang-tidy ($(clang-tidy --version | sed -n 's/.*LLVM version //p')), ${#units[@]} files, $((${#units[@]} - ${#todo[@]})) of them clean before with the same input, $jobs jobs"
export build logs filter
# One clang-tidy per file; a file's log is kept only when clang-tidy fails on it.
run_one() {
  local log
  log=$logs/$(echo "$1" | tr / _).log
  if clang-tidy -p "$build" --quiet --warnings-as-errors='*' \
      --header-filter="$filter" "$1" >"$log" 2>&1; then
    rm -f "$log"
  fi
}
export -f run_one
if ((${#todo[@]})); then
  printf '%s\0' "${todo[@]}" | xargs -0 -n1 -P "$jobs" bash -c 'run_one "$1"' _
fi
for file in "${todo[@]}"; do  # the passes, remembered
  [ -e "$logs/$(echo "$file" | tr / _).log" ] || : >"$cache/${key_of[$file]}"
done

elapsed=$((SECONDS - start))
times >"$logs/times"  # this shell's, then its children's user and system time
cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$logs/times")
took="$((elapsed / 60))m$((elapsed % 60))s, ${cpu}s CPU"
shopt -s nullglob
failed=("$logs"/*.log)
if ((${#failed[@]})); then
  echo "tidy: clang-tidy fails on ${#failed[@]} of ${#units[@]} files (${took}):"
  # A header's warning comes once per file that includes it: print each diagnostic once, with
  # the source lines and notes that follow it.
  cat "${failed[@]}" | grep -v -E '^[0-9]+ (warning|error)s? (and [0-9]+ errors? )?(generated|treated as errors?)\.?$' |
    awk '/^([^ ].*:[0-9]+:[0-9]+: )?(error|warning): |^Error while processing / { keep = !seen[$0]++ }
         keep'
  exit 1
fi
echo "tidy: ${#units[@]} files clean, ${#todo[@]} of them checked (${took})"
