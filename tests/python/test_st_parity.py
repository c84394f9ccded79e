"""memtier.safetensors against the installed reference safetensors (issue 12, item 1).

Differential tests: the same generated files (every dtype, zero-size and scalar
shapes, Unicode names and metadata, odd header lengths) and the same broken
files (fixed cases plus a seeded generator over headers) go through both
libraries; results must match in dtype, shape and bytes, and the accept/reject
decision and the exception class must agree (MemTier's errors are
``safetensors.SafetensorError`` wherever the reference raises that).
"""

from __future__ import annotations

import json
import math
import os
import random
import struct
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

import memtier
import memtier.safetensors as mts
import memtier.safetensors.numpy as mtnp

st = pytest.importorskip("safetensors")
import safetensors.numpy as stn  # noqa: E402

#: dtype -> bits per element, every dtype safetensors 0.8 parses.
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
        "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64, "F4": 4}
#: dtypes safetensors.numpy hands out
NUMPY_OK = {"BOOL", "U8", "I8", "I16", "U16", "F16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"}


def raw_file(path, header: Any, data: bytes = b"", pad: int = 0, lead: bytes = b"") -> str:
    text = lead + (header if isinstance(header, bytes) else
                   json.dumps(header, ensure_ascii=False).encode("utf-8")) + b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return str(path)


def layout(tensors: List[Tuple[str, str, Tuple[int, ...]]], rng: random.Random,
           metadata: Optional[Dict[str, str]] = None) -> Tuple[Dict[str, Any], bytes]:
    header: Dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs = []
    pos = 0
    for name, dt, shape in tensors:
        n = math.prod(shape) * BITS[dt] // 8
        b = bytes(rng.randrange(256) & (1 if dt == "BOOL" else 255) for _ in range(n))
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [pos, pos + n]}
        blobs.append(b)
        pos += n
    return header, b"".join(blobs)


@pytest.fixture
def torch(torch):
    """torch, with the torch halves of both libraries imported (``st.torch``, ``mts.torch``)."""
    import safetensors.torch  # noqa: F401

    import memtier.safetensors.torch  # noqa: F401

    return torch


def bits(x: Any) -> bytes:
    if type(x).__module__.startswith("torch"):
        import torch

        flat = x.detach().contiguous().reshape(-1)
        if flat.dtype == torch.bool:
            flat = flat.to(torch.uint8)
        return flat.view(torch.uint8).numpy().tobytes()
    return np.ascontiguousarray(x).tobytes()


def same_tensors(a: Dict[str, Any], b: Dict[str, Any]) -> None:
    assert list(a) == list(b) or sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert tuple(a[k].shape) == tuple(b[k].shape), k
        assert bits(a[k]) == bits(b[k]), k


def outcome(fn: Any) -> Tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the class is the result
        return "err", e


def same_outcome(ref: Tuple[str, Any], got: Tuple[str, Any], label: str) -> None:
    """Accept/reject agree; on reject the reference's class (or an OSError
    kind for OSError) is a base of MemTier's; MemTier's is a MemTierError."""
    assert ref[0] == got[0], f"{label}: reference {ref}, memtier {got}"
    if ref[0] == "err":
        r, g = ref[1], got[1]
        if isinstance(r, st.SafetensorError):
            assert isinstance(g, st.SafetensorError), f"{label}: {type(g).__mro__} {g}"
            assert isinstance(g, mts.SafetensorError) and isinstance(g, memtier.MemTierError)
        elif isinstance(r, OSError):
            assert isinstance(g, OSError), f"{label}: {g!r}"
        else:
            assert isinstance(g, type(r)), f"{label}: reference {r!r}, memtier {g!r}"


# ---------------------------------------------------------------- generated good files


def _every_dtype(rng: random.Random) -> List[Tuple[str, str, Tuple[int, ...]]]:
    out = []
    # F4 has its own test: the reference's get_tensors/load_file fail on it (get_tensor works)
    for i, dt in enumerate(sorted(set(BITS) - {"F4"})):
        shape = [(3, 4), (8,), (2, 2, 2)][i % 3]
        out.append((f"t.{dt.lower()}", dt, shape))
    out += [("scalar", "F32", ()), ("empty", "F16", (0,)), ("empty2", "BF16", (3, 0)),
("\u00fcnï\u00e7\u00f8d\u00e9 \U0001f600", "U8", (5,)),
            ("z", "I64", (1,))]
    return out


