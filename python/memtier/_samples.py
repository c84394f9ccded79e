"""What MemTierDataset and TarShardDataset share: per-process read state that
survives pickling and fork(), the reads of forked processes, each worker's
share of the cache budget, the shared stats, batch buffers and positional reads.

Nothing here loads libmemtier.so at import.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Tuple, TypeVar

import numpy as np

from . import _constants, _dsstats, _dtypes, _errors, _ffi, _fork, _log
from ._context import Context
from ._options import CONFIG_KEYS
from ._paths import _is_url

# Per-process state inherited through fork() is parked here, never closed or
# collected in the child: closing a Context would run its finalizer in a
# process where the Go runtime is unusable.
_inherited: List["_ProcState"] = []
_warned_pid = 0  # the pid that has warned about the per-range os.pread fallback
_warn_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _warn_lock
    _warn_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class _BufferPool:
    """Batch buffers reused only once nothing references them any more.

    Every sample of a batch is a view of its batch buffer, and each view (numpy
    base, or the ndarray a torch tensor from ``torch.from_numpy`` keeps) holds a
    reference to it. A pooled buffer whose reference count is back to the
    pool's own reference is therefore unreachable from any sample, and a new
    batch may overwrite it; any buffer still referenced is left alone. Reuse
    saves the page faults of a fresh multi-MiB allocation per batch.
    """

    KEEP = 3  # buffers kept: the batch in use, the one being fetched, one spare
    MAX_BYTES = 256 << 20  # larger batches get a fresh buffer every time

    def __init__(self) -> None:
        self.bufs: List[np.ndarray] = []
        self.lock = threading.Lock()

    def get(self, n: int) -> np.ndarray:
        """A view of exactly n bytes of a uint8 buffer nothing else references.

        The view is made under the lock, so a concurrent caller already sees
        the buffer as referenced."""
        if n > self.MAX_BYTES:
            return np.empty(n, dtype=np.uint8)
        with self.lock:
            free = -1
            for i in range(len(self.bufs)):  # not enumerate(): its cached tuple holds a reference
                b = self.bufs[i]
                if sys.getrefcount(b) <= 3:  # self.bufs, b, getrefcount's argument
                    if b.shape[0] >= n:
                        return b[:n]
                    free = i
            b = np.empty(min(self.MAX_BYTES, n + (n >> 2) + 65535) & ~65535, dtype=np.uint8)
            if free >= 0:
                self.bufs[free] = b  # replace a free buffer that is too small
            elif len(self.bufs) < self.KEEP:
                self.bufs.append(b)
            return b[:n]


class _ProcState:
    """What one process reads with: its own Context, or in a forked process
    memtier_pread_batch or the os.pread fallback, and its pool of batch
    buffers (subclasses add their handles or descriptors)."""

    __slots__ = ("pid", "ctx", "batch", "fallback_reads", "pool", "stats_call", "hits", "strict")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ctx: Any = None
        # (ffi, memtier_pread_batch) of the inherited library in a forked
        # process that reads with it; None for the per-range os.pread loop
        self.batch: Any = None
        self.fallback_reads = 0
        self.pool = _BufferPool()
        self.stats_call: Any = None  # (memtier_stats_sized, handle, stats buffer, size) of ctx
        self.hits = (0, 0)  # ctx's cache_hit_requests, cache_hit_bytes when last counted
        # a forked process: check every batch's files (freshness strict or
        # interval), not only at open (freshness "open")
        self.strict = True

    def hit_delta(self) -> Tuple[int, int]:
        """The DRAM-cache hit requests and bytes of ctx since the last call
        (the caller serialises calls)."""
        sc = self.stats_call
        if sc is None:
            ctx = self.ctx
            ffi = ctx._ffi
            sc = self.stats_call = (ctx._lib.memtier_stats_sized, ctx._handle(),
                                    ffi.new("memtier_stats_t *"), ffi.sizeof("memtier_stats_t"))
        fn, h, buf, size = sc
        if self.ctx.closed or fn(h, buf, size) != 0:
            return 0, 0
        req, nb = buf.cache_hit_requests, buf.cache_hit_bytes
        old_req, old_nb = self.hits
        if req < old_req or nb < old_nb:  # the context's stats were reset
            old_req = old_nb = 0
        self.hits = (req, nb)
        return req - old_req, nb - old_nb


_V = TypeVar("_V")
_S = TypeVar("_S", bound=_ProcState)


def _once(table: Dict[int, _V], lock: threading.Lock, key: int, make: Callable[..., _V], *args: Any) -> _V:
    """``table[key]``, made with ``make(*args)`` by the first of concurrent callers."""
    v = table.get(key)
    if v is None:
        with lock:
            v = table.get(key)
            if v is None:
                v = make(*args)
                table[key] = v
    return v


def _open_rdonly(path: str) -> int:
    return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))


#: A file version as a forked process checks it: (st_dev, st_ino, st_size,
#: st_mtime_ns, st_ctime_ns) of an os.stat_result.
Identity = Tuple[int, int, int, int, int]


def identity(st: os.stat_result) -> Identity:
    """The version of a file that ``st`` describes (see :data:`Identity`)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _strict_freshness(opts: Mapping[str, Any]) -> bool:
    """Whether a forked process checks its files at every batch: False only
    for freshness "open" (``context_options`` or ``MEMTIER_FRESHNESS``), which
    checks at open only, as a context does. "interval" is checked at every
    batch (a forked process keeps no clock per file; stricter is never stale)."""
    f = opts.get("freshness")
    if f is None:
        f = os.environ.get("MEMTIER_FRESHNESS", "")
    if isinstance(f, str):
        return f.strip().lower() != "open"
    try:
        return operator.index(f) != _constants.FRESHNESS_OPEN
    except TypeError:
        return True  # the Context of a process that can load the library reports a bad value


