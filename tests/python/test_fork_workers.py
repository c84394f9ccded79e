"""DataLoader workers of MemTierDataset and TarShardDataset: forked after the
parent used memtier.safetensors and ds[i] (exact bytes through
memtier_pread_batch, no warning), dataset stats summed over workers, and each
worker's share of the cache budget (field case N07, tests/field_cases.md). Each scenario runs in a
fresh interpreter (tests/python/fork_worker_cases.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fork_worker_cases as cases  # noqa: E402

LENS = cases.lengths()
N = cases.N
NONZERO = sum(1 for n in LENS if n)
TOTAL = sum(LENS)
BATCHES = (N + 15) // 16


def run_case(name: str, tmp_path):
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    work = tmp_path / name
    work.mkdir()
    try:
        r = subprocess.run([sys.executable, os.path.join(HERE, "fork_worker_cases.py"), name, str(work)],
                           capture_output=True, text=True, timeout=240, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail("case %s hung (> 240 s); stderr tail: %s" % (name, (e.stderr or b"")[-2000:]))
    assert r.returncode == 0 and r.stdout.startswith("OK "), (
        "case %s: exit %d\nstdout: %s\nstderr: %s" % (name, r.returncode, r.stdout[-2000:], r.stderr[-4000:]))
    return json.loads(r.stdout[3:]), r.stderr


def stats(samples=0, nbytes=0, calls=0, memtier=0, fork_batch=0, pread=0, hit_req=0, hit_bytes=0):
    return {"samples": samples, "bytes": nbytes, "calls": calls, "memtier_reads": memtier,
            "fork_batch_reads": fork_batch, "pread_reads": pread, "cache_hit_requests": hit_req,
            "cache_hit_bytes": hit_bytes}


def test_fork_workers_after_safetensors_and_ds_read_in_the_parent(tmp_path, torch):
    facts, stderr = run_case("st_fork", tmp_path)
    assert "RuntimeWarning" not in stderr, stderr  # the batch path needs no warning
    # packed: the parent's ds[1] through its Context, then every sample in two forked workers
    assert facts["packed"] == {"io_paths": ["fork-batch"], "workers": 2, "stats": stats(
        samples=N + 1, nbytes=TOTAL + LENS[1], calls=BATCHES + 1, memtier=1, fork_batch=NONZERO)}
    # tar: two members per sample (.bin, and a 4-byte .cls)
    assert facts["tar"] == {"io_paths": ["fork-batch"], "workers": 2, "stats": stats(
        samples=N + 1, nbytes=TOTAL + 4 * N + LENS[1] + 4, calls=BATCHES + 1, memtier=2,
        fork_batch=NONZERO + N)}


def test_stats_summed_over_spawn_workers_and_cache_hits(tmp_path, torch):
    facts, _ = run_case("stats_spawn", tmp_path)
    epoch = stats(samples=N, nbytes=TOTAL, calls=BATCHES, memtier=NONZERO)
    assert facts["packed"] == {"io_paths": ["memtier", "memtier"], "epoch1": epoch,
                               "epoch2": dict(epoch, cache_hit_requests=NONZERO, cache_hit_bytes=TOTAL)}
    tar_epoch = stats(samples=N, nbytes=TOTAL + 4 * N, calls=BATCHES, memtier=NONZERO + N)
    # memtier_dataset_read_batch does not serve tar members from the DRAM cache
    assert facts["tar"] == {"io_paths": ["memtier", "memtier"], "epoch1": tar_epoch, "epoch2": tar_epoch}


def test_each_worker_gets_a_share_of_the_cache_budget(tmp_path, torch):
    facts, _ = run_case("budget", tmp_path)
    default, block = facts["default"], facts["block"]

    def share(n):
        s = default // n
        return s - s % block

    assert facts == {
        "fork2": [share(2)], "fork3": [share(3)], "spawn2": [share(2)], "spawn1": [default],
        "explicit": [64 << 20], "off": [0], "tar_spawn2": [share(2)], "default": default, "block": block}


def test_stats_in_process_and_pickled_copies(tmp_path):
    import pickle

    import numpy as np

    from memtier.dataset import MemTierDataset

    data = tmp_path / "d.bin"
    data.write_bytes(bytes(range(256)) * 4)
    index = tmp_path / "d.txt"
    index.write_text("0 10\n10 0\n100 50\n")
    ds = MemTierDataset(str(index), str(data), context_options={"cache_bytes": 0})
    assert ds.stats().as_dict() == stats()
    assert bytes(np.asarray(ds[2])) == (bytes(range(256)) * 4)[100:150]
    ds.__getitems__([0, 1, 2])
    ds.__getitems__([1])
    assert ds.stats().as_dict() == stats(samples=5, nbytes=50 + 60, calls=3, memtier=1 + 2)
    copy = pickle.loads(pickle.dumps(ds))  # not a process start: counters of its own
    assert copy.stats().as_dict() == stats()
    copy[0]
    assert copy.stats().samples == 1 and ds.stats().samples == 5
    ds.reset_stats()
    assert ds.stats().as_dict() == stats()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_stats_cross_spawn_and_forkserver_workers(tmp_path, torch, method):
    import numpy as np
    from torch.utils.data import DataLoader

    from memtier.dataset import MemTierDataset

    data = np.arange(100_000, dtype=np.uint8)
    data.tofile(str(tmp_path / "a.bin"))
    np.save(str(tmp_path / "a.npy"), np.array([[i * 1000, 1000 - i] for i in range(100)], dtype="<i8"))
    # no DRAM cache: which reads hit would depend on the block size and the batch order
    ds = MemTierDataset(str(tmp_path / "a.npy"), str(tmp_path / "a.bin"), context_options={"cache_bytes": 0})
    got = [bytes(np.asarray(s)) for b in DataLoader(ds, batch_size=10, num_workers=2, collate_fn=list,
                                                      multiprocessing_context=method, timeout=60) for s in b]
    assert got == [data[i * 1000:i * 1000 + 1000 - i].tobytes() for i in range(100)]
    total = sum(1000 - i for i in range(100))
    assert ds.stats().as_dict() == stats(samples=100, nbytes=total, calls=10, memtier=100)
