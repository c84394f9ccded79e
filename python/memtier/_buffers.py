"""Destinations of reads: host buffers, torch tensors and CUDA arrays, validated
before any I/O and turned into the ``char*`` the library writes.

:func:`_dest` is the general check; :func:`_dest_fast` the hot-path subset
for the exact types of :data:`_BUF_KINDS`. Nothing here loads the library:
the cffi types are bound by :func:`bind_ffi` when a Context is created.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

from . import _cai_stream, _constants, _dtypes, _errors

#: Anything exporting a writable, C-contiguous buffer (bytearray, memoryview,
#: array.array, numpy.ndarray), or a contiguous torch tensor.
WritableBuffer = Any

TARGET_CPU = _constants.TARGET_CPU
TARGET_CUDA = _constants.TARGET_CUDA


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



def bind_ffi(ffi: Any) -> Any:
    """Bind the cffi ``char[]`` / ``char *`` types the fast paths pass to
    ``ffi.from_buffer`` and ``ffi.cast`` (once per process); returns ``char[]``."""
    global _CHAR_ARRAY, _CHAR_P
    if _CHAR_P is None:
        _CHAR_ARRAY, _CHAR_P = ffi.typeof("char[]"), ffi.typeof("char *")
    return _CHAR_ARRAY


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



def _sync_torch_stream(t: Any) -> None:
    """Wait for work queued on the current torch stream of ``t``'s device: the
    library writes the memory on its own streams (or with cuFile), which are
    not ordered after torch's, and a block from torch's caching allocator may
    still be used by a kernel of a tensor freed earlier. A caller whose
    producer ran on a side stream ``s`` makes the call under
    ``with torch.cuda.stream(s):``, which makes ``s`` the current stream."""
    import torch

    torch.cuda.current_stream(t.device).synchronize()

