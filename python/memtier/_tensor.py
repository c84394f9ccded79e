"""Tensor reads: :func:`read_into_tensor` and :func:`load_tensor`.

torch is optional. :func:`load_tensor` returns a torch tensor when torch is
importable and a numpy array otherwise. Setting the environment variable
``MEMTIER_PY_FORCE_NO_TORCH=1`` makes the package behave exactly as if torch
were not importable (it never imports torch and does not accept tensors),
which runs the numpy code paths in an environment that has torch.
"""

from __future__ import annotations

import operator
from typing import Any, Optional, Sequence, Tuple, Union

from . import _dtypes, _fork
from ._buffers import TARGET_CPU, TARGET_CUDA, _dest, _dest_fast
from ._context import Context, _ctx
from ._cuda import _require_cuda
from ._options import _READ_IMMUTABLE, _parse_device
from ._options import CHUNK_BYTES
from ._paths import PathType, _cpath, _fname

__all__ = ["read_into_tensor", "load_tensor"]

ShapeLike = Union[int, Sequence[int]]

_MAX_BYTES = (1 << 63) - 1


def read_into_tensor(path: PathType, offset: int, tensor: Any, *, flags: int = 0,
                     immutable: bool = False, ctx: Optional[Context] = None) -> Any:
    """Fill ``tensor`` with its nbytes of ``path`` starting at byte ``offset``.

    Parameters
    ----------
    path : str, bytes or os.PathLike
    offset : int
        Byte offset in the file.
    tensor : torch.Tensor or numpy.ndarray
        Contiguous destination of any dtype and shape; ``numel * itemsize``
        bytes are read, raw (little-endian file bytes, no conversion). A torch
        view with a storage offset (``t[10:20]``) receives exactly its own
        bytes. A CUDA tensor (or an object with ``__cuda_array_interface__``)
        is the GPU target (the current torch stream of the tensor's device is
        synchronised first; for a ``__cuda_array_interface__`` object the
        stream it exports (v3 ``stream``: 1 legacy default, 2 per-thread
        default, a handle; ``None`` means no sync, ``0`` is refused) is
        synchronised first). Other writable
        C-contiguous buffers are accepted too.
    flags : int
        ``READ_*`` hints.
    immutable : bool
        True: trust the file as last checked (adds ``memtier.READ_IMMUTABLE``;
        no freshness system call for a file already open, so a file rewritten
        in place may be served stale). See :meth:`Context.read_into`.
    ctx : Context, optional
        Default: the process's default context.

    Returns
    -------
    The same ``tensor``, filled.

    Raises
    ------
    ValueError
        Before any I/O: the destination is not contiguous, is read-only
        (numpy ``writeable=False``), or is a torch tensor that requires grad
        (pass ``t.detach()``, which shares its storage).
    UnsupportedError
        A CUDA destination where the library's CUDA target is unusable (the
        message says why and includes :func:`memtier.gpu_info`'s text), or
        another device type.
    EndOfFileError
        The range runs past the end of the file.
    NotFoundError, PermissionDeniedError, MemTierError
        Other failures.

    Notes
    -----
    Thread-safe; the GIL is released while reading. Large reads are split
    into pieces of :data:`memtier.CHUNK_BYTES` so Ctrl-C is delivered.
    """
    c = _ctx(ctx)
    h = c._h
    if h is None or c._pid != _fork._pid_now:
        h = c._handle()
    p = _cpath(path)
    cd, n = _dest_fast(c._ffi, tensor)
    target = TARGET_CPU
    if cd is None:
        cd, n, target = _dest(c._ffi, tensor, readonly_exc=ValueError)
    if immutable:
        flags |= _READ_IMMUTABLE
    c._read(h, p, offset, cd, n, flags, target, path, "memtier.read_into_tensor")
    return tensor


def _shape(shape: ShapeLike) -> Tuple[int, ...]:
    if isinstance(shape, (str, bytes)):
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    dims: Tuple[int, ...]
    try:
        dims = (operator.index(shape),)  # type: ignore[arg-type]  # a sequence raises TypeError
    except TypeError:
        try:
            dims = tuple(operator.index(d) for d in shape)  # type: ignore[union-attr]
        except TypeError:
            raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    for d in dims:
        if d < 0:
            raise ValueError(f"negative dimension {d} in shape {dims}")
    return dims


def _nbytes(dims: Tuple[int, ...], itemsize: int) -> int:
    n = itemsize
    for d in dims:
        n *= d
    if n > _MAX_BYTES:
        raise ValueError(f"shape {dims} x {itemsize} bytes = {n} bytes overflows a 64-bit size")
    return n


