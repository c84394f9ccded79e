"""transformers ``from_pretrained`` with and without ``memtier.patch_safetensors()`` (issue 12).

    python examples/python/bench_from_pretrained.py [--size-mb 400] [--dtype float32|bfloat16]
                                                    [--shard-mb 100] [--repeat 3] [--cold] [--dir DIR]
                                                    [--methods reference,memtier,memtier_copy] [--json]

Generates a Llama-shaped causal LM from a config (random init, seed fixed, no
hub access) of about --size-mb in --dtype, saves it with ``save_pretrained``
(safetensors, sharded at --shard-mb; 0: one file) into a temporary folder (or
DIR), reads its files once to warm the page cache (--cold: drops them from it
before every run instead), then times
``LlamaForCausalLM.from_pretrained(dir, dtype=...)``, alternating the two
methods --repeat times, each run in a fresh interpreter (imports, the model
class and MemTier's library loaded before the clock starts):

* ``reference``: transformers as installed (safetensors' mmap safe_open);
* ``memtier``: the same call with ``MEMTIER_PATCH_SAFETENSORS=1`` (the
  default mode, ``patch_safetensors()``: ``safe_open`` on the CPU returns
  the reference's mmap views, MemTier counts their bytes);
* ``memtier_copy``: with ``MEMTIER_PATCH_SAFETENSORS=copy``
  (``patch_safetensors(views=False)``: MemTier reads every tensor into
  memory of its own).

The patch is on from ``import memtier`` (made after ``import transformers``,
before the clock), as the README tells users to turn it on, so the clock
holds what a user sees: ``from_pretrained`` itself. The patched runs also
report ``import_s``, the time ``import memtier`` took with the patch starting
in it (looking up safetensors' names in the loaded modules), outside the
clock. --methods picks some of the three (reference always runs).

The clock stops when ``from_pretrained`` returns and again after one byte of
every 4 KiB page of every weight has been read (the "ready" column): with
safetensors' mmap the returned parameters are views of the files, read
lazily by page faults, while the copy mode's parameters own their memory
(read before the call returns), so only the second figure compares the same
work.

With ``memtier_copy`` in the run, each round also times the owned-memory floor
in a fresh interpreter (FLOOR_CHILD: a new tensor of each of the checkpoint's
payload sizes, one byte of every 4 KiB page written on every core), the least any load into
memory of its own does; the copy rows' notes give it as a ratio to the
reference (the best those rows could show on this machine) and what the
copy mode reaches of it.

Every run hashes every parameter and buffer after the timing; the hashes of
all runs must agree (bit-identical weights), and the patched runs must account
for exactly the checkpoint's tensor bytes (MemTier's stats, plus
``memtier.integrations.view_bytes()`` for the bytes left to safetensors' views).
Prints the best and median time of each (both clocks) and the ratio of the
medians, reference time / memtier time (above 1: the patch is faster). ``--json``
prints one JSON object instead (``rows`` as examples/python/bench_hot.py's,
for scripts/bench_report.py). Machines are noisy: read the ratio.

Exit status: 0 when every run verified; 1 when the weights or the byte count
differ, or a run failed; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402

MB = 1e6

#: reference: transformers as installed; memtier: under patch_safetensors() (safe_open
#: views); memtier_copy: under patch_safetensors(views=False).
METHODS = ("reference", "memtier", "memtier_copy")

CHILD = textwrap.dedent("""
    import hashlib, json, sys, time
    method, path, dtype_name = sys.argv[1], sys.argv[2], sys.argv[3]
    import torch, transformers
    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except AttributeError:
        pass
    dtype = getattr(torch, dtype_name)
    pieces = {}
    t = time.perf_counter()
    import memtier  # MEMTIER_PATCH_SAFETENSORS (set by the parent for the patched methods) applies here
    from memtier.integrations import counts, is_patched, view_bytes
    if method != "reference":
        pieces["import_s"] = time.perf_counter() - t
        assert is_patched(), "MEMTIER_PATCH_SAFETENSORS did not turn the patch on"
    ctx = memtier.default_context()
    ctx.stats()  # load the library and make the context before the clock
    cls = transformers.LlamaForCausalLM
    t0 = time.perf_counter()
    model = cls.from_pretrained(path, dtype=dtype)
    dt = time.perf_counter() - t0
    # First touch: one byte of every 4 KiB page of every weight, as a first
    # forward pass reads them. The reference's parameters are views of its
    # mmap of the files (faulted in here); MemTier's own their memory.
    t1 = time.perf_counter()
    for t in list(model.parameters()) + list(model.buffers()):
        b = t.detach().reshape(-1).view(torch.uint8)
        if b.numel():
            int(b[::4096].sum())
    touch = time.perf_counter() - t1
    h = hashlib.sha256()
    for name, t in sorted(list(model.named_parameters()) + list(model.named_buffers())):
        h.update(name.encode())
        h.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
    print(json.dumps({"s": dt, "touch_s": touch, "sha256": h.hexdigest(), "served": ctx.stats().bytes,
                      "viewed": sum(view_bytes().values()), "counts": counts(), "pieces": pieces}))
