#!/usr/bin/env python3
"""bench_hot.py: MemTier's Python hot paths beside the os-module baselines, same run.

Warm page cache; every figure is measured next to its baseline in the same run and
every read is checked against the file's bytes after it is timed (outside the clock).

1. ``Context.read_into`` of a cached 4 KiB range (random 4 KiB-aligned offsets over a
   prefetched 256 MiB file) into a preallocated buffer, vs ``os.preadv`` into the same
   buffer and ``os.pread`` (which allocates). Strict freshness (the default context)
   and immutable: a context made with ``freshness="open"`` and the per-call
   ``immutable=True``. Targets: >= 0.8x ``os.preadv`` strict, >= 1.2x immutable.
2. ``Context.readv`` of 256 cached 4 KiB ranges (one (256, 2) int64 array, one output
   buffer) vs a loop of 256 ``os.preadv`` into the same buffer. Target: >= 3x. Its
   ceiling, timed in the same rounds: the ``memtier_readv`` call that ``readv`` makes,
   through cffi with the iovec arrays built outside the clock (the wrapper's cost is the
   difference).
3. DataLoader, 0 workers, 20,000 samples of 4-64 KiB (the data of bench_dataset.py),
   batch 64, shuffled: ``memtier.MemTierDataset`` vs a torch Dataset with a
   ``__getitems__`` that reads the batch with one ``os.preadv`` per sample into one
   buffer split into per-sample tensors (and ``__getitem__`` with ``os.pread``).
   Each runs in a fresh interpreter. Target: >= 1.5x samples/s. Needs torch.

Ratios are speed of MemTier / speed of the baseline (above 1: MemTier faster).
Calls are timed in batches of 256 (the clock is read once per batch); in each round
every method reads every batch, the methods taking turns of 16 batches, each on
different batches at a time (see run_round); a figure is the median of ``--repeat`` rounds.

    python examples/python/bench_hot.py            # about 40 s
    python examples/python/bench_hot.py --quick    # about 20 s
    python examples/python/bench_hot.py --json     # one JSON object on stdout

The data goes to a new temporary directory (removed at exit). A feature the installed
package lacks (``freshness="open"``, ``immutable=``, torch) makes its row
"n/a (not available)". Exit status 0 when every read verified (a missed target is
reported, not fatal), 1 on a wrong byte or a failed read, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

try:
    import memtier
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memtier

import _peers
from _peers import MiB, log, table

BLK = 4096
SEED = 0x407DA7
NA = "n/a (not available)"

# ------------------------------------------------------------------ small reads


class Small:
    """The file, its bytes, the offsets, the destination slots, the contexts."""

    def __init__(self, path: str, size: int, calls: int, batch: int) -> None:
        self.path = path
        self.size = size
        self.batch = batch
        self.copy = np.fromfile(path, dtype=np.uint8)  # also warms the page cache
        if self.copy.size != size:
            raise SystemExit(f"{path}: read {self.copy.size} bytes, expected {size}")
        self.blocks = self.copy.reshape(-1, BLK)
        rng = np.random.default_rng(SEED)
        self.idx = rng.integers(0, size // BLK, calls)  # block numbers
        offs = (self.idx * BLK).tolist()
        self.batches = [offs[i:i + batch] for i in range(0, calls, batch)]
        self.ranges = [np.stack([np.asarray(b, dtype=np.int64), np.full(len(b), BLK, np.int64)], 1)
                       for b in self.batches]
        self.buf = bytearray(batch * BLK)
        mv = memoryview(self.buf)
        self.views = [mv[k * BLK:(k + 1) * BLK] for k in range(batch)]
        self.vlists = [[v] for v in self.views]  # os.preadv takes a list of buffers
        self.arr = np.frombuffer(self.buf, dtype=np.uint8).reshape(batch, BLK)
        self.fd = os.open(path, os.O_RDONLY)
        self.bad = 0

    def verify(self, bi: int, n: int, got: Optional[np.ndarray] = None) -> None:
        start = bi * self.batch
        want = self.blocks[self.idx[start:start + n]]
        have = self.arr[:n] if got is None else got
        if not np.array_equal(have, want):
            self.bad += 1

    def close(self) -> None:
        os.close(self.fd)


TURN = 16  # batches per turn of a method (a few ms of back-to-back calls)


def run_round(s: Small, bodies: List[Callable[[int], Any]]) -> List[float]:
    """One round: every method reads every batch once. The methods take turns of
    TURN consecutive batches (back-to-back calls within a turn), the first one
    rotating, so that a burst of other work on the machine hits all of them alike.
    At step t method m reads turn (t + m * stride) % nt (stride = nt // methods): no
    method finds the bytes another just read in the CPU cache. body(j) reads batch
    j, one call per 4 KiB range into slot k of the buffer (the loop is written out in
    each body: no extra Python call per read is timed), and returns None (the bytes
    are in the buffer) or an array of them. The clock is read once per batch; each
    batch is checked after it. Returns ns per read for each method."""
    nb, nm = len(s.batches), len(bodies)
    nt = (nb + TURN - 1) // TURN
    stride = max(1, nt // nm)
    total = [0] * nm
    clock = time.perf_counter_ns
    arr = s.arr
    for t in range(nt):
        for k in range(nm):
            m = (t + k) % nm
            turn = (t + m * stride) % nt
            body = bodies[m]
            for j in range(turn * TURN, min((turn + 1) * TURN, nb)):
                n = len(s.batches[j])
                arr[:n] = 0xA5  # untimed: stale bytes cannot pass
                t0 = clock()
                got = body(j)
                total[m] += clock() - t0
                s.verify(j, n, got)
    calls = sum(len(x) for x in s.batches)
    return [x / calls for x in total]


def bench_small(path: str, size: int, calls: int, batch: int, repeat: int) -> Dict[str, Any]:
    s = Small(path, size, calls, batch)
    budget = size + 64 * MiB
    ctx = memtier.Context(cache_bytes=budget)
    ctx.prefetch(path, 0, size)
    notes: Dict[str, str] = {}
    try:
        ctx_open = memtier.Context(cache_bytes=budget, freshness="open")
        ctx_open.prefetch(path, 0, size)
    except (TypeError, ValueError) as e:  # a package without the setting
        ctx_open = None
        notes["read_into_open"] = f"{NA}: {e}"
    fd = s.fd
    preadv = os.preadv
    cri = ctx.read_into
    sp = path

    views, vlists = s.views, s.vlists
    BLK_ = BLK
    pread = os.pread

    batches, ranges = s.batches, s.ranges

    def b_pread(j: int) -> np.ndarray:
        offs = batches[j]
        out = [pread(fd, BLK_, off) for off in offs]  # allocates, as os.pread does
        return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(len(offs), BLK)

    def b_preadv(j: int) -> None:
        for off, l in zip(batches[j], vlists):
            preadv(fd, l, off)

    def b_strict(j: int) -> None:
        for off, v in zip(batches[j], views):
            cri(sp, off, v)

    methods: Dict[str, Callable[[int], Any]] = {
        "os_pread": b_pread, "os_preadv": b_preadv, "read_into_strict": b_strict}
    if ctx_open is not None:
        cro = ctx_open.read_into

        def b_open(j: int) -> None:
            for off, v in zip(batches[j], views):
                cro(sp, off, v)

        methods["read_into_open"] = b_open
    try:
        cri(sp, 0, s.views[0], immutable=True)

        def b_imm(j: int) -> None:
            for off, v in zip(batches[j], views):
                cri(sp, off, v, immutable=True)

        methods["read_into_immutable_call"] = b_imm
    except TypeError as e:
        notes["read_into_immutable_call"] = f"{NA}: {e}"

    # readv: one call per batch of 256 ranges (one (256, 2) int64 array, made outside
    # the clock); its baseline is os_preadv above (256 os.preadv calls into the same slots)
    buf = s.buf
    crv = ctx.readv

    def b_readv(j: int) -> None:
        crv(sp, ranges[j], out=buf)

    methods["readv_256_strict"] = b_readv
    try:
        crv(sp, s.ranges[0], out=buf, immutable=True)

        def b_readv_imm(j: int) -> None:
            crv(sp, ranges[j], out=buf, immutable=True)

        methods["readv_256_immutable"] = b_readv_imm
    except TypeError as e:
        notes["readv_256_immutable"] = f"{NA}: {e}"

    # The wrapper's ceiling: the memtier_readv call Context.readv makes, through cffi
    # with each batch's memtier_iovec_t array built outside the clock (into the same
    # slots of buf). What is left between it and readv_256_strict is the wrapper's own
    # cost; what is left between it and os_preadv is the library's. It uses the
    # package's private handle, as nothing public exposes the raw call.
    try:
        ffi, h, fn = ctx._ffi, ctx._handle(), ctx._readv_c
        cpath = os.fsencode(path)
        base = ffi.cast("char *", ffi.from_buffer(buf))
        iovs = []
        for r in ranges:
            a = ffi.new("memtier_iovec_t[]", len(r))
            for k, (off, sz) in enumerate(r.tolist()):
                a[k].offset, a[k].size, a[k].dst = off, sz, base + k * BLK
            iovs.append((a, len(r)))

        def b_readv_c(j: int) -> None:
            a, n = iovs[j]
            if fn(h, cpath, a, n, 0):
                raise RuntimeError(f"memtier_readv failed on batch {j}")

        b_readv_c(0)
        methods["readv_256_cffi"] = b_readv_c
    except (AttributeError, TypeError, RuntimeError) as e:  # another package version
        notes["readv_256_cffi"] = f"{NA}: {e}"

    names = list(methods)
    bodies = [methods[k] for k in names]
    run_round(s, bodies)  # one untimed round: first touch, descriptors, caches
    st0 = ctx.stats()
    rounds: Dict[str, List[float]] = {k: [] for k in names}
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for k, v in zip(names, run_round(s, bodies)):
                rounds[k].append(v)
    finally:
        gc.enable()
    st1 = ctx.stats()
    hits = st1.cache_hit_requests - st0.cache_hit_requests
    reqs = st1.requests - st0.requests
    ctx.close()
    if ctx_open is not None:
        ctx_open.close()
    s.close()
    res = {k: {"ns_per_call": statistics.median(v), "rounds_ns": v} for k, v in rounds.items()}
    return {"calls_per_round": calls, "batch": batch, "size": size, "repeat": repeat,
            "methods": res, "notes": notes, "strict_context_cache_hits": hits,
            "strict_context_requests": reqs, "all_hits": hits == reqs and reqs > 0,
            "bad_batches": s.bad}


# ------------------------------------------------------------------ DataLoader


class PreadBatchDataset:
    """A careful hand-written map-style dataset: one descriptor per process,
    ``os.pread`` per sample in ``__getitem__``, and ``__getitems__`` reading the
    batch with ``os.preadv`` into one buffer split into per-sample tensors (what
    MemTierDataset does, minus MemTier)."""

    def __init__(self, index: str, data: str) -> None:
        r = np.load(index)
        self.ranges = r.tolist()
        self.lengths = r[:, 1]
        self.data = data
        self.fd = -1

    def __len__(self) -> int:
        return len(self.ranges)

    def _fd(self) -> int:
        if self.fd < 0:
            self.fd = os.open(self.data, os.O_RDONLY)
        return self.fd

    def __getitem__(self, i: int) -> Any:
        import torch

        off, n = self.ranges[i]
        b = bytearray(os.pread(self._fd(), n, off))
        return torch.frombuffer(b, dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)

    def __getitems__(self, indices: List[int]) -> List[Any]:
        import torch

        fd = self._fd()
        rs = [self.ranges[i] for i in indices]
        lens = [n for _, n in rs]
        buf = np.empty(sum(lens), dtype=np.uint8)
        mv = memoryview(buf)
        pos = 0
        for off, n in rs:
            got = os.preadv(fd, [mv[pos:pos + n]], off)
            if got != n:
                raise OSError(f"short read at {off}: {got} of {n}")
            pos += n
        return list(torch.from_numpy(buf).split(lens))


def loader_one(kind: str, index: str, data: str, epochs: int) -> Dict[str, Any]:
    """In a fresh interpreter: one warm-up epoch, `epochs` timed, one checked."""
    import torch
    from torch.utils.data import DataLoader

    import bench_dataset as bd

    if kind == "memtier":
        from memtier.dataset import MemTierDataset

        ds: Any = MemTierDataset(index, data)
    else:
        ds = PreadBatchDataset(index, data)
    n = len(ds)
    g = torch.Generator()
    g.manual_seed(bd.SEED)
    dl = DataLoader(ds, batch_size=bd.BATCH, shuffle=True, num_workers=0, collate_fn=bd.keep_list,
                    generator=g)
    times = []
    for ep in range(epochs + 1):
        t0 = time.perf_counter()
        count = 0
        for batch in dl:
            count += len(batch)
        dt = time.perf_counter() - t0
        if count != n:
            raise SystemExit(f"{kind}: an epoch gave {count} samples of {n}")
        if ep:
            times.append(dt)
    ranges = np.load(index)
    bad, seen = 0, set()
    for batch in dl:
        for smp in batch:
            a = smp.numpy()
            k = int.from_bytes(a[:4].tobytes(), "little")
            seen.add(k)
            if not (0 <= k < n) or a.shape[0] != ranges[k, 1] or not np.array_equal(a, bd.sample_content(k, a.shape[0])):
                bad += 1
    bad += n - len(seen)
    return {"kind": kind, "samples": n, "epoch_s": times, "median_samples_per_s": n / statistics.median(times),
            "best_samples_per_s": n / min(times), "bad": bad}


def bench_loader(tmp: str, samples: int, epochs: int, rounds: int) -> Dict[str, Any]:
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return {"available": False, "note": f"{NA}: torch is not importable ({e})"}
    import bench_dataset as bd

    index, data, total = bd.make_data(os.path.join(tmp, "dataset"), samples)
    per: Dict[str, List[Dict[str, Any]]] = {"memtier": [], "pread_getitems": []}
    for r in range(rounds):  # alternate, so drift hits both alike
        for kind in per:
            bd.warm(data)
            log(f"bench_hot: DataLoader {kind} (round {r + 1}/{rounds}) ...")
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--epochs", str(epochs),
                                "--loader-one", kind, index, data], capture_output=True, text=True)
            if p.returncode != 0:
                log(p.stderr[-4000:])
                return {"available": True, "error": f"{kind}: exit {p.returncode}", "bad": 1}
            per[kind].append(json.loads(p.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(x["median_samples_per_s"] for x in v) for k, v in per.items()}
    return {"available": True, "samples": samples, "bytes": total, "batch": bd.BATCH, "workers": 0,
            "epochs": epochs, "rounds": rounds, "runs": per, "samples_per_s": med,
            "bad": sum(x["bad"] for v in per.values() for x in v)}


# ------------------------------------------------------------------ rows


def rows_of(small: Dict[str, Any], loader: Dict[str, Any]) -> List[Dict[str, Any]]:
    m = small["methods"]
    notes = small["notes"]
    rows: List[Dict[str, Any]] = []

    def ns_row(key: str, name: str, mt: str, base: str, target: Optional[float]) -> None:
        row: Dict[str, Any] = {"key": key, "name": name, "unit": "ns/read", "memtier_mode": mt,
                               "base_mode": base, "target": target}
        if mt not in m or base not in m:
            row.update(available=False, note=notes.get(mt, NA), ratio=None, met=None)
        else:
            a, b = m[mt]["ns_per_call"], m[base]["ns_per_call"]
            row.update(available=True, memtier=a, base=b, ratio=b / a if a > 0 else None)
            row["met"] = None if target is None or row["ratio"] is None else row["ratio"] >= target
        rows.append(row)

    ns_row("read_into_strict_vs_preadv", "Context.read_into 4 KiB cached, strict, vs os.preadv",
           "read_into_strict", "os_preadv", 0.8)
    ns_row("read_into_open_vs_preadv", "Context.read_into 4 KiB cached, freshness=open, vs os.preadv",
           "read_into_open", "os_preadv", 1.2)
    ns_row("read_into_immutable_call_vs_preadv",
           "Context.read_into(immutable=True) 4 KiB cached vs os.preadv",
           "read_into_immutable_call", "os_preadv", 1.2)
    ns_row("read_into_strict_vs_pread", "Context.read_into 4 KiB cached, strict, vs os.pread",
           "read_into_strict", "os_pread", None)
    ns_row("readv_256_vs_preadv_loop", "Context.readv 256 x 4 KiB cached vs os.preadv loop",
           "readv_256_strict", "os_preadv", 3.0)
    ns_row("readv_256_immutable_vs_preadv_loop",
           "Context.readv(immutable=True) 256 x 4 KiB cached vs os.preadv loop",
           "readv_256_immutable", "os_preadv", None)
    ns_row("readv_256_cffi_vs_preadv_loop",
           "ceiling: memtier_readv 256 x 4 KiB cached through cffi, iovecs prebuilt, vs os.preadv loop",
           "readv_256_cffi", "os_preadv", None)
    ns_row("readv_256_vs_cffi", "Context.readv 256 x 4 KiB cached vs the same C call through cffi "
           "(the wrapper's cost)", "readv_256_strict", "readv_256_cffi", None)
    row: Dict[str, Any] = {"key": "dataloader_0_workers", "unit": "samples/s", "target": 1.5,
                           "name": "DataLoader 0 workers, 20k samples 4-64 KiB: MemTierDataset vs "
                                   "os.pread + __getitems__ dataset"}
    if not loader.get("available") or "samples_per_s" not in loader:
        row.update(available=False, note=loader.get("note", loader.get("error", NA)), ratio=None, met=None)
    else:
        a, b = loader["samples_per_s"]["memtier"], loader["samples_per_s"]["pread_getitems"]
        row.update(available=True, memtier=a, base=b, ratio=a / b if b > 0 else None)
        row["met"] = row["ratio"] is not None and row["ratio"] >= 1.5
        row["name"] = row["name"].replace("20k", f"{loader['samples'] // 1000}k")
    rows.append(row)
    return rows


def fmt(v: Optional[float], unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if unit == "samples/s" else f"{v:.0f} ns"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[1:]))
    ap.add_argument("--size", type=int, default=256 * MiB, help="bytes of the file the 4 KiB reads use "
                    "(default 256 MiB; 1 MiB..16 GiB, a multiple of 4096)")
    ap.add_argument("--calls", type=int, default=None, help="4 KiB reads per method and round "
                    "(default 65536, --quick 16384; 256..10,000,000)")
    ap.add_argument("--repeat", type=int, default=None, help="rounds, median reported (default 5, --quick 3; 1..50)")
    ap.add_argument("--samples", type=int, default=20000, help="DataLoader samples (default 20000; 64..1,000,000)")
    ap.add_argument("--epochs", type=int, default=None, help="timed DataLoader epochs per run "
                    "(default 3, --quick 1; 1..20)")
    ap.add_argument("--loader-rounds", type=int, default=None,
                    help="fresh-interpreter runs per DataLoader dataset (default 2, --quick 1; 1..10)")
    ap.add_argument("--no-loader", action="store_true", help="skip the DataLoader row")
    ap.add_argument("--quick", action="store_true", help="fewer calls, rounds and epochs (about 20 s)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ap.add_argument("--loader-one", nargs=3, metavar=("KIND", "INDEX", "DATA"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.loader_one:
        kind, index, data = a.loader_one
        print(json.dumps(loader_one(kind, index, data, a.epochs or 1)))
        return 0
    calls = a.calls if a.calls is not None else (16384 if a.quick else 65536)
    repeat = a.repeat if a.repeat is not None else (3 if a.quick else 5)
    epochs = a.epochs if a.epochs is not None else (1 if a.quick else 3)
    lrounds = a.loader_rounds if a.loader_rounds is not None else (1 if a.quick else 2)
    if not (MiB <= a.size <= 16 << 30) or a.size % BLK:
        ap.error("--size must be 1 MiB..16 GiB and a multiple of 4096")
    for name, v, lo, hi in (("--calls", calls, 256, 10_000_000), ("--repeat", repeat, 1, 50),
                            ("--samples", a.samples, 64, 1_000_000), ("--epochs", epochs, 1, 20),
                            ("--loader-rounds", lrounds, 1, 10)):
        if not lo <= v <= hi:
            ap.error(f"{name}={v}: must be {lo}..{hi}")
    # The copy of the file plus two caches of it must fit comfortably in memory.
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if 3 * a.size + 256 * MiB > phys:
        ap.error(f"--size={a.size}: the file's copy and two DRAM caches of it exceed the memory ({phys} B)")

    tmp = tempfile.mkdtemp(prefix="memtier_bench_hot_")
    try:
        est = a.size + (a.samples * 36 * 1024 if not a.no_loader else 0)
        _peers.require_disk(tmp, est * 1.1 + 64 * MiB, est, tmp)
        path = os.path.join(tmp, "hot.bin")
        log(f"bench_hot: writing {_peers.fmt_bytes(a.size)} of seeded random data to a temp file")
        _peers.write_random_file(path, a.size)
        _peers.warm(path)
        log(f"bench_hot: 4 KiB reads ({calls} per method, {repeat} rounds) ...")
        small = bench_small(path, a.size, calls, 256, repeat)
        os.unlink(path)
        loader = {"available": False, "note": "skipped (--no-loader)"} if a.no_loader else \
            bench_loader(tmp, a.samples, epochs, lrounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = rows_of(small, loader)
    verified = small["bad_batches"] == 0 and small["all_hits"] and loader.get("bad", 0) == 0
    out = {"benchmark": "bench_hot.py", "memtier_version": memtier.__version__ if hasattr(memtier, "__version__")
           else None, "python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
           "ratio": "speed of MemTier / speed of the baseline (ns rows: base ns / memtier ns)",
           "small": small, "loader": loader, "rows": rows, "verified": verified, "ok": verified}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"bench_hot.py: MemTier {out['memtier_version']}, python {out['python']}, {out['cpus']} CPUs, "
              f"warm page cache; 4 KiB reads: {calls} per method, median of {repeat} rounds")
        print(f"strict context: {small['strict_context_cache_hits']} of {small['strict_context_requests']} "
              f"requests were DRAM cache hits\n")
        mrows = [[k, f"{v['ns_per_call']:.0f}"] for k, v in small["methods"].items()]
        print(table(["method", "ns per 4 KiB read"], mrows))
        print()
        trows = []
        for r in rows:
            if not r["available"]:
                trows.append([r["name"], "-", "-", r.get("note", NA), "-" if r["target"] is None else
                              f">={r['target']}x", "n/a"])
                continue
            trows.append([r["name"], fmt(r["memtier"], r["unit"]), fmt(r["base"], r["unit"]), f"{r['ratio']:.2f}x",
                          "-" if r["target"] is None else f">={r['target']}x",
                          "" if r["met"] is None else ("met" if r["met"] else "MISSED")])
        print(table(["row", "memtier", "baseline", "ratio", "target", ""], trows))
        if loader.get("available") and "samples_per_s" in loader:
            print(f"\nDataLoader: {loader['samples']} samples ({loader['bytes'] / 1e6:.0f} MB), batch "
                  f"{loader['batch']}, 0 workers, median of {loader['rounds']} fresh-interpreter runs x "
                  f"{loader['epochs']} epochs")
        print("\nevery read was checked against the file" if verified else "\nFAILED: wrong bytes or cache misses",
              flush=True)
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
