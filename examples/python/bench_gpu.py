#!/usr/bin/env python3
"""bench_gpu.py: file bytes into CUDA memory with MemTier against the torch ways.

Run on a machine with an NVIDIA GPU and torch built with CUDA (scripts/gpu_check.sh
runs it there as its Python step). Exits 77 (skip) when torch.cuda is not available.

What is measured, in one run, warm page cache (the file is read once first):

  (a) one --size file (default 4 GiB) into one CUDA uint8 tensor:
      memtier.read_into_tensor   MemTier's GPU target (GDS or pinned staged pipeline)
      torch.from_file + .cuda()  torch reads into pageable host memory, then copies
      numpy.fromfile + .cuda()   the same through numpy
  (b) a generated safetensors checkpoint (--ckpt-gb, default 2) to the GPU:
      memtier.safetensors.load_file(device="cuda")
      safetensors.torch.load_file(device="cuda")  (row skipped when safetensors is missing)

Every row's bytes are checked on the device against the first row's (torch.equal).
Columns: seconds (median of --runs), GB/s, and "vs memtier" = row seconds / MemTier
seconds, so above 1 means MemTier is faster.

    python examples/python/bench_gpu.py                 # 4 GiB file, 2 GB checkpoint
    python examples/python/bench_gpu.py --size 1G --ckpt-gb 0.5 --runs 3
    python examples/python/bench_gpu.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

GB = 1e9


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    return int(float(s[:-1]) * mult[s[-1]]) if s and s[-1] in mult else int(s)


def timed(fn, runs: int, sync) -> tuple:
    times, out = [], None
    for _ in range(runs):
        out = None
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def make_file(path: str, size: int) -> None:
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="4G", help="file bytes for (a) (K/M/G suffixes; default 4G)")
    ap.add_argument("--ckpt-gb", type=float, default=2.0, help="checkpoint size for (b), GB (0 skips)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", help="where the files are made (default: a temp dir, removed after)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: torch is not importable ({e})")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch.cuda is not available (no GPU or a CPU-only torch)")
        return 77
    import numpy as np

    import memtier
    import memtier.safetensors as mts

    dev = torch.device("cuda:0")
    sync = torch.cuda.synchronize
    size = parse_size(args.size)
    rows_a, rows_b = [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "bench_gpu.bin")
        make_file(path, size)
        warm(path)
        dst = torch.empty(size, dtype=torch.uint8, device=dev)

        def mt_read():
            memtier.read_into_tensor(path, 0, dst)
            return dst

        cases = [
            ("memtier.read_into_tensor", mt_read),
            ("torch.from_file + .cuda()",
             lambda: torch.from_file(path, shared=False, size=size, dtype=torch.uint8).to(dev)),
            ("numpy.fromfile + .cuda()",
             lambda: torch.from_numpy(np.fromfile(path, dtype=np.uint8)).to(dev)),
        ]
        ref = None
        for name, fn in cases:
            t, out = timed(fn, args.runs, sync)
            if ref is None:
                ref = out.clone()
            rows_a.append({"row": name, "s": t, "gb_per_s": size / t / GB,
                           "identical": bool(torch.equal(out, ref))})
            del out
        del dst, ref
        torch.cuda.empty_cache()

        if args.ckpt_gb > 0:
            ck = os.path.join(tmp, "ckpt.safetensors")
            n = max(1, int(args.ckpt_gb * GB // (64 << 20)))
            tensors = {f"layers.{i}.w": torch.randn(4096, 4096, dtype=torch.float32 if i % 2 else torch.bfloat16)
                       for i in range(n)}
            try:
                from safetensors.torch import load_file as st_load, save_file
            except ImportError:
                st_load = save_file = None
            if save_file is not None:
                save_file(tensors, ck)
            else:  # the format by hand: 8-byte length, JSON header, data
                mts_save(tensors, ck)
            del tensors
            warm(ck)
            nbytes = os.path.getsize(ck)
            cases = [("memtier.safetensors.load_file(cuda)", lambda: mts.load_file(ck, device="cuda"))]
            if st_load is not None:
                cases.append(("safetensors.torch.load_file(cuda)", lambda: st_load(ck, device="cuda")))
            ref = None
            for name, fn in cases:
                t, out = timed(fn, args.runs, sync)
                if ref is None:
                    ref = out
                same = list(out) == list(ref) and all(
                    torch.equal(out[k].view(torch.uint8), ref[k].view(torch.uint8)) for k in ref)
                rows_b.append({"row": name, "s": t, "gb_per_s": nbytes / t / GB, "identical": same})
                if out is not ref:
                    del out
            if st_load is None:
                rows_b.append({"row": "safetensors.torch.load_file(cuda)",
                               "error": "safetensors is not installed"})

    for rows in (rows_a, rows_b):
        base = rows[0]["s"] if rows and "s" in rows[0] else None
        for r in rows:
            if base and "s" in r:
                r["vs_memtier"] = r["s"] / base
    report = {"benchmark": "bench_gpu", "file_bytes": size, "device": torch.cuda.get_device_name(0),
              "gpu_info": memtier.gpu_info(), "file_to_gpu": rows_a, "checkpoint_to_gpu": rows_b,
              "stats": {k: v for k, v in memtier.stats().as_dict().items() if v}}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"bench_gpu: {report['device']}; {memtier.gpu_info().splitlines()[0]}")
        for title, rows in (("(a) file -> CUDA tensor", rows_a), ("(b) checkpoint -> CUDA", rows_b)):
            print(f"\n{title}")
            for r in rows:
                if "error" in r:
                    print(f"  {r['row']:38s} not run: {r['error']}")
                else:
                    print(f"  {r['row']:38s} {r['s']:7.3f} s {r['gb_per_s']:6.2f} GB/s "
                          f"vs memtier {r.get('vs_memtier', 0):5.2f}x  identical {r['identical']}")
    bad = [r["row"] for r in rows_a + rows_b if r.get("identical") is False]
    if bad:
        print("bytes differ: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


def mts_save(tensors, path: str) -> None:
    """Write tensors in the safetensors format (for machines without the package)."""
    import torch

    names = {torch.float32: "F32", torch.bfloat16: "BF16"}
    header, off, blobs = {}, 0, []
    for k, t in tensors.items():
        b = t.contiguous().view(torch.uint8).numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    sys.exit(main())
