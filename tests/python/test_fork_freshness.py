"""Forked DataLoader workers (no Go runtime: memtier_pread_batch on their own
descriptors) keep the freshness contract: a file that is no longer the version
the dataset was built from raises, in strict mode at every batch (rewritten in
place or replaced by rename), with freshness "open" when the descriptor is
opened; they never return another version's bytes."""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import tarfile

import numpy as np
import pytest

import memtier
from memtier.dataset import MemTierDataset
from memtier.webdataset import TarShardDataset

SHARD_CHANGED = "the shard changed since the dataset was built"


def _bin(shard: int, i: int, size: int) -> bytes:
    return bytes([(shard * 7 + i + k) % 251 for k in range(size)])


def _write_shard(path, shard: int, size: int, n: int = 200) -> str:
    """A ustar shard of n samples sNNNNN.bin (size bytes) + sNNNNN.cls, written in place."""
    with open(path, "wb") as f:  # same inode when it exists: a rewrite in place
        with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(n):
                for name, data in ((f"s{i:05d}.bin", _bin(shard, i, size)), (f"s{i:05d}.cls", b"%d" % (i % 10))):
                    ti = tarfile.TarInfo(name)
                    ti.size = len(data)
                    ti.mtime = 1_700_000_000
                    tf.addfile(ti, io.BytesIO(data))
    return str(path)


def _shards(tmp_path):
    return [_write_shard(tmp_path / f"shard-{s}.tar", s, 1000) for s in range(2)]


def _expected_tar(n: int = 200):
    return [(f"s{i:05d}", _bin(s, i, 1000)) for s in range(2) for i in range(n)]


def _epoch_tar(it):
    return [(d["__key__"], d["bin"]) for batch in it for d in batch]


def test_tar_rewritten_in_place_raises_in_fork_workers(tmp_path, torch):
    from torch.utils.data import DataLoader

    paths = _shards(tmp_path)
    ds = memtier.TarShardDataset(paths)  # loads the library: forked workers read without Go
    _write_shard(paths[0], 0, 1010)  # member offsets move
    loader = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=list,
                        multiprocessing_context="fork")
    with pytest.raises(memtier.MemTierError, match=SHARD_CHANGED) as ei:
        _epoch_tar(loader)
    assert "build the dataset again" in str(ei.value)


def test_tar_rewritten_between_epochs_raises_in_persistent_fork_workers(tmp_path, torch):
    from torch.utils.data import DataLoader

    paths = _shards(tmp_path)
    ds = TarShardDataset(paths)
    loader = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=list,
                        multiprocessing_context="fork", persistent_workers=True)
    assert _epoch_tar(loader) == _expected_tar()  # unchanged: exact bytes
    _write_shard(paths[0], 0, 1010)
    with pytest.raises(memtier.MemTierError, match=SHARD_CHANGED):
        _epoch_tar(loader)


def _pack(tmp_path, seed: int, n: int = 64, size: int = 333):
    data = np.random.default_rng(seed).integers(0, 256, n * size, dtype=np.uint8).tobytes()
    return data, np.array([[k * size, size] for k in range(n)], dtype=np.int64)


def _write_atomic(path, data: bytes) -> None:
    tmp = str(path) + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def _epoch_bytes(it) -> bytes:
    return b"".join(bytes(s.numpy()) for batch in it for s in batch)


def test_memtier_dataset_replaced_by_rename_raises_in_persistent_fork_workers(tmp_path, torch):
    from torch.utils.data import DataLoader

    old, ranges = _pack(tmp_path, 1)
    new, _ = _pack(tmp_path, 2)
    np.save(tmp_path / "p.idx.npy", ranges)
    _write_atomic(tmp_path / "p.data", old)
    ds = MemTierDataset(tmp_path / "p.idx.npy", tmp_path / "p.data")
    assert bytes(ds[0].numpy()) == old[:333]  # the parent uses MemTier before forking
    loader = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=list,
                        multiprocessing_context="fork", persistent_workers=True)
    assert _epoch_bytes(loader) == old
    _write_atomic(tmp_path / "p.data", new)
    with pytest.raises(memtier.MemTierError, match="changed since open") as ei:
        _epoch_bytes(loader)
    assert "build the dataset again" in str(ei.value)
    assert bytes(ds[0].numpy()) == new[:333]  # the parent's context reads the new version


_DS = {}  # datasets a forked pool inherits (not pickled: each child keeps its descriptors)


def _read(name, idx):
    ds = _DS[name]
    try:
        out = ds.__getitems__(idx)
    except memtier.MemTierError as e:
        return "error", str(e), ds.io_path
    if isinstance(ds, TarShardDataset):
        return "ok", [(d["__key__"], d["bin"]) for d in out], ds.io_path
    return "ok", b"".join(bytes(np.asarray(s)) for s in out), ds.io_path


def _fork_pool():
    return mp.get_context("fork").Pool(1)


def test_memtier_dataset_fork_child_checks_every_batch_unless_freshness_open(tmp_path):
    old, ranges = _pack(tmp_path, 3)
    np.save(tmp_path / "p.idx.npy", ranges)
    _write_atomic(tmp_path / "p.data", old)
    _DS["strict"] = MemTierDataset(tmp_path / "p.idx.npy", tmp_path / "p.data")
    _DS["lazy"] = MemTierDataset(tmp_path / "p.idx.npy", tmp_path / "p.data",
                                 context_options={"freshness": "open"})
    _DS["strict"][0]  # the library is loaded here: forked children read with memtier_pread_batch
    with _fork_pool() as pool:
        assert pool.apply(_read, ("strict", [0, 1])) == ("ok", old[:666], "fork-batch")
        assert pool.apply(_read, ("lazy", [0, 1])) == ("ok", old[:666], "fork-batch")
        with open(tmp_path / "p.data", "r+b") as f:  # in place, same size
            f.write(b"\0" * 333)
        kind, msg, _ = pool.apply(_read, ("strict", [0, 1]))
        assert kind == "error" and "changed since open" in msg and "p.data" in msg
        # "open": checked when the descriptor was opened only (this child's is open)
        assert pool.apply(_read, ("lazy", [1])) == ("ok", old[333:666], "fork-batch")
    with _fork_pool() as pool:  # a new child opens the file again: checked there
        kind, msg, _ = pool.apply(_read, ("lazy", [1]))
        assert kind == "error" and "changed since open" in msg


def test_tar_fork_child_unchanged_exact_then_replaced(tmp_path):
    paths = _shards(tmp_path)
    _DS["tar"] = TarShardDataset(paths)
    ref = _expected_tar()
    with _fork_pool() as pool:
        assert pool.apply(_read, ("tar", [0, 201, 5])) == ("ok", [ref[0], ref[201], ref[5]], "fork-batch")
        _write_shard(str(paths[1]) + ".new", 1, 1000)  # same bytes, another inode
        os.rename(str(paths[1]) + ".new", paths[1])
        assert pool.apply(_read, ("tar", [3])) == ("ok", [ref[3]], "fork-batch")  # shard 0 only
        kind, msg, _ = pool.apply(_read, ("tar", [3, 250]))
        assert kind == "error" and SHARD_CHANGED in msg and "shard-1.tar" in msg