def load_tensor(path: PathType, offset: int, shape: ShapeLike, dtype: Any,
                device: Any = "cpu", *, flags: int = 0, ctx: Optional[Context] = None) -> Any:
    """Read a tensor of ``shape`` and ``dtype`` stored raw at byte ``offset`` of ``path``.

    Parameters
    ----------
    path : str, bytes or os.PathLike
    offset : int
        Byte offset of the first element.
    shape : int or sequence of int
        Dimensions (C order); zero-size dimensions give an empty result.
        ``prod(shape) * itemsize`` bytes are read.
    dtype : torch.dtype, numpy dtype, or str
        float64, float32, float16, bfloat16, int8, int16, int32, int64, uint8,
        uint16/32/64, bool, complex64/128, and float8_e4m3fn, float8_e5m2 (and
        the other float8 types torch knows). Strings may be these names,
        "torch.float32"-style names, or safetensors names ("F32", "BF16",
        "F8_E4M3", "F8_E5M2", "I64", "U8", "BOOL", ...).
    device : str or torch.device
        "cpu" (default), or "cuda"/"cuda:N": a new ``torch.empty`` tensor on
        that device, filled by the library's CUDA target (GDS or the staged
        pinned pipeline). Needs torch.cuda and a library with a usable CUDA
        backend, checked before anything is allocated.
    flags : int
        ``READ_*`` hints.
    ctx : Context, optional
        Default: the process's default context.

    Returns
    -------
    torch.Tensor
        When torch is importable (and ``MEMTIER_PY_FORCE_NO_TORCH`` is not
        set): a new tensor of ``shape`` and the torch dtype.
    numpy.ndarray
        Otherwise: a new array of ``shape``. numpy has no bfloat16/float8, so
        those come back as **ml_dtypes arrays** (``ml_dtypes.bfloat16``,
        ``ml_dtypes.float8_e4m3fn``, ...) when ml_dtypes is installed, and
        otherwise as the **raw bits in unsigned integers of the same size**
        (``uint16`` for bfloat16, ``uint8`` for float8), not converted.

    Raises
    ------
    TypeError
        Unknown dtype, or a shape that is not ints.
    ValueError
        Negative dimension, or ``prod(shape) * itemsize`` overflows.
    EndOfFileError
        The range runs past end of file; nothing is returned (no half-filled tensor).
    UnsupportedError
        A CUDA device where CUDA cannot be used: the message names the
        missing piece (torch.cuda, or the library's CUDA backend and why) and
        includes :func:`memtier.gpu_info`'s text.
    NotFoundError, PermissionDeniedError, MemTierError
        Other failures.
    """
    c = _ctx(ctx)
    c._handle()  # fork and closed checks first: fail fast, before importing torch
    dt = _dtypes.resolve_dtype(dtype)
    dims = _shape(shape)
    n = _nbytes(dims, dt.itemsize)
    target, index = _parse_device(device)
    if n > CHUNK_BYTES:
        # As memtier.read: ask the library whether the range can be read (end
        # of file, a missing file) before allocating a large destination.
        c._precheck(c._handle(), _cpath(path), offset, n, flags, path, "memtier.load_tensor")
    try:
        if target == TARGET_CUDA:
            torch = _require_cuda(c, f"memtier.load_tensor: device {str(device)!r}")
            t = torch.empty(dims, dtype=_dtypes.torch_dtype(dt, torch), device=f"cuda:{index}")
            return read_into_tensor(path, offset, t, flags=flags, ctx=c)
        torch = _dtypes.torch_module()
        if torch is not None:
            t = torch.empty(dims, dtype=_dtypes.torch_dtype(dt, torch))
            return read_into_tensor(path, offset, t, flags=flags, ctx=c)
        import numpy as np

        arr = np.empty(dims, dtype=_dtypes.numpy_dtype(dt))
        return read_into_tensor(path, offset, arr, flags=flags, ctx=c)
    except MemoryError:
        raise _no_memory(path, offset, n) from None
    except RuntimeError as e:  # torch's allocators: "can't allocate memory", "out of memory"
        if "allocate" not in str(e) and "out of memory" not in str(e):
            raise
        raise _no_memory(path, offset, n) from None


def _no_memory(path: PathType, offset: int, n: int) -> MemoryError:
    return MemoryError(
        f"memtier.load_tensor: {_fname(path)}: no memory for a {n}-byte tensor (range "
        f"[{offset}, {offset + n})); load smaller pieces, or read_into_tensor a tensor you own")
