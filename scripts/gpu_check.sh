#!/usr/bin/env bash
# gpu_check.sh: the one script for checking MemTier's GPU paths on a GPU machine.
#
#   scripts/gpu_check.sh prepare [DIR]   HERE (Go, cmake, gcc, pip): build everything the GPU
#                                        machine runs into DIR (default build-gpu, ignored by
#                                        git), small enough to carry (~12 MiB; size printed)
#   scripts/gpu_check.sh run [DIR]       THERE (no Go, no cmake needed): real-driver checks
#                                        and the benchmark table; fits in ~8 minutes
#   scripts/gpu_check.sh double [DIR]    HERE: the `run` steps against the GPU test double
#                                        (tests/gpu_double), so the script itself is tested
#                                        on a machine without a GPU
#
# DIR is relative to the repository root unless absolute. `run` and `double`
# expect the working tree (they cd into gpu/ and runtime/engine/ for the Go test
# binaries) and DIR from `prepare`:
#   DIR/lib/libmemtier.so                 CUDA + GDS build (dlopens libcuda / libcufile)
#   DIR/bin/test_gpu_{staged,gds,hbm}     the C API GPU tests (tests/c)
#   DIR/bin/bench_gpu_read                the benchmark (examples/bench)
#   DIR/gpu.test, DIR/engine.test         go test -c -tags memtier_cuda,memtier_gds of ./gpu/
#                                         and ./runtime/engine/
#   DIR/gpu_double/                       the test double (for `double` only)
#   DIR/wheels/                           cffi + pycparser wheels, for a device python
#                                         without cffi (the optional Python step)
#
# Every step prints PASS, FAIL or SKIP with a reason; a summary ends the output
# and the exit status is 1 when a step failed. Results (the benchmark's JSON, the
# log) are also written to $OUT when that names a directory (the device runner's
# output folder), else to DIR/results.
#
# Environment (run/double): GPU_CHECK_SIZE (benchmark bytes; default 4G on a GPU,
# 256M on the double), GPU_CHECK_TMP (where the benchmark file is made; default
# $TMPDIR or /tmp, a local disk), GPU_CHECK_REPEAT (default 3), GPU_CHECK_BUDGET
# (seconds for the whole run, default 450: each step's timeout is cut to what is
# left, later steps are skipped once it is spent).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
mode=${1:-}
dir=${2:-build-gpu}
dir=${dir#OUT=}
[[ $dir == /* ]] || dir=$root/$dir

# rel PATH: PATH relative to the repository root when inside it (for messages).
rel() { [[ $1 == "$root"/* ]] && echo "${1#"$root"/}" || echo "$1"; }

usage() {
  sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

# ---------------------------------------------------------------- prepare
prepare() {
  set -e
  local go=${GO:-go} jobs tree
  command -v "$go" >/dev/null || { echo "prepare: Go is needed (GO=...)" >&2; exit 2; }
  command -v cmake >/dev/null || { echo "prepare: cmake is needed" >&2; exit 2; }
  jobs=$(nproc 2>/dev/null || echo 2)
  case "$dir" in
    / | "$root" | "$HOME") echo "prepare: refusing to use '$dir'" >&2; exit 2 ;;
  esac
  tree=$(mktemp -d "${TMPDIR:-/tmp}/memtier-gpu-prepare-XXXXXX")
  # shellcheck disable=SC2064 # expand now: tree is local
  trap "rm -rf '$tree'" EXIT
  echo "== cmake: CUDA + GDS build (in a temporary tree; only the outputs are kept)"
  cmake -S "$root" -B "$tree" -DCMAKE_BUILD_TYPE=Release -DMEMTIER_ENABLE_CUDA=ON \
    -DMEMTIER_ENABLE_GDS=ON -DMEMTIER_PYTHON_TESTS=OFF >/dev/null
  cmake --build "$tree" -j"$jobs" --target memtier_go test_gpu_staged test_gpu_gds test_gpu_hbm \
    test_no_gpu bench_gpu_read memtier_fake_cuda memtier_fake_cufile >/dev/null
  rm -rf "$dir"
  mkdir -p "$dir/lib" "$dir/bin" "$dir/gpu_double" "$dir/wheels"
  cp "$tree/libmemtier.so" "$dir/lib/"
  for t in test_gpu_staged test_gpu_gds test_gpu_hbm test_no_gpu; do cp "$tree/tests/c/$t" "$dir/bin/"; done
  cp "$tree/bench_gpu_read" "$dir/bin/"
  cp "$tree/gpu_double/libcuda.so.1" "$tree/gpu_double/libcufile.so.0" "$dir/gpu_double/"
  echo "== go test -c (tags memtier_cuda,memtier_gds): gpu.test, engine.test"
  (cd "$root" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" test -c -trimpath -ldflags='-s -w' \
    -tags memtier_cuda,memtier_gds -o "$dir/gpu.test" ./gpu/)
  (cd "$root" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" test -c -trimpath -ldflags='-s -w' \
    -tags memtier_cuda,memtier_gds -o "$dir/engine.test" ./runtime/engine/)
  strip --strip-unneeded "$dir/lib/libmemtier.so" "$dir"/bin/* 2>/dev/null || true
  echo "== pip download: cffi + pycparser wheels (CPython 3.9 to 3.13, manylinux x86_64)"
  local py ok=0
  py=$(command -v python3 || true)
  if [[ -n $py ]]; then
    for v in 3.9 3.10 3.11 3.12 3.13; do
      "$py" -m pip download -q --only-binary=:all: --platform manylinux2014_x86_64 \
        --python-version "$v" --implementation cp -d "$dir/wheels" cffi pycparser && ok=1
    done
  fi
  [[ $ok == 1 ]] || echo "note: no wheels downloaded (no python3/pip or no index); the Python step needs cffi there"
  rm -f "$dir/wheels"/*.tar.gz
  echo "== $(rel "$dir"):"
  (cd "$dir" && find . -type f -printf '%s\t%p\n' | sort -k2 | awk -F'\t' '{printf "  %8.1f KiB  %s\n", $1/1024, $2}')
  echo "== total: $(du -sh "$dir" | cut -f1) (carry limit 64 MiB)"
  echo "on the GPU machine: bash scripts/gpu_check.sh run ${2:-build-gpu}"
}

# ---------------------------------------------------------------- run / double
declare -a results=()
fails=0
t_start=$SECONDS
# The whole run must fit in the device session: every step's timeout is cut to
# what is left of the budget, and steps past it are skipped.
budget=${GPU_CHECK_BUDGET:-450}
deadline=$((SECONDS + budget))

t_step=$SECONDS
nogpu=0 # set when `run` finds no GPU: every later step is skipped, not failed
step() { # step NAME STATUS REASON; prints the step's own duration
  local name=$1 status=$2 reason=${3:-}
  results+=("$(printf '%-5s %-28s %s' "$status" "$name" "$reason")")
  [[ $status == FAIL ]] && fails=$((fails + 1))
  printf '%s %s: %s (%ds)\n' "$status" "$name" "$reason" $((SECONDS - t_step))
  t_step=$SECONDS
}

# run_step NAME TIMEOUT [--in DIR] CMD...: runs CMD (in DIR), PASS on 0, SKIP
# on 77, FAIL otherwise; the last output line (or a timeout note) is the reason.
run_step() {
  local name=$1 limit=$2 wd=. log rc last
  shift 2
  if [[ $1 == --in ]]; then
    wd=$2
    shift 2
  fi
  if [[ $nogpu == 1 ]]; then
    step "$name" SKIP "not a GPU machine"
    return 0
  fi
  local left=$((deadline - SECONDS))
  if ((left < 20)); then
    step "$name" SKIP "out of the time budget (GPU_CHECK_BUDGET=${budget}s)"
    return 0
  fi
  ((limit > left - 10)) && limit=$((left - 10))
  log=$(mktemp)
  echo "---- $name: ${*//$root\//}"
  (cd "$wd" && timeout --kill-after=10 "$limit" "$@") >"$log" 2>&1
  rc=$?
  sed 's/^/    /' "$log" | tail -n "${GPU_CHECK_LOG_LINES:-25}"
  cat "$log" >>"$results_dir/gpu_check.log"
  last=$(grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-160)
  rm -f "$log"
  case $rc in
    0) step "$name" PASS "$last" ;;
    77) step "$name" SKIP "$last" ;;
    124 | 137) step "$name" FAIL "timed out after ${limit}s" ;;
    *) step "$name" FAIL "exit $rc: $last" ;;
  esac
  return $rc
}

