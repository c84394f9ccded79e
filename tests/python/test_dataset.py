"""MemTierDataset: samples, batches, DataLoader, samplers, pickling, fork safety.

Sample k's bytes are derived from k (see :func:`sample_bytes`; the first 4
bytes are k little-endian when the sample has 4 bytes), so a shuffled batch
can be checked byte for byte without knowing the sampler's order. Field
cases: B01 (fork, cases A-D), B02 (shared file offset), B07 (range past the
data file), B15f (empty sample). The process scenarios run in fresh
interpreters (tests/python/dataset_fork_cases.py) with a 120 s limit each.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import memtier
from memtier import _dtypes

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_SCRIPT = os.path.join(HERE, "dataset_fork_cases.py")


def sample_bytes(k: int, length: int) -> np.ndarray:
    """The content of sample k: byte j = (k*131 + j*7) % 251, first 4 bytes = k LE."""
    b = ((np.arange(length, dtype=np.int64) * 7 + k * 131) % 251).astype(np.uint8)
    head = np.frombuffer(int(k).to_bytes(4, "little"), dtype=np.uint8)
    b[: min(4, length)] = head[: min(4, length)]
    return b


def make_dataset_files(tmp, n, min_len=4, max_len=600, fmt="npy", seed=0, zero_every=0):
    """Write a data file holding n samples in a shuffled order with gaps, and its index."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    if zero_every:
        lengths[::zero_every] = 0
    order = rng.permutation(n)
    offsets = np.zeros(n, dtype=np.int64)
    chunks = []
    pos = 0
    for k in order.tolist():
        gap = int(rng.integers(0, 17))
        chunks.append(np.full(gap, 0xEE, dtype=np.uint8))
        pos += gap
        offsets[k] = pos
        chunks.append(sample_bytes(k, int(lengths[k])))
        pos += int(lengths[k])
    data = os.path.join(str(tmp), "data.bin")
    np.concatenate(chunks).tofile(data)
    ranges = np.stack([offsets, lengths], axis=1).astype(np.int64)
    if fmt == "npy":
        index = os.path.join(str(tmp), "index.npy")
        np.save(index, ranges)
    else:
        index = os.path.join(str(tmp), "index.txt")
        with open(index, "w") as f:
            f.write("# offset length\n")
            for o, ln in ranges.tolist():
                f.write("%d\t%d\n" % (o, ln))
    return index, data, ranges


def as_np(x) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def key_of(sample) -> int:
    return int.from_bytes(as_np(sample)[:4].tobytes(), "little")


def collate_list(batch):
    """Keep a batch as the list of samples (they have different lengths)."""
    return batch


def DS(*a, **kw):
    from memtier.dataset import MemTierDataset

    return MemTierDataset(*a, **kw)


def test_package_exports_dataset():
    from memtier import dataset

    assert memtier.MemTierDataset is dataset.MemTierDataset, (
        "memtier/__init__.py must re-export MemTierDataset from memtier.dataset")


# ------------------------------------------------------------------ basics


@pytest.mark.parametrize("fmt", ["npy", "text"])
def test_getitem_every_sample(tmp_path, fmt, has_torch):
    index, data, ranges = make_dataset_files(tmp_path, 400, min_len=0, max_len=400, fmt=fmt, zero_every=50)
    ds = DS(index, data)
    assert len(ds) == 400
    np.testing.assert_array_equal(ds.ranges, ranges)
    for k in range(len(ds)):
        s = ds[k]
        if has_torch:
            import torch

            assert isinstance(s, torch.Tensor) and s.dtype == torch.uint8 and s.dim() == 1
        else:
            assert type(s) is np.ndarray and s.dtype == np.uint8 and s.ndim == 1
        assert np.array_equal(as_np(s), sample_bytes(k, int(ranges[k, 1]))), k
    assert ds.io_path == "memtier" and ds.fallback_reads == 0


def test_negative_and_out_of_range_indices(tmp_path):
    index, data, ranges = make_dataset_files(tmp_path, 10)
    ds = DS(index, data)
    assert np.array_equal(as_np(ds[-1]), sample_bytes(9, int(ranges[9, 1])))
    assert np.array_equal(as_np(ds[-10]), sample_bytes(0, int(ranges[0, 1])))
    assert np.array_equal(as_np(ds[np.int64(3)]), sample_bytes(3, int(ranges[3, 1])))
    for bad in (10, -11, 1 << 70):
        with pytest.raises(IndexError):
            ds[bad]
    with pytest.raises(TypeError):
        ds[1.0]
    with pytest.raises(IndexError):
        ds.__getitems__([0, 10])
    with pytest.raises(IndexError):
        ds.__getitems__([-11])
    with pytest.raises(TypeError):
        ds.__getitems__([0.5, 1.5])
    assert ds.__getitems__([]) == []
    # iteration stops at the end (the list-like protocol)
    assert sum(1 for _ in ds) == 10


