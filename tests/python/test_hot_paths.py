"""Hot paths and freshness (issue 9): the freshness setting and READ_IMMUTABLE,
the new stats fields, the path cache, the fast destination paths of read_into
(same checks as the general path), the vectorised readv forms and the
DataLoader batch path.

P-file: byte i = (i*131+7) & 0xFF (conftest.pattern).
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import memtier
from memtier import _context, _ffi
from conftest import pattern, pbytes

MiB = 1 << 20
# path_recheck_ms large: the path is not re-stat'ed during a test, so every
# revalidation below is the freshness check of the open file (exact counts).
STEADY = {"path_recheck_ms": 3_600_000}


def _rewrite(path: str, data: bytes) -> None:
    """Rewrite ``path`` in place (same inode, same size) and move its mtime
    on by one second, so the change is visible to fstat at any timestamp
    granularity."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


# ---------------------------------------------------------------- settings


def test_version_comes_from_the_header():
    from memtier import _constants

    major, minor, patch = (int(x) for x in _constants.VERSION.split("."))
    assert memtier.__version__ == _ffi.PACKAGE_VERSION == _constants.VERSION
    assert _ffi.PACKAGE_VERSION_NUMBER == _constants.VERSION_NUMBER == major * 10000 + minor * 100 + patch
    # the loaded library has the package's API (same major.minor)
    assert _ffi.runtime().version_number // 100 == _constants.VERSION_NUMBER // 100


def test_constants():
    assert memtier.READ_IMMUTABLE == 16
    assert (memtier.FRESHNESS_STRICT, memtier.FRESHNESS_INTERVAL, memtier.FRESHNESS_OPEN) == (0, 1, 2)
    assert memtier.CONFIG_KEYS[-2:] == ("freshness", "freshness_interval_ms")


def test_freshness_default_names_and_ints():
    with memtier.Context() as ctx:
        cfg = ctx.config()
    assert cfg["freshness"] == "strict"
    assert cfg["freshness_interval_ms"] == 100
    for name, code in (("strict", 0), ("interval", 1), ("open", 2)):
        with memtier.Context(freshness=name, freshness_interval_ms=250) as ctx:
            cfg = ctx.config()
            assert cfg["freshness"] == name
            assert cfg["freshness_interval_ms"] == 250
        with memtier.Context(freshness=code) as ctx:
            assert ctx.config()["freshness"] == name
        with memtier.Context(freshness=name.upper()) as ctx:
            assert ctx.config()["freshness"] == name
    with memtier.Context(freshness="open") as ctx:
        with memtier.Context(**ctx.config()) as again:  # config() round-trips
            assert again.config() == ctx.config()


def test_freshness_bad_values():
    with pytest.raises(ValueError, match="freshness must be one of"):
        memtier.Context(freshness="sometimes")
    with pytest.raises(TypeError):
        memtier.Context(freshness=1.5)
    with pytest.raises((ValueError, memtier.InvalidArgumentError)):
        memtier.Context(freshness=7)


def test_freshness_environment(monkeypatch):
    monkeypatch.setenv("MEMTIER_FRESHNESS", "interval")
    monkeypatch.setenv("MEMTIER_FRESHNESS_INTERVAL_MS", "1234")
    with memtier.Context() as ctx:
        cfg = ctx.config()
    assert (cfg["freshness"], cfg["freshness_interval_ms"]) == ("interval", 1234)
    with memtier.Context(freshness="open") as ctx:  # a keyword wins
        assert ctx.config()["freshness"] == "open"
    monkeypatch.setenv("MEMTIER_FRESHNESS", "never")
    with pytest.raises(memtier.FormatError, match="MEMTIER_FRESHNESS"):
        memtier.Context()


def test_stats_have_the_new_fields():
    with memtier.Context() as ctx:
        st = ctx.stats()
    d = st.as_dict()
    hot = ["revalidations", "readv_inline_hits", "readv_uring_batches", "readv_uring_reads",
           "readv_uring_fallback_off", "readv_uring_fallback_unavailable"]
    i = list(d).index("revalidations")
    assert list(d)[i:i + 6] == hot  # in header order (the fields after them came later)
    assert all(d[k] == 0 for k in hot)
    assert tuple(d) == _context.STATS_FIELDS


