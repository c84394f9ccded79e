"""memtier.TarShardDataset: WebDataset tar shards as a map-style dataset.

Shards are written here with Python's tarfile in the three formats (ustar, GNU
with long names, pax) and compared sample by sample with what
``webdataset.WebDataset(url, shardshuffle=False)`` yields (raw bytes: no
decoder is attached, and WebDataset 1.0.2 yields each member's bytes as
``bytes`` by default).
"""

from __future__ import annotations

import io
import os
import pickle
import tarfile

import numpy as np
import pytest

import memtier
from memtier.webdataset import TarShardDataset, base_plus_ext


def _member(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = 1_700_000_000
    ti.mode = 0o644
    tf.addfile(ti, io.BytesIO(data))


def make_shard(path, fmt: int, n: int = 12, seed: int = 0, long_names: bool = False) -> str:
    """A shard of n samples: .jpg (random bytes), .cls, .json, some with .seg.png,
    plus a directory entry, a symlink, a member without extension and a
    __meta__ entry (all skipped by WebDataset)."""
    rng = np.random.default_rng(seed)
    with tarfile.open(path, "w", format=fmt) as tf:
        d = tarfile.TarInfo("dir")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        _member(tf, "__meta__", b"shard metadata")
        for i in range(n):
            base = f"dir/sample{i:04d}"
            if long_names and i % 3 == 0:
                if fmt == tarfile.USTAR_FORMAT:  # > 100 bytes in ustar's 155-byte prefix field
                    base = "dir/" + "deep_" * 25 + f"/s{i:04d}"
                else:  # > 100 bytes in one component: a GNU 'L' entry / a pax path record
                    base = "dir/" + "long_" * 30 + f"{i:04d}"
            if i == 2:
                base = "dir/\u00fcn\u00ef\u00e7\u00f8d\u00e9 2"  # UTF-8 name (a pax record in pax)
            _member(tf, base + ".jpg", rng.integers(0, 256, int(rng.integers(0, 5000)), dtype=np.uint8).tobytes())
            _member(tf, base + ".cls", str(i % 7).encode())
            if i % 2:
                _member(tf, base + ".JSON", b'{"i": %d}' % i)  # extensions are lower-cased
            if i % 4 == 1:
                _member(tf, base + ".seg.png", b"\x89PNG" + bytes([i]))
            if i == 5:
                _member(tf, base + ".empty", b"")
        ln = tarfile.TarInfo("dir/link.jpg")
        ln.type = tarfile.SYMTYPE
        ln.linkname = "sample0000.jpg"
        tf.addfile(ln)
        _member(tf, "dir/README", b"no extension: skipped")
    return str(path)


def wds_samples(urls):
    wds = pytest.importorskip("webdataset", reason="webdataset is not installed "
                              "(pip install -r python/requirements-test.txt)")
    out = []
    for s in wds.WebDataset(urls, shardshuffle=False):
        s = {k: v for k, v in s.items() if k != "__local_path__"}
        out.append(s)
    return out


FORMATS = [("ustar", tarfile.USTAR_FORMAT, False), ("ustar-prefix", tarfile.USTAR_FORMAT, True),
           ("gnu", tarfile.GNU_FORMAT, True),
           ("pax", tarfile.PAX_FORMAT, True)]


@pytest.mark.parametrize("label,fmt,long_names", FORMATS)
def test_samples_equal_webdataset(tmp_path, label, fmt, long_names):
    path = make_shard(tmp_path / f"shard-{label}.tar", fmt, long_names=long_names)
    ref = wds_samples(path)
    for s in ref:
        for k, v in s.items():
            if not k.startswith("__"):
                assert type(v) is bytes, "webdataset yields raw bytes by default"
    ds = TarShardDataset(path)
    assert len(ds) == len(ref) == 12
    got = [ds[i] for i in range(len(ds))]
    assert got == ref
    assert ds.__getitems__(list(range(len(ds)))) == ref
    assert ds.__getitems__([3, 3, 0]) == [ref[3], ref[3], ref[0]]
    assert ds[-1] == ref[-1]
    assert ds.key(2) == ref[2]["__key__"]


def test_several_shards_and_order(tmp_path):
    paths = [make_shard(tmp_path / f"s{k}.tar", tarfile.PAX_FORMAT, n=5 + k, seed=k, long_names=True)
             for k in range(3)]
    ref = wds_samples(paths)
    ds = TarShardDataset(paths)
    assert len(ds) == len(ref) == 5 + 6 + 7
    assert ds.shards == paths
    got = ds.__getitems__(list(range(len(ds)))[::-1])[::-1]  # a batch across all shards
    assert got == ref
    assert [s["__url__"] for s in got] == [s["__url__"] for s in ref]


def test_samples_never_span_shards(tmp_path):
    # the last sample of shard a and the first of shard b share a key: two samples
    for name, exts in (("a.tar", ["jpg"]), ("b.tar", ["cls"])):
        with tarfile.open(tmp_path / name, "w", format=tarfile.USTAR_FORMAT) as tf:
            for e in exts:
                _member(tf, f"same.{e}", name.encode())
    paths = [str(tmp_path / "a.tar"), str(tmp_path / "b.tar")]
    ds = TarShardDataset(paths)
    assert len(ds) == 2
    assert ds[0] == {"__key__": "same", "__url__": paths[0], "jpg": b"a.tar"}
    assert ds[1] == {"__key__": "same", "__url__": paths[1], "cls": b"b.tar"}
    assert [ds[0], ds[1]] == wds_samples(paths)


def test_base_plus_ext():
    assert base_plus_ext("a/b.c.d") == ("a/b", "c.d")
    assert base_plus_ext("x.y/z.jpg") == ("x.y/z", "jpg")
    assert base_plus_ext("./a.txt") == ("./a", "txt")
    assert base_plus_ext("noext") == (None, None)
    assert base_plus_ext("dir.d/noext") == (None, None)


def test_duplicate_extension_is_a_format_error(tmp_path):
    p = tmp_path / "dup.tar"
    with tarfile.open(p, "w", format=tarfile.USTAR_FORMAT) as tf:
        _member(tf, "k.jpg", b"1")
        _member(tf, "k.JPG", b"2")
    with pytest.raises(memtier.FormatError, match="duplicate file name"):
        TarShardDataset(str(p))


def test_errors(tmp_path):
    with pytest.raises(ValueError):
        TarShardDataset([])
    with pytest.raises(FileNotFoundError):
        TarShardDataset(str(tmp_path / "missing.tar"))
    with pytest.raises(IsADirectoryError):
        TarShardDataset(str(tmp_path))
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"not a tar archive " * 40)
    with pytest.raises(memtier.FormatError):
        TarShardDataset(str(bad))
    path = make_shard(tmp_path / "s.tar", tarfile.USTAR_FORMAT, n=3)
    ds = TarShardDataset(path)
    with pytest.raises(IndexError):
        ds[3]
    with pytest.raises(TypeError):
        ds["a"]
    with pytest.raises(TypeError):
        TarShardDataset(path, context_options={"nope": 1})


