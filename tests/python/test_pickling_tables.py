"""The datasets' tables in their pickled form (memtier._compact).

A TarShardDataset pickles its member table, a MemTierDataset its index,
compactly: a spawn worker's pickle larger than the pipe that carries it (64
KiB) blocks the parent's ``Process.start()`` until the worker has imported
torch and read it, so a DataLoader's workers started one after another. The
pickled copy must hold exactly the values of the original (dtypes, order,
every key and extension), and a state pickled by a version that stored the
arrays themselves must still load.
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile

import numpy as np
import pytest

from memtier import _compact
from memtier.dataset import MemTierDataset
from memtier.webdataset import TarShardDataset

PIPE_BYTES = 64 << 10  # Linux's default pipe capacity


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size, ti.mtime = len(data), 0
    tf.addfile(ti, io.BytesIO(data))


def _shards(tmp_path) -> list:
    """Two shards: 4096 one-member samples of seeded sizes (0-3000 bytes), then
    multi-member samples with long, non-ASCII and non-UTF-8 names, an empty
    member and a metadata entry (skipped)."""
    rng = np.random.default_rng(20261202)
    a = str(tmp_path / "a.tar")
    with tarfile.open(a, "w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(4096):
            _add(tf, "s%05d.bin" % i, rng.bytes(int(rng.integers(0, 3001))))
    b = str(tmp_path / "b.tar")
    with tarfile.open(b, "w", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape") as tf:
        _add(tf, "__meta__", b"{}")
        for key in ("d/" + "k" * 150, "caf\u00e9", "raw\udcff", "x"):
            _add(tf, key + ".jpg", key.encode("utf-8", "surrogateescape") * 3)
            _add(tf, key + ".cls", b"")
            _add(tf, key + ".seg.PNG", b"p" * 700)
    return [a, b]


def assert_same_table(ds: TarShardDataset, got: TarShardDataset) -> None:
    for k in TarShardDataset._TABLE:
        want, have = getattr(ds, k), getattr(got, k)
        if isinstance(want, np.ndarray):
            assert have.dtype == want.dtype, k
            assert have.tolist() == want.tolist(), k
            assert not have.flags.writeable, k
        else:
            assert have == want, k


def test_tar_dataset_pickles_its_member_table_compactly_and_exactly(tmp_path):
    ds = TarShardDataset(_shards(tmp_path))
    assert len(ds) == 4100 and ds.num_members == 4096 + 12
    blob = pickle.dumps(ds)
    raw = pickle.dumps({k: getattr(ds, k) for k in TarShardDataset._TABLE})
    assert len(raw) > 3 * PIPE_BYTES  # the arrays themselves: what a pickle held before
    assert len(blob) < PIPE_BYTES // 2
    got = pickle.loads(blob)
    assert_same_table(ds, got)
    assert [got.key(i) for i in range(4096, 4100)] == ["d/" + "k" * 150, "caf\u00e9", "raw\udcff", "x"]
    assert got._m_ext[-3:] == ["jpg", "cls", "seg.png"]
    idx = [0, 1, 2047, 4095, 4096, 4097, 4098, 4099]
    assert got.__getitems__(idx) == ds.__getitems__(idx)
    assert got.__getitems__(list(range(4096))) == ds.__getitems__(list(range(4096)))
    assert_same_table(ds, pickle.loads(pickle.dumps(got)))  # and pickles on unchanged


def test_tar_dataset_state_with_the_arrays_still_loads(tmp_path):
    ds = TarShardDataset(_shards(tmp_path))
    old = ds.__getstate__()
    del old["_table"]
    old.update({k: getattr(ds, k) for k in TarShardDataset._TABLE})
    got = TarShardDataset.__new__(TarShardDataset)
    got.__setstate__(pickle.loads(pickle.dumps(old)))
    assert_same_table(ds, got)
    assert got.__getitems__([5, 4097]) == ds.__getitems__([5, 4097])


def test_tar_dataset_table_of_another_format_is_refused(tmp_path):
    ds = TarShardDataset(_shards(tmp_path))
    state = ds.__getstate__()
    state["_table"] = dict(state["_table"], format=99)
    got = TarShardDataset.__new__(TarShardDataset)
    with pytest.raises(ValueError) as e:
        got.__setstate__(state)
    assert str(e.value) == ("TarShardDataset: pickled member table of format 99, this version reads 1 "
                            "(build the dataset again)")


def _bytes(sample) -> bytes:
    return np.asarray(sample).tobytes()  # a sample is a torch tensor, or a numpy array without torch


def _memtier_dataset(tmp_path, ranges: np.ndarray, size: int) -> MemTierDataset:
    data = tmp_path / "data.bin"
    with open(data, "wb") as f:
        f.truncate(size)
    np.save(tmp_path / "index.npy", ranges)
    return MemTierDataset(str(tmp_path / "index.npy"), str(data))


@pytest.mark.parametrize("layout", ["packed", "scattered"])
def test_memtier_dataset_pickles_its_index_compactly_and_exactly(layout, tmp_path):
    rng = np.random.default_rng(7)
    sizes = rng.integers(16 << 10, (112 << 10) + 1, size=4096).astype(np.int64)
    if layout == "packed":  # python -m memtier.pack's layout: one after another
        offs = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    else:  # any order, overlapping, gaps, empty samples
        sizes[::7] = 0
        offs = rng.integers(0, 1 << 30, size=4096)
    ranges = np.stack([offs, sizes], axis=1).astype(np.int64)
    ds = _memtier_dataset(tmp_path, ranges, int((offs + sizes).max()))
    blob = pickle.dumps(ds)
    assert len(pickle.dumps(ds.ranges)) > PIPE_BYTES  # the array itself: what a pickle held before
    assert len(blob) < (PIPE_BYTES // 4 if layout == "packed" else PIPE_BYTES)
    got = pickle.loads(blob)
    assert got.ranges.dtype == np.int64 and got.ranges.shape == (4096, 2)
    assert got.ranges.tolist() == ranges.tolist()
    assert not got.ranges.flags.writeable
    assert _bytes(got[4095]) == _bytes(ds[4095]) and len(_bytes(got[4095])) == int(sizes[4095])


def test_memtier_dataset_state_with_the_array_still_loads(tmp_path):
    ranges = np.array([[0, 10], [10, 0], [3, 4]], dtype=np.int64)
    ds = _memtier_dataset(tmp_path, ranges, 20)
    old = ds.__getstate__()
    del old["_ranges_packed"]
    old["_ranges"] = ranges.copy()
    got = MemTierDataset.__new__(MemTierDataset)
    got.__setstate__(pickle.loads(pickle.dumps(old)))
    assert got.ranges.tolist() == [[0, 10], [10, 0], [3, 4]] and not got.ranges.flags.writeable
    assert _bytes(got[2]) == _bytes(ds[2]) == b"\0" * 4


# ------------------------------------------------------------ the encodings


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("delta", [True, False])
def test_pack_ints_round_trips_every_value(dtype, delta):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    edge = [info.min, info.max, 0, info.max, info.min, 1, info.min, 0]
    a = np.concatenate([np.array(edge, dtype=dtype),
                        rng.integers(info.min, info.max, size=300, dtype=dtype, endpoint=True)])
    got = _compact.unpack_ints(pickle.loads(pickle.dumps(_compact.pack_ints(a, delta))))
    assert got.dtype == a.dtype and got.tolist() == a.tolist()
    empty = _compact.unpack_ints(_compact.pack_ints(np.empty(0, dtype=dtype), delta))
    assert empty.dtype == np.dtype(dtype) and empty.size == 0


@pytest.mark.parametrize("align", [1, 512, 4096])
def test_pack_offsets_round_trips_every_value(align):
    big = np.iinfo(np.int64)
    off = np.array([big.max, big.min, 0, 512, 1024, -1, 7], dtype=np.int64)
    size = np.array([big.max, 5, big.min, 511, 0, 3, -9], dtype=np.int64)
    got = _compact.unpack_offsets(_compact.pack_offsets(off, size, align), size)
    assert got.dtype == np.int64 and got.tolist() == off.tolist()
    assert _compact.unpack_offsets(_compact.pack_offsets(off[:0], size[:0], align), size[:0]).size == 0


def test_pack_strs_and_codes_round_trip_and_nul_is_declined():
    strs = ["", "a", "caf\u00e9", "raw\udcff", "\ud800x", "", "z" * 300]
    assert _compact.unpack_strs(_compact.pack_strs(strs)) == strs
    assert _compact.unpack_strs(_compact.pack_strs([])) == []
    assert _compact.unpack_strs(_compact.pack_strs([""])) == [""]
    assert _compact.pack_strs(["a\0b", "c"]) is None
    exts = ["jpg", "cls", "jpg", "seg.png", "cls", "jpg"]
    table, _ = packed = _compact.pack_codes(exts)
    assert table == ["jpg", "cls", "seg.png"]
    assert _compact.unpack_codes(packed) == exts
    assert _compact.unpack_codes(_compact.pack_codes([])) == []
