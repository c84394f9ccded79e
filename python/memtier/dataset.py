"""MemTierDataset: a map-style dataset whose samples are byte ranges of one file.

An index file lists the samples: sample ``k`` is bytes
``[offset_k, offset_k + length_k)`` of the data file. The index format (a NumPy
``.npy`` (N, 2) integer array, or text lines ``offset length``) is described
in the README and in :mod:`memtier._index`. Samples are read through MemTier
(one batched ``readv`` per DataLoader batch) and returned as uint8 torch
tensors, or numpy arrays when torch is absent or ``MEMTIER_PY_FORCE_NO_TORCH=1``.
"""

from __future__ import annotations

import operator
import os
import stat as _stat
import sys
import threading
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _dtypes, _errors, _index

__all__ = ["MemTierDataset"]

PathType = Union[str, "os.PathLike[str]"]

_torch = _dtypes.torch_module()  # None without torch or with MEMTIER_PY_FORCE_NO_TORCH=1

if _torch is not None:
    _Base: Any = _torch.utils.data.Dataset
else:
    _Base = object

# Per-process state inherited through fork() is parked here, never closed or
# collected in the child: closing a Context would run its finalizer in a
# process where the Go runtime is unusable.
_inherited: List["_ProcState"] = []
_warned_pid: Optional[int] = None
_warn_lock = threading.Lock()


def _reset_after_fork() -> None:
    global _warn_lock
    _warn_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class _ProcState:
    """What one process uses to read: its own Context, or the pread fallback,
    and its pool of batch buffers."""

    __slots__ = ("pid", "ctx", "fd", "fallback_reads", "pool")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ctx: Any = None
        self.fd = -1
        self.fallback_reads = 0
        self.pool = _BufferPool()


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


def _warn_fallback(data_file: str, err: BaseException) -> None:
    global _warned_pid
    with _warn_lock:
        if _warned_pid == os.getpid():
            return
        _warned_pid = os.getpid()
    warnings.warn(
        "MemTierDataset: this process was forked from one that had already loaded "
        "libmemtier.so, whose Go runtime does not survive fork(); samples of %s are "
        "read with plain os.pread in this process instead (correct, but without "
        "MemTier's batching and cache). To read through MemTier, create the DataLoader "
        "with multiprocessing_context=\"spawn\" or \"forkserver\", or do not use MemTier "
        "in the parent before its workers start. (%s)" % (data_file, err),
        RuntimeWarning,
        stacklevel=4,
    )


