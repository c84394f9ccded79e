"""safetensors files through MemTier: :func:`load_file` and :class:`safe_open`.

The format is the one published by Hugging Face's safetensors project
(https://github.com/huggingface/safetensors): an 8-byte little-endian header
length N, N bytes of UTF-8 JSON mapping tensor names to ``{"dtype", "shape",
"data_offsets": [begin, end]}`` (plus an optional ``"__metadata__"`` object of
strings), then the data section; offsets are relative to its first byte.
libmemtier.so parses and validates the header (``memtier_safetensors_open``:
every rule of the reference implementation, see ``include/memtier.h``) and
reads the payloads; this module only allocates the destinations.

The API mirrors ``safetensors.torch.load_file`` / ``safetensors.numpy.load_file``
and ``safetensors.safe_open``::

    from memtier.safetensors import load_file, safe_open
    state = load_file("model.safetensors")              # dict name -> tensor
    with safe_open("model.safetensors", framework="pt") as f:
        print(f.keys(), f.metadata())
        w = f.get_tensor("embeddings.weight")
        rows = f.get_slice("embeddings.weight")[1000:2000]   # reads only those rows

Differences from the reference library, on purpose:

* Every tensor owns its memory (never a view of an mmap of the file), so a
  file that is overwritten or truncated after loading cannot change or crash
  tensors already loaded (field case B11), and nothing is mapped.
* :func:`load_file` reads all tensors with one ``memtier_safetensors_load_all``
  call (adjacent tensors coalesced, reads run in parallel) straight into the
  result tensors: peak memory is the size of the tensors, no staging copy.
* Without torch (or with ``MEMTIER_PY_FORCE_NO_TORCH=1``) results are numpy
  arrays; BF16 and the F8 types, which numpy lacks, come back as ml_dtypes
  arrays when ml_dtypes is installed and as raw unsigned integers of the same
  width otherwise (``safetensors.numpy`` refuses BF16).
* Only ``device="cpu"``: CUDA is not in this build of MemTier, and a CUDA
  device raises :class:`memtier.UnsupportedError` instead of silently
  returning CPU tensors.

dtype mapping (safetensors name -> torch / numpy): F64 F32 F16 -> float64
float32 float16; BF16 -> bfloat16 (numpy: ml_dtypes.bfloat16 or uint16); I8
I16 I32 I64, U8 U16 U32 U64 -> the integer types; BOOL -> bool; C64 ->
complex64; F8_E4M3 F8_E5M2 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ -> float8_e4m3fn
float8_e5m2 float8_e8m0fnu float8_e4m3fnuz float8_e5m2fnuz (numpy: ml_dtypes or
uint8). Sub-byte dtypes (F4, F6_*) are refused by the library with
:class:`memtier.FormatError` ("unsupported dtype").

Errors: a malformed file raises :class:`memtier.FormatError` (a ValueError)
whose message is the library's (e.g. ``header too large: ...``, ``invalid
shape: ...``); a missing file :class:`memtier.NotFoundError`; a file changed
since it was opened :class:`memtier.MemTierError` ("changed since open").

Thread safety: :func:`load_file` may run in many threads at once; one
:class:`safe_open` object may be used from several threads at once (its
handle is thread-safe in the library), but close it only when no other
thread is using it.
"""

from __future__ import annotations

import mmap
import operator
import os
import threading
import weakref
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from . import _context, _dtypes, _errors, _ffi
from ._context import TARGET_CPU, Context, PathType, _cpath, _fname
from ._errors import make_error

__all__ = ["load_file", "safe_open", "TensorInfo", "SafeSlice"]

