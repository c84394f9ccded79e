#!/usr/bin/env bash
# gpu_check.sh: the one script for checking MemTier's GPU paths on a GPU machine.
#
#   scripts/gpu_check.sh prepare [DIR]            HERE (Go, cmake, gcc, pip): build everything
#                                                 the GPU machine runs into DIR (default
#                                                 build-gpu, ignored by git); size printed
#   scripts/gpu_check.sh run [OPTIONS] [DIR]      THERE (no Go, no network needed): the
#                                                 real-driver checks and the benchmarks
#   scripts/gpu_check.sh double [OPTIONS] [DIR]   HERE: the `run` steps against the GPU test
#                                                 double (tests/gpu_double), so the script
#                                                 itself is tested without a GPU
#   scripts/gpu_check.sh --help                   this text
#
# Options (run, double):
#   --quick             a 2 GiB benchmark file, 2 repeats, a 1 GB checkpoint in bench_gpu.py
#                       (default: 4 GiB, 3 repeats); the budget is 290 s either way
#                       (GPU_CHECK_BUDGET), so `run` ends within 300 s
#   --require-gpu       exit 1 when this is not a GPU machine (default: every step SKIPs, exit 0)
#   --no-bench-report   leave out the last step (the CPU benchmark report's rows,
#                       scripts/bench_report.py --quick --no-remote --large-size 512 MiB
#                       with the carried benchmarks: the S3 rows need versitygw, which the
#                       GPU machine cannot fetch; the earlier steps leave it
#                       GPU_CHECK_REPORT_SECS of the budget, and a report that does not
#                       finish in what is left is a SKIP that says so)
#
# One call on a device (README.md, "GPU target and GDS"): carry ["build-gpu"], timeout_s 360,
# command
#   bash scripts/gpu_check.sh run --quick --require-gpu build-gpu
# (the 60 s above the 290 s budget cover a step's kill grace and the transfers; the rest of
# 15 device minutes leaves room for a second call).
#
# Each step ends as PASS, FAIL, SKIP, fallback (it passed, but MemTier fell back from GDS
# to the staged path) or compat (it passed, with cuFile in compatibility mode: no
# nvidia-fs, so not GPUDirect). Go test binaries run with -test.v; a step whose tests
# skipped (other than tests that need the double's switches) is SKIP, never PASS, and
# in `run` the engine's GPU tests fail instead of skipping (MEMTIER_REQUIRE_GPU=1). The
# output ends with one table (step, result, seconds, detail); it is also written as
# gpu_check.json, next to gpu_check.log (every step's output, written as it runs),
# summary.txt, bench_gpu_read.json, cufile.log (cuFile's own log, CUFILE_LOGGING_LEVEL
# INFO unless set: each step logs to its own file through CUFILE_LOGFILE_PATH, appended
# here under a "==== step" line) and bench_report/bench_report.{json,png}: 7 files, in
# $OUT when that names a directory (the device runner's output folder, which returns at
# most 8), else in DIR/results. Exit status: 1 when a step failed, 2 on a usage error,
# else 0. --help prints this and changes nothing.
#
# DIR is relative to the repository root unless absolute. `run` and `double` expect
# the working tree (the Go test binaries run in gpu/ and runtime/engine/) and DIR from
# `prepare`:
#   DIR/lib/libmemtier.so                 the one library (CUDA + GDS backends always in; it
#                                         dlopens libcuda / libcufile), as rebuild.sh builds it
#   DIR/bin/test_gpu_{staged,gds,hbm}     the C API GPU tests (tests/c)
#   DIR/bin/bench_gpu_read                the GPU benchmark (examples/bench)
#   DIR/bench/bench_{hot_path,large_read,reuse}   the CPU benchmarks (bench_report.py)
#   DIR/gpu.test, DIR/engine.test         go test -c of ./gpu/ and ./runtime/engine/
#   DIR/gpu_double/                       the test double (for `double` only)
#   DIR/wheels/                           cffi + pycparser wheels (the device python has no cffi)
#   DIR/cufile/libcufile.so.0             pip's nvidia-cufile library, used only when the
#                                         machine has no cuFile of its own (best effort)
#
# cuFile is looked for in this order: $MEMTIER_CUFILE_LIBRARY, the loader cache,
# /usr/local/cuda*/lib64 and targets/*/lib, the python3 site-packages of the CUDA 13 and
# 12 wheels (nvidia/cu13/lib, nvidia/cufile/lib, nvidia/cu12/lib), then DIR/cufile.
#
# Environment (run/double): GPU_CHECK_SIZE (benchmark bytes), GPU_CHECK_TMP (where the
# benchmark file is made; default $TMPDIR or /tmp, else /var/tmp or the working tree's
# file system when that is tmpfs or overlay, since O_DIRECT and cuFile refuse tmpfs),
# GPU_CHECK_REPEAT, GPU_CHECK_BUDGET (seconds for the whole run, default 290: each step's
# timeout is cut to what is left, keeping GPU_CHECK_REPORT_SECS (default 100) for the
# last step, the CPU benchmark report; later steps SKIP once it is spent).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

