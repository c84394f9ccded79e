"""``memtier.safetensors.numpy``: the reading functions of ``safetensors.numpy``, through MemTier.

Same names, arguments and defaults as safetensors 0.8's ``safetensors.numpy``.
Results are numpy arrays (BF16/F8 as ml_dtypes arrays when installed, else raw
unsigned integers; see :mod:`memtier.safetensors`). torch is never imported.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Union

from . import _bytes
from . import load_file as _load_file

__all__ = ["load_file", "load"]


def load_file(filename: Union[str, "os.PathLike[str]"], *, backend: str = "mmap") -> Dict[str, Any]:
    """``safetensors.numpy.load_file``: every tensor of ``filename`` as numpy
    arrays, each with its own memory (errors as
    :func:`memtier.safetensors.load_file`; ``backend`` is checked, no effect).
    Thread-safe."""
    return _load_file(filename, backend=backend, framework="np")


def load(data: bytes) -> Dict[str, Any]:
    """``safetensors.numpy.load``: arrays of a safetensors file held in
    ``data`` (bytes-like), each owning a copy of its bytes. Thread-safe."""
    return _bytes.load(data, framework="np")