facts() {
  echo "==== machine"
  uname -srm
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
      --format=csv 2>&1 | sed 's/^/  /'
    timeout 30 nvidia-smi 2>&1 | head -n 20 | sed 's/^/  /'
  else
    echo "  nvidia-smi: not found"
  fi
  if lsmod 2>/dev/null | grep -q '^nvidia_fs'; then
    echo "  nvidia_fs kernel module: loaded (GDS can do DMA straight to the GPU)"
  else
    echo "  nvidia_fs kernel module: not loaded (cuFile can only run in compatibility mode)"
  fi
  local j=${CUFILE_ENV_PATH_JSON:-/etc/cufile.json}
  if [[ -r $j ]]; then
    echo "  cufile.json ($j): $(grep -o '"allow_compat_mode"[^,}]*' "$j" | head -n 1 | tr -s ' ')"
  else
    echo "  cufile.json: none at $j (cuFile defaults: compatibility mode allowed)"
  fi
  echo "  libcuda: ${MEMTIER_CUDA_LIBRARY:-$(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcuda.so.1' || echo 'not in the loader cache')}"
  echo "  libcufile: ${MEMTIER_CUFILE_LIBRARY:-$(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcufile.so.0' || echo 'not in the loader cache')}"
  echo "  disk for the benchmark file: $(df -h "$bench_tmp" 2>/dev/null | tail -n 1)"
}

