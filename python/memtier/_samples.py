"""What MemTierDataset and TarShardDataset share: per-process read state that
survives pickling and fork(), the fork fallback, batch buffers and positional reads.

Nothing here loads libmemtier.so at import.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, TypeVar

import numpy as np

from . import _errors, _log
from ._context import Context
from ._options import CONFIG_KEYS
from ._paths import _is_url

# Per-process state inherited through fork() is parked here, never closed or
# collected in the child: closing a Context would run its finalizer in a
# process where the Go runtime is unusable.
_inherited: List["_ProcState"] = []
_warned_pid: Dict[str, int] = {}  # dataset class name -> pid that has warned
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
    """What one process reads with: its own Context, or the pread fallback, and
    its pool of batch buffers (subclasses add their handles or descriptors)."""

    __slots__ = ("pid", "ctx", "fallback_reads", "pool")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ctx: Any = None
        self.fallback_reads = 0
        self.pool = _BufferPool()


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


def _pread_full(fd: int, mv: memoryview, off: int, path: str) -> None:
    """Fill ``mv`` from ``fd`` at ``off`` with os.preadv, or raise EndOfFileError."""
    pos, n = 0, len(mv)
    while pos < n:
        got = os.preadv(fd, [mv[pos:]], off + pos)
        if got == 0:
            raise _errors.make_error(
                _errors.ERR_EOF,
                "MemTierDataset: read %s at offset %d, %d bytes" % (path, off, n),
                "the file ends after %d of them (was it truncated?)" % pos,
                strerror="read past end of file",
                filename=path,
            )
        pos += got


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
    parent loaded libmemtier.so cannot use MemTier (the Go runtime does not
    survive ``fork()``, see :mod:`memtier._ffi`). With ``fork_fallback`` it
    reads with ``os.pread`` and warns once per process; a URL among
    :meth:`_fallback_paths` (``os.pread`` reads local files only), or
    ``fork_fallback=False``, raises :class:`memtier.ForkError` naming the fix.
    Building a dataset that must read through the library in the building
    process uses :meth:`_build_state`.

    A subclass sets ``_NAME`` and ``_STATE`` (its :class:`_ProcState` class), calls
    :meth:`_init_proc` in its ``__init__`` and implements ``_fallback_message``,
    ``_fallback_paths`` and ``__len__``; ``_start_fallback`` may prepare the pread
    fallback (it runs before the warning).
    """

    _NAME = ""
    _STATE: Callable[[int], _S]
    _FORK_ADVICE = ""  # more advice for the ForkError of fork_fallback=False
    _LOADED_NOTE = ""  # why the parent had loaded the library, when building does it
    _proc: Optional[_S]

    def _init_proc(self, context_options: Dict[str, Any], fork_fallback: bool) -> None:
        self._context_options = context_options
        self._fork_fallback = bool(fork_fallback)
        self._proc = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()

    def _start_fallback(self, st: _S) -> None:
        pass

    def _fallback_paths(self) -> List[str]:
        """The files the ``os.pread`` fallback would read."""
        raise NotImplementedError

    def _refuse_remote_fallback(self) -> None:
        """Raise ForkError when the fallback would have a URL to read."""
        urls = [p for p in self._fallback_paths() if _is_url(p)]
        if urls:
            raise _errors.make_error(
                _errors.ERR_FORKED,
                "%s: cannot read %s in this process (pid %d): it was forked after its parent "
                "loaded libmemtier.so%s, and the os.pread fallback reads local files only"
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

    def _fallback_message(self, err: BaseException) -> str:
        raise NotImplementedError

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
        """How this process reads: ``"memtier"``, ``"pread"`` (fork fallback), or None before its first read."""
        st = self._mine()
        if st is None:
            return None
        return "memtier" if st.ctx is not None else "pread"

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
                st.ctx = Context(self._context_options)
            except _errors.ForkError as e:
                if not self._fork_fallback:
                    raise _errors.make_error(
                        _errors.ERR_FORKED,
                        "%s: cannot read in this process (pid %d): it was forked "
                        "after its parent loaded libmemtier.so" % (self._NAME, pid),
                        hint="create the DataLoader with multiprocessing_context=\"spawn\" or "
                        "\"forkserver\", %sor build the dataset with fork_fallback=True to read "
                        "with os.pread" % self._FORK_ADVICE,
                    ) from e
                self._refuse_remote_fallback()
                self._start_fallback(st)
                self._warn_fallback(e)
            self._proc = st
            return st

    def _warn_fallback(self, err: BaseException) -> None:
        with _warn_lock:
            if _warned_pid.get(self._NAME) == os.getpid():
                return
            _warned_pid[self._NAME] = os.getpid()
        _log.warn("fork.fallback", "%s: pid %d reads with os.pread: it was forked after its parent loaded libmemtier.so (use multiprocessing_context=\"spawn\" or \"forkserver\")" % (self._NAME, os.getpid()))
        # stacklevel: here, _state, the read method, then the caller of ds[i]
        warnings.warn(self._fallback_message(err), RuntimeWarning, stacklevel=4)

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