def test_getitems_one_readv_and_exact(tmp_path):
    index, data, ranges = make_dataset_files(tmp_path, 500, min_len=0, max_len=500, zero_every=7)
    ds = DS(index, data)
    ds[1]  # a non-empty sample: creates this process's context
    ctx = ds._proc.ctx
    idx = [5, 3, 499, -1, 7, 7, 0, 14, 250]
    before = ctx.stats().readv_calls
    out = ds.__getitems__(idx)
    assert ctx.stats().readv_calls - before == 1
    assert len(out) == len(idx)
    for i, s in zip(idx, out):
        k = i % 500
        assert np.array_equal(as_np(s), sample_bytes(k, int(ranges[k, 1]))), i


def test_getitems_negative_and_bad_indices_name_the_sample(tmp_path):
    # A batch of ints gathers with one bounds-checked take(): out-of-range
    # indices raise the dataset's own text, negative ones count from the end,
    # and a read error names the resolved sample.
    p = str(tmp_path / "data.bin")
    with open(p, "wb") as f:
        f.write(bytes(range(100)))
    idx = str(tmp_path / "i.npy")
    np.save(idx, np.array([[0, 4], [90, 10]], dtype=np.int64))
    ds = DS(idx, p)
    with pytest.raises(IndexError) as ei:
        ds.__getitems__([0, -3])
    assert str(ei.value) == "MemTierDataset index -3 out of range for 2 samples"
    with pytest.raises(IndexError) as ei:
        ds.__getitems__([1, 2])
    assert str(ei.value) == "MemTierDataset index 2 out of range for 2 samples"
    got = [as_np(s).tobytes() for s in ds.__getitems__([-1, -2, 1, 0])]
    assert got == [bytes(range(90, 100)), bytes(range(4)), bytes(range(90, 100)), bytes(range(4))]
    os.truncate(p, 50)
    with pytest.raises(memtier.EndOfFileError) as ei:
        ds.__getitems__([0, -1])
    assert ei.value.sample == 1
    assert str(ei.value).startswith("MemTierDataset sample 1: read %s at offset 90" % p)


def test_getitems_batches_do_not_alias(tmp_path):
    index, data, ranges = make_dataset_files(tmp_path, 64, min_len=4, max_len=64)
    ds = DS(index, data)
    first = ds.__getitems__(list(range(32)))
    kept = [as_np(s).copy() for s in first]
    for _ in range(3):
        ds.__getitems__(list(range(32, 64)))
    for k, s in enumerate(first):
        assert np.array_equal(as_np(s), kept[k]) and np.array_equal(kept[k], sample_bytes(k, int(ranges[k, 1])))


def test_transform_applies_to_both_paths(tmp_path):
    index, data, ranges = make_dataset_files(tmp_path, 20, min_len=4, max_len=40)
    ds = DS(index, data, transform=key_of)
    assert ds[7] == 7
    assert ds.__getitems__([3, 1, 19]) == [3, 1, 19]
    with pytest.raises(TypeError):
        DS(index, data, transform=42)


def test_targets_and_options(tmp_path):
    index, data, _ = make_dataset_files(tmp_path, 4)
    from memtier import _dtypes

    torch = _dtypes.torch_module()
    for t, want in (("cuda", "cuda:0"), ("cuda:0", "cuda:0"), ("CUDA:1", "cuda:1")):
        if torch is None:  # CUDA tensors need torch: refused when built, naming torch.cuda
            with pytest.raises(memtier.UnsupportedError) as ei:
                DS(index, data, target=t)
            assert isinstance(ei.value, NotImplementedError) and "torch.cuda" in str(ei.value)
            continue
        ds = DS(index, data, target=t)  # builds without touching CUDA
        assert ds.target == want
        if not torch.cuda.is_available():  # checked at the first read (tests/python/test_gpu_double.py)
            with pytest.raises(memtier.UnsupportedError, match="torch.cuda"):
                ds[0]
    with pytest.raises(ValueError):
        DS(index, data, target="tpu")
    with pytest.raises(ValueError):
        DS(index, data, target="cuda:x")
    with pytest.raises(TypeError):
        DS(index, data, context_options={"no_such_key": 1})
    ds = DS(index, data, context_options={"cache_bytes": 0, "io_threads": 2})
    assert ds[0] is not None and ds._proc.ctx.config()["io_threads"] == 2


