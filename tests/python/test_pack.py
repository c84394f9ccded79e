"""`python -m memtier.pack`: packing a directory into .data/.idx/.manifest.json.

Every test makes its input under tmp_path: a small tree with nested folders, an
empty file, a binary file, names that sort differently by byte and by path
component, and a symbolic link.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import memtier
from memtier import pack as mpack
from memtier._index import parse_index


def _tree(root) -> dict:
    """Make a source tree; returns {relative '/' path: bytes} of what must be packed."""
    rng = np.random.default_rng(7)
    files = {
        "a.txt": b"hello\n",
        "b/c.bin": rng.integers(0, 256, 70_000, dtype=np.uint8).tobytes(),
        "b/empty": b"",
        "b-c.txt": b"dash sorts before slash by byte, after it by component",
        "z/y/x/deep.json": json.dumps({"k": list(range(50))}).encode(),
        "sp ace/\u00e9t\u00e9.txt": "unicode name".encode(),
        "big.dat": rng.integers(0, 256, 3 << 20, dtype=np.uint8).tobytes(),
    }
    for rel, data in files.items():
        p = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    os.symlink(os.path.join(root, "a.txt"), os.path.join(root, "link_to_a"))
    files["link_to_a"] = files["a.txt"]
    os.makedirs(os.path.join(root, "emptydir"))
    os.symlink(os.path.join(root, "b"), os.path.join(root, "link_to_dir"))  # not descended into
    return files


def _sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _run(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtier.pack", *map(str, args)],
                          capture_output=True, text=True, timeout=120, **kw)


def test_pack_cli_round_trip_through_memtier_dataset(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    files = _tree(src)
    out = tmp_path / "out" / "ds"
    out.parent.mkdir()
    r = _run(src, out, "--quiet")
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "out" / "ds.manifest.json").read_text())
    assert man["format"] == "memtier-pack" and man["version"] == 1
    assert man["data"] == "ds.data" and man["index"] == "ds.idx"
    assert man["shuffle_seed"] is None
    assert man["files"] == sorted(files), "samples are sorted by relative '/' path"
    assert man["samples"] == len(files)
    assert man["bytes"] == sum(len(v) for v in files.values())
    ds = memtier.MemTierDataset(str(out) + ".idx", str(out) + ".data")
    assert len(ds) == len(files)
    for i, rel in enumerate(man["files"]):
        got = ds[i]
        got = got.numpy() if hasattr(got, "numpy") else got
        assert bytes(got) == files[rel], rel
    # the batched path as well
    batch = ds.__getitems__(list(range(len(ds))))
    for i, rel in enumerate(man["files"]):
        got = batch[i].numpy() if hasattr(batch[i], "numpy") else batch[i]
        assert bytes(got) == files[rel]
    # the index is the text form, parsed identically by memtier._index
    ranges = parse_index(str(out) + ".idx", os.path.getsize(str(out) + ".data"))
    assert ranges.shape == (len(files), 2)
    assert ranges[0, 0] == 0 and int(ranges[:, 1].sum()) == man["bytes"]
    assert (ranges[1:, 0] == np.cumsum(ranges[:-1, 1])).all(), "samples are back to back"
    text = (tmp_path / "out" / "ds.idx").read_text()
    assert text.startswith("#") and text.endswith("\n")
    assert not list((tmp_path / "out").glob("*.tmp-*")), "temporary files left behind"


def test_pack_is_reproducible(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _tree(src)
    outs = []
    for k in range(2):
        out = tmp_path / f"run{k}" / "ds"
        out.parent.mkdir()
        mpack.pack(src, out)
        outs.append(out)
    for ext in (".data", ".idx", ".manifest.json"):
        assert _sha(str(outs[0]) + ext) == _sha(str(outs[1]) + ext), ext
    # the same with a shuffle seed; a different seed gives another order
    for k in (1, 2, 3):
        (tmp_path / f"x{k}").mkdir()
    a = mpack.pack(src, tmp_path / "x1" / "s", shuffle_seed=42)
    b = mpack.pack(src, tmp_path / "x2" / "s", shuffle_seed=42)
    c = mpack.pack(src, tmp_path / "x3" / "s", shuffle_seed=43)
    for ext in (".data", ".idx", ".manifest.json"):
        assert _sha(str(tmp_path / "x1" / "s") + ext) == _sha(str(tmp_path / "x2" / "s") + ext)
    assert a.files == b.files and sorted(a.files) == sorted(c.files)
    assert a.files != sorted(a.files) or c.files != sorted(c.files)
    assert a.files != c.files
    assert json.loads((tmp_path / "x1" / "s.manifest.json").read_text())["shuffle_seed"] == 42


def test_shuffle_order_is_a_fixed_permutation():
    for n in (0, 1, 2, 10, 1000):
        o = mpack.shuffle_order(n, 5)
        assert sorted(o) == list(range(n))
        assert o == mpack.shuffle_order(n, 5)
    # pinned: the order must not change between versions (reproducible packs)
    assert mpack.shuffle_order(10, 1) == [4, 2, 8, 1, 9, 3, 0, 6, 7, 5]


def test_manifest_maps_samples_to_sources_after_shuffle(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    files = _tree(src)
    res = mpack.pack(src, tmp_path / "ds", shuffle_seed=3)
    man = json.loads((tmp_path / "ds.manifest.json").read_text())
    assert man["files"] == res.files
    ds = memtier.MemTierDataset(res.index_path, res.data_path)
    for i, rel in enumerate(res.files):
        got = ds[i]
        got = got.numpy() if hasattr(got, "numpy") else got
        assert bytes(got) == files[rel]


def test_pack_output_inside_src_is_not_packed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "one.txt").write_bytes(b"1")
    res = mpack.pack(src, src / "packed")
    assert res.files == ["one.txt"]
    res = mpack.pack(src, src / "packed")  # rerun: its own (old) outputs are still excluded
    assert res.files == ["one.txt"]
    res2 = mpack.pack(src, src / "other")  # another prefix: the first outputs are input now
    assert res2.files == ["one.txt", "packed.data", "packed.idx", "packed.manifest.json"]


def test_pack_errors(tmp_path):
    r = _run(tmp_path / "missing", tmp_path / "o")
    assert r.returncode == 1 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    r = _run(empty, tmp_path / "o")
    assert r.returncode == 1 and "no regular file" in r.stderr
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x")
    r = _run(src, tmp_path / "no" / "such" / "dir" / "o")
    assert r.returncode == 1 and "does not exist" in r.stderr
    r = _run(src / "f", tmp_path / "o")
    assert r.returncode == 1 and "not a directory" in r.stderr
    r = _run(src)
    assert r.returncode == 2  # argparse usage error
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            r = _run(src, ro / "o")
            assert r.returncode == 1 and "cannot write" in r.stderr
        finally:
            ro.chmod(0o700)
    with pytest.raises(mpack.PackError, match="does not exist"):
        mpack.pack(tmp_path / "missing", tmp_path / "o")
    assert not list(tmp_path.glob("o.*")), "a failed pack left outputs"


def test_pack_output_dir_is_a_directory(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x")
    (tmp_path / "o.data").mkdir()
    with pytest.raises(mpack.PackError, match="is a directory"):
        mpack.pack(src, tmp_path / "o")


def test_pack_progress_bar_optional(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"abc")
    # without tqdm: silently no bar
    monkeypatch.setitem(sys.modules, "tqdm", None)
    res = mpack.pack(src, tmp_path / "a", quiet=False)
    assert res.samples == 1
    monkeypatch.delitem(sys.modules, "tqdm")
    # with tqdm, when the input is "large": a bar on stderr
    pytest.importorskip("tqdm")
    r = _run(src, tmp_path / "b")  # small input, stderr a pipe: no bar, one summary line
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("memtier.pack: 1 files, 3 bytes") and "%|" not in r.stderr
    r2 = subprocess.run(
        [sys.executable, "-c",
         "import sys; from memtier import pack as p; p._LARGE_FILES = 0; "
         f"sys.exit(p.main([{str(src)!r}, {str(tmp_path / 'c')!r}]))"],
        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    assert "memtier.pack: 100%|" in r2.stderr and "B/s" in r2.stderr, r2.stderr  # tqdm's bar
    r3 = subprocess.run(
        [sys.executable, "-c",
         "import sys; from memtier import pack as p; p._LARGE_FILES = 0; "
         f"sys.exit(p.main([{str(src)!r}, {str(tmp_path / 'd')!r}, '--quiet']))"],
        capture_output=True, text=True, timeout=60)
    assert r3.returncode == 0 and r3.stderr == ""