def _pread_full(fd: int, mv: memoryview, off: int, path: str, where: str = "MemTierDataset") -> None:
    """Fill ``mv`` from ``fd`` at ``off`` with os.preadv, or raise EndOfFileError."""
    pos, n = 0, len(mv)
    while pos < n:
        got = os.preadv(fd, [mv[pos:]], off + pos)
        if got == 0:
            raise _errors.make_error(
                _errors.ERR_EOF,
                "%s: read %s at offset %d, %d bytes" % (where, path, off, n),
                "the file ends after %d of them (was it truncated?)" % pos,
                strerror="read past end of file",
                filename=path,
            )
        pos += got


def _worker_cache_share(opts: Mapping[str, Any]) -> Optional[int]:
    """The DRAM cache budget of a DataLoader worker's context, or None to use
    ``opts`` as they are.

    In a torch DataLoader worker of a loader with N > 1 workers, when ``opts``
    set neither ``cache_bytes`` nor ``cache_enabled``: the default budget
    (``memtier_config_default``: 1 GiB, ``MEMTIER_CACHE_BYTES``, or less under
    a cgroup memory limit) divided by N, rounded down to a multiple of the
    cache block; 0 (no cache) below one block. Raises ForkError in a process
    that cannot load the library."""
    if opts.get("cache_bytes") is not None or opts.get("cache_enabled") is not None:
        return None
    torch = _dtypes.torch_module()
    info = torch.utils.data.get_worker_info() if torch is not None else None
    if info is None or int(info.num_workers) <= 1:
        return None
    rt = _ffi.runtime()
    ffi, lib = rt.ffi, rt.lib
    cfg = ffi.new("memtier_config_t *")
    if lib.memtier_config_default_sized(cfg, ffi.sizeof("memtier_config_t")) != 0 or not cfg.cache_enabled:
        return None  # Context() reports a bad environment; a cache already off stays off
    block = opts.get("cache_block_bytes")
    if not isinstance(block, int) or isinstance(block, bool) or block <= 0:
        block = int(cfg.cache_block_bytes)
    share = int(cfg.cache_bytes) // int(info.num_workers)
    share -= share % block
    return share if share >= block else 0