def test_missing_files(tmp_path):
    index, data, _ = make_dataset_files(tmp_path, 4)
    with pytest.raises(FileNotFoundError):
        DS(index, data + ".nope")
    with pytest.raises(FileNotFoundError):
        DS(index + ".nope", data)
    with pytest.raises(IsADirectoryError):
        DS(index, str(tmp_path))


def test_building_loads_nothing(run_py, tmp_path):
    """Import and construction never load libmemtier.so (the fork-safety premise)."""
    index, data, _ = make_dataset_files(tmp_path, 8)
    r = run_py(
        """
        import sys, memtier
        from memtier.dataset import MemTierDataset
        ds = MemTierDataset(sys.argv[1], sys.argv[2])
        len(ds); import pickle; pickle.loads(pickle.dumps(ds))
        assert memtier._ffi.loaded() is None
        assert "libmemtier" not in open("/proc/self/maps").read()
        print("OK")
        """,
        args=(index, data),
        timeout=120,
    )
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


# ---------------------------------------------------------------- pickling


def test_pickle_round_trip_has_no_cffi_state(tmp_path):
    index, data, ranges = make_dataset_files(tmp_path, 50, min_len=0, max_len=100, zero_every=9)
    ds = DS(index, data, transform=None, context_options={"cache_bytes": 1 << 20})
    ds[1]  # the context exists now; it must not travel
    assert ds.io_path == "memtier"
    blob = pickle.dumps(ds)
    for needle in (b"_cffi", b"CData", b"memtier._context", b"Context"):
        assert needle not in blob, needle
    ds2 = pickle.loads(blob)
    assert ds2._proc is None and len(ds2) == 50 and ds2.data_file == ds.data_file
    assert ds2._context_options == {"cache_bytes": 1 << 20}
    for k in range(50):
        assert np.array_equal(as_np(ds2[k]), sample_bytes(k, int(ranges[k, 1])))
    for s, k in zip(ds2.__getitems__(list(range(50))), range(50)):
        assert np.array_equal(as_np(s), sample_bytes(k, int(ranges[k, 1])))


# ------------------------------------------------------------------ errors


def test_b07_index_past_end_of_data_file(tmp_path):
    data = tmp_path / "d.bin"
    data.write_bytes(bytes(100))
    txt = tmp_path / "i.txt"
    txt.write_text("0 10\n# c\n90 10\n95 10\n")
    with pytest.raises(memtier.FormatError) as ei:
        DS(str(txt), str(data))
    e = ei.value
    assert isinstance(e, ValueError) and e.kind == "past_end" and e.line == 4
    assert "line 4: range [95, 105) is past the end of the data file (100 bytes)" in str(e)
    assert str(txt) in str(e)
    npy = tmp_path / "i.npy"
    np.save(npy, np.array([[0, 100], [100, 0], [96, 5]], dtype="<u8"))
    with pytest.raises(memtier.FormatError) as ei:
        DS(str(npy), str(data))
    assert ei.value.row == 2 and "row 2: range [96, 101)" in str(ei.value)


def test_b07_data_file_truncated_after_build(tmp_path):
    """A range that ends past EOF at read time raises EndOfFileError, no garbage."""
    index, data, ranges = make_dataset_files(tmp_path, 40, min_len=10, max_len=20)
    ds = DS(index, data)
    last = int(np.argmax(ranges[:, 0]))
    os.truncate(data, int(ranges[last, 0]) + 1)
    with pytest.raises(memtier.EndOfFileError):
        ds[last]
    with pytest.raises(memtier.EndOfFileError) as ei:
        ds.__getitems__([0, last])
    assert ei.value.sample == last and "sample %d" % last in str(ei.value)


