"""DataLoader worker scenarios of MemTierDataset and TarShardDataset, one per interpreter.

Usage: ``python fork_worker_cases.py CASE WORKDIR``. Each case builds its files
under WORKDIR, runs, prints one line ``OK <json facts>`` and exits 0; anything
else is a failure. tests/python/test_fork_workers.py runs each case in a fresh
interpreter (what is tested is the parent's state when the workers start) and
compares the facts with exact expected values.

The data: 300 files of 0-3000 bytes (file k: 4 bytes k little-endian, then
bytes (k + j) % 256; every 37th file empty), packed with memtier.pack, and
the same files as members ``%05d.bin`` plus a 4-byte ``%05d.cls`` of 3 tar
shards.

=============  ===============================================================
st_fork        parent loads a safetensors file with memtier.safetensors and
               reads ds[0] of both datasets, then one epoch of a fork
               DataLoader (2 workers, batch 16, shuffle): exact bytes, the
               workers' io_path, the datasets' stats summed over the workers
stats_spawn    2 persistent spawn workers, 2 epochs (no shuffle), stats reset
               after the first: the second epoch is all DRAM-cache hits
budget         the cache budget of each worker's context: fork workers of a
               parent that never loaded MemTier, spawn workers, 1 worker,
               an explicit cache_bytes, the cache turned off
=============  ===============================================================
"""

from __future__ import annotations

import json
import os
import sys
import tarfile

import numpy as np

try:
    import memtier
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memtier

from memtier.dataset import MemTierDataset
from memtier.webdataset import TarShardDataset

N = 300
SHARDS = 3


def content(k: int, n: int) -> bytes:
    b = ((np.arange(n, dtype=np.int64) + k) & 0xFF).astype(np.uint8)
    head = np.frombuffer(int(k).to_bytes(4, "little"), np.uint8)[:n]
    b[:len(head)] = head
    return b.tobytes()


def lengths() -> list:
    rng = np.random.default_rng(5)
    out = [int(x) for x in rng.integers(1, 3001, N)]
    for k in range(0, N, 37):
        out[k] = 0
    return out


def make(work: str):
    from memtier.pack import pack

    lens = lengths()
    src = os.path.join(work, "src")
    os.makedirs(src)
    for k in range(N):
        with open(os.path.join(src, "%05d.bin" % k), "wb") as f:
            f.write(content(k, lens[k]))
    pack(src, os.path.join(work, "p"))
    shards = [os.path.join(work, "s%d.tar" % s) for s in range(SHARDS)]
    per = (N + SHARDS - 1) // SHARDS
    for s, path in enumerate(shards):
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for k in range(s * per, min(N, (s + 1) * per)):
                tf.add(os.path.join(src, "%05d.bin" % k), arcname="%05d.bin" % k)
                cls = os.path.join(src, "c.tmp")
                with open(cls, "wb") as f:
                    f.write(int(k).to_bytes(4, "little"))
                tf.add(cls, arcname="%05d.cls" % k)
    return os.path.join(work, "p.idx"), os.path.join(work, "p.data"), shards, lens


def collate(batch):
    """Runs in the worker: keys and bytes of each sample, with how the worker read."""
    import torch

    info = torch.utils.data.get_worker_info()
    ds = info.dataset
    out = []
    for s in batch:
        if isinstance(s, dict):
            out.append((int(s["__key__"]), s["bin"], s["cls"]))
        else:
            out.append((None, s.numpy().tobytes(), None))
    return out, ds.io_path, os.getpid()


def check_epoch(loader, lens, tar: bool):
    """One epoch: every sample exactly once with its bytes (packed samples are
    matched by content: the empty ones look alike); (io paths, worker count)."""
    got, paths, pids = [], set(), set()
    for out, io, pid in loader:
        paths.add(io)
        pids.add(pid)
        for key, data, cls in out:
            if tar:
                assert cls == int(key).to_bytes(4, "little"), key
                assert data == content(key, lens[key]), key
                got.append(key)
            else:
                got.append(data)
    want = list(range(N)) if tar else sorted(content(k, lens[k]) for k in range(N))
    assert sorted(got) == want
    return sorted(paths), len(pids)