class MemTierDataset(_Base):  # type: ignore[misc, valid-type]
    """Map-style dataset of byte-range samples of one data file, read by MemTier.

    Parameters
    ----------
    index_file : str or os.PathLike
        The index: a ``.npy`` file holding an (N, 2) array (dtype ``<i8``,
        ``<u8``, ``<i4`` or ``<u4``, C order) or a text file with one
        ``offset length`` pair of decimal integers per line (``#`` comments and
        blank lines skipped); offsets and lengths in bytes. Parsed and validated
        here, in Python, without loading libmemtier.so.
    data_file : str or os.PathLike
        The file the ranges refer to. Only ``stat``-ed here (its size bounds
        the ranges); it is opened in each process at its first read.
    target : str
        ``"cpu"``. ``"cuda"``/``"cuda:N"`` raise :class:`memtier.UnsupportedError`
        (not yet supported; move batches to the GPU with ``.to(device)``).
    transform : callable, optional
        Applied to each sample (after reading) by ``__getitem__`` and
        ``__getitems__``. Must pickle if the dataset goes to spawn/forkserver workers.
    context_options : mapping, optional
        Keyword settings for the :class:`memtier.Context` each process creates
        (keys of :data:`memtier.CONFIG_KEYS`, e.g. ``{"cache_bytes": 0}`` for no
        DRAM cache); key names are checked here, values when each process
        creates its context at its first read.
    fork_fallback : bool, keyword-only, default True
        What a process does when it was ``fork()``-ed from a parent that had
        already loaded MemTier (see *Processes and fork* below): True reads with
        ``os.pread`` and warns once; False raises :class:`memtier.ForkError`.

    Samples
    -------
    ``ds[i]`` (negative ``i`` counts from the end, like a list; out of range
    raises IndexError) returns sample ``i``'s bytes as a 1-D ``torch.uint8``
    tensor of its length (a ``numpy.uint8`` array without torch), then
    ``transform(sample)`` if given. A length-0 record gives an empty sample.
    ``ds.__getitems__(indices)`` returns the list of samples of a batch, read
    with one ``Context.readv`` into one buffer and split into per-sample views
    of it. The buffer comes from a small per-process pool and is reused for a
    later batch only when no sample (nor anything derived from one that shares
    its memory: views, ``.numpy()``, a transform's view) references it any
    more; a batch that is still referenced is never overwritten. torch's
    DataLoader calls it once per batch when ``batch_size`` is set.
    Samples of different lengths need a ``collate_fn`` other than the default
    (which stacks equal-length samples).

    Processes and fork
    ------------------
    Building the dataset loads nothing: the index is parsed in pure Python and
    the data file is not opened, so the object pickles (no cffi objects; its
    state is the index array, paths and options) and works with spawn and
    forkserver DataLoader workers. Each process creates its own
    :class:`memtier.Context` at its first read, i.e. inside the DataLoader
    worker after torch installed the worker's signal handlers.

    libmemtier.so's Go runtime does not survive ``fork()``. A worker forked
    from a parent that never loaded MemTier (it only built the dataset and
    the loader) loads it itself and reads through MemTier. A worker forked from
    a parent that had already read through MemTier (any ``memtier`` call, or
    ``ds[i]`` in the parent) cannot; by default it then reads every sample with
    ``os.pread`` on its own file descriptor: byte-identical results, one
    ``RuntimeWarning`` per process, counted in :attr:`fallback_reads`. With
    ``fork_fallback=False`` it raises :class:`memtier.ForkError` at its first
    read instead, naming the fix: ``DataLoader(...,
    multiprocessing_context="spawn")`` or ``"forkserver"``. Reads are
    positional in every mode (no shared file offset between workers).

    Raises
    ------
    memtier.FormatError
        The index is malformed or a range is past the end of the data file
        (the message names the text line or npy row).
    FileNotFoundError, PermissionError, IsADirectoryError
        The index or data file cannot be read or stat-ed.
    memtier.UnsupportedError
        A CUDA target.
    ValueError, TypeError
        An unknown target, or bad ``context_options``.
    """

    def __init__(
        self,
        index_file: PathType,
        data_file: PathType,
        target: str = "cpu",
        transform: Optional[Callable[[Any], Any]] = None,
        context_options: Optional[Mapping[str, Any]] = None,
        *,
        fork_fallback: bool = True,
    ) -> None:
        t = str(target).strip().lower()
        if t.startswith("cuda") or t.startswith("gpu"):
            raise _errors.make_error(
                _errors.ERR_UNSUPPORTED,
                "MemTierDataset: target %r" % (target,),
                hint="only target=\"cpu\" is supported for now; move batches to the GPU "
                "with .to(device) (pin_memory=True in the DataLoader helps)",
            )
        if t != "cpu":
            raise ValueError("MemTierDataset: unknown target %r (want \"cpu\")" % (target,))
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable, got %r" % (transform,))
        opts: Dict[str, Any] = {}
        if context_options is not None:
            if not isinstance(context_options, Mapping):
                raise TypeError("context_options must be a mapping, got %s" % type(context_options).__name__)
            from ._context import CONFIG_KEYS  # importing loads no library

            unknown = sorted(str(k) for k in context_options if k not in CONFIG_KEYS)
            if unknown:
                raise TypeError("unknown context_options key(s) %s; valid: %s" % (unknown, list(CONFIG_KEYS)))
            opts = dict(context_options)
        self._index_file = os.path.abspath(os.fspath(index_file))
        self._data_file = os.path.abspath(os.fspath(data_file))
        st = os.stat(self._data_file)
        if _stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "MemTierDataset: data file is a directory", self._data_file)
        self._data_size = int(st.st_size)
        self._ranges = _index.parse_index(self._index_file, self._data_size)
        self._ranges.setflags(write=False)
        self._target = "cpu"
        self.transform = transform
        self._context_options = opts
        self._fork_fallback = bool(fork_fallback)
        self._proc: Optional[_ProcState] = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()

    # ------------------------------------------------------------ properties

    @property
    def index_file(self) -> str:
        """Absolute path of the index file."""
        return self._index_file

    @property
    def data_file(self) -> str:
        """Absolute path of the data file."""
        return self._data_file

    @property
    def data_size(self) -> int:
        """Size in bytes of the data file when the dataset was built."""
        return self._data_size

    @property
    def target(self) -> str:
        """Where samples are returned: ``"cpu"``."""
        return self._target

    @property
    def ranges(self) -> np.ndarray:
        """Read-only (N, 2) int64 array of (offset, length) per sample, in bytes."""
        return self._ranges

    @property
    def io_path(self) -> Optional[str]:
        """How this process reads: ``"memtier"``, ``"pread"`` (fork fallback), or
        None before its first read."""
        st = self._proc
        if st is None or st.pid != os.getpid():
            return None
        return "memtier" if st.ctx is not None else "pread"

    @property
    def fallback_reads(self) -> int:
        """Non-empty samples this process read with the ``os.pread`` fork fallback."""
        st = self._proc
        return st.fallback_reads if st is not None and st.pid == os.getpid() else 0

    def __len__(self) -> int:
        return int(self._ranges.shape[0])

    def __repr__(self) -> str:
        return "MemTierDataset(index_file=%r, data_file=%r, samples=%d, target=%r)" % (
            self._index_file,
            self._data_file,
            len(self),
            self._target,
        )

    # ------------------------------------------------------------- pickling

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state["_proc"] = None  # a Context or fd belongs to one process
        del state["_lock"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._proc = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()

    # ------------------------------------------------------- process state

    def _state(self) -> _ProcState:
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
            st = _ProcState(pid)
            try:
                from ._context import Context

                st.ctx = Context(self._context_options)
            except _errors.ForkError as e:
                if not self._fork_fallback:
                    raise _errors.make_error(
                        _errors.ERR_FORKED,
                        "MemTierDataset: cannot read in this process (pid %d): it was forked "
                        "after its parent loaded libmemtier.so" % pid,
                        hint="create the DataLoader with multiprocessing_context=\"spawn\" or "
                        "\"forkserver\", don't use MemTier in the parent before forking, or "
                        "build the dataset with fork_fallback=True to read with os.pread",
                    ) from e
                st.fd = os.open(self._data_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                _warn_fallback(self._data_file, e)
            self._proc = st
            return st

    def close(self) -> None:
        """Release this process's Context or file descriptor (the next read makes new ones)."""
        st = self._proc
        if st is None or st.pid != os.getpid():
            return
        self._proc = None
        if st.ctx is not None:
            st.ctx.close()
        if st.fd >= 0:
            os.close(st.fd)

    # --------------------------------------------------------------- reads

    def _norm_index(self, i: Any) -> int:
        try:
            k = operator.index(i)
        except TypeError:
            raise TypeError("MemTierDataset indices must be integers, not %s" % type(i).__name__) from None
        n = self._ranges.shape[0]
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("MemTierDataset index %d out of range for %d samples" % (operator.index(i), n))
        return k

    def _wrap(self, arr: np.ndarray) -> Any:
        return _torch.from_numpy(arr) if _torch is not None else arr

    def __getitem__(self, i: Any) -> Any:
        k = self._norm_index(i)
        off, length = (int(x) for x in self._ranges[k])
        buf = np.empty(length, dtype=np.uint8)
        if length:
            st = self._state()
            if st.ctx is not None:
                st.ctx.read_into(self._data_file, off, buf)
            else:
                _pread_full(st.fd, memoryview(buf), off, self._data_file)
                st.fallback_reads += 1
        sample = self._wrap(buf)
        if self.transform is not None:
            sample = self.transform(sample)
        return sample

    def __getitems__(self, indices: Sequence[Any]) -> List[Any]:
        """Samples ``indices`` (a list of ints from a batch sampler) as a list,
        read with one batched read; see the class docstring."""
        n = self._ranges.shape[0]
        idx = np.asarray(indices)
        if idx.size == 0:
            return []
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            if idx.dtype == object or idx.ndim != 1:
                return [self[i] for i in indices]  # unusual index objects: one by one
            raise TypeError("MemTierDataset indices must be integers, got dtype %s" % idx.dtype)
        if idx.dtype.kind == "u" and int(idx.max()) >= n:  # before int64 could wrap it
            raise IndexError("MemTierDataset index %d out of range for %d samples" % (int(idx.max()), n))
        idx = idx.astype(np.int64, copy=False)
        if int(idx.min()) < -n or int(idx.max()) >= n:
            bad = next(int(i) for i in idx.tolist() if not -n <= i < n)
            raise IndexError("MemTierDataset index %d out of range for %d samples" % (bad, n))
        idx = np.where(idx < 0, idx + n, idx)
        ranges = self._ranges[idx]
        lengths = ranges[:, 1]
        total = int(lengths.sum())
        if total:
            st = self._state()
            buf = st.pool.get(total)
            keep = None if bool((lengths > 0).all()) else np.flatnonzero(lengths > 0)
            nz = ranges if keep is None else ranges[keep]
            if st.ctx is not None:
                try:
                    st.ctx.readv(self._data_file, nz, out=buf)
                except _errors.MemTierError as e:
                    if e.index is not None:  # name the sample, not the readv element
                        pos = int(e.index if keep is None else keep[e.index])
                        e.sample = int(idx[pos])  # type: ignore[attr-defined]
                        if e.args and isinstance(e.args[0], str):
                            e.args = ("%s (MemTierDataset sample %d)" % (e.args[0], e.sample),) + e.args[1:]
                    raise
            else:
                mv = memoryview(buf)
                pos = 0
                for off, ln in nz.tolist():
                    _pread_full(st.fd, mv[pos : pos + ln], off, self._data_file)
                    pos += ln
                st.fallback_reads += len(nz)
        else:
            buf = np.empty(0, dtype=np.uint8)
        if _torch is not None:
            samples = list(_torch.from_numpy(buf).split(lengths.tolist()))
        else:
            samples = []
            start = 0
            for end in np.cumsum(lengths).tolist():
                samples.append(buf[start:end])
                start = end
        if self.transform is not None:
            samples = [self.transform(s) for s in samples]
        return samples


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