# rel PATH: PATH relative to the repository root when inside it, ~ for $HOME (messages).
rel() {
  if [[ $1 == "$root"/* ]]; then echo "${1#"$root"/}"
  elif [[ -n ${HOME:-} && $HOME != / && $1 == "$HOME"/* ]]; then echo "~/${1#"$HOME"/}"
  else echo "$1"; fi
}

usage() {
  sed -n '2,/^set -uo pipefail/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

mode=${1:-}
[[ $# -gt 0 ]] && shift
quick=0
require_gpu=0
bench_report=1
dir_arg=""
case $mode in
  -h | --help | help) usage; exit 0 ;;
  prepare | run | double) ;;
  *) usage >&2; exit 2 ;;
esac
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --quick) quick=1 ;;
    --require-gpu) require_gpu=1 ;;
    --no-bench-report) bench_report=0 ;;
    -*) echo "gpu_check.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      [[ -z $dir_arg ]] || { echo "gpu_check.sh: more than one DIR given" >&2; exit 2; }
      dir_arg=$1 ;;
  esac
  shift
done
if [[ $mode == prepare && ($quick == 1 || $require_gpu == 1 || $bench_report == 0) ]]; then
  echo "gpu_check.sh: prepare takes no options" >&2
  exit 2
fi
dir=${dir_arg:-build-gpu}
[[ $dir == /* ]] || dir=$root/$dir

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
  echo "== cmake: the one library and its GPU tests, Release (in a temporary tree; only the outputs are kept)"
  cmake -S "$root" -B "$tree" -DCMAKE_BUILD_TYPE=Release -DMEMTIER_PYTHON_TESTS=OFF >/dev/null
  cmake --build "$tree" -j"$jobs" --target memtier_go test_gpu_staged test_gpu_gds test_gpu_hbm \
    test_no_gpu bench_gpu_read bench_hot_path bench_large_read bench_reuse \
    memtier_fake_cuda memtier_fake_cufile >/dev/null
  rm -rf "$dir"
  mkdir -p "$dir/lib" "$dir/bin" "$dir/bench" "$dir/gpu_double" "$dir/wheels"
  cp "$tree/libmemtier.so" "$dir/lib/"
  for t in test_gpu_staged test_gpu_gds test_gpu_hbm test_no_gpu; do cp "$tree/tests/c/$t" "$dir/bin/"; done
  cp "$tree/bench_gpu_read" "$dir/bin/"
  for t in bench_hot_path bench_large_read bench_reuse; do cp "$tree/$t" "$dir/bench/"; done
  cp "$tree/gpu_double/libcuda.so.1" "$tree/gpu_double/libcufile.so.0" "$dir/gpu_double/"
  echo "== go test -c: gpu.test, engine.test"
  (cd "$root" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" test -c -trimpath -ldflags='-s -w' \
    -o "$dir/gpu.test" ./gpu/)
  (cd "$root" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" test -c -trimpath -ldflags='-s -w' \
    -o "$dir/engine.test" ./runtime/engine/)
  strip --strip-unneeded "$dir/lib/libmemtier.so" "$dir"/bin/* "$dir"/bench/* 2>/dev/null || true
  set +e
  echo "== pip download: cffi + pycparser wheels (CPython 3.9 to 3.13, manylinux x86_64)"
  local py ok=0 v
  py=$(command -v python3 || true)
  if [[ -n $py ]]; then
    for v in 3.9 3.10 3.11 3.12 3.13; do
      "$py" -m pip download -q --only-binary=:all: --platform manylinux2014_x86_64 \
        --python-version "$v" --implementation cp -d "$dir/wheels" cffi pycparser && ok=1
    done
  fi
  [[ $ok == 1 ]] || echo "note: no wheels downloaded (no python3/pip or no index); the Python step needs cffi there"
  rm -f "$dir/wheels"/*.tar.gz
  prepare_cufile "$py"
  set -e
  echo "== $(rel "$dir"):"
  (cd "$dir" && find . -type f -printf '%s\t%p\n' | sort -k2 | awk -F'\t' '{printf "  %8.1f KiB  %s\n", $1/1024, $2}')
  echo "== total: $(du -sh "$dir" | cut -f1) (carry limit 64 MiB)"
  echo "on the GPU machine: bash scripts/gpu_check.sh run --quick --require-gpu ${dir_arg:-build-gpu}"
}

# prepare_cufile PY: DIR/cufile/libcufile.so.0 from pip's nvidia-cufile wheel (the
# version python/requirements-test.txt pins), for a GPU machine without cuFile.
# Best effort: a note when pip or the index is not there.
prepare_cufile() {
  local py=$1 ver tmp whl
  echo "== pip download: nvidia-cufile (libcufile.so.0, used there only when the machine has none)"
  ver=$(grep -m1 -o '^nvidia-cufile==[^ ;]*' "$root/python/requirements-test.txt" 2>/dev/null | cut -d= -f3)
  [[ -n $py ]] || { echo "note: no python3: no cuFile copy carried"; return 0; }
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/memtier-cufile-XXXXXX")
  if "$py" -m pip download -q --no-deps --only-binary=:all: --implementation cp --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
    -d "$tmp" "nvidia-cufile${ver:+==$ver}" >/dev/null 2>&1; then
    whl=$(ls "$tmp"/nvidia_cufile-*.whl 2>/dev/null | head -n 1)
    mkdir -p "$dir/cufile"
    if [[ -n $whl ]] && "$py" - "$whl" "$dir/cufile" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.endswith("/lib/libcufile.so.0")]
    if not names:
        sys.exit(1)
    with z.open(names[0]) as src, open(sys.argv[2] + "/libcufile.so.0", "wb") as dst:
        dst.write(src.read())
    print("  from", names[0])
EOF
    then
      echo "  carried: cufile/libcufile.so.0 (nvidia-cufile ${ver:-latest})"
    else
      rm -rf "$dir/cufile"
      echo "note: the nvidia-cufile wheel holds no lib/libcufile.so.0; no cuFile copy carried"
    fi
  else
    echo "note: nvidia-cufile not downloaded (no pip or no index); no cuFile copy carried"
  fi
  rm -rf "$tmp"
}

# ---------------------------------------------------------------- run / double
declare -a R_NAME=() R_RES=() R_SECS=() R_DETAIL=()
fails=0
t_start=$SECONDS
nogpu=0      # set when `run` finds no GPU: every later step is skipped
gds_label="" # "compat" when cuFile can only run in compatibility mode, "gds" when nvidia-fs is there

# step NAME RESULT DETAIL SECONDS: records one row of the table and prints it.
step() {
  local name=$1 res=$2 detail=${3:-} secs=${4:-0}
  detail=${detail//$root\//}
  detail=$(printf '%s' "$detail" | tr -d '\000-\010\013-\037' | tr '\n\t' '  ' | cut -c1-300)
  R_NAME+=("$name"); R_RES+=("$res"); R_SECS+=("$secs"); R_DETAIL+=("$detail")
  [[ $res == FAIL ]] && fails=$((fails + 1))
  printf '%-8s %s: %s (%ds)\n' "$res" "$name" "$detail" "$secs"
}

# left_for NAME LIMIT [RESERVE]: sets LIMIT to the step's limit cut to the budget less
# RESERVE seconds (default: what the last step, the CPU benchmark report, keeps), or
# returns 1 after recording a SKIP when the budget is spent (or when this is not a GPU
# machine).
left_for() {
  local name=$1 left
  LIMIT=$2
  if [[ $nogpu == 1 ]]; then
    step "$name" SKIP "not a GPU machine (nothing ran)"
    return 1
  fi
  left=$((deadline - ${3:-$reserve} - SECONDS))
  if ((left < 20)); then
    step "$name" SKIP "out of the time budget (${budget}s)"
    return 1
  fi
  ((LIMIT > left - 10)) && LIMIT=$((left - 10))
  return 0
}

# run_cmd NAME LIMIT DIR CMD...: runs CMD in DIR under timeout, its output copied to
# gpu_check.log while it runs and cuFile's log to a file of its own (cufile_log_for);
# sets CMD_RC, CMD_LOG (a temp file), CMD_SECS, CMD_LAST.
run_cmd() {
  local name=$1 limit=$2 wd=$3 t0=$SECONDS
  shift 3
  CMD_LOG=$(mktemp)
  echo "---- ${*//$root\//}" | tee -a "$results_dir/gpu_check.log"
  cufile_log_for "$name"
  (cd "$wd" && timeout --kill-after=10 "$limit" "$@") 2>&1 | tee -a "$results_dir/gpu_check.log" >"$CMD_LOG"
  CMD_RC=${PIPESTATUS[0]}
  CMD_SECS=$((SECONDS - t0))
  sed 's/^/    /' "$CMD_LOG" | tail -n "${GPU_CHECK_LOG_LINES:-12}"
  CMD_LAST=$(grep -v '^\s*$' "$CMD_LOG" | tail -n 1 | cut -c1-160)
  collect_cufile_log "$wd"
}

# cufile_log_for NAME: points CUFILE_LOGFILE_PATH ("the highest priority for logging
# location", GDS release notes) at a new file for step NAME, so no process truncates
# another's log and each step's lines can be told apart.
cufile_step_log=""
cufile_log_for() {
  cufile_step_name=$1
  cufile_step_log=$cufile_tmp/step-$(( ${cufile_n:-0} + 1 )).log
  cufile_n=$(( ${cufile_n:-0} + 1 ))
  export CUFILE_LOGFILE_PATH=$cufile_step_log
}

# collect_cufile_log DIR: appends the step's cuFile log (and a cufile.log that an older
# cuFile left in DIR or the repository root) to the one results/cufile.log, under a
# "==== step" line.
collect_cufile_log() {
  local f
  for f in "$cufile_step_log" "$1/cufile.log" "$root/cufile.log"; do
    if [[ -n $f && -s $f && $f != "$results_dir/cufile.log" ]]; then
      { echo "==== ${cufile_step_name:-?}"; cat "$f"; } >>"$results_dir/cufile.log"
    fi
    [[ -n $f && $f != "$results_dir/cufile.log" ]] && rm -f "$f"
  done
  cufile_step_log=""
}

timed_out() { [[ $CMD_RC == 124 || $CMD_RC == 137 ]]; }

# A skip that is by design on a real driver (the test needs the double's switches or
# counters), not a check that could not run.
design_skip_re='test double|the double.s|MEMTIER_GPU_DOUBLE_DIR|a CUDA backend is usable here'

# go_step NAME LIMIT DIR BIN ARGS...: a Go test binary with -test.v; PASS only when
# tests passed and none skipped except by design.
go_step() {
  local name=$1 limit=$2 wd=$3
  shift 3
  left_for "$name" "$limit" || return 0
  limit=$LIMIT
  run_cmd "$name" "$limit" "$wd" "$@" -test.v -test.count=1
  local np nf ns nd other res detail
  np=$(grep -c '^ *--- PASS' "$CMD_LOG")
  nf=$(grep -c '^ *--- FAIL' "$CMD_LOG")
  # "name<TAB>reason" for every skip: the reason is the last file.go:N: line before it.
  awk '/^ *[A-Za-z0-9_]+\.go:[0-9]+: / { sub(/^ */, ""); last = $0 }
       /^ *--- SKIP: / { n = $3; print n "\t" last; last = "" }' "$CMD_LOG" >"$CMD_LOG.skips"
  ns=$(wc -l <"$CMD_LOG.skips")
  nd=$(grep -cE "$design_skip_re" "$CMD_LOG.skips")
  other=$(grep -vE "$design_skip_re" "$CMD_LOG.skips" | awk -F'\t' '{ sub(/^[^:]*:[0-9]+: /, "", $2); printf "%s%s (%s)", (NR > 1 ? "; " : ""), $1, $2 }' | cut -c1-200)
  detail="$np passed, $nf failed, $ns skipped ($nd by design: double-only)"
  if timed_out; then
    res=FAIL detail="timed out after ${limit}s; $detail"
  elif [[ $CMD_RC != 0 ]]; then
    res=FAIL detail="exit $CMD_RC; $detail; failed: $(grep '^ *--- FAIL' "$CMD_LOG" | awk '{print $3}' | head -n 5 | tr '\n' ' ')"
  elif ((ns > nd)); then
    res=SKIP detail="$detail; skipped: $other"
  elif ((np == 0)); then
    res=SKIP detail="no test ran; $detail"
  else
    res=PASS
  fi
  GO_RES=$res
  step "$name" "$res" "$detail" "$CMD_SECS"
  rm -f "$CMD_LOG" "$CMD_LOG.skips"
}

# c_step NAME LIMIT CMD...: a C test: 0 PASS (fallback when it says GDS fell back,
# compat when it says cuFile ran in compatibility mode), 77 SKIP, else FAIL.
c_step() {
  local name=$1 limit=$2 res detail
  shift 2
  left_for "$name" "$limit" || return 0
  limit=$LIMIT
  run_cmd "$name" "$limit" "$root" "$@"
  detail=$CMD_LAST
  case $CMD_RC in
    0)
      res=PASS
      # tests/c/test_gpu_gds.c's words when a real driver's cuFile could not serve a read
      if grep -q '^note: GDS fell back' "$CMD_LOG"; then
        res=fallback detail="passed after MemTier fell back from GDS to staged: $(grep -m1 'gds .*fallbacks' "$CMD_LOG")"
      elif grep -q '^note: cuFile in compatibility mode' "$CMD_LOG"; then
        res=compat detail="passed with cuFile in compatibility mode (gds_path: compat): AUTO staged, REQUIRED through cuFile"
        [[ $double == 0 ]] && gds_label=compat
      fi ;;
    77) res=$(no_cuda_skip SKIP "$detail") ;;
    124 | 137) res=FAIL detail="timed out after ${limit}s" ;;
    *) res=FAIL detail="exit $CMD_RC: $CMD_LAST" ;;
  esac
  C_RES=$res
  step "$name" "$res" "$detail" "$CMD_SECS"
  rm -f "$CMD_LOG"
}

