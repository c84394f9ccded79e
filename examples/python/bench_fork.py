#!/usr/bin/env python3
"""bench_fork.py: DataLoader workers forked after the parent used MemTier, vs spawn workers.

Linux's default start method before Python 3.14 is fork, and the usual
training script loads its weights (``memtier.safetensors``) or checks
``ds[0]`` in the parent before the DataLoader starts. Its forked workers
cannot use the parent's Go runtime. This measures what they read at, in one
interpreter whose parent has loaded a safetensors file through MemTier:

* ``spawn``: ``multiprocessing_context="spawn"``, ``persistent_workers=True``;
  each worker has its own MemTier runtime. Start-up (iterator creation to the
  first batch of the first epoch) is reported apart from the epoch times.
* ``fork-batch``: ``"fork"`` workers, which read each batch with one C call
  of the library that needs no Go runtime (``memtier_pread_batch``).
* ``fork-pread``: ``"fork"`` workers forced onto the per-sample Python
  ``os.preadv`` loop (what forked workers did before ``memtier_pread_batch``).

The data: ``--samples`` files of 4-64 KiB (uniform sizes, fixed seed),
packed with :func:`memtier.pack.pack` into one data file
(``MemTierDataset``), and the same files as members of 8 tar shards
(``TarShardDataset``, which indexes its shards through the library in the
parent, so its forked workers always take a fork path). Page cache warm.
Every loader: ``num_workers=--workers``, ``batch_size=64``, shuffle, a
collate that keeps the list, one warm-up epoch, then ``--epochs`` timed
epochs. The modes run interleaved, ``--reps`` times, and the medians and the
ratios fork/spawn are printed with the load average. A final epoch of each
mode checks every sample's bytes.

``--reader`` times the read part alone: one worker process per mode (a
``multiprocessing`` Pool of 1 of that start method) calls ``ds.__getitems__``
over shuffled batches of 64 for one warm-up and ``--epochs`` timed epochs,
no DataLoader, no inter-process transfer of the samples.

``--rss`` instead records each spawn worker's VmRSS (MiB) after each of
``--epochs`` epochs with the default context options (field case N07 in tests/field_cases.md: each
worker's DRAM cache).

    python examples/python/bench_fork.py
    python examples/python/bench_fork.py --samples 5000 --reps 3 --json
    python examples/python/bench_fork.py --reader --epochs 3 --reps 3
    python examples/python/bench_fork.py --rss --epochs 3

The data goes to --dir, else $MEMTIER_EXPERIMENT_DIR, else
./memtier_experiments. Needs torch and numpy. Exit status 0 when every sample
verified, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import time

import numpy as np

try:
    import memtier
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memtier

KiB = 1024
BATCH = 64
SEED = 20240611
SHARDS = 8


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sample_content(k: int, n: int) -> bytes:
    """Sample k: 4 bytes k little-endian, then bytes (k + j) % 256."""
    b = ((np.arange(n, dtype=np.int64) + k) & 0xFF).astype(np.uint8)
    b[:4] = np.frombuffer(int(k).to_bytes(4, "little"), np.uint8)
    return b.tobytes()


def make_data(d: str, samples: int):
    """(index, data, tar shard paths, lengths): packed and tar copies of the samples."""
    from memtier.pack import pack

    tag = "bench_fork_%d_%d" % (samples, SEED)
    root = os.path.join(d, tag)
    src = os.path.join(root, "src")
    prefix = os.path.join(root, "packed")
    lengths = np.random.default_rng(SEED).integers(4 * KiB, 64 * KiB + 1, samples)
    shards = [os.path.join(root, "shard-%02d.tar" % s) for s in range(SHARDS)]
    done = os.path.join(root, "done")
    if not os.path.exists(done):
        os.makedirs(src, exist_ok=True)
        log("writing %d samples (%.0f MB) under %s" % (samples, lengths.sum() / 1e6, root))
        for k in range(samples):
            with open(os.path.join(src, "%07d.bin" % k), "wb") as f:
                f.write(sample_content(k, int(lengths[k])))
        pack(src, prefix)
        per = (samples + SHARDS - 1) // SHARDS
        for s, path in enumerate(shards):
            with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
                for k in range(s * per, min(samples, (s + 1) * per)):
                    tf.add(os.path.join(src, "%07d.bin" % k), arcname="%07d.bin" % k)
        for k in range(samples):
            os.unlink(os.path.join(src, "%07d.bin" % k))
        open(done, "w").close()
    return prefix + ".idx", prefix + ".data", shards, lengths


def make_weights(d: str) -> str:
    """A 64 MiB safetensors file for the parent to load through MemTier."""
    path = os.path.join(d, "bench_fork_weights.safetensors")
    if not os.path.exists(path):
        from safetensors.numpy import save_file

        rng = np.random.default_rng(1)
        save_file({"w%d" % i: rng.standard_normal((1024, 2048), dtype=np.float32) for i in range(8)}, path)
    return path


def warm(paths) -> None:
    buf = bytearray(16 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def keep_list(batch):
    return batch


def sample_key(s) -> int:
    if isinstance(s, dict):
        return int(s["__key__"])
    return int.from_bytes(bytes(s[:4].numpy()), "little")


def sample_bytes(s) -> bytes:
    return s["bin"] if isinstance(s, dict) else s.numpy().tobytes()


class Mode:
    """One (dataset, start method) loader with persistent workers."""

    def __init__(self, name: str, ds, method: str, workers: int, force_pread: bool) -> None:
        import torch
        from torch.utils.data import DataLoader

        self.name, self.ds = name, ds
        g = torch.Generator()
        g.manual_seed(SEED)
        if force_pread:
            ds._fork_batch = False  # benchmark switch: the per-sample os.preadv loop
        self.dl = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=workers,
                             collate_fn=keep_list, generator=g, persistent_workers=True,
                             multiprocessing_context=method)
        t0 = time.perf_counter()
        it = iter(self.dl)
        n = len(next(it))
        self.startup = time.perf_counter() - t0
        for b in it:  # the rest of the warm-up epoch
            n += len(b)
        assert n == len(ds), (n, len(ds))
        self.times = []

    def epoch(self) -> None:
        t0 = time.perf_counter()
        n = 0
        for b in self.dl:
            n += len(b)
        self.times.append(time.perf_counter() - t0)
        assert n == len(self.ds), (n, len(self.ds))

    def verify(self, lengths) -> int:
        bad, seen = 0, set()
        for b in self.dl:
            for s in b:
                k = sample_key(s)
                seen.add(k)
                if not 0 <= k < len(lengths) or sample_bytes(s) != sample_content(k, int(lengths[k])):
                    bad += 1
        return bad + len(lengths) - len(seen)

    def close(self) -> None:
        it = getattr(self.dl, "_iterator", None)
        if it is not None:
            it._shutdown_workers()
        self.dl = None


def run_speed(a, index, data, shards, lengths) -> int:
    from memtier.dataset import MemTierDataset
    from memtier.webdataset import TarShardDataset

    weights = make_weights(a.dir)
    from memtier.safetensors import load_file

    w = load_file(weights)  # the parent's Go runtime is running from here on
    assert len(w) == 8
    kinds = {"packed": lambda: MemTierDataset(index, data), "tar": lambda: TarShardDataset(shards)}
    modes = [("spawn", "spawn", False), ("fork-batch", "fork", False), ("fork-pread", "fork", True)]
    res = {}
    bad = 0
    for kind in a.kinds.split(","):
        for rep in range(a.reps):
            for name, method, force in modes:
                warm([data] if kind == "packed" else shards)
                m = Mode(name, kinds[kind](), method, a.workers, force)
                for _ in range(a.epochs):
                    m.epoch()
                if rep == 0:
                    bad += m.verify(lengths)
                m.close()
                r = res.setdefault((kind, name), {"startup": [], "epochs": []})
                r["startup"].append(m.startup)
                r["epochs"].extend(m.times)
                log("%-6s %-10s rep %d: start-up %.2f s, epochs %s" % (
                    kind, name, rep, m.startup, " ".join("%.3f" % t for t in m.times)))
    load = open("/proc/loadavg").read().split()[:3]
    out = {"samples": a.samples, "bytes": int(lengths.sum()), "workers": a.workers, "batch": BATCH,
           "loadavg": load, "verified": bad == 0, "modes": {}}
    for (kind, name), r in res.items():
        med = statistics.median(r["epochs"])
        out["modes"]["%s/%s" % (kind, name)] = {
            "epoch_median_s": med, "epoch_s": r["epochs"], "startup_median_s": statistics.median(r["startup"]),
            "samples_per_s": a.samples / med}
    for kind in a.kinds.split(","):
        sp = out["modes"]["%s/spawn" % kind]["epoch_median_s"]
        for name in ("fork-batch", "fork-pread"):
            out["modes"]["%s/%s" % (kind, name)]["speed_vs_spawn"] = sp / out["modes"]["%s/%s" % (kind, name)]["epoch_median_s"]
    if a.json:
        print(json.dumps(out))
    else:
        print("%d samples of 4-64 KiB (%.0f MB), %d workers, batch %d, shuffle, warm page cache, %d CPUs, "
              "load %s" % (a.samples, out["bytes"] / 1e6, a.workers, BATCH, os.cpu_count(), " ".join(load)))
        print("%-18s %12s %12s %12s %14s" % ("mode", "epoch (s)", "samples/s", "start-up (s)", "speed/spawn"))
        for key, r in out["modes"].items():
            print("%-18s %12.3f %12.0f %12.2f %14s" % (key, r["epoch_median_s"], r["samples_per_s"],
                                                       r["startup_median_s"],
                                                       "%.2fx" % r["speed_vs_spawn"] if "speed_vs_spawn" in r else "-"))
        print("verified: %s" % ("ok" if bad == 0 else "%d BAD" % bad))
    return 0 if bad == 0 else 1


def _reader(args):
    ds, epochs = args
    import warnings

    warnings.simplefilter("ignore")  # the os.pread path warns once
    order = np.random.default_rng(SEED).permutation(len(ds))
    times = []
    for _ in range(epochs + 1):  # the first is the warm-up (a spawn worker fills its DRAM cache)
        t0 = time.perf_counter()
        for i in range(0, len(order), BATCH):
            ds.__getitems__(order[i:i + BATCH].tolist())
        times.append(time.perf_counter() - t0)
    return ds.io_path, times[1:]


def run_reader(a, index, data, shards, lengths) -> int:
    import multiprocessing as mp

    from memtier.safetensors import load_file

    w = load_file(make_weights(a.dir))  # the parent's Go runtime is running from here on
    assert len(w) == 8
    modes = [("spawn", "spawn", False), ("fork-batch", "fork", False), ("fork-pread", "fork", True)]
    from memtier.dataset import MemTierDataset
    from memtier.webdataset import TarShardDataset

    res = {}
    for kind in a.kinds.split(","):
        for rep in range(a.reps):
            for name, method, force in modes:
                # built here and pickled to the worker (which opens its own files)
                ds = MemTierDataset(index, data) if kind == "packed" else TarShardDataset(shards)
                if force:
                    ds._fork_batch = False
                warm([data] if kind == "packed" else shards)
                with mp.get_context(method).Pool(1) as pool:
                    io, times = pool.apply(_reader, ((ds, a.epochs),))
                res.setdefault((kind, name), []).extend(times)
                log("%-6s %-10s rep %d (%s): %s" % (kind, name, rep, io, " ".join("%.3f" % t for t in times)))
    load = open("/proc/loadavg").read().split()[:3]
    out = {"samples": a.samples, "bytes": int(lengths.sum()), "loadavg": load, "modes": {}}
    for (kind, name), times in res.items():
        out["modes"]["%s/%s" % (kind, name)] = {"epoch_median_s": statistics.median(times), "epoch_s": times}
    for kind in a.kinds.split(","):
        sp = out["modes"]["%s/spawn" % kind]["epoch_median_s"]
        for name in ("fork-batch", "fork-pread"):
            r = out["modes"]["%s/%s" % (kind, name)]
            r["speed_vs_spawn"] = sp / r["epoch_median_s"]
    if a.json:
        print(json.dumps(out))
    else:
        print("read only (__getitems__, batch %d, one worker), %d samples (%.0f MB), %d CPUs, load %s"
              % (BATCH, a.samples, out["bytes"] / 1e6, os.cpu_count(), " ".join(load)))
        print("%-18s %12s %12s %14s" % ("mode", "epoch (s)", "MB/s", "speed/spawn"))
        for key, r in out["modes"].items():
            print("%-18s %12.3f %12.0f %14s" % (key, r["epoch_median_s"], out["bytes"] / 1e6 / r["epoch_median_s"],
                                                "%.2fx" % r["speed_vs_spawn"] if "speed_vs_spawn" in r else "-"))
    return 0


def worker_rss(dl) -> list:
    out = []
    for w in dl._iterator._workers:
        with open("/proc/%d/status" % w.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out.append(int(line.split()[1]) // 1024)
    return out


def run_rss(a, index, data, shards, lengths) -> int:
    import torch
    from torch.utils.data import DataLoader

    from memtier.dataset import MemTierDataset
    from memtier.webdataset import TarShardDataset

    rows = {}
    for kind in a.kinds.split(","):
        for opts_name, opts in (("default", None), ("cache off", {"cache_bytes": 0})):
            ds = MemTierDataset(index, data, context_options=opts) if kind == "packed" else \
                TarShardDataset(shards, context_options=opts)
            g = torch.Generator()
            g.manual_seed(SEED)
            dl = DataLoader(ds, batch_size=32, shuffle=True, num_workers=a.workers, collate_fn=keep_list,
                            generator=g, persistent_workers=True, multiprocessing_context="spawn")
            per = []
            for _ in range(a.epochs):
                for b in dl:
                    pass
                per.append(worker_rss(dl))
            dl._iterator._shutdown_workers()
            rows["%s, %s" % (kind, opts_name)] = per
            log("%-20s %s" % ("%s, %s" % (kind, opts_name), per))
    load = open("/proc/loadavg").read().split()[:3]
    if a.json:
        print(json.dumps({"worker_rss_mib": rows, "loadavg": load}))
    else:
        print("worker VmRSS (MiB) after each epoch, %d spawn workers, load %s" % (a.workers, " ".join(load)))
        for k, per in rows.items():
            print("%-20s %s" % (k, "  ".join(str(p) for p in per)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs per loader (after one warm-up)")
    ap.add_argument("--reps", type=int, default=2, help="interleaved repetitions of every mode")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kinds", default="packed,tar", help="packed, tar or both")
    ap.add_argument("--rss", action="store_true", help="worker RSS per epoch instead of speed")
    ap.add_argument("--reader", action="store_true", help="time __getitems__ alone, one worker per mode")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    a.dir = a.dir or os.environ.get("MEMTIER_EXPERIMENT_DIR") or os.path.join(os.getcwd(), "memtier_experiments")
    os.makedirs(a.dir, exist_ok=True)
    index, data, shards, lengths = make_data(a.dir, a.samples)
    if a.rss:
        return run_rss(a, index, data, shards, lengths)
    if a.reader:
        return run_reader(a, index, data, shards, lengths)
    return run_speed(a, index, data, shards, lengths)


if __name__ == "__main__":
    sys.exit(main())
