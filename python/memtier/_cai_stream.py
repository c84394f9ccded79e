"""The producer's stream of a ``__cuda_array_interface__`` destination.

MemTier fills device memory on its own non-blocking streams (or with cuFile),
which are not ordered after the producer's work. Version 3 of the interface
(https://numba.readthedocs.io/en/stable/cuda/cuda_array_interface.html) lets
the producer export the stream that work was queued on, and asks the consumer
to synchronise with it before using the memory:

* ``stream`` absent or ``None``: no synchronisation is needed;
* ``1``: the legacy default stream; ``2``: the per-thread default stream;
* ``0``: disallowed (ambiguous between the two);
* any other integer: a ``CUstream`` handle.

The wait is ``cuStreamSynchronize`` on the exported stream, called through
the CUDA driver library the MemTier library loads (``$MEMTIER_CUDA_LIBRARY``,
else ``libcuda.so.1``), with the context that owns the memory current on the
calling thread for the call (the legacy and per-thread default streams are
those of the current context; the thread's own context is restored).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Mapping, Optional

from . import _errors

LEGACY_DEFAULT = 1
PER_THREAD_DEFAULT = 2
_CU_POINTER_ATTRIBUTE_CONTEXT = 1

_lock = threading.Lock()
_cuda: Any = None  # the loaded driver library (ctypes.CDLL), once


def cai_stream(cai: Mapping[str, Any]) -> Optional[int]:
    """The validated ``stream`` of a ``__cuda_array_interface__`` dict: None
    when no synchronisation is needed, else the stream handle (1 and 2 are the
    default streams). Raises ValueError for ``0`` or a handle that is not a
    pointer-sized positive integer, TypeError for a non-integer."""
    s = cai.get("stream")
    if s is None:
        return None
    if isinstance(s, bool) or not hasattr(s, "__index__"):
        raise TypeError(f"__cuda_array_interface__ 'stream' must be an integer or None, "
                        f"got {type(s).__name__}")
    s = s.__index__()
    if s == 0:
        raise ValueError("__cuda_array_interface__ 'stream' is 0, which the v3 protocol disallows "
                         "(ambiguous); export 1 for the legacy default stream, 2 for the per-thread "
                         "default stream, the stream's handle, or None when no sync is needed")
    if s < 0 or s >= 1 << 64:
        raise ValueError(f"__cuda_array_interface__ 'stream' {s} is not a stream handle")
    handle: int = s
    return handle


def _driver() -> Any:
    """The CUDA driver library, loaded once (UnsupportedError when it cannot be)."""
    global _cuda
    if _cuda is not None:
        return _cuda
    with _lock:
        if _cuda is None:
            path = os.environ.get("MEMTIER_CUDA_LIBRARY") or "libcuda.so.1"
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise _errors.make_error(
                    _errors.ERR_UNSUPPORTED, "memtier: cannot wait for the array's stream",
                    f"the CUDA driver library is not loaded ({e})") from None
            lib.cuInit.argtypes = [ctypes.c_uint]
            lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            lib.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
            lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
            lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
            _cuda = lib
    return _cuda


def _name(lib: Any, r: int) -> str:
    fn = getattr(lib, "cuGetErrorName", None)
    if fn is not None:
        s = ctypes.c_char_p()
        if fn(r, ctypes.byref(s)) == 0 and s.value:
            return f"{s.value.decode()} ({r})"
    return f"CUresult {r}"


def sync_stream(stream: int, ptr: int) -> None:
    """Wait until the work queued on ``stream`` (a value from :func:`cai_stream`)
    is done, with the context of the device memory at ``ptr`` current for the
    call. Raises MemTier's ERR_IO error when the driver reports one, and
    UnsupportedError when the driver cannot be loaded or initialised."""
    lib = _driver()
    r = lib.cuInit(0)
    if r != 0:
        raise _errors.make_error(_errors.ERR_UNSUPPORTED, "memtier: cannot wait for the array's stream",
                                 f"cuInit failed: {_name(lib, r)}")
    ctx = ctypes.c_void_p()
    if lib.cuPointerGetAttribute(ctypes.byref(ctx), _CU_POINTER_ATTRIBUTE_CONTEXT, ptr) != 0:
        ctx = ctypes.c_void_p()  # no context (stream-ordered memory): whatever is current
    prev = ctypes.c_void_p()
    lib.cuCtxGetCurrent(ctypes.byref(prev))
    switch = bool(ctx.value) and ctx.value != prev.value
    if switch:
        r = lib.cuCtxSetCurrent(ctx)
        if r != 0:
            raise _errors.make_error(_errors.ERR_IO, "memtier: cannot wait for the array's stream",
                                     f"cuCtxSetCurrent failed: {_name(lib, r)}")
    try:
        r = lib.cuStreamSynchronize(ctypes.c_void_p(stream))
    finally:
        if switch:
            lib.cuCtxSetCurrent(prev)
    if r != 0:
        raise _errors.make_error(
            _errors.ERR_IO, "memtier: waiting for the array's stream failed",
            f"cuStreamSynchronize(stream {stream:#x}) returned {_name(lib, r)}")
