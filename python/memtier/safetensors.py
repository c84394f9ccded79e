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
* ``device="cuda"``/``"cuda:N"`` (or a ``torch.device``, or an int N) loads
  straight into GPU memory through the library's CUDA target (GDS, or the
  staged pinned pipeline): :func:`load_file` allocates one ``torch.uint8``
  device buffer laid out like the file's data section and returns views of
  it, filled by one ``memtier_safetensors_load_all`` call. Where CUDA cannot
  be used it raises :class:`memtier.UnsupportedError` (naming the missing
  piece, with :func:`memtier.gpu_info`'s text), never silently CPU tensors.

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
from ._context import TARGET_CPU, TARGET_CUDA, Context, PathType, _cpath, _fname
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


def _parse_device(device: Any, where: str) -> Optional[str]:
    """None for the CPU, else the torch device string "cuda:N"; anything else
    raises (UnsupportedError for other device types, never a silent CPU result)."""
    if device is None:
        return None
    if isinstance(device, bool):
        raise TypeError(f"{where}: device must be a str, int or torch.device, got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"{where}: bad device {device!r}")
        return f"cuda:{device}"
    s = str(device).strip().lower()
    if s == "cpu":
        return None
    if s.isdigit():
        return f"cuda:{int(s)}"
    if s == "cuda" or s.startswith("cuda:"):
        try:
            target, index = _context._parse_device(s)
        except ValueError:
            raise ValueError(f"{where}: bad device {device!r}") from None
        return f"cuda:{index}"
    raise make_error(_errors.ERR_UNSUPPORTED, f"{where}: device {device!r}",
                     "only 'cpu' and 'cuda[:N]' are supported")


def _cuda_setup(ctx: Context, device: Optional[str], framework: Optional[str], where: str) -> Any:
    """For a CUDA device: check framework, torch.cuda and the library's CUDA
    backend before anything is opened or allocated; returns torch."""
    fw = None if framework is None else _FRAMEWORKS.get(str(framework).lower())
    if framework is not None and fw is None:
        raise ValueError(f"{where}: framework {framework!r} is not supported; use 'pt' (torch) or 'np' (numpy)")
    if fw == "np":
        raise ValueError(f"{where}: device {device!r} returns torch CUDA tensors; "
                         "framework='np' cannot hold GPU memory (use framework='pt')")
    return _context._require_cuda(ctx, f"{where}: device {device!r}")


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


def _alloc(info: TensorInfo, torch: Any, device: Optional[str] = None) -> Tuple[Any, int]:
    """A new, owning tensor/array for ``info`` (on ``device``, a torch CUDA
    device string, or the CPU) and its data address (0 if empty)."""
    dt = _dtype_of(info.dtype)
    if torch is not None:
        t = torch.empty(info.shape, dtype=_dtypes.torch_dtype(dt, torch), device=device or "cpu")
        return t, (t.data_ptr() if info.nbytes else 0)
    import numpy as np

    a = np.empty(info.shape, dtype=_dtypes.numpy_dtype(dt))
    return a, (a.__array_interface__["data"][0] if info.nbytes else 0)


def _span(infos: List["TensorInfo"]) -> Tuple[int, int]:
    """(absolute offset of the first payload byte, bytes up to the end of the
    last payload): the part of the data section a load reads."""
    live = [i for i in infos if i.nbytes]
    if not live:
        return 0, 0
    lo = min(i.offset for i in live)
    return lo, max(i.offset + i.nbytes for i in live) - lo


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


def _alloc_all_device(infos: List["TensorInfo"], torch: Any, device: str) -> List[Tuple[Any, int]]:
    """:func:`_alloc_all` on a CUDA device: one ``torch.uint8`` buffer from
    torch's allocator, laid out like the data section and placed so each
    byte's address equals its file offset modulo 4096 (GDS reads then start
    aligned), tensors as dtype views of it (they keep it alive). A tensor
    whose file offset is not a multiple of its element size gets its own
    allocation (a dtype view there would be misaligned)."""
    lo, span = _span(infos)
    if not span:
        return [_alloc(i, torch, device) for i in infos]
    buf = torch.empty(span + _PAGE, dtype=torch.uint8, device=device)
    shift = (lo - buf.data_ptr()) % _PAGE
    region = buf[shift:shift + span]
    base = region.data_ptr()
    out: List[Tuple[Any, int]] = []
    for info in infos:
        dt = _dtype_of(info.dtype)
        if not info.nbytes or info.offset % dt.itemsize:
            out.append(_alloc(info, torch, device))
            continue
        raw = region[info.offset - lo:info.offset - lo + info.nbytes]
        t = raw.view(_dtypes.torch_dtype(dt, torch)).reshape(info.shape)
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

    def load_one(self, i: int, torch: Any, where: str, device: Optional[str] = None) -> Any:
        info = self.infos[i]
        t, addr = _alloc(info, torch, device)
        target = TARGET_CUDA if device else TARGET_CPU
        if info.nbytes:
            h = self.live()
            ffi = self.ctx._ffi
            if device:
                _context._sync_torch_stream(t)
            rc = self.ctx._lib.memtier_safetensors_load(h, i, ffi.cast("void *", addr), info.nbytes,
                                                        target)
            if rc:
                self.ctx._fail(rc, f"{where}: tensor {info.name!r}", self.path, target)
        return t

    def load_all(self, torch: Any, where: str, device: Optional[str] = None) -> Dict[str, Any]:
        """Every tensor, one memtier_safetensors_load_all call; dict in file order.
        ``device``: a torch CUDA device string, or None for host memory."""
        n = len(self.infos)
        if n == 0:
            self.live()
            return {}
        if device:
            pairs = _alloc_all_device(self.infos, torch, device)
            for t, addr in pairs:
                if addr:
                    _context._sync_torch_stream(t)
                    break
        else:
            pairs = _alloc_all(self.infos, torch)
        self.read_all([addr for _, addr in pairs], TARGET_CUDA if device else TARGET_CPU, where)
        return {info.name: t for info, (t, _) in zip(self.infos, pairs)}  # file (offset) order

    def read_all(self, addrs: List[int], target: int, where: str) -> None:
        """The read part of :meth:`load_all`: one memtier_safetensors_load_all
        call, tensor ``i`` into address ``addrs[i]`` (0 = skip: zero-element
        tensors), host memory or device memory (``target``). The caller owns
        and keeps alive the memory; nothing here allocates a tensor."""
        import numpy as np

        h = self.live()
        ffi, lib = self.ctx._ffi, self.ctx._lib
        n = len(self.infos)
        if n == 0:
            return
        dsts = ffi.new("void *[]", n)  # zero-filled: NULL = skip (zero-element tensors)
        results = ffi.new("int64_t[]", n)
        for i, addr in enumerate(addrs):
            if addr:
                dsts[i] = ffi.cast("void *", addr)
        rc = lib.memtier_safetensors_load_all(h, dsts, results, target)
        if rc:
            detail = _ffi.error_texts(rc)[1]
            res = np.frombuffer(ffi.buffer(results), dtype=np.int64)
            bad = np.flatnonzero(res < 0)
            if bad.size and not (target == TARGET_CUDA and rc == _errors.ERR_UNSUPPORTED):
                k = int(bad[0])
                st = int(res[k])
                raise make_error(st, f"{where}: tensor {self.infos[k].name!r}", detail,
                                 strerror=_ffi.strerror(st), filename=_fname(self.path), index=k)
            self.ctx._fail(rc, where, self.path, target, detail)

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
        ``"cpu"`` (default), or ``"cuda"``/``"cuda:N"`` (an int N means
        ``"cuda:N"``): torch CUDA tensors, views of one device buffer laid
        out like the file's data section, read by the library's CUDA target.
        Needs torch.cuda and a library whose CUDA target is usable, checked
        before the file is opened (:class:`memtier.UnsupportedError`
        otherwise, with :func:`memtier.gpu_info`'s text). Other device types
        raise :class:`memtier.UnsupportedError`.
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
        CUDA cannot be used (see ``device``), or a device type other than
        cpu and cuda.
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
    dev = _parse_device(device, where)
    c = _ctx(ctx)
    if dev:
        torch = _cuda_setup(c, dev, framework, where)
    else:
        _, torch = _framework(framework, where)
    h = _Handle(c, filename, where)
    try:
        return h.load_all(torch, where, dev)
    finally:
        h.close()


def _load_all_to_pointer(filename: PathType, ptr: int, nbytes: int, *, target: int = TARGET_CUDA,
                         ctx: Optional[Context] = None) -> Dict[str, Tuple[TensorInfo, int]]:
    """Internal (the read part of ``load_file(device=...)``, without torch):
    read every tensor of ``filename`` into the memory at address ``ptr``
    (device memory for ``target`` TARGET_CUDA), laid out like the file's data
    section from its first payload byte, with one memtier_safetensors_load_all
    call. ``nbytes`` is the memory's size, checked against that span first.
    Returns name -> (TensorInfo, byte offset of the tensor in the memory)."""
    where = "memtier.safetensors._load_all_to_pointer"
    h = _Handle(_ctx(ctx), filename, where)
    try:
        lo, span = _span(h.infos)
        if nbytes < span:
            raise ValueError(f"{where}: the memory holds {nbytes} bytes, the tensors span {span}")
        if span and not ptr:
            raise ValueError(f"{where}: NULL destination")
        rel = [i.offset - lo if i.nbytes else 0 for i in h.infos]
        h.read_all([ptr + r if i.nbytes else 0 for i, r in zip(h.infos, rel)], target, where)
        return {i.name: (i, r) for i, r in zip(h.infos, rel)}
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
        ``"cpu"``, or ``"cuda"``/``"cuda:N"``: tensors are loaded straight
        into GPU memory (as :func:`load_file`; slices too).
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
        self._device = _parse_device(device, where)
        c = _ctx(ctx)
        if self._device:
            self._fw, self._torch = "pt", _cuda_setup(c, self._device, framework, where)
        else:
            self._fw, self._torch = _framework(framework, where)
        self._h = _Handle(c, filename, where)
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
                                "memtier.safetensors.safe_open.get_tensor", self._device)

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor (one ``memtier_safetensors_load_all`` call), as :func:`load_file`."""
        return self._h.load_all(self._torch, "memtier.safetensors.safe_open.get_tensors", self._device)

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
        out, addr = _alloc(out_info, torch, f._device)
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
            if f._device:
                _context._sync_torch_stream(out)
            _load_rows(h.ctx, h.path, offsets, sizes, dsts, where,
                       TARGET_CUDA if f._device else TARGET_CPU)
            h.check_unchanged(where)
        res = out[0] if drop else out
        if rest:
            res = res[rest] if drop else res[(slice(None),) + tuple(rest)]
        return res
