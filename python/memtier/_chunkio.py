"""The chunk reads under :func:`memtier.load_chunks`, :func:`memtier.iter_chunks`
and :meth:`memtier.Context.load_chunks`: the ``memtier_chunk_t`` array, the
destinations, the batched calls and :class:`ChunkStream`.

Every function here takes the Context to read with (typed ``Any``: this
module sits below :mod:`._context` in the import graph, which calls it);
:mod:`._chunks` adds the default context. The ``memtier_chunk_t`` array
handed to the library is built with numpy (a structured dtype with the C
struct's layout), not element by element through cffi, so 100,000 chunks
cost a few numpy operations in Python. Units are bytes; thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional, Sequence, Tuple

from . import _errors, _ffi, _fork, _interrupt, _pickling
from ._buffers import TARGET_CPU, TARGET_CUDA, _dest, _is_torch_tensor
from ._errors import make_error
from ._options import CHUNK_BYTES
from ._paths import PathType, _cpath, _fname
from ._ranges import _ranges_array

__all__ = ["ChunkStream", "load", "stream"]

_CHUNK_DTYPE = None

#: How long one memtier_request_next call waits before Python gets control
#: back (so Ctrl-C is delivered while a stream waits), in nanoseconds.
_NEXT_SLICE_NS = 100_000_000


def _chunk_dtype(ffi: Any) -> Any:
    """numpy structured dtype with the exact layout of ``memtier_chunk_t``."""
    global _CHUNK_DTYPE
    if _CHUNK_DTYPE is None:
        import numpy as np

        assert ffi.sizeof("void *") == 8, "memtier_chunk_t: 64-bit pointers expected"
        names = ["offset", "size", "dst", "result"]
        _CHUNK_DTYPE = np.dtype({
            "names": names,
            "formats": ["<u8", "<u8", "<u8", "<i8"],
            "offsets": [ffi.offsetof("memtier_chunk_t", f) for f in names],
            "itemsize": ffi.sizeof("memtier_chunk_t"),
        })
    return _CHUNK_DTYPE


def _pairs(chunks: Any) -> Any:
    """chunks -> (n, 2) uint64 array of (offset, size), validated."""
    import numpy as np

    if not isinstance(chunks, np.ndarray) and not isinstance(chunks, (list, tuple)):
        try:
            chunks = list(chunks)  # generators, ranges of pairs, ...
        except TypeError:
            raise TypeError(
                "chunks must be an iterable of (offset, size) pairs or an (n, 2) integer array, "
                f"got {type(chunks).__name__}") from None
    arr = _ranges_array(chunks, "chunk")
    if arr.shape[0] and int(arr[:, 1].max()) >= 1 << 63:
        bad = int(np.flatnonzero(arr[:, 1] >= np.uint64(1 << 63))[0])
        raise ValueError(f"chunk {bad} has a size of 2**63 bytes or more: {int(arr[bad, 1])}")
    return arr


def _out_addrs(ffi: Any, out: Any, sizes: Any) -> Tuple[Any, List[Any], List[Any], int]:
    """Validate caller buffers: returns (uint64 addresses, cdata keep-alives, out list,
    target). All buffers are host memory, or all device memory (CUDA tensors,
    ``__cuda_array_interface__`` objects): one call has one target."""
    import numpy as np

    n = sizes.shape[0]
    flat = isinstance(out, (str, bytes, bytearray, memoryview))
    if not flat and (_is_torch_tensor(out) or hasattr(out, "__array_interface__")):
        flat = len(getattr(out, "shape", ())) < 2  # a 1-D array/tensor is one buffer, not a list
    if flat:
        raise TypeError(
            f"out must be a sequence of buffers, one per chunk, got one {type(out).__name__}; to read "
            "chunks back to back into a single buffer use memtier.readv(path, chunks, out)")
    if not hasattr(out, "__len__"):
        raise TypeError(
            "out must be a sequence of writable buffers, one per chunk (a list of bytearrays, "
            f"numpy arrays or torch tensors, or a 2-D array whose rows are used), got {type(out).__name__}")
    if len(out) != n:
        raise ValueError(f"out has {len(out)} buffers for {n} chunks")
    addrs = np.empty(n, dtype=np.uint64)
    keep: List[Any] = []
    items: List[Any] = []
    size_list = sizes.tolist()
    first_target = None
    for k in range(n):
        buf = out[k]
        cd, nbytes, target = _dest(ffi, buf)
        if first_target is None:
            first_target = target
        elif target != first_target:
            raise ValueError(
                f"out[{k}] is {'device' if target == TARGET_CUDA else 'host'} memory and out[0] is "
                f"{'device' if first_target == TARGET_CUDA else 'host'} memory; one call reads into "
                "host buffers only or device buffers only")
        if nbytes < size_list[k]:
            raise ValueError(f"out[{k}] holds {nbytes} bytes, chunk {k} needs {size_list[k]}")
        addrs[k] = int(ffi.cast("uintptr_t", cd))
        keep.append(cd)
        items.append(buf)
    return addrs, keep, items, (TARGET_CPU if first_target is None else first_target)


class _Prepared:
    """The chunk array, the destinations and what keeps them alive."""

    __slots__ = ("arr", "carr", "buf", "views", "keep", "n", "target")

    def __init__(self, ffi: Any, chunks: Any, out: Any, c: Any = None, path: Any = None,
                 prefix: str = "") -> None:
        import numpy as np

        arr = _pairs(chunks)
        n = arr.shape[0]
        sizes = arr[:, 1]
        self.n = n
        self.arr = arr
        self.buf = None
        self.keep: List[Any] = []
        self.target = TARGET_CPU
        carr = np.zeros(n, dtype=_chunk_dtype(ffi))
        if out is None:
            total = int(sizes.sum(dtype=np.uint64)) if n else 0
            if n and total < int(sizes.max()):
                raise ValueError("the sum of the chunk sizes overflows")
            if c is not None and total > CHUNK_BYTES:
                # Ask the library first, as readv does: a chunk past the end of
                # the file (or a missing file) raises its MemTierError, not a
                # MemoryError for a buffer that could never be filled.
                def label(k: int) -> str:
                    return f"{prefix}: chunk {k} (offset {int(arr[k, 0])}, size {int(arr[k, 1])})"
                c._readv_precheck(c._handle(), _cpath(path), arr, 0, path, label)
            buf = np.empty(total, dtype=np.uint8)
            starts = np.zeros(n, dtype=np.uint64)
            if n > 1:
                np.cumsum(sizes[:-1], out=starts[1:])
            if n:
                base = buf.__array_interface__["data"][0]
                carr["dst"] = starts + np.uint64(base)
            self.buf = buf
            s = starts.tolist()
            e = (starts + sizes).tolist()
            self.views = [buf[a:b] for a, b in zip(s, e)]
        else:
            addrs, keep, items, self.target = _out_addrs(ffi, out, sizes)
            carr["dst"] = addrs
            self.keep = keep
            self.views = items
        carr["offset"] = arr[:, 0]
        carr["size"] = sizes
        self.carr = carr


def _chunk_error(status: int, k: int, arr: Any, detail: str, path: Any, prefix: str) -> _errors.MemTierError:
    off, size = int(arr[k, 0]), int(arr[k, 1])
    return make_error(status, f"{prefix}: chunk {k} (offset {off}, size {size})", detail,
                      strerror=_ffi.strerror(status), filename=_fname(path), index=k)


def _run(c: Any, path: PathType, carr: Any, arr: Any, prefix: str,
         target: int = TARGET_CPU) -> None:
    """memtier_load_chunks over ``carr`` in batches of at most CHUNK_BYTES
    (so Ctrl-C lands between calls); raises the lowest-index failure."""
    import numpy as np

    h = c._handle()
    ffi, lib = c._ffi, c._lib
    p = _cpath(path)
    n = carr.shape[0]
    if n == 0:
        return
    base = ffi.cast("memtier_chunk_t *", ffi.from_buffer(carr))
    ends = np.cumsum(carr["size"], dtype=np.uint64)
    bounds = [0]
    while bounds[-1] < n:
        lo = bounds[-1]
        limit = (int(ends[lo - 1]) if lo else 0) + CHUNK_BYTES
        hi = int(np.searchsorted(ends, limit, side="right"))
        bounds.append(max(hi, lo + 1))
    first = None
    for lo, hi in zip(bounds, bounds[1:]):
        rc = lib.memtier_load_chunks(h, p, base + lo, hi - lo, target)
        if rc and first is None:
            detail = _ffi.error_texts(rc)[1]  # at once: this thread's last error
            bad = np.flatnonzero(carr["result"][lo:hi] < 0)
            first = (rc, lo + int(bad[0]) if bad.size else None, detail)
            if not bad.size:
                break  # a call-level failure (no chunk marked): later calls would fail too
    del base
    if first is not None:
        rc, k, detail = first
        if k is None or (target == TARGET_CUDA and int(carr["result"][k]) == _errors.ERR_UNSUPPORTED):
            c._fail(rc if k is None else int(carr["result"][k]), prefix, path, target,
                    detail)  # with gpu_info for CUDA
        assert k is not None  # c._fail raised for a call-level failure
        exc = _chunk_error(int(carr["result"][k]), k, arr, detail, path, prefix)
        exc.results = carr["result"].copy()  # type: ignore[attr-defined]
        raise exc

def load(c: Any, path: PathType, chunks: Any, out: Optional[Sequence[Any]] = None) -> List[Any]:
    """:func:`memtier.load_chunks` on Context ``c`` (arguments, result and
    errors as documented there)."""
    c._handle()
    prep = _Prepared(c._ffi, chunks, out, c, path, "memtier.load_chunks")
    _run(c, path, prep.carr, prep.arr, "memtier.load_chunks", prep.target)
    del prep.keep
    return prep.views


class ChunkStream:
    """The chunks of :func:`iter_chunks`, yielded as they finish reading.

    An iterator of ``(index, data)`` pairs in completion order: ``index`` is
    the chunk's position in ``chunks``, ``data`` its bytes (a 1-D
    ``numpy.uint8`` view, or ``out[index]``). Each index comes exactly once.
    All reads start when the stream is created; the caller can work on one
    chunk while later ones are still being read.

    The underlying ``memtier_request_t`` is released (waiting for reads still
    running) by :meth:`close`, by leaving a ``with`` block, when iteration
    ends or raises, or when the stream is garbage collected (``break`` out of
    a ``for`` loop over a temporary stream releases it at once in CPython).
    The stream keeps the chunk array and every destination buffer alive
    until then.

    Raises (from ``next()``)
    ------------------------
    EndOfFileError, MemTierError
        A chunk failed: the error of the first failed chunk *in completion
        order*, naming its index (``exc.index``); the stream is closed first.
    ClosedError
        ``next()`` after :meth:`close` gives StopIteration instead; a context
        closed while the stream runs gives chunks failing with ClosedError.

    Thread safety: one consumer at a time (a lock serialises ``next()``);
    :meth:`close` may be called from any thread (it waits for a ``next()``
    in progress in another thread to return).
    """

    __slots__ = ("_ctx", "_path", "_prep", "_req", "_fin", "_lock", "_idx", "_pid", "_left",
                 "_n", "__weakref__")

    def __init__(self, ctx: Any, path: PathType, prep: _Prepared) -> None:
        self._ctx = ctx
        self._path = path
        self._prep: Optional[_Prepared] = prep
        self._req = None
        self._fin = None
        self._lock = threading.RLock()
        self._pid = ctx._pid
        self._left: int = prep.n
        self._n: int = prep.n
        if prep.n == 0:
            self._prep = None
            return
        h = ctx._handle()
        ffi, lib = ctx._ffi, ctx._lib
        p = _cpath(path)
        civ = ffi.cast("memtier_chunk_t *", ffi.from_buffer(prep.carr))
        out = ffi.new("memtier_request_t **")
        rc = lib.memtier_load_chunks_async(h, p, civ, prep.n, prep.target, out)
        if rc:
            ctx._fail(rc, "memtier.iter_chunks", path, prep.target)
        self._req = out[0]
        self._idx = ffi.new("size_t *")
        keep = (p, civ, prep.carr, prep.buf, prep.keep, ctx)
        self._fin = _fork.finalizer(self, lib.memtier_request_release, self._req, self._pid, keep)

    def __reduce__(self) -> Any:
        """Refuse: the reads belong to this process (TypeError naming the fix)."""
        return _pickling.refuse(
            "memtier.ChunkStream cannot be pickled: its reads run in this process; pickle "
            "the path and chunks and call memtier.iter_chunks in the receiving process")

    def __iter__(self) -> "ChunkStream":
        return self

    def __enter__(self) -> "ChunkStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        """Chunks not yet yielded."""
        return self._left

    def __repr__(self) -> str:
        state = "closed" if self._req is None else f"{self._left} pending"
        return f"<memtier.ChunkStream {_fname(self._path)!r} {self._n} chunks, {state}>"

    @property
    def closed(self) -> bool:
        """True once the request is released (iteration ended, failed or was closed)."""
        return self._req is None

    def close(self) -> None:
        """Release the request, first waiting for reads still running. Idempotent."""
        with self._lock:  # not while another thread waits in next() on the request
            fin = self._fin
            self._req = None
            if fin is not None:
                self._fin = None
                fin()  # waits for running reads, then drops the buffers it kept
            self._prep = None  # the caller's buffers and the chunk array

    def __next__(self) -> Tuple[int, Any]:
        with self._lock:
            req = self._req
            if req is None:
                raise StopIteration
            _fork.check(self._pid)
            lib = self._ctx._lib
            idx = self._idx
            try:
                while True:
                    rc = lib.memtier_request_next(req, _NEXT_SLICE_NS, idx)
                    if rc == _errors.ERR_TIMEOUT:
                        continue  # a Python signal handler may run here (Ctrl-C)
                    break
            except KeyboardInterrupt:
                _interrupt.stop_remote(self._ctx, self._path)
                raise
            if rc == _errors.ERR_EOF:
                self.close()
                raise StopIteration
            if rc:
                detail = _ffi.error_texts(rc)[1]
                self.close()
                raise make_error(rc, "memtier.iter_chunks", detail, strerror=_ffi.strerror(rc),
                                 filename=_fname(self._path))
            k = int(idx[0])
            self._left -= 1
            prep = self._prep
            assert prep is not None  # released together with self._req
            res = int(prep.carr["result"][k])
            if res < 0:
                self.close()
                raise _chunk_error(res, k, prep.arr, "", self._path, "memtier.iter_chunks")
            return k, prep.views[k]

def stream(c: Any, path: PathType, chunks: Any, out: Optional[Sequence[Any]] = None) -> "ChunkStream":
    """:func:`memtier.iter_chunks` on Context ``c`` (validated before any I/O)."""
    c._handle()
    prep = _Prepared(c._ffi, chunks, out, c, path, "memtier.iter_chunks")
    return ChunkStream(c, path, prep)


def _load_rows(c: Any, path: PathType, offsets: Any, sizes: Any, dsts: Any,
               prefix: str, target: int = TARGET_CPU) -> None:
    """Internal: memtier_load_chunks with caller-computed destination
    addresses (uint64 arrays, same length; host memory, or device memory with
    ``target`` TARGET_CUDA). The caller keeps the memory alive."""
    import numpy as np

    n = offsets.shape[0]
    carr = np.zeros(n, dtype=_chunk_dtype(c._ffi))
    carr["offset"] = offsets
    carr["size"] = sizes
    carr["dst"] = dsts
    arr = np.stack([np.asarray(offsets, dtype=np.uint64), np.asarray(sizes, dtype=np.uint64)], axis=1) \
        if n else np.zeros((0, 2), dtype=np.uint64)
    _run(c, path, carr, arr, prefix, target)
