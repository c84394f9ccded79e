"""Process scenarios of MemTierDataset (field cases B01, B02 in tests/field_cases.md), one per interpreter.

Usage: ``python dataset_fork_cases.py CASE WORKDIR``. Each case builds its
files under WORKDIR, runs, prints ``OK <facts>`` and exits 0; anything else
(an exception, wrong bytes, a hang, which the caller's timeout turns into a
failure) is a failure. tests/python/test_dataset.py runs every case in a fresh
interpreter with a 120 s limit, because what is being tested is the state of
the parent process at fork time.

B01 data: an 8 MiB P-file (byte i = (i*131+7) & 0xFF), 2,048 records
(offset 4096*k, length 4096).

=============  ===============================================================
a_fallback     parent reads through MemTier, then a fork DataLoader (4 workers,
               batch 32): correct bytes, read with memtier_pread_batch (no warning)
a_pread        same with the batch path switched off (``_fork_batch = False``):
               correct bytes via os.pread, one warning per worker
a_raise        same with fork_fallback=False: workers fail at once with a
               ForkError that names spawn/forkserver
b              parent only imports memtier and builds the dataset: workers
               load MemTier themselves; the parent never maps libmemtier.so
c_spawn        parent reads, then a spawn DataLoader: correct bytes
c_forkserver   parent reads, then a forkserver DataLoader: correct bytes
d_numpy        no torch (MEMTIER_PY_FORCE_NO_TORCH=1): a fork Pool(4) maps
               ds[k] over all k, before and after the parent read through MemTier
b02_torch      B02: 4,096 records of 1,000 bytes (k as 4 bytes LE, then 996
               bytes of k % 251), 2 epochs of a fork DataLoader (4 workers,
               shuffle, batch_size=1): zero mismatches
b02_numpy      B02 on the numpy path: fork Pool(4), 2 shuffled passes
=============  ===============================================================
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import numpy as np

try:
    import memtier
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memtier

from memtier.dataset import MemTierDataset

REC = 4096
NREC = 2048
B02_N = 4096
B02_LEN = 1000


def p_bytes(size: int) -> np.ndarray:
    i = np.arange(size, dtype=np.uint64)
    return ((i * np.uint64(131) + np.uint64(7)) & np.uint64(0xFF)).astype(np.uint8)


def make_b01(work: str):
    data = os.path.join(work, "data.bin")
    index = os.path.join(work, "index.txt")
    p = p_bytes(REC * NREC)
    p.tofile(data)
    with open(index, "w") as f:
        f.write("# B01: record k = (4096*k, 4096)\n")
        for k in range(NREC):
            f.write("%d %d\n" % (REC * k, REC))
    return index, data, p.reshape(NREC, REC)


def b02_record(k: int) -> bytes:
    return int(k).to_bytes(4, "little") + bytes([k % 251]) * (B02_LEN - 4)


def make_b02(work: str):
    data = os.path.join(work, "b02.bin")
    index = os.path.join(work, "b02.npy")
    with open(data, "wb") as f:
        for k in range(B02_N):
            f.write(b02_record(k))
    np.save(index, np.array([(k * B02_LEN, B02_LEN) for k in range(B02_N)], dtype="<i8"))
    return index, data


def b02_check(k: int, sample: np.ndarray) -> bool:
    """True when sample is record k: its first 4 bytes decode to k, the rest k % 251."""
    b = np.asarray(sample, dtype=np.uint8)
    return (b.shape == (B02_LEN,) and int.from_bytes(b[:4].tobytes(), "little") == k
            and bool((b[4:] == k % 251).all()))


def parent_read(data: str) -> None:
    """Use MemTier in this process so its Go runtime is running at fork time."""
    assert memtier.read(data, 0, 16) == p_bytes(16).tobytes()
    assert memtier._ffi.loaded() is not None


def lib_mapped() -> bool:
    with open("/proc/self/maps") as f:
        return "libmemtier" in f.read()


def epoch(ds, expect: np.ndarray, ctx: str, workers: int = 4) -> int:
    import torch
    from torch.utils.data import DataLoader

    dl = DataLoader(ds, batch_size=32, num_workers=workers, multiprocessing_context=ctx, timeout=60)
    seen = 0
    for b, batch in enumerate(dl):
        assert isinstance(batch, torch.Tensor) and batch.dtype == torch.uint8, type(batch)
        want = expect[32 * b: 32 * b + 32]
        if batch.shape != want.shape or not np.array_equal(batch.numpy(), want):
            raise AssertionError("batch %d differs" % b)
        seen += batch.shape[0]
    assert seen == NREC, seen
    return seen


def _get(k: int):
    return np.asarray(_DS[k])


_DS = None


def case_a_fallback(work):
    index, data, expect = make_b01(work)
    parent_read(data)
    ds = MemTierDataset(index, data)
    assert ds[5].numpy().tobytes() == expect[5].tobytes() and ds.io_path == "memtier"
    n = epoch(ds, expect, "fork")
    return "a_fallback %d records" % n


def case_a_pread(work):
    index, data, expect = make_b01(work)
    parent_read(data)
    ds = MemTierDataset(index, data)
    ds._fork_batch = False
    n = epoch(ds, expect, "fork")
    return "a_pread %d records" % n


def case_a_raise(work):
    index, data, expect = make_b01(work)
    parent_read(data)
    ds = MemTierDataset(index, data, fork_fallback=False)
    t0 = time.monotonic()
    try:
        epoch(ds, expect, "fork")
    except memtier.ForkError as e:
        msg = str(e)
        dt = time.monotonic() - t0
        assert 'multiprocessing_context="spawn"' in msg and '"forkserver"' in msg, msg
        assert dt < 30, dt
        return "a_raise ForkError after %.1f s" % dt
    raise AssertionError("workers read although the parent had loaded MemTier and fork_fallback=False")


def case_b(work):
    index, data, expect = make_b01(work)
    ds = MemTierDataset(index, data)
    assert memtier._ffi.loaded() is None and not lib_mapped()
    n = epoch(ds, expect, "fork")
    assert memtier._ffi.loaded() is None and not lib_mapped(), "the parent loaded libmemtier.so"
    return "b %d records, parent never loaded libmemtier.so" % n


def case_c(work, method):
    index, data, expect = make_b01(work)
    parent_read(data)
    ds = MemTierDataset(index, data)
    n = epoch(ds, expect, method, workers=2)
    return "c_%s %d records" % (method, n)


def case_d_numpy(work):
    global _DS
    from memtier import _dtypes

    assert _dtypes.torch_module() is None and "torch" not in sys.modules, "torch is visible"
    index, data, expect = make_b01(work)
    _DS = MemTierDataset(index, data)
    fork = mp.get_context("fork")
    for phase in ("parent-unloaded", "parent-loaded"):
        if phase == "parent-loaded":
            parent_read(data)
        with fork.Pool(4) as pool:
            got = pool.map(_get, range(NREC), chunksize=64)
        assert all(type(g) is np.ndarray and np.array_equal(g, expect[k]) for k, g in enumerate(got)), phase
    return "d_numpy %d records x 2 phases" % NREC


def case_b02_torch(work):
    from torch.utils.data import DataLoader

    index, data = make_b02(work)
    ds = MemTierDataset(index, data)
    dl = DataLoader(ds, batch_size=1, shuffle=True, num_workers=4, multiprocessing_context="fork",
                    timeout=60, collate_fn=_first)
    bad = total = 0
    for ep in range(2):
        seen = set()
        for sample in dl:
            k = int.from_bytes(sample[:4].numpy().tobytes(), "little")
            total += 1
            if not (0 <= k < B02_N) or not b02_check(k, sample.numpy()) or k in seen:
                bad += 1
            seen.add(k)
        assert len(seen) == B02_N, (ep, len(seen))
    assert total == 2 * B02_N and bad == 0, (total, bad)
    return "b02_torch %d samples, %d mismatches" % (total, bad)


def _first(batch):
    return batch[0]


def _b02_get(k: int):
    return k, np.asarray(_DS[k]).tobytes()


def case_b02_numpy(work):
    global _DS
    from memtier import _dtypes

    assert _dtypes.torch_module() is None
    index, data = make_b02(work)
    _DS = MemTierDataset(index, data)
    rng = np.random.default_rng(0)
    bad = total = 0
    with mp.get_context("fork").Pool(4) as pool:
        for _ in range(2):
            order = rng.permutation(B02_N).tolist()
            for k, b in pool.imap_unordered(_b02_get, order, chunksize=16):
                total += 1
                bad += b != b02_record(k)
    assert total == 2 * B02_N and bad == 0, (total, bad)
    return "b02_numpy %d samples, %d mismatches" % (total, bad)


CASES = {
    "a_fallback": case_a_fallback,
    "a_pread": case_a_pread,
    "a_raise": case_a_raise,
    "b": case_b,
    "c_spawn": lambda w: case_c(w, "spawn"),
    "c_forkserver": lambda w: case_c(w, "forkserver"),
    "d_numpy": case_d_numpy,
    "b02_torch": case_b02_torch,
    "b02_numpy": case_b02_numpy,
}

if __name__ == "__main__":
    name, work = sys.argv[1], sys.argv[2]
    t0 = time.monotonic()
    facts = CASES[name](work)
    print("OK %s (%.1f s)" % (facts, time.monotonic() - t0), flush=True)