@pytest.mark.parametrize("meta", [None, {}, {"format": "pt"}, {"\u00e9t\u00e9": "\u2603 \U0001f600", "": ""}])
@pytest.mark.parametrize("pad", [0, 1, 7])
def test_every_dtype_matches_reference(tmp_path, torch, meta, pad):
    rng = random.Random(pad)
    header, data = layout(_every_dtype(rng), rng, meta)
    path = raw_file(tmp_path / "all.safetensors", header, data, pad=pad)
    same_tensors(st.torch.load_file(path), mts.load_file(path))
    same_tensors(st.torch.load_file(path, backend="pread"),
                 mts.torch.load_file(path, backend="pread"))
    with st.safe_open(path, "pt") as r, mts.safe_open(path, "pt") as g:
        assert g.keys() == r.keys()
        # zero-size tensors share an offset; the reference orders such ties at random
        sized = {k for k, v in header.items() if k != "__metadata__" and v["data_offsets"][0] != v["data_offsets"][1]}
        assert [k for k in g.offset_keys() if k in sized] == [k for k in r.offset_keys() if k in sized]
        assert sorted(g.offset_keys()) == sorted(r.offset_keys())
        assert g.metadata() == r.metadata()
        for k in r.keys():
            same_tensors({k: r.get_tensor(k)}, {k: g.get_tensor(k)})
            assert g.get_slice(k).get_shape() == r.get_slice(k).get_shape()
            assert g.get_slice(k).get_dtype() == r.get_slice(k).get_dtype()
        same_tensors(r.get_tensors(), g.get_tensors())
    with open(path, "rb") as f:
        blob = f.read()
    # the reference's torch.load lacks F8_E8M0 (KeyError): compare with its load_file
    same_tensors(st.torch.load_file(path), mts.torch.load(blob))
    rd = {k: (v["dtype"], v["shape"], bytes(v["data"])) for k, v in st.deserialize(blob)}
    gd = {k: (v["dtype"], v["shape"], bytes(v["data"])) for k, v in mts.deserialize(blob)}
    assert gd == rd


def test_numpy_matches_reference(tmp_path):
    rng = random.Random(3)
    header, data = layout([t for t in _every_dtype(rng) if t[1] in NUMPY_OK], rng, {"a": "b"})
    path = raw_file(tmp_path / "np.safetensors", header, data, pad=3)
    ref, got = stn.load_file(path), mtnp.load_file(path)
    same_tensors(ref, got)
    assert all(type(v) is np.ndarray for v in got.values())
    with open(path, "rb") as f:
        same_tensors(stn.load(f.read()), got)


def test_f4_maps_to_packed_torch_dtype(tmp_path, torch):
    path = raw_file(tmp_path / "f4.safetensors",
                    {"w": {"dtype": "F4", "shape": [2, 4], "data_offsets": [0, 4]}}, b"\x01\x23\x45\x67")
    got = mts.load_file(path)["w"]
    assert got.dtype == torch.float4_e2m1fn_x2 and tuple(got.shape) == (2, 2)
    assert bits(got) == b"\x01\x23\x45\x67"
    with st.safe_open(path, "pt") as r:
        same_tensors({"w": r.get_tensor("w")}, {"w": got})
    with open(path, "rb") as f:
        same_tensors({"w": got}, mts.torch.load(f.read()))  # the reference's load raises KeyError here
    empty = raw_file(tmp_path / "e.safetensors", {"w": {"dtype": "F4", "shape": [0, 2], "data_offsets": [0, 0]}})
    with st.safe_open(empty, "pt") as r:
        same_tensors({"w": r.get_tensor("w")}, mts.load_file(empty))
    odd = raw_file(tmp_path / "odd.safetensors",
                   {"w": {"dtype": "F4", "shape": [2, 1], "data_offsets": [0, 1]}}, b"\x01")
    same_outcome(outcome(lambda: st.safe_open(odd, "pt").get_tensor("w")),
                 outcome(lambda: mts.load_file(odd)), "F4 odd")


