#!/usr/bin/env python3
"""Tensor reads through MemTier: read_into_tensor and load_tensor on numpy and,
when importable, torch.

Run directly (prints OK, exit status 0):

    python tests/test_python_tensor.py

or under pytest (``pytest tests/test_python_tensor.py``). Works with an
installed package (``pip install -e .``); run directly from a clone without
one, it imports ``python/memtier`` and loads ``$MEMTIER_LIBRARY`` or the
CMake build's ``build/libmemtier.so``. ``MEMTIER_PY_FORCE_NO_TORCH=1`` checks
the numpy paths only.
"""

from __future__ import annotations

import os
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import memtier
except ImportError:  # run from a clone without an install
    sys.path.insert(0, os.path.join(REPO, "python"))
    import memtier

import numpy as np

from memtier import _dtypes

MiB = 1 << 20


def pattern(offset: int, size: int) -> np.ndarray:
    i = np.arange(offset, offset + size, dtype=np.uint64)
    return ((i * np.uint64(131) + np.uint64(7)) & np.uint64(0xFF)).astype(np.uint8)


def make_pfile(directory: str, size: int, name: str = "p.bin") -> str:
    path = os.path.join(directory, name)
    pattern(0, size).tofile(path)
    return path


def torch_or_none():
    return _dtypes.torch_module()


def _raw(x) -> bytes:
    if isinstance(x, np.ndarray):
        return x.tobytes()
    import torch

    return x.contiguous().view(torch.uint8).numpy().tobytes()


def _expect_raises(exc, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc.__name__}")


# ---------------------------------------------------------------- checks


def check_numpy_read_into_tensor(d: str) -> None:
    path = make_pfile(d, 256 * 1024)
    a = np.zeros((16, 16), dtype=np.float32)
    assert memtier.read_into_tensor(path, 100, a) is a
    assert a.tobytes() == pattern(100, 1024).tobytes()
    big = np.full(100, 0xAA, dtype=np.uint8)
    memtier.read_into_tensor(path, 5, big[10:90])
    assert big[10:90].tobytes() == pattern(5, 80).tobytes()
    assert (big[:10] == 0xAA).all() and (big[90:] == 0xAA).all()
    ro = np.zeros(4, dtype=np.uint8)
    ro.flags.writeable = False
    _expect_raises(ValueError, memtier.read_into_tensor, path, 0, ro)
    _expect_raises(ValueError, memtier.read_into_tensor, path, 0, np.zeros((4, 4))[:, ::2])


def check_load_tensor_dtypes(d: str) -> None:
    path = make_pfile(d, 64 * 1024)
    torch = torch_or_none()
    for name in ("float64", "float32", "float16", "bfloat16", "int8", "int16", "int32",
                 "int64", "uint8", "bool", "float8_e4m3fn", "float8_e5m2"):
        if torch is not None and not hasattr(torch, name):
            continue
        t = memtier.load_tensor(path, 64, (3, 4), name)
        item = _dtypes.resolve_dtype(name).itemsize
        assert tuple(t.shape) == (3, 4), name
        assert _raw(t) == pattern(64, 12 * item).tobytes(), name
        if torch is not None:
            assert isinstance(t, torch.Tensor) and t.dtype == getattr(torch, name)
        else:
            assert isinstance(t, np.ndarray)


def check_load_tensor_safetensors_names(d: str) -> None:
    path = make_pfile(d, 4096)
    for st_name, canonical in (("F32", "float32"), ("BF16", "bfloat16"), ("I64", "int64"),
                               ("U8", "uint8"), ("F8_E4M3", "float8_e4m3fn"), ("BOOL", "bool")):
        t = memtier.load_tensor(path, 0, (2,), st_name)
        item = _dtypes.resolve_dtype(canonical).itemsize
        assert _raw(t) == pattern(0, 2 * item).tobytes(), st_name


def check_bf16_fp8_values(d: str) -> None:
    path = os.path.join(d, "b16.bin")
    with open(path, "wb") as f:
        f.write(bytes([0x80, 0x3F, 0x00, 0xC0, 0x49, 0x40]) + bytes([0x38, 0xC0, 0x7E, 0x7F]))
    torch = torch_or_none()
    a = memtier.load_tensor(path, 0, (3,), "bfloat16")
    e = memtier.load_tensor(path, 6, (4,), "float8_e4m3fn")
    if torch is not None:
        assert a.float().tolist() == [1.0, -2.0, 3.140625]
        assert e.float()[:3].tolist() == [1.0, -2.0, 448.0]
    elif _dtypes.ml_dtypes_module() is not None:
        assert a.astype(np.float32).tolist() == [1.0, -2.0, 3.140625]
        assert e.astype(np.float32)[:3].tolist() == [1.0, -2.0, 448.0]
    else:  # raw bits, documented
        assert a.dtype == np.uint16 and a.tolist() == [0x3F80, 0xC000, 0x4049]
        assert e.dtype == np.uint8


