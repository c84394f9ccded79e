"""The :class:`Context` of MemTier, asynchronous :class:`Request` objects and
the lazily created default context behind the module-level functions.

Units: offsets and sizes are bytes. Paths are ``str``, ``bytes`` or
``os.PathLike``. Every method may be called from many threads at once; the
GIL is released during the C calls, so reads in several threads run in
parallel.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from . import _cai_stream, _constants, _dtypes, _errors, _ffi
from ._stats import Stats
from ._errors import _check, make_error

__all__ = [
    "Context",
    "Request",
    "Stats",
    "Decision",
    "READ_DEFAULT",
    "READ_ONCE",
    "READ_WILL_REUSE",
    "READ_DIRECT",
    "READ_BUFFERED",
    "READ_IMMUTABLE",
    "FRESHNESS_STRICT",
    "FRESHNESS_INTERVAL",
    "FRESHNESS_OPEN",
    "CHUNK_BYTES",
    "default_context",
    "runtime_info",
    "gpu_info",
]

PathType = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: Anything exporting a writable, C-contiguous buffer (bytearray, memoryview,
#: array.array, numpy.ndarray), or a contiguous torch tensor.
WritableBuffer = Any

# Per-call hints (MEMTIER_READ_* of memtier.h; OR them), freshness settings
# and targets: generated from the header into _constants.py. The READ_*
# flags are members of the IntFlag ReadFlag (an int subclass, so they pass
# to the C calls as they are).
ReadFlag = _constants.ReadFlag
READ_DEFAULT = _constants.READ_DEFAULT
READ_ONCE = _constants.READ_ONCE  #: do not admit the bytes into the DRAM cache
READ_WILL_REUSE = _constants.READ_WILL_REUSE  #: admit into the DRAM cache whatever the size
READ_DIRECT = _constants.READ_DIRECT  #: prefer O_DIRECT for bytes not cached
READ_BUFFERED = _constants.READ_BUFFERED  #: never O_DIRECT for this call
#: trust the file as last checked: no freshness syscall for a file already open
#: (the per-call form of ``freshness="open"``; the ``immutable=True`` keyword)
READ_IMMUTABLE = _constants.READ_IMMUTABLE
_READ_IMMUTABLE = int(READ_IMMUTABLE)  # the hot paths OR plain ints (an IntFlag op allocates)

# Freshness of a context (MEMTIER_FRESHNESS_*; the ``freshness`` setting).
FRESHNESS_STRICT = _constants.FRESHNESS_STRICT  #: every call checks the open file (one fstat): never stale
FRESHNESS_INTERVAL = _constants.FRESHNESS_INTERVAL  #: a file checked < freshness_interval_ms ago is trusted
FRESHNESS_OPEN = _constants.FRESHNESS_OPEN  #: checked when opened only: for immutable data

TARGET_CPU = _constants.TARGET_CPU
TARGET_CUDA = _constants.TARGET_CUDA

#: Reads larger than this are split into C calls of at most this many bytes,
#: so that Ctrl-C (KeyboardInterrupt) lands between pieces: a Python signal
#: handler only runs once the C call in progress returns.
CHUNK_BYTES = 64 << 20

# readv of at most this many ranges given as a Python sequence builds its
# iovec array with cffi; longer ones (and numpy input) with numpy.
_SMALL_READV = 40

_DIRECT_MODES = _constants.DIRECT_MODES  # MEMTIER_DIRECT_*
_GDS_MODES = _constants.GDS_MODES  # MEMTIER_GDS_*
_FRESHNESS_MODES = _constants.FRESHNESS_MODES  # MEMTIER_FRESHNESS_*
#: Config keys given by name (as the MEMTIER_* environment variables take them).
_MODE_NAMES = {"direct_mode": _DIRECT_MODES, "gds_mode": _GDS_MODES,
               "freshness": _FRESHNESS_MODES}

#: Context keyword -> C field (lowercase memtier_config_t field names; generated
#: from include/memtier.h into _constants.py).
CONFIG_KEYS = _constants.CONFIG_FIELDS

# ---------------------------------------------------------------------------
# fork detection

# The pid of this process, refreshed in a fork child by os.register_at_fork:
# comparing it with the pid a context was made in costs a global read instead
# of a getpid() system call on every entry. A fork that bypasses Python's
# hooks is still caught by the C guard (MEMTIER_ERR_FORKED).
_pid_now = os.getpid()
# load_chunks / iter_chunks, installed by _chunks when it is imported (the
# package imports it): _chunks builds on this module, so this module does not
# import it back (the import graph has no cycle).
_chunk_api: Dict[str, Any] = {}

_default_lock = threading.Lock()
_default: "Optional[Context]" = None


def _after_fork_in_child() -> None:
    global _pid_now, _default_lock
    _pid_now = os.getpid()
    _default_lock = threading.Lock()  # a lock held by another parent thread would hang here
    _ffi._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------
# helpers


#: Encoded paths (str or bytes path -> the bytes handed to the library as
#: ``const char*``; cffi passes a bytes object without a copy). Keys are exact
#: ``str``/``bytes`` objects only: an ``os.PathLike`` is looked up by the string
#: its ``__fspath__`` returns on this call, so one whose string changes is never
#: served a stale entry. Bounded: cleared when it reaches _PATH_CACHE_MAX.
#: Lookups and stores are single dict operations (atomic under the GIL).
_PATH_CACHE: Dict[Any, bytes] = {}
_PATH_CACHE_MAX = 512


def _cpath(path: PathType) -> bytes:
    """The file-system bytes of ``path`` (rejects embedded NUL, like open()).

    ``str`` paths are encoded as :func:`os.fsencode` does (the file-system
    encoding with ``surrogateescape``; UTF-8 on Linux), ``bytes`` are taken as
    they are, ``os.PathLike`` objects through ``os.fspath``. Results are cached
    per path string (see ``_PATH_CACHE``): a hit costs one dict lookup.

    Raises
    ------
    TypeError
        ``path`` is not a str, bytes or os.PathLike.
    ValueError
        The path contains a NUL byte.
    """
    tp = type(path)
    if tp is str or tp is bytes:
        b = _PATH_CACHE.get(path)
        if b is not None:
            return b
        s: Any = path
    else:
        s = os.fspath(path)  # TypeError for non-paths; called once per call
        tp = type(s)
        if tp is str or tp is bytes:
            b = _PATH_CACHE.get(s)
            if b is not None:
                return b
    b = os.fsencode(s)
    if b"\0" in b:
        raise ValueError(f"path contains a NUL byte: {path!r}")
    if type(b) is not bytes:
        b = bytes(b)
    if tp is str or tp is bytes:  # not a str/bytes subclass (its __eq__/__hash__ may differ)
        if len(_PATH_CACHE) >= _PATH_CACHE_MAX:
            _PATH_CACHE.clear()
        _PATH_CACHE[s] = b
    return b


def _fname(path: PathType) -> str:
    try:
        return os.fsdecode(path)
    except TypeError:
        return repr(path)


#: The URL schemes the library reads remotely (runtime/remote); any other
#: name is a local path.
_URL_PREFIXES = ("s3://", "http://", "https://")


def _is_url(path: Any) -> bool:
    """Whether ``path`` names a remote object (``s3://``, ``http://``,
    ``https://``, any case): such names are read by the library, never looked
    up with ``os.stat``/``open`` (which would look for a local file of that
    name). False for anything that is not a path."""
    try:
        s = os.fsdecode(path)
    except TypeError:
        return False
    return s[:8].lower().startswith(_URL_PREFIXES)


_SIZE_IN_EOF = None  # re of the size in the library's past-end message, compiled on first use


def _object_size(ctx: "Context", path: PathType, where: str) -> int:
    """The size in bytes of ``path`` as the library sees it (a URL: from the
    object's Content-Range at open; no extra request once it is open).

    The C API has no size call yet, so this reads one byte at the largest
    offset and takes the size from the EndOfFileError the library answers
    with ("runs past end of file (size N)", runtime/engine checkEOF). Any
    other failure (not found, permission...) is raised as the library gave it."""
    global _SIZE_IN_EOF
    import re

    if _SIZE_IN_EOF is None:
        _SIZE_IN_EOF = re.compile(r"runs past end of file \(size (\d+)\)")
    h = ctx._handle()
    buf = ctx._ffi.new("char[]", 1)
    rc = ctx._lib.memtier_read(h, _cpath(path), (1 << 63) - 2, 1, buf, TARGET_CPU)
    if rc == _errors.ERR_EOF:
        detail = _ffi.error_texts(rc)[1]
        m = _SIZE_IN_EOF.search(detail or "")
        if m:
            return int(m.group(1))
        ctx._fail(rc, where, path, TARGET_CPU, detail)
    if rc:
        ctx._fail(rc, where, path)
    raise make_error(_errors.ERR_INTERNAL, where, "%s: a read past 2^63 - 2 succeeded" % _fname(path))


def _read_object(ctx: "Context", path: PathType, where: str) -> bytes:
    """Every byte of ``path`` read through the library (a small object: an
    index, a JSON file), for the helpers that would ``open()`` a local file."""
    return ctx.read(path, 0, _object_size(ctx, path, where))


def _is_torch_tensor(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return (mod == "torch" or mod.startswith("torch.")) and hasattr(obj, "data_ptr")


# Destination types with a fast path (exact types only; subclasses take _dest):
_K_BUFFER = 1  # bytearray, memoryview, array.array: ffi.from_buffer(writable) checks all
_K_NUMPY = 2  # numpy.ndarray: object dtype refused, then as _K_BUFFER
_K_TORCH = 3  # torch.Tensor: CPU, strided, contiguous, no grad, no conj/neg bit -> data_ptr()
#: type -> _K_*; numpy.ndarray and torch.Tensor are added by _dest the first
#: time one is seen (so importing memtier imports neither).
_BUF_KINDS: Dict[type, int] = {bytearray: _K_BUFFER, memoryview: _K_BUFFER}
_TORCH_STRIDED: Any = None  # torch.strided, once a tensor was seen
_ENV_DATA, _ENV_KEY = _dtypes._ENV_DATA, _dtypes._ENV_KEY  # see _dtypes
_CHAR_ARRAY: Any = None  # ffi.typeof("char[]") / ("char *"), set by Context()
_CHAR_P: Any = None


def _dest_fast(ffi: Any, obj: Any) -> Tuple[Any, int]:
    """``(char* cdata, nbytes)`` of a host destination of a fast-path type
    (:data:`_BUF_KINDS`) that passes every check of :func:`_dest`, else
    ``(None, 0)``: the caller then calls ``_dest``, which raises the precise
    error or handles the other kinds (CUDA, subclasses, any exporter).

    Checks, as ``_dest``: writable and C-contiguous (``ffi.from_buffer``
    refuses others), no object dtype or ``"O"`` memoryview format; a torch
    tensor on the CPU, strided, contiguous, not requiring grad, without a lazy
    conj/neg bit. The cdata keeps ``obj``'s buffer exported (so not resized)
    while it lives; a torch pointer does not: the caller keeps ``obj``.
    """
    kind = _BUF_KINDS.get(type(obj))
    if kind == _K_BUFFER or kind == _K_NUMPY:
        if kind == _K_NUMPY:
            if obj.dtype.hasobject:
                return None, 0
        elif type(obj) is memoryview and obj.format == "O":
            return None, 0
        try:
            cd = ffi.from_buffer(_CHAR_ARRAY, obj, True)
        except Exception:  # noqa: BLE001 - _dest raises the precise error
            return None, 0
        return cd, len(cd)
    if kind == _K_TORCH:
        t = obj
        # MEMTIER_PY_FORCE_NO_TORCH refuses tensors (then _dest says so); the
        # full check only runs while the variable is set at all
        if ((_ENV_KEY is None or _ENV_DATA is None or _ENV_DATA.get(_ENV_KEY) is not None)
                and _dtypes.torch_disabled()):
            return None, 0
        if (t.is_cpu and t.layout is _TORCH_STRIDED and not t.requires_grad and t.is_contiguous()
                and not t.is_conj() and not t.is_neg()):
            return ffi.cast(_CHAR_P, t.data_ptr()), t.nbytes
    return None, 0


def _register_kind(obj: Any) -> None:
    """Add ``type(obj)`` to :data:`_BUF_KINDS` when it is exactly numpy.ndarray,
    array.array or torch.Tensor (torch only while torch is enabled)."""
    global _TORCH_STRIDED
    tp = type(obj)
    mod, name = tp.__module__, tp.__qualname__
    if mod == "numpy" and name == "ndarray":
        _BUF_KINDS[tp] = _K_NUMPY
    elif mod == "array" and name == "array":
        _BUF_KINDS[tp] = _K_BUFFER
    elif mod == "torch" and name == "Tensor" and not _dtypes.torch_disabled():
        import torch

        if tp is torch.Tensor:
            _TORCH_STRIDED = torch.strided
            _BUF_KINDS[tp] = _K_TORCH


def _dest(ffi: Any, obj: Any, readonly_exc: type = TypeError) -> Tuple[Any, int, int]:
    """Validate a destination and return ``(char* cdata, nbytes, target)``.

    Runs before any I/O. Buffer-protocol objects must be writable and
    C-contiguous; torch tensors contiguous, strided, not requiring grad, on
    the CPU (or CUDA: the GPU target); objects with ``__cuda_array_interface__``
    go to the GPU target. The returned cdata keeps ``obj`` alive (a torch
    tensor's pointer does not: the caller holds the tensor during the call).
    ``readonly_exc``: the exception class for a read-only buffer.
    Hot callers try :func:`_dest_fast` first.
    """
    dt = getattr(obj, "dtype", None)
    if getattr(dt, "hasobject", False) or (type(obj) is memoryview and obj.format == "O"):
        # An object array's buffer holds PyObject pointers: file bytes there
        # would crash the interpreter when the array is freed.
        raise TypeError("destination array has dtype object (it holds Python object pointers); "
                        "use a numeric dtype such as numpy.uint8")
    try:
        cd = ffi.from_buffer(obj, require_writable=True)
        if type(obj) not in _BUF_KINDS:
            _register_kind(obj)
        return cd, len(cd), TARGET_CPU
    except TypeError:
        pass  # no buffer protocol: tensors, device arrays
    except (BufferError, ValueError):
        _buffer_error(obj, readonly_exc)
    if _is_torch_tensor(obj):
        if _dtypes.torch_disabled():
            raise TypeError(
                "torch tensors are not accepted while MEMTIER_PY_FORCE_NO_TORCH is set"
            )
        if type(obj) not in _BUF_KINDS:
            _register_kind(obj)
        return _torch_dest(ffi, obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _cuda_array_dest(ffi, cai)
    raise TypeError(
        f"expected a writable buffer (bytearray, memoryview, array.array, numpy.ndarray) "
        f"or a torch tensor, got {type(obj).__module__}.{type(obj).__qualname__}"
    )


def _readv_out(ffi: Any, out: Any, total: int) -> Tuple[Any, Any]:
    """The destination of a readv: ``out`` validated (host memory, at least
    ``total`` bytes) or a new uint8 array; returns ``(out, char* cdata)``."""
    if out is None:
        import numpy as np

        out = np.empty(total, dtype=np.uint8)
    cd, nbytes = _dest_fast(ffi, out)
    target = TARGET_CPU
    if cd is None:
        cd, nbytes, target = _dest(ffi, out)
    if target != TARGET_CPU:
        raise ValueError("readv reads into host memory only")
    if nbytes < total:
        raise ValueError(f"out holds {nbytes} bytes, the ranges need {total}")
    return out, cd


def _buffer_error(obj: Any, readonly_exc: type) -> None:
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{type(obj).__name__} does not export a buffer") from None
    with mv:
        if mv.readonly:
            raise readonly_exc(
                f"destination {type(obj).__name__} is read-only; pass a writable buffer "
                "(bytearray, numpy array with writeable=True, ...)"
            )
        if not mv.c_contiguous:
            raise ValueError(
                f"destination {type(obj).__name__} is not C-contiguous (shape {mv.shape}, "
                f"strides {mv.strides}); pass a contiguous buffer (e.g. numpy.ascontiguousarray "
                "and copy back)"
            )
    raise ValueError(f"cannot use {type(obj).__name__} as a destination buffer")


def _torch_dest(ffi: Any, t: Any) -> Tuple[Any, int, int]:
    import torch  # already imported: t is a tensor

    if t.layout != torch.strided:
        raise ValueError(f"tensor layout {t.layout} is not supported; pass a dense (strided) tensor")
    if t.requires_grad:
        raise ValueError(
            "tensor requires grad: writing into it in place would bypass autograd; pass "
            "t.detach() (it shares t's storage, so t receives the bytes)"
        )
    if not t.is_contiguous():
        raise ValueError(
            f"tensor is not contiguous (shape {tuple(t.shape)}, strides {t.stride()}); pass "
            "a contiguous tensor, e.g. read into torch.empty_like(t) and copy_()"
        )
    if t.is_conj() or t.is_neg():
        raise ValueError("tensor has a lazy conj/neg bit; call resolve_conj()/resolve_neg() first")
    dev = t.device.type
    if dev == "cpu":
        target = TARGET_CPU
    elif dev == "cuda":
        target = TARGET_CUDA
        _sync_torch_stream(t)
    else:
        raise _errors.make_error(
            _errors.ERR_UNSUPPORTED,
            f"memtier: tensors on device {t.device} are not supported (cpu and cuda only)",
        )
    nbytes = t.numel() * t.element_size()
    # data_ptr() includes the storage offset, so views such as t[10:20]
    # address exactly their own bytes.
    return ffi.cast("char *", t.data_ptr()), nbytes, target


def _cuda_array_dest(ffi: Any, cai: Mapping[str, Any]) -> Tuple[Any, int, int]:
    ptr, readonly = cai["data"]
    if readonly:
        raise ValueError("device array is read-only")
    stream = _cai_stream.cai_stream(cai)  # checked before any I/O (0 is refused)
    if cai.get("mask") is not None:
        raise ValueError("device array has a mask; pass an unmasked array")
    shape = tuple(cai["shape"])
    import numpy as np

    item = np.dtype(cai["typestr"]).itemsize
    strides = cai.get("strides")
    if strides is not None:
        expect = []
        acc = item
        for dim in reversed(shape):
            expect.append(acc)
            acc *= dim
        if tuple(strides) != tuple(reversed(expect)) and 0 not in shape:
            raise ValueError(f"device array is not C-contiguous (strides {strides})")
    n = item
    for dim in shape:
        n *= dim
    if stream is not None and n:
        # The producer's pending work on its exported stream must finish before
        # MemTier's own streams write the memory (CAI v3).
        _cai_stream.sync_stream(stream, ptr)
    return ffi.cast("char *", ptr), n, TARGET_CUDA


_CUDA_HINT = (
    "read into a CPU tensor and call .to('cuda') instead"
)


def _gpu_info_text(ctx: "Context") -> str:
    """memtier_gpu_info of ``ctx``, or why it could not be had (never raises)."""
    try:
        return ctx.gpu_info()
    except Exception as e:  # noqa: BLE001 - a diagnostic must not hide the real error
        return f"(memtier_gpu_info failed: {e})"


def _library_cuda_missing(info: str) -> Optional[str]:
    """The library's reason the CUDA target is unusable (its ``cuda:`` line),
    or None when that line says CUDA is available."""
    for line in info.splitlines():
        if line.startswith("cuda:"):
            reason = line[len("cuda:"):].strip()
            return None if reason.startswith("CUDA available") else reason
    return "memtier_gpu_info has no cuda: line"


def _torch_cuda_missing() -> Tuple[Any, Optional[str]]:
    """(torch or None, why torch.cuda cannot allocate device tensors or None)."""
    torch = _dtypes.torch_module()
    if torch is None:
        why = ("MEMTIER_PY_FORCE_NO_TORCH is set" if _dtypes.torch_disabled()
               else "torch is not importable")
        return None, f"torch.cuda ({why})"
    try:
        ok = bool(torch.cuda.is_available())
    except Exception as e:  # noqa: BLE001
        return torch, f"torch.cuda (torch.cuda.is_available() failed: {e})"
    if not ok:
        return torch, "torch.cuda (torch.cuda.is_available() is False: no CUDA device or a CPU-only torch build)"
    return torch, None


def _unsupported_cuda(ctx: "Context", where: str, missing: Any = None, detail: str = "",
                      info: Optional[str] = None) -> _errors.MemTierError:
    """The UnsupportedError of a CUDA request: names the missing piece(s) and
    carries the library's memtier_gpu_info text (``exc.gpu_info`` too).
    ``missing`` None: ask memtier_gpu_info whether the library's CUDA target
    is the missing piece (an UNSUPPORTED answer of the library)."""
    if info is None:
        info = _gpu_info_text(ctx)
    if missing is None:
        lib_why = _library_cuda_missing(info)
        missing = [f"CUDA support in libmemtier.so ({lib_why})"] if lib_why else []
    elif isinstance(missing, str):
        missing = [missing]
    if missing:
        msg = f"{where}: the CUDA target needs {'; '.join(missing)}"
        if detail:
            msg += f": {detail}"
        msg += f"; {_CUDA_HINT}"
    else:
        msg = f"{where}: {detail or 'not supported'}"
    msg += f".\nmemtier_gpu_info:\n{info.rstrip()}"
    exc = make_error(_errors.ERR_UNSUPPORTED, msg, strerror="")
    exc.detail = detail or "; ".join(missing)
    exc.gpu_info = info  # type: ignore[attr-defined]
    return exc


def _require_cuda(ctx: "Context", where: str, *, need_torch: bool = True) -> Any:
    """Check, before any allocation or I/O, that a CUDA request can be served:
    torch.cuda (when ``need_torch``: the result is a torch CUDA tensor) and
    the library's CUDA backend (memtier_gpu_info's ``cuda:`` line). Returns
    torch (or None when not needed); raises UnsupportedError naming every
    missing piece, with the memtier_gpu_info text."""
    missing = []
    torch = None
    if need_torch:
        torch, why = _torch_cuda_missing()
        if why:
            missing.append(why)
    info = _gpu_info_text(ctx)
    lib_why = _library_cuda_missing(info)
    if lib_why:
        missing.append(f"CUDA support in libmemtier.so ({lib_why})")
    if missing:
        raise _unsupported_cuda(ctx, where, missing, info=info)
    return torch


def _sync_torch_stream(t: Any) -> None:
    """Wait for work queued on the current torch stream of ``t``'s device: the
    library writes the memory on its own streams (or with cuFile), which are
    not ordered after torch's, and a block from torch's caching allocator may
    still be used by a kernel of a tensor freed earlier."""
    import torch

    torch.cuda.current_stream(t.device).synchronize()


def _check_off(offset: Any, what: str = "offset", bits: int = 64) -> int:
    try:
        off = offset.__index__()
    except AttributeError:
        raise TypeError(f"{what} must be an integer, got {type(offset).__name__}") from None
    if off < 0 or off >= 1 << bits:
        raise ValueError(f"{what} must be in [0, 2**{bits}), got {off}")
    return off


def _check_bool(value: Any, keyword: str, api: str) -> bool:
    """``value`` as a bool, for a bool keyword of ``api``: True, False or a
    numpy bool. Anything else (``"yes"``, ``1``, ``None``) is a TypeError
    naming the keyword: a truthy string would silently mean True."""
    if value is True or value is False:
        return value
    t = type(value)
    if t.__name__ in ("bool_", "bool") and t.__module__ == "numpy":
        return bool(value)
    raise TypeError(f"{api}: {keyword} must be a bool (True or False), got {t.__name__} {value!r}")


# ---------------------------------------------------------------------------
# result types


# Stats (one field per memtier_stats_t field) is generated from include/memtier.h
# into _stats.py by tools/mtgen.
STATS_FIELDS = _constants.STATS_FIELDS


@dataclass(frozen=True)
class Decision:
    """What a read would do now (:meth:`Context.explain`).

    Attributes
    ----------
    path : str
        Path for the uncached bytes: "cache", "buffered", "direct", "gds",
        "staged" or "none".
    admit : bool
        Whether the read fills the DRAM cache.
    cached_bytes : int
        Bytes of the range already in the DRAM cache.
    resident_bytes : int
        Bytes of the range in the OS page cache.
    tasks : int
        Parallel tasks the read is split into.
    reason : str
        A one-line explanation.
    """

    path: str
    admit: bool
    cached_bytes: int
    resident_bytes: int
    tasks: int
    reason: str


# ---------------------------------------------------------------------------
# requests


def _release_request(lib: Any, handle: Any, pid: int, keep: Any) -> None:
    # weakref.finalize callback: also the backstop when a Request is dropped
    # unwaited. memtier_request_release waits for a running request, and
    # ``keep`` (the destination buffer, path, options) lives until it returns.
    if pid == _pid_now:
        lib.memtier_request_release(handle)
    del keep


class Request:
    """An asynchronous read or prefetch (:meth:`Context.read_async`,
    :meth:`Context.prefetch` with ``wait=False``).

    The request holds a reference to everything the C library uses (the
    destination buffer, the path) until it completes and is released, so the
    caller may drop its own references. Use it as a context manager, or call
    :meth:`wait`; dropping it unwaited waits for the I/O when collected.

    Thread safety: :meth:`wait`, :meth:`done` and :meth:`release` may be called
    from several threads.
    """

    __slots__ = ("_ctx", "_lib", "_ffi", "_h", "_pid", "_lock", "_state", "_fin", "_kind",
                 "_path", "_target", "__weakref__")

    def __init__(self, ctx: "Context", handle: Any, keep: Any, kind: str, path: str,
                 target: int = TARGET_CPU) -> None:
        self._ctx = ctx
        self._target = target
        self._lib = ctx._lib
        self._ffi = ctx._ffi
        self._h = handle
        self._pid = ctx._pid
        self._lock = threading.Lock()
        self._kind = kind
        self._path = path
        # None while pending; then ("ok", nbytes) / ("err", exc args) / ("released",)
        self._state: Optional[tuple] = None
        self._fin = weakref.finalize(self, _release_request, self._lib, handle, self._pid, keep)

    def __repr__(self) -> str:
        st = "pending" if self._state is None else self._state[0]
        return f"<memtier.Request {self._kind} {self._path!r} {st}>"

    def __enter__(self) -> "Request":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _record(self, rc: int, nbytes: int, texts: Tuple[Optional[str], str]) -> None:
        # called with self._lock held, right after the completing C call
        if self._state is not None:
            return
        if rc < 0:
            self._state = ("err", rc, texts)
        else:
            self._state = ("ok", nbytes)
        self._h = None
        self._fin()  # memtier_request_release (returns at once: complete) + drop refs

    def _outcome(self) -> int:
        st = self._state
        assert st is not None
        if st[0] == "ok":
            return st[1]
        if st[0] == "released":
            raise _errors.closed_error("request (released before completion)")
        _, rc, (text, detail) = st
        if rc == _errors.ERR_UNSUPPORTED and self._target == TARGET_CUDA:
            raise _unsupported_cuda(self._ctx, f"memtier.{self._kind}: {self._path}", None, detail)
        raise make_error(rc, f"memtier.{self._kind}", detail, strerror=text,
                         filename=self._path)

    def _entry(self) -> Any:
        if self._pid != _pid_now:
            raise _errors.fork_error(self._pid, os.getpid())
        return self._h

    def wait(self, timeout: Optional[float] = None) -> int:
        """Wait for completion and return the bytes moved.

        Parameters
        ----------
        timeout : float or None
            Seconds to wait; None waits until done (in slices of 0.1 s, so
            Ctrl-C is delivered).

        Returns
        -------
        int
            Bytes read (``read_async``) or brought into the cache (prefetch).

        Raises
        ------
        MemTierTimeoutError
            ``timeout`` passed; the request is still running.
        MemTierError
            The request failed (the matching subclass).
        ClosedError
            The request was released before it completed.
        """
        h = self._entry()
        if self._state is not None:
            return self._outcome()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        nb = self._ffi.new("uint64_t *")
        lib = self._lib
        while True:
            if deadline is None:
                slice_ns = 100_000_000
            else:
                slice_ns = max(0, min(100_000_000, int((deadline - time.monotonic()) * 1e9)))
            rc = lib.memtier_request_wait(h, slice_ns, nb)
            if rc == _errors.ERR_TIMEOUT:
                if deadline is not None and time.monotonic() >= deadline:
                    raise make_error(
                        rc, f"memtier.Request.wait: {self._kind} of {self._path!r} still running "
                        f"after {timeout} s")
                continue
            texts = _ffi.error_texts(rc) if rc < 0 else (None, "")
            with self._lock:
                if self._state is None:
                    self._record(rc, int(nb[0]), texts)
            return self._outcome()

    def done(self) -> bool:
        """True when the request has completed (successfully or not); never blocks."""
        h = self._entry()
        if self._state is not None:
            return True
        nb = self._ffi.new("uint64_t *")
        rc = self._lib.memtier_request_test(h, nb)
        if rc == _errors.ERR_BUSY:
            return False
        texts = _ffi.error_texts(rc) if rc < 0 else (None, "")
        with self._lock:
            if self._state is None:
                self._record(rc, int(nb[0]), texts)
        return True

    def release(self) -> None:
        """Free the request, first waiting for it if it is still running.

        Idempotent. After a release without a completed wait, :meth:`wait`
        raises :class:`ClosedError`.
        """
        with self._lock:
            if self._state is None:
                self._state = ("released",)
                self._h = None
                self._fin()  # waits for running I/O, then drops the buffer


# ---------------------------------------------------------------------------
# context


def _finalize_ctx(lib: Any, handle: Any, pid: int) -> None:
    if pid == _pid_now:  # never enter the library in a fork child
        lib.memtier_finalize(handle)


class Context:
    """A MemTier context: configuration, open-file table, DRAM cache, workers, stats.

    Parameters
    ----------
    config : mapping, optional
        Settings; keys are the lowercase ``memtier_config_t`` field names (see
        :data:`CONFIG_KEYS`). ``None`` values keep the default.
    **overrides
        Same keys; they win over ``config``.

        ``cache_bytes``, ``cache_block_bytes``, ``cache_admit_max_bytes``,
        ``task_bytes``, ``direct_threshold_bytes``, ``gds_threshold_bytes``:
        bytes; ``io_threads``, ``max_open_files``, ``gomaxprocs``,
        ``small_io_depth``: counts; ``max_inflight_mib``: MiB;
        ``path_recheck_ms``: milliseconds (-1 = every call);
        ``direct_mode``: "auto", "off", "always", "required" (or 0-3);
        ``gds_mode``: "auto", "off", "required" (or 0-2);
        ``freshness``: "strict" (default: every read checks the open file
        with one fstat, so a rewritten file is never served stale),
        "interval" (a file checked less than ``freshness_interval_ms`` ago is
        trusted: a change is seen within that bound) or "open" (checked only
        when opened: for immutable data; a file rewritten in place may be
        served stale until :meth:`drop_cache`) (or 0-2, the
        ``FRESHNESS_*`` constants; environment ``MEMTIER_FRESHNESS``);
        ``freshness_interval_ms``: milliseconds, 0 = the default 100
        (``MEMTIER_FRESHNESS_INTERVAL_MS``);
        ``cache_enabled``: bool. 0 in a size or count means the default,
        except ``cache_bytes=0``, which turns the cache off (as
        ``MEMTIER_CACHE_BYTES=0`` does).

    Settings start from ``memtier_config_default``, which applies the
    ``MEMTIER_*`` environment variables (read when the context is created,
    so ``os.environ`` changes made before are seen); keyword values win.

    Raises
    ------
    TypeError
        An unknown key or a non-integer value.
    ValueError
        A value out of range for its C field, or an unknown direct_mode.
    FormatError
        A ``MEMTIER_*`` environment variable does not parse (the message names it).
    InvalidArgumentError
        The library rejected a value (out of its range).
    ForkError
        This process is a fork child of one that loaded MemTier.
    LibraryLoadError
        libmemtier.so could not be loaded.

    Notes
    -----
    Thread safety: all methods may be called from many threads at once. The
    GIL is released during I/O. A context is closed by :meth:`close`, by
    leaving a ``with`` block, or (backstop) when it is garbage collected; use
    after close raises :class:`ClosedError`. A context cannot be pickled and
    is unusable in a forked child.
    """

    __slots__ = ("_h", "_pid", "_ffi", "_lib", "_rt", "_fin", "_read_ex", "_readv_c",
                 "_readv_ex_c", "_fb", "__weakref__")

    def __init__(self, config: Optional[Mapping[str, Any]] = None, **overrides: Any) -> None:
        self._h = None
        settings: Dict[str, Any] = {}
        if config is not None:
            if not isinstance(config, Mapping):
                raise TypeError(f"config must be a mapping, got {type(config).__name__}")
            settings.update(config)
        settings.update(overrides)
        unknown = sorted(k for k in settings if k not in CONFIG_KEYS)
        if unknown:
            raise TypeError(
                f"unknown memtier config key(s) {unknown}; valid keys: {list(CONFIG_KEYS)}"
            )
        rt = _ffi.runtime()
        ffi, lib = rt.ffi, rt.lib
        global _CHAR_ARRAY, _CHAR_P
        if _CHAR_P is None:
            _CHAR_ARRAY, _CHAR_P = ffi.typeof("char[]"), ffi.typeof("char *")
        cfg = ffi.new("memtier_config_t *")
        _check(lib.memtier_config_default_sized(cfg, ffi.sizeof("memtier_config_t")),
               "memtier.Context: memtier_config_default")
        for key, value in settings.items():
            if value is None:
                continue
            if key == "cache_bytes" and not isinstance(value, bool) and value == 0:
                # as with MEMTIER_CACHE_BYTES=0: no cache (the C struct's 0
                # would mean "the default budget", which surprises Python users)
                cfg.cache_enabled = 0
                continue
            _set_field(cfg, key, value)
        out = ffi.new("memtier_ctx_t **")
        _check(lib.memtier_init(cfg, out), "memtier.Context: memtier_init")
        self._h = out[0]
        self._pid = rt.pid
        self._rt = rt
        self._ffi = ffi
        self._lib = lib
        # the hot entries, bound once (a cffi lib attribute lookup per call costs)
        self._read_ex = lib.memtier_read_ex
        self._readv_c = lib.memtier_readv
        self._readv_ex_c = None  # lib.memtier_readv_ex, looked up on first use (0.3 libraries)
        self._fb = ffi.from_buffer
        self._fin = weakref.finalize(self, _finalize_ctx, lib, self._h, rt.pid)

    # -- lifecycle --------------------------------------------------------

    def close(self) -> None:
        """Finalize the context (idempotent).

        Queued asynchronous requests complete with :class:`ClosedError`;
        running ones are waited for. Blocks until in-flight I/O ends.
        """
        if self._h is None:
            return
        self._h = None
        self._fin()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._h is None

    def __enter__(self) -> "Context":
        self._handle()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._h is None else "open"
        return f"<memtier.Context pid={getattr(self, '_pid', '?')} {state}>"

    def __reduce__(self) -> Any:
        raise TypeError(
            "memtier.Context cannot be pickled: create a context in each process "
            "(or use the module-level functions, which make one per process)"
        )

    def _handle(self) -> Any:
        h = self._h
        if self._pid != _pid_now:
            raise _errors.fork_error(self._pid, os.getpid())
        if h is None:
            raise _errors.closed_error("context")
        return h

    # -- configuration ----------------------------------------------------

    def config(self) -> Dict[str, Any]:
        """The effective configuration (defaults, environment, overrides).

        Returns
        -------
        dict
            Every key of :data:`CONFIG_KEYS`; ``direct_mode``, ``gds_mode`` and
            ``freshness`` as names,
            ``cache_enabled`` as a bool, the rest ints (bytes, counts, MiB,
            ms as documented on :class:`Context`). ``Context(**ctx.config())``
            makes an equivalent context.
        """
        h = self._handle()
        cfg = self._ffi.new("memtier_config_t *")
        _check(self._lib.memtier_get_config(h, cfg, self._ffi.sizeof("memtier_config_t")),
               "memtier.Context.config")
        out: Dict[str, Any] = {}
        for key in CONFIG_KEYS:
            v = getattr(cfg, key)
            if key in _MODE_NAMES:
                v = next((n for n, c in _MODE_NAMES[key].items() if c == v), v)
            elif key == "cache_enabled":
                v = bool(v)
            out[key] = v
        return out

    # -- reads ------------------------------------------------------------

    def _read(self, h: Any, p: bytes, offset: int, ptr: Any, n: int, flags: int,
              target: int, path: Any, prefix: str) -> None:
        lib = self._lib
        try:
            if n <= CHUNK_BYTES:
                rc = lib.memtier_read_ex(h, p, offset, n, ptr, target, flags)
                if rc:
                    self._fail(rc, prefix, path, target)
                return
            # Split so KeyboardInterrupt lands between pieces. The last piece
            # goes first: a range past end of file then fails before any
            # byte of the destination is written.
            last = ((n - 1) // CHUNK_BYTES) * CHUNK_BYTES
            rc = lib.memtier_read_ex(h, p, offset + last, n - last, ptr + last, target, flags)
            if rc:
                detail = _ffi.error_texts(rc)[1]
                if rc == _errors.ERR_EOF:
                    # The library named the piece; the caller asked for
                    # [offset, offset + n): report that range.
                    self._precheck(h, p, offset, n, flags, path, prefix)
                self._fail(rc, prefix, path, target, detail)
            pos = 0
            while pos < last:
                rc = lib.memtier_read_ex(h, p, offset + pos, CHUNK_BYTES, ptr + pos, target, flags)
                if rc:
                    self._fail(rc, prefix, path, target)
                pos += CHUNK_BYTES
        except OverflowError:
            _check_off(offset)
            _check_off(flags, "flags", 32)
            raise

    def _precheck(self, h: Any, p: bytes, offset: int, n: int, flags: int, path: Any,
                  prefix: str) -> None:
        """Raise the error a read of ``[offset, offset + n)`` would fail with
        before any I/O (end of file, with the file's size; a missing file),
        asked of ``memtier_explain`` (no I/O, no stats): its text names the
        caller's whole range. Returns when the range looks readable."""
        out = self._ffi.new("memtier_decision_t *")
        try:
            rc = self._lib.memtier_explain(h, p, offset, n, self._ffi.NULL, TARGET_CPU,
                                           flags, out)
        except OverflowError:
            _check_off(offset)
            _check_off(flags, "flags", 32)
            raise
        if rc:
            self._fail(rc, prefix, path)

    def _fail(self, rc: int, prefix: str, path: Any, target: int = TARGET_CPU,
              detail: Optional[str] = None) -> None:
        """Raise the exception of status ``rc`` (right after the failed call:
        it reads this thread's last error unless ``detail`` is given). An
        UNSUPPORTED answer to a CUDA request also carries memtier_gpu_info."""
        if target == TARGET_CUDA and rc == _errors.ERR_UNSUPPORTED:
            if detail is None:
                detail = _ffi.error_texts(rc)[1]
            raise _unsupported_cuda(self, f"{prefix}: {_fname(path)}", None, detail)
        if detail is not None:
            raise make_error(rc, prefix, detail, strerror=_ffi.strerror(rc), filename=_fname(path))
        _check(rc, prefix, filename=_fname(path))

    def gpu_info(self) -> str:
        """The library's description of the GPU side (``memtier_gpu_info``).

        Lines ``key: value``: ``cuda:`` (whether the CUDA target is usable and
        why not), ``gds:`` (GPUDirect Storage state), ``gds_mode:``, ``hbm:``
        (the HBM cache tier), ``last_gds_fallback:`` and ``build_tags:`` (the
        GPU backends compiled in). Loads libcuda once per process to answer
        (the only call that does so without a CUDA request); never opens the
        cuFile driver.
        """
        h = self._handle()
        ffi = self._ffi
        size = 4096
        while True:
            buf = ffi.new("char[]", size)
            _check(self._lib.memtier_gpu_info(h, buf, size), "memtier.gpu_info")
            text = ffi.string(buf).decode("utf-8", "replace")
            if len(text) < size - 1 or size >= 1 << 20:
                return text
            size *= 4

    def read_into(self, path: PathType, offset: int, buffer: WritableBuffer, *,
                  flags: int = 0, immutable: bool = False) -> int:
        """Read ``len(buffer)`` bytes (its nbytes) of ``path`` at ``offset`` into ``buffer``.

        Parameters
        ----------
        path : str, bytes or os.PathLike
        offset : int
            Byte offset in the file.
        buffer : writable C-contiguous buffer or torch tensor
            bytearray, memoryview (slices too), array.array, numpy.ndarray of
            any dtype and shape, or a contiguous torch tensor (CPU; a CUDA
            tensor is the GPU target). Its whole size (nbytes) is read.
        flags : int
            ``READ_*`` hints, OR-ed.
        immutable : bool
            True: this call trusts the file as last checked (adds
            :data:`READ_IMMUTABLE`): no freshness system call for a file the
            context already has open, so a file rewritten in place since its
            last check may be served stale (from the DRAM cache or the old
            descriptor). For data that never changes (published checkpoints,
            dataset shards). Default: the context's ``freshness`` setting.

        Returns
        -------
        int
            Bytes read (always the buffer's nbytes).

        Raises
        ------
        TypeError
            ``buffer`` is read-only (e.g. ``bytes``) or not a buffer, or
            ``immutable`` is not a bool; before any I/O.
        ValueError
            ``buffer`` is not C-contiguous, or a torch tensor requires grad;
            before any I/O. Negative offset.
        EndOfFileError
            ``offset + nbytes`` is past the end of the file; the message
            names the whole requested range and the file's size. Nothing is
            written beyond the file's bytes; in practice the buffer is left as it was.
        NotFoundError, PermissionDeniedError, IsDirectoryError, MemTierError
            Other failures (see :mod:`memtier` for the table).

        Notes
        -----
        Reads above :data:`CHUNK_BYTES` are split into several C calls so Ctrl-C
        is delivered between them; an interrupted read leaves the buffer
        partly written. Thread-safe; the GIL is released while reading.

        Hot path: a small read costs one ``memtier_read_ex`` call plus a few
        hundred nanoseconds of Python (the encoded path is cached per path
        string, a bytearray/memoryview/numpy array is taken with one
        ``ffi.from_buffer``, a CPU torch tensor by ``data_ptr()``).
        """
        h = self._h
        if h is None or self._pid != _pid_now:
            h = self._handle()
        try:  # an exact str/bytes key (see _PATH_CACHE); try/[] is the cheapest lookup
            p = _PATH_CACHE[path]
        except (KeyError, TypeError):
            p = _cpath(path)
        # Inlined fast path of _dest_fast for buffer-protocol types (1: bytearray,
        # memoryview, array.array; 2: numpy.ndarray): one from_buffer does the
        # writable and C-contiguous checks; anything else or any failure: _dest.
        cd = None
        try:
            kind = _BUF_KINDS[type(buffer)]
        except KeyError:
            kind = 0
        if kind == 1:
            if type(buffer) is not memoryview or buffer.format != "O":
                try:
                    cd = self._fb(_CHAR_ARRAY, buffer, True)
                except Exception:  # noqa: BLE001 - _dest below raises the precise error
                    cd = None
        elif kind == 2:
            if not buffer.dtype.hasobject:
                try:
                    cd = self._fb(_CHAR_ARRAY, buffer, True)
                except Exception:  # noqa: BLE001
                    cd = None
        elif kind == 3:
            cd, n = _dest_fast(self._ffi, buffer)
        if cd is not None:
            if kind != 3:
                n = len(cd)
            target = 0
        else:
            cd, n, target = _dest(self._ffi, buffer)
        if immutable is not False and _check_bool(immutable, "immutable", "memtier.read_into"):
            flags |= _READ_IMMUTABLE
        if n <= CHUNK_BYTES:
            try:
                rc = self._read_ex(h, p, offset, n, cd, target, flags)
            except OverflowError:
                _check_off(offset)
                _check_off(flags, "flags", 32)
                raise
            if rc:
                self._fail(rc, "memtier.read_into", path, target)
            return n
        self._read(h, p, offset, cd, n, flags, target, path, "memtier.read_into")
        return n

    def read(self, path: PathType, offset: int, size: int, *, flags: int = 0,
             immutable: bool = False) -> bytes:
        """Read ``size`` bytes of ``path`` at ``offset`` and return them as bytes.

        Parameters
        ----------
        path : str, bytes or os.PathLike
        offset, size : int
            Bytes; ``size`` 0 returns ``b""``.
        flags : int
            ``READ_*`` hints.
        immutable : bool
            As :meth:`read_into`: trust the file as last checked (adds
            :data:`READ_IMMUTABLE`).

        Returns
        -------
        bytes
            Exactly ``size`` bytes.

        Raises
        ------
        EndOfFileError
            The range runs past the end of the file; the message names the
            requested range and the file's size. A request larger than
            :data:`CHUNK_BYTES` is checked before its result is allocated.
        MemoryError
            The result cannot be allocated (the message names the size).
        TypeError
            ``immutable`` is not a bool.
        ValueError
            Negative offset or size.
        NotFoundError, PermissionDeniedError, IsDirectoryError, MemTierError

        Notes
        -----
        Allocates and copies once more than :meth:`read_into`; prefer that
        for large or repeated reads. Above :data:`CHUNK_BYTES` one
        ``memtier_explain`` call checks the range first (one more
        ``revalidations`` in the stats).
        """
        h = self._h
        if h is None or self._pid != _pid_now:
            h = self._handle()
        size = _check_off(size, "size")
        try:
            p = _PATH_CACHE[path]
        except (KeyError, TypeError):
            p = _cpath(path)
        if immutable is not False and _check_bool(immutable, "immutable", "memtier.read"):
            flags |= _READ_IMMUTABLE
        if size > CHUNK_BYTES:
            # Ask the library first whether the range can be read (end of
            # file, missing file): allocating gigabytes for a request that
            # then fails costs seconds, or a bare MemoryError.
            self._precheck(h, p, offset, size, flags, path, "memtier.read")
        try:
            buf = bytearray(size)
        except MemoryError:
            raise MemoryError(
                f"memtier.read: {_fname(path)}: no memory for a {size}-byte result "
                f"(range [{offset}, {offset + size})); read smaller ranges, or read_into "
                "a buffer you own") from None
        cd = self._fb(_CHAR_ARRAY, buf, True)
        self._read(h, p, offset, cd, size, flags, TARGET_CPU, path, "memtier.read")
        del cd
        return bytes(buf)

    def readv(self, path: PathType, ranges: Any, out: Any = None, *, flags: int = 0,
              immutable: bool = False) -> Any:
        """Read many ``(offset, size)`` ranges of ``path`` in one library call.

        One ``memtier_readv`` call per batch of up to :data:`CHUNK_BYTES`
        (adjacent ranges are coalesced, cached ranges are copied on the
        calling thread and the rest are read in parallel inside the library).

        Parameters
        ----------
        path : str, bytes or os.PathLike
        ranges : numpy integer array of shape (N, 2), or sequence of (offset, size) pairs
            Bytes. Sizes may be 0. Ranges may overlap or repeat. An int64 or
            uint64 array is the fast form: the ``memtier_iovec_t`` array is
            built with a few vectorised numpy operations, no Python loop.
            Offsets and sizes must be below 2**63.
        out : writable C-contiguous buffer, or list/tuple of N buffers, optional
            One buffer: at least ``sum(sizes)`` bytes; range k lands at
            ``sum(sizes[:k])``. A list or tuple: ``out[k]`` receives range k at
            its start and must hold at least ``size_k`` bytes (host buffers:
            bytearray, memoryview, numpy array, CPU torch tensor).
            Default: a new ``numpy.uint8`` array of exactly ``sum(sizes)`` bytes.
        flags : int
            ``READ_*`` hints for every range (``memtier_readv_ex``; the library
            uses :data:`READ_IMMUTABLE` today).
        immutable : bool
            Adds :data:`READ_IMMUTABLE`: trust the file as last checked (no
            freshness system call for a file already open; see
            :meth:`read_into`).

        Returns
        -------
        out (the buffer, or the list/tuple given), or the new numpy.ndarray
        (uint8, shape (sum(sizes),)).

        Raises
        ------
        TypeError
            ``ranges`` is not integers; ``out`` is read-only or not a buffer.
        ValueError
            ``ranges`` has the wrong shape, negative values or values of 2**63
            or more; ``out`` is too small, not contiguous, device memory, or a
            list of the wrong length. Before any I/O.
        MemTierError
            The error of the lowest-index failed range (e.g. EndOfFileError
            for a range past EOF), with ``.index`` set to that index. The other
            ranges were still read.

        Notes
        -----
        Thread-safe; the GIL is released while reading. ``out`` must not be
        read or resized by another thread during the call.
        """
        h = self._h
        if h is None or self._pid != _pid_now:
            h = self._handle()
        try:
            p = _PATH_CACHE[path]
        except (KeyError, TypeError):
            p = _cpath(path)
        if immutable is not False and _check_bool(immutable, "immutable", "memtier.readv"):
            flags |= _READ_IMMUTABLE
        if flags:
            flags = _check_off(flags, "flags", 32)
        tr = type(ranges)
        if tr is list or tr is tuple:
            if len(ranges) <= _SMALL_READV and type(out) is not list and type(out) is not tuple:
                done = self._readv_small(h, p, ranges, out, path, flags)
                if done is not None:
                    return done[0]
        elif tr.__module__ != "numpy" or tr.__name__ != "ndarray":
            try:
                small = len(ranges) <= _SMALL_READV
            except TypeError:
                small = False
            if small and type(out) is not list and type(out) is not tuple:
                done = self._readv_small(h, p, ranges, out, path, flags)
                if done is not None:
                    return done[0]
        import numpy as np

        arr = ranges
        if not (type(arr) is np.ndarray and arr.ndim == 2 and arr.shape[1] == 2
                and arr.dtype.kind in "iu"):
            arr = _ranges_array(ranges)  # validates; (N, 2) uint64
        n = arr.shape[0]
        ffi = self._ffi
        if n == 0:
            if type(out) is list or type(out) is tuple:
                if len(out):
                    raise ValueError(f"out has {len(out)} buffers for 0 ranges")
            else:
                out, cd = _readv_out(ffi, out, 0)
            rc = self._readv_call(h, p, ffi.NULL, 0, flags)
            if rc:
                self._fail(rc, "memtier.readv", path)
            return out
        iov = _iov_array(ffi, n)  # zeroed (n, 5) uint64 viewed as memtier_iovec_t[n]
        pair = iov[:, :2]
        pair[...] = arr  # casts; a negative value becomes >= 2**63: caught below
        dt = arr.dtype
        if dt.itemsize == 8 and dt.isnative:  # int64/uint64: a contiguous reduction
            top = int(np.maximum.reduce(arr.view(np.uint64), axis=None))
        else:
            top = int(np.maximum.reduce(pair, axis=None))
        if top >= 1 << 63:
            _bad_range(arr)
        sizes = iov[:, 1]
        dst = iov[:, 2]  # path (NULL: this call's path) and result stay 0
        keep: Any
        if type(out) is list or type(out) is tuple:
            keep = _list_dsts(ffi, out, sizes, dst)
            total = 0  # no CHUNK_BYTES batching for a list: one call
        else:
            np.add.accumulate(sizes, out=dst)  # end of each range in out
            total = int(dst[-1])
            if top * n >= 1 << 64 and total != sum(sizes.tolist()):
                raise ValueError("sum of range sizes overflows")
            out, keep = _readv_out(ffi, out, total)
            np.subtract(dst, sizes, out=dst)  # start of each range
            np.add(dst, np.uint64(int(ffi.cast(_UINTPTR, keep))), out=dst)  # + base address
        civ = ffi.cast(_IOV_P, ffi.from_buffer(iov))
        if total <= CHUNK_BYTES:
            rc = self._readv_call(h, p, civ, n, flags)
            first_err = None
            if rc:
                first_err = self._readv_error(rc, iov, 0, n)
        else:
            first_err = None
            ends = np.cumsum(sizes)
            lo = 0
            while lo < n:  # batches of at most CHUNK_BYTES (at least one range each)
                limit = (int(ends[lo - 1]) if lo else 0) + CHUNK_BYTES
                hi = max(int(np.searchsorted(ends, limit, side="right")), lo + 1)
                rc = self._readv_call(h, p, civ + lo, hi - lo, flags)
                if rc and first_err is None:
                    first_err = self._readv_error(rc, iov, lo, hi)
                lo = hi
        del keep, civ
        if first_err is not None:
            st, idx, detail = first_err
            where = "memtier.readv" if idx is None else f"memtier.readv: range {idx}"
            raise make_error(st, where, detail, strerror=_ffi.strerror(st),
                             filename=_fname(path), index=idx)
        return out

    def _readv_call(self, h: Any, p: bytes, iov: Any, n: int, flags: int) -> int:
        """memtier_readv (flags 0) or memtier_readv_ex, target CPU; the status."""
        if not flags:
            return self._readv_c(h, p, iov, n, TARGET_CPU)
        fn = self._readv_ex_c
        if fn is None:
            try:
                fn = self._lib.memtier_readv_ex
            except AttributeError:
                raise make_error(
                    _errors.ERR_UNSUPPORTED,
                    f"memtier.readv: flags need memtier_readv_ex (libmemtier 0.3 or later); "
                    f"the loaded library is {self._rt.version}") from None
            self._readv_ex_c = fn
        return fn(h, p, iov, n, TARGET_CPU, flags)

    @staticmethod
    def _readv_error(rc: int, iov: Any, lo: int, hi: int) -> Tuple[int, Optional[int], str]:
        """(status, lowest failed index or None, detail) of a failed batch
        ``iov[lo:hi]``; call right after the failed call (reads this thread's
        last error)."""
        import numpy as np

        detail = _ffi.error_texts(rc)[1]
        res = iov[lo:hi, 4].view(np.int64)
        bad = np.flatnonzero(res < 0)
        if bad.size:
            idx = lo + int(bad[0])
            return int(res[int(bad[0])]), idx, detail
        return rc, None, detail  # a call-level failure (no element marked)

    def _readv_small(self, h: Any, p: bytes, ranges: Any, out: Any, path: Any,
                     flags: int = 0) -> Any:
        """readv of a short list through a cffi-built iovec array (cheaper than
        numpy below ~40 ranges). Returns ``(out,)``, or None to take the
        general path (a batch above CHUNK_BYTES)."""
        ffi = self._ffi
        pairs = []
        total = 0
        for k, item in enumerate(ranges):
            try:
                off, size = item
                off = off.__index__()
                size = size.__index__()
            except (TypeError, ValueError, AttributeError):
                raise ValueError(
                    f"ranges must have shape (N, 2): range {k} is {item!r}, not an "
                    "(offset, size) pair of integers") from None
            if off < 0 or size < 0:
                raise ValueError(f"range {k} has a negative offset or size: {(off, size)}")
            if off >= 1 << 63 or size >= 1 << 63:
                raise ValueError(f"range {k} is out of range (2**63 or more): {(off, size)}")
            pairs.append((off, size))
            total += size
        if total > CHUNK_BYTES:
            return None
        out, cd = _readv_out(ffi, out, total)
        n = len(pairs)
        iov = ffi.new("memtier_iovec_t[]", n) if n else ffi.NULL
        pos = 0
        for k, (off, size) in enumerate(pairs):
            e = iov[k]
            e.offset = off
            e.size = size
            e.dst = cd + pos
            pos += size
        rc = self._readv_call(h, p, iov, n, flags)
        if rc:
            detail = _ffi.error_texts(rc)[1]
            idx = next((k for k in range(n) if iov[k].result < 0), None)
            st = rc if idx is None else int(iov[idx].result)
            where = "memtier.readv" if idx is None else f"memtier.readv: range {idx}"
            raise make_error(st, where, detail, strerror=_ffi.strerror(st),
                             filename=_fname(path), index=idx)
        return (out,)

    def load_chunks(self, path: PathType, chunks: Any, out: Any = None) -> Any:
        """:func:`memtier.load_chunks` on this context."""
        return _chunk_api["load_chunks"](path, chunks, out, ctx=self)

    def iter_chunks(self, path: PathType, chunks: Any, out: Any = None) -> Any:
        """:func:`memtier.iter_chunks` on this context."""
        return _chunk_api["iter_chunks"](path, chunks, out, ctx=self)

    def read_async(self, path: PathType, offset: int, buffer: WritableBuffer, *,
                   flags: int = 0) -> Request:
        """Start reading ``buffer``'s nbytes of ``path`` at ``offset``; return a :class:`Request`.

        The request keeps ``buffer`` alive (and, for exporters like bytearray,
        locked against resizing) until it completes and is released. The
        buffer must not be read until :meth:`Request.wait` returns.

        Raises
        ------
        TypeError, ValueError
            As :meth:`read_into`, before any I/O. Argument errors found by the
            library are raised here; I/O errors by :meth:`Request.wait`.
        """
        h = self._handle()
        p = _cpath(path)
        cd, n, target = _dest(self._ffi, buffer)
        off = _check_off(offset)
        flags = _check_off(flags, "flags", 32)
        out = self._ffi.new("memtier_request_t **")
        rc = self._lib.memtier_read_async(h, p, off, n, cd, target, flags, out)
        if rc:
            self._fail(rc, "memtier.read_async", path, target)
        return Request(self, out[0], (p, cd, buffer), "read_async", _fname(path), target)

    def prefetch(self, path: PathType, offset: int = 0, size: int = 0, *,
                 wait: bool = True, to_hbm: bool = False) -> Optional[Request]:
        """Bring ``[offset, offset + size)`` of ``path`` into the DRAM cache.

        Parameters
        ----------
        path : str, bytes or os.PathLike
        offset, size : int
            Bytes; ``size`` 0 means to end of file. A range past end of file is
            clipped to the file. Ranges larger than the cache budget keep the
            last budget's worth.
        wait : bool
            True: return when the range is resident (a large range is issued
            in pieces of :data:`CHUNK_BYTES` so Ctrl-C is delivered). False:
            return a :class:`Request` at once (its ``wait()`` gives the bytes
            brought in).
        to_hbm : bool
            Prefetch into the HBM cache tier (GPU memory of device
            ``hbm_device``; needs ``hbm_cache_bytes`` > 0): later CUDA reads
            of the range are served from it (``Stats.hbm_hit_bytes``).
            :class:`UnsupportedError` (with :func:`gpu_info`'s text) where
            the library's CUDA target is unusable.

        Raises
        ------
        UnsupportedError
            The cache is disabled, or ``to_hbm`` in a build without CUDA.
        NotFoundError, PermissionDeniedError, MemTierError
        """
        h = self._handle()
        ffi, lib = self._ffi, self._lib
        p = _cpath(path)
        off = _check_off(offset)
        size = _check_off(size, "size")
        wait = _check_bool(wait, "wait", "memtier.prefetch")
        to_hbm = _check_bool(to_hbm, "to_hbm", "memtier.prefetch")
        opts = ffi.new("memtier_prefetch_opts_t *")
        opts.struct_size = ffi.sizeof("memtier_prefetch_opts_t")
        opts.flags = 1 if to_hbm else 0  # MEMTIER_PREFETCH_TO_HBM
        tgt = TARGET_CUDA if to_hbm else TARGET_CPU
        if not wait:
            out = ffi.new("memtier_request_t **")
            rc = lib.memtier_prefetch_async(h, p, off, size, opts, out)
            if rc:
                self._fail(rc, "memtier.prefetch", path, tgt)
            return Request(self, out[0], (p, opts), "prefetch", _fname(path), tgt)
        end = off + size
        if size == 0 or size > CHUNK_BYTES:
            try:
                # A URL is one call: its size is the library's to find (no
                # local file of that name is looked up).
                fsize = None if _is_url(path) else os.stat(path).st_size
            except (OSError, TypeError, ValueError):
                fsize = None
            if fsize is not None:
                end = min(fsize, end) if size else fsize
        if end - off <= CHUNK_BYTES or (size == 0 and end <= off):
            rc = lib.memtier_prefetch(h, p, off, size, opts)
            if rc:
                self._fail(rc, "memtier.prefetch", path, tgt)
            return None
        pos = off
        while pos < end:
            piece = min(CHUNK_BYTES, end - pos)
            rc = lib.memtier_prefetch(h, p, pos, piece, opts)
            if rc:
                self._fail(rc, "memtier.prefetch", path, tgt)
            pos += piece
        return None

    # -- cache, stats, policy --------------------------------------------

    def drop_cache(self, path: Optional[PathType] = None) -> None:
        """Remove ``path``'s blocks (all blocks if None) from the DRAM cache.

        Also closes its cached descriptors. Succeeds when nothing was cached.
        """
        h = self._handle()
        p = self._ffi.NULL if path is None else _cpath(path)
        rc = self._lib.memtier_drop_cache(h, p)
        if rc:
            self._fail(rc, "memtier.drop_cache", path if path is not None else "")

    def stats(self) -> Stats:
        """Counters since creation or :meth:`reset_stats` (a frozen :class:`Stats`)."""
        h = self._handle()
        st = self._ffi.new("memtier_stats_t *")
        _check(self._lib.memtier_stats_sized(h, st, self._ffi.sizeof("memtier_stats_t")), "memtier.stats")
        return Stats(*[getattr(st, name) for name in STATS_FIELDS])

    def reset_stats(self) -> None:
        """Set every counter to 0 except ``cache_resident_bytes`` and ``cache_budget_bytes``."""
        h = self._handle()
        _check(self._lib.memtier_stats_reset(h), "memtier.reset_stats")

    def explain(self, path: PathType, offset: int, size: int, *, flags: int = 0,
                device: Any = "cpu") -> Decision:
        """What reading ``size`` bytes of ``path`` at ``offset`` would do now, without reading.

        Parameters
        ----------
        path : str, bytes or os.PathLike
        offset, size : int
            Bytes.
        flags : int
            ``READ_*`` hints.
        device : str or torch.device
            "cpu", or "cuda"/"cuda:N" for the GPU target.

        Returns
        -------
        Decision

        Raises
        ------
        MemTierError
            The status the read would fail with before any I/O (argument and
            open errors, e.g. NotFoundError).
        """
        h = self._handle()
        ffi, lib = self._ffi, self._lib
        target, _ = _parse_device(device)
        flags = _check_off(flags, "flags", 32)
        p = _cpath(path)
        out = ffi.new("memtier_decision_t *")
        try:
            rc = lib.memtier_explain(h, p, offset, size, ffi.NULL, target, flags, out)
        except OverflowError:
            _check_off(offset)
            _check_off(size, "size")
            raise
        if rc:
            self._fail(rc, "memtier.explain", path, target)
        return Decision(
            path=ffi.string(lib.memtier_path_name(out.path)).decode("ascii", "replace"),
            admit=bool(out.admit),
            cached_bytes=int(out.cached_bytes),
            resident_bytes=int(out.resident_bytes),
            tasks=int(out.tasks),
            reason=ffi.string(out.reason).decode("utf-8", "replace"),
        )


def _set_field(cfg: Any, key: str, value: Any) -> None:
    if key in _MODE_NAMES and isinstance(value, str):
        names = _MODE_NAMES[key]
        try:
            value = names[value.lower()]
        except KeyError:
            raise ValueError(
                f"{key} must be one of {list(names)} (or 0-{len(names) - 1}), got {value!r}"
            ) from None
    elif key == "cache_enabled":
        if not isinstance(value, (bool, int)):
            raise TypeError(f"config key 'cache_enabled' needs a bool, got {type(value).__name__} {value!r}")
        value = 1 if value else 0
    if isinstance(value, bool) and key != "cache_enabled":
        raise TypeError(f"config key {key!r} needs an integer, got a bool")
    try:
        value = value.__index__()
    except AttributeError:
        raise TypeError(
            f"config key {key!r} needs an integer, got {type(value).__name__} {value!r}"
        ) from None
    try:
        setattr(cfg, key, value)
    except OverflowError:
        raise ValueError(f"config value {key}={value} is out of range for its C field") from None


def _parse_device(device: Any) -> Tuple[int, Optional[int]]:
    """("cpu" | "cuda[:N]" | torch.device) -> (target, device index)."""
    s = str(device) if device is not None else "cpu"
    if s == "cpu":
        return TARGET_CPU, None
    if s == "cuda" or s.startswith("cuda:"):
        idx = 0
        if ":" in s:
            try:
                idx = int(s.split(":", 1)[1])
            except ValueError:
                raise ValueError(f"bad device {device!r}") from None
        return TARGET_CUDA, idx
    raise ValueError(f"unsupported device {device!r}: use 'cpu' or 'cuda[:N]'")


_IOV_P: Any = None  # ffi.typeof("memtier_iovec_t *") once the layout was checked
_UINTPTR: Any = None  # ffi.typeof("uintptr_t"), set with _IOV_P


def _iov_array(ffi: Any, n: int) -> Any:
    """A zeroed (n, 5) uint64 array whose rows have the layout of
    ``memtier_iovec_t`` (offset, size, dst, path, result: five 8-byte fields
    without padding). The layout is checked against ``ffi.offsetof`` and
    ``ffi.sizeof`` on first use (the cdef is parsed lazily); a mismatch
    raises RuntimeError instead of handing the library a wrong array."""
    global _IOV_P, _UINTPTR
    import numpy as np

    if _IOV_P is None:
        names = ("offset", "size", "dst", "path", "result")
        got = ([ffi.offsetof("memtier_iovec_t", f) for f in names], ffi.sizeof("memtier_iovec_t"),
               ffi.sizeof("void *"))
        if got != ([0, 8, 16, 24, 32], 40, 8):
            raise RuntimeError(f"memtier: memtier_iovec_t has layout {got}, expected "
                               "([0, 8, 16, 24, 32], 40, 8) (offsets, size, pointer size)")
        _UINTPTR = ffi.typeof("uintptr_t")
        _IOV_P = ffi.typeof("memtier_iovec_t *")
    return np.zeros((n, 5), dtype=np.uint64)


def _bad_range(arr: Any, what: str = "range") -> None:
    """Raise the ValueError of the first (offset, size) row of ``arr`` that is
    negative or 2**63 or more (there is one)."""
    import numpy as np

    bad_neg = arr < 0 if arr.dtype.kind == "i" else np.zeros(arr.shape, dtype=bool)
    bad_big = arr.astype(np.uint64) >= np.uint64(1 << 63)
    bad = bad_neg | (bad_big & ~bad_neg)
    k = int(np.flatnonzero(bad.any(axis=1))[0])
    row = tuple(int(x) for x in arr[k].tolist())
    if bool(bad_neg[k].any()):
        raise ValueError(f"{what} {k} has a negative offset or size: {row}")
    raise ValueError(f"{what} {k} is out of range (2**63 or more): {row}")


def _list_dsts(ffi: Any, out: Any, sizes: Any, dst: Any) -> List[Any]:
    """readv into a list of buffers: validate ``out`` (one host buffer per
    range, each at least its range's size), write the addresses into ``dst``
    (uint64 column) and return the objects that keep them valid.

    Common case (every buffer a writable C-contiguous buffer-protocol object
    without object dtype): one from_buffer per buffer, then the addresses and
    lengths are gathered by C loops (``ffi.new("char *[]", cdatas)``, numpy).
    Anything else: element by element through :func:`_dest` (precise errors,
    torch tensors)."""
    import numpy as np

    n = sizes.shape[0]
    if len(out) != n:
        raise ValueError(f"out has {len(out)} buffers for {n} ranges")
    fb, char_array = ffi.from_buffer, _CHAR_ARRAY
    cds: Optional[List[Any]]
    try:
        cds = [fb(char_array, b, True) for b in out]
    except Exception:  # noqa: BLE001 - the element loop below reports it
        cds = None
    if cds is not None and any(getattr(getattr(b, "dtype", None), "hasobject", False)
                               or (type(b) is memoryview and b.format == "O") for b in out):
        cds = None
    if cds is not None:
        lens = np.fromiter(map(len, cds), dtype=np.uint64, count=n)
        short = np.flatnonzero(lens < sizes)
        if short.size:
            k = int(short[0])
            raise ValueError(f"out[{k}] holds {int(lens[k])} bytes, range {k} needs {int(sizes[k])}")
        ptrs = ffi.new("char *[]", cds)
        dst[...] = np.frombuffer(ffi.buffer(ptrs), dtype=np.uint64)
        return [cds, ptrs, out]
    size_list = sizes.tolist()
    keep: List[Any] = []
    addrs: List[int] = []
    for k in range(n):
        buf = out[k]
        cd, nbytes = _dest_fast(ffi, buf)
        if cd is None:
            cd, nbytes, target = _dest(ffi, buf)
            if target != TARGET_CPU:
                raise ValueError(f"readv reads into host memory only; out[{k}] is device memory")
        if nbytes < size_list[k]:
            raise ValueError(f"out[{k}] holds {nbytes} bytes, range {k} needs {size_list[k]}")
        addrs.append(int(ffi.cast(_UINTPTR, cd)))
        keep.append(cd)
        keep.append(buf)
    dst[...] = addrs
    return keep


_IOV_DTYPE = None


def _iov_dtype(ffi: Any) -> Any:
    """numpy structured dtype with the exact layout of memtier_iovec_t."""
    global _IOV_DTYPE
    if _IOV_DTYPE is None:
        import numpy as np

        names = ["offset", "size", "dst", "path", "result"]
        _IOV_DTYPE = np.dtype({
            "names": names,
            "formats": ["<u8", "<u8", "<u8", "<u8", "<i8"],
            "offsets": [ffi.offsetof("memtier_iovec_t", f) for f in names],
            "itemsize": ffi.sizeof("memtier_iovec_t"),
        })
        assert ffi.sizeof("void *") == 8, "readv: 64-bit pointers expected"
    return _IOV_DTYPE


def _ranges_array(ranges: Any, what: str = "range") -> Any:
    """``ranges`` as an (N, 2) uint64 array of (offset, size) pairs.

    Only integers are accepted (numpy integer arrays, or sequences of Python
    ints): a float or a numeric string would silently be truncated or parsed
    into another offset. ``what`` names one element in messages ("range" for
    readv, "chunk" for load_chunks). Raises TypeError or ValueError.
    """
    import numpy as np

    plural = what + "s"
    if isinstance(ranges, (str, bytes)):
        raise TypeError(f"{plural} must be a sequence of (offset, size) integer pairs, not {type(ranges).__name__}")
    arr = ranges if isinstance(ranges, np.ndarray) else None
    if arr is None:
        if not isinstance(ranges, (list, tuple)):
            try:
                ranges = list(ranges)  # an iterator is read once
            except TypeError:
                raise TypeError(f"{plural} must be a sequence of (offset, size) integer pairs, "
                                f"not {type(ranges).__name__}") from None
        try:
            arr = np.array(ranges)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"{plural} must be a sequence of (offset, size) integer pairs: {e}") from None
        if arr.size == 0:
            return np.zeros((0, 2), dtype=np.uint64)
        if arr.dtype.kind in "fO" and arr.ndim == 2 and all(
                isinstance(x, (int, np.integer)) for pair in ranges for x in pair):
            # Python ints above 2**63 - 1 make numpy pick float64 or object
            try:
                arr = np.array(ranges, dtype=np.uint64)
            except (TypeError, ValueError, OverflowError) as e:
                raise ValueError(f"{plural} must be (offset, size) pairs of 64-bit integers: {e}") from None
    if arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{plural} must be (offset, size) integer pairs, got {arr.dtype} values")
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{plural} must have shape (N, 2), got {arr.shape}")
    if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
        bad = int(np.argwhere(arr < 0)[0][0])
        raise ValueError(f"{what} {bad} has a negative offset or size: {tuple(arr[bad].tolist())}")
    return arr.astype(np.uint64, copy=False)


# ---------------------------------------------------------------------------
# default context and module-level functions


def default_context() -> Context:
    """The process's default :class:`Context`, created on first use.

    It uses the defaults and the ``MEMTIER_*`` environment. One per process:
    in a fork child of a process that loaded MemTier this raises
    :class:`ForkError`; a child whose parent never loaded MemTier creates its
    own. Closing it makes the next call create a new one.
    """
    c = _default
    if c is not None and c._h is not None and c._pid == _pid_now:
        return c
    rt = _ffi.loaded()
    if rt is not None and rt.pid != _pid_now:
        raise _errors.fork_error(rt.pid, os.getpid())
    return _make_default()


def _make_default() -> Context:
    global _default
    with _default_lock:
        c = _default
        if c is None or c._h is None or c._pid != _pid_now:
            c = Context()
            _default = c
        return c


def read(path: PathType, offset: int, size: int, *, flags: int = 0,
         immutable: bool = False) -> bytes:
    """:meth:`Context.read` on the default context."""
    return default_context().read(path, offset, size, flags=flags, immutable=immutable)


def read_into(path: PathType, offset: int, buffer: WritableBuffer, *, flags: int = 0,
              immutable: bool = False) -> int:
    """:meth:`Context.read_into` on the default context (same arguments,
    result, errors and thread safety)."""
    c = _default
    if c is None or c._h is None or c._pid != _pid_now:
        c = default_context()
    return c.read_into(path, offset, buffer, flags=flags, immutable=immutable)


def readv(path: PathType, ranges: Any, out: Any = None, *, flags: int = 0,
          immutable: bool = False) -> Any:
    """:meth:`Context.readv` on the default context (same arguments, result,
    errors and thread safety)."""
    return default_context().readv(path, ranges, out, flags=flags, immutable=immutable)


def read_async(path: PathType, offset: int, buffer: WritableBuffer, *, flags: int = 0) -> Request:
    """:meth:`Context.read_async` on the default context."""
    return default_context().read_async(path, offset, buffer, flags=flags)


def prefetch(path: PathType, offset: int = 0, size: int = 0, *, wait: bool = True,
             to_hbm: bool = False) -> Optional[Request]:
    """:meth:`Context.prefetch` on the default context."""
    return default_context().prefetch(path, offset, size, wait=wait, to_hbm=to_hbm)


def stats() -> Stats:
    """:meth:`Context.stats` of the default context."""
    return default_context().stats()


def reset_stats() -> None:
    """:meth:`Context.reset_stats` of the default context."""
    default_context().reset_stats()


def drop_cache(path: Optional[PathType] = None) -> None:
    """:meth:`Context.drop_cache` on the default context."""
    default_context().drop_cache(path)


def explain(path: PathType, offset: int, size: int, *, flags: int = 0,
            device: Any = "cpu") -> Decision:
    """:meth:`Context.explain` on the default context."""
    return default_context().explain(path, offset, size, flags=flags, device=device)


def gpu_info() -> str:
    """:meth:`Context.gpu_info` of the default context: the library's CUDA,
    GDS and HBM state as ``key: value`` lines (loads libcuda to answer)."""
    return default_context().gpu_info()


def runtime_info() -> Dict[str, Any]:
    """Facts about the loaded library (loads it and creates the default context).

    Returns
    -------
    dict
        ``version`` (library version string), ``version_number``,
        ``package_version``, ``library`` (path loaded), ``pid`` (process that
        loaded it), ``gomaxprocs`` (of the default context's config; 0 =
        left as is), ``torch`` (whether the package uses torch).
    """
    ctx = default_context()
    rt = _ffi.runtime()
    return {
        "version": rt.version,
        "version_number": rt.version_number,
        "package_version": _ffi.PACKAGE_VERSION,
        "library": rt.path,
        "pid": rt.pid,
        "gomaxprocs": ctx.config()["gomaxprocs"],
        "torch": _dtypes.torch_module() is not None,
    }
