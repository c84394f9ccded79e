"""load_into of a large warm checkpoint: the library's mapped copy (runtime/engine/mapcopy.go).

Loads of at least 64 MiB from a file in the page cache are copied out of a
mapping of the file; these tests use files past that size, written just
before (so in the page cache), and check the bytes against the reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import memtier
import memtier.safetensors as mts

st = pytest.importorskip("safetensors")


def _checkpoint(torch):
    """About 72 MiB of tensors of several dtypes and odd sizes (odd offsets too)."""
    g = torch.Generator().manual_seed(1)
    return {
        "a.f32": torch.randn(2048, 4097, generator=g),                       # 32 MiB + 16 KiB
        "b.bf16": torch.randn(4099, 2051, generator=g).to(torch.bfloat16),  # about 16 MiB
        "c.i8": torch.randint(-128, 127, ((16 << 20) + 3,), generator=g, dtype=torch.int8),
        "d.f16": torch.randn(3, 5, 7, generator=g).to(torch.float16),
        "e.i64": torch.arange(1001, dtype=torch.int64),
        "f.t": torch.randn(1024, 2048, generator=g),                         # loaded into a transposed view
        "g.f64": torch.randn(1, generator=g, dtype=torch.float64),
    }


def _bytes(t) -> bytes:
    import torch

    return bytes(t.contiguous().view(-1).view(torch.uint8).numpy())


def test_large_warm_load_into_is_bit_identical(tmp_path, torch):
    import safetensors.torch

    path = str(tmp_path / "big.safetensors")
    safetensors.torch.save_file(_checkpoint(torch), path)
    ref = safetensors.torch.load_file(path)
    dst = {k: torch.zeros_like(v) for k, v in ref.items()}
    base = torch.zeros(2048, 1024)
    dst["f.t"] = base.t()  # non-contiguous: the staging path
    ctx = memtier.Context()
    try:
        assert mts.load_into(dst, path, ctx=ctx) == ([], [])
        for k, v in ref.items():
            assert dst[k].dtype == v.dtype and _bytes(dst[k]) == _bytes(v), k
        s = ctx.stats()
        total = sum(v.numel() * v.element_size() for v in ref.values())
        assert (s.bytes, s.buffered_bytes, s.cache_hit_bytes, s.direct_bytes) == (total, total, 0, 0)
    finally:
        ctx.close()


def test_large_warm_load_model_matches_reference(tmp_path, torch):
    import safetensors.torch

    def model():
        torch.manual_seed(2)
        return torch.nn.Sequential(*[torch.nn.Linear(1024, 1031) for _ in range(18)])  # about 74 MiB

    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_model(model(), path)
    mine, ref = model(), model()
    with torch.no_grad():
        for a, b in zip(mine.parameters(), ref.parameters()):
            a.zero_()
            b.zero_()
    assert mts.load_model(mine, path) == safetensors.torch.load_model(ref, path)
    for (ka, a), (kb, b) in zip(mine.state_dict().items(), ref.state_dict().items()):
        assert ka == kb and _bytes(a) == _bytes(b), ka


TRUNCATE = textwrap.dedent("""
    import faulthandler, json, os, re, sys, threading, time, torch
    faulthandler.enable()  # as pytest does: the library's fault handling must still win
    import safetensors.torch as st
    import memtier.safetensors as mts
    p = sys.argv[1]
    cut = 40 << 20
    seen = []
    mts.load_into({}, sys.argv[2], strict=False)  # the library and context, before the clock
    for attempt in range(12):
        sd = {f"w{i}": torch.full((1024, 1024), float(i)) for i in range(24)}  # 96 MiB
        st.save_file(sd, p)
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            head = json.loads(f.read(n))
        offs = {k: 8 + n + v["data_offsets"][0] for k, v in head.items() if k != "__metadata__"}
        ends = {k: 8 + n + v["data_offsets"][1] for k, v in head.items() if k != "__metadata__"}
        dst = {k: torch.zeros_like(v) for k, v in sd.items()}
        th = threading.Thread(target=lambda: (time.sleep(attempt * 0.004), os.truncate(p, cut)))
        th.start()
        try:
            mts.load_into(dst, p)
            assert all(torch.equal(dst[k], sd[k]) for k in sd)
            seen.append("loaded")
        except Exception as e:
            msg = str(e)
            m = re.search(r"tensor '(w\\d+)': read (.*) at offset (\\d+): file shrank while reading \\[(\\d+), (\\d+)\\)$", msg)
            if type(e).__name__ == "EndOfFileError" and m:
                k = m.group(1)
                assert m.group(2) == p and int(m.group(3)) == int(m.group(4)) == offs[k], msg
                assert int(m.group(5)) == ends[k] and ends[k] > cut, msg
                seen.append("shrank")
            elif "file changed since open" in msg or "range past end" in msg:
                seen.append("changed")
            else:
                raise
        th.join()
    print(json.dumps(seen))
""")


def test_truncated_during_a_large_load_is_an_error_not_a_crash(tmp_path, torch):
    """A file cut while load_into copies it: the loaded tensors are exact, the
    first tensor past the cut is named in an EOF error, and the process lives
    (the copy's SIGBUS is recovered even with faulthandler installed)."""
    env = dict(os.environ)
    import safetensors.torch

    small = str(tmp_path / "small.safetensors")
    safetensors.torch.save_file({"x": torch.zeros(1)}, small)
    r = subprocess.run([sys.executable, "-c", TRUNCATE, str(tmp_path / "t.safetensors"), small],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    assert len(seen) == 12 and set(seen) <= {"loaded", "shrank", "changed"}, seen
