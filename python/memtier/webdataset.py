"""TarShardDataset: WebDataset-style tar shards as a map-style dataset read by MemTier.

A shard is a tar archive (POSIX ustar, GNU long names, pax path records) whose
regular-file members are grouped into samples by the WebDataset convention
(https://github.com/webdataset/webdataset, ``tariterators.py``): the key of a
member is its path up to the first ``.`` of its basename and the rest is its
extension (webdataset's ``base_plus_ext``, regex
``^((?:.*/|)[^.]+)[.]([^/]*)$``); consecutive members with the same key form
one sample ``{"__key__": key, "__url__": shard, ext: bytes, ...}`` with the
extensions lower-cased. Members whose name has no extension, and names of the
form ``__...__`` (WebDataset's metadata entries), are skipped, as WebDataset
skips them. Samples never span two shards.

Unlike ``webdataset.WebDataset`` (an iterable that streams each shard once,
front to back) this is a map-style dataset: ``len()``, random access, and any
sampler (shuffling, distributed) of a torch DataLoader. libmemtier.so indexes
each shard's members once (``memtier_dataset_open_tar``: about 1 KiB read per
member, the data is skipped; the context keeps the index in memory) and reads
a batch's members with one ``memtier_dataset_read_batch`` per shard of the
batch (adjacent members coalesced, the rest read in parallel).
"""

from __future__ import annotations

import os
import re
import stat as _stat
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _compact, _dsstats, _dtypes, _errors, _ffi, _fork, _samples
from ._paths import PathType, _cpath, _is_url

__all__ = ["TarShardDataset", "base_plus_ext"]

_torch = _dtypes.torch_module()  # None without torch or with MEMTIER_PY_FORCE_NO_TORCH=1
_Base: Any = _torch.utils.data.Dataset if _torch is not None else object

_BASE_PLUS_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$", re.S)
_SKIP_META = re.compile(r"__[^/]*__($|/)")
_RESERVED = ("__key__", "__url__")


def base_plus_ext(path: str) -> Tuple[Optional[str], Optional[str]]:
    """Split a member name into (key, extension) like WebDataset; (None, None) without an extension."""
    m = _BASE_PLUS_EXT.match(path)
    if not m:
        return None, None
    return m.group(1), m.group(2)


# Threads that open a dataset's URL shards at once (_open_urls): one per CPU, 2 to 8.
# Below a disk cache an open fetches up to 4 disk blocks at a time and writes them to
# the disk tier (runtime/engine/tarfetch.go), CPU work (receive, checksum, write) that
# more threads than CPUs do not speed up: bench_remote's 8 shards of 33 MB on the 2-CPU
# build machine, construction medians of 5 interleaved runs: 0.93 s opened one after
# another, 0.78 s with 2 threads, 0.80 s with 8 (main: 1.01 s). Each open holds one
# window (16 MiB by default) while it runs.
_OPEN_THREADS = max(2, min(8, os.cpu_count() or 2))

# A WebDataset brace pattern: "{000..009}" ranges or "{a,b}" lists.
_BRACES = re.compile(r"\{[^{}]*(\.\.|,)[^{}]*\}")

class _Shard:
    """One open ``memtier_dataset_t`` of this process (closed when collected)."""

    __slots__ = ("h", "fin", "__weakref__")

    def __init__(self, ctx: Any, path: str) -> None:
        h = ctx._handle()
        out = ctx._ffi.new("memtier_dataset_t **")
        rc = ctx._lib.memtier_dataset_open_tar(h, _cpath(path), out)
        if rc:
            ctx._fail(rc, "TarShardDataset", path)
        self.h = out[0]
        self.fin = _fork.finalizer(self, ctx._lib.memtier_dataset_close, self.h, ctx._pid, ctx)


class _ProcState(_samples._ProcState):
    """What one process reads with: a Context and open shards, or the pread fallback."""

    __slots__ = ("shards", "fds", "lock", "checked")

    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.shards: Dict[int, _Shard] = {}
        self.fds: Dict[int, int] = {}
        self.lock = threading.Lock()
        # members (dataset member index) whose size this process's shard
        # handle was checked against the dataset's table; None until first use
        self.checked: Optional[np.ndarray] = None