# A result that passed while cuFile ran in compatibility mode is "compat".
compat_or() { if [[ $1 == PASS && $gds_label == compat ]]; then echo compat; else echo "$1"; fi; }

# find_cufile: a libcufile for `run` (see the header for the order); sets cufile_from.
cufile_from="not found"
find_cufile() {
  if [[ -n ${MEMTIER_CUFILE_LIBRARY:-} ]]; then
    cufile_from="\$MEMTIER_CUFILE_LIBRARY=$(rel "$MEMTIER_CUFILE_LIBRARY")"
    return
  fi
  local c
  c=$(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcufile\.so\.0$')
  if [[ -n $c ]]; then
    cufile_from="loader cache ($c)"
    return
  fi
  local -a cands=(/usr/local/cuda*/lib64/libcufile.so.0 /usr/local/cuda*/targets/*/lib/libcufile.so.0
    /usr/lib/x86_64-linux-gnu/libcufile.so.0)
  if command -v python3 >/dev/null; then
    local sp
    while IFS= read -r sp; do
      [[ -n $sp ]] && cands+=("$sp")
    done < <(timeout 60 python3 - 2>/dev/null <<'EOF'
import os, site, sys
dirs = []
try:
    import nvidia  # the namespace package of NVIDIA's wheels
    dirs += list(nvidia.__path__)
except Exception:
    pass
try:
    dirs += [os.path.join(d, "nvidia") for d in site.getsitepackages() + [site.getusersitepackages()]]
except Exception:
    pass
dirs += [os.path.join(p, "nvidia") for p in sys.path if p]
seen = set()
for d in dirs:
    for sub in ("cu13", "cufile", "cu12"):
        p = os.path.join(d, sub, "lib", "libcufile.so.0")
        if p not in seen and os.path.exists(p):
            seen.add(p)
            print(p)
EOF
    )
  fi
  cands+=("$dir/cufile/libcufile.so.0")
  for c in "${cands[@]}"; do
    if [[ -e $c ]]; then
      export MEMTIER_CUFILE_LIBRARY=$c
      cufile_from="$(rel "$c") (MEMTIER_CUFILE_LIBRARY)"
      return
    fi
  done
}

# cufile_props: cuFileDriverGetProperties through ctypes (nvidia-fs version and the
# driver status flags), one line, or why not. Only the leading fields of
# CUfileDrvProps_t are read: nvfs.major_version, minor_version (unsigned ints at 0, 4)
# and nvfs.dstatusflags (an unsigned int at 24, after two size_t), as cufile.h lays them
# out; bit 11 is CU_FILE_NVME_P2P_SUPPORTED (GDS through the kernel's P2PDMA, no nvidia-fs).
# Prints "cufile_props: hung" when the calls did not return in 45 s.
cufile_props() {
  local lib=${MEMTIER_CUFILE_LIBRARY:-libcufile.so.0} out rc
  command -v python3 >/dev/null || { echo "cufile_props: no python3"; return; }
  out=$(timeout --kill-after=5 45 python3 - "$lib" 2>&1 <<'EOF'

import ctypes, sys
class Err(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("cu_err", ctypes.c_int)]
try:
    lib = ctypes.CDLL(sys.argv[1])
except OSError as e:
    print("cufile_props: not loaded:", e); sys.exit()
try:  # cuInit first: some cuFile builds expect an initialised driver
    ctypes.CDLL("libcuda.so.1").cuInit(0)
except (OSError, AttributeError):
    pass
lib.cuFileDriverOpen.restype = Err
e = lib.cuFileDriverOpen()
if e.err != 0:
    print(f"cufile_props: cuFileDriverOpen failed: err {e.err} cu_err {e.cu_err}"); sys.exit()
buf = (ctypes.c_ubyte * 512)()
gp = getattr(lib, "cuFileDriverGetProperties", None)
if gp is None:
    print("cufile_props: driver open; no cuFileDriverGetProperties"); sys.exit()
gp.restype = Err
e = gp(ctypes.byref(buf))
if e.err != 0:
    print(f"cufile_props: cuFileDriverGetProperties failed: err {e.err}"); sys.exit()
u = lambda off: int.from_bytes(bytes(buf[off:off + 4]), "little")
maj, mnr, flags = u(0), u(4), u(24)
p2p = (flags >> 11) & 1
print(f"cufile_props: nvfs {maj}.{mnr} dstatusflags 0x{flags:x} p2pdma {p2p}")
close = getattr(lib, "cuFileDriverClose_v2", None) or getattr(lib, "cuFileDriverClose", None)
if close:
    close.restype = Err
    close()
EOF
  )
  rc=$?
  if [[ $rc == 124 || $rc == 137 ]]; then
    echo "cufile_props: hung"
  else
    printf '%s\n' "$out" | grep -v '^\s*$' | tail -n 1
  fi
}

# gds_step: the "cufile: driver" step: decides gds_label from /proc/driver/nvidia-fs,
# lsmod, the driver properties and cuFile's log (the GDS steps add to it later: see
# log_says_compat). A cuFileDriverOpen that hangs is a FAIL, and the later steps then
# run with cuFile out of reach (MEMTIER_CUFILE_LIBRARY names a missing file) so the
# budget is not spent waiting on it again.
gds_step() {
  local name="cufile: driver" nvfs props t0=$SECONDS
  nvfs=$(nvfs_state)
  cufile_log_for "$name"
  props=$(cufile_props)
  collect_cufile_log "$root"
  echo "  $props" | tee -a "$results_dir/gpu_check.log"
  if [[ $props == *hung* ]]; then
    export MEMTIER_CUFILE_LIBRARY=$dir/cufile-disabled/libcufile.so.0
    step "$name" FAIL "cuFileDriverOpen/GetProperties did not return in 45 s ($cufile_from); later steps run without cuFile" $((SECONDS - t0))
    cufile_from="disabled: cuFileDriverOpen hung"
    return 0
  fi
  if [[ $nvfs == yes* ]] || [[ $props =~ nvfs\ [1-9] ]] || [[ $props =~ p2pdma\ 1 ]]; then
    gds_label=gds
  elif [[ $props == *"nvfs 0."* ]] || log_says_compat || [[ $nvfs == no ]]; then
    gds_label=compat
  fi
  local detail="nvidia-fs $([[ $nvfs == no ]] && echo absent || echo present); ${props#cufile_props: }; $cufile_from"
  if [[ $props == *"not loaded"* || $cufile_from == "not found" ]]; then
    step "$name" SKIP "no libcufile: the GDS rows cannot run (${props#cufile_props: })" $((SECONDS - t0))
  elif [[ $props == *failed* ]]; then
    step "$name" SKIP "cuFile unusable: $detail" $((SECONDS - t0))
  elif [[ $gds_label == compat ]]; then
    step "$name" compat "compatibility mode (no nvidia-fs, no P2PDMA: POSIX reads + copies, not GPUDirect); $detail" $((SECONDS - t0))
  else
    step "$name" PASS "GPUDirect possible; $detail" $((SECONDS - t0))
  fi
}

# cuFile's own words ("cuFile running in compatible mode" in its log).
log_says_compat() { [[ -f $results_dir/cufile.log ]] && grep -qiE 'compat(ible|ibility)?[ _-]mode' "$results_dir/cufile.log"; }

# no_cuda_skip RESULT DETAIL: in `run` on a GPU machine a test that skipped because
# CUDA is unusable is a failure (the driver is there, so MemTier should reach it).
no_cuda_skip() {
  if [[ $1 == SKIP && $double == 0 && $2 =~ no\ CUDA|libcuda|CUDA\ unavailable|cuda_unavailable ]]; then
    echo FAIL
  else
    echo "$1"
  fi
}

# nvfs_state: "yes (<version file>)", "yes (lsmod)" or "no": whether the nvidia-fs kernel
# module, which GPUDirect reads need, is loaded (libcufile reads the same file).
nvfs_state() {
  if [[ -r /proc/driver/nvidia-fs/version ]]; then
    echo "yes ($(tr '\n' ' ' </proc/driver/nvidia-fs/version | cut -c1-80))"
  elif lsmod 2>/dev/null | grep -q '^nvidia_fs'; then
    echo "yes (lsmod)"
  else
    echo no
  fi
}

facts() {
  echo "==== machine"
  uname -srm
  echo "  cores: $(nproc 2>/dev/null || echo '?')"
  if command -v nvidia-smi >/dev/null; then
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode,pcie.link.gen.current,pcie.link.width.current \
      --format=csv 2>&1 | sed 's/^/  /'
  else
    echo "  nvidia-smi: not found"
  fi
  local j=${CUFILE_ENV_PATH_JSON:-/etc/cufile.json}
  if [[ -r $j ]]; then
    echo "  cufile.json ($(rel "$j")): $(grep -oE '"(allow|force)_compat_mode"[^,}]*' "$j" | tr -s ' \n' ' ')"
  else
    echo "  cufile.json: none (cuFile defaults: compatibility mode allowed)"
  fi
  echo "  libcuda: ${MEMTIER_CUDA_LIBRARY:+$(rel "$MEMTIER_CUDA_LIBRARY")}${MEMTIER_CUDA_LIBRARY:-$(ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcuda\.so\.1$' || echo 'not in the loader cache')}"
  echo "  libcufile: $cufile_from"
  echo "  nvidia-fs loaded: $(nvfs_state) (/proc/driver/nvidia-fs/version; without it cuFile runs in compatibility mode)"
  echo "  benchmark dir: $(rel "$bench_tmp"), file system $(stat -f -c %T "$bench_tmp" 2>/dev/null || echo '?'), $(df -h "$bench_tmp" 2>/dev/null | awk 'NR == 2 { print $4 " free" }')${bench_tmp_why:+ ($bench_tmp_why)}"
}

json_get() { # json_get FILE KEY: a number or string value of KEY (first match)
  local v
  v=$(grep -o "\"$2\": *\"[^\"]*\"" "$1" | head -n 1) # a string (commas allowed)
  [[ -n $v ]] || v=$(grep -o "\"$2\": *[^,}\"]*" "$1" | head -n 1)
  printf '%s\n' "$v" | sed 's/^[^:]*: *//; s/"//g'
}

json_str() { # json_str TEXT: TEXT as a JSON string
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}

is_gpu_machine() {
  command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && return 0
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && [[ -e /dev/nvidiactl || -e /dev/nvidia0 ]] && return 0
  return 1
}

# pydeps_path: PYTHONPATH entries that give python3 cffi (installed from DIR/wheels
# with pip --no-index, or unzipped when python3 has no pip); "" when it has cffi.
pydeps_path() {
  python3 -c 'import cffi' 2>/dev/null && return 0
  local t="$dir/pydeps" tag w
  if [[ ! -d $t ]]; then
    if ! python3 -m pip install -q --no-index --find-links "$dir/wheels" --target "$t" cffi pycparser >/dev/null 2>&1; then
      tag=$(python3 -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
      mkdir -p "$t"
      for w in $(ls "$dir"/wheels/cffi-*-"$tag"-*.whl 2>/dev/null | head -n 1) \
        $(ls "$dir"/wheels/pycparser-*.whl 2>/dev/null | sort -V | tail -n 1); do
        python3 -m zipfile -e "$w" "$t"
      done
    fi
  fi
  echo "$t"
}

bench_gpu_step() {
  local json=$results_dir/bench_gpu_read.json name="bench: bytes verified" blimit t0=$SECONDS
  # bench_gpu.py (the Python step) keeps 90 s after this one.
  left_for "$name" 150 $((reserve + 90)) || return 0
  blimit=$LIMIT
  if ((blimit < 30)); then
    step "$name" SKIP "out of the time budget (${budget}s)"
    return 0
  fi
  echo "---- bench_gpu_read --size=$size --repeat=$repeat --json (file in $(rel "$bench_tmp"); limit ${blimit}s)" | tee -a "$results_dir/gpu_check.log"
  cufile_log_for "$name"
  (cd "$root" && TMPDIR=$bench_tmp timeout --kill-after=10 "$blimit" "$dir/bin/bench_gpu_read" --size="$size" \
    --repeat="$repeat" --json) >"$json" 2>>"$results_dir/gpu_check.log"
  local rc=$? secs=$((SECONDS - t0))
  collect_cufile_log "$root"
  if [[ $rc != 0 ]]; then
    if [[ $rc == 77 ]]; then
      step "$name" "$(no_cuda_skip SKIP "$(tail -n 1 "$json")")" "$(tail -n 1 "$json")" "$secs"
    elif [[ $rc == 124 || $rc == 137 ]]; then
      step "$name" FAIL "timed out after ${blimit}s" "$secs"
    else
      step "$name" FAIL "exit $rc (see $(rel "$results_dir")/gpu_check.log)" "$secs"
      tail -n 5 "$results_dir/gpu_check.log" | sed 's/^/    /'
    fi
    return 0
  fi
  local fp ff h2d naive st gds ratio gstate gbytes gfb gpath greq greqb greqs
  fp=$(json_get "$json" file_pinned); ff=$(json_get "$json" file_pageable)
  h2d=$(json_get "$json" h2d_pinned); naive=$(json_get "$json" naive)
  st=$(json_get "$json" memtier_staged); gds=$(json_get "$json" memtier_gds)
  ratio=$(json_get "$json" staged_ratio_vs_bound); gstate=$(json_get "$json" gds_state)
  gbytes=$(json_get "$json" gds_bytes); gfb=$(json_get "$json" gds_fallbacks)
  gpath=$(json_get "$json" gds_path); greq=$(json_get "$json" memtier_gds_required)
  greqb=$(json_get "$json" gds_required_bytes); greqs=$(json_get "$json" gds_required_state)
  [[ $gpath == compat && $double == 0 ]] && gds_label=compat
  {
    printf '\n  %-44s %10s\n' "(a) $size, page cache warm" "GB/s"
    printf '  %-44s %10s\n' "file read: pread 8M loop -> pinned" "$fp" "file read: pread 8M loop -> pageable" "$ff" \
      "H2D copy from pinned memory" "$h2d" "naive pread + copy + sync" "$naive" \
      "memtier_read(CUDA), staged (gds_mode OFF)" "$st"
    printf '  %-44s %10s\n' "ratio memtier / min(file, H2D)" "$ratio"
    printf '\n  %-44s %10s\n' "(b) memtier_read(CUDA), gds_mode AUTO" "$gds"
    printf '  %-44s %10s\n' "    memtier_read(CUDA), gds_mode REQUIRED" "${greq:-?}"
    printf '  AUTO: gds_bytes %s, gds_fallbacks %s; REQUIRED: gds_bytes %s (%s)\n' "$gbytes" "$gfb" "${greqb:-?}" "${greqs:-?}"
    printf '  gds_path %s; cuFile: %s\n\n' "${gpath:-?}" "$gstate"
  } | tee -a "$results_dir/gpu_check.log"
  step "$name" PASS "staged $st GB/s, GDS/auto $gds GB/s ($(rel "$json"))" "$secs"
  if [[ $double == 1 ]]; then
    step "bench: staged >= 0.9 x bound" SKIP "ratio $ratio: the double's figures mean nothing"
  elif awk -v r="$ratio" 'BEGIN { exit !(r >= 0.9) }'; then
    step "bench: staged >= 0.9 x bound" PASS "ratio $ratio vs min(file $fp, H2D $h2d)"
  else
    step "bench: staged >= 0.9 x bound" FAIL "ratio $ratio vs min(file $fp, H2D $h2d)"
  fi
  local x xr
  x=$(awk -v a="$gds" -v b="$st" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  xr=$(awk -v a="${greq:-0}" -v b="$st" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  log_says_compat && [[ $double == 0 ]] && gds_label=compat
  if [[ $gpath == compat ]]; then
    # AUTO reads staged in compatibility mode by design; REQUIRED measures cuFile's compat path.
    step "bench: GDS path" compat "cuFile in compatibility mode (no nvidia-fs): AUTO staged at $gds GB/s (gds_bytes ${gbytes:-0}), REQUIRED through cuFile ${greq:-?} GB/s = ${xr}x staged"
  elif [[ ${gbytes:-0} -gt 0 && ${gfb:-0} -gt 0 ]]; then
    step "bench: GDS path" fallback "$gds GB/s = ${x}x staged, but $gfb fallback(s) to staged; $gstate"
  elif [[ ${gbytes:-0} -gt 0 && $gds_label == compat ]]; then
    step "bench: GDS path" compat "cuFile in compatibility mode (no nvidia-fs: POSIX reads + copies, not GPUDirect): $gds GB/s = ${x}x staged; $gstate"
  elif [[ ${gbytes:-0} -gt 0 ]]; then
    step "bench: GDS path" PASS "$gds GB/s = ${x}x staged; $gstate"
  elif [[ ${gfb:-0} -gt 0 ]]; then
    step "bench: GDS path" fallback "GDS not used: $gfb fallback(s) to staged; $gstate"
  else
    step "bench: GDS path" SKIP "GDS not used: $gstate"
  fi
}

python_step() {
  local name="python: bench_gpu.py" pyb=$root/examples/python/bench_gpu.py limit pp extra
  if [[ $double == 1 ]]; then
    step "$name" SKIP "needs a real GPU (not the double)"
    return 0
  fi
  left_for "$name" 180 || return 0
  limit=$LIMIT
  if ! command -v python3 >/dev/null; then
    step "$name" SKIP "no python3"
  elif [[ ! -f $pyb ]]; then
    step "$name" SKIP "examples/python/bench_gpu.py is not in this tree"
  elif ! timeout 120 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    step "$name" SKIP "python3 has no torch with CUDA"
  else
    extra=$(pydeps_path)
    pp=$root/python${extra:+:$extra}
    local -a args=()
    [[ $quick == 1 ]] && args=(--size "$size" --ckpt-gb 1 --runs 2)
    run_cmd "$name" "$limit" "$root" env PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
      MEMTIER_LIBRARY="$dir/lib/libmemtier.so" python3 "$pyb" --dir "$bench_tmp" ${args[@]+"${args[@]}"}
    case $CMD_RC in
      0) step "$name" "$(compat_or PASS)" "$CMD_LAST" "$CMD_SECS" ;;
      77) step "$name" SKIP "$CMD_LAST" "$CMD_SECS" ;;
      124 | 137) step "$name" FAIL "timed out after ${limit}s" "$CMD_SECS" ;;
      *) step "$name" FAIL "exit $CMD_RC: $CMD_LAST" "$CMD_SECS" ;;
    esac
    rm -f "$CMD_LOG"
  fi
}

# The optional last step: the CPU rows of the benchmark report (16 cores there), with
# the carried Release benchmarks (the device has no Go to build them).
bench_report_step() {
  local name="bench_report --quick (CPU)" limit extra pp
  if [[ $bench_report == 0 ]]; then
    step "$name" SKIP "--no-bench-report"
    return 0
  elif [[ $double == 1 ]]; then
    step "$name" SKIP "not with the double (run scripts/bench_report.sh here)"
    return 0
  fi
  left_for "$name" 240 0 || return 0
  limit=$LIMIT
  if ((deadline - SECONDS < 60)); then
    step "$name" SKIP "less than 60 s of the budget left ($((deadline - SECONDS)) s)"
  elif [[ ! -x $dir/bench/bench_large_read ]]; then
    step "$name" SKIP "$(rel "$dir")/bench/ has no benchmarks (rerun prepare)"
  elif ! command -v python3 >/dev/null || ! python3 -c 'import numpy' 2>/dev/null; then
    step "$name" SKIP "python3 with numpy is needed"
  else
    extra=$(pydeps_path)
    pp=$root/python${extra:+:$extra}
    run_cmd "$name" "$limit" "$root" env PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
      MEMTIER_LIBRARY="$dir/lib/libmemtier.so" TMPDIR="$bench_tmp" \
      python3 "$root/scripts/bench_report.py" --build "$dir/bench" --python python3 --quick --no-remote \
      --large-size $((512 << 20)) \
      --out "$results_dir/bench_report"
    case $CMD_RC in
      0) step "$name" PASS "$(grep -m1 -o 'targets met: .*' "$CMD_LOG"); see $(rel "$results_dir")/bench_report/" "$CMD_SECS" ;;
      # Out of the budget is not a broken check: the report is the run's optional tail.
      124 | 137) step "$name" SKIP "did not finish in the ${limit}s left of the budget (GPU_CHECK_BUDGET, GPU_CHECK_REPORT_SECS)" "$CMD_SECS" ;;
      *) step "$name" FAIL "exit $CMD_RC: $CMD_LAST" "$CMD_SECS" ;;
    esac
    rm -f "$CMD_LOG"
  fi
}