def _check_options(transform: Any, context_options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """Validate a dataset's ``transform`` and ``context_options`` key names; the options as a dict."""
    if transform is not None and not callable(transform):
        raise TypeError("transform must be callable, got %r" % (transform,))
    if context_options is None:
        return {}
    if not isinstance(context_options, Mapping):
        raise TypeError("context_options must be a mapping, got %s" % type(context_options).__name__)
    unknown = sorted(str(k) for k in context_options if k not in CONFIG_KEYS)
    if unknown:
        raise TypeError("unknown context_options key(s) %s; valid: %s" % (unknown, list(CONFIG_KEYS)))
    return dict(context_options)


class _PerProcess(Generic[_S]):
    """Mixin of the datasets: each process reads with its own :class:`_ProcState`,
    made at its first read, dropped by pickling and never reused after fork().

    The fork rule, the same for every dataset: a process forked after its
    parent loaded libmemtier.so cannot use the library's Go runtime (it does
    not survive ``fork()``, see :mod:`memtier._ffi`). With ``fork_fallback``
    such a process reads each batch with one ``memtier_pread_batch`` call of
    the inherited library (pure C, no Go runtime: the page cache at the speed
    of a batched read, without MemTier's DRAM cache); only when that entry is
    missing (an older library) does it read range by range with ``os.pread``
    and warn once per process. A URL among :meth:`_fallback_paths` (both
    paths read local files only), or ``fork_fallback=False``, raises
    :class:`memtier.ForkError` naming the fix. Building a dataset that must
    read through the library in the building process uses :meth:`_build_state`.

    A subclass sets ``_NAME`` and ``_STATE`` (its :class:`_ProcState` class), calls
    :meth:`_init_proc` in its ``__init__`` and implements ``_fallback_paths``
    and ``__len__``; ``_start_fallback`` may prepare the reads of a forked
    process (it runs before any warning).
    """

    _NAME = ""
    _STATE: Callable[[int], _S]
    _FORK_ADVICE = ""  # more advice for the ForkError of fork_fallback=False
    _LOADED_NOTE = ""  # why the parent had loaded the library, when building does it
    #: False makes forked processes use the per-range os.pread loop (for
    #: benchmarks and tests of that path)
    _fork_batch = True
    _proc: Optional[_S]

    def _init_proc(self, context_options: Dict[str, Any], fork_fallback: bool) -> None:
        self._context_options = context_options
        self._fork_fallback = bool(fork_fallback)
        self._proc = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        self._counters = _dsstats.Counters()

    def _start_fallback(self, st: _S) -> None:
        pass

    def _fallback_paths(self) -> List[str]:
        """The files the reads of a forked process would read."""
        raise NotImplementedError

    def _refuse_remote_fallback(self) -> None:
        """Raise ForkError when the fallback would have a URL to read."""
        urls = [p for p in self._fallback_paths() if _is_url(p)]
        if urls:
            raise _errors.make_error(
                _errors.ERR_FORKED,
                "%s: cannot read %s in this process (pid %d): it was forked after its parent "
                "loaded libmemtier.so%s, and forked processes read local files only"
                % (self._NAME, urls[0], os.getpid(), self._LOADED_NOTE),
                hint="create the DataLoader with multiprocessing_context=\"spawn\" or \"forkserver\"")

    def _build_state(self, what: str) -> _S:
        """This process's state for work the constructor does through the
        library (``what``: "open <file>", "index the shards"); ForkError in a
        process that cannot load it."""
        st = self._state()
        if st.ctx is None:
            raise _errors.make_error(
                _errors.ERR_FORKED,
                "%s: cannot %s in this process (pid %d): it was forked after its parent "
                "loaded libmemtier.so" % (self._NAME, what, os.getpid()),
                hint="build the dataset in the parent (before forking) or in a spawned process")
        return st

    def _mine(self) -> Optional[_S]:
        """This process's state, or None before its first read (or after close)."""
        st = self._proc
        return st if st is not None and st.pid == os.getpid() else None

    def _take_state(self) -> Optional[_S]:
        """Detach this process's state for closing; the next read makes a new one."""
        st = self._mine()
        if st is not None:
            self._proc = None
        return st

    @property
    def io_path(self) -> Optional[str]:
        """How this process reads: ``"memtier"`` (its own Context),
        ``"fork-batch"`` (a forked process: one ``memtier_pread_batch`` call
        per batch), ``"pread"`` (a forked process: ``os.pread`` per range),
        or None before its first read."""
        st = self._mine()
        if st is None:
            return None
        if st.ctx is not None:
            return "memtier"
        return "fork-batch" if st.batch is not None else "pread"

    def stats(self) -> _dsstats.DatasetStats:
        """What this dataset has read, summed over the process that built it
        and every DataLoader worker that read from it (see
        :class:`memtier.dataset.DatasetStats`). Call it in the process that built the
        dataset, e.g. after an epoch; a copy made by ``pickle`` outside a
        process start counts on its own. Thread-safe."""
        return self._counters.snapshot()

    def reset_stats(self) -> None:
        """Zero the counters of every process sharing them (call it while no
        DataLoader worker reads, or counts may be lost)."""
        self._counters.reset()

    def _count(self, st: _S, samples: int, nbytes: int, field: int, reads: int) -> None:
        """Count one call that returned ``samples`` samples (``nbytes`` read)
        with ``reads`` ranges read by path ``field``; a MemTier read also adds
        the DRAM-cache hits of this process's context since the last count."""
        if field == _dsstats.F_MEMTIER and st.ctx is not None:
            self._counters.add(samples, nbytes, field, reads, st.hit_delta)
        else:
            self._counters.add(samples, nbytes, field, reads)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_proc"] = None  # a Context, its handles and descriptors belong to one process
        del state["_lock"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._proc = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()

    def _new_context(self) -> Context:
        """This process's Context: the dataset's context_options, with a
        DataLoader worker's share of the default cache budget (see
        :func:`_worker_cache_share`)."""
        opts = self._context_options
        share = _worker_cache_share(opts)
        return Context(opts if share is None else dict(opts, cache_bytes=share))

    def _state(self) -> _S:
        st = self._proc
        pid = os.getpid()
        if st is not None and st.pid == pid:
            return st
        if self._lock_pid != pid:  # a forked child: the inherited lock may be held forever
            self._lock, self._lock_pid = threading.Lock(), pid
        with self._lock:
            st = self._proc
            if st is not None and st.pid == pid:
                return st
            if st is not None:  # inherited through fork(): park it, never touch it
                _inherited.append(st)
            st = self._STATE(pid)
            try:
                st.ctx = self._new_context()
            except _errors.ForkError as e:
                if not self._fork_fallback:
                    raise _errors.make_error(
                        _errors.ERR_FORKED,
                        "%s: cannot read in this process (pid %d): it was forked "
                        "after its parent loaded libmemtier.so" % (self._NAME, pid),
                        hint="create the DataLoader with multiprocessing_context=\"spawn\" or "
                        "\"forkserver\", %sor build the dataset with fork_fallback=True to read "
                        "without MemTier's Go runtime" % self._FORK_ADVICE,
                    ) from e
                self._refuse_remote_fallback()
                st.strict = _strict_freshness(self._context_options)
                self._start_fallback(st)
                st.batch = _fork.inherited_pread_batch() if self._fork_batch else None
                if st.batch is None:
                    self._warn_fallback()
            self._proc = st
            return st

    def _fallback_message(self) -> str:
        """The one warning of a process that reads range by range with os.pread."""
        return ("%s: process %d was forked after libmemtier.so was loaded and reads one range at a "
                "time with os.pread (slower); fix: DataLoader(..., multiprocessing_context=\"spawn\" "
                "or \"forkserver\", persistent_workers=True)" % (self._NAME, os.getpid()))

    def _warn_fallback(self) -> None:
        global _warned_pid
        with _warn_lock:
            if _warned_pid == os.getpid():
                return
            _warned_pid = os.getpid()
        _log.warn("fork.fallback", self._fallback_message())
        # stacklevel: here, _state, the read method, then the caller of ds[i]
        warnings.warn(self._fallback_message(), RuntimeWarning, stacklevel=4)

    def _changed_error(self, path: str) -> _errors.MemTierError:
        """The error of a forked process whose file ``path`` is no longer the
        version the dataset was built from (the subclass's text: the one its
        MemTier path gives)."""
        raise NotImplementedError

    def _open_checked(self, path: str, ident: Optional[Identity]) -> int:
        """A forked process's descriptor of ``path``, which must still be the
        version ``ident`` the dataset was built from (None: not recorded)."""
        fd = _open_rdonly(path)
        if ident is not None:
            try:
                now: Optional[Identity] = identity(os.fstat(fd))
            except OSError:
                now = None
            if now != ident:
                os.close(fd)
                raise self._changed_error(path)
        return fd

    def _check_files(self, files: Sequence[Tuple[int, str, Optional[Identity]]]) -> None:
        """Raise :meth:`_changed_error` unless each (descriptor, path, identity)
        still is that version: one ``fstat`` (rewritten in place) and one
        ``stat`` of the path (replaced by rename) per file."""
        for fd, path, ident in files:
            if ident is None:
                continue
            try:
                same = identity(os.fstat(fd)) == ident and identity(os.stat(path)) == ident
            except OSError:
                same = False
            if not same:
                raise self._changed_error(path)

    def _fork_read(self, st: _S, fds: np.ndarray, offs: np.ndarray, sizes: np.ndarray,
                   buf: np.ndarray, starts: np.ndarray, paths: Callable[[int], str],
                   files: Sequence[Tuple[int, str, Optional[Identity]]] = ()) -> int:
        """In a forked process: range i (``sizes[i]`` bytes at ``offs[i]`` of
        descriptor ``fds[i]``, of file ``paths(i)``) into ``buf[starts[i]:]``;
        returns the stats field of the path it took. Ranges of 0 bytes read
        nothing. Raises the MemTierError of the lowest-index range that failed.

        ``files`` lists each distinct (descriptor, path, identity at build) of
        the ranges. With ``st.strict`` they are checked after the read, before
        any byte is returned, so a file changed before or during the read
        raises :meth:`_changed_error` (never stale bytes); a failed read is
        reported as that change when one explains it (a shorter file)."""
        try:
            field = self._fork_read_ranges(st, fds, offs, sizes, buf, starts, paths)
        except _errors.MemTierError:
            self._check_files(files)
            raise
        if st.strict:
            self._check_files(files)
        return field

    def _fork_read_ranges(self, st: _S, fds: np.ndarray, offs: np.ndarray, sizes: np.ndarray,
                          buf: np.ndarray, starts: np.ndarray, paths: Callable[[int], str]) -> int:
        """The reads of :meth:`_fork_read`, without the freshness check."""
        n = int(sizes.shape[0])
        if st.batch is None:
            mv = buf.data  # a memoryview of the uint8 buffer
            for i, (fd, off, ln, a) in enumerate(zip(fds.tolist(), offs.tolist(), sizes.tolist(),
                                                     starts.tolist())):
                if ln:
                    try:
                        _pread_full(fd, mv[a:a + ln], off, paths(i), self._NAME)
                    except _errors.MemTierError as e:
                        e.index = i
                        raise
            return _dsstats.F_PREAD
        ffi, fn = st.batch
        base = buf.__array_interface__["data"][0]
        dsts = np.ascontiguousarray(starts, dtype=np.uint64) + np.uint64(base)
        fd32 = np.ascontiguousarray(fds, dtype=np.int32)
        off64 = np.ascontiguousarray(offs, dtype=np.uint64)
        len64 = np.ascontiguousarray(sizes, dtype=np.uint64)
        res = np.empty(n, dtype=np.int64)
        fb = ffi.from_buffer
        rc = fn(ffi.cast("const int32_t *", fb(fd32)), ffi.cast("const uint64_t *", fb(off64)),
                ffi.cast("const uint64_t *", fb(len64)), ffi.cast("void * const *", fb(dsts)), n,
                ffi.cast("int64_t *", fb(res)))
        if rc:
            bad = np.flatnonzero(res < 0)
            i = int(bad[0]) if bad.size else 0
            code = int(res[i]) if bad.size else int(rc)
            detail = _ffi.error_texts(code)[1]
            detail = detail.split("): ", 1)[-1]  # the range is named in the prefix
            if code == _errors.ERR_EOF:
                detail += " (was it truncated?)"
            path = paths(i)
            raise _errors.make_error(
                code, "%s: read %s at offset %d, %d bytes" % (self._NAME, path, int(offs[i]), int(sizes[i])),
                detail, strerror=_ffi.strerror(code), filename=path, index=i)
        return _dsstats.F_FORK_BATCH

    def _norm_index(self, i: Any) -> int:
        try:
            k = operator.index(i)
        except TypeError:
            raise TypeError("%s indices must be integers, not %s" % (self._NAME, type(i).__name__)) from None
        n = len(self)  # type: ignore[arg-type]
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("%s index %d out of range for %d samples" % (self._NAME, operator.index(i), n))
        return k
