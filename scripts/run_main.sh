#!/usr/bin/env bash
# run_main.sh: the main job on a generated default input.
#
# Builds MemTier (Release), writes a 1 GiB experiment file with deterministic
# content, reads it back through memtier_read with its checksum verified, then
# prints the large-read benchmark table (memtier vs a plain pread loop, O_DIRECT,
# mmap and fio when installed; warm and cold page cache).
#
#   ./scripts/run_main.sh [--size=BYTES] [--dir=DIR] [--build=DIR] [--help]
#   ./scripts/run_main.sh --size=268435456            # a smaller file
#   ./scripts/run_main.sh --dir=/nvme/dir             # where the file goes
# The same settings by environment: MEMTIER_MAIN_SIZE, MEMTIER_EXPERIMENT_DIR,
# BUILD_DIR. The file goes to DIR, else $MEMTIER_EXPERIMENT_DIR, else
# ./memtier_experiments in the repository (ignored by git); an NVMe mount such as
# /mnt/gds2/cwd_test is used only when named. --help prints this and changes
# nothing; a bad argument exits 2 before anything is built or written.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
build=${BUILD_DIR:-$root/build}
size=${MEMTIER_MAIN_SIZE:-1073741824}
name=${MEMTIER_MAIN_FILE:-}
dir=${MEMTIER_EXPERIMENT_DIR:-}
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --size=*) size=${arg#--size=} ;;
    --dir=*) dir=${arg#--dir=} ;;
    --build=*) build=${arg#--build=} ;;
    *) echo "run_main.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done
# At most 16 digits keeps the arithmetic below far from 64-bit overflow.
if ! [[ $size =~ ^[0-9]{1,16}$ ]] || (( 10#$size < 4096 )); then
  echo "run_main.sh: --size must be a byte count from 4096 to 9999999999999999, got '$size'" >&2
  exit 2
fi
if [[ -z $build || -z $dir && -n ${dir+x} && $* == *--dir=* ]]; then
  echo "run_main.sh: --build= and --dir= need a directory" >&2
  exit 2
fi
jobs=$(nproc 2>/dev/null || echo 2)
# The default file name says its size: memtier_exp_1g.bin for the default
# 1 GiB, memtier_exp_<bytes>.bin otherwise.
if [[ -z $name ]]; then
  if (( 10#$size == 1073741824 )); then name=memtier_exp_1g.bin; else name=memtier_exp_$((10#$size)).bin; fi
fi

echo "== building in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null

dir=${dir:-$root/memtier_experiments}

echo "== preparing $dir/$name ($size bytes)"
"$build/prepare_experiment_files" "$name" "$size" --dir="$dir"

echo "== reading it back through MemTier (checksum verified against the pattern)"
"$build/basic_read" "$dir/$name"

echo "== benchmark: one large read, warm and cold page cache"
"$build/bench_large_read" --file="$dir/$name" --size="$size" --mode=all