def test_b15f_empty_sample(tmp_path, has_torch):
    data = tmp_path / "d.bin"
    data.write_bytes(b"abcdef")
    idx = tmp_path / "i.txt"
    idx.write_text("0 3\n3 0\n6 0\n3 3\n")
    ds = DS(str(idx), str(data))
    assert as_np(ds[1]).shape == (0,) and as_np(ds[2]).shape == (0,)
    out = ds.__getitems__([1, 2])
    assert [as_np(s).shape for s in out] == [(0,), (0,)]
    out = ds.__getitems__([2, 0, 1, 3])
    assert [as_np(s).tobytes() for s in out] == [b"", b"abc", b"", b"def"]
    if has_torch:
        from torch.utils.data import DataLoader

        batches = list(DataLoader(ds, batch_size=1))
        assert [tuple(b.shape) for b in batches] == [(1, 3), (1, 0), (1, 0), (1, 3)]
        assert batches[1].numel() == 0 and bytes(batches[3].numpy()) == b"def"


# -------------------------------------------------------------- DataLoader


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_shuffle_pin_memory_byte_exact(tmp_path, torch, workers):
    from torch.utils.data import DataLoader

    n = 2000
    index, data, ranges = make_dataset_files(tmp_path, n, min_len=4, max_len=700)
    ds = DS(index, data)
    accel = torch.cuda.is_available()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dl = DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers, pin_memory=True,
                        collate_fn=collate_list, multiprocessing_context="fork" if workers else None,
                        timeout=60 if workers else 0)
        seen = []
        for batch in dl:
            assert isinstance(batch, list) and 1 <= len(batch) <= 32
            for s in batch:
                assert isinstance(s, torch.Tensor) and s.dtype == torch.uint8
                k = key_of(s)
                assert 0 <= k < n and np.array_equal(s.numpy(), sample_bytes(k, int(ranges[k, 1]))), k
                if accel:
                    assert s.is_pinned()
                seen.append(k)
    assert sorted(seen) == list(range(n))
    assert seen != list(range(n)), "shuffle=True gave the identity order"
    if not accel:  # torch refuses pinning without an accelerator, and says so
        msgs = [str(w.message) for w in caught]
        assert any("pin_memory" in m for m in msgs), msgs


def test_pin_memory_pins_batches(tmp_path, torch):
    """With an accelerator, pin_memory=True gives pinned samples (a list collate)."""
    from torch.utils.data import DataLoader

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch warns that pin_memory is ignored and returns unpinned "
                    "batches (that warning is asserted in test_dataloader_shuffle_pin_memory_byte_exact)")
    index, data, ranges = make_dataset_files(tmp_path, 256, min_len=4, max_len=300)
    ds = DS(index, data)
    for batch in DataLoader(ds, batch_size=32, pin_memory=True, collate_fn=collate_list):
        assert all(s.is_pinned() for s in batch)
        for s in batch:
            k = key_of(s)
            assert np.array_equal(s.numpy(), sample_bytes(k, int(ranges[k, 1])))


def test_dataloader_default_collate_fixed_length(tmp_path, torch):
    """Equal-length samples through the default collate: a (B, L) uint8 tensor per batch."""
    from torch.utils.data import DataLoader

    n, L = 1000, 64
    index, data, ranges = make_dataset_files(tmp_path, n, min_len=L, max_len=L)
    ds = DS(index, data)
    seen = []
    for workers in (0, 2):
        for batch in DataLoader(ds, batch_size=32, shuffle=True, num_workers=workers,
                                multiprocessing_context="fork" if workers else None):
            assert batch.dtype == torch.uint8 and batch.shape[1] == L
            for row in batch:
                k = key_of(row)
                assert np.array_equal(row.numpy(), sample_bytes(k, L))
                seen.append(k)
    assert sorted(seen) == sorted(list(range(n)) * 2)


def test_dataloader_workers_report_their_io_path(tmp_path, torch):
    """Fork workers read through their own MemTier runtime, or through the
    os.pread fallback when this (pytest) process had loaded MemTier already."""
    from torch.utils.data import DataLoader

    index, data, ranges = make_dataset_files(tmp_path, 200)
    ds = DS(index, data)
    parent_loaded = memtier._ffi.loaded() is not None

    def collate(batch):  # runs in the worker; fork start: no pickling needed
        return [key_of(s) for s in batch], os.getpid(), ds.io_path, ds.fallback_reads

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = list(DataLoader(ds, batch_size=50, num_workers=2, collate_fn=collate,
                              multiprocessing_context="fork", timeout=60))
    assert sorted(k for keys, *_ in out for k in keys) == list(range(200))
    assert all(pid != os.getpid() for _, pid, _, _ in out)
    want = "fork-batch" if parent_loaded else "memtier"
    assert {path for _, _, path, _ in out} == {want}
    if parent_loaded:
        assert all(n > 0 for *_, n in out)


