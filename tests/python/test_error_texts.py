"""Error texts (issue 11 part 3): one message style, the caller's range and
API name, the file's size, sizes checked before allocation.

Exact messages. tests/python/test_limits_errors.py and test_tar_errors.py
hold the earlier cases (gzip/zstd shards, brace patterns, the size check of
memtier.read); this file holds what the audit changed.
"""

from __future__ import annotations

import io
import os
import struct
import tarfile

import numpy as np
import pytest

import memtier
import memtier.safetensors as mts
from memtier.dataset import MemTierDataset
from memtier.webdataset import TarShardDataset


def small(tmp_path, n=10000):
    p = str(tmp_path / "small.bin")
    with open(p, "wb") as f:
        f.write(b"x" * n)
    return p


def test_eof_names_the_callers_range_and_the_size_without_a_generic_prefix(tmp_path):
    p = small(tmp_path)
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.read(p, 0, 200 << 20)
    assert str(ei.value) == (f"memtier.read: read {p} at offset 0: range [0, 209715200) runs past "
                             "end of file (size 10000)")


def test_a_range_past_2_63_names_the_read_not_its_precheck(tmp_path):
    # memtier.read checks a large range with memtier_explain before it allocates; the
    # message is the read's, not "explain" (a fresh user's report).
    p = small(tmp_path)
    for off, n in ((0, 2**63), (2**62, 2**62)):
        with pytest.raises(memtier.InvalidArgumentError) as ei:
            memtier.read(p, off, n)
        assert str(ei.value) == (f"memtier.read: read {p}: offset {off} + size {n} is beyond the "
                                 "largest file offset (2^63 - 1)")
        assert ei.value.code == memtier.InvalidArgumentError.code


def test_load_tensor_checks_the_size_before_allocating(tmp_path):
    # 64 GiB past the end of a 10 KB file: the library's answer, not the
    # allocator's (torch.empty of 64 GiB would fail or take seconds first)
    p = small(tmp_path)
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.load_tensor(p, 0, (1 << 34,), "float32")
    assert str(ei.value) == (f"memtier.load_tensor: read {p} at offset 0: range [0, 68719476736) "
                             "runs past end of file (size 10000)")


def test_a_destination_too_large_for_memory_is_a_memory_error_with_a_message(tmp_path):
    p = str(tmp_path / "sparse.bin")
    with open(p, "wb") as f:
        f.truncate(1 << 40)  # 1 TiB, sparse: the range is inside the file
    n = 1 << 40
    with pytest.raises(MemoryError) as ei:
        memtier.read(p, 0, n)
    assert str(ei.value) == (f"memtier.read: {p}: no memory for a {n}-byte result (range [0, {n})); "
                             "read smaller ranges, or read_into a buffer you own")
    with pytest.raises(MemoryError) as ei:
        memtier.load_tensor(p, 0, (n,), "uint8")
    assert str(ei.value) == (f"memtier.load_tensor: {p}: no memory for a {n}-byte tensor (range "
                             f"[0, {n})); load smaller pieces, or read_into_tensor a tensor you own")


def test_not_found_and_is_a_directory_name_the_path_once(tmp_path):
    missing = str(tmp_path / "missing.bin")
    with pytest.raises(memtier.NotFoundError) as ei:
        memtier.read(missing, 0, 4)
    e = ei.value
    assert str(e) == f"[Errno 2] memtier.read: open {missing}: no such file or directory"
    assert e.errno == 2 and e.filename == missing
    with pytest.raises(memtier.IsDirectoryError) as ei:
        memtier.read(str(tmp_path), 0, 4)
    assert str(ei.value) == f"[Errno 21] memtier.read: open {tmp_path}: is a directory"