def loader(ds, method, workers=2, shuffle=True, persistent=False):
    import torch
    from torch.utils.data import DataLoader

    g = torch.Generator()
    g.manual_seed(3)
    return DataLoader(ds, batch_size=16, shuffle=shuffle, num_workers=workers, collate_fn=collate,
                      multiprocessing_context=method, generator=g, persistent_workers=persistent,
                      timeout=60)


def case_st_fork(work):
    from safetensors.numpy import save_file
    from memtier.safetensors import load_file

    index, data, shards, lens = make(work)
    wpath = os.path.join(work, "w.safetensors")
    save_file({"a": np.arange(1000, dtype=np.float32), "b": np.ones((64, 64), dtype=np.float16)}, wpath)
    w = load_file(wpath)
    assert np.array_equal(w["a"].numpy(), np.arange(1000, dtype=np.float32))
    facts = {}
    for kind, ds in (("packed", MemTierDataset(index, data)), ("tar", TarShardDataset(shards))):
        s1 = ds[1]  # the sanity check in the parent (sample 1 is not empty)
        first = s1["bin"] if kind == "tar" else s1.numpy().tobytes()
        assert first == content(1, lens[1])
        assert ds.io_path == "memtier"
        paths, nworkers = check_epoch(loader(ds, "fork"), lens, kind == "tar")
        facts[kind] = {"io_paths": paths, "workers": nworkers, "stats": ds.stats().as_dict()}
    return facts


def case_stats_spawn(work):
    index, data, shards, lens = make(work)
    facts = {}
    for kind, ds in (("packed", MemTierDataset(index, data)), ("tar", TarShardDataset(shards))):
        ld = loader(ds, "spawn", shuffle=False, persistent=True)
        paths, _ = check_epoch(ld, lens, kind == "tar")
        first = ds.stats().as_dict()
        ds.reset_stats()
        paths2, _ = check_epoch(ld, lens, kind == "tar")
        facts[kind] = {"io_paths": paths + paths2, "epoch1": first, "epoch2": ds.stats().as_dict()}
    return facts


def budget_collate(batch):
    import torch

    st = torch.utils.data.get_worker_info().dataset._mine()
    cfg = st.ctx.config()
    return cfg["cache_bytes"] if cfg["cache_enabled"] else 0


def budgets(ds, method, workers):
    import torch
    from torch.utils.data import DataLoader

    dl = DataLoader(ds, batch_size=N // workers, num_workers=workers, collate_fn=budget_collate,
                    multiprocessing_context=method, timeout=60)
    return sorted(set(dl))


def case_budget(work):
    index, data, shards, lens = make(work)
    ds = MemTierDataset(index, data)
    facts = {"fork2": budgets(ds, "fork", 2)}  # this process has not loaded MemTier
    assert memtier._ffi.loaded() is None
    facts["fork3"] = budgets(ds, "fork", 3)
    facts["spawn2"] = budgets(ds, "spawn", 2)
    facts["spawn1"] = budgets(ds, "spawn", 1)
    facts["explicit"] = budgets(MemTierDataset(index, data, context_options={"cache_bytes": 64 << 20}), "spawn", 2)
    facts["off"] = budgets(MemTierDataset(index, data, context_options={"cache_bytes": 0}), "spawn", 2)
    facts["tar_spawn2"] = budgets(TarShardDataset(shards), "spawn", 2)
    cfg = memtier.Context().config()
    facts["default"] = cfg["cache_bytes"]
    facts["block"] = cfg["cache_block_bytes"]
    return facts


CASES = {"st_fork": case_st_fork, "stats_spawn": case_stats_spawn, "budget": case_budget}

if __name__ == "__main__":
    name, work = sys.argv[1], sys.argv[2]
    print("OK " + json.dumps(CASES[name](work)), flush=True)