write_results() {
  local i n=${#R_NAME[@]} np=0 nf=0 ns=0 no=0 total=$((SECONDS - t_start))
  echo
  echo "==== results ($total s; budget ${budget}s)"
  {
    printf '  %-34s %-8s %6s  %s\n' step result seconds detail
    for ((i = 0; i < n; i++)); do
      printf '  %-34s %-8s %6s  %s\n' "${R_NAME[i]}" "${R_RES[i]}" "${R_SECS[i]}" "${R_DETAIL[i]}"
    done
  } | tee "$results_dir/summary.txt"
  for ((i = 0; i < n; i++)); do
    case ${R_RES[i]} in PASS) np=$((np + 1)) ;; FAIL) nf=$((nf + 1)) ;; SKIP) ns=$((ns + 1)) ;; *) no=$((no + 1)) ;; esac
  done
  local line="  $np passed, $nf failed, $ns skipped, $no fallback/compat; results in $(rel "$results_dir")"
  echo "$line" | tee -a "$results_dir/summary.txt"
  {
    printf '{\n  "mode": %s,\n  "quick": %s,\n  "require_gpu": %s,\n  "seconds": %d,\n  "budget_seconds": %d,\n' \
      "$(json_str "$mode")" "$([[ $quick == 1 ]] && echo true || echo false)" \
      "$([[ $require_gpu == 1 ]] && echo true || echo false)" "$total" "$budget"
    printf '  "gpu_machine": %s,\n  "cufile": %s,\n  "gds_mode": %s,\n' \
      "$([[ $nogpu == 1 ]] && echo false || echo true)" "$(json_str "$cufile_from")" "$(json_str "${gds_label:-unknown}")"
    printf '  "counts": {"PASS": %d, "FAIL": %d, "SKIP": %d, "fallback_or_compat": %d},\n  "steps": [\n' "$np" "$nf" "$ns" "$no"
    for ((i = 0; i < n; i++)); do
      printf '    {"step": %s, "result": %s, "seconds": %d, "detail": %s}%s\n' "$(json_str "${R_NAME[i]}")" \
        "$(json_str "${R_RES[i]}")" "${R_SECS[i]}" "$(json_str "${R_DETAIL[i]}")" "$([[ $i -lt $((n - 1)) ]] && echo ,)"
    done
    printf '  ]\n}\n'
  } >"$results_dir/gpu_check.json"
}

