#!/usr/bin/env python3
"""bench_dataset.py: MemTierDataset + torch DataLoader vs a plain Python map-style Dataset.

The data: 20,000 samples of 4-64 KiB (uniform sizes, fixed seed; about 690 MB)
stored back to back in one file, with an .npy index. Page cache warm (the file
is read once before timing). Both datasets go through the same
``DataLoader(batch_size=64, shuffle=True, collate_fn=<keep the list>)`` (the
samples have different lengths) with the same shuffle seed, at num_workers=0
and 2:

* ``memtier``: MemTierDataset; DataLoader calls its ``__getitems__``, one
  batched MemTier read per batch into one buffer, split into per-sample views;
* ``memtier per-sample``: the same dataset with ``__getitems__`` hidden, so
  DataLoader calls ``ds[i]`` 64 times per batch (one MemTier read each);
* ``plain``: ``__getitem__`` does ``open`` / ``seek`` / ``readinto`` a new
  bytearray (unbuffered) / ``torch.frombuffer`` per sample: what a
  hand-written dataset does today.

Each (dataset, workers) pair runs in a fresh interpreter, so the parent never
has MemTier loaded when the (fork) workers start and every worker reads through
its own MemTier runtime. In each: one warm-up epoch (workers persist), then
``--epochs`` timed epochs; samples/s of the best and the median epoch are
printed, then the ratios memtier/plain of the medians (targets: >= 3x at 0
workers, >= 2x at 2). A last, untimed epoch checks every sample against the file.

    python examples/python/bench_dataset.py                # 20k samples, 2 timed epochs
    python examples/python/bench_dataset.py --samples 5000 --epochs 3
    python examples/python/bench_dataset.py --json

The data goes to --dir, else $MEMTIER_EXPERIMENT_DIR, else /mnt/gds2/cwd_test
when it can be used, else ./memtier_experiments. Needs torch. Exit status 0
when every sample verified (a missed target is reported, not fatal), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

try:
    import memtier  # noqa: F401  (loads nothing)
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memtier  # noqa: F401

KiB = 1024
BATCH = 64
SEED = 20240601


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pick_dir(arg):
    if arg:
        return arg
    for d in (os.environ.get("MEMTIER_EXPERIMENT_DIR"), "/mnt/gds2/cwd_test"):
        if d and os.path.isdir(d) and os.access(d, os.W_OK):
            return d
    return os.path.join(os.getcwd(), "memtier_experiments")


def sample_content(k: int, n: int) -> np.ndarray:
    """Sample k: 4 bytes k little-endian, then bytes (k + j) % 256."""
    b = ((np.arange(n, dtype=np.int64) + k) & 0xFF).astype(np.uint8)
    b[:4] = np.frombuffer(int(k).to_bytes(4, "little"), np.uint8)
    return b


def make_data(d: str, samples: int):
    os.makedirs(d, exist_ok=True)
    tag = "bench_dataset_%d_%d" % (samples, SEED)
    data, index = os.path.join(d, tag + ".bin"), os.path.join(d, tag + ".npy")
    rng = np.random.default_rng(SEED)
    lengths = rng.integers(4 * KiB, 64 * KiB + 1, samples)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    total = int(lengths.sum())
    if not (os.path.exists(data) and os.path.getsize(data) == total and os.path.exists(index)):
        log("writing %s (%.0f MB, %d samples)" % (data, total / 1e6, samples))
        with open(data + ".tmp", "wb") as f:
            for k in range(samples):
                f.write(sample_content(k, int(lengths[k])).tobytes())
        os.replace(data + ".tmp", data)
        np.save(index, np.stack([offsets, lengths], 1).astype("<i8"))
    return index, data, total


def warm(path: str) -> None:
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


# --------------------------------------------------------------- one pair


class PlainDataset:
    """What a hand-written map-style dataset does: open/seek/read per sample."""

    def __init__(self, index, data):
        self.ranges = np.load(index).tolist()
        self.data = data

    def __len__(self):
        return len(self.ranges)

    def __getitem__(self, i):
        import torch

        off, n = self.ranges[i]
        buf = bytearray(n)
        with open(self.data, "rb", buffering=0) as f:
            f.seek(off)
            got = f.readinto(buf)
        assert got == n
        return torch.frombuffer(buf, dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)


def keep_list(batch):
    return batch


def run_one(kind: str, workers: int, index: str, data: str, epochs: int) -> dict:
    import torch
    from torch.utils.data import DataLoader

    if kind == "plain":
        ds = PlainDataset(index, data)
    else:
        from memtier.dataset import MemTierDataset

        if kind == "memtier":
            ds = MemTierDataset(index, data)
        else:  # per-sample: hide __getitems__ so DataLoader calls ds[i]

            class PerSample(MemTierDataset):
                __getitems__ = None

            ds = PerSample(index, data)
    n = len(ds)
    g = torch.Generator()
    g.manual_seed(SEED)
    dl = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers, collate_fn=keep_list,
                    generator=g, persistent_workers=workers > 0,
                    multiprocessing_context="fork" if workers else None)
    times = []
    for ep in range(epochs + 1):  # epoch 0: warm-up (workers start, runtimes load)
        t0 = time.perf_counter()
        count = 0
        for batch in dl:
            count += len(batch)
        dt = time.perf_counter() - t0
        assert count == n, (count, n)
        if ep:
            times.append(dt)
    # one more, untimed epoch checks every sample (batches are dropped as they
    # are checked: holding 20k shared tensors would exhaust file descriptors)
    ranges = np.load(index)
    bad = 0
    seen = set()
    for batch in dl:
        for s in batch:
            a = s.numpy()
            k = int.from_bytes(a[:4].tobytes(), "little")
            seen.add(k)
            if not (0 <= k < n) or a.shape[0] != ranges[k, 1] or not np.array_equal(a, sample_content(k, a.shape[0])):
                bad += 1
    bad += n - len(seen)
    io_path = getattr(ds, "io_path", None)  # main process only (None with workers)
    return {"kind": kind, "workers": workers, "samples": n, "epoch_s": times,
            "best": n / min(times), "median": n / statistics.median(times), "bad": bad, "main_io_path": io_path}


# ------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs after one warm-up")
    ap.add_argument("--workers", default="0,2")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", nargs=4, metavar=("KIND", "WORKERS", "INDEX", "DATA"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        kind, workers, index, data = a.one
        print(json.dumps(run_one(kind, int(workers), index, data, a.epochs)))
        return 0

    index, data, total = make_data(pick_dir(a.dir), a.samples)
    warm(data)
    results = []
    for workers in [int(w) for w in a.workers.split(",")]:
        for kind in ("memtier", "memtier-per-sample", "plain"):
            warm(data)
            log("run %-19s workers=%d ..." % (kind, workers))
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--epochs", str(a.epochs),
                                "--one", kind, str(workers), index, data],
                               capture_output=True, text=True)
            if r.returncode != 0:
                log(r.stderr[-4000:])
                return 1
            results.append(json.loads(r.stdout.strip().splitlines()[-1]))
    by = {(r["kind"], r["workers"]): r for r in results}
    ratios = {}
    for workers in sorted({r["workers"] for r in results}):
        m, p = by[("memtier", workers)], by[("plain", workers)]
        ratios[workers] = m["median"] / p["median"]
    ok = all(r["bad"] == 0 for r in results)
    if a.json:
        print(json.dumps({"samples": a.samples, "bytes": total, "batch": BATCH, "results": results,
                          "ratio_memtier_vs_plain": ratios, "verified": ok}))
        return 0 if ok else 1
    mb = total / 1e6
    print("DataLoader, %d samples of 4-64 KiB (%.0f MB), batch %d, shuffle, warm page cache, %d CPUs"
          % (a.samples, mb, BATCH, os.cpu_count()))
    print("%-20s %7s %14s %14s %10s  %s" % ("dataset", "workers", "samples/s", "(best)", "MB/s", "verified"))
    for r in results:
        print("%-20s %7d %14.0f %14.0f %10.0f  %s" % (r["kind"], r["workers"], r["median"], r["best"],
                                                     r["median"] * mb / r["samples"],
                                                     "ok" if r["bad"] == 0 else "%d BAD" % r["bad"]))
    targets = {0: 3.0, 2: 2.0}
    for workers, ratio in ratios.items():
        t = targets.get(workers)
        verdict = "" if t is None else ("  (target >= %.0fx: %s)" % (t, "met" if ratio >= t else "MISSED"))
        print("memtier / plain at %d workers: %.2fx%s" % (workers, ratio, verdict))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
