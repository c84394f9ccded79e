"""Pickling of the objects that hold a C handle of one process.

Each handle either pickles to something that re-opens itself in the receiving
process (``memtier.safetensors.safe_open`` and its slices by path, framework
and device; the datasets by their configuration), or refuses with a
TypeError that names the object and what to pickle instead (:func:`refuse`:
``Context``, ``Request``, ``ChunkStream``).

A refusal inside a torch DataLoader worker is different: torch pickles a
worker's results in a queue feeder thread, which prints a pickling error and
drops the result, so the parent waits for it forever (or until the
DataLoader's ``timeout``): pytorch/pytorch#142884. There the object pickles to
a marker that raises the same TypeError when the parent unpickles it, and the
parent's ``next()`` raises it at once.

Nothing here loads libmemtier.so.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn, Tuple

__all__ = ["refuse", "unpicklable"]


def _in_dataloader_worker() -> bool:
    """True in a torch DataLoader worker process (torch already imported:
    this never imports it)."""
    w = sys.modules.get("torch.utils.data._utils.worker")
    return w is not None and getattr(w, "_worker_info", None) is not None


def unpicklable(message: str) -> NoReturn:
    """Raise ``TypeError(message)``: the reconstructor of a refused object
    pickled inside a DataLoader worker (see the module docstring)."""
    raise TypeError(message)


def refuse(message: str) -> Tuple[Any, Tuple[str]]:
    """The ``__reduce__`` of an object that cannot leave its process.

    Raises ``TypeError(message)`` at pickling time; in a torch DataLoader
    worker returns a reduction whose unpickling raises it instead (module
    docstring). ``message`` names the object and what to pickle instead.
    """
    if _in_dataloader_worker():
        return (unpicklable, (message,))
    raise TypeError(message)