def test_shard_changed_after_build(tmp_path):
    path = make_shard(tmp_path / "s.tar", tarfile.USTAR_FORMAT, n=4)
    ds = TarShardDataset(path)
    ds[0]
    make_shard(tmp_path / "new.tar", tarfile.USTAR_FORMAT, n=4, seed=9)
    os.replace(tmp_path / "new.tar", path)
    with pytest.raises(memtier.MemTierError, match="changed"):
        ds[1]
    # a copy made for another process (pickle) checks the member table too
    ds2 = pickle.loads(pickle.dumps(ds))
    with pytest.raises(memtier.MemTierError, match="changed"):
        ds2.__getitems__([0, 1, 2, 3])


def test_pickle_round_trip_and_transform(tmp_path):
    path = make_shard(tmp_path / "s.tar", tarfile.GNU_FORMAT, n=6, long_names=True)
    ds = TarShardDataset(path, transform=_keys_only, context_options={"cache_bytes": 0})
    ds2 = pickle.loads(pickle.dumps(ds))
    assert len(ds2) == len(ds)
    assert ds2[4] == ds[4] == sorted(wds_samples(path)[4])
    assert ds.io_path == "memtier"
    ds.close()
    assert ds.io_path is None
    assert ds[0] == ds2[0]


def _keys_only(sample):
    return sorted(sample)


def test_dataloader_two_spawn_workers(tmp_path, torch):
    from torch.utils.data import DataLoader

    paths = [make_shard(tmp_path / f"s{k}.tar", fmt, n=8, seed=k, long_names=True)
             for k, fmt in enumerate((tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT))]
    ds = TarShardDataset(paths)
    ref = wds_samples(paths)
    loader = DataLoader(ds, batch_size=3, num_workers=2, multiprocessing_context="spawn",
                        collate_fn=list, shuffle=False)
    got = [s for batch in loader for s in batch]
    assert got == ref


def _read_batch(args):
    ds, idx = args
    return ds.__getitems__(idx), ds.io_path


def test_spawn_pool_without_torch(tmp_path):
    # the multi-process path without torch: the dataset pickles to spawned workers
    import multiprocessing as mp

    path = make_shard(tmp_path / "s.tar", tarfile.PAX_FORMAT, n=9, long_names=True)
    ds = TarShardDataset(path)
    ref = wds_samples(path)
    with mp.get_context("spawn").Pool(2) as pool:
        parts = pool.map(_read_batch, [(ds, [0, 1, 2]), (ds, [3, 4, 5]), (ds, [6, 7, 8])])
    assert [s for batch, _ in parts for s in batch] == ref
    assert {io for _, io in parts} == {"memtier"}


@pytest.mark.parametrize("fork_batch", [True, False])
def test_fork_child_reads_without_the_go_runtime(tmp_path, fork_batch):
    import multiprocessing as mp

    path = make_shard(tmp_path / "s.tar", tarfile.GNU_FORMAT, n=5, long_names=True)
    ds = TarShardDataset(path)  # loads libmemtier.so here: forked children cannot use it
    ds._fork_batch = fork_batch  # False: the per-member os.pread loop
    ref = wds_samples(path)
    with mp.get_context("fork").Pool(1) as pool:
        batch, io = pool.apply(_read_batch, ((ds, [4, 0, 2]),))
    assert batch == [ref[4], ref[0], ref[2]]
    assert io == ("fork-batch" if fork_batch else "pread")
    strict = TarShardDataset(path, fork_fallback=False)
    with mp.get_context("fork").Pool(1) as pool:
        with pytest.raises(memtier.ForkError):
            pool.apply(_read_batch, ((strict, [0]),))