""")


def generate(folder: str, size_mb: float, dtype_name: str, shard_mb: float) -> Dict[str, Any]:
    """Save a Llama-shaped model of about ``size_mb`` into ``folder``; returns its shape."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    dtype = getattr(torch, dtype_name)
    itemsize = torch.empty((), dtype=dtype).element_size()
    hidden, inter, vocab, heads, kv = 1024, 2816, 16000, 16, 4
    per_layer = 2 * hidden * hidden + 2 * hidden * (hidden // heads) * kv + 3 * hidden * inter + 2 * hidden
    fixed = 2 * vocab * hidden + hidden
    layers = max(1, round((size_mb * MB / itemsize - fixed) / per_layer))
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                   num_hidden_layers=layers, num_attention_heads=heads,
                                   num_key_value_heads=kv, max_position_embeddings=2048,
                                   tie_word_embeddings=False)
    torch.manual_seed(20261201)
    model = transformers.LlamaForCausalLM(cfg).to(dtype)
    kw = {"max_shard_size": f"{int(shard_mb)}MB"} if shard_mb > 0 else {"max_shard_size": "1000GB"}
    model.save_pretrained(folder, safe_serialization=True, **kw)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    return {"layers": layers, "hidden": hidden, "vocab": vocab, "files": len(files)}


#: MEMTIER_PATCH_SAFETENSORS per method: how the child turns the patch on.
ENV = {"reference": "0", "memtier": "1", "memtier_copy": "copy"}


#: The floor of owned tensors (views=False): a fresh interpreter allocates a
#: tensor of each payload size of the checkpoint and writes one byte of every
#: 4 KiB page on every core, the least a load into memory of its own must do
#: (one thread faults 2-6x slower here). Where fresh
#: memory is slow to fault in (a VM whose host reclaims freed guest pages),
#: this alone can exceed the reference's time, whose weights are mmap views
#: of pages already in the page cache.
FLOOR_CHILD = textwrap.dedent("""
    import json, os, sys, time
    from concurrent.futures import ThreadPoolExecutor
    import torch
    sizes = json.loads(sys.argv[1])
    torch.empty(1)  # torch's allocator up before the clock
    pool = ThreadPoolExecutor(os.cpu_count() or 1)
    list(pool.map(lambda _: None, range(os.cpu_count() or 1)))  # threads started before the clock
    t = time.perf_counter()
    keep = [torch.empty(n, dtype=torch.uint8) for n in sizes]
    # Faulted in on every core (torch's fill_ drops the GIL), 8 MiB at a
    # time, as a parallel read into the same memory would fault it.
    parts = [x[o:o + (8 << 20)] for x in keep for o in range(0, x.numel(), 8 << 20)]
    list(pool.map(lambda p: p[::4096].fill_(1), parts))
    print(json.dumps({"s": time.perf_counter() - t}))
""")


