#!/usr/bin/env bash
# run_main.sh: the main job on a generated default input.
#
# Builds MemTier (Release), writes a 1 GiB experiment file with deterministic
# content, reads it back through memtier_read with its checksum verified, then
# prints the large-read benchmark table (memtier vs a plain pread loop, O_DIRECT,
# mmap and fio when installed; warm and cold page cache).
#
#   ./scripts/run_main.sh
#   MEMTIER_MAIN_SIZE=268435456 ./scripts/run_main.sh      # a smaller file
#   MEMTIER_EXPERIMENT_DIR=/nvme/dir ./scripts/run_main.sh  # where the file goes
#   BUILD_DIR=/tmp/mt-build ./scripts/run_main.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
build=${BUILD_DIR:-$root/build}
size=${MEMTIER_MAIN_SIZE:-1073741824}
name=${MEMTIER_MAIN_FILE:-memtier_exp_1g.bin}
jobs=$(nproc 2>/dev/null || echo 2)

echo "== building in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null

# The experiment directory: $MEMTIER_EXPERIMENT_DIR, else SEED.md's default when
# it can be used, else ./memtier_experiments in the repository.
dir=${MEMTIER_EXPERIMENT_DIR:-}
if [[ -z $dir ]]; then
  if mkdir -p /mnt/gds2/cwd_test 2>/dev/null && [[ -w /mnt/gds2/cwd_test ]]; then
    dir=/mnt/gds2/cwd_test
  else
    dir=$root/memtier_experiments
  fi
fi

echo "== preparing $dir/$name ($size bytes)"
"$build/prepare_experiment_files" "$name" "$size" --dir="$dir"

echo "== reading it back through MemTier (checksum verified against the pattern)"
"$build/basic_read" "$dir/$name"

echo "== benchmark: one large read, warm and cold page cache"
"$build/bench_large_read" --file="$dir/$name" --size="$size" --mode=all
