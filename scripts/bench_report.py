#!/usr/bin/env python3
"""bench_report.py: run every MemTier benchmark of the issue-9 table, print one table of
ratios, write bench_report.json and bench_report.png.

    scripts/bench_report.sh [--quick] [--out DIR] [BUILD_DIR]     # the entry point
    python scripts/bench_report.py --build BUILD_DIR [--python PY] [--quick] [--out DIR]

What runs (each benchmark measures its baseline in the same run and checks the bytes
it read):
  bench_hot_path       cached 4 KiB memtier_read (strict, freshness=open,
                       READ_IMMUTABLE) vs the fstat+memcpy and memcpy floors and a C
                       pread loop; memtier_readv of 256 x 4 KiB, cached and cache off
  bench_large_read     --mode=all on a 1 GiB pattern file: warm and cold passes
                       (memtier, posix, direct, mmap, fio O_DIRECT qd16, fio buffered,
                       memtier_cached = DRAM cache hits, memcpy_floor and pread_threads
                       = the ceilings of a copy in memory and of a page-cache read) and
                       the relaunch (a second process loading the file after a first one)
  bench_hot.py         Context.read_into / readv vs os.preadv; DataLoader (0 workers)
                       MemTierDataset vs an os.pread + __getitems__ dataset
  bench_remote.py      (skipped with --no-remote) versitygw on loopback: an object, a
                       safetensors checkpoint and a DataLoader epoch over tar shards,
                       MemTier's first load vs the best S3 peer (boto3, s3torchconnector,
                       obstore, Run:ai), its disk-cache run vs a local file and its DRAM hit
                       on the remote object vs one on the local file (MB/s)
  bench_load_model.py  (skipped with --no-st; issue 12) a 2 GiB float32 checkpoint of
                       Linear layers written once into the temp dir, loaded into an
                       existing model (its memory touched) by memtier.safetensors.load_model
                       and by every installed peer (safetensors load_model, load_file +
                       load_state_dict, Run:ai streamer and fastsafetensors feeding the
                       model), warm (page cache holding the file) and cold (the file
                       dropped from the page cache, as drop_page_cache below), each run a
                       fresh interpreter; the peak RSS of MemTier's runs vs the model + 256 MiB
  bench_from_pretrained.py (skipped with --no-st) transformers from_pretrained of a
                       generated ~400 MB Llama model (5 shards), warm, with
                       MEMTIER_PATCH_SAFETENSORS (the patch on from import memtier) vs
                       without; the weights of every run must be bit-identical
Fallbacks, for a bench_large_read without those modes: fio buffered (libaio qd16) run
by this script, the DRAM-cache figure from bench_reuse, the relaunch measured with
Python child processes (see relaunch_fallback). Every row says where it came from.

Needs the built C benchmarks (bench_hot_path, bench_large_read, bench_reuse) in
--build, a Python with memtier, numpy and torch for bench_hot.py (--python; default:
this interpreter) and matplotlib in this interpreter for the plot (without it the PNG
is skipped and the report says so). fio is optional: without it the cold row compares
with the best of what ran and says fio was not installed.

Ratios are speed of MemTier / speed of the baseline (above 1: MemTier faster); for the
floor rows, floor time / MemTier time. Temporary inputs (a 256 MiB and a 1 GiB
experiment-pattern file, the DataLoader data: about 2 GB) go to a new temporary
directory that is removed at the end. Output: DIR/bench_report.json (rows, the raw JSON
of every benchmark, the commands) and DIR/bench_report.png (a bar per row, its target
marked); DIR defaults to bench_report/ in the repository.

Exit status: 0 when every benchmark ran and verified its bytes (a missed target is
reported, not fatal); 1 when a benchmark failed; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
GiB = 1 << 30

# (full, quick) settings
SETTINGS = {
    "hot_count": (131072, 32768),
    "hot_repeat": (5, 3),
    "large_repeat": (5, 2),
    "reuse_repeat": (3, 2),
    "fio_repeat": (3, 1),
    "load_model_repeat": (3, 2),  # warm runs per method (cold: one; Run:ai and fastsafetensors: one)
    "from_pretrained_repeat": (3, 2),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Scrub:
    """Replaces the temp dir, the repository and the home directory in strings."""

    def __init__(self, tmp: str, build: str) -> None:
        self.pairs = [(tmp, "<tmp>"), (build, "<build>"), (ROOT, "<repo>")]
        home = os.path.expanduser("~")
        if home and home != "/":
            self.pairs.append((home, "~"))

    def text(self, s: str) -> str:
        for a, b in self.pairs:
            s = s.replace(a, b)
        return s

    def obj(self, o: Any) -> Any:
        if isinstance(o, str):
            return self.text(o)
        if isinstance(o, dict):
            return {k: self.obj(v) for k, v in o.items()}
        if isinstance(o, list):
            return [self.obj(v) for v in o]
        return o


# ------------------------------------------------------------------ running children


class Runner:
    def __init__(self, tmp: str, scrub: Scrub) -> None:
        self.tmp = tmp
        self.scrub = scrub
        self.env = dict(os.environ, TMPDIR=tmp)  # the benchmarks' temp files go to tmp
        self.failures: List[str] = []
        self.commands: List[Dict[str, Any]] = []

    def run(self, what: str, cmd: Sequence[str], timeout: int = 900, want_json: bool = True) -> Optional[Any]:
        shown = " ".join("<script>" if "\n" in c else self.scrub.text(c) for c in cmd)
        log(f"bench_report: {what}: {shown}")
        t0 = time.monotonic()
        try:
            p = subprocess.run(list(cmd), capture_output=True, text=True, env=self.env, timeout=timeout,
                               cwd=self.tmp)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.failures.append(f"{what}: {self.scrub.text(str(e))}")
            self.commands.append({"what": what, "command": shown, "error": self.scrub.text(str(e))})
            return None
        dt = time.monotonic() - t0
        rec: Dict[str, Any] = {"what": what, "command": shown, "exit": p.returncode, "seconds": round(dt, 2)}
        self.commands.append(rec)
        if p.returncode != 0:
            tail = self.scrub.text((p.stderr or "")[-2000:] + (p.stdout or "")[-1000:])
            self.failures.append(f"{what}: exit {p.returncode}: {tail.strip()[-600:]}")
            log(f"bench_report: {what} FAILED (exit {p.returncode}):\n{tail}")
            # a benchmark that found wrong bytes still prints its JSON: keep it
        if not want_json:
            return p.stdout
        text = p.stdout or ""
        for start in (0, text.find("{")):  # fio may print a line before its JSON
            if start < 0:
                continue
            try:
                return json.loads(text[start:])
            except ValueError:
                pass
        lines = [ln for ln in text.strip().splitlines() if ln.startswith("{")]
        try:
            return json.loads(lines[-1]) if lines else None
        except ValueError:
            if p.returncode == 0:
                self.failures.append(f"{what}: its output is not JSON")
            return None


def help_text(exe: str) -> str:
    try:
        p = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
        return p.stdout + p.stderr
    except (OSError, subprocess.SubprocessError):
        return ""


# ------------------------------------------------------------------ page cache, fio, relaunch


def drop_page_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fsync(fd)
        except OSError:
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def fio_buffered(r: Runner, path: str, size: int, repeat: int) -> Dict[str, Any]:
    """fio buffered sequential read (libaio, qd16, 1 MiB), cold: the page cache dropped
    before every run (and --invalidate=1). GB/s = median of bw_bytes / 1e9."""
    exe = shutil.which("fio")
    if exe is None:
        return {"ran": False, "skipped": "fio: not installed"}
    gbps = []
    for _ in range(repeat):
        drop_page_cache(path)
        out = r.run("fio buffered, cold", ["fio", "--name=seq", "--filename=" + path.replace(":", "\\:"),
                                           "--rw=read", "--bs=1M", "--iodepth=16", "--ioengine=libaio",
                                           "--direct=0", "--invalidate=1", f"--size={size}",
                                           "--output-format=json"], want_json=True)
        try:
            bw = float(out["jobs"][0]["read"]["bw_bytes"])
        except (TypeError, KeyError, IndexError, ValueError):
            return {"ran": False, "skipped": "fio buffered: no bandwidth in its output"}
        gbps.append(bw / 1e9)
    return {"ran": True, "gbps": statistics.median(gbps), "samples_gbps": gbps}


CHILD_LOAD = r"""
import hashlib, json, os, sys, time
kind, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
import numpy as np
buf = np.empty(size, dtype=np.uint8)
buf.fill(0)  # page faults outside the clock
t0 = time.perf_counter()
if kind == "memtier":
    import memtier
    ctx = memtier.Context()
    ctx.read_into(path, 0, buf)
