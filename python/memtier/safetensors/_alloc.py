"""Result tensors of :mod:`memtier.safetensors`: one allocation per tensor, and dtype mapping.

:func:`alloc_each` gives every tensor of a load its own memory, so keeping one
small tensor of a ``load_file`` result frees the rest (field report: a 2 KB
tensor kept a 217 MB shared buffer alive). The reads still go out as one
batched library call: the caller passes the per-tensor addresses to
``memtier_safetensors_load_all``.

Large tensors get an anonymous mapping each instead of ``torch.empty`` /
``numpy.empty``, for two measured reasons: glibc's dynamic mmap threshold
sends allocations below 32 MiB to the heap after a large free, where one kept
tensor pins the heap top and nothing is returned to the system; and numpy asks
for transparent huge pages on large arrays, whose first touch may stall in
memory compaction (0.95-1.67 s against 0.62-0.83 s for a 0.8 GB checkpoint in
fresh processes; again with each tensor's own mapping 2 MiB-aligned and
advised MADV_HUGEPAGE: 1.13 s against 0.72 s, medians of 7 interleaved
``from_pretrained`` runs of a 0.4 GB checkpoint). The mapping of a tensor is placed so that its address equals
the tensor's file offset modulo 4096 (when that keeps the element alignment),
so a cold read can go O_DIRECT straight into it; it is unmapped when the
tensor dies. ``untyped_storage().nbytes()`` is the tensor's own byte count.
"""

from __future__ import annotations

import mmap
from typing import Any, List, NamedTuple, Optional, Tuple

from .. import _dtypes

#: Tensors of at least this many bytes get their own anonymous mapping.
MMAP_MIN = 1 << 20
#: O_DIRECT's alignment unit (the page).
PAGE = 4096

#: safetensors dtype names the package maps beyond :mod:`memtier._dtypes`' table.
EXTRA_DTYPES = {"F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}
#: Packed sub-byte dtypes: bits per element.
SUBBYTE = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


class TensorInfo(NamedTuple):
    """One tensor of a safetensors file, as the library parsed it.

    Attributes
    ----------
    name : str
        The tensor's name.
    dtype : str
        The safetensors dtype name, e.g. ``"BF16"``.
    shape : tuple of int
        Dimensions as in the file's header, outermost first (``()`` for a
        scalar). For F4 this counts 4-bit elements; the torch tensor
        (``float4_e2m1fn_x2``, two per byte) has the last dimension halved.
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


def dtype_of(spec: str) -> _dtypes.DType:
    """The :class:`memtier._dtypes.DType` of a safetensors dtype name (F4: its
    packed ``float4_e2m1fn_x2`` byte). TypeError for F6 kinds and unknown names."""
    if spec == "F4":
        return _dtypes.DType("float4_e2m1fn_x2", 1, None, "uint8", None, "F4")
    name = EXTRA_DTYPES.get(spec)
    try:
        return _dtypes.DTYPES[name] if name else _dtypes.resolve_dtype(spec)
    except TypeError:
        raise TypeError(f"memtier.safetensors: dtype {spec!r} has no Python mapping") from None


def storage_shape(info: TensorInfo) -> Tuple[int, ...]:
    """The shape of the tensor handed out: the header's, except F4, whose
    last dimension is halved (two values per ``float4_e2m1fn_x2`` byte), as the
    reference does. ValueError when that dimension is odd (the reference's
    message)."""
    if info.dtype != "F4" or not info.shape:
        return info.shape
    last = info.shape[-1]
    if last % 2:
        from ._errors import invalid

        raise invalid(f"f4_x2 dtype requires that the last dim be divisible by 2 in torch: "
                      f"got {list(info.shape)}")
    return info.shape[:-1] + (last // 2,)


def _np_dtype(dt: _dtypes.DType) -> Any:
    import numpy as np

    if dt.name == "float4_e2m1fn_x2":
        return np.dtype(np.uint8)  # numpy has no packed fp4: the raw bytes
    return _dtypes.numpy_dtype(dt)


def _torch_dtype(dt: _dtypes.DType, torch: Any) -> Any:
    return _dtypes.torch_dtype(dt, torch)


def alloc(info: TensorInfo, torch: Any, device: Optional[str] = None) -> Tuple[Any, int]:
    """A new tensor/array for ``info`` with its own memory (on ``device``, a
    torch CUDA device string, or the CPU) and its data address (0 if empty)."""
    dt = dtype_of(info.dtype)
    shape = storage_shape(info)
    if not device and info.nbytes >= MMAP_MIN:
        return _mapped(info, dt, shape, torch)
    if torch is not None:
        t = torch.empty(shape, dtype=_torch_dtype(dt, torch), device=device or "cpu")
        return t, (t.data_ptr() if info.nbytes else 0)
    import numpy as np

    a = np.empty(shape, dtype=_np_dtype(dt))
    return a, (a.__array_interface__["data"][0] if info.nbytes else 0)


def _mapped(info: TensorInfo, dt: _dtypes.DType, shape: Tuple[int, ...], torch: Any) -> Tuple[Any, int]:
    import numpy as np

    shift = info.offset % PAGE
    if shift % dt.itemsize:
        shift = 0  # a misaligned file offset: element alignment wins over O_DIRECT
    mem = mmap.mmap(-1, info.nbytes + shift, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(mem, dtype=np.uint8, count=info.nbytes, offset=shift)
    addr = raw.__array_interface__["data"][0]
    if torch is not None:
        t = torch.frombuffer(memoryview(raw), dtype=torch.uint8)
        return t.view(_torch_dtype(dt, torch)).reshape(shape), addr
    return raw.view(_np_dtype(dt)).reshape(shape), addr


def alloc_each(infos: List[TensorInfo], torch: Any, device: Optional[str] = None) -> List[Tuple[Any, int]]:
    """:func:`alloc` for every entry (file order): tensors and their addresses."""
    return [alloc(i, torch, device) for i in infos]