@pytest.mark.parametrize("dt", ["F6_E2M3", "F6_E3M2"])
def test_f6_files_open_but_tensors_are_refused(tmp_path, dt):
    path = raw_file(tmp_path / "f6.safetensors",
                    {"w": {"dtype": dt, "shape": [2, 4], "data_offsets": [0, 6]}}, bytes(6))
    with st.safe_open(path, "np") as r, mts.safe_open(path, "np") as g:
        assert g.keys() == r.keys() == ["w"]
        assert g.get_slice("w").get_shape() == r.get_slice("w").get_shape() == [2, 4]
        assert g.get_slice("w").get_dtype() == dt
        same_outcome(outcome(lambda: r.get_tensor("w")), outcome(lambda: g.get_tensor("w")), dt)
        with pytest.raises(st.SafetensorError, match=f"Dtype not understood: {dt}"):
            g.get_tensor("w")
    same_outcome(outcome(lambda: stn.load_file(path)), outcome(lambda: mtnp.load_file(path)), dt)


def test_metadata_empty_absent_null(tmp_path):
    for meta, want in ((None, None), ({}, {}), ({"k": "v"}, {"k": "v"})):
        hdr: Dict[str, Any] = {"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}
        if meta is not None:
            hdr["__metadata__"] = meta
        path = raw_file(tmp_path / "m.safetensors", hdr, b"x")
        with st.safe_open(path, "np") as r, mts.safe_open(path, "np") as g:
            assert r.metadata() == want
            assert g.metadata() == want
    path = raw_file(tmp_path / "null.safetensors", b'{"__metadata__":null}')
    with st.safe_open(path, "np") as r, mts.safe_open(path, "np") as g:
        assert g.metadata() is r.metadata() is None


# ---------------------------------------------------------------- handles, arguments


def test_closed_handle_and_slices_after_close(tmp_path):
    path = raw_file(tmp_path / "c.safetensors",
                    {"a": {"dtype": "I32", "shape": [3], "data_offsets": [0, 12]}}, struct.pack("<3i", 1, 2, 3))
    for opener in (st.safe_open, mts.safe_open):
        f = opener(path, "np")
        s = f.get_slice("a")
        f.__exit__(None, None, None)
        for call in (f.keys, f.offset_keys, f.metadata, f.get_tensors,
                     lambda: f.get_tensor("a"), lambda: f.get_slice("a")):
            with pytest.raises(st.SafetensorError, match="File is closed"):
                call()
        assert s[1:].tolist() == [2, 3]  # a slice outlives its handle in both
    with pytest.raises(memtier.ClosedError):
        f.keys()


def test_missing_tensor_and_bad_arguments(tmp_path):
    path = raw_file(tmp_path / "a.safetensors",
                    {"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"x")
    with mts.safe_open(path, "np") as g, st.safe_open(path, "np") as r:
        for call in ("get_tensor", "get_slice"):
            same_outcome(outcome(lambda: getattr(r, call)("zz")), outcome(lambda: getattr(g, call)("zz")), call)
            with pytest.raises(KeyError, match="File does not contain tensor zz"):
                getattr(g, call)("zz")
    for kw in ({"framework": "bad"}, {"framework": "PT"}, {"framework": "np", "backend": "bad"},
               {"framework": "np", "device": "meta"}, {"framework": "np", "device": "bogus"},
               {"framework": "np", "device": -1}):
        same_outcome(outcome(lambda: st.safe_open(path, **kw)), outcome(lambda: mts.safe_open(path, **kw)),
                     repr(kw))
    same_outcome(outcome(lambda: st.safe_open(path, "np", backend=None)),
                 outcome(lambda: mts.safe_open(path, "np", backend=None)), "backend=None")
    same_outcome(outcome(lambda: stn.load_file(path, backend="x")),
                 outcome(lambda: mtnp.load_file(path, backend="x")), "numpy backend")
    for missing in (tmp_path / "nope.safetensors", tmp_path):
        same_outcome(outcome(lambda: stn.load_file(str(missing))),
                     outcome(lambda: mtnp.load_file(str(missing))), str(missing.name))


def test_get_slice_rules_match_reference(tmp_path, torch):
    t = torch.arange(3 * 4 * 5, dtype=torch.float32).reshape(3, 4, 5)
    path = str(tmp_path / "s.safetensors")
    st.torch.save_file({"b": t, "s": torch.tensor(2.5)}, path)
    keys = [slice(None), 0, -1, 2, 3, -4, slice(1, 2), slice(None, None, 2), (slice(None), 1), (0, 1, 2),
            (0, 1, 2, 3), Ellipsis, (Ellipsis, 1), (1, Ellipsis), None, [0, 2], slice(5, 10),
            slice(-10, 10), (slice(None), slice(None), 4), (slice(None), slice(None), 5), slice(2, 1),
            slice(0, 3, 0), (slice(0, 2), slice(1, 3), slice(None, None, 2))]
    with st.safe_open(path, "pt") as r, mts.safe_open(path, "pt") as g:
        for k in keys:
            ro = outcome(lambda: r.get_slice("b")[k])
            go = outcome(lambda: g.get_slice("b")[k])
            same_outcome(ro, go, repr(k))
            if ro[0] == "ok":
                same_tensors({"k": ro[1]}, {"k": go[1]})
        for k in (slice(None), Ellipsis, (), 0):
            same_outcome(outcome(lambda: r.get_slice("s")[k]), outcome(lambda: g.get_slice("s")[k]), repr(k))


# ---------------------------------------------------------------- broken files


def _broken(tmp_path) -> Dict[str, bytes]:
    good = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}

    def h(d: Any) -> bytes:
        b = d if isinstance(d, bytes) else json.dumps(d).encode()
        return struct.pack("<Q", len(b)) + b

    return {
        "empty": b"", "short": b"\1\0\0\0", "truncated header": h(good)[:20],
        "huge n": struct.pack("<Q", 200_000_000) + b"{}", "n past end": struct.pack("<Q", 64) + b"{}",
        "bad json": struct.pack("<Q", 5) + b"{abc}", "list": struct.pack("<Q", 2) + b"[]",
        "only spaces": struct.pack("<Q", 2) + b"  ", "zero n": struct.pack("<Q", 0),
        "leading space": struct.pack("<Q", 3) + b" {}", "trailing json": struct.pack("<Q", 4) + b"{}xx",
        "past eof": h({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}) + bytes(8),
        "trailing data": h(good) + bytes(12),
        "overlap": h({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}) + bytes(12),
        "gap": h({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                  "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}) + bytes(12),
        "wrong dtype": h({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}) + bytes(8),
        "lowercase dtype": h({"a": {"dtype": "f32", "shape": [2], "data_offsets": [0, 8]}}) + bytes(8),
        "shape mismatch": h({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}) + bytes(8),
        "negative dim": h({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}) + bytes(8),
        "float dim": h({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}) + bytes(8),
        "three offsets": h({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}) + bytes(8),
        "missing offsets": h({"a": {"dtype": "F32", "shape": [2]}}) + bytes(8),
        "entry not object": h({"a": 5}),
        "metadata not str": h({"__metadata__": {"a": 1}}),
        "reversed": h({"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}}) + bytes(4),
        "first not 0": h({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}) + b"xy",
        "invalid utf8": struct.pack("<Q", 4) + b'{"\xff"',
        "f4 misaligned": h({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}) + bytes(2),
        "overflow": h({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})
        + bytes(16),
        "duplicate name": struct.pack("<Q", 103) + b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}' + b"xy",
    }


def test_broken_files_same_decision_and_class(tmp_path):
    for label, blob in _broken(tmp_path).items():
        p = tmp_path / "bad.safetensors"
        p.write_bytes(blob)
        same_outcome(outcome(lambda: stn.load_file(str(p))), outcome(lambda: mtnp.load_file(str(p))), label)
        same_outcome(outcome(lambda: stn.load(blob)), outcome(lambda: mtnp.load(blob)), "load " + label)


def _mutate(rng: random.Random) -> bytes:
    """A header near a valid one: one random edit of the JSON, the length or the data."""
    tensors = [(f"t{i}", rng.choice(sorted(BITS)), tuple(rng.randrange(0, 4) for _ in range(rng.randrange(0, 3))))
               for i in range(rng.randrange(0, 4))]
    tensors = [t for t in tensors if math.prod(t[2]) * BITS[t[1]] % 8 == 0]
    header, data = layout(tensors, rng, rng.choice([None, {}, {"k": "v"}]))
    text = json.dumps(header).encode()
    kind = rng.randrange(9)
    if kind == 0 and text:
        i = rng.randrange(len(text))
        text = text[:i] + bytes([rng.randrange(32, 127)]) + text[i + 1:]
    elif kind == 1 and text:
        i = rng.randrange(len(text))
        text = text[:i] + text[i + 1:]
    elif kind == 2:
        data = data + bytes(rng.randrange(1, 5))
    elif kind == 3 and data:
        data = data[:-1]
    elif kind == 4 and tensors:
        name = rng.choice(tensors)[0]
        header[name]["data_offsets"][1] += rng.choice([-1, 1, 8])
        text = json.dumps(header).encode()
    elif kind == 5 and tensors:
        name = rng.choice(tensors)[0]
        header[name]["dtype"] = rng.choice(sorted(BITS) + ["F6_E2M3", "Q4", "", "f16"])
        text = json.dumps(header).encode()
    elif kind == 6 and tensors:
        name = rng.choice(tensors)[0]
        header[name]["shape"] = rng.choice([[], [1], [2, 2], [-1], [0, 5], "x", None])
        text = json.dumps(header).encode()
    elif kind == 7:
        text = rng.choice([b" ", b"\n", b"\t"]) + text + rng.choice([b"", b" ", b"  \n"])
    n = len(text)
    if kind == 8:
        n += rng.choice([-2, -1, 1, 3])
    return struct.pack("<Q", max(0, n)) + text + data


def test_fuzz_headers_against_reference(tmp_path):
    rng = random.Random(1234)
    p = tmp_path / "fz.safetensors"
    agreed = 0
    for i in range(300):
        blob = _mutate(rng)
        p.write_bytes(blob)
        ref = outcome(lambda: stn.load_file(str(p)))
        got = outcome(lambda: mtnp.load_file(str(p)))
        if ref[0] == "err" and isinstance(ref[1], AttributeError):
            # numpy lacks the dtype (F8, BF16, F4): compare header acceptance via safe_open
            ref = outcome(lambda: st.safe_open(str(p), "np").keys())
            got = outcome(lambda: mts.safe_open(str(p), "np").keys())
        same_outcome(ref, got, f"case {i}: {blob[:200]!r}")
        same_outcome(outcome(lambda: st.safe_open(str(p), "np").keys()),
                     outcome(lambda: mts.load(blob, framework="np") and mts.safe_open(str(p), "np").keys()),
                     f"bytes case {i}")
        if ref[0] == "ok" and isinstance(ref[1], dict):
            same_tensors(ref[1], got[1])
        agreed += 1
    assert agreed == 300


def test_errors_keep_memtier_hierarchy(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(struct.pack("<Q", 5) + b"{abc}")
    with pytest.raises(memtier.FormatError) as ei:
        mts.load_file(str(p))
    e = ei.value
    assert isinstance(e, ValueError) and isinstance(e, st.SafetensorError)
    assert isinstance(e, mts.SafetensorError) and e.code == -11 and e.name == "FORMAT"
    assert "invalid JSON" in str(e)
    with pytest.raises(memtier.NotFoundError) as ei2:
        mts.load_file(str(tmp_path / "missing.safetensors"))
    assert isinstance(ei2.value, FileNotFoundError) and not isinstance(ei2.value, st.SafetensorError)
    assert os.path.basename(ei2.value.filename) == "missing.safetensors"


def test_changed_since_open_is_a_safetensor_error(tmp_path):
    """An I/O error (the file rewritten after safe_open) is catchable as the
    reference's SafetensorError too (it used to stay a plain MemTierError)."""
    ref = pytest.importorskip("safetensors")
    from safetensors.numpy import save_file
    import memtier.safetensors as mts
    p = str(tmp_path / "rw.safetensors")
    save_file({"a": np.arange(10, dtype=np.float32)}, p)
    f = mts.safe_open(p, framework="np")
    save_file({"a": np.arange(12, dtype=np.float32)}, p)
    for call in (lambda: f.get_tensor("a"), lambda: f.get_slice("a")[0:1]):
        with pytest.raises(ref.SafetensorError, match="changed since open") as ei:
            call()
        assert isinstance(ei.value, memtier.MemTierError)
