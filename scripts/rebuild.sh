#!/usr/bin/env bash
# rebuild.sh [build_dir] [extra cmake args...]
#
# One-click clean rebuild: removes build_dir (default: <repo>/build), configures
# with the extra arguments, builds with every core and runs ctest. Exits
# non-zero on the first failure. Works from any directory.
#
#   ./scripts/rebuild.sh
#   ./scripts/rebuild.sh ./build -DMEMTIER_ENABLE_CUDA=ON
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
# An explicit relative build dir is relative to the caller's directory.
#
# When build_dir is not itself a CUDA build, a second pass follows in
# build_dir/gpu-pass: the CUDA + GDS build (no CUDA toolkit is needed: libcuda
# and libcufile are dlopen'ed) and its GPU tests against the test double
# (tests/gpu_double: staged pipeline, GDS and its fallbacks, HBM prefetch,
# failure injection, B20), so every machine runs the GPU code paths of the C
# API, not only the CPU-only build's UNSUPPORTED answers. MEMTIER_GPU_PASS=0
# skips it; CTEST_ARGS applies to the first pass only.
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
echo "== configuring: cmake -S $root -B $build $*"
cmake -S "$root" -B "$build" "$@"
echo "== building with $jobs jobs"
cmake --build "$build" --parallel "$jobs"
echo "== testing"
cd "$build"
# shellcheck disable=SC2086
ctest --output-on-failure ${CTEST_ARGS:-}
echo "== rebuild.sh: build and tests passed ($build)"

if [[ ${MEMTIER_GPU_PASS:-1} != 0 ]] && ! grep -q '^MEMTIER_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
  gpass=$build/gpu-pass
  echo "== GPU pass: cmake -S $root -B $gpass -DMEMTIER_ENABLE_CUDA=ON -DMEMTIER_ENABLE_GDS=ON (test double)"
  cmake -S "$root" -B "$gpass" -DMEMTIER_ENABLE_CUDA=ON -DMEMTIER_ENABLE_GDS=ON -DMEMTIER_PYTHON_TESTS=OFF
  cmake --build "$gpass" --parallel "$jobs"
  cd "$gpass"
  ctest --output-on-failure -R 'gpu|^abi_'
  echo "== rebuild.sh: GPU pass passed ($gpass)"
fi
