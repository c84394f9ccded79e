"""Load a checkpoint into an existing torch model: MemTier load_model vs its peers (issue 12).

    python examples/python/bench_load_model.py [--size-mb 2048] [--repeat 3] [--cold-repeat N] [--cache warm,cold]
                                               [--dir DIR] [--no-ceiling | --ceilings LIST] [--json]
                                               [--methods memtier,st_load_model,...]

Writes a model of Linear layers (float32, about --size-mb) with
``safetensors.torch.save_model`` into a temporary folder (or DIR). Each run is
a fresh interpreter (so its peak RSS is its own) that builds the model (its
memory allocated and touched, as a model that exists is) and then times one
method loading the file into it:

* ``memtier.safetensors.load_model``     (bytes straight into the model's storage)
* ``safetensors.torch.load_model``       (the reference)
* ``safetensors.torch.load_file`` + ``model.load_state_dict``
* Run:ai's ``SafetensorsStreamer`` feeding the model (each streamed tensor
  copied into its parameter as it arrives, which is what ``load_state_dict``
  does with it; the streamer reuses its buffer), when runai-model-streamer is
  installed
* fastsafetensors (``SafeTensorsFileLoader`` on the CPU, its tensors copied
  into the model), when it is installed

(--methods picks some of them by key: memtier, st_load_model, st_load_file,
runai, fastsafetensors; the ratio is then against the best peer run)

and, unless --no-ceiling (or only those --ceilings names), ceilings in the same runs:

* ``ceiling: preadv into the parameters``: one ``os.preadv`` per tensor from
  the file into its parameter's memory (the kernel's copy out of the page
  cache, one thread, no loader);
* ``ceiling: preadv into the parameters, one thread per core`` (warm only):
  the same preads spread over ``os.cpu_count()`` threads, the page cache's
  copy with every core;
* ``ceiling: memcpy into the parameters`` (warm only): ``copy_`` of the
  checkpoint's bytes, already in memory, into the parameters: what filling
  touched memory costs with no file at all;
* ``(memcpy into fresh 4 KiB pages)`` (warm only): the same bytes copied
  into a new allocation, the floor of any loader that returns new tensors
  (``load_file``, and ``from_pretrained`` under ``patch_safetensors()``).

--cache warm reads the file once before each run so the page cache holds it;
cold drops it from the page cache (fsync, then
``posix_fadvise(POSIX_FADV_DONTNEED)``) in the child before the clock starts.
The methods alternate within each repeat. Prints per cache state and method
the median and best wall time of --repeat runs, GB/s (of the best), the
ratio best peer time / this time (medians), and the peak RSS above the
process's RSS with the model built (``ru_maxrss`` minus RSS before the load;
the largest of the runs). ``--json`` also gives each method's
``peak_model``: ``ru_maxrss`` minus the RSS before the model was built (the
interpreter and torch imported, no loader yet), i.e. the model plus all
that the loader and its library added, to compare with the model's size.
--cold-repeat sets the cold runs apart from --repeat (a cold run reads the
whole file from the device); --slow-repeat caps the runs of the two peers
that stream through buffers of their own (Run:ai, fastsafetensors). Every run's checksum of every parameter must
agree (the fresh-pages row fills no model and is not checked). Machines
are noisy: read the ratios, and the load average printed.

Exit status: 0 when every run agreed; 1 when a run failed or the loaded
weights differ; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, Dict, List

CHILD = textwrap.dedent("""
    import json, os, resource, sys, time, torch
    method, path, layers, width, cache = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    rss_runtime = rss()  # the interpreter and torch: before the model and any loader exist
    with torch.device("meta"):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    model.to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()  # the model exists: its pages are touched
    sd = model.state_dict()
    import safetensors.torch as st
    import memtier.safetensors as mts
    src = None
    if method == "memtier":
        mts.load_into({}, path, strict=False)  # the library and the context, outside the clock
    elif method in ("ceil_memcpy", "ceil_fresh"):
        with open(path, "rb") as f:
            hlen = int.from_bytes(f.read(8), "little")
            head = json.loads(f.read(hlen))
        src = torch.empty(os.path.getsize(path) - 8 - hlen, dtype=torch.uint8)
        with open(path, "rb") as f:
            f.seek(8 + hlen)
            f.readinto(memoryview(src.numpy()))
    def layout():
        with open(path, "rb") as f:
            hlen = int.from_bytes(f.read(8), "little")
            head = json.loads(f.read(hlen))
        head.pop("__metadata__", None)
        return 8 + hlen, {k: tuple(v["data_offsets"]) for k, v in head.items()}
    if cache == "cold":
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    base = rss()
    t0 = time.perf_counter()
    if method == "memtier":
        mts.load_model(model, path)
    elif method == "st_load_model":
        st.load_model(model, path)
    elif method == "st_load_file":
        model.load_state_dict(st.load_file(path))
    elif method == "runai":
        from runai_model_streamer import SafetensorsStreamer
        with SafetensorsStreamer() as s, torch.no_grad():
            s.stream_files([path], device="cpu")
            for name, t in s.get_tensors():
                sd[name].copy_(t)
    elif method == "fastsafetensors":
        from fastsafetensors import SafeTensorsFileLoader, SingleGroup
        loader = SafeTensorsFileLoader(SingleGroup(), "cpu")
        loader.add_filenames({0: [path]})
        fb = loader.copy_files_to_device()
        with torch.no_grad():
            for name in sd:
                sd[name].copy_(fb.get_tensor(name))
        fb.close()
        loader.close()
    elif method == "ceil_preadv":
        start, offs = layout()
        fd = os.open(path, os.O_RDONLY)
        for name, t in sd.items():
            b, e = offs[name]
            mv = memoryview(t.detach().numpy()).cast("B")
            done = 0
            while done < e - b:
                done += os.preadv(fd, [mv[done:]], start + b + done)
        os.close(fd)
    elif method == "ceil_ppread":
        start, offs = layout()
        fd = os.open(path, os.O_RDONLY)
        items = list(sd.items())
        nthreads = min(len(items), os.cpu_count() or 1) or 1
        def part(j):
            for name, t in items[j::nthreads]:  # os.preadv releases the GIL
                b, e = offs[name]
                mv = memoryview(t.detach().numpy()).cast("B")
                done = 0
                while done < e - b:
                    done += os.preadv(fd, [mv[done:]], start + b + done)
        import threading
        threads = [threading.Thread(target=part, args=(j,)) for j in range(nthreads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        os.close(fd)
    elif method == "ceil_memcpy":
        start, offs = layout()
        with torch.no_grad():
            for name, t in sd.items():
                b, e = offs[name]
                t.view(-1).view(torch.uint8).copy_(src[b:e])
    elif method == "ceil_fresh":
        fresh = torch.empty(src.numel(), dtype=torch.uint8)
        fresh.copy_(src)
    else:
        raise SystemExit(f"unknown method {method}")
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    check = sum(float(p.sum(dtype=torch.float64)) for p in model.parameters())
    print(json.dumps({"s": dt, "peak_extra": peak - base, "peak_model": peak - rss_runtime, "check": check}))
""")

METHODS = [("memtier", "memtier.safetensors.load_model"),
           ("st_load_model", "safetensors.torch.load_model"),
           ("st_load_file", "safetensors load_file + load_state_dict"),
           ("runai", "Run:ai streamer -> the model"),
           ("fastsafetensors", "fastsafetensors -> the model")]
CEILINGS = [("ceil_preadv", "ceiling: preadv into the parameters"),
            ("ceil_ppread", "ceiling: preadv into the parameters, one thread per core"),
            ("ceil_memcpy", "ceiling: memcpy into the parameters"),
            ("ceil_fresh", "(memcpy into fresh 4 KiB pages)")]
OPTIONAL = {"runai": "runai_model_streamer", "fastsafetensors": "fastsafetensors"}


def available(key: str) -> bool:
    """True when the peer ``key`` is importable here (or needs nothing extra)."""
    mod = OPTIONAL.get(key)
    return mod is None or importlib.util.find_spec(mod) is not None


def warm(path: str) -> None:
    """Read the whole file so the page cache holds it."""
    buf = bytearray(64 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def run(key: str, path: str, layers: int, width: int, cache: str) -> Dict[str, Any]:
    """One fresh interpreter timing ``key``; its JSON result."""
    if cache == "warm":
        warm(path)
    r = subprocess.run([sys.executable, "-c", CHILD, key, path, str(layers), str(width), cache],
                       capture_output=True, text=True, timeout=900)
    if r.returncode:
        sys.exit(f"{key} ({cache}) failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=2048, help="checkpoint size in MiB (default 2048)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold-repeat", type=int, default=None, help="runs per method cold (default: --repeat)")
    ap.add_argument("--slow-repeat", type=int, default=None,
                    help="at most this many runs per page-cache state of the peers that load through "
                         "a separate buffer (runai, fastsafetensors: several times slower here); "
                         "default: as many as the others")
    ap.add_argument("--cache", default="warm,cold", help="comma list of warm, cold (default both)")
    ap.add_argument("--dir", default=None, help="folder for the checkpoint (default: a temporary one)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the ceiling rows")
    ap.add_argument("--ceilings", default=None,
                    help="comma list of the ceiling rows to run (default all): " +
                    ", ".join(k.removeprefix("ceil_") for k, _ in CEILINGS))
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--methods", default=None,
                    help="comma list of method keys to run (default all installed): " +
                    ", ".join(k for k, _ in METHODS))
    a = ap.parse_args()
    keys = [k for k, _ in METHODS]
    chosen = [m.strip() for m in a.methods.split(",") if m.strip()] if a.methods else keys
    if not chosen or any(m not in keys for m in chosen) or ("memtier" in chosen and len(chosen) < 2):
        ap.error(f"--methods takes keys of {', '.join(keys)}, with memtier and at least one peer")
    ceil_keys = [k.removeprefix("ceil_") for k, _ in CEILINGS]
    want_ceil = ceil_keys if a.ceilings is None else [c.strip() for c in a.ceilings.split(",") if c.strip()]
    if any(c not in ceil_keys for c in want_ceil):
        ap.error(f"--ceilings takes {', '.join(ceil_keys)}")
    if a.no_ceiling:
        want_ceil = []
    caches = [c.strip() for c in a.cache.split(",") if c.strip()]
    if a.cold_repeat is None:
        a.cold_repeat = a.repeat
    if not caches or any(c not in ("warm", "cold") for c in caches) or \
            min(a.repeat, a.cold_repeat, a.size_mb, a.slow_repeat or 1) < 1:
        ap.error("--cache takes warm and/or cold; --repeat, --cold-repeat, --slow-repeat and --size-mb "
                 "must be positive")
    import torch
    import safetensors.torch as st

    width = 2048
    per = (width * width + width) * 4
    layers = max(1, (a.size_mb << 20) // per)
    peers = [(k, label) for k, label in METHODS if k in chosen and available(k)]
    absent = [label for k, label in METHODS if k in chosen and not available(k)]
    if not any(k != "memtier" for k, _ in peers):
        ap.error(f"no peer to compare with is installed among {', '.join(chosen)}")
    out: Dict[str, Any] = {"loadavg_start": open("/proc/loadavg").read().split()[:3], "tables": {}}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        path = os.path.join(d, "model.safetensors")
        torch.manual_seed(0)
        st.save_model(torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]), path)
        size = os.path.getsize(path)
        checks = set()
        for cache in caches:
            rows = list(peers)
            rows += [c for c in CEILINGS if c[0].removeprefix("ceil_") in want_ceil and
                     (cache == "warm" or c[0] == "ceil_preadv")]
            runs: Dict[str, List[Dict[str, Any]]] = {k: [] for k, _ in rows}
            repeat = a.cold_repeat if cache == "cold" else a.repeat
            for i in range(repeat):
                for key, _ in rows:
                    if key in OPTIONAL and a.slow_repeat is not None and i >= a.slow_repeat:
                        continue
                    print(f"bench_load_model: {cache} {key} {i + 1}/{repeat}", file=sys.stderr, flush=True)
                    res = run(key, path, layers, width, cache)
                    print(f"bench_load_model: {cache} {key}: {res['s']:.3f} s", file=sys.stderr, flush=True)
                    if key != "ceil_fresh":  # fills a new buffer, not the model
                        checks.add(res["check"])
                    runs[key].append(res)
            table = {}
            for key, label in rows:
                ts = sorted(r["s"] for r in runs[key])
                table[key] = {"label": label, "median_s": statistics.median(ts), "best_s": ts[0],
                              "peak_extra": max(r["peak_extra"] for r in runs[key]),
                              "peak_model": max(r["peak_model"] for r in runs[key]), "runs": len(ts)}
            peer = min(table[k]["median_s"] for k, _ in peers if k != "memtier")
            for key in table:
                table[key]["vs_best_peer"] = peer / table[key]["median_s"]
            out["tables"][cache] = table
        out["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        out.update({"size": size, "layers": layers, "absent": absent, "agree": len(checks) == 1,
                    "model_bytes": sum(p.numel() * p.element_size() for p in
                                       torch.nn.Sequential(*[torch.nn.Linear(width, width, device="meta")
                                                             for _ in range(layers)]).parameters())})
    if a.json:
        print(json.dumps(out))
    else:
        for cache, table in out["tables"].items():
            n = a.cold_repeat if cache == "cold" else a.repeat
            print(f"\ncheckpoint: {size / 1e6:.0f} MB ({layers} x Linear({width}, {width}), float32), {cache} "
                  f"page cache, median and best of {n}; model size {size / 2**20:.0f} MiB")
            print(f"{'method':44s} {'median s':>9s} {'best s':>8s} {'GB/s':>7s} {'vs best peer':>13s} "
                  f"{'peak RSS extra MiB':>19s}")
            for key, r in table.items():
                print(f"{r['label']:44s} {r['median_s']:9.3f} {r['best_s']:8.3f} {size / r['best_s'] / 1e9:7.2f} "
                      f"{r['vs_best_peer']:12.2f}x {max(0, r['peak_extra']) / 2**20:19.0f}")
        if absent:
            print(f"not installed, not run: {', '.join(absent)}")
        print(f"load average {' '.join(out['loadavg_start'])} at the start, "
              f"{' '.join(out['loadavg_end'])} at the end; weights agree across all runs: {out['agree']}")
    if not out["agree"]:
        print(f"the methods loaded different weights: {sorted(checks)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
