"""MemTierDataset: a map-style dataset whose samples are byte ranges of one file.

An index file lists the samples: sample ``k`` is bytes
``[offset_k, offset_k + length_k)`` of the data file. The index format (a NumPy
``.npy`` (N, 2) integer array, or text lines ``offset length``) is described
in the README and in :mod:`memtier._index`. Samples are read through MemTier
(one batched ``readv`` per DataLoader batch) and returned as uint8 torch
tensors, or numpy arrays when torch is absent or ``MEMTIER_PY_FORCE_NO_TORCH=1``.
"""

from __future__ import annotations

import os
import stat as _stat
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import _compact, _dsstats, _dtypes, _errors, _index, _samples
from ._buffers import TARGET_CUDA
from ._chunkio import _load_rows
from ._context import _object_size, _read_object
from ._cuda import _require_cuda, _torch_cuda_missing
from ._dsstats import DatasetStats
from ._options import _parse_device
from ._paths import PathType, _is_url

__all__ = ["MemTierDataset", "DatasetStats"]

_torch = _dtypes.torch_module()  # None without torch or with MEMTIER_PY_FORCE_NO_TORCH=1

if _torch is not None:
    _Base: Any = _torch.utils.data.Dataset
else:
    _Base = object


def _url_or_abspath(path: Any, is_url: Callable[[Any], bool]) -> str:
    """``path`` as a str: a URL unchanged, a local path made absolute."""
    p = os.fspath(path)
    if is_url(p):
        return os.fsdecode(p)
    return os.path.abspath(p)


