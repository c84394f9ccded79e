"""The whole-tensor keys of ``safe_open.get_slice`` (``[...]``, ``[:]``):
the path transformers' ``from_pretrained`` reads every weight through.

They are served by the open handle's own load (the library checks the
file's identity) instead of a read by path; these tests pin that the result
is still the reference's, bit for bit, for every dtype, that it owns its
memory (field case B11) and that a file changed after open is refused.
"""

from __future__ import annotations

import os
import random
import struct

import pytest

import memtier
import memtier.safetensors as mts

st = pytest.importorskip("safetensors")
from test_st_parity import (_every_dtype, bits, layout, outcome, raw_file,  # noqa: E402
                            same_outcome, same_tensors)

@pytest.fixture
def torch(torch):
    """torch, with the reference's torch half imported (``st.torch``)."""
    import safetensors.torch  # noqa: F401

    return torch


FULL_KEYS = [Ellipsis, slice(None), (Ellipsis,), (slice(None),), (slice(None), Ellipsis),
             (Ellipsis, slice(None)), (slice(None), slice(None)), (slice(None),) * 3]


@pytest.mark.parametrize("pad", [0, 3])
def test_full_keys_match_reference_every_dtype(tmp_path, torch, pad):
    rng = random.Random(100 + pad)
    header, data = layout(_every_dtype(rng), rng, {"format": "pt"})
    path = raw_file(tmp_path / "all.safetensors", header, data, pad=pad)
    with st.safe_open(path, "pt") as r, mts.safe_open(path, "pt") as g:
        for name in r.keys():
            for key in FULL_KEYS:
                ro = outcome(lambda: r.get_slice(name)[key])
                go = outcome(lambda: g.get_slice(name)[key])
                same_outcome(ro, go, f"{name!r}[{key!r}]")
                if ro[0] == "ok":
                    same_tensors({name: ro[1]}, {name: go[1]})


def test_full_keys_numpy(tmp_path):
    rng = random.Random(7)
    header, data = layout([("a", "I32", (3, 4)), ("b", "F64", (5,)), ("s", "U8", ())], rng)
    path = raw_file(tmp_path / "n.safetensors", header, data)
    with st.safe_open(path, "np") as r, mts.safe_open(path, "np") as g:
        for name in r.keys():
            for key in (Ellipsis, (Ellipsis,)):
                assert bits(g.get_slice(name)[key]) == bits(r.get_slice(name)[key])
                assert g.get_slice(name)[key].dtype == r.get_slice(name)[key].dtype


def test_full_slice_owns_only_its_memory(tmp_path, torch):
    """A 2 KB tensor kept from a file of 8 MiB ones holds 2 KB; the large
    tensors (own anonymous mappings) hold their own bytes."""
    big = torch.arange(1 << 20, dtype=torch.float32).reshape(1024, 1024)
    small = torch.arange(512, dtype=torch.float32)
    path = str(tmp_path / "o.safetensors")
    st.torch.save_file({"big": big, "big2": big + 1, "small": small}, path)
    with mts.safe_open(path, "pt") as f:
        got = {k: f.get_slice(k)[...] for k in ("big", "big2", "small")}
    for k, t in got.items():
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size(), k
    keep = got.pop("small")
    del got
    assert keep.untyped_storage().nbytes() == 2048
    assert bits(keep) == bits(small)


def test_rewrite_after_full_reads(tmp_path, torch):
    """Tensors read before the file is rewritten keep their bytes; a later
    read of a tensor not read yet raises "changed since open" (field case B11)."""
    path = str(tmp_path / "w.safetensors")
    a = torch.arange(300_000, dtype=torch.float32)  # above the mapping threshold
    st.torch.save_file({"a": a, "b": a * 2, "c": a * 3}, path)
    with mts.safe_open(path, "pt") as f:
        first = f.get_slice("a")[...]
        second = f.get_slice("b")[:]
        with open(path, "r+b") as fh:  # in place: same inode, size; new mtime
            fh.seek(os.path.getsize(path) - 1024)
            fh.write(b"\xff" * 1024)
        os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
        for call in (lambda: f.get_slice("c")[...], lambda: f.get_tensor("c"),
                     lambda: f.get_slice("c")[0:3]):
            with pytest.raises(st.SafetensorError, match="changed since open") as ei:
                call()
            assert isinstance(ei.value, memtier.MemTierError)
    assert bits(first) == bits(a) and bits(second) == bits(a * 2)
    tmp = str(tmp_path / "w.tmp")
    st.torch.save_file({"a": a + 5}, tmp, metadata={"note": "x" * 100})
    os.replace(tmp, path)
    assert bits(first) == bits(a)
    assert bits(mts.load_file(path)["a"]) == bits(a + 5)


def test_full_slice_after_close_reads_by_path(tmp_path):
    header = {"a": {"dtype": "I32", "shape": [3], "data_offsets": [0, 12]}}
    path = raw_file(tmp_path / "c.safetensors", header, struct.pack("<3i", 1, 2, 3))
    f = mts.safe_open(path, "np")
    s = f.get_slice("a")
    f.close()
    assert s[...].tolist() == [1, 2, 3]
    assert s[:].tolist() == [1, 2, 3]
    with pytest.raises(memtier.ClosedError):
        f.get_tensor("a")
