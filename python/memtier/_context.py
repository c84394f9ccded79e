"""The :class:`Context` of MemTier and the lazily created default context
behind the module-level functions.

Units: offsets and sizes are bytes. Paths are ``str``, ``bytes`` or
``os.PathLike``. Every method may be called from many threads at once; the
GIL is released during the C calls, so reads in several threads run in
parallel.

The parts a Context is built from live in modules below this one (one job
each; none imports this module): :mod:`._paths` (path encoding, URLs),
:mod:`._options` (flags, settings, devices), :mod:`._buffers`
(destinations), :mod:`._ranges` (readv arrays), :mod:`._cuda` (CUDA
diagnostics), :mod:`._request` (:class:`Request`), :mod:`._chunkio` (chunk
reads) and :mod:`._fork` (fork detection, the handle finalizer). Their names
that other modules import from here are re-exported below.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import _buffers, _chunkio, _constants, _dtypes, _errors, _ffi, _fork, _interrupt, _pickling, _ranges
from ._buffers import (  # noqa: F401  (re-exported: other modules import them from here)
    TARGET_CPU as TARGET_CPU,
    TARGET_CUDA as TARGET_CUDA,
    WritableBuffer as WritableBuffer,
    _BUF_KINDS,
    _cuda_array_dest as _cuda_array_dest,
    _dest as _dest,
    _dest_fast as _dest_fast,
    _is_torch_tensor as _is_torch_tensor,
    _readv_out,
    _sync_torch_stream as _sync_torch_stream,
)
from ._chunkio import ChunkStream
from ._cuda import (  # noqa: F401  (re-exported)
    _require_cuda as _require_cuda,
    _torch_cuda_missing as _torch_cuda_missing,
    _unsupported_cuda,
)
from ._errors import _check, make_error
from ._options import (  # noqa: F401  (re-exported: memtier imports them from here)
    CHUNK_BYTES as CHUNK_BYTES,
    CONFIG_KEYS as CONFIG_KEYS,
    FRESHNESS_INTERVAL as FRESHNESS_INTERVAL,
    FRESHNESS_OPEN as FRESHNESS_OPEN,
    FRESHNESS_STRICT as FRESHNESS_STRICT,
    READ_BUFFERED as READ_BUFFERED,
    READ_DEFAULT as READ_DEFAULT,
    READ_DIRECT as READ_DIRECT,
    READ_IMMUTABLE as READ_IMMUTABLE,
    READ_ONCE as READ_ONCE,
    READ_WILL_REUSE as READ_WILL_REUSE,
    ReadFlag as ReadFlag,
    _READ_IMMUTABLE,
    _check_bool,
    _check_off,
    _parse_device as _parse_device,
    _set_field,
    config_dict,
)
from ._paths import (  # noqa: F401  (re-exported: other modules import them from here)
    _PATH_CACHE as _PATH_CACHE,
    _PATH_CACHE_MAX as _PATH_CACHE_MAX,
    PathType as PathType,
    _cpath as _cpath,
    _fname as _fname,
    _is_url as _is_url,
)
from ._ranges import _bad_range, _iov_array as _iov_array, _list_dsts, _ranges_array as _ranges_array
from ._request import Request as Request
from ._stats import Stats as Stats

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

# readv of at most this many ranges given as a Python sequence builds its
# iovec array with cffi; longer ones (and numpy input) with numpy.
_SMALL_READV = 40

_default_lock = threading.Lock()
_default: "Optional[Context]" = None


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()  # a lock held by another parent thread would hang here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def __getattr__(name: str) -> Any:
    # PEP 562: ``_context._pid_now`` (read by memtier.safetensors) stays the
    # live value, which _fork refreshes in a fork child.
    if name == "_pid_now":
        return _fork._pid_now
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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



#: The size in the library's past-end message (runtime/engine checkEOF).
_SIZE_IN_EOF = re.compile(r"runs past end of file \(size (\d+)\)")


def _object_size(ctx: "Context", path: PathType, where: str) -> int:
    """The size in bytes of ``path`` as the library sees it (a URL: from the
    object's Content-Range at open; no extra request once it is open).

    The C API has no size call yet, so this reads one byte at the largest
    offset and takes the size from the EndOfFileError the library answers
    with ("runs past end of file (size N)", runtime/engine checkEOF). Any
    other failure (not found, permission...) is raised as the library gave it."""
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


# ---------------------------------------------------------------------------
# context


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
                 "_readv_ex_c", "_fb", "_ca", "_hid", "_fri", "_frd", "_frv", "_frt",
                 "__weakref__")

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
        self._ca = _buffers.bind_ffi(ffi)  # ffi.typeof("char[]"), for from_buffer
        cfg = ffi.new("memtier_config_t *")
        _check(lib.memtier_config_default_sized(cfg, ffi.sizeof("memtier_config_t")),
               "memtier.Context")
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
        _check(lib.memtier_init(cfg, out), "memtier.Context")
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
        # The compiled fast path (memtier._fastpath), None in ABI mode: it
        # takes the handle as an int and declines (None) what it does not serve.
        self._hid = int(ffi.cast("uintptr_t", self._h))
        fast = rt.fast
        self._fri: Optional[Callable[..., Any]] = None if fast is None else fast.read_into
        self._frd: Optional[Callable[..., Any]] = None if fast is None else fast.read
        self._frv: Optional[Callable[..., Any]] = None if fast is None else fast.readv
        self._frt: Optional[Callable[[Any], Any]] = None if fast is None else fast.ranges_total
        if fast is not None:
            # Context.read_into becomes the C method (once per process); this
            # context's _fri set above is what it checks.
            fast.bind_context(Context, _READ_INTO_PY)
        self._fin = _fork.finalizer(self, lib.memtier_finalize, self._h, rt.pid)
        # Ctrl-C while a call waits on a server (memtier._interrupt): the
        # library invokes this check on the waiting thread. A library older
        # than the package (MEMTIER_LIBRARY) lacks it: calls then take
        # Ctrl-C between pieces only.
        set_check = getattr(lib, "memtier_set_interrupt_check", None)
        if set_check is not None:
            _check(set_check(self._h, _interrupt.check_for(ffi), ffi.NULL, _interrupt.main_thread_id()),
                   "memtier.Context")

    # -- lifecycle --------------------------------------------------------

    def interrupt(self) -> None:
        """Stop every remote request (``s3://``, ``http(s)://``) of this
        context in flight now, from any thread: the calls waiting on them
        raise :class:`CallInterruptedError` soon after (a stalled server
        otherwise holds them for up to the remote timeouts). Calls made
        afterwards run normally; local reads are not affected. Ctrl-C does
        this by itself for a call on the main thread, which then raises
        ``KeyboardInterrupt``.

        Raises
        ------
        ClosedError
            The context was closed.
        ForkError
            Called in a forked child.
        """
        _check(self._lib.memtier_interrupt(self._handle()), "memtier.Context.interrupt")

    def close(self) -> None:
        """Finalize the context (idempotent).

        Queued asynchronous requests complete with :class:`ClosedError`;
        running ones are waited for. Blocks until in-flight I/O ends.
        """
        if self._h is None:
            return
        self._h = None
        self._hid = 0  # the compiled read_into declines: the checks below raise ClosedError
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
        """Refuse: a context is one process's runtime state (TypeError naming
        the fix; see :mod:`memtier._pickling` for DataLoader workers)."""
        return _pickling.refuse(
            "memtier.Context cannot be pickled: create a context in each process "
            "(or use the module-level functions, which make one per process)"
        )

    def _handle(self) -> Any:
        h = self._h
        _fork.check(self._pid)
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
        return config_dict(cfg)

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
            # A URL's first piece revalidated it (freshness strict: one
            # conditional GET); the others trust that check, so one call sends
            # one revalidation GET as one library call does, not one per piece
            # (bench_remote's 512 MiB DRAM hit: 8 GETs, 7 of them extra). Their
            # bytes are still the checked version's (cache entries are per
            # ETag, GETs carry If-Match).
            if _is_url(p):
                flags |= _READ_IMMUTABLE
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
        if offset >= 0 and n >= 0 and offset + n > (1 << 63) - 1 and offset < 1 << 64 and n < 1 << 64:
            # The library's text for this names memtier_explain, the precheck,
            # not the read the caller made: say it here in the read's words.
            raise make_error(_errors.ERR_INVALID_ARG, prefix,
                             f"read {_fname(path)}: offset {offset} + size {n} is beyond the largest "
                             f"file offset (2^63 - 1)", filename=_fname(path))
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
        (the HBM cache tier), ``last_gds_fallback:``, ``build_tags:`` (the
        GPU backends compiled in) and ``gds_path:`` (``gpudirect``, ``compat``
        for cuFile's compatibility mode, ``unavailable`` or ``not probed``). Loads libcuda once per process to answer
        (the only call that does so without a CUDA request); never opens the
        cuFile driver.
        """
        h = self._handle()
        ffi = self._ffi
        size = 4096
        while True:
            buf = ffi.new("char[]", size)
            _check(self._lib.memtier_gpu_info(h, buf, size), "memtier.gpu_info")
            text: str = ffi.string(buf).decode("utf-8", "replace")
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

        Hot path: with the compiled fast path (``memtier._fast``; see
        :func:`runtime_info`) this method is a C method, and a read into a
        buffer-protocol object of at most :data:`CHUNK_BYTES` never enters
        Python: it takes the buffer, looks the encoded path up in the path
        cache and calls ``memtier_read_ex``, about 0.1 us on top of the
        library call. Otherwise (ABI mode, torch
        tensors by ``data_ptr()``, larger reads) one ``ffi.from_buffer`` and
        cffi ABI-mode call per piece: about 1.5 us of Python per small read.
        """
        # With the compiled fast path this method is the fallback of the C
        # method that replaced it (Fast.bind_context in __init__): it runs for
        # what that one declined (a closed context, a fork child, a path not
        # cached yet, anything but a plain host buffer up to CHUNK_BYTES, a bad
        # offset or flags, an immutable that is not a bool, other arguments),
        # and checks and raises exactly as in ABI mode.
        h = self._h
        if h is None or self._pid != _fork._pid_now:
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
                    cd = self._fb(self._ca, buffer, True)
                except Exception:  # noqa: BLE001 - _dest below raises the precise error
                    cd = None
        elif kind == 2:
            if not buffer.dtype.hasobject:
                try:
                    cd = self._fb(self._ca, buffer, True)
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
        if immutable is not False:  # True costs no call; anything else is checked
            if immutable is True or _check_bool(immutable, "immutable", "memtier.read_into"):
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
        frd = self._frd
        if frd is not None:
            # Compiled: the checks of read_into, then memtier_read_ex into a
            # new bytes object (no bytearray and copy). None: declined (as
            # read_into; also a size above CHUNK_BYTES), and the code below
            # checks and raises exactly as in ABI mode.
            got = frd(self._hid, self._pid, path, offset, size, flags, immutable)
            if got is not None:
                if type(got) is int:
                    self._fail(got, "memtier.read", path)
                return got  # type: ignore[no-any-return]
        h = self._h
        if h is None or self._pid != _fork._pid_now:
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
        cd = self._fb(self._ca, buf, True)
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
        if h is None or self._pid != _fork._pid_now:
            h = self._handle()
        try:
            p = _PATH_CACHE[path]
        except (KeyError, TypeError):
            p = _cpath(path)
        if immutable is not False and _check_bool(immutable, "immutable", "memtier.readv"):
            flags |= _READ_IMMUTABLE
        if flags:
            flags = _check_off(flags, "flags", 32)
        frv = self._frv
        if (frv is not None and type(ranges) is not list and type(ranges) is not tuple
                and type(out) is not list and type(out) is not tuple):
            done = self._readv_fast(frv, p, ranges, out, path, flags)
            if done is not None:
                return done[0]
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
            if out is None and total > CHUNK_BYTES:
                # Ask the library first, as read() does: a range past the end
                # of the file (or a missing file) must raise its MemTierError,
                # not a MemoryError for a result that could never be filled.
                self._readv_precheck(h, p, pair, flags, path)
            try:
                out, keep = _readv_out(ffi, out, total)
            except MemoryError:
                if out is not None:
                    raise
                raise MemoryError(
                    f"memtier.readv: {_fname(path)}: no memory for a {total}-byte result "
                    f"({n} ranges); read fewer ranges at a time, or pass out=") from None
            np.subtract(dst, sizes, out=dst)  # start of each range
            np.add(dst, np.uint64(int(ffi.cast(_ranges._UINTPTR, keep))), out=dst)  # + base address
        civ = ffi.cast(_ranges._IOV_P, ffi.from_buffer(iov))
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

    def _readv_fast(self, frv: Any, p: bytes, ranges: Any, out: Any, path: Any,
                    flags: int) -> Any:
        """readv through the compiled module: an (N, 2) int64/uint64 C-contiguous
        array of at most CHUNK_BYTES in all, into one host buffer (or a new
        uint8 array when ``out`` is None), the iovec array built in C.
        Returns ``(out,)``, or None when the module declined (the general
        path then checks, reads and raises as in ABI mode)."""
        dest = out
        if dest is None:
            frt = self._frt
            total = None if frt is None else frt(ranges)  # None: ranges the module declines
            if total is None:
                return None
            import numpy as np

            dest = np.empty(total, dtype=np.uint8)
        r = frv(self._hid, p, ranges, dest, flags)
        if r is None:
            return None
        if r != 0:
            st, idx = r
            detail = _ffi.error_texts(st)[1]  # this thread's last error, right after the call
            index = None if idx < 0 else idx
            where = "memtier.readv" if index is None else f"memtier.readv: range {index}"
            raise make_error(st, where, detail, strerror=_ffi.strerror(st),
                             filename=_fname(path), index=index)
        return (dest,)

    def _readv_call(self, h: Any, p: bytes, iov: Any, n: int, flags: int) -> int:
        """memtier_readv (flags 0) or memtier_readv_ex, target CPU; the status."""
        rc: int
        if not flags:
            rc = self._readv_c(h, p, iov, n, TARGET_CPU)
            return rc
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
        rc = fn(h, p, iov, n, TARGET_CPU, flags)
        return rc

    def _readv_precheck(self, h: Any, p: bytes, pairs: Any, flags: int, path: Any,
                        label: Optional[Callable[[int], str]] = None) -> None:
        """Before readv allocates a result above CHUNK_BYTES: raise the error
        of the lowest-index range the read would fail before any I/O (as
        readv itself reports it: ``.index`` set), asked of ``memtier_explain``
        (no I/O, no stats). ``pairs`` is the (N, 2) uint64 (offset, size)
        view. A range that fails for the end of file fails for every larger
        end, so the lowest failing end is found by bisection over the
        distinct ends (log2(N) calls); any other failure (a missing file)
        is the first non-empty range's. Returns when every range looks
        readable. ``label(k)`` is the message's prefix for range k (default
        ``memtier.readv: range k``)."""
        import numpy as np

        ffi, lib = self._ffi, self._lib
        dec = ffi.new("memtier_decision_t *")

        def explain(off: int, size: int) -> int:
            rc: int = lib.memtier_explain(h, p, off, size, ffi.NULL, TARGET_CPU, flags, dec)
            return rc

        offs, sizes = pairs[:, 0], pairs[:, 1]
        live = np.flatnonzero(sizes)  # empty ranges never fail
        if live.size == 0:
            return
        ends = offs[live] + sizes[live]  # below 2**64: both below 2**63
        top = int(live[int(np.argmax(ends))])
        rc = explain(int(offs[top]), int(sizes[top]))
        if rc == 0:
            return
        k = int(live[0])
        if rc == _errors.ERR_EOF:
            cand = np.unique(ends)  # sorted; the last one fails
            lo, hi = 0, cand.size - 1  # the lowest failing end is cand[lo..hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if explain(0, int(cand[mid])) == _errors.ERR_EOF:
                    hi = mid
                else:
                    lo = mid + 1
            k = int(live[int(np.flatnonzero(ends >= cand[lo])[0])])
        rc = explain(int(offs[k]), int(sizes[k]))
        if rc == 0:  # the file changed between the calls: let the read answer
            return
        detail = _ffi.error_texts(rc)[1]
        raise make_error(rc, label(k) if label else f"memtier.readv: range {k}", detail,
                         strerror=_ffi.strerror(rc), filename=_fname(path), index=k)

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
            except (TypeError, ValueError):
                raise ValueError(
                    f"ranges must have shape (N, 2): range {k} is {item!r}, not an "
                    "(offset, size) pair of integers") from None
            try:
                off = off.__index__()
                size = size.__index__()
            except (TypeError, AttributeError):
                # A pair of the right shape with a float (or str, None) in it:
                # TypeError, as for an array of floats and as os.preadv raises.
                raise TypeError(
                    f"ranges must be (offset, size) integer pairs: range {k} is {item!r}"
                ) from None
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

    def load_chunks(self, path: PathType, chunks: Any, out: Any = None) -> List[Any]:
        """:func:`memtier.load_chunks` on this context."""
        return _chunkio.load(self, path, chunks, out)

    def iter_chunks(self, path: PathType, chunks: Any, out: Any = None) -> ChunkStream:
        """:func:`memtier.iter_chunks` on this context."""
        return _chunkio.stream(self, path, chunks, out)

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


# ---------------------------------------------------------------------------
# default context and module-level functions


# The Python Context.read_into: the fallback of the compiled method that
# replaces it on the class (memtier._fastpath.Fast.bind_context).
_READ_INTO_PY = Context.read_into


def _ctx(ctx: Optional[Context]) -> Context:
    """``ctx``, or the default context when it is None (the ``ctx=`` keyword
    of the module-level functions)."""
    return ctx if ctx is not None else default_context()


def default_context() -> Context:
    """The process's default :class:`Context`, created on first use.

    It uses the defaults and the ``MEMTIER_*`` environment. One per process:
    in a fork child of a process that loaded MemTier this raises
    :class:`ForkError`; a child whose parent never loaded MemTier creates its
    own. Closing it makes the next call create a new one.
    """
    c = _default
    if c is not None and c._h is not None and c._pid == _fork._pid_now:
        return c
    rt = _ffi.loaded()
    if rt is not None and rt.pid != _fork._pid_now:
        raise _errors.fork_error(rt.pid, os.getpid())
    return _make_default()


def _make_default() -> Context:
    global _default
    with _default_lock:
        c = _default
        if c is None or c._h is None or c._pid != _fork._pid_now:
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
    if c is not None:
        fri = c._fri
        if fri is not None:  # the compiled call of Context.read_into, one frame less
            got: Optional[int] = fri(c._hid, c._pid, path, offset, buffer, flags, immutable)
            if got is not None:
                if got < 0:
                    c._fail(got, "memtier.read_into", path)
                return got
    if c is None or c._h is None or c._pid != _fork._pid_now:
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
        left as is), ``torch`` (whether the package uses torch),
        ``memory_limit`` (bytes of the memory limit that bounded the DRAM
        cache budget at init: the smallest cgroup limit of the process, else
        host RAM; 0 = none known) and ``memory_limit_source`` (where it came
        from, e.g. ``"cgroup v2 memory.max at /sys/fs/cgroup/x"`` or
        ``"host RAM"``) and ``python_fast_path`` (``"compiled"``: the hot
        calls ``read_into``, ``read`` and ``readv`` go through the compiled
        module memtier._fast; else ``"abi: <why>"``, e.g. not built, or
        ``MEMTIER_PYTHON_FAST=0``: every call in cffi ABI mode, same results).
    """
    ctx = default_context()
    rt = _ffi.runtime()
    ml_bytes = ctx._ffi.new("uint64_t *")
    ml_src = ctx._ffi.new("char[]", 4160)
    _check(ctx._lib.memtier_memory_limit(ctx._handle(), ml_bytes, ml_src, len(ml_src)),
           "memtier.runtime_info")
    return {
        "memory_limit": int(ml_bytes[0]),
        "memory_limit_source": ctx._ffi.string(ml_src).decode("utf-8", "replace"),
        "version": rt.version,
        "version_number": rt.version_number,
        "package_version": _ffi.PACKAGE_VERSION,
        "library": rt.path,
        "pid": rt.pid,
        "gomaxprocs": ctx.config()["gomaxprocs"],
        "torch": _dtypes.torch_module() is not None,
        "python_fast_path": rt.fast_state,
    }