else:
    fd = os.open(path, os.O_RDONLY)
    mv = memoryview(buf)
    off = 0
    while off < size:
        n = os.preadv(fd, [mv[off:off + (1 << 20)]], off)
        if n <= 0:
            raise SystemExit("short read at %d" % off)
        off += n
    os.close(fd)
dt = time.perf_counter() - t0
print(json.dumps({"kind": kind, "seconds": dt, "sha1": hashlib.sha1(buf).hexdigest()}))
"""


def relaunch_fallback(r: Runner, py: str, path: str, size: int, rounds: int, want_sha1: str) -> Dict[str, Any]:
    """For memtier and for posix, per round: drop the file from the page cache, load
    the whole file in a first child process, then again in a second child (the
    relaunch). A child allocates and touches a buffer of the file's size, then times
    the load: for memtier ``import memtier`` + ``Context()`` (default settings) +
    ``read_into``, for posix an ``os.preadv`` loop of 1 MiB (interpreter start-up and
    page faults are outside the clock), and prints the sha1 of the buffer, which must
    be the file's. ratio = posix second-process seconds / memtier second-process
    seconds (medians over the rounds)."""
    res: Dict[str, Dict[str, List[float]]] = {"memtier": {"first": [], "second": []},
                                              "posix": {"first": [], "second": []}}
    bad = 0
    for rnd in range(rounds):
        for kind in ("memtier", "posix"):
            drop_page_cache(path)
            for which in ("first", "second"):
                out = r.run(f"relaunch {kind} {which} process (round {rnd + 1})",
                            [py, "-c", CHILD_LOAD, kind, path, str(size)])
                if not out:
                    return {"ran": False, "skipped": f"the {kind} child failed"}
                res[kind][which].append(out["seconds"])
                if out["sha1"] != want_sha1:
                    bad += 1
    med = {k: {w: statistics.median(v) for w, v in d.items()} for k, d in res.items()}
    return {"ran": True, "method": "measured by the report (bench_large_read has no relaunch): Python children",
            "seconds": res, "median_seconds": med, "bad": bad, "size": size}


def sha1_file(path: str) -> str:
    h = hashlib.sha1()
    with open(path, "rb", buffering=0) as f:
        b = bytearray(16 * MiB)
        mv = memoryview(b)
        while True:
            n = f.readinto(b)
            if not n:
                break
            h.update(mv[:n])
    return h.hexdigest()


# ------------------------------------------------------------------ rows


def row(key: str, name: str, source: str, memtier: Optional[float], base: Optional[float], unit: str,
        ratio: Optional[float], target: float, mlabel: str, blabel: str, note: str = "",
        available: bool = True) -> Dict[str, Any]:
    ok = available and ratio is not None
    return {"key": key, "row": name, "source": source, "unit": unit, "memtier": memtier, "baseline": base,
            "memtier_label": mlabel, "baseline_label": blabel, "ratio": ratio if ok else None,
            "target": target, "met": (ratio >= target) if ok else None, "available": ok, "note": note}


def na(key: str, name: str, source: str, target: float, why: str) -> Dict[str, Any]:
    return row(key, name, source, None, None, "", None, target, "", "", note=why, available=False)


def find_mode(large: Optional[Dict[str, Any]], page_cache: str, mode: str) -> Optional[Dict[str, Any]]:
    if not large:
        return None
    for p in large.get("passes", []):
        if p.get("page_cache") == page_cache:
            for m in p.get("modes", []):
                if m.get("mode") == mode and m.get("ran", True):
                    return m
    return None


def ceiling_note(key: str, r: Dict[str, Any], modes: Dict[str, Any]) -> str:
    """The same-run ceiling bench_hot_path measured beside a row, when it has one:
    a block cache's hit must load its block's address before it copies
    (memcpy+lookup), and a cache-off readv has two CPUs at most (pread 2thr)."""
    def ns(mode: str) -> Optional[float]:
        m = modes.get(mode)
        return m["ns_per_op"] if m and m.get("ns_per_op") else None
    if key in ("read_open_vs_memcpy", "read_ex_immutable_vs_memcpy"):
        lk = ns("memcpy_lookup")
        if lk:
            return (f"ceiling memcpy+lookup (source address loaded from a table of 8 B per block) {lk:.0f} ns: "
                    f"a hit can reach {r['base_ns'] / lk:.2f}x of the memcpy floor; memtier at "
                    f"{lk / r['memtier_ns']:.2f}x of the ceiling")
    if key == "readv_nocache_vs_pread":
        p2 = ns("pread_2thread")
        if p2:
            return (f"ceiling: a C pread loop on 2 threads {p2:.0f} ns = {r['base_ns'] / p2:.2f}x the 1-thread loop; "
                    f"memtier at {p2 / r['memtier_ns']:.2f}x of it")
    return ""


def hot_rows(hot: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    src = "bench_hot_path"
    names = {
        "read_strict_vs_fstat_memcpy": "cached 4 KiB memtier_read, strict (vs fstat+memcpy floor)",
        "read_open_vs_memcpy": "cached 4 KiB memtier_read, freshness=open (vs memcpy floor)",
        "read_ex_immutable_vs_memcpy": "cached 4 KiB memtier_read_ex(IMMUTABLE) (vs memcpy floor)",
        "readv_cached_vs_pread": "memtier_readv 256 x 4 KiB, all cached, vs C pread loop",
        "readv_nocache_vs_pread": "memtier_readv 256 x 4 KiB, cache off, page cache warm, vs C pread loop",
    }
    targets = {"read_strict_vs_fstat_memcpy": 0.9, "read_open_vs_memcpy": 0.9,
               "read_ex_immutable_vs_memcpy": 0.9, "readv_cached_vs_pread": 1.7,
               "readv_nocache_vs_pread": 1.3}
    if not hot or "ratios" not in hot:
        return [na(k, n, src, targets[k], "bench_hot_path did not run") for k, n in names.items()]
    out = []
    modes = hot["modes"]
    pread = modes["pread"]["ns_per_op"]
    for k, n in names.items():
        r = hot["ratios"].get(k)
        if r is None:
            out.append(na(k, n, src, targets[k], "not in bench_hot_path's output"))
            continue
        base_label = {"fstat_memcpy": "fstat+memcpy floor", "memcpy": "memcpy floor", "pread": "C pread loop"}[
            r["base_mode"]]
        note = ""
        if r["kind"] == "floor":
            note = (f"same ranges: pread {pread:.0f} ns, so memtier/pread = "
                    f"{pread / r['memtier_ns']:.2f}x")
        note = "; ".join(x for x in (note, ceiling_note(k, r, modes)) if x)
        out.append(row(k, n, src, r["memtier_ns"], r["base_ns"], "ns/read", r["ratio"], targets[k],
                       "memtier", base_label, note))
    return out


def py_rows(pyhot: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    src = "bench_hot.py"
    want = [("read_into_strict_vs_preadv", 0.8), ("read_into_open_vs_preadv", 1.2),
            ("read_into_immutable_call_vs_preadv", 1.2), ("readv_256_vs_preadv_loop", 3.0),
            ("dataloader_0_workers", 1.5)]
    names = {"read_into_strict_vs_preadv": "Python Context.read_into 4 KiB cached, strict, vs os.preadv",
             "read_into_open_vs_preadv": "Python Context.read_into 4 KiB cached, freshness=open, vs os.preadv",
             "read_into_immutable_call_vs_preadv":
                 "Python Context.read_into(immutable=True) 4 KiB cached vs os.preadv",
             "readv_256_vs_preadv_loop": "Python Context.readv 256 x 4 KiB cached vs os.preadv loop",
             "dataloader_0_workers": "DataLoader 0 workers, 20k samples 4-64 KiB, vs os.pread+__getitems__"}
    if not pyhot or "rows" not in pyhot:
        return [na(k, names[k], src, t, "bench_hot.py did not run") for k, t in want]
    by = {r["key"]: r for r in pyhot["rows"]}
    out = []
    for k, t in want:
        r = by.get(k)
        if r is None or not r.get("available"):
            out.append(na(k, names[k], src, t, (r or {}).get("note", "n/a (not available)")))
            continue
        blabel = "os.preadv" if k.startswith("read_into") else (
            "os.preadv loop" if k.startswith("readv") else "os.pread+__getitems__ Dataset")
        note = ""
        c = by.get("readv_256_cffi_vs_preadv_loop")
        if k == "readv_256_vs_preadv_loop" and c and c.get("available"):
            # the C call the wrapper makes, timed in the same rounds: what the package can reach
            note = (f"ceiling: the same memtier_readv call through cffi, iovecs prebuilt, {c['memtier']:.0f} ns "
                    f"= {c['ratio']:.2f}x the os.preadv loop; Context.readv at {c['memtier'] / r['memtier']:.2f}x "
                    f"of it")
        out.append(row(k, names[k], src, r["memtier"], r["base"], r["unit"], r["ratio"], t,
                       "MemTierDataset" if k.startswith("dataloader") else "memtier", blabel, note))
    return out


def large_rows(large: Optional[Dict[str, Any]], cache: Dict[str, Any], fio_buf: Dict[str, Any],
               relaunch: Dict[str, Any], size: int) -> List[Dict[str, Any]]:
    gib = f"{size / GiB:g} GiB" if size >= GiB else f"{size // MiB} MiB"
    out = []
    # DRAM cache vs cache off
    k, n = "large_cache_vs_nocache", f"{gib} from the DRAM cache vs cache off (page cache warm)"
    floor = find_mode(large, "warm", "memcpy_floor")
    floor_note = ""
    if floor is not None and floor.get("gbps"):
        # the ceiling of any copy of these bytes in memory, measured in this run
        fg = floor["gbps"]
        floor_note = f"memcpy floor (io_threads threads, pre-faulted buffers) {fg:.2f} GB/s"
    if cache.get("ran"):
        note = cache.get("note", "")
        if floor_note:
            note = "; ".join(x for x in (note, f"{floor_note}: DRAM cache at {cache['cache_gbps'] / fg:.2f}x of it, "
                                              f"cache off at {cache['nocache_gbps'] / fg:.2f}x") if x)
        out.append(row(k, n, cache["source"], cache["cache_gbps"], cache["nocache_gbps"], "GB/s",
                       cache["cache_gbps"] / cache["nocache_gbps"], 1.2, "DRAM cache", "memtier cache off",
                       note))
    else:
        out.append(na(k, n, "bench_large_read", 1.2, cache.get("skipped", "did not run")))
    # cold vs the best peer
    k, n = "large_cold_vs_best", f"{gib} cold vs best of posix, mmap, fio O_DIRECT qd16, fio buffered"
    mt = find_mode(large, "cold", "memtier")
    if mt is None:
        out.append(na(k, n, "bench_large_read", 1.0, "bench_large_read (cold) did not run"))
    else:
        peers: Dict[str, float] = {}
        missing: List[str] = []
        for mode, label in (("posix", "posix loop"), ("mmap", "mmap"), ("fio", "fio O_DIRECT qd16")):
            m = find_mode(large, "cold", mode)
            if m is not None:
                peers[label] = m["gbps"]
            else:
                missing.append(label)
        fb = find_mode(large, "cold", "fio_buffered")
        if fb is not None:
            peers["fio buffered"] = fb["gbps"]
        elif fio_buf.get("ran"):
            peers["fio buffered (libaio qd16, run by the report)"] = fio_buf["gbps"]
        else:
            missing.append("fio buffered")
        best = max(peers, key=lambda x: peers[x])
        note = "cold GB/s: " + ", ".join(f"{p} {v:.2f}" for p, v in peers.items())
        d = find_mode(large, "cold", "direct")
        if d is not None:
            note += f" (not in the row's list: single-thread O_DIRECT loop {d['gbps']:.2f})"
        if missing:
            why = "fio was not installed" if shutil.which("fio") is None else "did not run"
            note += f"; missing: {', '.join(missing)} ({why})"
        out.append(row(k, n, "bench_large_read", mt["gbps"], peers[best], "GB/s", mt["gbps"] / peers[best], 1.0,
                       "memtier", f"best: {best}", note))
    # the ceiling of a read through the page cache, measured in this run: the
    # kernel's copy on io_threads threads (bench_large_read pread_threads)
    preads = find_mode(large, "warm", "pread_threads")
    pwarm = find_mode(large, "warm", "posix")
    pc_note = ""
    if preads is not None and pwarm is not None:
        pc_note = (f"page-cache ceiling (a 1 MiB pread loop on io_threads threads, a descriptor each) "
                        f"{preads['gbps']:.2f} GB/s = {preads['gbps'] / pwarm['gbps']:.2f}x the posix loop")
    # warm vs posix
    k, n = "large_warm_vs_posix", f"{gib} warm vs posix loop"
    mt, px = find_mode(large, "warm", "memtier"), find_mode(large, "warm", "posix")
    if mt is None or px is None:
        out.append(na(k, n, "bench_large_read", 1.8, "bench_large_read (warm) did not run"))
    else:
        note = "target: keep >= 1.8x"
        if floor_note:
            note += f"; {floor_note}: memtier at {mt['gbps'] / fg:.2f}x of it, posix at {px['gbps'] / fg:.2f}x"
        if pc_note:
            note += f"; {pc_note}: memtier at {mt['gbps'] / preads['gbps']:.2f}x of it"
        out.append(row(k, n, "bench_large_read", mt["gbps"], px["gbps"], "GB/s", mt["gbps"] / px["gbps"], 1.8,
                       "memtier", "posix loop", note))
    # relaunch
    k, n = "relaunch", f"second process loading the same {gib} (relaunch) vs posix in a second process"
    if relaunch.get("ran"):
        med = relaunch["median_seconds"]
        m2, p2 = med["memtier"]["second"], med["posix"]["second"]
        note = (f"{relaunch['method']}; first process: memtier {size / med['memtier']['first'] / 1e9:.2f} GB/s, "
                f"posix {size / med['posix']['first'] / 1e9:.2f} GB/s")
        if pc_note:  # a second process reads the page cache too
            note += f"; warm pass {pc_note}"
        out.append(row(k, n, relaunch.get("source", "bench_report"), size / m2 / 1e9, size / p2 / 1e9, "GB/s",
                       p2 / m2, 1.5, "memtier 2nd process", "posix 2nd process", note))
    else:
        out.append(na(k, n, "bench_report", 1.5, relaunch.get("skipped", "did not run")))
    return out


def remote_rows(remote: Optional[Dict[str, Any]], skipped: str = "") -> List[Dict[str, Any]]:
    """The rows of examples/python/bench_remote.py (its "rows": key, row, memtier, base,
    ratio, target, baseline_label, available, note), as they are; n/a when it did not run."""
    src = "bench_remote.py"
    want = [("object", "object into host memory"), ("ckpt", "safetensors checkpoint load_file"),
            ("dataset_w0", "DataLoader epoch over tar shards, 0 workers"),
            ("dataset_w2", "DataLoader epoch over tar shards, 2 workers")]
    kinds = [("first_vs_best_peer", "first load vs best peer", 1.3),
             ("disk_vs_local", "2nd process (disk cache) vs local file", 0.9),
             ("dram_vs_local_dram", "DRAM hit remote vs DRAM hit local", 0.9)]
    by = {r["key"]: r for r in (remote or {}).get("rows", [])}
    out = []
    for case, title in want:
        for kind, what, target in kinds:
            key = f"remote_{case}_{kind}"
            name = f"S3 (versitygw, loopback) {title}: {what}"
            r = by.get(key)
            if r is None:
                if remote is None or by:
                    out.append(na(key, name, src, target, skipped or "bench_remote.py did not run"))
                continue
            if not r.get("available"):
                out.append(na(key, name, src, target, r.get("note") or "n/a"))
                continue
            out.append(row(key, name, src, r["memtier"], r["base"], "MB/s", r["ratio"], r["target"], "memtier",
                           r.get("baseline_label", ""), r.get("note", "")))
    return out


def st_rows(lm: Optional[Dict[str, Any]], fp: Optional[Dict[str, Any]], skipped: str = "") -> List[Dict[str, Any]]:
    """The issue-12 rows: examples/python/bench_load_model.py --json (its "tables" per
    page-cache state: per method the median seconds, vs_best_peer, peak_extra and
    peak_model) and examples/python/bench_from_pretrained.py --json (its "rows", as
    they are); n/a when they did not run."""
    out: List[Dict[str, Any]] = []
    src = "bench_load_model.py"
    why = skipped or "bench_load_model.py did not run"
    size = (lm or {}).get("size", 0)
    gib = f"{size / GiB:.1f} GiB" if size else "2.0 GiB"
    tables = (lm or {}).get("tables", {})
    for cache, target in (("warm", 1.5), ("cold", 1.0)):
        k = f"st_load_model_{cache}_vs_best"
        n = f"load_model {gib} into an existing model, {cache}, vs best of the installed peers"
        t = tables.get(cache)
        if not t or "memtier" not in t:
            out.append(na(k, n, src, target, why))
            continue
        peers = {key: v for key, v in t.items() if key != "memtier" and not key.startswith("ceil_")}
        best = min(peers, key=lambda x: peers[x]["median_s"])
        m = t["memtier"]
        runs = m.get("runs", 0)
        note = ((f"medians of {runs} fresh-interpreter runs" if runs != 1 else "one fresh-interpreter run") +
                ", GB/s: " +
                ", ".join(f"{v['label']} {size / v['median_s'] / 1e9:.2f}" +
                          (f" ({v.get('runs')} run{'s' if v.get('runs') != 1 else ''})"
                           if v.get("runs") != runs else "") for v in peers.values()) +
                "; peak RSS above the built model, MiB: " +
                ", ".join(f"{'memtier' if key == 'memtier' else v['label']} {max(0, v['peak_extra']) / MiB:.0f}"
                          for key, v in t.items() if not key.startswith("ceil_")))
        ceils = {key: v for key, v in t.items() if key.startswith("ceil_") and key != "ceil_fresh"}
        if ceils:
            # what copying these bytes into the model costs with no loader at all
            top = min(v["median_s"] for v in ceils.values())
            note += ("; same-run ceilings, GB/s (medians): " +
                     ", ".join(f"{v['label'].removeprefix('ceiling: ')} {size / v['median_s'] / 1e9:.2f}"
                               for v in ceils.values()) +
                     f"; memtier at {top / m['median_s']:.2f}x the fastest ceiling's speed")
        if lm.get("absent"):
            note += f"; not installed: {', '.join(lm['absent'])}"
        out.append(row(k, n, src, size / m["median_s"] / 1e9, size / peers[best]["median_s"] / 1e9, "GB/s",
                       peers[best]["median_s"] / m["median_s"], target, "memtier load_model",
                       f"best: {peers[best]['label']}", note))
    k, n = "st_load_model_peak_rss", f"load_model {gib} peak RSS: the model's size + 256 MiB vs MemTier's peak"
    ms = [t["memtier"] for t in tables.values() if "memtier" in t]
    if not ms or not lm.get("model_bytes"):
        out.append(na(k, n, src, 1.0, why))
    else:
        peak = max(m["peak_model"] for m in ms)
        allowed = lm["model_bytes"] + 256 * MiB
        peers = {}  # the largest peak of each peer over the page-cache states
        for t in tables.values():
            for key, v in t.items():
                if key != "memtier" and not key.startswith("ceil_"):
                    peers[v["label"]] = max(peers.get(v["label"], 0), v["peak_model"])
        note = ("peak = ru_maxrss minus the RSS before the model was built (interpreter and torch "
                "imported; MemTier's library, context and reads counted), the largest of the warm and cold "
                "runs; peers (same measure): " + ", ".join(f"{k} {v / MiB:.0f} MiB" for k, v in peers.items()))
        out.append(row(k, n, src, peak / MiB, allowed / MiB, "MiB", allowed / peak, 1.0, "memtier peak",
                       "model + 256 MiB", note))
    src = "bench_from_pretrained.py"
    why = skipped or "bench_from_pretrained.py did not run"
    by = {r["key"]: r for r in (fp or {}).get("rows", [])}
    for key, name in (("from_pretrained_float32_warm",
                       "from_pretrained 400 MB, warm, patch_safetensors() vs without"),
                      ("from_pretrained_ready_float32_warm",
                       "from_pretrained 400 MB + first touch, warm, patch_safetensors() vs without"),
                      ("from_pretrained_copy_float32_warm",
                       "from_pretrained 400 MB, warm, patch (views=False: owned tensors) vs without"),
                      ("from_pretrained_copy_ready_float32_warm",
                       "from_pretrained 400 MB + first touch, warm, patch (views=False) vs without")):
        r = by.get(key)
        if r is None or not r.get("available"):
            out.append(na(key, name, src, 1.0, (r or {}).get("note") or why))
            continue
        note = r.get("note", "") + ("; weights bit-identical in every run" if fp.get("bit_identical") else
                                    "; WEIGHTS DIFFER between runs")
        out.append(row(key, name, src, r["memtier"], r["base"], "s", r["ratio"], r.get("target", 1.0),
                       "patched", r.get("baseline_label", "without the patch"), note))
    return out


# ------------------------------------------------------------------ output


def fmt_val(v: Optional[float], unit: str) -> str:
    if v is None:
        return "-"
    if unit == "ns/read":
        return f"{v:.0f} ns"
    if unit == "GB/s":
        return f"{v:.2f} GB/s"
    if unit == "samples/s":
        return f"{v:.0f} samp/s"
    if unit == "MB/s":
        return f"{v:.0f} MB/s"
    if unit == "MiB":
        return f"{v:.0f} MiB"
    if unit == "s":
        return f"{v:.3f} s"
    return f"{v:.3g}"


def text_table(rows: List[Dict[str, Any]]) -> str:
    head = ["#", "benchmark", "MemTier", "baseline", "ratio", "target", "met?"]
    cells = [head]
    for i, r in enumerate(rows, 1):
        if not r["available"]:
            cells.append([str(i), r["row"], "-", "-", "n/a", f">= {r['target']}x", "n/a"])
            continue
        cells.append([str(i), r["row"], fmt_val(r["memtier"], r["unit"]),
                      f"{fmt_val(r['baseline'], r['unit'])} ({r['baseline_label']})", f"{r['ratio']:.2f}x",
                      f">= {r['target']}x", "met" if r["met"] else "MISSED"])
    w = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = []
    for j, c in enumerate(cells):
        lines.append("  ".join(x.ljust(w[i]) if i in (1, 3) else x.rjust(w[i]) if i != 6 else x
                               for i, x in enumerate(c)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * x for x in w))
    return "\n".join(lines)


def notes_text(rows: List[Dict[str, Any]]) -> str:
    out = []
    for i, r in enumerate(rows, 1):
        if r.get("note"):
            out.append(f"  {i}. {r['note']}")
    return "\n".join(out)


def plot(rows: List[Dict[str, Any]], path: str, title: str) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"matplotlib is not importable ({e})"
    n = len(rows)
    fig, ax = plt.subplots(figsize=(11, 0.5 * n + 2.2))
    ys = list(range(n))[::-1]
    top = max([r["ratio"] or 0 for r in rows] + [r["target"] for r in rows] + [1.0]) * 1.25
    for y, r in zip(ys, rows):
        if r["available"]:
            color = "#2e8b57" if r["met"] else "#c0392b"
            ax.barh(y, r["ratio"], color=color, height=0.6)
            x = r["ratio"] + top * 0.012
            if r["ratio"] - top * 0.01 <= r["target"] <= r["ratio"] + top * 0.09:
                x = r["target"] + top * 0.012  # the label would sit on the target mark
            ax.text(x, y, f"{r['ratio']:.2f}x", va="center", fontsize=8)
        else:
            ax.barh(y, top * 0.02, color="#bbbbbb", height=0.6)
            ax.text(top * 0.03, y, "n/a", va="center", fontsize=8, color="#666666")
        ax.plot([r["target"], r["target"]], [y - 0.42, y + 0.42], color="black", linewidth=2)
    ax.axvline(1.0, color="#888888", linestyle=":", linewidth=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{i}. {r['row']}" for i, r in enumerate(rows, 1)], fontsize=8)
    ax.set_xlim(0, top)
    ax.set_xlabel("ratio: speed of MemTier / speed of the baseline (floor rows: floor time / MemTier time)")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color="#2e8b57", label="target met"), Patch(color="#c0392b", label="target missed"),
                       Line2D([0], [0], color="black", linewidth=2, label="target")],
              loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=3, fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")  # the title and x label extend past the axes
    plt.close(fig)
    return None


# ------------------------------------------------------------------ main


def main() -> int:
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(prog="bench_report.py", description=doc.split("\n")[0],
                                 epilog="\n".join(doc.split("\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="the CMake build directory holding the C benchmarks")
    ap.add_argument("--python", default=sys.executable,
                    help="the Python that runs bench_hot.py and the relaunch children (default: this one)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench_report"),
                    help="output directory (default: bench_report/ in the repository); made if missing")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (about 1-2 minutes instead of 2-4)")
    ap.add_argument("--no-remote", action="store_true",
                    help="skip bench_remote.py (the S3 rows; it starts versitygw, about 3 minutes)")
    ap.add_argument("--no-st", action="store_true",
                    help="skip bench_load_model.py and bench_from_pretrained.py (the issue-12 rows: a 2 GiB "
                         "checkpoint and a 400 MB transformers model, about 5-7 minutes on a loaded 2-core VM)")
    ap.add_argument("--large-size", type=int, default=GiB,
                    help="bytes of the large-read file (default 1 GiB; 64 MiB..16 GiB, a multiple of 1 MiB)")
    a = ap.parse_args()
    q = 1 if a.quick else 0
    cfg = {k: v[q] for k, v in SETTINGS.items()}
    build = os.path.abspath(a.build)
    exes = {n: os.path.join(build, n) for n in ("bench_hot_path", "bench_large_read", "bench_reuse")}
    for n, p in exes.items():
        if not os.access(p, os.X_OK):
            ap.error(f"--build {a.build}: {n} is missing (build first: scripts/bench_report.sh builds)")
    if shutil.which(a.python) is None and not os.access(a.python, os.X_OK):
        ap.error(f"--python {a.python}: not an executable")
    if not (64 * MiB <= a.large_size <= 16 * GiB) or a.large_size % MiB:
        ap.error("--large-size must be 64 MiB..16 GiB and a multiple of 1 MiB")
    out_dir = os.path.abspath(a.out)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        ap.error(f"--out {a.out}: exists and is not a directory")
    size = a.large_size
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if 2 * size + GiB > phys:
        ap.error(f"--large-size={size}: the result buffer and the DRAM cache of it do not fit in memory")

    tmp = tempfile.mkdtemp(prefix="memtier_bench_report_")
    # SIGTERM/SIGHUP (timeout, a closed terminal) unwind like Ctrl-C, so the
    # finally below removes the inputs and subprocess.run kills the child.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    need = size + 256 * MiB + 800 * MiB + 256 * MiB
    if not a.no_st:
        need = max(need, 2 * GiB + 600 * MiB)  # the 2 GiB checkpoint and the ~400 MB model (after large.bin)
    if shutil.disk_usage(tmp).free < need * 1.1:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"bench_report: not enough free space in the temp dir for {need} bytes of inputs", file=sys.stderr)
        return 2
    scrub = Scrub(tmp, build)
    r = Runner(tmp, scrub)
    t_start = time.monotonic()
    load_start = os.getloadavg()
    try:
        # 1. the C hot path
        hot = r.run("bench_hot_path", [exes["bench_hot_path"], "--json", f"--count={cfg['hot_count']}",
                                       f"--repeat={cfg['hot_repeat']}"])
        # 2. large reads, warm and cold, on one pattern file
        big = os.path.join(tmp, "large.bin")
        lhelp = help_text(exes["bench_large_read"])
        large = r.run("bench_large_read warm+cold",
                      [exes["bench_large_read"], f"--file={big}", f"--size={size}", "--mode=all",
                       f"--repeat={cfg['large_repeat']}", "--json"])
        fio_buf: Dict[str, Any] = {"ran": False, "skipped": "bench_large_read measured it"}
        if find_mode(large, "cold", "fio_buffered") is None and os.path.exists(big):
            fio_buf = fio_buffered(r, big, size, cfg["fio_repeat"])
        # DRAM cache vs cache off: bench_large_read's memtier_cached mode (warm pass,
        # beside its memtier row) when it has one
        cache: Dict[str, Any] = {"ran": False}
        cm, nc = find_mode(large, "warm", "memtier_cached"), find_mode(large, "warm", "memtier")
        if cm and nc:
            cache = {"ran": True, "source": "bench_large_read", "cache_gbps": cm["gbps"], "nocache_gbps": nc["gbps"]}
        else:
            # Fallback: bench_reuse with one read of the whole file (pass 2 from the DRAM
            # cache) beside bench_large_read's warm memtier row (cache off), both in
            # this report run with the page cache warm.
            ru = r.run("bench_reuse (one whole-file read)", [exes["bench_reuse"], big, f"--chunk={size}",
                                                             f"--repeat={cfg['reuse_repeat']}", "--json"])
            p2 = None
            for m in (ru or {}).get("modes", []):
                if m.get("mode") == "pass2_dram_cache":
                    p2 = m
            if p2 and nc and (ru or {}).get("pass2_all_from_cache", False):
                cache = {"ran": True, "source": "bench_reuse + bench_large_read", "cache_gbps": p2["gbps"],
                         "nocache_gbps": nc["gbps"],
                         "note": "bench_large_read has no memtier_cached mode: DRAM-cache figure from "
                                 "bench_reuse (pass 2, one read of the whole file), cache-off figure from "
                                 "bench_large_read warm memtier, both in this report run",
                         "raw": ru}
            else:
                cache = {"ran": False, "skipped": "bench_reuse did not run or missed the cache"}
        # relaunch: bench_large_read's own (part of --mode=all) when it has one
        relaunch = relaunch_from_bench(large, size) if "--relaunch" in lhelp else {"ran": False}
        if relaunch.get("ran") and relaunch.get("checksums_agree") is False:
            r.failures.append("bench_large_read relaunch: the children's checksums differ")
        if not relaunch.get("ran") and not os.path.exists(big):
            # bench_large_read failed before it wrote the file (its failure is
            # already in r.failures): nothing to relaunch on.
            relaunch = {"ran": False, "skipped": "bench_large_read did not write the pattern file"}
        elif not relaunch.get("ran"):
            want = sha1_file(big)
            relaunch = relaunch_fallback(r, a.python, big, size, cfg["large_repeat"], want)
            relaunch["source"] = "bench_report (child processes)"
            if relaunch.get("bad"):
                r.failures.append(f"relaunch: {relaunch['bad']} child loads returned wrong bytes")
        try:
            os.unlink(big)
        except OSError:
            pass
        # 3. Python
        pycmd = [a.python, os.path.join(ROOT, "examples", "python", "bench_hot.py"), "--json"]
        if a.quick:
            pycmd.append("--quick")
        pyhot = r.run("bench_hot.py", pycmd)
        # 4. remote objects (S3 on loopback)
        remote: Optional[Dict[str, Any]] = None
        if not a.no_remote:
            rcmd = [a.python, os.path.join(ROOT, "examples", "python", "bench_remote.py"), "--json"]
            if a.quick:
                rcmd.append("--quick")
            remote = r.run("bench_remote.py", rcmd, timeout=1800)
        # 5. issue 12: load_model into an existing model, from_pretrained under the patch
        lm: Optional[Dict[str, Any]] = None
        fp: Optional[Dict[str, Any]] = None
        if not a.no_st:
            lm = r.run("bench_load_model.py", [a.python, os.path.join(ROOT, "examples", "python", "bench_load_model.py"),
                                               "--json", "--size-mb=2048", f"--repeat={cfg['load_model_repeat']}",
                                               "--cold-repeat=1", "--slow-repeat=1", "--ceilings=memcpy,ppread",
                                               f"--dir={tmp}"], timeout=1800)
            fp = r.run("bench_from_pretrained.py",
                       [a.python, os.path.join(ROOT, "examples", "python", "bench_from_pretrained.py"), "--json",
                        f"--repeat={cfg['from_pretrained_repeat']}"],
                       timeout=1800)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - t_start
    load_end = os.getloadavg()

    rows = hot_rows(hot) + py_rows(pyhot) + large_rows(large, cache, fio_buf, relaunch, size)
    rows += remote_rows(remote, "skipped (--no-remote)" if a.no_remote else "")
    rows += st_rows(lm, fp, "skipped (--no-st)" if a.no_st else "")
    for name, res in (("bench_hot_path", hot), ("bench_large_read", large), ("bench_hot.py", pyhot),
                      ("bench_remote.py", remote), ("bench_from_pretrained.py", fp)):
        if res is not None and res.get("ok") is False:
            r.failures.append(f"{name}: reported ok=false (wrong bytes or cache misses)")
    version = (hot or {}).get("memtier_version") or (large or {}).get("memtier_version")
    title = (f"MemTier {version or '?'} benchmark report{' (--quick)' if a.quick else ''}: "
             f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}")
    os.makedirs(out_dir, exist_ok=True)
    jpath, ppath = os.path.join(out_dir, "bench_report.json"), os.path.join(out_dir, "bench_report.png")
    plot_err = plot(rows, ppath, title)
    report = {
        "title": title, "quick": a.quick, "seconds": round(elapsed, 1), "settings": cfg, "large_size": size,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpus": os.cpu_count(),
        "machine": {"system": platform.system(), "release": platform.release(), "arch": platform.machine(),
                    "memory_bytes": phys, "fio": shutil.which("fio") is not None,
                    "load_average_1m_start": load_start[0], "load_average_1m_end": load_end[0]},
        "ratio": "speed of MemTier / speed of the baseline (above 1: MemTier faster); "
                 "floor rows: floor time / MemTier time",
        "rows": rows, "failures": r.failures, "commands": r.commands,
        "raw": {"bench_hot_path": hot, "bench_large_read": large, "fio_buffered": fio_buf,
                "cache": cache, "relaunch": relaunch, "bench_hot_py": pyhot, "bench_remote_py": remote,
                "bench_load_model_py": lm, "bench_from_pretrained_py": fp},
        "plot": None if plot_err else "bench_report.png",
    }
    with open(jpath, "w") as f:
        json.dump(scrub.obj(report), f, indent=1)
        f.write("\n")

    print(title)
    print(f"ratio = speed of MemTier / speed of the baseline (above 1: MemTier faster); floor rows: floor time "
          f"/ MemTier time. Every baseline was measured in this run ({elapsed:.0f} s).\n")
    print(text_table(rows))
    notes = notes_text(rows)
    if notes:
        print("\nnotes:\n" + notes)
    if hot and "modes" in hot:
        m = hot["modes"]
        print(f"\nhot-path floors measured in this run (random 4 KiB over {hot['size'] // MiB} MiB): "
              f"fstat+memcpy {m['fstat_memcpy']['ns_per_op']:.0f} ns, memcpy {m['memcpy']['ns_per_op']:.0f} ns, "
              f"C pread {m['pread']['ns_per_op']:.0f} ns")
    cpus = os.cpu_count() or 1
    print(f"\nload average (1 min) before the first benchmark: {load_start[0]:.2f} on {cpus} CPUs"
          + (" (other work was running: the figures are noisier than on an idle machine)"
             if load_start[0] > 0.25 * cpus + 0.5 else ""))
    met = sum(1 for x in rows if x["met"])
    avail = sum(1 for x in rows if x["available"])
    print(f"\ntargets met: {met} of {avail} measured rows ({len(rows) - avail} n/a)")
    # the directory as the user gave it (or bench_report/ relative to here): never a
    # machine-specific absolute path the user did not type
    rel = os.path.relpath(out_dir)
    shown = rel if not rel.startswith("..") else a.out
    print(f"wrote {os.path.join(shown, 'bench_report.json')}"
          + (f" and {os.path.join(shown, 'bench_report.png')}" if not plot_err else f" (no plot: {plot_err})"))
    if r.failures:
        print("\nFAILURES:\n" + "\n".join("  " + scrub.text(x) for x in r.failures))
        return 1
    return 0


def relaunch_from_bench(large: Optional[Dict[str, Any]], size: int) -> Dict[str, Any]:
    """The relaunch of bench_large_read (part of --mode=all): per round the file is
    dropped from the page cache, then two C child processes load it through MemTier
    (memtier_init defaults), then, dropped again, two with the posix loop; medians of
    the first and second process of each kind."""
    obj = (large or {}).get("relaunch")
    if not obj or not obj.get("ran"):
        return {"ran": False, "skipped": (obj or {}).get("skipped", "bench_large_read measured no relaunch")}
    try:
        med = {k: {"first": float(obj[k]["first_seconds"]), "second": float(obj[k]["second_seconds"])}
               for k in ("memtier", "posix")}
    except (TypeError, KeyError, ValueError):
        return {"ran": False, "skipped": "bench_large_read's relaunch output was not understood"}
    return {"ran": True, "method": "bench_large_read relaunch (C child processes)", "median_seconds": med,
            "rounds": obj.get("rounds"), "checksums_agree": obj.get("checksums_agree"),
            "source": "bench_large_read"}


if __name__ == "__main__":
    sys.exit(main())
