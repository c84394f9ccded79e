"""Exceptions of the memtier package and the one helper that raises them.

Every C function of libmemtier.so returns a ``memtier_status`` (0 = success,
negative = error). :func:`_check` turns a negative status into an exception of
the class in :data:`STATUS_CLASSES`, with the message ``prefix: strerror:
detail``, where ``detail`` is ``memtier_last_error()`` read at once on the
calling thread (the C library keeps one message per thread).

Each class also derives from the matching built-in exception, so idiomatic
``except`` clauses work: a missing file is a :class:`FileNotFoundError`, a range
past end of file an :class:`EOFError`, a bad argument a :class:`ValueError`.
"""

from __future__ import annotations

import errno as _errno
import os as _os
from typing import Callable, Dict, Optional, Type

# memtier_status values, names and memtier_strerror texts: generated from
# include/memtier.h into _constants.py (tools/mtgen).
from ._constants import (  # noqa: F401  (re-exported: other modules use _errors.ERR_*)
    ERR_BUSY as ERR_BUSY,
    ERR_CLOSED as ERR_CLOSED,
    ERR_DIRECT_IO as ERR_DIRECT_IO,
    ERR_EOF as ERR_EOF,
    ERR_FORKED as ERR_FORKED,
    ERR_FORMAT as ERR_FORMAT,
    ERR_INTERNAL as ERR_INTERNAL,
    ERR_INVALID_ARG as ERR_INVALID_ARG,
    ERR_IO as ERR_IO,
    ERR_IS_DIR as ERR_IS_DIR,
    ERR_NOMEM as ERR_NOMEM,
    ERR_NOT_FOUND as ERR_NOT_FOUND,
    ERR_NOT_REGULAR as ERR_NOT_REGULAR,
    ERR_PERMISSION as ERR_PERMISSION,
    ERR_TIMEOUT as ERR_TIMEOUT,
    ERR_UNSUPPORTED as ERR_UNSUPPORTED,
    OK as OK,
    STATUS_NAMES as STATUS_NAMES,
    STATUS_TEXTS as STATUS_TEXTS,
)

__all__ = [
    "MemTierError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "EndOfFileError",
    "UnsupportedError",
    "ClosedError",
    "BusyError",
    "MemTierTimeoutError",
    "FormatError",
    "IsDirectoryError",
    "InternalError",
    "ForkError",
    "DirectIOError",
    "NotRegularFileError",
    "LibraryLoadError",
    "STATUS_NAMES",
]

# memtier_strerror() texts used when the library is not loaded (a load
# failure, or a Python-side check); otherwise the C text is used. Other
# statuses then show their short name in lower case.
_FALLBACK_TEXT = {s: STATUS_TEXTS[s] for s in (ERR_CLOSED, ERR_FORKED, ERR_UNSUPPORTED)}

FORK_HINT = (
    "the Go runtime inside libmemtier.so does not survive fork(); use MemTier only in "
    "processes that did not inherit it: pass multiprocessing_context=\"spawn\" or "
    "\"forkserver\" (torch DataLoader, multiprocessing.get_context), or do not touch "
    "memtier in the parent before forking"
)


class MemTierError(Exception):
    """Base class of every error raised by memtier.

    Attributes
    ----------
    code : int
        The ``memtier_status`` value (negative), e.g. ``-2``.
    name : str
        Its short name, e.g. ``"NOT_FOUND"``.
    detail : str
        ``memtier_last_error()`` of the failed call (path, offset, errno text),
        read on the calling thread right after the call; may be empty.
    index : int or None
        For :meth:`memtier.Context.readv`: the index of the failed range.
    """

    code: int = ERR_IO
    name: str = "IO"
    detail: str = ""
    index: Optional[int] = None

    def __str__(self) -> str:
        # OSError appends ": 'filename'"; the message already names the file
        # when the library's text does, so say it once.
        if isinstance(self, OSError) and self.errno is not None and self.filename is not None:
            msg = str(self.strerror)
            try:
                named = _os.fsdecode(self.filename) in msg
            except TypeError:
                named = False
            if named:
                return f"[Errno {self.errno}] {msg}"
        return super().__str__()

    def __init_subclass__(cls, **kwargs: object) -> None:
        # The short name follows from the code: one table (STATUS_NAMES) holds them.
        super().__init_subclass__(**kwargs)
        cls.name = STATUS_NAMES.get(cls.code, cls.name)


