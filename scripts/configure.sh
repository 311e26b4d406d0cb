#!/usr/bin/env bash
# Configures a build directory the way scripts/test.sh and scripts/package.sh do: the Ninja
# generator and the named compiler, with the CMake arguments given after it.
#   scripts/configure.sh BUILD_DIR gcc|clang [CMAKE_ARGS...]
# A directory configured before with another generator or compiler (an older test.sh used Unix
# Makefiles and GCC for every lane) is configured afresh: its CMakeCache.txt and CMakeFiles/
# are removed first, which CMake needs for either change; its objects are rebuilt as needed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/configure.sh BUILD_DIR gcc|clang [CMAKE_ARGS...]}
case ${2:-} in
  gcc) cc=gcc cxx=g++ ;;
  clang) cc=clang cxx=clang++ ;;
  *) echo "configure.sh: the compiler is gcc or clang, not '${2:-}'" >&2; exit 2 ;;
esac
shift 2
cache=$dir/CMakeCache.txt
if [ -f "$cache" ] && ! { grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$cache" &&
    grep -qx "CMAKE_CXX_COMPILER:FILEPATH=$(command -v "$cxx")" "$cache"; }; then
  echo "configure.sh: $dir was configured with another generator or compiler; configuring it afresh"
  rm -rf "$cache" "$dir/CMakeFiles"
fi
CC=$cc CXX=$cxx exec cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
