"""read_into_tensor / load_tensor: every dtype, bitwise, on numpy and torch;
dtype spellings; destination checks before any I/O; devices; the no-torch switch."""

from __future__ import annotations

import numpy as np
import pytest

import memtier
from memtier import _dtypes
from conftest import pbytes

MiB = 1 << 20


@pytest.fixture
def rawfile(tmp_path):
    data = np.random.default_rng(7).integers(0, 256, size=1 * MiB, dtype=np.uint8).tobytes()
    path = tmp_path / "raw.bin"
    path.write_bytes(data)
    return str(path), data


# ---------------------------------------------------------------- dtype spellings


@pytest.mark.parametrize("spelling,name", [
    ("float32", "float32"), ("float", "float32"), ("F32", "float32"), ("torch.float32", "float32"),
    ("f4", "float32"), ("<f4", "float32"), (np.float32, "float32"), (np.dtype("float32"), "float32"),
    ("float64", "float64"), ("double", "float64"), ("F64", "float64"),
    ("float16", "float16"), ("half", "float16"), ("F16", "float16"),
    ("bfloat16", "bfloat16"), ("BF16", "bfloat16"), ("bf16", "bfloat16"),
    ("int8", "int8"), ("I8", "int8"), ("int16", "int16"), ("I16", "int16"),
    ("int32", "int32"), ("I32", "int32"), ("int64", "int64"), ("I64", "int64"), ("long", "int64"),
    ("uint8", "uint8"), ("U8", "uint8"), ("u8", "uint64"), ("i8", "int64"),
    ("bool", "bool"), ("BOOL", "bool"), (np.bool_, "bool"), (bool, "bool"),
    ("float8_e4m3fn", "float8_e4m3fn"), ("F8_E4M3", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e5m2"), ("F8_E5M2", "float8_e5m2"),
])
def test_dtype_spellings(spelling, name):
    assert _dtypes.resolve_dtype(spelling).name == name


def test_unknown_and_big_endian_dtypes_are_rejected():
    for bad in ("Q3_K", "float7", ">f4", np.dtype(">i4"), object()):
        with pytest.raises(TypeError):
            _dtypes.resolve_dtype(bad)


def test_torch_dtypes_resolve(torch):
    for name in ("float64", "float32", "float16", "bfloat16", "int8", "int16", "int32",
                 "int64", "uint8", "bool"):
        assert _dtypes.resolve_dtype(getattr(torch, name)).name == name
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                 "float8_e8m0fnu"):
        if hasattr(torch, name):
            assert _dtypes.resolve_dtype(getattr(torch, name)).name == name


# ---------------------------------------------------------------- load_tensor, bitwise