# A libcufile outside the loader's path (CUDA toolkit, pip nvidia-cufile).
find_cufile() {
  [[ -n ${MEMTIER_CUFILE_LIBRARY:-} ]] && return
  ldconfig -p 2>/dev/null | grep -q 'libcufile.so.0' && return
  local c
  for c in /usr/local/cuda/lib64/libcufile.so.0 /usr/local/cuda/targets/*/lib/libcufile.so.0 \
    /usr/lib/x86_64-linux-gnu/libcufile.so.0 \
    $(python3 -c 'import nvidia.cufile, os; print(os.path.join(list(nvidia.cufile.__path__)[0], "lib", "libcufile.so.0"))' 2>/dev/null); do
    if [[ -e $c ]]; then
      export MEMTIER_CUFILE_LIBRARY=$c
      echo "  using $c (MEMTIER_CUFILE_LIBRARY)"
      return
    fi
  done
}

json_get() { # json_get FILE KEY: a number or string value of KEY (first match)
  grep -o "\"$2\": *[^,}]*" "$1" | head -n 1 | sed 's/^[^:]*: *//; s/"//g'
}

checks() {
  local double=$1 size repeat json
  [[ -x $dir/lib/libmemtier.so || -f $dir/lib/libmemtier.so ]] || {
    echo "no $(rel "$dir")/lib/libmemtier.so: run 'scripts/gpu_check.sh prepare' first" >&2
    exit 2
  }
  if [[ -n ${OUT:-} && -d ${OUT:-} ]]; then results_dir=$OUT; else results_dir=$dir/results; fi
  mkdir -p "$results_dir"
  : >"$results_dir/gpu_check.log"
  bench_tmp=${GPU_CHECK_TMP:-${TMPDIR:-/tmp}}
  export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local -a go_env
  if [[ $double == 1 ]]; then
    export MEMTIER_CUDA_LIBRARY=$dir/gpu_double/libcuda.so.1
    export MEMTIER_CUFILE_LIBRARY=$dir/gpu_double/libcufile.so.0
    go_env=(env MEMTIER_GPU_DOUBLE_DIR="$dir/gpu_double")
    size=${GPU_CHECK_SIZE:-256M}
    echo "== gpu_check.sh double: the run steps against the GPU test double (figures mean nothing)"
  else
    unset MEMTIER_CUDA_LIBRARY
    go_env=(env MEMTIER_GPU_TEST_REAL=1)
    size=${GPU_CHECK_SIZE:-4G}
    echo "== gpu_check.sh run: real driver"
    find_cufile
  fi
  repeat=${GPU_CHECK_REPEAT:-3}
  facts 2>&1 | tee -a "$results_dir/gpu_check.log"

  if [[ $double == 0 ]] && ! command -v nvidia-smi >/dev/null && ! ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
    step "cuda driver" SKIP "no nvidia-smi and no libcuda.so.1: not a GPU machine (use 'double' here)"
    nogpu=1
  fi

  # Go test binaries: the gpu package's byte tests, the engine's target-CUDA tests.
  run_step "go: gpu.test" 150 --in "$root/gpu" "${go_env[@]}" "$dir/gpu.test" -test.count=1
  run_step "go: engine.test -run GPU" 120 --in "$root/runtime/engine" "${go_env[@]}" \
    "$dir/engine.test" -test.count=1 -test.run GPU -test.v

  # C API tests against the driver (no double env in `run`).
  local t
  for t in test_gpu_staged test_gpu_gds test_gpu_hbm; do
    run_step "c: $t" 120 "$dir/bin/$t"
  done
  if [[ $double == 1 ]]; then
    run_step "c: test_gpu_staged deferred" 240 env FAKE_CUDA_DEFER_COPIES=1 "$dir/bin/test_gpu_staged"
    run_step "c: test_gpu_gds required" 120 env MEMTIER_GDS_MODE=required "$dir/bin/test_gpu_gds" required
    run_step "c: test_gpu_gds nocufile" 120 env MEMTIER_CUFILE_LIBRARY="$dir/gpu_double/missing/libcufile.so.0" \
      "$dir/bin/test_gpu_gds" nocufile
  fi

  # Benchmark: (a) staged vs file and H2D bandwidth, (b) GDS vs staged.
  json=$results_dir/bench_gpu_read.json
  local blimit=$((deadline - SECONDS - 40)) # leave time for the Python step and the summary
  ((blimit > 300)) && blimit=300
  echo "---- bench_gpu_read --size=$size --repeat=$repeat --json (file in $bench_tmp; limit ${blimit}s)"
  if [[ $nogpu == 1 ]]; then
    step "bench: bytes verified" SKIP "not a GPU machine"
  elif ((blimit < 30)); then
    step "bench: bytes verified" SKIP "out of the time budget (GPU_CHECK_BUDGET=${budget}s)"
  elif TMPDIR=$bench_tmp timeout --kill-after=10 "$blimit" "$dir/bin/bench_gpu_read" --size="$size" \
    --repeat="$repeat" --json >"$json" 2>>"$results_dir/gpu_check.log"; then
    local fp ff h2d naive st gds ratio gstate gbytes gfb
    fp=$(json_get "$json" file_pinned); ff=$(json_get "$json" file_pageable)
    h2d=$(json_get "$json" h2d_pinned); naive=$(json_get "$json" naive)
    st=$(json_get "$json" memtier_staged); gds=$(json_get "$json" memtier_gds)
    ratio=$(json_get "$json" staged_ratio_vs_bound); gstate=$(json_get "$json" gds_state)
    gbytes=$(json_get "$json" gds_bytes); gfb=$(json_get "$json" gds_fallbacks)
    printf '\n  %-44s %10s\n' "(a) $size, page cache warm" "GB/s"
    printf '  %-44s %10s\n' "file read: pread 8M loop -> pinned" "$fp" "file read: pread 8M loop -> pageable" "$ff" \
      "H2D copy from pinned memory" "$h2d" "naive pread + copy + sync" "$naive" \
      "memtier_read(CUDA), staged (gds_mode OFF)" "$st"
    printf '  %-44s %10s\n' "ratio memtier / min(file, H2D)" "$ratio"
    printf '\n  %-44s %10s\n' "(b) memtier_read(CUDA), gds_mode AUTO" "$gds"
    printf '  gds_bytes %s, gds_fallbacks %s; cuFile: %s\n\n' "$gbytes" "$gfb" "$gstate"
    step "bench: bytes verified" PASS "staged $st GB/s, GDS/auto $gds GB/s ($(rel "$json"))"
    if [[ $double == 1 ]]; then
      step "bench: staged >= 0.9 x bound" SKIP "ratio $ratio: the double's figures mean nothing"
    elif awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }'; then
      step "bench: staged >= 0.9 x bound" PASS "ratio $ratio vs min(file $fp, H2D $h2d)"
    else
      step "bench: staged >= 0.9 x bound" FAIL "ratio $ratio vs min(file $fp, H2D $h2d)"
    fi
    if [[ ${gbytes:-0} -gt 0 ]]; then
      step "bench: GDS path" PASS "$gds GB/s = $(awk -v a="$gds" -v b="$st" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')x staged; $gstate"
    else
      step "bench: GDS path" SKIP "GDS not used ($gfb fallbacks): $gstate"
    fi
  else
    local rc=$?
    if [[ $rc == 77 ]]; then
      step "bench: bytes verified" SKIP "$(tail -n 1 "$json")"
    else
      step "bench: bytes verified" FAIL "exit $rc (see $(rel "$results_dir")/gpu_check.log)"
      tail -n 5 "$results_dir/gpu_check.log" | sed 's/^/    /'
    fi
  fi

  # (c) Python + torch (examples/python/bench_gpu.py, when it exists).
  local pyb=$root/examples/python/bench_gpu.py
  if [[ $double == 1 || $nogpu == 1 ]]; then
    step "python: bench_gpu.py" SKIP "needs a real GPU (not the double)"
  elif ! command -v python3 >/dev/null; then
    step "python: bench_gpu.py" SKIP "no python3"
  elif [[ ! -f $pyb ]]; then
    step "python: bench_gpu.py" SKIP "examples/python/bench_gpu.py is not in this tree"
  elif ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    step "python: bench_gpu.py" SKIP "python3 has no torch with CUDA"
  else
    local pp=$root/python
    if ! python3 -c 'import cffi' 2>/dev/null; then
      python3 -m pip install -q --no-index --find-links "$dir/wheels" --target "$dir/pydeps" cffi pycparser \
        && pp=$pp:$dir/pydeps
    fi
    run_step "python: bench_gpu.py" 180 env PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}" \
      MEMTIER_LIBRARY="$dir/lib/libmemtier.so" python3 "$pyb"
  fi

  echo
  echo "==== summary ($((SECONDS - t_start)) s)"
  printf '  %s\n' "${results[@]}"
  local npass nskip
  npass=$(printf '%s\n' "${results[@]}" | grep -c '^PASS')
  nskip=$(printf '%s\n' "${results[@]}" | grep -c '^SKIP')
  echo "  $npass passed, $fails failed, $nskip skipped; results in $(rel "$results_dir")"
  printf '%s\n' "${results[@]}" >"$results_dir/summary.txt"
  [[ $fails == 0 ]]
}

case $mode in
  prepare) prepare ;;
  run) checks 0 ;;
  double) checks 1 ;;
  *) usage ;;
esac