def check_zero_size_and_eof(d: str) -> None:
    path = make_pfile(d, 100, "hundred.bin")
    for shape in ((0,), (2, 0), (0, 3)):
        t = memtier.load_tensor(path, 0, shape, "float32")
        assert tuple(t.shape) == shape
    t = memtier.load_tensor(path, 100, (0,), "bfloat16")
    assert tuple(t.shape) == (0,)
    _expect_raises(memtier.EndOfFileError, memtier.load_tensor, path, 90, (5,), "float32")
    _expect_raises(EOFError, memtier.load_tensor, path, 200, (1,), "uint8")
    _expect_raises(ValueError, memtier.load_tensor, path, 0, (-1,), "float32")
    e = _expect_raises(memtier.UnsupportedError, memtier.load_tensor, path, 0, (1,), "float32",
                       device="cuda:0")
    assert "CUDA" in str(e)


def check_torch_read_into_tensor(d: str) -> None:
    torch = torch_or_none()
    if torch is None:
        return
    path = make_pfile(d, 64 * 1024)
    t = torch.full((40,), 7, dtype=torch.int16)
    view = t[10:20]  # storage offset 10 elements
    memtier.read_into_tensor(path, 33, view)
    raw = t.numpy().tobytes()
    assert raw[20:40] == pattern(33, 20).tobytes()
    assert (t[:10] == 7).all() and (t[20:] == 7).all()
    _expect_raises(ValueError, memtier.read_into_tensor, path, 0, torch.zeros(4, 4).t())
    _expect_raises(ValueError, memtier.read_into_tensor, path, 0,
                   torch.zeros(4, requires_grad=True))
    e = torch.empty(0)
    assert memtier.read_into_tensor(path, 0, e) is e


def check_large_tensor(d: str) -> None:
    n = memtier.CHUNK_BYTES // 4 + 17
    path = make_pfile(d, 4 * n + 4, "large.bin")
    t = memtier.load_tensor(path, 4, (n,), "float32")
    assert _raw(t) == pattern(4, 4 * n).tobytes()


CHECKS = [
    check_numpy_read_into_tensor,
    check_load_tensor_dtypes,
    check_load_tensor_safetensors_names,
    check_bf16_fp8_values,
    check_zero_size_and_eof,
    check_torch_read_into_tensor,
    check_large_tensor,
]


# ---------------------------------------------------------------- pytest entry points


def _run_one(check) -> None:
    with tempfile.TemporaryDirectory() as d:
        check(d)


def test_numpy_read_into_tensor():
    _run_one(check_numpy_read_into_tensor)


def test_load_tensor_dtypes():
    _run_one(check_load_tensor_dtypes)


def test_load_tensor_safetensors_names():
    _run_one(check_load_tensor_safetensors_names)


def test_bf16_fp8_values():
    _run_one(check_bf16_fp8_values)


def test_zero_size_and_eof():
    _run_one(check_zero_size_and_eof)


def test_torch_read_into_tensor():
    if torch_or_none() is None:
        import pytest

        pytest.skip("torch not available")
    _run_one(check_torch_read_into_tensor)


def test_large_tensor():
    _run_one(check_large_tensor)


def main() -> int:
    from memtier import _ffi

    packaged = os.path.exists(_ffi.package_dir_library())
    cmake_lib = os.path.join(REPO, "build", "libmemtier.so")
    if not packaged and "MEMTIER_LIBRARY" not in os.environ and os.path.exists(cmake_lib):
        os.environ["MEMTIER_LIBRARY"] = cmake_lib
    mode = "torch" if torch_or_none() is not None else "numpy"
    for check in CHECKS:
        _run_one(check)
        print(f"  {check.__name__}: ok ({mode})")
    info = memtier.runtime_info()
    print(f"OK ({len(CHECKS)} checks, {mode}, libmemtier {info['version']} from {info['library']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
