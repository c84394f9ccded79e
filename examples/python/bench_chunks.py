#!/usr/bin/env python3
"""bench_chunks.py: many random (offset, size) chunks of one file with
``memtier.load_chunks`` and with the Python loops it replaces.

What is measured, in one run, with a warm page cache and then a cold one (the file
evicted before every timed run with fsync + ``posix_fadvise(POSIX_FADV_DONTNEED)``,
checked with ``fincore`` when util-linux has it):

  memtier load_chunks       ``memtier.load_chunks(path, chunks)`` with chunks an (n, 2)
                            int64 array: one call, returns a list of numpy uint8 views
                            of one new buffer
  memtier load_chunks out=  the same into preallocated buffers (``out=``: views of one
                            preallocated, pre-faulted numpy buffer)
  os.pread loop             ``[os.pread(fd, size, off) for off, size in chunks]``: a new
                            bytes object per chunk (the baseline of the target)
  os.preadv loop            ``os.preadv(fd, [buf_k], off)`` per chunk into the same
                            preallocated buffers as ``out=``

Chunks: --chunks (default 100,000) ranges with sizes uniform in [--min-kib, --max-kib]
KiB (default 4 to 64) and offsets uniform over the file (unaligned, may overlap),
seeded. The file is --file, else --size bytes (default 2 GiB) of random data made in
--dir or a temp dir (deleted after unless --keep).

MemTier runs with a new ``memtier.Context`` per timed run (closed after), so its DRAM
cache never serves a chunk read in an earlier run. Every row's bytes are checked after
its first run in each cache state: the sha1 over all chunks in order must equal the
os.pread loop's.

Columns: seconds (median of --runs), chunks/s, GB/s (chunk bytes / median, 10^9),
``vs pread loop`` = os.pread loop seconds / row seconds, so above 1 means faster than
the loop (MemTier's target: at least 5x).

    python examples/python/bench_chunks.py                     # 2 GiB file, 100k chunks
    python examples/python/bench_chunks.py --size 8589934592   # 8 GiB file
    python examples/python/bench_chunks.py --file data.bin --chunks 200000
    python examples/python/bench_chunks.py --quick             # 64 MiB, 10k chunks, 1 run
    python examples/python/bench_chunks.py --json              # one JSON object on stdout

Exit status 1 when a row returned different bytes; a missed target is reported, not fatal.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import GB, MiB, fmt_bytes, log  # noqa: E402

GiB = 1 << 30
TARGET = 5.0  # memtier vs the os.pread loop

LABELS = {
    "memtier": "memtier.load_chunks",
    "memtier_out": "memtier.load_chunks(out=prealloc)",
    "pread": "os.pread loop",
    "preadv": "os.preadv loop (prealloc)",
}


def make_chunks(file_size: int, n: int, lo: int, hi: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    sizes = np.minimum(sizes, file_size)
    offs = (rng.random(n) * (file_size - sizes + 1)).astype(np.int64)
    return np.stack([offs, sizes], axis=1)


def digest_list(parts: List[Any]) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(p)
    return h.hexdigest()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", help="an existing file to read (never modified or deleted)")
    ap.add_argument("--size", type=int, default=2 * GiB,
                    help="bytes of the generated file (default 2 GiB)")
    ap.add_argument("--dir", help="where to write the generated file (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated file")
    ap.add_argument("--chunks", type=int, default=100_000, help="chunks per run (default 100000)")
    ap.add_argument("--min-kib", type=float, default=4, help="smallest chunk, KiB (default 4)")
    ap.add_argument("--max-kib", type=float, default=64, help="largest chunk, KiB (default 64)")
    ap.add_argument("--seed", type=int, default=1129)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per row and cache state")
    ap.add_argument("--modes", default="warm,cold", help="warm,cold (default both)")
    ap.add_argument("--rows", default=",".join(LABELS),
                    help="rows to run, comma separated (default all): " + ",".join(LABELS))
    ap.add_argument("--quick", action="store_true", help="smoke: 64 MiB file, 10k chunks, 1 run")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args(argv)

    if args.quick:
        args.size, args.chunks, args.runs = 64 * MiB, 10_000, 1
    modes = _peers.parse_modes(ap, args.modes)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    for r in rows:
        if r not in LABELS:
            ap.error(f"unknown row {r!r} (known: {', '.join(LABELS)})")
    if "pread" not in rows:
        rows.insert(0, "pread")  # the reference for the bytes and the ratio
    lo, hi = int(args.min_kib * 1024), int(args.max_kib * 1024)
    if args.runs < 1 or args.chunks < 1 or not 0 < lo <= hi:
        ap.error("need --runs >= 1, --chunks >= 1 and 0 < --min-kib <= --max-kib")

    try:
        import memtier
        memtier.load_chunks  # noqa: B018 - present in this build?
        mt_error = None
    except (ImportError, AttributeError) as e:
        memtier, mt_error = None, f"{type(e).__name__}: {e}"

    tmpdir: Optional[str] = None
    made: List[str] = []
    if args.file:
        path = _peers.existing_file(ap, args.file)
        src = "--file"
    else:
        base, tmpdir = _peers.output_dir(args.dir, "memtier_bench_chunks_")
        path = os.path.join(base, f"bench_chunks_{args.size}.bin")
        if args.dir and os.path.isfile(path) and os.path.getsize(path) == args.size:
            log(f"reusing {path}")
        else:
            _peers.require_disk(base, args.size + 256 * MiB, args.size, tmpdir)
            log(f"writing {fmt_bytes(args.size)} of seeded random data...")
            made.append(path)
            _peers.write_random_file(path, args.size)
        src = "generated"
    size = os.path.getsize(path)

    try:
        return run(args, path, size, src, rows, modes, lo, hi, memtier, mt_error)
    finally:
        _peers.remove_generated(made, tmpdir, args.keep, "file")


def run(args: argparse.Namespace, path: str, size: int, src: str, rows: List[str],
        modes: List[str], lo: int, hi: int, memtier: Any, mt_error: Optional[str]) -> int:
    if size < 1:
        raise SystemExit("the file is empty")
    chunks = make_chunks(size, args.chunks, lo, hi, args.seed)
    pairs = [(int(o), int(s)) for o, s in chunks]  # the Python loops iterate a list
    total = int(chunks[:, 1].sum())
    ends = np.cumsum(chunks[:, 1])
    starts = ends - chunks[:, 1]

    # preallocated destinations shared by memtier out= and the preadv loop
    prealloc = np.empty(total, dtype=np.uint8)
    prealloc.fill(0)  # fault the pages in before any timing
    out_np = [prealloc[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
    out_mv = [memoryview(a) for a in out_np]

    def do_pread() -> Any:
        fd = os.open(path, os.O_RDONLY)
        try:
            res = [os.pread(fd, n, off) for off, n in pairs]
        finally:
            os.close(fd)
        return res

    def do_preadv() -> Any:
        fd = os.open(path, os.O_RDONLY)
        try:
            for (off, n), mv in zip(pairs, out_mv):
                got = os.preadv(fd, [mv], off)
                if got != n:
                    raise EOFError(f"short read at {off}: {got} of {n}")
        finally:
            os.close(fd)
        return prealloc

    ctx_box: Dict[str, Any] = {}

    def do_mt() -> Any:
        return memtier.load_chunks(path, chunks, ctx=ctx_box["ctx"])

    def do_mt_out() -> Any:
        memtier.load_chunks(path, chunks, out=out_np, ctx=ctx_box["ctx"])
        return prealloc

    fns: Dict[str, Callable[[], Any]] = {"pread": do_pread, "preadv": do_preadv,
                                         "memtier": do_mt, "memtier_out": do_mt_out}
    mt_config = None
    results: Dict[str, List[Dict[str, Any]]] = {}
    resident: Dict[str, List[Optional[int]]] = {m: [] for m in modes}
    ok_all = True
    for mode in modes:
        ref_digest: Optional[str] = None
        entries: List[Dict[str, Any]] = []
        for row in rows:
            entry: Dict[str, Any] = {"row": row, "label": LABELS[row]}
            if row.startswith("memtier") and mt_error:
                entry["error"] = mt_error
                entries.append(entry)
                continue
            times, digest = [], None
            try:
                for i in range(args.runs):
                    if row.startswith("memtier"):
                        ctx_box["ctx"] = memtier.Context()
                        if mt_config is None:
                            mt_config = ctx_box["ctx"].config()
                    if row in ("memtier_out", "preadv"):
                        prealloc.fill(0)
                    r = _peers.warm(path) if mode == "warm" else _peers.evict(path)
                    resident[mode].append(r)
                    gc.collect()
                    gc.disable()
                    try:
                        t0 = time.perf_counter()
                        res = fns[row]()
                        dt = time.perf_counter() - t0
                    finally:
                        gc.enable()
                        if "ctx" in ctx_box:
                            c = ctx_box.pop("ctx")
                            if i == 0:
                                entry["memtier_stats"] = {k: v for k, v in
                                                          c.stats().as_dict().items() if v}
                            c.close()
                    times.append(dt)
                    log(f"  {mode:4s} {row:12s} run {i + 1}: {dt:.3f} s")
                    if i == 0:
                        if isinstance(res, np.ndarray):  # the preallocated buffer
                            digest = hashlib.sha1(res).hexdigest()
                        else:
                            if len(res) != len(pairs) or any(len(p) != n for p, (_, n) in
                                                             zip(res, pairs)):
                                digest = "wrong chunk count or sizes"
                            else:
                                digest = digest_list(res)
                    del res
            except Exception as e:  # noqa: BLE001 - reported in the table
                entry["error"] = f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]
                entries.append(entry)
                continue
            if row == "pread":
                ref_digest = digest
            med = statistics.median(times)
            entry.update(times_s=times, median_s=med, chunks_per_s=len(pairs) / med,
                         gb_per_s=total / med / GB, sha1=digest)
            entries.append(entry)
        for e in entries:  # the os.pread loop's digest is the reference, whatever the order
            if "sha1" in e:
                e["verified"] = ref_digest is not None and e["sha1"] == ref_digest
                ok_all = ok_all and e["verified"]
        base = next((e for e in entries if e["row"] == "pread" and "median_s" in e), None)
        for e in entries:
            if base and "median_s" in e:
                e["vs_pread_loop"] = base["median_s"] / e["median_s"]
        results[mode] = entries

    report = {
        "benchmark": "bench_chunks", "file_source": src, "file_bytes": size,
        "chunks": len(pairs), "chunk_bytes_total": total, "chunk_min": lo, "chunk_max": hi,
        "seed": args.seed, "runs": args.runs, "memtier_config": mt_config,
        "cache_state": {m: {"min_resident_bytes": min([v for v in resident[m] if v is not None],
                                                      default=None),
                            "max_resident_bytes": max([v for v in resident[m] if v is not None],
                                                      default=None)} for m in modes},
        "target_vs_pread_loop": TARGET,
        "target_met": {m: next((e["vs_pread_loop"] >= TARGET for e in results[m]
                                if e["row"] == "memtier" and "vs_pread_loop" in e), None)
                       for m in modes},
        "results": results, "all_verified": ok_all,
    }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0 if ok_all else 1


def print_report(report: Dict[str, Any]) -> None:
    """The tables and notes of a report (as --json prints it), for people."""
    results, modes = report["results"], list(report["results"])
    mt_config, ok_all = report["memtier_config"], report["all_verified"]
    lo, hi, total = report["chunk_min"], report["chunk_max"], report["chunk_bytes_total"]
    print(f"bench_chunks: {report['chunks']} chunks of {lo // 1024}-{hi // 1024} KiB "
          f"({total / GB:.2f} GB) at random offsets of a {fmt_bytes(report['file_bytes'])} "
          f"{report['file_source']} file; median of {report['runs']} run(s)")
    if mt_config:
        print(f"  memtier: io_threads={mt_config.get('io_threads')}, "
              f"small_io_depth={mt_config.get('small_io_depth')}, "
              f"direct_mode={mt_config.get('direct_mode')}, a new Context per run")
    for mode in modes:
        cs = report["cache_state"][mode]
        state = ("residency not checked (no fincore)" if cs["min_resident_bytes"] is None else
                 f"{fmt_bytes(cs['min_resident_bytes'])} to {fmt_bytes(cs['max_resident_bytes'])}"
                 " of the file resident before each run (fincore)")
        title = ("warm page cache" if mode == "warm" else
                 "cold: evicted before every run (fsync + POSIX_FADV_DONTNEED)")
        print(f"\n== {title}; {state}")
        t = []
        for e in results[mode]:
            if "median_s" not in e:
                t.append([e["label"], "-", "-", "-", "-", "could not run"])
                continue
            ratio = f"{e['vs_pread_loop']:.2f}x" if "vs_pread_loop" in e else "n/a"
            t.append([e["label"], f"{e['median_s']:.3f}", f"{e['chunks_per_s']:,.0f}",
                      f"{e['gb_per_s']:.2f}", ratio, "yes" if e["verified"] else "NO"])
        print(_peers.table(["method", "s", "chunks/s", "GB/s", "vs pread loop",
                            "bytes equal"], t))
    print()
    errs = {e["label"]: e["error"] for m in results.values() for e in m if "error" in e}
    for label, err in errs.items():
        print(f"could not run: {label}: {err}")
    for m in modes:
        for e in results[m]:
            st = e.get("memtier_stats")
            if st:
                print(f"{m}: {e['label']} (first run): " + ", ".join(
                    f"{k} {fmt_bytes(st.get(k, 0))}" for k in
                    ("buffered_bytes", "direct_bytes", "cache_hit_bytes", "storage_bytes")))
    for m in modes:
        met = report["target_met"][m]
        if met is not None:
            print(f"{m}: memtier.load_chunks vs the os.pread loop: "
                  f"{next(e['vs_pread_loop'] for e in results[m] if e['row'] == 'memtier'):.2f}x "
                  f"(target {TARGET:g}x: {'met' if met else 'MISSED'})")
    print("vs pread loop = os.pread loop seconds / row seconds: above 1 means faster; "
          "bytes equal: sha1 over all chunks equals the os.pread loop's"
          + ("" if ok_all else "; SOME ROW RETURNED DIFFERENT BYTES"))


if __name__ == "__main__":
    sys.exit(main())