# pick_bench_tmp: sets bench_tmp (where the benchmark file goes) and bench_tmp_why.
# GPU_CHECK_TMP wins; else $TMPDIR or /tmp, unless that is tmpfs or overlay (O_DIRECT
# and cuFile refuse tmpfs, and an overlay says nothing about a real disk): then the
# first disk-backed writable one of /var/tmp and the working tree's file system.
pick_bench_tmp() {
  local fs c cfs
  bench_tmp=${GPU_CHECK_TMP:-${TMPDIR:-/tmp}}
  bench_tmp_why=""
  [[ -n ${GPU_CHECK_TMP:-} ]] && { bench_tmp_why="GPU_CHECK_TMP"; return; }
  fs=$(stat -f -c %T "$bench_tmp" 2>/dev/null)
  [[ $fs == tmpfs || $fs == overlayfs || $fs == overlay ]] || return 0
  for c in /var/tmp "$root"; do
    cfs=$(stat -f -c %T "$c" 2>/dev/null)
    if [[ -d $c && -w $c && -n $cfs && $cfs != tmpfs && $cfs != overlayfs && $cfs != overlay ]]; then
      bench_tmp_why="$(rel "${TMPDIR:-/tmp}") is $fs"
      bench_tmp=$c
      return 0
    fi
  done
  bench_tmp_why="$fs: no disk-backed directory found"
}

