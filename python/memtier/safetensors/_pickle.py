"""Pickling of :class:`memtier.safetensors.safe_open`: by path, framework and device.

A pickled ``safe_open`` re-opens the same file in the receiving process, on
first use there (never while unpickling: a DataLoader worker unpickles its
dataset before torch installs its signal handlers, and the library must load
after them). The re-opened file must be the one pickled (device, inode, size
and modification time, as a slice read checks), else its first use raises
"changed since it was pickled". A handle that was closed re-opens closed
(slices of it still read by path, as in the parent). Local paths are made
absolute when pickled, so a receiver with another working directory opens
the same file. :class:`SafeSlice` pickles through its ``safe_open``.

A handle opened with an explicit ``ctx=`` refuses (a :class:`memtier.Context`
belongs to one process); one opened on the default context re-opens on the
receiver's default context.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Tuple

from .. import _context, _errors, _ffi, _pickling
from .._errors import make_error
from .._paths import _fname, _is_url

_lock = threading.RLock()  # one re-open of a handle at a time


def new(cls: type) -> Any:
    """An empty, unopened instance of ``cls`` (the pickle reconstructor)."""
    return object.__new__(cls)


def reduce(f: Any) -> Tuple[Any, ...]:
    """``safe_open.__reduce__``: (reconstructor, args, state) with the state
    {path, framework, device, ident, closed}, or the TypeError of
    :func:`memtier._pickling.refuse` for a handle on an explicit context."""
    d = f.__dict__
    if "_pickled" in d:  # unpickled here and not used yet: pass the state on
        return (new, (type(f),), dict(d["_pickled"]))
    h = d["_h"]
    if h.ctx is not _context._default:
        return _pickling.refuse(
            "memtier.safetensors.safe_open cannot be pickled when opened with ctx= (a "
            "memtier.Context belongs to one process): open it without ctx=, or pickle the "
            "path and open it in each process")
    path = h.path
    if not _is_url(path):
        path = os.path.abspath(os.fspath(path))
    state: Dict[str, Any] = {"path": path, "framework": f._fw, "device": f._device,
                             "ident": h.ident, "closed": h.h is None}
    return (new, (type(f),), state)


def setstate(f: Any, state: Dict[str, Any]) -> None:
    """``safe_open.__setstate__``: remember the state; open on first use."""
    f.__dict__["_pickled"] = state


def reopen(f: Any, name: str) -> Any:
    """``safe_open.__getattr__``: the first use of an unpickled handle opens
    its file (see the module docstring), then returns attribute ``name``."""
    d = f.__dict__
    if name.startswith("__") or "_pickled" not in d:
        raise AttributeError(f"'{type(f).__name__}' object has no attribute '{name}'")
    with _lock:
        st = d.get("_pickled")
        if st is not None:
            type(f).__init__(f, st["path"], st["framework"], st["device"] or "cpu")
            h = d["_h"]
            if st["ident"] is not None and h.ident != st["ident"]:
                h.close()
                del d["_h"]  # the next use tries again
                where = "memtier.safetensors.safe_open"
                raise make_error(_errors.ERR_IO, where,
                                 f"{_fname(st['path'])}: the file changed since it was pickled "
                                 "(size, inode or modification time differ); open it again",
                                 strerror=_ffi.strerror(_errors.ERR_IO),
                                 filename=_fname(st["path"]))
            if st["closed"]:
                h.close()
            del d["_pickled"]
    return object.__getattribute__(f, name)