ALL = ["float64", "float32", "float16", "bfloat16", "int8", "int16", "int32", "int64",
       "uint8", "bool", "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.no_torch
@pytest.mark.parametrize("dtype", ALL)
def test_load_tensor_numpy_is_bitwise(rawfile, dtype):
    path, data = rawfile
    dt = _dtypes.resolve_dtype(dtype)
    shape = (3, 5, 7)
    off = 1001
    a = memtier.load_tensor(path, off, shape, dtype)
    assert isinstance(a, np.ndarray) and a.shape == shape and a.dtype.itemsize == dt.itemsize
    assert a.tobytes() == data[off:off + 105 * dt.itemsize]
    if dt.numpy:
        assert a.dtype == np.dtype(dt.numpy)


@pytest.mark.parametrize("dtype", ALL + ["float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"])
def test_load_tensor_torch_is_bitwise(rawfile, dtype, torch):
    if not hasattr(torch, dtype):
        pytest.skip(f"torch {torch.__version__} has no {dtype}")
    path, data = rawfile
    tdt = getattr(torch, dtype)
    off = 333
    t = memtier.load_tensor(path, off, [4, 6], tdt)
    assert isinstance(t, torch.Tensor) and t.dtype == tdt and tuple(t.shape) == (4, 6)
    assert t.device.type == "cpu" and not t.requires_grad
    n = 24 * t.element_size()
    assert t.contiguous().view(torch.uint8).numpy().tobytes() == data[off:off + n]


def test_load_tensor_shape_forms(rawfile, has_torch):
    path, data = rawfile
    for shape, expect in [(5, (5,)), ((5,), (5,)), ([2, 3], (2, 3)), ((np.int64(2), 2), (2, 2)),
                          ((), ())]:
        a = memtier.load_tensor(path, 0, shape, "uint8")
        assert tuple(a.shape) == expect
        n = int(np.prod(expect)) if expect else 1
        raw = a.numpy().tobytes() if has_torch else a.tobytes()
        assert raw == data[:n]


def test_load_tensor_larger_than_a_chunk(pfile, has_torch):
    n = (memtier.CHUNK_BYTES // 4) + 1000
    path = pfile(n * 4 + 8)
    t = memtier.load_tensor(path, 8, (n,), "float32")
    raw = t.numpy().tobytes() if has_torch else t.tobytes()
    assert raw == pbytes(8, n * 4)


def test_load_tensor_argument_errors_before_io(pfile):
    path = pfile(4096)
    ctx = memtier.default_context()
    before = ctx.stats().requests
    with pytest.raises(ValueError, match="negative"):
        memtier.load_tensor(path, 0, (2, -1), "float32")
    with pytest.raises(ValueError, match="overflow"):
        memtier.load_tensor(path, 0, (1 << 40, 1 << 40), "float32")
    with pytest.raises(TypeError):
        memtier.load_tensor(path, 0, "12", "float32")
    with pytest.raises(TypeError):
        memtier.load_tensor(path, 0, (2.5,), "float32")
    with pytest.raises(TypeError, match="unknown dtype"):
        memtier.load_tensor(path, 0, (2,), "Q3_K")
    with pytest.raises(ValueError, match="device"):
        memtier.load_tensor(path, 0, (2,), "float32", device="tpu")
    with pytest.raises(ValueError):
        memtier.load_tensor(path, -4, (2,), "float32")
    assert ctx.stats().requests == before


@pytest.mark.parametrize("mode", ["torch", "numpy"])
def test_load_tensor_cuda_is_unsupported_with_a_clear_message(pfile, mode, monkeypatch, has_torch):
    if mode == "numpy":
        monkeypatch.setenv("MEMTIER_PY_FORCE_NO_TORCH", "1")
    elif not has_torch:
        pytest.skip("torch not available")
    else:
        from memtier import _dtypes

        if _dtypes.torch_module().cuda.is_available():
            pytest.skip("torch.cuda is available: CUDA loads work (test_read_into_tensor_cuda_tensor)")
    path = pfile(4096)
    for dev in ("cuda", "cuda:0", "cuda:1"):
        with pytest.raises(memtier.UnsupportedError, match="CUDA support") as ei:
            memtier.load_tensor(path, 0, (4,), "float32", device=dev)
        assert isinstance(ei.value, NotImplementedError)
    # CPU reads still work afterwards
    a = memtier.load_tensor(path, 0, (4,), "uint8")
    assert bytes(a.tolist()) == pbytes(0, 4)


def test_load_tensor_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        memtier.load_tensor(str(tmp_path / "absent"), 0, (1,), "float32")


def test_load_tensor_with_an_explicit_context(pfile):
    path = pfile(4096)
    with memtier.Context(cache_enabled=False) as ctx:
        a = memtier.load_tensor(path, 4, (8,), "uint8", ctx=ctx)
        assert ctx.stats().requests == 1
    assert bytes(np.asarray(a).tolist()) == pbytes(4, 8)


# ---------------------------------------------------------------- read_into_tensor: numpy


def test_read_into_tensor_numpy(pfile):
    path = pfile(64 * 1024)
    a = np.zeros((4, 8), dtype=np.int16)
    assert memtier.read_into_tensor(path, 10, a) is a
    assert a.tobytes() == pbytes(10, 64)


def test_read_into_tensor_numpy_rejects_before_io(pfile):
    path = pfile(4096)
    ctx = memtier.default_context()
    before = ctx.stats().requests
    ro = np.zeros(8, dtype=np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        memtier.read_into_tensor(path, 0, ro)
    with pytest.raises(ValueError, match="contiguous"):
        memtier.read_into_tensor(path, 0, np.zeros((4, 4), dtype=np.float32)[:, 1:3])
    with pytest.raises(ValueError, match="contiguous"):
        memtier.read_into_tensor(path, 0, np.zeros((4, 4), dtype=np.float32, order="F"))
    with pytest.raises(ValueError, match="read-only"):
        memtier.read_into_tensor(path, 0, b"bytes")
    with pytest.raises(TypeError):
        memtier.read_into_tensor(path, 0, "not a tensor")
    assert ctx.stats().requests == before


class FakeDeviceArray:
    """Looks like a CuPy array: __cuda_array_interface__ and nothing else."""

    def __init__(self, n: int, readonly: bool = False, strides=None):
        self.__cuda_array_interface__ = {
            "shape": (n,), "typestr": "<f4", "data": (0x7F0000000000, readonly),
            "version": 3, "strides": strides,
        }


def test_device_arrays_go_to_the_gpu_target(pfile):
    path = pfile(4096)
    with pytest.raises(memtier.UnsupportedError, match="CUDA support"):
        memtier.read_into_tensor(path, 0, FakeDeviceArray(4))
    with pytest.raises(ValueError, match="read-only"):
        memtier.read_into_tensor(path, 0, FakeDeviceArray(4, readonly=True))
    with pytest.raises(ValueError, match="contiguous"):
        memtier.read_into_tensor(path, 0, FakeDeviceArray(4, strides=(8,)))


# ---------------------------------------------------------------- read_into_tensor: torch


def test_read_into_tensor_torch_view_writes_exactly_its_bytes(pfile, torch):
    path = pfile(64 * 1024)
    t = torch.full((8, 16), 0x55, dtype=torch.uint8)
    view = t[2:5]  # storage offset 32, contiguous
    assert view.storage_offset() == 32 and view.is_contiguous()
    assert memtier.read_into_tensor(path, 100, view) is view
    raw = t.numpy().tobytes()
    assert raw[32:80] == pbytes(100, 48)
    assert raw[:32] == b"\x55" * 32 and raw[80:] == b"\x55" * 48
    flat = torch.zeros(40, dtype=torch.float32)
    memtier.read_into_tensor(path, 7, flat[10:20])
    assert flat.numpy().tobytes()[40:80] == pbytes(7, 40)
    assert (flat[:10] == 0).all() and (flat[20:] == 0).all()


def test_read_into_tensor_torch_rejects_before_io(pfile, torch):
    path = pfile(4096)
    ctx = memtier.default_context()
    before = ctx.stats().requests
    with pytest.raises(ValueError, match="contiguous"):
        memtier.read_into_tensor(path, 0, torch.zeros(4, 4).t())
    with pytest.raises(ValueError, match="contiguous"):
        memtier.read_into_tensor(path, 0, torch.zeros(4, 4)[:, ::2])
    leaf = torch.zeros(4, requires_grad=True)
    with pytest.raises(ValueError, match="requires grad"):
        memtier.read_into_tensor(path, 0, leaf)
    with pytest.raises(ValueError, match="conj"):
        memtier.read_into_tensor(path, 0, torch.zeros(2, dtype=torch.complex64).conj())
    with pytest.raises(memtier.UnsupportedError):
        memtier.read_into_tensor(path, 0, torch.empty(4, device="meta"))
    assert ctx.stats().requests == before
    # the documented way for a parameter: its detached alias shares the storage
    memtier.read_into_tensor(path, 0, leaf.detach())
    assert leaf.detach().numpy().tobytes() == pbytes(0, 16)


def test_read_into_tensor_cuda_tensor(pfile, torch):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (tests/python/test_gpu_double.py covers the GPU target)")
    path = pfile(4096)
    t = torch.empty(16, dtype=torch.uint8, device="cuda")
    assert memtier.read_into_tensor(path, 3, t) is t
    assert bytes(t.cpu().tolist()) == pbytes(3, 16)
    u = memtier.load_tensor(path, 5, (4,), "uint8", device="cuda:0")
    assert u.device == torch.device("cuda", 0) and bytes(u.cpu().tolist()) == pbytes(5, 4)


def test_read_into_tensor_every_torch_dtype(rawfile, torch):
    path, data = rawfile
    for name in ALL:
        tdt = getattr(torch, name, None)
        if tdt is None:
            continue
        t = torch.empty(3, 3, dtype=tdt)
        memtier.read_into_tensor(path, 64, t)
        n = 9 * t.element_size()
        assert t.view(torch.uint8).numpy().tobytes() == data[64:64 + n], name


# ---------------------------------------------------------------- MEMTIER_PY_FORCE_NO_TORCH


@pytest.mark.no_torch
def test_force_no_torch_hides_torch(pfile):
    path = pfile(4096)
    assert _dtypes.torch_module() is None
    a = memtier.load_tensor(path, 0, (4,), "float32")
    assert isinstance(a, np.ndarray)
    assert memtier.runtime_info()["torch"] is False


@pytest.mark.no_torch
def test_force_no_torch_refuses_tensors(pfile):
    torch = pytest.importorskip("torch")
    path = pfile(4096)
    with pytest.raises(TypeError, match="MEMTIER_PY_FORCE_NO_TORCH"):
        memtier.read_into_tensor(path, 0, torch.zeros(4))


def test_force_no_torch_in_a_fresh_interpreter(run_py, pfile):
    path = pfile(64)
    r = run_py(f"""
        import sys, memtier
        a = memtier.load_tensor({path!r}, 0, (2, 2), "bfloat16")
        print(type(a).__module__, 'torch' in sys.modules)
    """, env={"MEMTIER_PY_FORCE_NO_TORCH": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numpy", "False"]
