"""``memtier.safetensors.torch``: the reading functions of ``safetensors.torch``, through MemTier.

Same names, arguments and defaults as safetensors 0.8's ``safetensors.torch``
(the writing side, ``save``/``save_file``/``save_model``, is not MemTier's job:
use the reference). Results are torch tensors; see :mod:`memtier.safetensors`
for the differences kept on purpose. Importing this module imports torch.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Set, Tuple, Union

from . import _bytes, _into
from . import load_file as _load_file

__all__ = ["load_file", "load", "load_model"]


def load_file(filename: Union[str, "os.PathLike[str]"], device: Union[str, int] = "cpu", *,
              backend: str = "mmap") -> Dict[str, Any]:
    """``safetensors.torch.load_file``: every tensor of ``filename`` as torch
    tensors on ``device`` (see :func:`memtier.safetensors.load_file` for
    devices, errors and memory; ``backend`` is checked, no effect). Thread-safe."""
    return _load_file(filename, device, backend=backend, framework="pt")


def load(data: bytes) -> Dict[str, Any]:
    """``safetensors.torch.load``: tensors of a safetensors file held in
    ``data`` (bytes-like), CPU torch tensors owning copies of their bytes;
    errors as :func:`memtier.safetensors.load`. Thread-safe."""
    return _bytes.load(data, framework="pt")


def load_model(model: Any, filename: Union[str, "os.PathLike[str]"], strict: bool = True,
               device: Union[str, int] = "cpu", *, backend: str = "mmap") -> Tuple[Set[str], List[str]]:
    """``safetensors.torch.load_model``: the checkpoint read straight into
    ``model``'s tensors; returns ``(missing, unexpected)`` with the
    reference's shared-tensor rules (see :func:`memtier.safetensors.load_model`)."""
    return _into.load_model(model, filename, strict, device, backend=backend)
