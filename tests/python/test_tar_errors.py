"""TarShardDataset error texts for the shards users commonly pass by mistake
(issue 11): compressed shards and WebDataset brace patterns."""

from __future__ import annotations

import gzip
import os
import tarfile

import pytest

import memtier
from memtier.webdataset import TarShardDataset

from test_tar_dataset import make_shard


def test_gzip_shard_is_named_as_compressed(tmp_path):
    plain = make_shard(tmp_path / "s.tar", tarfile.USTAR_FORMAT, n=3)
    gz = tmp_path / "s.tar.gz"
    gz.write_bytes(gzip.compress(open(plain, "rb").read()))
    with pytest.raises(memtier.FormatError) as ei:
        TarShardDataset(str(gz))
    msg = str(ei.value)
    assert "compressed archive: the file is gzip-compressed (it starts with 1f 8b)" in msg, msg
    assert "decompress it first (gunzip)" in msg, msg
    assert "truncated" not in msg and "invalid header" not in msg, msg


def test_zstd_shard_is_named_as_compressed(tmp_path):
    zst = tmp_path / "s.tar.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(1020))
    with pytest.raises(memtier.FormatError, match="the file is zstd-compressed"):
        TarShardDataset(str(zst))


@pytest.mark.parametrize("pattern", ["shard-{000000..000009}.tar", "shard-{a,b}.tar"])
def test_brace_pattern_gets_a_hint(tmp_path, pattern):
    with pytest.raises(memtier.NotFoundError) as ei:
        TarShardDataset(str(tmp_path / pattern))
    e = ei.value
    assert isinstance(e, FileNotFoundError) and e.filename == str(tmp_path / pattern)
    assert "WebDataset brace pattern" in str(e) and "braceexpand.braceexpand(pattern)" in str(e), str(e)


def test_missing_plain_shard_has_no_brace_hint(tmp_path):
    with pytest.raises(memtier.NotFoundError) as ei:
        TarShardDataset(str(tmp_path / "missing.tar"))
    assert "brace" not in str(ei.value)
    assert "missing.tar" in str(ei.value)


def test_missing_shard_names_the_path_once(tmp_path):
    with pytest.raises(memtier.NotFoundError) as ei:
        TarShardDataset(str(tmp_path / "gone.tar"))
    assert str(ei.value) == "[Errno 2] TarShardDataset: file not found: '%s'" % (tmp_path / "gone.tar")


@pytest.mark.parametrize("spec", ["pipe:cat shard-000.tar", "ftp://127.0.0.1/x.tar", "gs://bucket/x.tar"])
def test_unreadable_shard_spec_is_refused_by_name(spec):
    # s3:// and http(s):// shards are read (tests/python/test_remote_apis.py);
    # a pipe: spec or another scheme is refused by name, not looked for on disk.
    with pytest.raises(ValueError, match="pipe: spec or a URL of a scheme MemTier does not read") as ei:
        TarShardDataset(spec)
    assert spec in str(ei.value)


def test_bytes_shard_path_is_accepted(tmp_path):
    path = make_shard(tmp_path / "s.tar", tarfile.USTAR_FORMAT, n=3)
    a, b = TarShardDataset(path), TarShardDataset(os.fsencode(path))
    assert len(a) == len(b) == 3 and a[1] == b[1]