class InvalidArgumentError(MemTierError, ValueError):
    """``MEMTIER_ERR_INVALID_ARG``: a bad argument (NULL, unknown flag, overflow)."""

    code = ERR_INVALID_ARG


class NotFoundError(MemTierError, FileNotFoundError):
    """``MEMTIER_ERR_NOT_FOUND``: the file does not exist (``errno`` ENOENT, ``filename`` set)."""

    code = ERR_NOT_FOUND


class PermissionDeniedError(MemTierError, PermissionError):
    """``MEMTIER_ERR_PERMISSION``: open refused (EACCES/EPERM; ``filename`` set)."""

    code = ERR_PERMISSION


class EndOfFileError(MemTierError, EOFError):
    """``MEMTIER_ERR_EOF``: the range runs past end of file (never a silent short read)."""

    code = ERR_EOF


class UnsupportedError(MemTierError, NotImplementedError):
    """``MEMTIER_ERR_UNSUPPORTED``: a target or feature missing in this build
    (GPU target / CUDA tensors, prefetch to HBM, prefetch with the cache off)."""

    code = ERR_UNSUPPORTED


class ClosedError(MemTierError, ValueError):
    """``MEMTIER_ERR_CLOSED``: the context or request was closed (like I/O on a closed file)."""

    code = ERR_CLOSED


class BusyError(MemTierError):
    """``MEMTIER_ERR_BUSY``: the request is still running."""

    code = ERR_BUSY


class MemTierTimeoutError(MemTierError, TimeoutError):
    """``MEMTIER_ERR_TIMEOUT``: a wait timed out; the request is still running."""

    code = ERR_TIMEOUT


class FormatError(MemTierError, ValueError):
    """``MEMTIER_ERR_FORMAT``: a malformed file format or configuration value
    (e.g. a ``MEMTIER_*`` environment variable that does not parse; ``detail``
    names it)."""

    code = ERR_FORMAT


class IsDirectoryError(MemTierError, IsADirectoryError):
    """``MEMTIER_ERR_IS_DIR``: the path is a directory (``filename`` set)."""

    code = ERR_IS_DIR


class InternalError(MemTierError):
    """``MEMTIER_ERR_INTERNAL``: a bug in MemTier (a recovered panic); please report it."""

    code = ERR_INTERNAL


class ForkError(MemTierError, RuntimeError):
    """MemTier was used in a child process forked after the parent loaded it.

    Raised by the Python layer at once (it compares ``os.getpid()`` with the
    pid that loaded the library) and mapped from ``MEMTIER_ERR_FORKED``. The fix:
    ``multiprocessing_context="spawn"`` or ``"forkserver"``, or no MemTier use in
    the parent before forking.
    """

    code = ERR_FORKED


class DirectIOError(MemTierError):
    """``MEMTIER_ERR_DIRECT_IO``: O_DIRECT required (direct_mode="required") but
    refused by the file system."""

    code = ERR_DIRECT_IO


class NotRegularFileError(MemTierError, OSError):
    """``MEMTIER_ERR_NOT_REGULAR``: the path is a device, FIFO or socket, or a
    procfs/sysfs file whose size is not real; read those with ``open().read()``."""

    code = ERR_NOT_REGULAR


class LibraryLoadError(ImportError, RuntimeError):
    """libmemtier.so could not be loaded (or has an incompatible major version).

    The message lists every path tried with its ``dlerror`` text and a hint.
    Raised at the first use of MemTier, not at ``import memtier``.
    """


#: status -> exception class; statuses not listed map to MemTierError.
STATUS_CLASSES: Dict[int, Type[MemTierError]] = {
    ERR_INVALID_ARG: InvalidArgumentError,
    ERR_NOT_FOUND: NotFoundError,
    ERR_PERMISSION: PermissionDeniedError,
    ERR_EOF: EndOfFileError,
    ERR_UNSUPPORTED: UnsupportedError,
    ERR_CLOSED: ClosedError,
    ERR_BUSY: BusyError,
    ERR_TIMEOUT: MemTierTimeoutError,
    ERR_FORMAT: FormatError,
    ERR_IS_DIR: IsDirectoryError,
    ERR_INTERNAL: InternalError,
    ERR_FORKED: ForkError,
    ERR_DIRECT_IO: DirectIOError,
    ERR_NOT_REGULAR: NotRegularFileError,
}