# ---------------------------------------------------------------- freshness


def test_strict_sees_a_rewrite_and_counts_one_revalidation_per_read(pfile):
    path = pfile(64 << 10)
    new = bytes(255 - b for b in pbytes(0, 64 << 10))
    buf = bytearray(4096)
    with memtier.Context(freshness="strict", **STEADY) as ctx:
        ctx.read_into(path, 8192, buf)  # opens the file and fills the DRAM cache
        assert bytes(buf) == pbytes(8192, 4096)
        ctx.reset_stats()
        for _ in range(5):
            ctx.read_into(path, 8192, buf)
        st = ctx.stats()
        assert st.revalidations == 5
        assert st.cache_hit_requests == 5
        _rewrite(path, new)
        ctx.read_into(path, 8192, buf)
        assert bytes(buf) == new[8192:8192 + 4096]  # never stale
        assert ctx.read(path, 0, 16) == new[:16]
        assert ctx.stats().files_opened >= 1  # the changed file was opened again


def test_open_mode_makes_no_revalidations_and_may_serve_stale(pfile):
    path = pfile(64 << 10)
    old = pbytes(8192, 4096)
    new = bytes(255 - b for b in pbytes(0, 64 << 10))
    buf = bytearray(4096)
    with memtier.Context(freshness="open", **STEADY) as ctx:
        ctx.read_into(path, 8192, buf)
        ctx.reset_stats()
        for _ in range(7):
            ctx.read_into(path, 8192, buf)
        ctx.readv(path, np.array([[0, 100], [8192, 4096]]))
        assert ctx.stats().revalidations == 0
        _rewrite(path, new)
        ctx.read_into(path, 8192, buf)
        # "open": the file is not checked again, so the cached (old) bytes may
        # be served; what is guaranteed is one of the two versions, never a mix.
        assert bytes(buf) in (old, new[8192:8192 + 4096])
        assert ctx.stats().revalidations == 0
        ctx.drop_cache(path)  # the documented way to see the new bytes
        ctx.read_into(path, 8192, buf)
        assert bytes(buf) == new[8192:8192 + 4096]


def test_interval_mode_trusts_a_recent_check(pfile):
    import time

    path = pfile(64 << 10)
    buf = bytearray(4096)
    with memtier.Context(freshness="interval", freshness_interval_ms=600_000, **STEADY) as ctx:
        ctx.read_into(path, 0, buf)
        ctx.reset_stats()
        for _ in range(5):
            ctx.read_into(path, 0, buf)
        assert ctx.stats().revalidations == 0  # checked at open, less than 10 min ago
    with memtier.Context(freshness="interval", freshness_interval_ms=1, **STEADY) as ctx:
        ctx.read_into(path, 0, buf)
        ctx.reset_stats()
        for _ in range(3):
            time.sleep(0.01)  # longer than the 1 ms interval: each read checks again
            ctx.read_into(path, 0, buf)
        assert ctx.stats().revalidations == 3
        assert bytes(buf) == pbytes(0, 4096)


def test_immutable_keyword_skips_the_check_in_strict_mode(pfile, torch_or_none):
    path = pfile(64 << 10)
    with memtier.Context(**STEADY) as ctx:
        buf = np.empty(4096, dtype=np.uint8)
        ctx.read_into(path, 0, buf)
        ctx.reset_stats()
        ctx.read_into(path, 4096, buf, immutable=True)
        ctx.read_into(path, 4096, buf, flags=memtier.READ_IMMUTABLE)
        assert ctx.read(path, 100, 10, immutable=True) == pbytes(100, 10)
        out = ctx.readv(path, [(0, 10), (50, 20)], immutable=True)
        assert out.tobytes() == pbytes(0, 10) + pbytes(50, 20)
        ctx.readv(path, np.array([[0, 10]] * 100), flags=memtier.READ_IMMUTABLE)
        memtier.read_into_tensor(path, 0, buf, immutable=True, ctx=ctx)
        if torch_or_none is not None:
            t = torch_or_none.empty(1024, dtype=torch_or_none.float32)
            memtier.read_into_tensor(path, 0, t, immutable=True, ctx=ctx)
            assert t.numpy().tobytes() == pbytes(0, 4096)
        assert buf.tobytes() == pbytes(0, 4096)
        assert ctx.stats().revalidations == 0
        ctx.read_into(path, 0, buf)  # without the flag: checked
        ctx.readv(path, [(0, 10)])
        ctx.readv(path, np.array([[0, 10], [20, 10]]))
        assert ctx.stats().revalidations == 3  # one per call (one file per call)


