"""Field case N09 (tests/field_cases.md): tar shard keys, member types and
sparse members, grouped as WebDataset groups them.

Every shard is built here in ``tmp_path``: ``keys.tar`` (tarfile, GNU format)
with member i holding ``f"{i}:{name}"``, ``dup.tar`` (one name twice),
``links.tar`` (GNU tar: a hard link and a symlink), ``sparse_pax.tar`` and
``sparse_gnu.tar`` (GNU tar ``-S``: a 1 MiB sparse member) and a shard whose
names are latin-1 bytes. The expected samples are fixed below; where
``webdataset`` is importable, ``webdataset.WebDataset(t, shardshuffle=False)``
must yield the same (its ``__local_path__`` entry aside).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from typing import List, Optional, Tuple

import pytest

import memtier
from memtier.webdataset import TarShardDataset

# keys.tar, in archive order (member i holds f"{i}:{name}")
MEMBERS = [
    "a/22.0/1.1.png", "a/22.0/1.1.json",
    "./235342 Track 2.0 (Clean Version).mp3", "./235342 Track 2.0 (Clean Version).json",
    "S_02/x_VE1.wav.data", "S_02/x_VE1.wav.label",
    "noext", "dir.d/noext",
    "b.JPG", "b.Cls", "c.jpg", "d.jpg", "c.txt",
    ".hidden", "e..jpg", "e..txt",
    "__meta__.json", "f/__x__.jpg", "f/__x__.txt",
    "g.tar.gz", "g.seg.png", "h.jpg",
    "__key__.jpg", "__url__.txt", "__x__",
    "k/__y__/z.jpg", "k.jpg", "K.JPG",
]

# key -> [(extension, member name)], in order. Members are grouped only when
# consecutive ("c" twice); noext, dir.d/noext, .hidden and __x__ are skipped.
EXPECTED = [
    ("a/22.0/1", [("1.png", "a/22.0/1.1.png"), ("1.json", "a/22.0/1.1.json")]),
    ("./235342 Track 2", [("0 (clean version).mp3", "./235342 Track 2.0 (Clean Version).mp3"),
                          ("0 (clean version).json", "./235342 Track 2.0 (Clean Version).json")]),
    ("S_02/x_VE1", [("wav.data", "S_02/x_VE1.wav.data"), ("wav.label", "S_02/x_VE1.wav.label")]),
    ("b", [("jpg", "b.JPG"), ("cls", "b.Cls")]),
    ("c", [("jpg", "c.jpg")]),
    ("d", [("jpg", "d.jpg")]),
    ("c", [("txt", "c.txt")]),
    ("e", [(".jpg", "e..jpg"), (".txt", "e..txt")]),
    ("__meta__", [("json", "__meta__.json")]),
    ("f/__x__", [("jpg", "f/__x__.jpg"), ("txt", "f/__x__.txt")]),
    ("g", [("tar.gz", "g.tar.gz"), ("seg.png", "g.seg.png")]),
    ("h", [("jpg", "h.jpg")]),
    ("__key__", [("jpg", "__key__.jpg")]),
    ("__url__", [("txt", "__url__.txt")]),
    ("k/__y__/z", [("jpg", "k/__y__/z.jpg")]),
    ("k", [("jpg", "k.jpg")]),
    ("K", [("jpg", "K.JPG")]),
]

SPARSE_SIZE = 1 << 20
SPARSE_AT = 500_000


def _member(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    ti.mtime = 1_700_000_000
    ti.mode = 0o644
    tf.addfile(ti, io.BytesIO(data))


def _tar(members: List[Tuple[str, bytes]], path, encoding: str = "utf-8") -> str:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT, encoding=encoding) as tf:
        for name, data in members:
            _member(tf, name, data)
    return str(path)


def _samples(ds: TarShardDataset) -> list:
    return [ds[i] for i in range(len(ds))]


def _wds(path: str) -> Optional[list]:
    """What webdataset yields for path, or None where webdataset is not installed."""
    try:
        import webdataset
    except ImportError:
        return None
    return [{k: v for k, v in s.items() if k != "__local_path__"}
            for s in webdataset.WebDataset(path, shardshuffle=False)]


def _gnu_tar(*need: str) -> str:
    """The tar program, or the test is skipped when there is none (or it lacks an option)."""
    tar = shutil.which("tar")
    if tar is None:
        pytest.skip("no tar program: links.tar and the sparse shards are written with GNU tar")
    out = subprocess.run([tar, "--help"], capture_output=True, text=True).stdout
    for opt in need:
        if opt not in out:
            pytest.skip("this tar has no %s option (GNU tar has it)" % opt)
    return tar


def test_keys_and_extensions_as_webdataset_splits_them(tmp_path):
    path = _tar([(name, f"{i}:{name}".encode()) for i, name in enumerate(MEMBERS)], tmp_path / "keys.tar")
    want = []
    for key, exts in EXPECTED:
        s = {"__key__": key, "__url__": path}
        for ext, name in exts:
            s[ext] = f"{MEMBERS.index(name)}:{name}".encode()
        want.append(s)
    ds = TarShardDataset(path)
    assert len(ds) == len(EXPECTED)
    got = _samples(ds)
    assert [(s["__key__"], [k for k in s if k not in ("__key__", "__url__")]) for s in got] == \
        [(key, [e for e, _ in exts]) for key, exts in EXPECTED]
    assert got == want
    assert ds.__getitems__(list(range(len(ds)))) == want
    assert [ds.key(i) for i in range(len(ds))] == [key for key, _ in EXPECTED]
    assert ds.num_members == sum(len(exts) for _, exts in EXPECTED)
    ref = _wds(path)
    if ref is not None:
        assert got == ref


def test_duplicate_member_is_a_value_error_naming_it(tmp_path):
    path = _tar([("h.jpg", b"1"), ("h.jpg", b"2")], tmp_path / "dup.tar")
    with pytest.raises(memtier.FormatError) as ei:
        TarShardDataset(path)
    e = ei.value
    assert isinstance(e, ValueError)
    assert str(e) == "TarShardDataset: %s: h.jpg: duplicate file name in tar file jpg (sample 'h' already has it)" \
        % path, str(e)
    try:
        import webdataset
    except ImportError:
        return
    with pytest.raises(ValueError, match=r"h\.jpg: duplicate file name in tar file jpg"):
        list(webdataset.WebDataset(path, shardshuffle=False))


def test_hard_link_and_symlink_carry_no_data(tmp_path):
    tar = _gnu_tar("--format")
    src = tmp_path / "links"
    src.mkdir()
    (src / "a.jpg").write_bytes(b"A-jpg")
    (src / "a.cls").write_bytes(b"a-cls")
    os.link(src / "a.jpg", src / "b.jpg")
    (src / "b.cls").write_bytes(b"b-cls")
    os.symlink("a.jpg", src / "c.jpg")
    (src / "c.cls").write_bytes(b"c-cls")
    path = str(tmp_path / "links.tar")
    subprocess.run([tar, "--format=gnu", "-cf", path, "-C", str(src),
                    "a.jpg", "a.cls", "b.jpg", "b.cls", "c.jpg", "c.cls"], check=True)
    with tarfile.open(path) as tf:  # the archive holds what this test is about
        assert [(m.name, m.type) for m in tf] == [
            ("a.jpg", tarfile.REGTYPE), ("a.cls", tarfile.REGTYPE), ("b.jpg", tarfile.LNKTYPE),
            ("b.cls", tarfile.REGTYPE), ("c.jpg", tarfile.SYMTYPE), ("c.cls", tarfile.REGTYPE)]
    want = [{"__key__": "a", "__url__": path, "jpg": b"A-jpg", "cls": b"a-cls"},
            {"__key__": "b", "__url__": path, "cls": b"b-cls"},
            {"__key__": "c", "__url__": path, "cls": b"c-cls"}]
    got = _samples(TarShardDataset(path))
    assert got == want
    ref = _wds(path)
    if ref is not None:
        assert ref == want


@pytest.mark.parametrize("fmt", ["pax", "gnu"])
def test_sparse_member_is_refused_by_name(tmp_path, fmt):
    tar = _gnu_tar("--format", "--sparse")
    src = tmp_path / "sparse"
    src.mkdir()
    with open(src / "d.bin", "wb") as f:
        f.truncate(SPARSE_SIZE)
        f.seek(SPARSE_AT)
        f.write(b"XYZ")
    (src / "d.cls").write_bytes(b"7")
    path = str(tmp_path / f"sparse_{fmt}.tar")
    subprocess.run([tar, f"--format={fmt}", "-S", "-cf", path, "-C", str(src), "d.bin", "d.cls"], check=True)
    with tarfile.open(path) as tf:
        first = tf.next()
        assert first is not None and first.name == "d.bin"
        if not first.issparse():
            pytest.skip("the file system of tmp_path keeps no holes, so tar -S wrote d.bin as a plain member")
    with pytest.raises(memtier.FormatError) as ei:
        TarShardDataset(path)
    msg = str(ei.value)
    kind = "pax GNU.sparse records" if fmt == "pax" else "typeflag 'S'"
    assert 'unsupported member "d.bin": GNU sparse file (%s); its data is not one contiguous range' % kind \
        in msg, msg
    ref = _wds(path)
    if ref is not None:  # what a reader that expands the holes gives; MemTier never serves the packed data
        data = bytearray(SPARSE_SIZE)
        data[SPARSE_AT:SPARSE_AT + 3] = b"XYZ"
        assert ref == [{"__key__": "d", "__url__": path, "bin": bytes(data), "cls": b"7"}]


def test_latin1_name_keeps_its_byte_as_a_surrogate(tmp_path):
    path = _tar([("caf\u00e9.jpg", b"jpg"), ("caf\u00e9.txt", b"txt")], tmp_path / "latin1.tar",
                encoding="latin-1")
    with open(path, "rb") as f:
        assert f.read(9) == b"caf\xe9.jpg\x00"  # the name is the latin-1 byte, not UTF-8
    want = [{"__key__": "caf\udce9", "__url__": path, "jpg": b"jpg", "txt": b"txt"}]
    got = _samples(TarShardDataset(path))
    assert got == want
    ref = _wds(path)
    if ref is not None:
        assert ref == want