def tensor_sizes(folder: str) -> List[int]:
    """Payload bytes of every tensor of the .safetensors files of ``folder``
    (their headers' data_offsets); their sum is the checkpoint's tensor bytes."""
    import struct

    sizes = []
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with open(os.path.join(folder, f), "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(n))
            sizes += [v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__"]
    return sizes


def run_floor(sizes: List[int]) -> float:
    r = subprocess.run([sys.executable, "-c", FLOOR_CHILD, json.dumps(sizes)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"owned-memory floor failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["s"])


def floor_note(floor: "float | None", ref: float, mine: float) -> str:
    """The owned-memory floor in a row's note: its time, as a ratio to the
    reference (the best the row could show) and what the load reaches of it."""
    if not floor:
        return ""
    return (f"; owned-memory floor (new tensors of the checkpoint's sizes, one byte of every 4 KiB page "
            f"written on every core, fresh interpreter; median) {floor:.3f} s = {ref / floor:.2f}x the reference: "
            f"views=False at {floor / mine:.2f}x of it")


def run_child(method: str, folder: str, dtype_name: str) -> Dict[str, Any]:
    env = dict(os.environ, MEMTIER_PATCH_SAFETENSORS=ENV[method])
    r = subprocess.run([sys.executable, "-c", CHILD, method, folder, dtype_name],
                       capture_output=True, text=True, timeout=1800, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{method} run failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=400.0, help="checkpoint size, MB (default 400)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--shard-mb", type=float, default=100.0, help="shard size, MB; 0: one file")
    ap.add_argument("--repeat", type=int, default=3, help="runs per method (default 3)")
    ap.add_argument("--dir", help="folder for the model (default: a temporary one, removed)")
    ap.add_argument("--cold", action="store_true",
                    help="drop the files from the page cache before every run (default: warm)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="comma list of " + ", ".join(METHODS) + " (reference always runs)")
    a = ap.parse_args()
    chosen = [m.strip() for m in a.methods.split(",") if m.strip()]
    if not chosen or any(m not in METHODS for m in chosen):
        ap.error(f"--methods takes {', '.join(METHODS)}")
    methods = [m for m in METHODS if m == "reference" or m in chosen]
    if not 10 <= a.size_mb <= 100_000:
        ap.error(f"--size-mb={a.size_mb}: must be 10..100000")
    if not 1 <= a.repeat <= 20:
        ap.error(f"--repeat={a.repeat}: must be 1..20")
    if a.shard_mb < 0:
        ap.error(f"--shard-mb={a.shard_mb}: must be >= 0")
    try:
        import transformers  # noqa: F401
    except ImportError:
        ap.error("transformers is not installed (pip install transformers)")

    tmp = None
    if a.dir:
        folder = a.dir
        os.makedirs(folder, exist_ok=True)
    else:
        tmp = folder = tempfile.mkdtemp(prefix="memtier_bench_from_pretrained_")
    try:
        _peers.require_disk(folder, a.size_mb * MB * 1.2, int(a.size_mb * MB), tmp)
        _peers.log(f"bench_from_pretrained: saving a ~{a.size_mb:.0f} MB {a.dtype} Llama model ...")
        shape = generate(folder, a.size_mb, a.dtype, a.shard_mb)
        sizes = tensor_sizes(folder)
        nbytes = sum(sizes)
        paths = [os.path.join(folder, f) for f in os.listdir(folder)]
        for p in paths:
            _peers.warm(p)
        runs: Dict[str, List[Dict[str, Any]]] = {m: [] for m in methods}
        floors: List[float] = []
        for i in range(a.repeat):
            for method in methods:
                _peers.log(f"bench_from_pretrained: {method} run {i + 1}/{a.repeat} ...")
                if a.cold:
                    for p in paths:
                        _peers.evict(p)
                runs[method].append(run_child(method, folder, a.dtype))
            if "memtier_copy" in methods:
                floors.append(run_floor(sizes))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    hashes = {r["sha256"] for rs in runs.values() for r in rs}
    served_ok = all(r["served"] + r["viewed"] == nbytes and not r["counts"]["fallback"]
                    for m in ("memtier", "memtier_copy") for r in runs.get(m, []))
    verified = len(hashes) == 1 and served_ok
    best = {m: min(r["s"] for r in rs) for m, rs in runs.items()}
    ready = {m: min(r["s"] + r["touch_s"] for r in rs) for m, rs in runs.items()}
    med = {m: statistics.median(r["s"] for r in rs) for m, rs in runs.items()}
    med_ready = {m: statistics.median(r["s"] + r["touch_s"] for r in rs) for m, rs in runs.items()}
    pieces = {m: {k: statistics.median(r["pieces"][k] for r in rs) for k in rs[0]["pieces"]}
              for m, rs in runs.items() if rs and rs[0]["pieces"]}
    floor = statistics.median(floors) if floors else None
    cache = "cold" if a.cold else "warm"
    where = f"{nbytes / MB:.0f} MB in {shape['files']} shard(s), {cache} page cache, medians of {a.repeat}"
    at = "; the patch on from import memtier (MEMTIER_PATCH_SAFETENSORS), outside the clock"
    rows = []
    for m, key, what in (("memtier", "", "patch_safetensors() (safe_open views)"),
                         ("memtier_copy", "copy_", "patch_safetensors(views=False) (owned tensors)")):
        if m not in runs:
            continue
        rows += [{"key": f"from_pretrained_{key}{a.dtype}_{cache}", "available": True, "unit": "s",
                  "row": f"from_pretrained {nbytes / MB:.0f} MB {a.dtype} {cache}, {what} vs without",
                  "target": 1.0, "baseline_label": "without the patch",
                  "memtier": med[m], "base": med["reference"], "ratio": med["reference"] / med[m],
                  "note": where + at + ("; the reference's weights are mmap views, not yet read"
                                        if m == "memtier_copy" else "") + (floor_note(floor, med["reference"], med[m])
                                                                         if m == "memtier_copy" else "")},
                 {"key": f"from_pretrained_{key}ready_{a.dtype}_{cache}", "available": True, "unit": "s",
                  "row": f"from_pretrained {nbytes / MB:.0f} MB {a.dtype} {cache} + first touch, {what} vs without",
                  "target": 1.0, "baseline_label": "without the patch",
                  "memtier": med_ready[m], "base": med_ready["reference"],
                  "ratio": med_ready["reference"] / med_ready[m],
                  "note": where + at + "; from_pretrained + one byte of every 4 KiB page of every weight"
                  + (floor_note(floor, med_ready["reference"], med_ready[m]) if m == "memtier_copy" else "")}]
    out = {"benchmark": "bench_from_pretrained.py", "python": platform.python_version(),
           "cpus": os.cpu_count(), "transformers": transformers.__version__, "dtype": a.dtype,
           "page_cache": cache,
           "checkpoint_bytes": nbytes, "model": shape, "repeat": a.repeat,
           "ratio": "reference seconds / memtier seconds (above 1: the patch is faster)",
           "runs": runs, "rows": rows, "owned_memory_floor_s": floor, "pieces": pieces, "bit_identical": len(hashes) == 1,
           "loadavg": open("/proc/loadavg").read().split()[:3],
           "memtier_served_exact": served_ok, "verified": verified, "ok": verified}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"from_pretrained of a {nbytes / MB:.0f} MB {a.dtype} Llama model ({shape['layers']} layers, "
              f"{shape['files']} safetensors file(s)), {cache} page cache, best of {a.repeat}, "
              f"transformers {transformers.__version__}, {os.cpu_count()} CPUs")
        table = [[m, f"{best[m]:.3f}", f"{med[m]:.3f}", f"{med['reference'] / med[m]:.2f}x",
                  f"{ready[m]:.3f}", f"{med_ready[m]:.3f}", f"{med_ready['reference'] / med_ready[m]:.2f}x"]
                 for m in methods]
        print(_peers.table(["method", "from_pretrained best s", "median s", "vs reference (medians)",
                            "+ first touch best s", "median s", "vs reference (medians)"], table))
        for m, p in pieces.items():
            print(f"{m}: " + ", ".join(f"{k} {v:.3f}" for k, v in p.items()) + " (medians)")
        print(f"load average {open('/proc/loadavg').read().split()[0]}")
        print(f"weights bit-identical across all runs: {len(hashes) == 1}; MemTier served exactly "
              f"the {nbytes} tensor bytes: {served_ok}")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main())
