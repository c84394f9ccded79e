#!/usr/bin/env bash
# cgocheck2.sh BUILD_DIR [with-python]
#
# Rebuild libmemtier.so with GOEXPERIMENT=cgocheck2 (complete checking of the
# cgo pointer-passing rules, https://pkg.go.dev/cmd/cgo#hdr-Passing_pointers, not only the default sampled
# checks) and run the C API tests, and optionally the core Python suite,
# against it. A rule broken anywhere on those paths aborts the process. In a
# CUDA build the library gets the build's GPU tags and the GPU tests run too,
# against the test double (<build>/gpu_double).
set -euo pipefail
build=$(cd "$1" && pwd -P)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
out="$build/cgocheck2"
mkdir -p "$out"
# Every build has the GPU backends; the GPU tests run against the test double
# when the build registered them (MEMTIER_ENABLE_CUDA / _GDS, CMakeCache).
tags=()
gpu_tests=()
if grep -q '^MEMTIER_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  gpu_tests=(test_gpu_staged test_gpu_hbm)
  grep -q '^MEMTIER_ENABLE_GDS:BOOL=ON' "$build/CMakeCache.txt" && gpu_tests+=(test_gpu_gds)
fi
# The header's hash in CGO_CFLAGS: Go's build cache does not hash headers from
# outside the package folder (cmake/RunGo.cmake says more).
hsum=$(sha256sum "$root/include/memtier.h" | cut -c1-16)
(cd "$root" && GOFLAGS=-buildvcs=false CGO_CFLAGS="-O2 -g -I$root/include -DMEMTIER_H_SHA256_16=0x$hsum" GOEXPERIMENT=cgocheck2 \
  go build "${tags[@]}" -buildmode=c-shared -trimpath -ldflags=-extldflags=-Wl,-soname,libmemtier.so \
  -o "$out/libmemtier.so" ./capi)
fail=0
for t in test_read_paths test_errors test_readv test_async test_threads test_stale test_misuse test_stats_exact \
  ${gpu_tests[@]+"${gpu_tests[@]}"}; do
  exe="$build/tests/c/$t"
  [[ -x $exe ]] || { echo "cgocheck2: $t not built" >&2; fail=1; continue; }
  if LD_LIBRARY_PATH="$out" MEMTIER_CUDA_LIBRARY="$build/gpu_double/libcuda.so.1" \
    MEMTIER_CUFILE_LIBRARY="$build/gpu_double/libcufile.so.0" "$exe" >"$out/$t.log" 2>&1; then
    echo "cgocheck2: $t passed"
  else
    echo "cgocheck2: $t FAILED (log: $out/$t.log)"; tail -20 "$out/$t.log"; fail=1
  fi
done
if [[ ${2:-} == with-python ]]; then
  py=$("$root/scripts/python_env.sh" | tail -n 1)
  (cd "$root" && MEMTIER_LIBRARY="$out/libmemtier.so" "$py" -m pytest -q -p no:cacheprovider \
    tests/python/test_core.py tests/python/test_tensor.py) || fail=1
fi
exit $fail
