"""Where the combined error classes of :mod:`._errors` live for pickle.

:func:`memtier.safetensors._errors.as_reference` re-classes an error into a
class made at run time (the MemTier class plus ``SafetensorError``, and
``safetensors.SafetensorError`` when installed). pickle stores a class by
module and name, so those classes say they live here, and this module's
``__getattr__`` makes (or finds) the class of that name on lookup, in any
process. An exception of such a class then pickles, and so does torch's
``ExceptionWrapper`` of one (a DataLoader worker's error, which pickles its
class: pytorch/pytorch#142884 and safetensors/safetensors#492 are the hangs
an unpicklable error class causes).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """The combined class for the MemTier error class ``name`` (e.g.
    ``"FormatError"``), as :func:`._errors.as_reference` makes it here."""
    from .. import _errors as core
    from . import _errors as st

    cls = getattr(core, name, None) or getattr(st, name, None)
    if not (isinstance(cls, type) and issubclass(cls, core.MemTierError)) or name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return st._combined(cls, st._reference())