#: safetensors dtype names the package maps beyond :mod:`memtier._dtypes`' table.
_EXTRA_DTYPES = {"F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}

_FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt", "np": "np", "numpy": "np"}


class TensorInfo(NamedTuple):
    """One tensor of a safetensors file, as the library parsed it.

    Attributes
    ----------
    name : str
        The tensor's name.
    dtype : str
        The safetensors dtype name, e.g. ``"BF16"``.
    shape : tuple of int
        Dimensions, outermost first (``()`` for a scalar).
    offset : int
        Absolute byte offset of the payload in the file.
    nbytes : int
        Payload bytes (0 for zero-element tensors).
    """

    name: str
    dtype: str
    shape: Tuple[int, ...]
    offset: int
    nbytes: int


def _ctx(ctx: Optional[Context]) -> Context:
    return ctx if ctx is not None else _context.default_context()


def _check_device(device: Any, where: str) -> None:
    """Only the CPU: anything else raises UnsupportedError (never a silent CPU result)."""
    if device is None:
        return
    s = str(device).strip().lower()
    if s == "cpu":
        return
    if isinstance(device, int) or s.startswith("cuda") or s.isdigit():
        raise make_error(
            _errors.ERR_UNSUPPORTED,
            f"{where}: device {device!r}",
            "CUDA is not in this build of MemTier (GPU loading is a later milestone)",
            hint="load to device='cpu' and move the tensors with .to('cuda')",
        )
    raise make_error(_errors.ERR_UNSUPPORTED, f"{where}: device {device!r}",
                     "only device='cpu' is supported")


def _framework(framework: Optional[str], where: str) -> Tuple[str, Any]:
    """-> ("pt", torch) or ("np", None). Imports torch only when the result needs it."""
    if framework is None:
        torch = _dtypes.torch_module()
        return ("pt", torch) if torch is not None else ("np", None)
    fw = _FRAMEWORKS.get(str(framework).lower())
    if fw is None:
        raise ValueError(f"{where}: framework {framework!r} is not supported; use 'pt' (torch) or 'np' (numpy)")
    if fw == "np":
        return "np", None
    torch = _dtypes.torch_module()
    if torch is None:
        why = ("MEMTIER_PY_FORCE_NO_TORCH is set" if _dtypes.torch_disabled()
               else "torch is not importable")
        raise ImportError(f"{where}: framework={framework!r} needs torch, but {why}; use framework='np'")
    return fw, (torch if fw == "pt" else None)


def _dtype_of(spec: str) -> _dtypes.DType:
    name = _EXTRA_DTYPES.get(spec)
    try:
        return _dtypes.DTYPES[name] if name else _dtypes.resolve_dtype(spec)
    except TypeError:
        raise TypeError(f"memtier.safetensors: dtype {spec!r} has no Python mapping") from None


def _alloc(info: TensorInfo, torch: Any) -> Tuple[Any, int]:
    """A new, owning tensor/array for ``info`` and its data address (0 if empty)."""
    dt = _dtype_of(info.dtype)
    if torch is not None:
        t = torch.empty(info.shape, dtype=_dtypes.torch_dtype(dt, torch))
        return t, (t.data_ptr() if info.nbytes else 0)
    import numpy as np

    a = np.empty(info.shape, dtype=_dtypes.numpy_dtype(dt))
    return a, (a.__array_interface__["data"][0] if info.nbytes else 0)


#: O_DIRECT's alignment unit that _alloc_all places its buffer at (the page).
_PAGE = 4096


def _alloc_all(infos: List["TensorInfo"], torch: Any) -> List[Tuple[Any, int]]:
    """Tensors for every entry of ``infos`` (file order) and their data addresses.

    One buffer holds them all, laid out like the file's data section and
    placed so that each byte's address equals its file offset modulo 4096.
    The library then reads the checkpoint as one range split into parallel
    tasks, and a cold load goes O_DIRECT straight into the buffer (no bounce
    copy): memtier_safetensors_load_all merges destinations that are adjacent
    in the file and in memory. One allocation is also cheaper than one per
    tensor. The tensors are views that keep the buffer
    alive; it is freed when the last of them is. A tensor whose file offset is
    not a multiple of its element size (legal, rare) gets its own allocation
    so no tensor is misaligned.
    """
    import numpy as np

    live = [i for i in infos if i.nbytes]
    out: List[Tuple[Any, int]] = []
    if not live:
        return [_alloc(i, torch) for i in infos]
    lo = live[0].offset
    span = live[-1].offset + live[-1].nbytes - lo
    # An anonymous mapping, not np.empty: numpy asks for transparent huge
    # pages on large arrays, and with the common THP "defrag=madvise" setting
    # each first touch may stall in memory compaction; measured on a 0.8 GB
    # checkpoint in fresh processes, 0.95-1.67 s against 0.62-0.83 s here.
    # The mapping is page-aligned and freed when the last tensor view dies.
    mem = mmap.mmap(-1, span + _PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = np.frombuffer(mem, dtype=np.uint8)
    shift = lo % _PAGE
    region = buf[shift:shift + span]
    base = region.__array_interface__["data"][0]
    for info in infos:
        dt = _dtype_of(info.dtype)
        if not info.nbytes or info.offset % dt.itemsize:
            out.append(_alloc(info, torch))
            continue
        raw = region[info.offset - lo:info.offset - lo + info.nbytes]
        if torch is not None:
            t = torch.frombuffer(raw, dtype=_dtypes.torch_dtype(dt, torch)).reshape(info.shape)
        else:
            t = raw.view(_dtypes.numpy_dtype(dt)).reshape(info.shape)
        out.append((t, base + info.offset - lo))
    return out


def _close_handle(lib: Any, handle: Any, pid: int, keep: Any) -> None:
    if pid == _context._pid_now:  # never enter the library in a fork child
        lib.memtier_safetensors_close(handle)
    del keep


class _Handle:
    """An open ``memtier_safetensors_t`` and the tensor table read from it."""

    __slots__ = ("ctx", "h", "path", "infos", "by_name", "meta", "fin", "ident", "lock",
                 "__weakref__")

    def __init__(self, ctx: Context, path: PathType, where: str) -> None:
        h = ctx._handle()
        ffi, lib = ctx._ffi, ctx._lib
        p = _cpath(path)
        self.ctx = ctx
        self.path = path
        self.lock = threading.Lock()
        try:
            st = os.stat(p)
            self.ident: Optional[Tuple[int, ...]] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            self.ident = None  # the library's open below reports the error
        out = ffi.new("memtier_safetensors_t **")
        rc = lib.memtier_safetensors_open(h, p, out)
        if rc:
            ctx._fail(rc, where, path)
        self.h = out[0]
        self.fin = weakref.finalize(self, _close_handle, lib, self.h, ctx._pid, ctx)
        cnt = ffi.new("size_t *")
        self._check(lib.memtier_safetensors_count(self.h, cnt), where)
        info = ffi.new("memtier_tensor_info_t *")
        infos: List[TensorInfo] = []
        for i in range(int(cnt[0])):
            self._check(lib.memtier_safetensors_get(self.h, i, info), where)
            name = ffi.unpack(info.name, info.name_len).decode("utf-8", "surrogateescape")
            shape = tuple(ffi.unpack(info.shape, info.ndim)) if info.ndim else ()
            infos.append(TensorInfo(name, ffi.string(info.dtype).decode("ascii"), shape,
                                    int(info.offset), int(info.nbytes)))
        self.infos = infos  # in data-offset order
        self.by_name = {t.name: i for i, t in enumerate(infos)}
        meta: Dict[str, str] = {}
        k = ffi.new("const char **")
        v = ffi.new("const char **")
        i = 0
        while True:
            rc = lib.memtier_safetensors_metadata(self.h, i, k, v)
            if rc == _errors.ERR_EOF:
                break
            self._check(rc, where)
            meta[ffi.string(k[0]).decode("utf-8", "surrogateescape")] = \
                ffi.string(v[0]).decode("utf-8", "surrogateescape")
            i += 1
        self.meta = meta

    def _check(self, rc: int, where: str) -> None:
        if rc:
            self.ctx._fail(rc, where, self.path)

    def live(self) -> Any:
        h = self.h
        if h is None:
            raise _errors.closed_error("safetensors file")
        self.ctx._handle()  # fork and closed-context checks
        return h

    def close(self) -> None:
        with self.lock:
            if self.h is None:
                return
            self.h = None
            self.fin()

    def index(self, name: str) -> int:
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"memtier.safetensors: no tensor named {name!r} in {_fname(self.path)}") from None

    def load_one(self, i: int, torch: Any, where: str) -> Any:
        info = self.infos[i]
        t, addr = _alloc(info, torch)
        if info.nbytes:
            h = self.live()
            ffi = self.ctx._ffi
            rc = self.ctx._lib.memtier_safetensors_load(h, i, ffi.cast("void *", addr), info.nbytes,
                                                        TARGET_CPU)
            if rc:
                self.ctx._fail(rc, f"{where}: tensor {info.name!r}", self.path)
        return t

    def load_all(self, torch: Any, where: str) -> Dict[str, Any]:
        """Every tensor, one memtier_safetensors_load_all call; dict in file order."""
        import numpy as np

        h = self.live()
        ffi, lib = self.ctx._ffi, self.ctx._lib
        n = len(self.infos)
        tensors: List[Any] = [None] * n
        if n == 0:
            return {}
        dsts = ffi.new("void *[]", n)  # zero-filled: NULL = skip (zero-element tensors)
        results = ffi.new("int64_t[]", n)
        for i, (t, addr) in enumerate(_alloc_all(self.infos, torch)):
            tensors[i] = t
            if addr:
                dsts[i] = ffi.cast("void *", addr)
        rc = lib.memtier_safetensors_load_all(h, dsts, results, TARGET_CPU)
        if rc:
            detail = _ffi.error_texts(rc)[1]
            res = np.frombuffer(ffi.buffer(results), dtype=np.int64)
            bad = np.flatnonzero(res < 0)
            if bad.size:
                k = int(bad[0])
                st = int(res[k])
                raise make_error(st, f"{where}: tensor {self.infos[k].name!r}", detail,
                                 strerror=_ffi.strerror(st), filename=_fname(self.path), index=k)
            raise make_error(rc, where, detail, strerror=_ffi.strerror(rc), filename=_fname(self.path))
        return {info.name: t for info, t in zip(self.infos, tensors)}  # file (offset) order

    def check_unchanged(self, where: str) -> None:
        """Raise (like the library's "changed since open") if the file at the
        path is no longer the one opened; used around slice reads, which go
        through the path rather than the handle."""
        try:
            st = os.stat(_cpath(self.path))
            now: Optional[Tuple[int, ...]] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            now = None
        if now is None or now != self.ident:
            raise make_error(_errors.ERR_IO, where,
                             f"{_fname(self.path)}: the file changed since open (size, inode or "
                             "modification time differ); open it again",
                             strerror=_ffi.strerror(_errors.ERR_IO), filename=_fname(self.path))


def load_file(filename: PathType, device: Any = "cpu", *, framework: Optional[str] = None,
              ctx: Optional[Context] = None) -> Dict[str, Any]:
    """Load every tensor of a safetensors file (like ``safetensors.torch.load_file``).

    Parameters
    ----------
    filename : str, bytes or os.PathLike
    device : str, int or torch.device
        ``"cpu"`` only; anything else raises :class:`memtier.UnsupportedError`
        (CUDA is not in this build), before any read.
    framework : {"pt", "torch", "np", "numpy"}, optional
        Result type. Default: torch tensors when torch is importable (and
        ``MEMTIER_PY_FORCE_NO_TORCH`` is not set), else numpy arrays.
    ctx : Context, optional
        Default: the process's default context.

    Returns
    -------
    dict
        name -> tensor, in the order of the data in the file (as
        ``safetensors.torch.load_file`` 0.8 returns them), each a new
        contiguous tensor/array of the file's shape and dtype that owns its
        memory. Zero-element tensors are empty tensors of their shape.
        Equal (dtype, shape, bytes) to ``safetensors.torch.load_file``
        (torch) or ``safetensors.numpy.load_file`` (numpy; BF16/F8 as
        ml_dtypes or raw unsigned integers, see the module docstring).

    Raises
    ------
    FormatError
        The file is not valid safetensors (the library's message says why).
    NotFoundError, PermissionDeniedError, IsDirectoryError
        The file cannot be opened.
    MemTierError
        A read failed, or the file changed while loading ("changed since
        open"); the message names the tensor.
    UnsupportedError
        A device other than the CPU.
    ImportError
        ``framework="pt"`` without torch.
    TypeError
        A dtype this torch build lacks (e.g. float8 in an old torch).

    Notes
    -----
    One ``memtier_safetensors_load_all`` call reads everything (Ctrl-C is
    delivered when it returns). Thread-safe.
    """
    where = "memtier.safetensors.load_file"
    _check_device(device, where)
    _, torch = _framework(framework, where)
    h = _Handle(_ctx(ctx), filename, where)
    try:
        return h.load_all(torch, where)
    finally:
        h.close()


class safe_open:  # noqa: N801 - the name of the reference API
    """An open safetensors file (like ``safetensors.safe_open``), lazily loading tensors.

    Parameters
    ----------
    filename : str, bytes or os.PathLike
    framework : {"pt", "torch", "np", "numpy"}, optional
        Result type; default torch when importable, else numpy.
    device : str, int or torch.device
        ``"cpu"`` only (:class:`memtier.UnsupportedError` otherwise).
    ctx : Context, keyword-only, optional
        Default: the process's default context.

    The header is parsed and validated here (errors as :func:`load_file`).
    Use it as a context manager or call :meth:`close`; it is also closed when
    garbage collected. A load after the file changed on disk raises
    :class:`memtier.MemTierError` ("changed since open").
    """

    def __init__(self, filename: PathType, framework: Optional[str] = None, device: Any = "cpu", *,
                 ctx: Optional[Context] = None) -> None:
        where = "memtier.safetensors.safe_open"
        _check_device(device, where)
        self._fw, self._torch = _framework(framework, where)
        self._h = _Handle(_ctx(ctx), filename, where)
        self._names = sorted(self._h.by_name)

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._h.h is None else f"{len(self._names)} tensors"
        return f"<memtier.safetensors.safe_open {_fname(self._h.path)!r} {self._fw} {state}>"

    def close(self) -> None:
        """Close the file's handle (idempotent)."""
        self._h.close()

    def keys(self) -> List[str]:
        """Tensor names, sorted (as ``safetensors.safe_open.keys``)."""
        return list(self._names)

    def offset_keys(self) -> List[str]:
        """Tensor names in the order of their data in the file."""
        return [t.name for t in self._h.infos]

    def metadata(self) -> Optional[Dict[str, str]]:
        """The ``"__metadata__"`` strings, or None when there are none.

        (An empty ``"__metadata__": {}`` object also gives None.)
        """
        return dict(self._h.meta) if self._h.meta else None

    def info(self, name: str) -> TensorInfo:
        """Dtype, shape, absolute byte offset and size of tensor ``name`` (KeyError if absent)."""
        return self._h.infos[self._h.index(name)]

    def get_tensor(self, name: str) -> Any:
        """Tensor ``name`` as a new tensor/array that owns its memory.

        Raises KeyError for an unknown name, :class:`memtier.ClosedError`
        after :meth:`close`, and the errors of :func:`load_file`.
        """
        self._h.live()
        return self._h.load_one(self._h.index(name), self._torch,
                                "memtier.safetensors.safe_open.get_tensor")

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor (one ``memtier_safetensors_load_all`` call), as :func:`load_file`."""
        return self._h.load_all(self._torch, "memtier.safetensors.safe_open.get_tensors")

    def get_slice(self, name: str) -> "SafeSlice":
        """A lazy view of tensor ``name``; index it to read part of it (see :class:`SafeSlice`)."""
        self._h.live()
        return SafeSlice(self, self._h.index(name))


class SafeSlice:
    """A tensor of an open file, read when indexed (``safe_open.get_slice``).

    ``get_shape()`` gives the shape as a list of ints and ``get_dtype()`` the
    safetensors dtype name (``"F32"``), as in the reference library.

    Indexing reads only the rows (first-dimension entries) it selects:
    ``s[a:b]`` (any step, negative too), ``s[i]`` and ``s[[i, j, ...]]`` (a
    list or 1-D integer array) become one ``memtier_load_chunks`` call with
    one chunk per selected row (contiguous rows are coalesced by the library
    into a single read), and further indices on the other dimensions
    (``s[a:b, 3:7]``, ``s[i, ..., ::2]``) are applied in memory to those rows.
    Other keys (``...`` or None first, boolean masks, a scalar tensor) load
    the whole tensor and index it in memory. Results follow numpy/torch
    indexing rules and own their memory (never views of the file).

    Raises IndexError for rows out of range, :class:`memtier.MemTierError`
    ("changed since open") when the file on disk is no longer the one opened.
    """

    __slots__ = ("_f", "_i", "_info")

    def __init__(self, f: safe_open, i: int) -> None:
        self._f = f
        self._i = i
        self._info = f._h.infos[i]

    def __repr__(self) -> str:
        return f"<memtier.safetensors.SafeSlice {self._info.name!r} {self._info.dtype} {list(self._info.shape)}>"

    def get_shape(self) -> List[int]:
        """Dimensions of the tensor, outermost first."""
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The safetensors dtype name, e.g. ``"BF16"``."""
        return self._info.dtype

    def __len__(self) -> int:
        if not self._info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._info.shape[0]

    def _rows(self, first: Any) -> Optional[Tuple[List[int], bool]]:
        """(row indices, drop the first dim) or None for "load everything"."""
        n0 = self._info.shape[0]
        if isinstance(first, slice):
            return list(range(*first.indices(n0))), False
        if isinstance(first, bool):
            return None
        try:
            i = operator.index(first)
        except TypeError:
            pass
        else:
            if not -n0 <= i < n0:
                raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n0}")
            return [i + n0 if i < 0 else i], True
        import numpy as np

        if isinstance(first, (list, tuple)) or (isinstance(first, np.ndarray) and first.ndim == 1):
            arr = np.asarray(first)
            if arr.size == 0:
                arr = arr.astype(np.int64)
            if arr.ndim != 1 or arr.dtype.kind not in "iu":
                return None  # masks, nested lists: in memory
            arr = arr.astype(np.int64)
            if arr.size and (int(arr.min()) < -n0 or int(arr.max()) >= n0):
                bad = next(int(v) for v in arr.tolist() if not -n0 <= v < n0)
                raise IndexError(f"index {bad} is out of bounds for dimension 0 with size {n0}")
            return np.where(arr < 0, arr + n0, arr).tolist(), False
        return None

    def __getitem__(self, key: Any) -> Any:
        f = self._f
        info = self._info
        torch = f._torch
        where = f"memtier.safetensors.get_slice({info.name!r})"
        parts = key if isinstance(key, tuple) else (key,)
        sel = None
        if info.shape and parts:
            rest = parts[1:]
            if all(isinstance(r, (slice, int)) or r is Ellipsis or r is None for r in rest):
                sel = self._rows(parts[0])
        if sel is None:
            return f.get_tensor(info.name)[key]
        rows, drop = sel
        rest = parts[1:]
        import numpy as np

        shape = (len(rows),) + tuple(info.shape[1:])
        out_info = TensorInfo(info.name, info.dtype, shape, 0, 1 if rows else 0)
        out, addr = _alloc(out_info, torch)
        n0 = info.shape[0]
        row_bytes = info.nbytes // n0 if n0 else 0
        if rows and row_bytes:
            h = f._h
            h.live()
            r = np.asarray(rows, dtype=np.uint64)
            offsets = np.uint64(info.offset) + r * np.uint64(row_bytes)
            sizes = np.full(len(rows), row_bytes, dtype=np.uint64)
            dsts = np.uint64(addr) + np.arange(len(rows), dtype=np.uint64) * np.uint64(row_bytes)
            if len(rows) > 1 and bool((np.diff(r.astype(np.int64)) == 1).all()):
                offsets, sizes, dsts = offsets[:1], np.uint64([row_bytes * len(rows)]), dsts[:1]
            from ._chunks import _load_rows

            h.check_unchanged(where)
            _load_rows(h.ctx, h.path, offsets, sizes, dsts, where)
            h.check_unchanged(where)
        res = out[0] if drop else out
        if rest:
            res = res[rest] if drop else res[(slice(None),) + tuple(rest)]
        return res