checks() {
  double=$1
  [[ -f $dir/lib/libmemtier.so ]] || {
    echo "no $(rel "$dir")/lib/libmemtier.so: run 'scripts/gpu_check.sh prepare' first" >&2
    exit 2
  }
  if [[ -n ${OUT:-} && -d ${OUT:-} ]]; then results_dir=$OUT; else results_dir=$dir/results; fi
  mkdir -p "$results_dir"
  : >"$results_dir/gpu_check.log"
  rm -f "$results_dir/cufile.log"
  budget=${GPU_CHECK_BUDGET:-290}
  deadline=$((SECONDS + budget))
  # The last step (the CPU benchmark report) keeps this much of the budget.
  reserve=0
  [[ $bench_report == 1 && $double == 0 ]] && reserve=${GPU_CHECK_REPORT_SECS:-100}
  pick_bench_tmp
  cufile_tmp=$(mktemp -d "${TMPDIR:-/tmp}/memtier-cufile-log-XXXXXX")
  export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # cuFile's log: one file per step (cufile_log_for), gathered into results/cufile.log.
  export CUFILE_LOGGING_LEVEL=${CUFILE_LOGGING_LEVEL:-INFO}
  cufile_log_for "setup"
  local -a go_env
  repeat=${GPU_CHECK_REPEAT:-$([[ $quick == 1 ]] && echo 2 || echo 3)}
  if [[ $double == 1 ]]; then
    export MEMTIER_CUDA_LIBRARY=$dir/gpu_double/libcuda.so.1
    export MEMTIER_CUFILE_LIBRARY=$dir/gpu_double/libcufile.so.0
    cufile_from="the test double"
    go_env=(env MEMTIER_GPU_DOUBLE_DIR="$dir/gpu_double")
    size=${GPU_CHECK_SIZE:-256M}
    echo "== gpu_check.sh double: the run steps against the GPU test double (figures mean nothing)"
  else
    unset MEMTIER_CUDA_LIBRARY
    go_env=(env MEMTIER_GPU_TEST_REAL=1 MEMTIER_REQUIRE_GPU=1)
    size=${GPU_CHECK_SIZE:-$([[ $quick == 1 ]] && echo 2G || echo 4G)}
    echo "== gpu_check.sh run: real driver$([[ $quick == 1 ]] && echo ', --quick')"
    find_cufile
  fi
  facts 2>&1 | tee -a "$results_dir/gpu_check.log"

  local t0=$SECONDS
  if [[ $double == 1 ]]; then
    step "cuda driver" PASS "the test double ($(rel "$dir")/gpu_double)"
  elif is_gpu_machine; then
    step "cuda driver" PASS "$(timeout 30 nvidia-smi -L 2>/dev/null | head -n 1 | cut -c1-80)" $((SECONDS - t0))
    gds_step
  else
    nogpu=1
    step "cuda driver" "$([[ $require_gpu == 1 ]] && echo FAIL || echo SKIP)" \
      "no GPU: no nvidia-smi listing a GPU, no libcuda.so.1 with /dev/nvidia* (use 'double' here)"
  fi

  # Go test binaries: the gpu package (CUDA, then cuFile), the engine's target-CUDA tests.
  go_step "go: gpu.test (CUDA)" 150 "$root/gpu" "${go_env[@]}" "$dir/gpu.test" -test.skip '^TestGDS'
  go_step "go: gpu.test (GDS)" 90 "$root/gpu" "${go_env[@]}" "$dir/gpu.test" -test.run '^TestGDS'
  if [[ $double == 0 && $nogpu == 0 ]]; then
    log_says_compat && gds_label=compat
    local last=$((${#R_RES[@]} - 1))
    [[ ${R_RES[last]} == PASS && $gds_label == compat ]] && R_RES[last]=compat
  fi
  go_step "go: engine.test -run GPU" 120 "$root/runtime/engine" "${go_env[@]}" "$dir/engine.test" -test.run GPU

  # C API tests against the driver (no double env in `run`).
  c_step "c: test_gpu_staged" 120 "$dir/bin/test_gpu_staged"
  c_step "c: test_gpu_gds" 120 "$dir/bin/test_gpu_gds"
  if [[ $double == 0 && ${C_RES:-} == PASS ]]; then
    log_says_compat && gds_label=compat
    [[ $gds_label == compat ]] && R_RES[${#R_RES[@]} - 1]=compat
  fi
  c_step "c: test_gpu_hbm" 120 "$dir/bin/test_gpu_hbm"
  if [[ $double == 1 ]]; then
    c_step "c: test_gpu_staged deferred" 240 env FAKE_CUDA_DEFER_COPIES=1 "$dir/bin/test_gpu_staged"
    c_step "c: test_gpu_gds required" 120 env MEMTIER_GDS_MODE=required "$dir/bin/test_gpu_gds" required
    c_step "c: test_gpu_gds compat" 120 env FAKE_CUFILE_COMPAT_MODE=1 "$dir/bin/test_gpu_gds" auto
    c_step "c: test_gpu_gds nocufile" 120 env MEMTIER_CUFILE_LIBRARY="$dir/gpu_double/missing/libcufile.so.0" \
      "$dir/bin/test_gpu_gds" nocufile
  fi

  bench_gpu_step
  python_step
  bench_report_step

  write_results
  rm -rf "$cufile_tmp"
  [[ $fails == 0 ]]
}

case $mode in
  prepare) prepare ;;
  run) checks 0 ;;
  double) checks 1 ;;
esac
