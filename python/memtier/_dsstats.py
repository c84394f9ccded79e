"""Dataset statistics summed over DataLoader workers: :class:`DatasetStats` and
the shared counters behind ``MemTierDataset.stats()`` / ``TarShardDataset.stats()``.

The counters are one ``multiprocessing.sharedctypes.RawArray`` of int64 made
when the dataset is built: a forked worker inherits the mapping, and a
spawn/forkserver worker receives it with the dataset (the multiprocessing
start passes its descriptor), so every process of one DataLoader adds into
the same memory. Each process writes only its own row, so no lock is shared
between processes: the process that built the dataset writes row 0, the
DataLoader worker of id ``k`` row ``1 + k % WORKER_ROWS``. Rows add up over
successive processes (a new epoch's workers continue their predecessors'
rows), and ``stats()`` in any of them is the sum of all rows.

Nothing here loads libmemtier.so.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from multiprocessing import context as _mp_context
from multiprocessing.sharedctypes import RawArray
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from . import _dtypes

FIELDS = ("samples", "bytes", "calls", "memtier_reads", "fork_batch_reads", "pread_reads",
          "cache_hit_requests", "cache_hit_bytes")
F_SAMPLES, F_BYTES, F_CALLS, F_MEMTIER, F_FORK_BATCH, F_PREAD, F_HIT_REQ, F_HIT_BYTES = range(len(FIELDS))

#: Rows for DataLoader workers; a worker id at or above it shares a row with a
#: lower one (and two such workers of one loader may then lose an update).
WORKER_ROWS = 128


@dataclass(frozen=True)
class DatasetStats:
    """What a dataset has read, summed over the processes that share its counters.

    Those processes are the one that built the dataset and every torch
    DataLoader worker that read from it (fork, spawn or forkserver, across
    epochs). Another process (a ``multiprocessing.Pool`` worker, a plain
    ``os.fork()`` child, a copy made by ``pickle``) counts in counters of its
    own copy only. Bytes are bytes; the other fields are counts.
    """

    samples: int
    """samples returned by ``ds[i]`` and ``ds.__getitems__``"""
    bytes: int
    """bytes of those samples read from storage or cache (for TarShardDataset: member bytes)"""
    calls: int
    """``ds[i]`` and ``__getitems__`` calls that returned samples"""
    memtier_reads: int
    """ranges (MemTierDataset: samples; TarShardDataset: members) read through a MemTier context"""
    fork_batch_reads: int
    """ranges read in forked processes with one ``memtier_pread_batch`` call per batch"""
    pread_reads: int
    """ranges read in forked processes with the per-range Python ``os.pread`` fallback"""
    cache_hit_requests: int
    """of the ``memtier_reads``, requests the contexts' DRAM caches served in full"""
    cache_hit_bytes: int
    """bytes the contexts' DRAM caches served"""

    def as_dict(self) -> Dict[str, int]:
        """The fields as a plain dict, in declaration order."""
        return {f: getattr(self, f) for f in FIELDS}


def _worker_id() -> Optional[int]:
    torch = _dtypes.torch_module()
    if torch is None:
        return None
    info = torch.utils.data.get_worker_info()
    return None if info is None else int(info.id)


class Counters:
    """The shared counter rows of one dataset (picklable only while a process
    starts; see the module docstring). Thread-safe: each process serialises
    its own updates with a lock of its own."""

    __slots__ = ("_arr", "_owner", "_pid", "_row", "_lock")

    def __init__(self) -> None:
        self._arr: Any = RawArray("q", (1 + WORKER_ROWS) * len(FIELDS))
        self._owner = os.getpid()
        self._pid = -1
        self._row: Optional[Tuple[memoryview, int]] = None
        self._lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        # A RawArray pickles only while a process starts (its descriptor goes
        # with the start); any other pickle gets counters of its own.
        spawning = _mp_context.get_spawning_popen() is not None
        return {"arr": self._arr if spawning else None, "owner": self._owner}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        arr = state["arr"]
        if arr is None:
            self.__init__()  # type: ignore[misc]
            return
        self._arr = arr
        self._owner = state["owner"]
        self._pid = -1
        self._row = None
        self._lock = threading.Lock()

    def _table(self) -> np.ndarray:
        return np.frombuffer(self._arr, dtype=np.int64).reshape(1 + WORKER_ROWS, len(FIELDS))

    def row(self) -> Tuple[memoryview, int]:
        """This process's view of the counters and the index of its row's
        first field (chosen at its first use in the process)."""
        pid = os.getpid()
        if self._pid == pid and self._row is not None:
            return self._row
        wid = _worker_id()
        if wid is None and pid != self._owner:
            # neither the builder nor a DataLoader worker: private counters
            self._arr = RawArray("q", (1 + WORKER_ROWS) * len(FIELDS))
            self._owner = pid
        self._lock = threading.Lock()  # a lock inherited through fork may be held
        slot = 0 if wid is None else 1 + wid % WORKER_ROWS
        # memoryview item updates cost a third of numpy scalar ones
        self._row = (memoryview(self._arr).cast("B").cast("q"), slot * len(FIELDS))
        self._pid = pid
        return self._row

    def add(self, samples: int, nbytes: int, field: int, reads: int,
            hits: Optional[Callable[[], Tuple[int, int]]] = None) -> None:
        """Count one call that returned ``samples`` samples of ``nbytes`` bytes,
        ``reads`` ranges read by path ``field`` (F_MEMTIER, F_FORK_BATCH,
        F_PREAD); ``hits()``, called under the lock, gives the cache-hit
        requests and bytes to add."""
        m, b = self.row()
        with self._lock:
            m[b + F_SAMPLES] += samples
            m[b + F_BYTES] += nbytes
            m[b + F_CALLS] += 1
            m[b + field] += reads
            if hits is not None:
                req, nb = hits()
                if req:
                    m[b + F_HIT_REQ] += req
                if nb:
                    m[b + F_HIT_BYTES] += nb

    def snapshot(self) -> DatasetStats:
        """The sum of all rows."""
        self.row()
        tot = self._table().sum(axis=0).tolist()
        return DatasetStats(*(int(v) for v in tot))

    def reset(self) -> None:
        """Zero every row (call it while no worker reads, or counts may be lost)."""
        self.row()
        with self._lock:
            self._table()[:] = 0