def test_distributed_sampler_two_ranks(tmp_path, torch):
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    n = 1000
    index, data, ranges = make_dataset_files(tmp_path, n, min_len=4, max_len=200)
    ds = DS(index, data)
    per_rank = []
    for rank in (0, 1):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=1234)
        sampler.set_epoch(3)
        order = list(sampler)
        got = []
        for batch in DataLoader(ds, batch_size=32, sampler=sampler, collate_fn=collate_list):
            for s in batch:
                k = key_of(s)
                assert np.array_equal(s.numpy(), sample_bytes(k, int(ranges[k, 1])))
                got.append(k)
        assert got == order  # the loader follows the sampler's order
        per_rank.append(got)
    a, b = set(per_rank[0]), set(per_rank[1])
    assert len(per_rank[0]) == len(per_rank[1]) == n // 2
    assert not (a & b) and (a | b) == set(range(n))


# ---------------------------------------------------------- process cases


def run_case(name: str, tmp_path, env_extra=None):
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(env_extra or {})
    work = tmp_path / name
    work.mkdir()
    try:
        r = subprocess.run([sys.executable, CASES_SCRIPT, name, str(work)], capture_output=True,
                           text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail("case %s hung (> 120 s); stderr tail: %s" % (name, (e.stderr or b"")[-2000:]))
    assert r.returncode == 0 and r.stdout.startswith("OK"), (
        "case %s: exit %d\nstdout: %s\nstderr: %s" % (name, r.returncode, r.stdout[-2000:], r.stderr[-4000:]))
    return r


FALLBACK_WARNING = "with os.pread (slower)"
WARNING_TEXT = ('MemTierDataset: process %d was forked after libmemtier.so was loaded and reads one '
                'range at a time with os.pread (slower); fix: DataLoader(..., multiprocessing_context='
                '"spawn" or "forkserver", persistent_workers=True)')


def test_b01_case_a_parent_read_then_fork_workers_read_batches(tmp_path, torch):
    r = run_case("a_fallback", tmp_path)
    assert FALLBACK_WARNING not in r.stderr and "MemTierDataset" not in r.stderr, r.stderr


def test_b01_case_a_pread_path_warns_once_per_worker(tmp_path, torch):
    r = run_case("a_pread", tmp_path)
    msgs = re.findall(r"RuntimeWarning: (MemTierDataset: process (\d+) .*)$", r.stderr, re.M)
    assert len(msgs) == 4, r.stderr  # one per worker process, for a whole epoch
    assert len({pid for _, pid in msgs}) == 4
    for text, pid in msgs:
        assert text == WARNING_TEXT % int(pid)


def test_b01_case_a_parent_read_then_fork_workers_fail_fast(tmp_path, torch):
    r = run_case("a_raise", tmp_path)
    assert "ForkError" in r.stdout


def test_b01_case_b_parent_built_only(tmp_path, torch):
    r = run_case("b", tmp_path)
    assert FALLBACK_WARNING not in r.stderr


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_b01_case_c_spawn_forkserver(tmp_path, torch, method):
    r = run_case("c_" + method, tmp_path)
    assert FALLBACK_WARNING not in r.stderr


def test_b01_case_d_no_torch_fork_pool(tmp_path):
    run_case("d_numpy", tmp_path, {"MEMTIER_PY_FORCE_NO_TORCH": "1"})


def test_b02_fork_workers_positional_reads(tmp_path, torch):
    r = run_case("b02_torch", tmp_path)
    assert "0 mismatches" in r.stdout


def test_b02_numpy_fork_pool(tmp_path):
    r = run_case("b02_numpy", tmp_path, {"MEMTIER_PY_FORCE_NO_TORCH": "1"})
    assert "0 mismatches" in r.stdout


@pytest.mark.parametrize("fork_batch", [True, False])
def test_fallback_reads_in_process_fork(tmp_path, fork_batch):
    """os.fork() after this process read through MemTier: the child reads the
    same bytes with memtier_pread_batch (no warning) or, with the batch path
    off, via os.pread (one warning, exact text); with fork_fallback=False it
    raises ForkError."""
    index, data, ranges = make_dataset_files(tmp_path, 100, min_len=0, max_len=100, zero_every=11)
    ds = DS(index, data)
    ds._fork_batch = fork_batch
    strict = DS(index, data, fork_fallback=False)
    first = int(np.flatnonzero(ranges[:, 1])[0])
    ds[first]  # non-empty reads: both now hold a Context of this process
    strict[first]
    assert ds.io_path == strict.io_path == "memtier"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        code = 1
        try:
            import signal

            signal.alarm(60)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ok = all(np.array_equal(as_np(ds[k]), sample_bytes(k, int(ranges[k, 1]))) for k in range(100))
                batch = ds.__getitems__(list(range(100)))
                ok = ok and all(np.array_equal(as_np(s), sample_bytes(k, int(ranges[k, 1])))
                                for k, s in enumerate(batch))
            warned = sum(str(c.message) == WARNING_TEXT % os.getpid() for c in caught)
            warned = warned if warned == len(caught) else -len(caught)
            try:
                strict[1]
                raised = "no"
            except memtier.ForkError as e:
                raised = "yes" if "spawn" in str(e) and "forkserver" in str(e) else "bad message"
            msg = "%s %s %d %d %s" % (ok, ds.io_path, ds.fallback_reads, warned, raised)
            os.write(w, msg.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    msg = os.read(r, 1000).decode()
    os.close(r)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    nonzero = int((ranges[:, 1] > 0).sum())
    want = "True fork-batch %d 0 yes" if fork_batch else "True pread %d 1 yes"
    assert msg == want % (2 * nonzero), msg
    assert ds.io_path == "memtier"  # the parent is untouched


def _addr(s) -> int:
    a = as_np(s)
    return a.__array_interface__["data"][0]


def test_batch_buffers_reused_only_when_unreferenced(tmp_path):
    index, data, ranges = make_dataset_files(tmp_path, 96, min_len=64, max_len=64)
    ds = DS(index, data)
    a = ds.__getitems__(list(range(32)))
    a_addr = _addr(a[0])
    b = ds.__getitems__(list(range(32, 64)))
    assert _addr(b[0]) != a_addr  # a is alive: its buffer is not reused
    keep = b[5][10:20]  # a view derived from one sample of b
    keep_copy = as_np(keep).copy()
    b_addr = _addr(b[0])
    del a, b
    c = ds.__getitems__(list(range(64, 96)))
    assert _addr(c[0]) == a_addr  # a's buffer was free again
    d = ds.__getitems__(list(range(32)))
    assert _addr(d[0]) not in (a_addr, b_addr)  # b's buffer is still referenced by `keep`
    assert np.array_equal(as_np(keep), keep_copy)
    for k, s in enumerate(c):
        assert np.array_equal(as_np(s), sample_bytes(64 + k, 64))
    for k, s in enumerate(d):
        assert np.array_equal(as_np(s), sample_bytes(k, 64))


def test_getitems_from_threads(tmp_path):
    """Concurrent batches in one process never share a buffer (GIL released in reads)."""
    import threading

    index, data, ranges = make_dataset_files(tmp_path, 512, min_len=4, max_len=2000)
    ds = DS(index, data)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        kept = []
        for _ in range(40):
            idx = rng.choice(512, 32, replace=False).tolist()
            kept.append((idx, ds.__getitems__(idx)))
            if len(kept) > 3:
                kept.pop(0)
            for old_idx, old in kept:
                for k, s in zip(old_idx, old):
                    if not np.array_equal(as_np(s), sample_bytes(k, int(ranges[k, 1]))):
                        errors.append((seed, k))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


def test_index_numbers_longer_than_python_int_limit_are_format_errors(tmp_path):
    # Python's int() refuses over 4300 digits; the Go parser does not care.
    data = tmp_path / "d.bin"
    data.write_bytes(b"\0" * 16)
    idx = tmp_path / "i.txt"
    idx.write_bytes(b"0 " + b"9" * 5000 + b"\n")
    with pytest.raises(memtier.FormatError, match="line 1: length .* overflows int64"):
        memtier.MemTierDataset(str(idx), str(data))
    idx.write_bytes(b"0 " + b"0" * 5000 + b"5\n")
    assert len(memtier.MemTierDataset(str(idx), str(data))) == 1


def test_getitems_uint64_index_does_not_wrap(tmp_path):
    import numpy as np

    data = tmp_path / "d.bin"
    data.write_bytes(b"abcd")
    idx = tmp_path / "i.txt"
    idx.write_text("0 2\n2 2\n")
    ds = memtier.MemTierDataset(str(idx), str(data))
    with pytest.raises(IndexError):
        ds.__getitems__(np.array([2**64 - 1], dtype=np.uint64))