class TarShardDataset(_samples._PerProcess[_ProcState], _Base):  # type: ignore[misc, valid-type]
    """Map-style dataset of the WebDataset samples of one or more tar shards.

    Parameters
    ----------
    urls : str, bytes, os.PathLike, or a sequence of them
        Local paths or ``s3://``, ``http://``, ``https://`` URLs of ``.tar``
        shards (POSIX ustar, GNU long names, pax). Each is indexed here (a
        URL's headers with ranged reads); ``__url__`` of its samples is the
        path as given. Brace patterns (``shard-{000..009}.tar``) are not
        expanded: pass the list (e.g.
        ``list(braceexpand.braceexpand(pattern))``); ``pipe:`` specs and
        other URL schemes are refused. Forked workers have no ``os.pread``
        fallback for a URL: use ``multiprocessing_context="spawn"`` or
        ``"forkserver"``.
    transform : callable, optional
        Applied to each sample dict by ``__getitem__`` / ``__getitems__``.
        Must pickle if the dataset goes to spawn/forkserver workers.
    context_options : mapping, optional
        Keyword settings of the :class:`memtier.Context` each process creates
        (keys of :data:`memtier.CONFIG_KEYS`). Without ``cache_bytes`` or
        ``cache_enabled``, each of N DataLoader workers gets the default
        DRAM cache budget divided by N (as for
        :class:`memtier.dataset.MemTierDataset`, "Cache budget of workers").
    fork_fallback : bool, keyword-only, default True
        In a process ``fork()``-ed from one that had loaded MemTier: True reads
        each batch with one ``memtier_pread_batch`` call (no Go runtime, no
        warning), False raises :class:`memtier.ForkError`.

    Samples
    -------
    ``ds[i]`` (negative ``i`` counts from the end; IndexError out of range)
    is a dict ``{"__key__": str, "__url__": str, ext: bytes, ...}`` with one
    entry per member of the sample, keyed by its lower-cased extension
    (``"jpg"``, ``"cls"``, ``"seg.png"``), holding the member's raw bytes
    (no decoding), then ``transform(sample)`` if given. This is exactly
    what iterating ``webdataset.WebDataset(urls, shardshuffle=False)``
    yields, in the same order (without its ``__local_path__`` entry).
    ``ds.__getitems__(indices)`` returns the samples of a batch, read with
    one ``memtier_dataset_read_batch`` call per shard in the batch; torch's
    DataLoader calls it once per batch. The default collate turns a batch
    into ``{"__key__": [...], "jpg": [bytes, ...], ...}`` when every sample
    has the same extensions.

    Processes and fork
    ------------------
    Building the dataset indexes the shards through libmemtier.so in this
    process, so it loads the library (and its Go runtime) here. The object
    pickles (its state is the member table: offsets, sizes, extensions,
    keys), so DataLoader workers started with ``multiprocessing_context=
    "spawn"`` or ``"forkserver"`` each open the shards with their own
    Context at their first read (the shard's member index is rebuilt there
    and checked against the table: a shard that changed since the dataset
    was built raises :class:`memtier.MemTierError`). Workers ``fork()``-ed
    from this process cannot use its Go runtime; they read each batch's
    members with one ``memtier_pread_batch`` call (pure C, exact bytes, no
    DRAM cache; :attr:`io_path` ``"fork-batch"``), or raise, as
    ``fork_fallback`` says. Such a worker checks each shard against the
    version indexed here (dev, inode, size, mtime, ctime) when it opens its
    descriptor and, unless ``context_options`` set ``freshness="open"``,
    after every batch (one ``fstat`` and one ``stat`` per shard of the
    batch): a shard rewritten or replaced since raises the same
    :class:`memtier.MemTierError` ("the shard changed since the dataset was
    built ... build the dataset again"), never other bytes. Only with a library that lacks that entry do they
    read member by member with ``os.pread``, warning once per process with
    the fix (``multiprocessing_context="spawn"`` or ``"forkserver"``,
    ``persistent_workers=True``).

    Statistics
    ----------
    :meth:`stats` returns a :class:`memtier.dataset.DatasetStats` summed over
    this process and every DataLoader worker that read from the dataset
    (``bytes`` counts member bytes; the ``*_reads`` fields count non-empty
    members). ``memtier_dataset_read_batch`` does not admit what it reads
    into the DRAM cache (the page cache serves re-reads), so ``cache_hit_*``
    stay 0 unless another read of the context cached those bytes.

    Raises
    ------
    memtier.FormatError
        A shard is not a valid tar archive (the library's message), or two
        members of one sample have the same extension (WebDataset's
        "duplicate file name in tar file").
    FileNotFoundError, PermissionError, IsADirectoryError
        A shard cannot be opened (memtier's subclasses of them).
    ValueError, TypeError
        No shards, or bad ``context_options`` / ``transform``.

    Notes
    -----
    Thread safety: ``__getitem__``/``__getitems__`` may be called from many
    threads of one process.
    """

    def __init__(
        self,
        urls: Union[PathType, Sequence[PathType]],
        transform: Optional[Callable[[Dict[str, Any]], Any]] = None,
        context_options: Optional[Mapping[str, Any]] = None,
        *,
        fork_fallback: bool = True,
    ) -> None:
        if isinstance(urls, (str, bytes, os.PathLike)):
            shards = [urls]
        else:
            shards = list(urls)
        if not shards:
            raise ValueError("TarShardDataset: no shards given")
        for u in shards:
            if not isinstance(u, (str, bytes, os.PathLike)):
                raise TypeError("TarShardDataset: shard paths must be str, bytes or os.PathLike, got %r" % (u,))
        opts = _samples._check_options(transform, context_options)
        self._urls = [os.fsdecode(u) for u in shards]
        # s3:// and http(s):// shards are read by the library as given;
        # local paths are made absolute.
        self._paths = [u if _is_url(u) else os.path.abspath(u) for u in self._urls]
        for u in self._urls:
            if not _is_url(u) and ("://" in u or u.startswith("pipe:")):
                raise ValueError(
                    "TarShardDataset: %r is a pipe: spec or a URL of a scheme MemTier does not read; "
                    "shards are local .tar files or s3://, http:// and https:// objects" % u)
        for u, p in zip(self._urls, self._paths):
            if _is_url(u):
                continue  # memtier_dataset_open_tar reports a missing object
            try:
                mode = os.stat(p).st_mode
            except FileNotFoundError:
                hint = ""
                if _BRACES.search(u):
                    hint = ("this looks like a WebDataset brace pattern, which is not expanded here: "
                            "pass the list of shards, e.g. list(braceexpand.braceexpand(pattern))")
                raise _errors.make_error(_errors.ERR_NOT_FOUND, "TarShardDataset", strerror="file not found",
                                         filename=p, hint=hint) from None
            if _stat.S_ISDIR(mode):
                raise IsADirectoryError(21, "TarShardDataset: shard is a directory", p)
        self.transform = transform
        self._init_proc(opts, fork_fallback)
        self._build_index()

    # ------------------------------------------------------------- indexing

    def _build_index(self) -> None:
        st = self._build_state("index the shards")
        self._open_urls(st)
        ctx = st.ctx
        ffi, lib = ctx._ffi, ctx._lib
        cnt = ffi.new("uint64_t *")
        offp = ffi.new("uint64_t *")
        sizep = ffi.new("uint64_t *")
        namep = ffi.new("const char **")
        m_shard: List[int] = []
        m_idx: List[int] = []
        m_off: List[int] = []
        m_size: List[int] = []
        m_ext: List[str] = []
        s_start: List[int] = []
        s_key: List[str] = []
        s_shard: List[int] = []
        idents: List[Optional[_samples.Identity]] = []
        for s, path in enumerate(self._paths):
            # The version forked processes check their descriptors against:
            # the shard's identity before its handle was opened, which must
            # still hold once its member table is read (else the table may
            # describe another version).
            before = None if _is_url(path) else self._stat_identity(s)
            sh = self._shard(st, s)
            rc = lib.memtier_dataset_count(sh.h, cnt)
            if rc:
                ctx._fail(rc, "TarShardDataset", path)
            cur_key: Optional[str] = None
            cur_exts: set = set()
            for i in range(int(cnt[0])):
                rc = lib.memtier_dataset_sample(sh.h, i, offp, sizep, namep)
                if rc:
                    ctx._fail(rc, "TarShardDataset", path)
                name = ffi.string(namep[0]).decode("utf-8", "surrogateescape")
                if "/" not in name and name.startswith("__") and name.endswith("__"):
                    continue  # WebDataset metadata entries
                if _SKIP_META.match(name):
                    continue
                key, ext = base_plus_ext(name)
                if key is None:
                    continue
                ext = ext.lower()  # type: ignore[union-attr]
                if cur_key is None or key != cur_key:
                    cur_key = key
                    cur_exts = set(_RESERVED)
                    s_start.append(len(m_off))
                    s_key.append(key)
                    s_shard.append(s)
                if ext in cur_exts:
                    raise _errors.make_error(
                        _errors.ERR_FORMAT,
                        "TarShardDataset: %s" % self._urls[s],
                        "%s: duplicate file name in tar file %s (sample %r already has it)" % (name, ext, key),
                        strerror="malformed file format",
                    )
                cur_exts.add(ext)
                m_shard.append(s)
                m_idx.append(i)
                m_off.append(int(offp[0]))
                m_size.append(int(sizep[0]))
                m_ext.append(ext)
            if before is not None and self._stat_identity(s) != before:
                raise _errors.make_error(
                    _errors.ERR_IO, "TarShardDataset: %s" % self._urls[s],
                    "the shard changed while it was being indexed; build the dataset again",
                    filename=path)
            idents.append(before)
        self._idents = idents
        s_start.append(len(m_off))
        self._m_shard = np.array(m_shard, dtype=np.int32)
        self._m_idx = np.array(m_idx, dtype=np.uint64)
        self._m_off = np.array(m_off, dtype=np.int64)
        self._m_size = np.array(m_size, dtype=np.int64)
        self._m_ext = m_ext
        self._s_start = np.array(s_start, dtype=np.int64)
        self._s_key = s_key
        self._s_shard = np.array(s_shard, dtype=np.int32)
        for a in (self._m_shard, self._m_idx, self._m_off, self._m_size, self._s_start, self._s_shard):
            a.setflags(write=False)
        # this process's handles made the table: nothing to check against it
        st.checked = np.ones(len(m_ext), dtype=bool)

    def _open_urls(self, st: _ProcState) -> None:
        """Open the URL shards in parallel threads (the library call releases the GIL).

        Opening a URL shard indexes it through the disk tier, which fetches the blocks under
        its headers (every block, for small members); one after another, a dataset's shards
        waited for each other's GETs and disk writes. Local shards are opened as before, by
        ``_build_index``. The first error (in shard order) is raised after every open ended.
        """
        todo = [s for s, p in enumerate(self._paths) if _is_url(p) and s not in st.shards]
        if len(todo) < 2:
            return
        opened: Dict[int, _Shard] = {}
        errors: Dict[int, BaseException] = {}

        def work(queue: List[int]) -> None:
            while True:
                try:
                    s = queue.pop()
                except IndexError:
                    return
                try:
                    opened[s] = _Shard(st.ctx, self._paths[s])
                except BaseException as e:  # re-raised below, in shard order
                    errors[s] = e

        queue = list(reversed(todo))  # list.pop is atomic: the threads share it
        threads = [threading.Thread(target=work, args=(queue,), daemon=True)
                   for _ in range(min(len(todo), _OPEN_THREADS))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            # Ctrl-C lands in join; the openers wait inside the library on
            # their shards' servers: stop those GETs, or the exit waits for
            # the remote timeouts.
            st.ctx.interrupt()
            raise
        with st.lock:
            for s, sh in opened.items():
                st.shards.setdefault(s, sh)
        if errors:
            raise errors[min(errors)]

    # ------------------------------------------------------------ properties

    @property
    def shards(self) -> List[str]:
        """The shard paths as given (the ``__url__`` values)."""
        return list(self._urls)

    @property
    def num_members(self) -> int:
        """Tar members that belong to samples (all shards)."""
        return len(self._m_ext)

    @property
    def fallback_reads(self) -> int:
        """Members this process read without a MemTier context (a forked
        process: ``memtier_pread_batch`` or ``os.pread``)."""
        st = self._mine()
        return st.fallback_reads if st is not None else 0

    def key(self, i: int) -> str:
        """The ``__key__`` of sample ``i`` (no read)."""
        return self._s_key[self._norm_index(i)]

    def __len__(self) -> int:
        return len(self._s_key)

    def __repr__(self) -> str:
        return "TarShardDataset(%d shards, %d samples, %d members)" % (
            len(self._urls), len(self), self.num_members)

    # ------------------------------------------------------------- pickling

    # The member table travels compact (memtier._compact: 22 KB instead of 235 KB
    # for bench_remote's 4096 samples): a spawn worker's pickle larger than the
    # pipe that carries it blocks the parent's Process.start() until that worker
    # has read it, so the workers started one after another.
    _TABLE = ("_m_shard", "_m_idx", "_m_off", "_m_size", "_m_ext", "_s_start", "_s_key", "_s_shard")
    _TABLE_FORMAT = 1
    _TAR_BLOCK = 512  # members' data starts on a tar block: offsets are gaps after the padded end

    def __getstate__(self) -> Dict[str, Any]:
        state = super().__getstate__()
        for k in self._TABLE:
            del state[k]
        keys = _compact.pack_strs(self._s_key)
        state["_table"] = {
            "format": self._TABLE_FORMAT,
            "m_shard": _compact.pack_ints(self._m_shard),
            "m_idx": _compact.pack_ints(self._m_idx),
            "m_size": _compact.pack_ints(self._m_size, delta=False),
            "m_off": _compact.pack_offsets(self._m_off, self._m_size, self._TAR_BLOCK),
            "m_ext": _compact.pack_codes(self._m_ext),
            "s_start": _compact.pack_ints(self._s_start),
            "s_key": ("z", keys) if keys is not None else ("list", list(self._s_key)),
            "s_shard": _compact.pack_ints(self._s_shard),
        }
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state = dict(state)
        table = state.pop("_table", None)  # None: pickled with the table's arrays (before format 1)
        super().__setstate__(state)
        if table is not None:
            _compact.check_format(table, self._TABLE_FORMAT, "TarShardDataset", "member table")
            self._m_shard = _compact.unpack_ints(table["m_shard"])
            self._m_idx = _compact.unpack_ints(table["m_idx"])
            self._m_size = _compact.unpack_ints(table["m_size"])
            self._m_off = _compact.unpack_offsets(table["m_off"], self._m_size)
            self._m_ext = _compact.unpack_codes(table["m_ext"])
            self._s_start = _compact.unpack_ints(table["s_start"])
            how, keys = table["s_key"]
            self._s_key = _compact.unpack_strs(keys) if how == "z" else list(keys)
            self._s_shard = _compact.unpack_ints(table["s_shard"])
        for a in (self._m_shard, self._m_idx, self._m_off, self._m_size, self._s_start, self._s_shard):
            a.setflags(write=False)

    # ------------------------------------------------------- process state

    _NAME = "TarShardDataset"
    _STATE = _ProcState

    _LOADED_NOTE = " (building a TarShardDataset does)"

    def _fallback_paths(self) -> List[str]:
        return list(self._urls)

    def _shard(self, st: _ProcState, s: int) -> _Shard:
        return _samples._once(st.shards, st.lock, s, _Shard, st.ctx, self._paths[s])

    def _stat_identity(self, s: int) -> _samples.Identity:
        try:
            return _samples.identity(os.stat(self._paths[s]))
        except OSError as e:
            raise _errors.from_os_error(e, "TarShardDataset", self._paths[s]) from None

    def _ident(self, s: int) -> Optional[_samples.Identity]:
        idents = getattr(self, "_idents", None)  # None: pickled by an older version
        return idents[s] if idents is not None else None

    def _fd(self, st: _ProcState, s: int) -> int:
        """A forked process's descriptor of shard ``s`` (checked at open)."""
        return _samples._once(st.fds, st.lock, s, self._open_checked, self._paths[s], self._ident(s))

    def _changed_error(self, path: str) -> _errors.MemTierError:
        # the text of a spawned process whose shard's member table differs
        url = self._urls[self._paths.index(path)]
        return _errors.make_error(
            _errors.ERR_IO, "TarShardDataset: %s" % url,
            "the shard changed since the dataset was built (size, mtime or inode differ); "
            "build the dataset again", filename=path)

    def close(self) -> None:
        """Release this process's Context, shard handles and descriptors (the next read makes new ones)."""
        st = self._take_state()
        if st is None:
            return
        for sh in st.shards.values():
            sh.fin()
        st.shards.clear()
        if st.ctx is not None:
            st.ctx.close()
        for fd in st.fds.values():
            os.close(fd)
        st.fds.clear()

    # --------------------------------------------------------------- reads

    def __getitem__(self, i: Any) -> Any:
        return self._read([self._norm_index(i)])[0]

    def __getitems__(self, indices: Sequence[Any]) -> List[Any]:
        """Samples ``indices`` (a list of ints from a batch sampler) as a list of dicts,
        read with one ``memtier_dataset_read_batch`` per shard; see the class docstring."""
        return self._read([self._norm_index(i) for i in indices])

    def _read(self, samples: List[int]) -> List[Any]:
        if not samples:
            return []
        sidx = np.asarray(samples, dtype=np.int64)
        starts = self._s_start[sidx]
        counts = self._s_start[sidx + 1] - starts
        total_m = int(counts.sum())
        # member indices of the batch, sample by sample
        first = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        mem = first + np.arange(total_m, dtype=np.int64)
        sizes = self._m_size[mem]
        pos = np.zeros(total_m + 1, dtype=np.int64)
        np.cumsum(sizes, out=pos[1:])
        total = int(pos[-1])
        st = self._state()
        buf = st.pool.get(total) if total else np.empty(0, dtype=np.uint8)
        if total:
            if st.ctx is not None:
                self._read_memtier(st, mem, sizes, pos, buf)
                field = _dsstats.F_MEMTIER
            else:
                shard_of = self._m_shard[mem]
                fd_of = np.full(len(self._paths), -1, dtype=np.int32)
                files = []
                for s in np.unique(shard_of).tolist():
                    fd = self._fd(st, s)
                    fd_of[s] = fd
                    files.append((fd, self._paths[s], self._ident(s)))
                field = self._fork_read(st, fd_of[shard_of], self._m_off[mem], sizes, buf, pos[:-1],
                                        lambda i: self._paths[int(shard_of[i])], files)
                st.fallback_reads += total_m
            self._count(st, len(samples), total, field, int(np.count_nonzero(sizes)))
        else:
            self._counters.add(len(samples), 0, _dsstats.F_MEMTIER, 0)
        out: List[Any] = []
        p = pos.tolist()
        j = 0
        for k, c in zip(samples, counts.tolist()):
            s = int(self._s_shard[k])
            d: Dict[str, Any] = {"__key__": self._s_key[k], "__url__": self._urls[s]}
            for _ in range(c):
                d[self._m_ext[int(mem[j])]] = buf[p[j]:p[j + 1]].tobytes()
                j += 1
            out.append(self.transform(d) if self.transform is not None else d)
        del buf
        return out

    def _read_memtier(self, st: _ProcState, mem: np.ndarray, sizes: np.ndarray, pos: np.ndarray,
                      buf: np.ndarray) -> None:
        ctx = st.ctx
        ffi, lib = ctx._ffi, ctx._lib
        base = buf.__array_interface__["data"][0]
        addrs = (pos[:-1].astype(np.uint64) + np.uint64(base))
        shard_of = self._m_shard[mem]
        sizep = ffi.new("uint64_t *")
        for s in np.unique(shard_of).tolist():
            sel = np.flatnonzero(shard_of == s)
            sh = self._shard(st, s)
            idx = np.ascontiguousarray(self._m_idx[mem[sel]], dtype=np.uint64)
            # The handle's member table must be the one this dataset was built
            # from: read_batch writes each member's size into its slot. A
            # handle's table is fixed when it is opened, so each member is
            # checked once per process (the first batch that reads it), not
            # on every read.
            checked = st.checked
            if checked is None:
                checked = st.checked = np.zeros(len(self._m_ext), dtype=bool)
            todo = np.flatnonzero(~checked[mem[sel]])
            for j in todo.tolist():
                i, want = int(idx[j]), int(sizes[sel[j]])
                rc = lib.memtier_dataset_sample(sh.h, i, ffi.NULL, sizep, ffi.NULL)
                if rc or int(sizep[0]) != want:
                    raise _errors.make_error(
                        _errors.ERR_IO, "TarShardDataset: %s" % self._urls[s],
                        "the shard changed since the dataset was built (member %d: %s); "
                        "build the dataset again" % (i, "missing" if rc else "size %d, was %d" % (int(sizep[0]), want)),
                        filename=self._paths[s])
            if todo.size:
                checked[mem[sel[todo]]] = True
            dsts = np.ascontiguousarray(addrs[sel])
            res = np.zeros(sel.size, dtype=np.int64)
            rc = lib.memtier_dataset_read_batch(
                sh.h, ffi.cast("const uint64_t *", ffi.from_buffer(idx)), sel.size,
                ffi.cast("void * const *", ffi.from_buffer(dsts)),
                ffi.cast("int64_t *", ffi.from_buffer(res)), 0)
            if rc:
                detail = _ffi.error_texts(rc)[1]
                bad = np.flatnonzero(res < 0)
                code = int(res[bad[0]]) if bad.size else rc
                m = int(mem[sel[bad[0]]]) if bad.size else None
                where = "TarShardDataset" if self._urls[s] in detail else "TarShardDataset: %s" % self._urls[s]
                if m is not None:
                    where += ": member %d" % int(self._m_idx[m])
                raise _errors.make_error(code, where, detail, strerror=_ffi.strerror(code),
                                         filename=self._paths[s])