def test_readv_counts_one_revalidation_per_call_and_inline_hits(pfile):
    path = pfile(1 << 20)
    with memtier.Context(**STEADY) as ctx:
        ctx.prefetch(path)  # the whole file in the DRAM cache
        ctx.reset_stats()
        rng = np.random.default_rng(5)
        offs = rng.integers(0, (1 << 20) - 4096, 256)
        ranges = np.stack([offs, np.full(256, 4096)], axis=1)
        out = ctx.readv(path, ranges)
        st = ctx.stats()
        assert st.readv_calls == 1
        assert st.revalidations == 1
        assert st.readv_inline_hits == 256
        assert st.cache_hit_requests == 256
        expect = b"".join(pbytes(int(o), 4096) for o in offs)
        assert out.tobytes() == expect


def test_module_functions_take_immutable(pfile):
    path = pfile(8192)
    buf = bytearray(100)
    assert memtier.read_into(path, 7, buf, immutable=True) == 100
    assert bytes(buf) == pbytes(7, 100)
    assert memtier.read(path, 7, 5, immutable=True) == pbytes(7, 5)
    assert memtier.readv(path, [(1, 2)], immutable=True).tobytes() == pbytes(1, 2)


def test_flags_out_of_range(pfile):
    path = pfile(8192)
    with pytest.raises(ValueError, match="flags"):
        memtier.read_into(path, 0, bytearray(1), flags=1 << 40)
    with pytest.raises(ValueError, match="flags"):
        memtier.readv(path, [(0, 1)], flags=1 << 40)
    with pytest.raises(memtier.InvalidArgumentError):
        memtier.read_into(path, 0, bytearray(1), flags=1 << 20)  # unknown bit: the library says
    with pytest.raises(memtier.InvalidArgumentError):
        memtier.readv(path, np.array([[0, 1]]), flags=1 << 20)


# ---------------------------------------------------------------- path cache


class _Changing(os.PathLike):
    """A PathLike whose path changes between calls."""

    def __init__(self, *paths: str) -> None:
        self.paths = list(paths)
        self.calls = 0

    def __fspath__(self) -> str:
        p = self.paths[min(self.calls, len(self.paths) - 1)]
        self.calls += 1
        return p


def test_path_cache_keys_by_the_resulting_string(tmp_path):
    a, b = str(tmp_path / "a.bin"), str(tmp_path / "b.bin")
    with open(a, "wb") as f:
        f.write(b"A" * 64)
    with open(b, "wb") as f:
        f.write(b"B" * 64)
    ch = _Changing(a, b)
    with memtier.Context() as ctx:
        assert ctx.read(ch, 0, 4) == b"AAAA"
        assert ctx.read(ch, 0, 4) == b"BBBB"  # same object, new string: the new file
        assert ch.calls == 2  # __fspath__ once per call
        buf = bytearray(4)
        ctx.read_into(pathlib.Path(a), 0, buf)
        assert buf == b"AAAA"
        ctx.read_into(os.fsencode(b), 0, buf)
        assert buf == b"BBBB"
        assert ctx.readv(pathlib.Path(b), [(0, 2)]).tobytes() == b"BB"


def test_path_cache_is_bounded_and_rejects_nul(tmp_path):
    path = str(tmp_path / "f.bin")
    with open(path, "wb") as f:
        f.write(b"x" * 16)
    for i in range(_context._PATH_CACHE_MAX + 10):
        _context._cpath(f"{path}.{i}")
    assert len(_context._PATH_CACHE) <= _context._PATH_CACHE_MAX
    with pytest.raises(ValueError, match="NUL"):
        memtier.read_into(path + "\0x", 0, bytearray(1))
    assert path + "\0x" not in _context._PATH_CACHE
    with pytest.raises(TypeError):
        memtier.read_into(123, 0, bytearray(1))  # type: ignore[arg-type]
    assert _context._cpath(path) == os.fsencode(path)
    assert _context._cpath(path.encode()) == path.encode()


