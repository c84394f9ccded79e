"""safetensors content already in memory: :func:`load` and :func:`deserialize`.

The counterparts of ``safetensors.torch.load`` / ``safetensors.numpy.load``
(bytes -> dict of tensors) and ``safetensors.deserialize`` (bytes -> list of
``(name, {"dtype", "shape", "data"})``). There is no file for the library to
read, so the header is parsed by :mod:`._header` (the reference's rules) and
each payload is copied once, by memmove, into memory its tensor owns (never
a view of ``data``: the caller may reuse the buffer).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Optional, Tuple

from ._alloc import TensorInfo, alloc
from ._errors import bridge
from ._handle import framework_of, refuse_subbyte
from ._header import parse_buffer

__all__ = ["load", "deserialize"]


def _address(data: Any) -> Tuple[int, Any]:
    """(address of the first byte, object keeping it alive) of a bytes-like."""
    import numpy as np

    arr = np.frombuffer(data, dtype=np.uint8)
    return (arr.__array_interface__["data"][0] if arr.size else 0), arr


@bridge
def load(data: Any, *, framework: Optional[str] = None) -> Dict[str, Any]:
    """Tensors of a whole safetensors file held in memory (``safetensors.torch.load``).

    Parameters
    ----------
    data : bytes, bytearray, memoryview or any C-contiguous buffer
        The complete file content.
    framework : {"pt", "torch", "np", "numpy"}, optional, keyword-only
        Result type; default torch when importable, else numpy
        (:func:`memtier.safetensors.numpy.load` passes "np").

    Returns
    -------
    dict
        name -> CPU tensor/array in data order, each owning a copy of its
        bytes (dtypes as :func:`memtier.safetensors.load_file`; F4 works here
        too, where the reference's ``load`` raises KeyError).

    Raises
    ------
    FormatError
        ``data`` is not valid safetensors (also ``SafetensorError``).
    UnsupportedError
        An F6 tensor ("Dtype not understood").
    ImportError
        ``framework="pt"`` without torch.

    Thread-safe; the library is not loaded (nothing is read from a file).
    """
    where = "memtier.safetensors.load"
    _, torch = framework_of(framework, where)
    parsed = parse_buffer(data, where)
    base, keep = _address(data)
    out: Dict[str, Any] = {}
    for e in parsed.entries:
        info = TensorInfo(e.name, e.dtype, e.shape, parsed.data_start + e.begin, e.end - e.begin)
        refuse_subbyte(info, where)
        t, addr = alloc(info, torch)
        if info.nbytes:
            ctypes.memmove(addr, base + info.offset, info.nbytes)
        out[e.name] = t
    del keep
    return out


@bridge
def deserialize(data: Any) -> List[Tuple[str, Dict[str, Any]]]:
    """The reference's ``safetensors.deserialize``: ``[(name, {"dtype": str,
    "shape": list of int, "data": bytearray}), ...]`` in data order (the
    reference's order is unspecified). Raises FormatError as :func:`load`.
    Thread-safe."""
    mv = memoryview(data).cast("B")
    parsed = parse_buffer(mv, "memtier.safetensors.deserialize")
    s = parsed.data_start
    return [(e.name, {"dtype": e.dtype, "shape": list(e.shape),
                      "data": bytearray(mv[s + e.begin:s + e.end])}) for e in parsed.entries]
