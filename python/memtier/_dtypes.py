"""Element types understood by :func:`memtier.load_tensor`.

A dtype can be given as a torch dtype, a numpy dtype (or type), an ml_dtypes
type, or a string: the canonical names below (``"float32"``, ``"bfloat16"``,
``"float8_e4m3fn"``...), common aliases (``"float"``, ``"half"``, ``"long"``,
``"torch.float32"``) and the safetensors names (``"F32"``, ``"BF16"``,
``"F8_E4M3"``...).

Without torch the result is a numpy array. numpy has no bfloat16 or float8
types, so for those:

* with ``ml_dtypes`` installed, the array has the ml_dtypes type
  (``ml_dtypes.bfloat16``, ``ml_dtypes.float8_e4m3fn``...), whose values convert
  exactly with ``.astype(numpy.float32)``;
* otherwise the array holds the raw bits as unsigned integers of the same size
  (``uint16`` for bfloat16, ``uint8`` for float8), unconverted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

__all__ = ["DType", "resolve_dtype", "DTYPES"]

ENV_FORCE_NO_TORCH = "MEMTIER_PY_FORCE_NO_TORCH"


@dataclass(frozen=True)
class DType:
    """One element type.

    Attributes
    ----------
    name : str
        Canonical name (torch's attribute name), e.g. ``"bfloat16"``.
    itemsize : int
        Bytes per element.
    numpy : str or None
        numpy dtype name when numpy has the type natively, else None.
    raw : str
        numpy dtype holding the raw bits (the native type, or ``uintN``).
    ml_dtypes : str or None
        ml_dtypes attribute name for types numpy lacks.
    safetensors : str or None
        safetensors dtype name.
    """

    name: str
    itemsize: int
    numpy: Optional[str]
    raw: str
    ml_dtypes: Optional[str] = None
    safetensors: Optional[str] = None


_TABLE = [
    DType("float64", 8, "float64", "float64", None, "F64"),
    DType("float32", 4, "float32", "float32", None, "F32"),
    DType("float16", 2, "float16", "float16", None, "F16"),
    DType("bfloat16", 2, None, "uint16", "bfloat16", "BF16"),
    DType("int8", 1, "int8", "int8", None, "I8"),
    DType("int16", 2, "int16", "int16", None, "I16"),
    DType("int32", 4, "int32", "int32", None, "I32"),
    DType("int64", 8, "int64", "int64", None, "I64"),
    DType("uint8", 1, "uint8", "uint8", None, "U8"),
    DType("uint16", 2, "uint16", "uint16", None, "U16"),
    DType("uint32", 4, "uint32", "uint32", None, "U32"),
    DType("uint64", 8, "uint64", "uint64", None, "U64"),
    DType("bool", 1, "bool", "bool", None, "BOOL"),
    DType("complex64", 8, "complex64", "complex64", None, "C64"),
    DType("complex128", 16, "complex128", "complex128", None, "C128"),
    DType("float8_e4m3fn", 1, None, "uint8", "float8_e4m3fn", "F8_E4M3"),
    DType("float8_e5m2", 1, None, "uint8", "float8_e5m2", "F8_E5M2"),
    DType("float8_e4m3fnuz", 1, None, "uint8", "float8_e4m3fnuz", None),
    DType("float8_e5m2fnuz", 1, None, "uint8", "float8_e5m2fnuz", None),
    DType("float8_e8m0fnu", 1, None, "uint8", "float8_e8m0fnu", "F8_E8M0"),
]

#: canonical name -> DType
DTYPES: Dict[str, DType] = {d.name: d for d in _TABLE}

_ALIASES: Dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bf16": "bfloat16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "bool_": "bool",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "float8_e4m3": "float8_e4m3fn",
}
#: safetensors names (case-sensitive: "U8" is uint8 there, "u8" is uint64 in numpy)
_SAFETENSORS: Dict[str, str] = {d.safetensors: d.name for d in _TABLE if d.safetensors}


def torch_disabled() -> bool:
    """True when ``MEMTIER_PY_FORCE_NO_TORCH`` asks to behave as if torch were absent."""
    v = os.environ.get(ENV_FORCE_NO_TORCH, "")
    return v not in ("", "0", "false", "False", "no")


# os.environ's own dict (CPython, POSIX: bytes keys and values) and the key of
# ENV_FORCE_NO_TORCH in it: hot paths look the variable up there (one dict
# get; os.environ.get encodes the key on every call) and call
# torch_disabled() only while it is set.
_ENV_DATA: Any = getattr(os.environ, "_data", None) if os.name == "posix" else None
_ENV_KEY: Any = ENV_FORCE_NO_TORCH.encode() if os.name == "posix" else None


def torch_module() -> Any:
    """The torch module, or None when it is not importable or is disabled.

    Importing torch is deferred to the first call that needs it.
    """
    if torch_disabled():
        return None
    import sys

    mod = sys.modules.get("torch")
    if mod is not None:
        return mod
    try:
        import torch  # noqa: F401
    except Exception:  # ImportError, or a broken install
        return None
    return sys.modules.get("torch")


def ml_dtypes_module() -> Any:
    """The ml_dtypes module, or None."""
    try:
        import ml_dtypes
    except Exception:
        return None
    return ml_dtypes


def _from_string(s: str) -> DType:
    key = s.strip()
    if key in _SAFETENSORS:
        return DTYPES[_SAFETENSORS[key]]
    for prefix in ("torch.", "numpy.", "np."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    low = key.lower()
    if low in DTYPES:
        return DTYPES[low]
    if low in _ALIASES:
        return DTYPES[_ALIASES[low]]
    # numpy spellings such as "f4" or "<i8"
    import numpy as np

    try:
        nd = np.dtype(key)
    except TypeError:
        nd = None
    if nd is not None and nd.byteorder != ">":
        if nd.name in DTYPES:
            return DTYPES[nd.name]
    raise TypeError(
        f"unknown dtype {s!r}; expected one of {sorted(DTYPES)}, an alias "
        f"({sorted(_ALIASES)}) or a safetensors name ({sorted(_SAFETENSORS)})"
    )


def resolve_dtype(dtype: Any) -> DType:
    """Map a torch dtype, numpy dtype/type, ml_dtypes type or string to a :class:`DType`.

    Raises
    ------
    TypeError
        The dtype is unknown or not supported (e.g. a big-endian numpy dtype).
    """
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return _from_string(dtype)
    mod = type(dtype).__module__ or ""
    if mod == "torch" or mod.startswith("torch."):
        # torch.dtype prints as "torch.float32"; no torch import needed
        return _from_string(str(dtype))
    import numpy as np

    try:
        nd = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r} ({type(dtype).__name__})") from None
    if nd.byteorder == ">" or (nd.byteorder == "=" and np.little_endian is False):
        raise TypeError(f"big-endian dtype {nd!r} is not supported (files are little-endian)")
    name = nd.name
    if name in DTYPES:
        return DTYPES[name]
    if name in _ALIASES:
        return DTYPES[_ALIASES[name]]
    raise TypeError(f"unsupported dtype {nd!r}; supported: {sorted(DTYPES)}")


def numpy_dtype(dt: DType) -> Any:
    """The numpy dtype used for ``dt`` without torch (see the module docstring)."""
    import numpy as np

    if dt.numpy is not None:
        return np.dtype(dt.numpy)
    ml = ml_dtypes_module()
    if ml is not None and dt.ml_dtypes and hasattr(ml, dt.ml_dtypes):
        return np.dtype(getattr(ml, dt.ml_dtypes))
    return np.dtype(dt.raw)


def torch_dtype(dt: DType, torch: Any) -> Any:
    """The torch dtype of ``dt``.

    Raises
    ------
    TypeError
        This torch build has no such dtype (e.g. an old torch without float8).
    """
    t = getattr(torch, dt.name, None)
    if t is None or type(t).__name__ != "dtype":
        raise TypeError(f"torch {getattr(torch, '__version__', '?')} has no dtype {dt.name!r}")
    return t