# ---------------------------------------------------------------- destinations


def test_fast_path_keeps_every_check(pfile):
    path = pfile(1 << 16)
    ro = np.zeros(16, dtype=np.uint8)
    ro.setflags(write=False)
    with memtier.Context() as ctx:
        for _ in range(2):  # the second time the types are registered fast-path kinds
            with pytest.raises(TypeError, match="read-only"):
                ctx.read_into(path, 0, ro)
            with pytest.raises(ValueError, match="C-contiguous"):
                ctx.read_into(path, 0, np.zeros((4, 4), dtype=np.uint8)[:, ::2])
            with pytest.raises(TypeError, match="dtype object"):
                ctx.read_into(path, 0, np.empty(2, dtype=object))
            with pytest.raises(TypeError, match="dtype object"):
                ctx.read_into(path, 0, memoryview(np.empty(2, dtype=object)))
            with pytest.raises(TypeError, match="read-only"):
                ctx.read_into(path, 0, memoryview(b"abc"))
            with pytest.raises(TypeError, match="read-only"):
                ctx.read_into(path, 0, b"abc")
            with pytest.raises(ValueError, match="C-contiguous"):
                ctx.read_into(path, 0, memoryview(bytearray(8))[::2])
            assert ro.sum() == 0
            for buf in (bytearray(100), memoryview(bytearray(100)), np.empty(25, dtype=np.float32),
                        np.empty((5, 20), dtype=np.uint8)):
                assert ctx.read_into(path, 3, buf) == 100
                assert bytes(memoryview(buf).cast("B")) == pbytes(3, 100)


def test_fast_path_subclasses_and_views(pfile, tmp_path):
    path = pfile(1 << 16)
    mm = np.memmap(str(tmp_path / "mm.bin"), dtype=np.uint8, mode="w+", shape=(64,))
    with memtier.Context() as ctx:
        assert ctx.read_into(path, 10, mm) == 64  # an ndarray subclass: the general path
        assert mm.tobytes() == pbytes(10, 64)
        big = bytearray([0xAA]) * 300
        view = memoryview(big)[100:200]
        ctx.read_into(path, 0, view)
        assert bytes(big[100:200]) == pbytes(0, 100)
        assert bytes(big[:100]) == b"\xaa" * 100 and bytes(big[200:]) == b"\xaa" * 100
        view.release()
        big.extend(b"x")  # no export is left behind: the bytearray can still be resized
        arr = np.full(300, 0xAA, dtype=np.uint8)
        ctx.read_into(path, 5, arr[100:200])
        assert arr[100:200].tobytes() == pbytes(5, 100)
        assert (arr[:100] == 0xAA).all() and (arr[200:] == 0xAA).all()
        arr.resize(400, refcheck=False)  # nor on a numpy array


def test_torch_fast_path_checks(pfile, torch):
    path = pfile(1 << 16)
    with memtier.Context() as ctx:
        for _ in range(2):
            t = torch.zeros(64, dtype=torch.uint8)
            assert ctx.read_into(path, 1, t) == 64
            assert t.numpy().tobytes() == pbytes(1, 64)
            base = torch.zeros(300, dtype=torch.uint8)
            ctx.read_into(path, 2, base[100:200])  # storage offset: exactly its bytes
            assert base[100:200].numpy().tobytes() == pbytes(2, 100)
            assert int(base[:100].sum()) == 0 and int(base[200:].sum()) == 0
            f = torch.zeros(16, dtype=torch.float32)
            assert ctx.read_into(path, 0, f) == 64
            with pytest.raises(ValueError, match="requires grad"):
                ctx.read_into(path, 0, torch.zeros(4, requires_grad=True))
            with pytest.raises(ValueError, match="not contiguous"):
                ctx.read_into(path, 0, torch.zeros(4, 4)[:, 1])
            with pytest.raises(ValueError, match="conj"):
                ctx.read_into(path, 0, torch.zeros(4, dtype=torch.complex64).conj())
            with pytest.raises(ValueError, match="requires grad"):
                ctx.read_into(path, 0, torch.nn.Parameter(torch.zeros(4)))


