"""Field case N10 (tests/field_cases.md): tensors at unaligned file offsets,
and complex64.

Offsets in a safetensors file are relative to the end of a header of any
length, and the format asks for no padding, so a file's tensors can start at
any residue mod 8. Eight files whose header JSON is followed by p spaces
(p = 0..7) put the data start at every residue; in each, the tensors follow
one another with no padding either (u U8[3] first, so the next ones start at
odd offsets). Every MemTier entry point must give the reference's exact bits,
keep complex64, hand out pointers aligned to the element size (half of it for
complex), and warn about nothing.
"""

from __future__ import annotations

import json
import struct
import warnings

import numpy as np
import pytest

import memtier
import memtier.safetensors as mts

st_torch = pytest.importorskip("safetensors.torch")

# name -> (safetensors dtype, numpy dtype, values), in file order
TENSORS = {
    "u": ("U8", np.uint8, [1, 2, 3]),
    "f": ("F32", np.float32, [1.5, -2.0]),
    "c": ("C64", np.complex64, [1 + 2j, -3.5 + 0.25j]),
    "d": ("F64", np.float64, [3.25]),
    "i": ("I64", np.int64, [-1, 2**40]),
    "h": ("F16", np.float16, [0.5]),
}


def _alignment(dt: np.dtype) -> int:
    """The alignment a typed view needs: the element size, half of it for complex."""
    return dt.itemsize // 2 if dt.kind == "c" else dt.itemsize


def _write(path, pad: int) -> str:
    header, blobs, pos = {}, [], 0
    for name, (st_dt, np_dt, vals) in TENSORS.items():
        b = np.array(vals, dtype=np_dt).tobytes()
        header[name] = {"dtype": st_dt, "shape": [len(vals)], "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    text = json.dumps(header).encode() + b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return str(path)


def _check_torch(got, ref, torch) -> None:
    assert isinstance(got, torch.Tensor)
    assert got.dtype == ref.dtype and tuple(got.shape) == tuple(ref.shape)
    assert got.contiguous().view(torch.uint8).numpy().tobytes() == ref.contiguous().view(torch.uint8).numpy().tobytes()
    align = got.element_size() // 2 if got.is_complex() else got.element_size()
    assert got.data_ptr() % align == 0, (got.dtype, got.data_ptr())


def _check_numpy(got, ref) -> None:
    assert isinstance(got, np.ndarray)
    want = ref.numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    assert got.flags.aligned
    assert got.ctypes.data % _alignment(got.dtype) == 0, (got.dtype, got.ctypes.data)


def _data_start(path) -> int:
    with open(path, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


def test_the_files_start_their_data_at_every_residue(tmp_path):
    starts = [_data_start(_write(tmp_path / f"pad{p}.safetensors", p)) for p in range(8)]
    assert sorted(s % 8 for s in starts) == list(range(8))
    assert starts == [starts[0] + p for p in range(8)]


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("pad", range(8))
def test_every_data_start_residue(tmp_path, pad, torch):
    path = _write(tmp_path / f"pad{pad}.safetensors", pad)
    ref = st_torch.load_file(path)
    assert list(ref) == list(TENSORS)
    assert ref["c"].dtype == torch.complex64
    for name, (_, np_dt, vals) in TENSORS.items():  # the reference holds the case's values
        assert ref[name].numpy().tobytes() == np.array(vals, dtype=np_dt).tobytes()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = mts.load_file(path)
        assert list(got) == list(ref)
        for name in ref:
            _check_torch(got[name], ref[name], torch)
        assert got["c"].dtype == torch.complex64

        got_np = mts.load_file(path, framework="np")
        assert list(got_np) == list(ref)
        for name in ref:
            _check_numpy(got_np[name], ref[name])
        assert got_np["c"].dtype == np.complex64

        with mts.safe_open(path, framework="pt") as f:
            for name in ref:
                _check_torch(f.get_tensor(name), ref[name], torch)
                _check_torch(f.get_slice(name)[0:1], ref[name][0:1], torch)
        with mts.safe_open(path, framework="np") as f:
            for name in ref:
                _check_numpy(f.get_tensor(name), ref[name])
                _check_numpy(f.get_slice(name)[0:1], ref[name][0:1])


@pytest.mark.filterwarnings("error")
def test_load_tensor_at_odd_offsets(tmp_path, torch):
    # one zero byte, then F64 [1.0, 2.0] at offset 1, then C64 [1+1j] at offset 17
    path = tmp_path / "raw.bin"
    path.write_bytes(b"\x00" + np.array([1.0, 2.0], dtype=np.float64).tobytes()
                     + np.array([1 + 1j], dtype=np.complex64).tobytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = memtier.load_tensor(str(path), 1, (2,), "float64")
        c = memtier.load_tensor(str(path), 17, (1,), torch.complex64)
    _check_torch(d, torch.tensor([1.0, 2.0], dtype=torch.float64), torch)
    _check_torch(c, torch.tensor([1 + 1j], dtype=torch.complex64), torch)


@pytest.mark.no_torch
@pytest.mark.filterwarnings("error")
def test_load_tensor_at_odd_offsets_numpy(tmp_path):
    # the same file without torch: numpy arrays, complex64 kept, aligned
    path = tmp_path / "raw.bin"
    path.write_bytes(b"\x00" + np.array([1.0, 2.0], dtype=np.float64).tobytes()
                     + np.array([1 + 1j], dtype=np.complex64).tobytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = memtier.load_tensor(str(path), 1, (2,), "float64")
        c = memtier.load_tensor(str(path), 17, (1,), "complex64")
    for got, want in ((d, np.array([1.0, 2.0], dtype=np.float64)), (c, np.array([1 + 1j], dtype=np.complex64))):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
        assert got.flags.aligned and got.ctypes.data % _alignment(got.dtype) == 0
