#!/usr/bin/env bash
# rebuild.sh [build_dir] [extra cmake args...]
#
# One-click clean rebuild: removes build_dir (default: <repo>/build), configures
# with -DMEMTIER_PYTHON_TESTS=ON and the extra arguments, builds with every
# core and runs ctest, all in one pass: the C, ABI and Go tests, the GPU code
# paths against the test double (tests/gpu_double; the library always has the
# CUDA and GDS backends), the examples, and the Python suite with the packaging
# checks (label python; the first run makes a venv under ~/.cache/memtier and
# downloads torch from PyPI, a few GB). Exits non-zero on the first failure.
# Works from any directory; a relative build_dir is relative to the caller's.
#
#   ./scripts/rebuild.sh
#   ./scripts/rebuild.sh ./build -DMEMTIER_PYTHON_TESTS=OFF   # no Python suite
#   CTEST_ARGS="-L abi" ./scripts/rebuild.sh /tmp/mt-build
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;   # prints usage and changes nothing
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

build="$root/build"
if [[ $# -gt 0 && $1 != -* ]]; then
  build=$1
  shift
fi
mkdir -p "$build"
build=$(cd "$build" && pwd -P)

# Refuse to delete something that is not a build directory.
case "$build" in
  / | "$root" | "$HOME" | "$(dirname "$root")")
    echo "rebuild.sh: refusing to remove '$build'" >&2
    exit 2 ;;
esac
if [[ -n $(ls -A "$build") && ! -f $build/CMakeCache.txt ]]; then
  echo "rebuild.sh: '$build' is not empty and has no CMakeCache.txt; not removing it" >&2
  exit 2
fi

jobs=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

echo "== removing $build"
rm -rf "$build"
# The caller's arguments come last, so they win (-DMEMTIER_PYTHON_TESTS=OFF).
echo "== configuring: cmake -S $root -B $build -DMEMTIER_PYTHON_TESTS=ON $*"
cmake -S "$root" -B "$build" -DMEMTIER_PYTHON_TESTS=ON "$@"
echo "== building with $jobs jobs"
cmake --build "$build" --parallel "$jobs"
echo "== testing"
cd "$build"
# shellcheck disable=SC2086
ctest --output-on-failure ${CTEST_ARGS:-}
echo "== rebuild.sh: build and tests passed ($build)"