def test_format_errors_have_no_generic_prefix(tmp_path):
    p = str(tmp_path / "bad.safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 4) + b"{xx}")
    for api, fn in (("safe_open", lambda: mts.safe_open(p, framework="np")),
                    ("load_file", lambda: mts.load_file(p, framework="np"))):
        with pytest.raises(memtier.FormatError) as ei:
            fn()
        assert str(ei.value) == (f"memtier.safetensors.{api}: safetensors {p} at offset 9: invalid "
                                 "JSON: invalid character 'x' looking for beginning of object key string")


def test_tar_errors_name_the_dataset_not_the_c_function(tmp_path):
    p = str(tmp_path / "a.tar.gz")
    with tarfile.open(p, "w:gz") as t:
        ti = tarfile.TarInfo("x.bin")
        ti.size = 3
        t.addfile(ti, io.BytesIO(b"abc"))
    with pytest.raises(memtier.FormatError) as ei:
        TarShardDataset(p)
    assert str(ei.value) == (
        f"TarShardDataset: tar {p} at offset 0: compressed archive: the file is gzip-compressed (it "
        "starts with 1f 8b); MemTier reads members of uncompressed tar shards by byte range, so "
        "decompress it first (gunzip)")


def test_context_errors_name_the_context(tmp_path):
    with pytest.raises(memtier.InvalidArgumentError) as ei:
        memtier.Context(io_threads=100000)
    assert str(ei.value) == "memtier.Context: config: io_threads 100000 not in [1, 256]"


def test_dataset_read_errors_name_the_sample(tmp_path):
    p = str(tmp_path / "data.bin")
    with open(p, "wb") as f:
        f.write(b"x" * 100)
    idx = str(tmp_path / "i.npy")
    np.save(idx, np.array([[0, 4], [90, 10]], dtype=np.int64))
    ds = MemTierDataset(idx, p)
    os.truncate(p, 50)  # the file shrank after the index was checked
    want = f"MemTierDataset sample 1: read {p} at offset 90: range [90, 100) runs past end of file (size 50)"
    with pytest.raises(memtier.EndOfFileError) as ei:
        ds[1]
    assert str(ei.value) == want
    with pytest.raises(memtier.EndOfFileError) as ei:
        ds.__getitems__([0, 1])
    assert str(ei.value) == want and ei.value.sample == 1


def test_unknown_memtier_variable_warns_with_the_closest_name(run_py):
    r = run_py("""
        import memtier
        memtier.Context().close()
        memtier.Context().close()
        print("OK")
    """, env={"MEMTIER_CACHE_BYTEZ": "1", "MEMTIER_LOGG": "info"})  # misspelled on purpose
    assert r.returncode == 0 and r.stdout == "OK\n", r.stderr
    assert r.stderr.splitlines() == [
        "memtier: warning: unknown environment variable MEMTIER_CACHE_BYTEZ (did you mean "  # misspelled on purpose
        "MEMTIER_CACHE_BYTES?); it is ignored",
        "memtier: warning: unknown environment variable MEMTIER_LOGG (did you mean MEMTIER_LOG?); "  # misspelled on purpose
        "it is ignored"]


def test_tar_read_errors_name_the_shard_once(tmp_path):
    p = str(tmp_path / "s.tar")
    with tarfile.open(p, "w", format=tarfile.USTAR_FORMAT) as t:
        for k in range(3):
            ti = tarfile.TarInfo("s%d.bin" % k)
            ti.size = 1000
            t.addfile(ti, io.BytesIO(b"y" * 1000))
    ds = TarShardDataset(p)
    os.truncate(p, 1500)  # the shard changed after the dataset was built
    with pytest.raises(memtier.MemTierError) as ei:
        ds[2]
    assert str(ei.value) == (f"TarShardDataset: member 2: load {p}: file changed since open (size, "
                             "mtime or inode differ): open it again")


def test_cuda_errors_quote_the_dlopen_text_once(run_py):
    r = run_py("""
        import memtier
        try:
            memtier.load_tensor(__file__, 0, (4,), "uint8", device="cuda")
        except memtier.UnsupportedError as e:
            print(str(e).count("cannot open shared object file"), e.gpu_info.count("cannot open shared object file"))
    """, env={"MEMTIER_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"})
    assert r.returncode == 0 and r.stdout == "1 1\n", (r.stdout, r.stderr)
