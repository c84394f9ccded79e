#!/usr/bin/env bash
# bench_report.sh: build MemTier, run every benchmark of the issue-9 table, print one
# table of ratios (MemTier vs the baseline measured in the same run, the target, met or
# missed) and write bench_report.json and bench_report.png.
#
#   ./scripts/bench_report.sh                    # full run (about 2-4 minutes on 2 cores)
#   ./scripts/bench_report.sh --quick            # fewer repeats (about 1-2 minutes)
#   ./scripts/bench_report.sh --out DIR          # where the JSON and PNG go (default ./bench_report)
#   ./scripts/bench_report.sh --no-remote        # without the S3 rows (versitygw, about 3 minutes)
#   ./scripts/bench_report.sh --no-st            # without the issue-12 rows (load_model of a 2 GiB
#                                                #   checkpoint, from_pretrained: about 5-7 minutes)
#   ./scripts/bench_report.sh [options] BUILD_DIR   # build dir (default ./build)
#
# Steps: cmake -DCMAKE_BUILD_TYPE=Release into the build dir and build the benchmarks;
# the Python test venv (scripts/python_env.sh: torch, numpy, matplotlib; made on first
# use, a few GB); then scripts/bench_report.py runs bench_hot_path, bench_large_read
# --mode=all (warm, cold with fio when installed, DRAM cache hits, relaunch) and
# examples/python/bench_hot.py, bench_remote.py, bench_load_model.py and
# bench_from_pretrained.py. Temporary inputs (256 MiB and 1 GiB pattern files, the
# DataLoader data, a 2 GiB checkpoint: about 3 GB at most at once) go to a new directory
# under $TMPDIR (else /tmp) and are removed at the end.
# Exit status: 0 when every benchmark ran and verified its bytes (a missed target is
# reported, not fatal); 1 when one failed; 2 on a usage error.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

usage() {
  sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

build=""
args=()
while (($#)); do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --quick) args+=(--quick); shift ;;
    --no-remote|--no-st) args+=("$1"); shift ;;
    --out) [[ $# -ge 2 && -n $2 ]] || { echo "bench_report.sh: --out needs a directory" >&2; exit 2; }
           args+=(--out "$2"); shift 2 ;;
    --out=*) [[ -n ${1#--out=} ]] || { echo "bench_report.sh: --out needs a directory" >&2; exit 2; }
             args+=(--out "${1#--out=}"); shift ;;
    -*) echo "bench_report.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z $build ]] || { echo "bench_report.sh: more than one build dir given" >&2; exit 2; }
       build=$1; shift ;;
  esac
done
shown_build=${build:-build}   # as given: never an absolute path the user did not type
build=${build:-$root/build}
if [[ -e $build && ! -d $build ]]; then
  echo "bench_report.sh: $build exists and is not a directory" >&2
  exit 2
fi

command -v cmake >/dev/null || { echo "bench_report.sh: cmake not found" >&2; exit 1; }
echo "== building (Release) in ${shown_build}" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target bench_hot_path bench_large_read bench_reuse >/dev/null

echo "== the Python test venv (scripts/python_env.sh)" >&2
py=$("$root/scripts/python_env.sh" | tail -n 1)

echo "== running the benchmarks" >&2
exec "$py" "$root/scripts/bench_report.py" --build "$build" --python "$py" ${args[@]+"${args[@]}"}