def _regular_file_stat(path: str, what: str) -> os.stat_result:
    """``os.stat`` of a local ``what`` ("MemTierDataset data file") that must be
    a regular file. A missing file, a directory, a device, FIFO or socket, or a
    refused stat raise MemTier's classes (:class:`memtier.NotFoundError`,
    :class:`memtier.IsDirectoryError`, :class:`memtier.NotRegularFileError`,
    ..., which derive from the matching built-ins), with the path and the
    reason, as the library's errors do. Checked before any open: opening a FIFO
    blocks until a writer comes, and a device such as /dev/zero never ends."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise _errors.from_os_error(e, what, path) from None
    if _stat.S_ISDIR(st.st_mode):
        raise _errors.make_error(_errors.ERR_IS_DIR, what, strerror=_errors.STATUS_TEXTS[_errors.ERR_IS_DIR],
                                 filename=path)
    if not _stat.S_ISREG(st.st_mode):
        # NOT_REGULAR has no errno, so no OSError filename slot: the path goes
        # into the detail, as str() of IS_DIR's OSError shows it.
        text = _errors.STATUS_TEXTS[_errors.ERR_NOT_REGULAR]
        raise _errors.make_error(_errors.ERR_NOT_REGULAR, what, "%s: %r" % (text, path), strerror=text)
    return st


def _local_data_stat(path: str) -> os.stat_result:
    """``os.stat`` of a local data file (errors as :func:`_regular_file_stat`)."""
    return _regular_file_stat(path, "MemTierDataset data file")


def _local_index(path: str, data_size: int) -> np.ndarray:
    """The parsed local index file; errors opening it as :func:`_regular_file_stat`
    (a malformed index is :class:`memtier.FormatError` from the parser)."""
    _regular_file_stat(path, "MemTierDataset index file")
    try:
        return _index.parse_index(path, data_size)
    except OSError as e:
        raise _errors.from_os_error(e, "MemTierDataset index file", path) from None


class _ProcState(_samples._ProcState):
    """What one process uses to read: its own Context, or the pread fallback
    on its own descriptor, and its pool of batch buffers."""

    __slots__ = ("fd", "cuda_ok", "files")

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.fd = -1
        self.files: List[Any] = []  # [(fd, data file, identity at build)] of a forked process
        self.cuda_ok = False  # target "cuda": checked in this process


class MemTierDataset(_samples._PerProcess[_ProcState], _Base):  # type: ignore[misc, valid-type]
    """Map-style dataset of byte-range samples of one data file, read by MemTier.

    Parameters
    ----------
    index_file : str or os.PathLike
        The index: a ``.npy`` file holding an (N, 2) array (dtype ``<i8``,
        ``<u8``, ``<i4`` or ``<u4``, C order) or a text file with one
        ``offset length`` pair of decimal integers per line (``#`` comments and
        blank lines skipped); offsets and lengths in bytes. Parsed and validated
        here, in Python, without loading libmemtier.so. May be a URL
        (``s3://bucket/key``, ``http(s)://...``), read through the library.
    data_file : str or os.PathLike
        The file the ranges refer to. Only ``stat``-ed here (its size bounds
        the ranges); it is opened in each process at its first read. May be
        a URL, whose size the library asks the server for. A URL among the
        two files loads libmemtier.so in the building process, so forked
        DataLoader workers cannot read through MemTier and, a URL having no
        ``os.pread`` fallback, raise :class:`memtier.ForkError`: use
        ``multiprocessing_context="spawn"`` or ``"forkserver"``.
    target : str
        ``"cpu"`` (default), or ``"cuda"``/``"cuda:N"``: samples are 1-D
        ``torch.uint8`` CUDA tensors read straight into GPU memory by the
        library's CUDA target (a batch into one device buffer, one
        ``memtier_load_chunks`` call). Needs torch: without it the
        constructor raises :class:`memtier.UnsupportedError`; torch.cuda
        and the library's CUDA backend are checked at each process's first
        read (UnsupportedError naming the missing piece, with
        :func:`memtier.gpu_info`'s text), so building the dataset initialises
        no CUDA. CUDA tensors do not cross process boundaries well: read in
        the main process (``num_workers=0``). A fork-fallback process reads
        with ``os.pread`` and copies to the device with ``.to()``.
    transform : callable, optional
        Applied to each sample (after reading) by ``__getitem__`` and
        ``__getitems__``. Must pickle if the dataset goes to spawn/forkserver workers.
    context_options : mapping, optional
        Keyword settings for the :class:`memtier.Context` each process creates
        (keys of :data:`memtier.CONFIG_KEYS`, e.g. ``{"cache_bytes": 0}`` for no
        DRAM cache); key names are checked here, values when each process
        creates its context at its first read. An explicit ``cache_bytes``
        is the budget of each process; without one, DataLoader workers share
        the default budget (see *Cache budget of workers* below).
    fork_fallback : bool, keyword-only, default True
        What a process does when it was ``fork()``-ed from a parent that had
        already loaded MemTier (see *Processes and fork* below): True reads
        without the Go runtime (one ``memtier_pread_batch`` call per batch);
        False raises :class:`memtier.ForkError`.

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
    a parent that had already used MemTier (``memtier.safetensors``, any
    ``memtier`` call, or ``ds[i]`` in the parent; Linux's default start method
    before Python 3.14 is fork) cannot use that runtime; by default it then
    reads each batch with one ``memtier_pread_batch`` call of the library (pure
    C: the preads of the whole batch on its own file descriptor, the GIL
    released, no Go runtime): byte-identical results at the speed of a
    batched read of the page cache, without MemTier's DRAM cache and with no
    warning; :attr:`io_path` is ``"fork-batch"`` and the samples count in
    :attr:`fallback_reads`. Only with a library that lacks that entry does it
    read sample by sample with ``os.pread``, and then it warns once per
    process, naming the fix: ``DataLoader(...,
    multiprocessing_context="spawn" or "forkserver", persistent_workers=True)``
    (``persistent_workers`` keeps spawned workers, and their start-up, across
    epochs). With ``fork_fallback=False`` a forked worker raises
    :class:`memtier.ForkError` at its first read instead. A forked worker
    checks the data file against the version ``stat``-ed when the dataset was
    built (dev, inode, size, mtime, ctime) when it opens its descriptor and,
    unless ``context_options`` set ``freshness="open"``, after every batch
    (one ``fstat`` and one ``stat`` of the path): a file rewritten in place or
    replaced by rename raises :class:`memtier.MemTierError` ("changed since
    open ... build the dataset again") instead of returning bytes. (A process
    that reads through its own Context reads the new version.) Reads are positional
    in every mode (no shared file offset between workers). A CUDA target in a
    forked worker reads into host memory and copies with ``.to()``.

    Cache budget of workers
    -----------------------
    Each process has its own Context and DRAM cache. So that a DataLoader's
    workers do not each grow a full cache (with shuffling every worker sees
    every sample over the epochs), a worker's context, when
    ``context_options`` set neither ``cache_bytes`` nor ``cache_enabled``,
    gets the default budget (1 GiB, ``MEMTIER_CACHE_BYTES``, or less under a
    cgroup memory limit) divided by ``torch.utils.data.get_worker_info()
    .num_workers``, rounded down to a multiple of ``cache_block_bytes`` (no
    cache below one block): the workers of one loader hold at most one
    default budget together. The main process and a single worker keep the
    full default. ``ds._mine().ctx.config()`` shows a process's budget.
    Forked workers of a parent that used MemTier have no DRAM cache.

    Statistics
    ----------
    :meth:`stats` returns a :class:`memtier.dataset.DatasetStats` (samples,
    bytes, calls, ranges per read path, DRAM-cache hits) summed over the
    process that built the dataset and every DataLoader worker that read
    from it, fork, spawn or forkserver: the counters live in shared memory
    made when the dataset is built, and each process adds to its own row.
    :meth:`reset_stats` zeroes them.

    Raises
    ------
    memtier.FormatError
        The index is malformed or a range is past the end of the data file
        (the message names the text line or npy row).
    memtier.NotFoundError, memtier.PermissionDeniedError, memtier.IsDirectoryError
        The index or data file cannot be read or stat-ed; the message names
        which file, the reason and the path (``filename``). They derive from
        FileNotFoundError, PermissionError and IsADirectoryError.
    memtier.UnsupportedError
        A CUDA target without torch.
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
        if t == "cuda" or t.startswith("cuda:"):
            try:
                _, dev_index = _parse_device(t)
            except ValueError:
                raise ValueError("MemTierDataset: bad target %r (want \"cpu\" or \"cuda[:N]\")"
                                 % (target,)) from None
            if _torch is None:
                raise _errors.make_error(
                    _errors.ERR_UNSUPPORTED,
                    "MemTierDataset: target %r returns torch CUDA tensors and needs torch.cuda, "
                    "but %s" % (target, "MEMTIER_PY_FORCE_NO_TORCH is set" if _dtypes.torch_disabled()
                                else "torch is not importable"),
                    hint="use target=\"cpu\"",
                )
            t = "cuda:%d" % dev_index
        elif t != "cpu":
            raise ValueError("MemTierDataset: unknown target %r (want \"cpu\" or \"cuda[:N]\")" % (target,))
        opts = _samples._check_options(transform, context_options)
        # URLs (s3://, http(s)://) stay as given; local paths are made absolute.
        self._index_file = _url_or_abspath(index_file, _is_url)
        self._data_file = _url_or_abspath(data_file, _is_url)
        self._target = t
        self.transform = transform
        self._init_proc(opts, fork_fallback)
        if _is_url(self._data_file) or _is_url(self._index_file):
            self._open_remote()
        else:
            self._set_data_stat(_local_data_stat(self._data_file))
            self._ranges = _local_index(self._index_file, self._data_size)
        self._ranges.setflags(write=False)

    def _set_data_stat(self, st: os.stat_result) -> None:
        """The size that bounds the index and the version of the data file
        (its identity, the one stat) that forked processes check theirs against."""
        self._data_size = int(st.st_size)
        self._data_ident: Optional[_samples.Identity] = _samples.identity(st)

    def _open_remote(self) -> None:
        """The data size and the index of a dataset with a URL among its two
        files, read through this process's Context (so this process loads
        libmemtier.so now: DataLoader workers forked from it cannot use the
        pread fallback for a URL, see _start_fallback). The index is parsed
        by the same parser as a local one."""
        st = self._build_state("open %s" % self._data_file)
        where = "MemTierDataset"
        if _is_url(self._data_file):
            self._data_size = _object_size(st.ctx, self._data_file, where)
            self._data_ident = None  # forked processes cannot read a URL
        else:
            self._set_data_stat(_local_data_stat(self._data_file))
        if _is_url(self._index_file):
            data = _read_object(st.ctx, self._index_file, where)
            self._ranges = _index.parse_index_bytes(data, self._data_size, path=self._index_file)
        else:
            self._ranges = _local_index(self._index_file, self._data_size)

    # ------------------------------------------------------------ properties

    @property
    def index_file(self) -> str:
        """Absolute path of the index file (a URL as given)."""
        return self._index_file

    @property
    def data_file(self) -> str:
        """Absolute path of the data file (a URL as given)."""
        return self._data_file

    @property
    def data_size(self) -> int:
        """Size in bytes of the data file when the dataset was built."""
        return self._data_size

    @property
    def target(self) -> str:
        """Where samples are returned: ``"cpu"`` or ``"cuda:N"``."""
        return self._target

    @property
    def ranges(self) -> np.ndarray:
        """Read-only (N, 2) int64 array of (offset, length) per sample, in bytes."""
        return self._ranges

    @property
    def fallback_reads(self) -> int:
        """Non-empty samples this process read without a MemTier context (a
        forked process: ``memtier_pread_batch`` or ``os.pread``)."""
        st = self._mine()
        return st.fallback_reads if st is not None else 0

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

    # The index travels compact (memtier._compact: about 3 bytes per sample of
    # packed data instead of 16): a spawn worker's pickle larger than the pipe
    # that carries it blocks the parent's Process.start() until that worker has
    # read it, so the workers started one after another.
    _RANGES_FORMAT = 1

    def __getstate__(self) -> Dict[str, Any]:
        state = super().__getstate__()
        r = state.pop("_ranges")
        state["_ranges_packed"] = {"format": self._RANGES_FORMAT, "rows": int(r.shape[0]),
                                   "size": _compact.pack_ints(r[:, 1], delta=False),
                                   "off": _compact.pack_offsets(r[:, 0], r[:, 1])}
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        packed = state.pop("_ranges_packed", None)  # None: pickled with the array (before format 1)
        super().__setstate__(state)
        if packed is not None:
            _compact.check_format(packed, self._RANGES_FORMAT, "MemTierDataset", "index")
            size = _compact.unpack_ints(packed["size"])
            r = np.empty((packed["rows"], 2), dtype=np.int64)
            r[:, 1] = size
            r[:, 0] = _compact.unpack_offsets(packed["off"], size)
            self._ranges = r
        self._ranges.setflags(write=False)

    # ------------------------------------------------------- process state

    _NAME = "MemTierDataset"
    _STATE = _ProcState
    _FORK_ADVICE = "don't use MemTier in the parent before forking, "

    def _fallback_paths(self) -> List[str]:
        return [self._data_file]

    def _start_fallback(self, st: _ProcState) -> None:
        ident = getattr(self, "_data_ident", None)
        st.fd = self._open_checked(self._data_file, ident)
        st.files = [(st.fd, self._data_file, ident)]

    def _changed_error(self, path: str) -> _errors.MemTierError:
        # the library's text for a handle whose file changed ("changed since open")
        return _errors.make_error(
            _errors.ERR_IO, "MemTierDataset: read %s" % path,
            "file changed since open (size, mtime or inode differ): the data file is not the version "
            "the dataset was built from; build the dataset again", filename=path)

    def _path_of(self, i: int) -> str:
        return self._data_file

    def close(self) -> None:
        """Release this process's Context or file descriptor (the next read makes new ones)."""
        st = self._take_state()
        if st is None:
            return
        if st.ctx is not None:
            st.ctx.close()
        if st.fd >= 0:
            os.close(st.fd)

    # --------------------------------------------------------------- reads

    def _wrap(self, arr: np.ndarray) -> Any:
        return _torch.from_numpy(arr) if _torch is not None else arr

    def _cuda_state(self) -> _ProcState:
        """This process's state, with the CUDA target checked once (torch.cuda
        and, when reading through MemTier, the library's CUDA backend)."""
        st = self._state()
        if not st.cuda_ok:
            where = "MemTierDataset: target %r" % (self._target,)
            if st.ctx is not None:
                _require_cuda(st.ctx, where)
            else:
                _, why = _torch_cuda_missing()
                if why:
                    raise _errors.make_error(_errors.ERR_UNSUPPORTED,
                                             "%s: the CUDA target needs %s" % (where, why))
            st.cuda_ok = True
        return st

    def __getitem__(self, i: Any) -> Any:
        k = self._norm_index(i)
        off, length = (int(x) for x in self._ranges[k])
        if self._target != "cpu":
            sample = self._read_cuda(np.array([[off, length]], dtype=np.int64),
                                     np.array([k], dtype=np.int64))[0]
        else:
            buf = np.empty(length, dtype=np.uint8)
            if length:
                st = self._state()
                if st.ctx is not None:
                    try:
                        st.ctx.read_into(self._data_file, off, buf)
                    except _errors.MemTierError as e:
                        _errors.relabel(e, "memtier.read_into: ", "MemTierDataset sample %d: " % k)
                        raise
                    field = _dsstats.F_MEMTIER
                else:
                    field = self._fork_read(st, np.array([st.fd]), np.array([off]), np.array([length]),
                                            buf, np.zeros(1, dtype=np.int64), self._path_of, st.files)
                    st.fallback_reads += 1
                self._count(st, 1, length, field, 1)
            else:
                self._counters.add(1, 0, _dsstats.F_MEMTIER, 0)
            sample = self._wrap(buf)
        if self.transform is not None:
            sample = self.transform(sample)
        return sample

    def _resolve(self, indices: Sequence[Any]) -> np.ndarray:
        """Validated sample indices (negative ones resolved) as a 1-D int64
        array (two reductions and no copy for non-negative int64 input).

        Raises TypeError for non-integer indices, IndexError for one out of range."""
        n = self._ranges.shape[0]
        idx = indices if type(indices) is np.ndarray else np.asarray(indices)
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise TypeError("MemTierDataset indices must be integers, got dtype %s" % idx.dtype)
        if idx.size == 0:
            return idx.astype(np.int64)
        hi = int(np.maximum.reduce(idx))
        if idx.dtype.kind == "u":
            if hi >= n:  # before int64 could wrap it
                raise IndexError("MemTierDataset index %d out of range for %d samples" % (hi, n))
            return idx.astype(np.int64)
        lo = int(np.minimum.reduce(idx))
        if lo < -n or hi >= n:
            bad = next(int(i) for i in idx.tolist() if not -n <= i < n)
            raise IndexError("MemTierDataset index %d out of range for %d samples" % (bad, n))
        idx = idx.astype(np.int64, copy=False)
        return np.where(idx < 0, idx + n, idx) if lo < 0 else idx

    @staticmethod
    def _name_sample(e: _errors.MemTierError, idx: np.ndarray, keep: Optional[np.ndarray]) -> None:
        if e.index is not None:  # name the sample, not the readv element
            pos = int(e.index if keep is None else keep[e.index])
            e.sample = int(idx[pos])  # type: ignore[attr-defined]
            for api in ("memtier.readv", "MemTierDataset"):
                _errors.relabel(e, "%s: range %d: " % (api, e.index), "MemTierDataset sample %d: " % e.sample)
                _errors.relabel(e, "%s: chunk %d" % (api, e.index), "MemTierDataset sample %d" % e.sample)

    def _read_to_device(self, st: _ProcState, idx: np.ndarray, ranges: np.ndarray, base: int) -> None:
        """The read part of a CUDA batch (no tensor allocation): samples
        ``ranges`` back to back into device memory at address ``base``, with
        one memtier_load_chunks call per CHUNK_BYTES, target CUDA."""
        lengths = ranges[:, 1]
        keep = None if bool((lengths > 0).all()) else np.flatnonzero(lengths > 0)
        nz = ranges if keep is None else ranges[keep]
        if not nz.shape[0]:
            return
        starts = np.zeros(len(lengths), dtype=np.uint64)
        if len(lengths) > 1:
            np.cumsum(lengths[:-1], out=starts[1:])
        dsts = starts if keep is None else starts[keep]
        try:
            _load_rows(st.ctx, self._data_file, nz[:, 0].astype(np.uint64), nz[:, 1].astype(np.uint64),
                       dsts + np.uint64(base), "MemTierDataset", TARGET_CUDA)
        except _errors.MemTierError as e:
            self._name_sample(e, idx, keep)
            raise

    def _read_cuda(self, ranges: np.ndarray, idx: np.ndarray) -> List[Any]:
        """Samples ``ranges`` as 1-D uint8 CUDA tensors (views of one buffer)."""
        st = self._cuda_state()
        lengths = ranges[:, 1]
        total = int(lengths.sum())
        nonzero = int(np.count_nonzero(lengths))
        if st.ctx is None:  # a forked process: read into host memory, then copy
            host = np.empty(total, dtype=np.uint8)
            starts = np.zeros(len(lengths), dtype=np.int64)
            np.cumsum(lengths[:-1], out=starts[1:])
            field = self._fork_read(st, np.full(len(lengths), st.fd), ranges[:, 0], lengths, host, starts,
                                    self._path_of, st.files)
            st.fallback_reads += nonzero
            buf = _torch.from_numpy(host).to(self._target)
        else:
            field = _dsstats.F_MEMTIER
            buf = _torch.empty(total, dtype=_torch.uint8, device=self._target)
            if total:
                _torch.cuda.current_stream(buf.device).synchronize()
                self._read_to_device(st, idx, ranges, buf.data_ptr())
        self._count(st, len(lengths), total, field, nonzero)
        return list(buf.split(lengths.tolist()))

    def __getitems__(self, indices: Sequence[Any]) -> List[Any]:
        """Samples ``indices`` (a list of ints from a batch sampler) as a list;
        see the class docstring.

        One library call for the batch (``Context.readv`` of the batch's
        ranges into one pooled buffer; ``memtier_load_chunks`` for a CUDA
        target), then the samples are made as views of that buffer by one
        ``unsafe_split_with_sizes`` (torch) with no per-sample Python work besides
        ``transform``. Raises IndexError/TypeError for bad indices before any
        I/O; a read error names the sample (``e.sample``). Thread-safe.
        """
        idx = np.asarray(indices)
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            if idx.size == 0:
                return []
            if idx.dtype == object or idx.ndim != 1:
                return [self[i] for i in indices]  # unusual index objects: one by one
        elif idx.shape[0] == 0:
            return []
        if self._target == "cpu" and idx.dtype == np.int64:
            # A batch sampler's list of ints: take() checks the bounds (and
            # resolves negative indices) in the same C loop as the gather;
            # _resolve, only on failure, raises the dataset's IndexError. idx
            # keeps negative indices: a read error resolves it to name a sample.
            try:
                ranges = self._ranges.take(idx, axis=0)
            except IndexError:
                self._resolve(idx)
                raise
        else:
            idx = self._resolve(idx)
            ranges = self._ranges[idx]
        lengths = ranges[:, 1]
        if self._target != "cpu":
            samples = self._read_cuda(ranges, idx)
            if self.transform is not None:
                samples = [self.transform(s) for s in samples]
            return samples
        sizes = lengths.tolist()  # Python ints: the sum, min and split need no numpy calls
        total = sum(sizes)
        if total:
            st = self._state()
            buf = st.pool.get(total)
            if min(sizes) > 0:
                keep = None
                nz = ranges
            else:
                keep = np.flatnonzero(lengths)
                nz = ranges[keep]
            if st.ctx is not None:
                try:
                    st.ctx.readv(self._data_file, nz, out=buf)
                except _errors.MemTierError as e:
                    self._name_sample(e, self._resolve(idx), keep)
                    raise
                field = _dsstats.F_MEMTIER
            else:
                nl = nz[:, 1]
                starts = np.zeros(len(nl), dtype=np.int64)
                np.cumsum(nl[:-1], out=starts[1:])
                try:
                    field = self._fork_read(st, np.full(len(nl), st.fd), nz[:, 0], nl, buf, starts,
                                            self._path_of, st.files)
                except _errors.MemTierError as e:
                    self._name_sample(e, self._resolve(idx), keep)
                    raise
                st.fallback_reads += len(nz)
            self._count(st, len(idx), total, field, len(nz))
        else:
            buf = np.empty(0, dtype=np.uint8)
            self._counters.add(len(idx), 0, _dsstats.F_MEMTIER, 0)
        if _torch is not None:
            # One C++ call makes every view (Tensor.split adds a Python
            # layer). The unsafe variant skips autograd's view records, which
            # a uint8 tensor (it can never require grad) has no use for: the
            # samples still share the buffer's storage, which keeps it
            # referenced for the pool, as views do.
            samples = list(_torch.from_numpy(buf).unsafe_split_with_sizes(sizes))
        else:
            samples = []
            start = 0
            for end in np.cumsum(lengths).tolist():
                samples.append(buf[start:end])
                start = end
        if self.transform is not None:
            samples = [self.transform(s) for s in samples]
        return samples

    def _read_into_pointer(self, indices: Sequence[Any], ptr: int) -> np.ndarray:
        """Internal (the read part of a ``target="cuda"`` batch, without
        torch): samples ``indices`` back to back into device memory at
        address ``ptr``; returns their lengths. Checks the library's CUDA
        target first (UnsupportedError with gpu_info's text)."""
        idx = self._resolve(indices)
        ranges = self._ranges[idx]
        st = self._state()
        if st.ctx is None:
            raise _errors.make_error(_errors.ERR_UNSUPPORTED,
                                     "MemTierDataset: no MemTier context in this process (fork fallback)")
        _require_cuda(st.ctx, "MemTierDataset._read_into_pointer", need_torch=False)
        self._read_to_device(st, idx, ranges, ptr)
        return ranges[:, 1].copy()