_ERRNO = {
    ERR_NOT_FOUND: _errno.ENOENT,
    ERR_PERMISSION: _errno.EACCES,
    ERR_IS_DIR: _errno.EISDIR,
    ERR_TIMEOUT: _errno.ETIMEDOUT,
}


def make_error(
    status: int,
    prefix: str = "",
    detail: str = "",
    *,
    strerror: Optional[str] = None,
    filename: Optional[str] = None,
    index: Optional[int] = None,
    hint: str = "",
) -> MemTierError:
    """Build (do not raise) the exception for a negative ``status``."""
    cls = STATUS_CLASSES.get(status, MemTierError)
    name = STATUS_NAMES.get(status, f"STATUS_{status}")
    text = strerror if strerror is not None else _FALLBACK_TEXT.get(status, name.lower())
    # One message style: the caller's API name, then the specific text; the
    # status's generic text ("malformed input (...)") only when there is none.
    parts = [p for p in (prefix, detail or text, hint) if p]
    message = ": ".join(parts)
    exc: MemTierError
    if issubclass(cls, OSError):
        code = _ERRNO.get(status)
        if filename is not None and code is not None:
            exc = cls(code, message, filename)
        elif code is not None:
            exc = cls(code, message)
        else:
            exc = cls(message)
    else:
        exc = cls(message)
    exc.code = status
    exc.name = name
    exc.detail = detail
    exc.index = index
    return exc


def relabel(e: MemTierError, old: str, new: str) -> None:
    """Replace the leading ``old`` of ``e``'s message with ``new`` (in place):
    an error of an internal call then names the caller's API (e.g.
    "MemTierDataset sample 3: " for "memtier.read_into: "). No-op when the
    message does not start with ``old``."""
    i = 1 if isinstance(e, OSError) and len(e.args) > 1 else 0
    if len(e.args) > i and isinstance(e.args[i], str) and e.args[i].startswith(old):
        msg = new + e.args[i][len(old):]
        e.args = e.args[:i] + (msg,) + e.args[i + 1:]
        if i:
            e.strerror = msg  # type: ignore[attr-defined]


def fork_error(load_pid: int, pid: int) -> ForkError:
    """The error of a MemTier call in a process forked after ``load_pid`` loaded it."""
    return make_error(
        ERR_FORKED,
        f"memtier: libmemtier.so was loaded in process {load_pid} and this process "
        f"({pid}) is a fork() child of it",
        strerror=_FALLBACK_TEXT[ERR_FORKED],
        hint=FORK_HINT,
    )  # type: ignore[return-value]


def closed_error(what: str = "context") -> ClosedError:
    """The error of a call on a closed :class:`~memtier.Context` or request."""
    return make_error(ERR_CLOSED, f"memtier: the {what} is closed")  # type: ignore[return-value]


def _no_texts(status: int) -> "tuple[Optional[str], str]":
    return None, ""


# (strerror, last_error) of the calling thread for a status. _ffi, which
# loads the library, installs its reader when it is imported; this module
# stays below _ffi in the import graph (no cycle).
_error_texts: "Callable[[int], tuple[Optional[str], str]]" = _no_texts


def set_error_texts(fn: "Callable[[int], tuple[Optional[str], str]]") -> None:
    """Install the function :func:`_check` reads error texts with (from ``_ffi``)."""
    global _error_texts
    _error_texts = fn


def _check(
    status: int,
    prefix: str = "",
    *,
    filename: Optional[str] = None,
    index: Optional[int] = None,
    hint: str = "",
) -> int:
    """Return ``status`` if it is not negative, else raise its exception.

    This is the only place that turns C statuses into exceptions. It must run
    right after the failed C call on the same thread, because it reads
    ``memtier_last_error()``.
    """
    if status >= 0:
        return status
    strerror, detail = _error_texts(status)
    if status == ERR_FORKED and not hint and "spawn" not in detail:
        hint = FORK_HINT
    raise make_error(
        status, prefix, detail, strerror=strerror, filename=filename, index=index, hint=hint
    )
