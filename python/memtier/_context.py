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
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from . import _dtypes, _errors, _ffi
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
    "CHUNK_BYTES",
    "default_context",
    "runtime_info",
    "gpu_info",
]

PathType = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: Anything exporting a writable, C-contiguous buffer (bytearray, memoryview,
#: array.array, numpy.ndarray), or a contiguous torch tensor.
WritableBuffer = Any

# Per-call hints (MEMTIER_READ_* of memtier.h; OR them).
READ_DEFAULT = 0
READ_ONCE = 1  #: do not admit the bytes into the DRAM cache
READ_WILL_REUSE = 2  #: admit into the DRAM cache whatever the size
READ_DIRECT = 4  #: prefer O_DIRECT for bytes not cached
READ_BUFFERED = 8  #: never O_DIRECT for this call

TARGET_CPU = 0
TARGET_CUDA = 1

#: Reads larger than this are split into C calls of at most this many bytes,
#: so that Ctrl-C (KeyboardInterrupt) lands between pieces: a Python signal
#: handler only runs once the C call in progress returns.
CHUNK_BYTES = 64 << 20

# readv of at most this many ranges given as a Python sequence builds its
# iovec array with cffi; longer ones (and numpy input) with numpy.
_SMALL_READV = 64

_DIRECT_MODES = {"auto": 0, "off": 1, "always": 2, "required": 3}
_GDS_MODES = {"auto": 0, "off": 1, "required": 2}  # MEMTIER_GDS_*
#: Config keys given by name (as the MEMTIER_* environment variables take them).
_MODE_NAMES = {"direct_mode": _DIRECT_MODES, "gds_mode": _GDS_MODES}

#: Context keyword -> C field (lowercase memtier_config_t field names).
CONFIG_KEYS = (
    "io_threads",
    "cache_bytes",
    "cache_block_bytes",
    "cache_admit_max_bytes",
    "task_bytes",
    "direct_threshold_bytes",
    "direct_mode",
    "cache_enabled",
    "max_open_files",
    "gomaxprocs",
    "gds_threshold_bytes",
    "max_inflight_mib",
    "small_io_depth",
    "path_recheck_ms",
    "hbm_cache_bytes",
    "gds_mode",
    "hbm_device",
)

# ---------------------------------------------------------------------------
# fork detection

# The pid of this process, refreshed in a fork child by os.register_at_fork:
# comparing it with the pid a context was made in costs a global read instead
# of a getpid() system call on every entry. A fork that bypasses Python's
# hooks is still caught by the C guard (MEMTIER_ERR_FORKED).
_pid_now = os.getpid()
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


def _cpath(path: PathType) -> bytes:
    """The file-system bytes of ``path`` (rejects embedded NUL, like open())."""
    if type(path) is str:
        b = path.encode("utf-8", "surrogateescape")
    else:
        b = os.fsencode(path)
    if b"\0" in b:
        raise ValueError(f"path contains a NUL byte: {path!r}")
    return b


def _fname(path: PathType) -> str:
    try:
        return os.fsdecode(path)
    except TypeError:
        return repr(path)


def _is_torch_tensor(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return (mod == "torch" or mod.startswith("torch.")) and hasattr(obj, "data_ptr")


def _dest(ffi: Any, obj: Any, readonly_exc: type = TypeError) -> Tuple[Any, int, int]:
    """Validate a destination and return ``(char* cdata, nbytes, target)``.

    Runs before any I/O. Buffer-protocol objects must be writable and
    C-contiguous; torch tensors contiguous, strided, not requiring grad, on
    the CPU (or CUDA: the GPU target); objects with ``__cuda_array_interface__``
    go to the GPU target. The returned cdata keeps ``obj`` alive.
    """
    dt = getattr(obj, "dtype", None)
    if getattr(dt, "hasobject", False):
        # An object array's buffer holds PyObject pointers: file bytes there
        # would crash the interpreter when the array is freed.
        raise TypeError("destination array has dtype object (it holds Python object pointers); "
                        "use a numeric dtype such as numpy.uint8")
    try:
        cd = ffi.from_buffer(obj, require_writable=True)
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


# ---------------------------------------------------------------------------
# result types


@dataclass(frozen=True)
class Stats:
    """Counters of a context since it was created or :meth:`Context.reset_stats`.

    Every field of ``memtier_stats_t`` with the same name; ``*_bytes`` are
    bytes, ``*_ns`` nanoseconds, the others counts. A read larger than :data:`CHUNK_BYTES` counts as
    one request per piece.
    """

    requests: int
    bytes: int
    cache_hit_requests: int
    cache_hit_bytes: int
    buffered_requests: int
    buffered_bytes: int
    direct_requests: int
    direct_bytes: int
    gds_requests: int
    gds_bytes: int
    staged_requests: int
    staged_bytes: int
    cache_hits: int
    cache_misses: int
    cache_evictions: int
    cache_resident_bytes: int
    cache_budget_bytes: int
    cache_inserted_bytes: int
    prefetch_requests: int
    prefetch_bytes: int
    readv_calls: int
    coalesced_reads: int
    storage_bytes: int
    direct_fallbacks: int
    bounce_bytes: int
    eintr_retries: int
    short_read_retries: int
    async_requests: int
    errors: int
    files_opened: int
    files_evicted: int
    stale_invalidations: int
    hbm_hit_requests: int
    hbm_hit_bytes: int
    hbm_inserted_bytes: int
    hbm_evictions: int
    hbm_resident_bytes: int
    hbm_budget_bytes: int
    gds_fallbacks: int
    h2d_bytes: int
    h2d_ns: int
    staged_read_ns: int

    def as_dict(self) -> Dict[str, int]:
        """The counters as a plain dict."""
        return asdict(self)


STATS_FIELDS = tuple(f.name for f in fields(Stats))


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

    __slots__ = ("_h", "_pid", "_ffi", "_lib", "_rt", "_fin", "__weakref__")

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
            Every key of :data:`CONFIG_KEYS`; ``direct_mode`` and ``gds_mode`` as names,
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
                self._fail(rc, prefix, path, target)
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
                  flags: int = 0) -> int:
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

        Returns
        -------
        int
            Bytes read (always the buffer's nbytes).

        Raises
        ------
        TypeError
            ``buffer`` is read-only (e.g. ``bytes``) or not a buffer; before any I/O.
        ValueError
            ``buffer`` is not C-contiguous, or a torch tensor requires grad;
            before any I/O. Negative offset.
        EndOfFileError
            ``offset + nbytes`` is past the end of the file. Nothing is
            written beyond the file's bytes; in practice the buffer is left as it was.
        NotFoundError, PermissionDeniedError, IsDirectoryError, MemTierError
            Other failures (see :mod:`memtier` for the table).

        Notes
        -----
        Reads above :data:`CHUNK_BYTES` are split into several C calls so Ctrl-C
        is delivered between them; an interrupted read leaves the buffer
        partly written. Thread-safe; the GIL is released while reading.
        """
        h = self._h
        if h is None or self._pid != _pid_now:
            h = self._handle()
        p = _cpath(path)
        cd, n, target = _dest(self._ffi, buffer)
        self._read(h, p, offset, cd, n, flags, target, path, "memtier.read_into")
        return n

    def read(self, path: PathType, offset: int, size: int, *, flags: int = 0) -> bytes:
        """Read ``size`` bytes of ``path`` at ``offset`` and return them as bytes.

        Parameters
        ----------
        path : str, bytes or os.PathLike
        offset, size : int
            Bytes; ``size`` 0 returns ``b""``.
        flags : int
            ``READ_*`` hints.

        Returns
        -------
        bytes
            Exactly ``size`` bytes.

        Raises
        ------
        EndOfFileError
            The range runs past the end of the file.
        ValueError
            Negative offset or size.
        NotFoundError, PermissionDeniedError, IsDirectoryError, MemTierError

        Notes
        -----
        Allocates and copies once more than :meth:`read_into`; prefer that
        for large or repeated reads.
        """
        h = self._h
        if h is None or self._pid != _pid_now:
            h = self._handle()
        size = _check_off(size, "size")
        p = _cpath(path)
        buf = bytearray(size)
        cd = self._ffi.from_buffer(buf, require_writable=True)
        self._read(h, p, offset, cd, size, flags, TARGET_CPU, path, "memtier.read")
        del cd
        return bytes(buf)

    def readv(self, path: PathType, ranges: Any, out: Optional[WritableBuffer] = None) -> Any:
        """Read many ``(offset, size)`` ranges of ``path`` back to back into ``out``.

        One ``memtier_readv`` call per batch of up to :data:`CHUNK_BYTES`
        (adjacent ranges are coalesced and the reads run in parallel inside
        the library).

        Parameters
        ----------
        path : str, bytes or os.PathLike
        ranges : sequence of (offset, size) pairs, or numpy integer array of shape (N, 2)
            Bytes. Sizes may be 0. Ranges may overlap or repeat.
        out : writable C-contiguous buffer, optional
            At least ``sum(sizes)`` bytes; range k lands at ``sum(sizes[:k])``.
            Default: a new ``numpy.uint8`` array of exactly ``sum(sizes)`` bytes.

        Returns
        -------
        out, or the new numpy.ndarray (uint8, shape (sum(sizes),)).

        Raises
        ------
        ValueError
            ``ranges`` has the wrong shape or negative values; ``out`` too small
            or not contiguous (TypeError if read-only). Before any I/O.
        MemTierError
            The error of the lowest-index failed range (e.g. EndOfFileError
            for a range past EOF), with ``.index`` set to that index. The other
            ranges were still read.
        """
        import numpy as np

        h = self._h
        if h is None or self._pid != _pid_now:
            h = self._handle()
        ffi, lib = self._ffi, self._lib
        p = _cpath(path)
        if not isinstance(ranges, np.ndarray):
            try:
                small = len(ranges) <= _SMALL_READV
            except TypeError:
                small = False
            if small:
                done = self._readv_small(h, p, ranges, out, path)
                if done is not None:
                    return done[0]
        arr = _ranges_array(ranges)
        n = arr.shape[0]
        sizes = arr[:, 1]
        total = int(sizes.sum(dtype=np.uint64)) if n else 0
        if n and int(sizes.max()) > 0 and total < int(sizes.max()):
            raise ValueError("sum of range sizes overflows")
        out, cd = _readv_out(ffi, out, total)
        iov = np.zeros(n, dtype=_iov_dtype(ffi))
        if n:
            base = int(ffi.cast("uintptr_t", cd))
            iov["offset"] = arr[:, 0]
            iov["size"] = sizes
            starts = np.empty(n, dtype=np.uint64)
            starts[0] = 0
            np.cumsum(sizes[:-1], out=starts[1:])
            iov["dst"] = starts + np.uint64(base)
        # batches of at most CHUNK_BYTES (at least one range each)
        bounds = [0]
        if n:
            ends = np.cumsum(sizes, dtype=np.uint64)
            while bounds[-1] < n:
                lo = bounds[-1]
                limit = (int(ends[lo - 1]) if lo else 0) + CHUNK_BYTES
                hi = int(np.searchsorted(ends, limit, side="right"))
                bounds.append(max(hi, lo + 1))
        civ = ffi.cast("memtier_iovec_t *", ffi.from_buffer(iov)) if n else ffi.NULL
        first_err = None
        if n == 0:
            rc = lib.memtier_readv(h, p, ffi.NULL, 0, TARGET_CPU)
            if rc:
                self._fail(rc, "memtier.readv", path)
            return out
        for lo, hi in zip(bounds, bounds[1:]):
            rc = lib.memtier_readv(h, p, civ + lo, hi - lo, TARGET_CPU)
            if rc and first_err is None:
                detail = _ffi.error_texts(rc)[1]  # at once: this thread's last error
                bad = np.flatnonzero(iov["result"][lo:hi] < 0)
                if bad.size:
                    idx = lo + int(bad[0])
                    first_err = (int(iov["result"][idx]), idx, detail)
                else:  # a call-level failure (no element marked)
                    first_err = (rc, None, detail)
        del cd, civ
        if first_err is not None:
            st, idx, detail = first_err
            where = "memtier.readv" if idx is None else f"memtier.readv: range {idx}"
            raise make_error(st, where, detail, strerror=_ffi.strerror(st),
                             filename=_fname(path), index=idx)
        return out

    def _readv_small(self, h: Any, p: bytes, ranges: Any, out: Any, path: Any) -> Any:
        """readv of a short list through a cffi-built iovec array (cheaper than
        numpy below ~64 ranges). Returns ``(out,)``, or None to take the
        general path (a batch above CHUNK_BYTES)."""
        ffi, lib = self._ffi, self._lib
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
            if off >= 1 << 64 or size >= 1 << 63:
                raise ValueError(f"range {k} is out of range: {(off, size)}")
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
        rc = lib.memtier_readv(h, p, iov, n, TARGET_CPU)
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
        from ._chunks import load_chunks

        return load_chunks(path, chunks, out, ctx=self)

    def iter_chunks(self, path: PathType, chunks: Any, out: Any = None) -> Any:
        """:func:`memtier.iter_chunks` on this context."""
        from ._chunks import iter_chunks

        return iter_chunks(path, chunks, out, ctx=self)

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
                fsize = os.stat(path).st_size
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


def read(path: PathType, offset: int, size: int, *, flags: int = 0) -> bytes:
    """:meth:`Context.read` on the default context."""
    return default_context().read(path, offset, size, flags=flags)


def read_into(path: PathType, offset: int, buffer: WritableBuffer, *, flags: int = 0) -> int:
    """:meth:`Context.read_into` on the default context."""
    c = _default
    if c is None or c._h is None or c._pid != _pid_now:
        c = default_context()
    return c.read_into(path, offset, buffer, flags=flags)


def readv(path: PathType, ranges: Any, out: Optional[WritableBuffer] = None) -> Any:
    """:meth:`Context.readv` on the default context."""
    return default_context().readv(path, ranges, out)


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