@pytest.fixture
def torch_or_none():
    from memtier import _dtypes

    return _dtypes.torch_module()


# ---------------------------------------------------------------- readv forms


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint32, ">i8"])
def test_readv_numpy_dtypes(pfile, dtype):
    path = pfile(1 << 16)
    ranges = np.array([[5, 10], [100, 0], [7, 3], [60000, 5000]]).astype(dtype)
    out = np.full(10 + 3 + 5000 + 32, 0xAA, dtype=np.uint8)
    res = memtier.readv(path, ranges, out[16:-16])
    assert res.base is out or res is not None
    assert out[16:-16].tobytes() == pbytes(5, 10) + pbytes(7, 3) + pbytes(60000, 5000)
    assert (out[:16] == 0xAA).all() and (out[-16:] == 0xAA).all()
    # non-contiguous ranges (a column-reversed view)
    rev = np.ascontiguousarray(ranges[:, ::-1])[:, ::-1]
    assert memtier.readv(path, rev).tobytes() == pbytes(5, 10) + pbytes(7, 3) + pbytes(60000, 5000)


def test_readv_numpy_bad_values(pfile):
    path = pfile(4096)
    with pytest.raises(ValueError, match="range 1 has a negative offset or size"):
        memtier.readv(path, np.array([[0, 1], [-5, 3]]))
    with pytest.raises(ValueError, match="range 0 has a negative offset or size"):
        memtier.readv(path, np.array([[0, -1]], dtype=np.int32))
    with pytest.raises(ValueError, match=r"range 2 is out of range \(2\*\*63"):
        memtier.readv(path, np.array([[0, 1], [1, 1], [1 << 63, 1]], dtype=np.uint64))
    with pytest.raises(ValueError, match="out of range"):
        memtier.readv(path, [(1 << 63, 1)])
    with pytest.raises(ValueError, match="overflows"):
        memtier.readv(path, np.array([[0, 1 << 62]] * 5, dtype=np.uint64), np.empty(8, np.uint8))
    with pytest.raises(TypeError, match="integer"):
        memtier.readv(path, np.array([[0.5, 1.0]]))
    with pytest.raises(ValueError, match="shape"):
        memtier.readv(path, np.zeros((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="out holds 5 bytes"):
        memtier.readv(path, np.array([[0, 10]]), bytearray(5))
    with pytest.raises(TypeError, match="read-only"):
        memtier.readv(path, np.array([[0, 3]]), b"abc")


def test_readv_eof_index_in_the_numpy_form(pfile):
    path = pfile(4096)
    out = np.zeros(300, dtype=np.uint8)
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.readv(path, np.array([[0, 100], [4090, 100], [200, 100]]), out)
    assert ei.value.index == 1
    assert out[:100].tobytes() == pbytes(0, 100)
    assert out[200:].tobytes() == pbytes(200, 100)


def test_readv_into_a_list_of_buffers(pfile, torch_or_none):
    path = pfile(1 << 16)
    ranges = np.array([[0, 10], [500, 0], [40, 7], [1000, 4096]])
    bufs = [bytearray(10), np.zeros(3, dtype=np.uint8), memoryview(bytearray(20)), np.zeros(4096, np.uint8)]
    res = memtier.readv(path, ranges, bufs)
    assert res is bufs
    assert bytes(bufs[0]) == pbytes(0, 10)
    assert bytes(bufs[2][:7]) == pbytes(40, 7) and bytes(bufs[2][7:]) == b"\0" * 13
    assert bufs[3].tobytes() == pbytes(1000, 4096)
    tup = (bytearray(2), bytearray(3))
    assert memtier.readv(path, [(1, 2), (5, 3)], tup) is tup
    assert bytes(tup[0]) + bytes(tup[1]) == pbytes(1, 2) + pbytes(5, 3)
    if torch_or_none is not None:
        ts = [torch_or_none.zeros(8, dtype=torch_or_none.uint8), torch_or_none.zeros(2, dtype=torch_or_none.int32)]
        memtier.readv(path, np.array([[3, 8], [9, 8]]), ts)
        assert ts[0].numpy().tobytes() == pbytes(3, 8) and ts[1].numpy().tobytes() == pbytes(9, 8)
    with pytest.raises(ValueError, match="out has 1 buffers for 2 ranges"):
        memtier.readv(path, [(0, 1), (1, 1)], [bytearray(1)])
    with pytest.raises(ValueError, match=r"out\[1\] holds 1 bytes, range 1 needs 2"):
        memtier.readv(path, np.array([[0, 1], [1, 2]]), [bytearray(1), bytearray(1)])
    with pytest.raises(TypeError, match="read-only"):
        memtier.readv(path, np.array([[0, 1], [1, 2]]), [bytearray(1), b"ab"])
    with pytest.raises(TypeError, match="dtype object"):
        memtier.readv(path, np.array([[0, 1]]), [np.empty(1, dtype=object)])
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.readv(path, np.array([[0, 1], [(1 << 16) - 1, 2]]), [bytearray(1), bytearray(2)])
    assert ei.value.index == 1
    assert memtier.readv(path, np.zeros((0, 2), dtype=np.int64), []) == []


def test_readv_many_ranges_match_a_reference(pfile):
    path = pfile(4 * MiB)
    rng = np.random.default_rng(11)
    n = 5000
    offs = rng.integers(0, 4 * MiB - 70000, n)
    sizes = rng.integers(0, 70000, n)
    ranges = np.stack([offs, sizes], axis=1)
    with memtier.Context() as ctx:
        out = ctx.readv(path, ranges)
        assert out.shape == (int(sizes.sum()),)
        data = pattern(0, 4 * MiB)
        expect = np.concatenate([data[o:o + s] for o, s in zip(offs.tolist(), sizes.tolist())])
        assert np.array_equal(out, expect)
        # the same through the list form (strided output buffers)
        bufs = [np.empty(int(s), np.uint8) for s in sizes[:300]]
        ctx.readv(path, ranges[:300], bufs)
        assert np.array_equal(np.concatenate(bufs), expect[:int(sizes[:300].sum())])


def test_readv_layout_check():
    ffi = _ffi.get_ffi()
    _context._iov_array(ffi, 1)
    assert ffi.sizeof("memtier_iovec_t") == 40
    assert [ffi.offsetof("memtier_iovec_t", f) for f in ("offset", "size", "dst", "path", "result")] == \
        [0, 8, 16, 24, 32]


# ---------------------------------------------------------------- DataLoader batch


def test_dataset_batch_is_one_readv_and_views_of_one_buffer(tmp_path, torch):
    from memtier.dataset import MemTierDataset

    rng = np.random.default_rng(2)
    lens = rng.integers(0, 5000, 200)
    lens[7] = 0
    offs = np.zeros(200, dtype=np.int64)
    np.cumsum(lens[:-1], out=offs[1:])
    data = rng.integers(0, 256, int(lens.sum()), dtype=np.uint8)
    (tmp_path / "d.bin").write_bytes(data.tobytes())
    np.save(tmp_path / "i.npy", np.stack([offs, lens], axis=1))
    ds = MemTierDataset(tmp_path / "i.npy", tmp_path / "d.bin")
    idx = [7, 3, 199, 3, -1, 0]
    batch = ds.__getitems__(idx)
    ctx = ds._state().ctx
    before = ctx.stats().readv_calls
    batch = ds.__getitems__(idx)
    assert ctx.stats().readv_calls - before == 1
    for k, s in zip(idx, batch):
        k %= 200
        assert s.dtype == torch.uint8 and s.shape == (int(lens[k]),)
        assert s.numpy().tobytes() == data[offs[k]:offs[k] + lens[k]].tobytes()
    ptrs = {s.untyped_storage().data_ptr() for s in batch}
    assert len(ptrs) == 1  # every sample is a view of the batch buffer
    assert ds.__getitems__(np.array([5, 6], dtype=np.uint64))[1].numpy().tobytes() == \
        data[offs[6]:offs[6] + lens[6]].tobytes()
    with pytest.raises(IndexError):
        ds.__getitems__([0, 200])
    with pytest.raises(IndexError):
        ds.__getitems__(np.array([0, 1 << 63], dtype=np.uint64))
    with pytest.raises(TypeError):
        ds.__getitems__([0.5])
    assert ds.__getitems__([]) == []
