"""Errors of :mod:`memtier.safetensors` that the reference library's ``except`` clauses catch.

Code written for Hugging Face's safetensors catches ``safetensors.SafetensorError``
(a class of its Rust extension). Every error that the reference raises as a
``SafetensorError`` (a malformed file, a closed handle, a missing tensor, a bad
``framework``/``device``/``backend``, a dtype it cannot hand out) is raised here
as an instance of a class that derives from both MemTier's own class (for
example :class:`memtier.FormatError`, so ``.code``, ``.detail`` and the built-in
base such as ``ValueError`` stay) and :class:`SafetensorError` below, which in
turn derives from ``safetensors.SafetensorError`` when safetensors is importable.
Errors the reference raises as something else (``FileNotFoundError`` for a
missing file, ``OSError`` for a directory) keep their MemTier class only
(:class:`memtier.NotFoundError` is a ``FileNotFoundError``).

The combined classes are made once per MemTier class and cached; the exception
object is re-classed in place (``__class__`` assignment: both bases have the
plain ``Exception`` layout), so its message and traceback are unchanged.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Dict, Optional, Tuple, Type, TypeVar

from .. import _errors
from .._errors import MemTierError

__all__ = ["SafetensorError", "TensorNotFoundError", "StateDictError", "as_reference",
           "bridge", "reference_class"]


def _reference() -> Optional[Type[BaseException]]:
    # Imported lazily: the Rust extension is only loaded when an error is
    # raised, and memtier works without safetensors installed.
    try:
        from safetensors import SafetensorError as ref
    except Exception:
        return None
    return ref  # type: ignore[no-any-return]


def reference_class() -> Optional[Type[BaseException]]:
    """``safetensors.SafetensorError`` when safetensors is importable, else None."""
    return _reference()


class SafetensorError(MemTierError):
    """Base of every :mod:`memtier.safetensors` error the reference raises as ``SafetensorError``.

    Raised instances also derive from ``safetensors.SafetensorError`` when
    safetensors is installed (see the module docstring), and from the MemTier
    class of their status (``FormatError``, ``ClosedError``...).
    """

    code = _errors.ERR_FORMAT


class TensorNotFoundError(MemTierError, KeyError):
    """No tensor of that name in the file (the reference: ``SafetensorError``;
    MemTier also makes it a ``KeyError``, as a missing dict key)."""

    code = _errors.ERR_NOT_FOUND

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class StateDictError(_errors.InvalidArgumentError, RuntimeError):
    """A checkpoint does not fit its destination (missing or unexpected names
    with ``strict=True``, a shape or dtype mismatch). A ``RuntimeError`` like
    torch's ``load_state_dict`` errors, and a ``ValueError``."""


_lock = threading.Lock()
_cache: Dict[Tuple[type, Optional[type]], type] = {}

#: MemTier classes never re-classed: the reference raises OSError kinds there.
_KEEP = (OSError,)

E = TypeVar("E", bound=BaseException)


def _combined(cls: type, ref: Optional[type]) -> type:
    key = (cls, ref)
    with _lock:
        got = _cache.get(key)
        if got is None:
            if issubclass(cls, SafetensorError):
                bases: Tuple[type, ...] = (cls,)
            elif issubclass(SafetensorError, cls):
                # A plain MemTierError (an I/O error, a file changed since
                # open): (MemTierError, SafetensorError) has no consistent MRO.
                bases = (SafetensorError,)
            else:
                bases = (cls, SafetensorError)
            if ref is not None and not issubclass(cls, ref):
                bases = bases + (ref,)
            # _bridged finds it again by name (pickle stores classes by name)
            got = type(cls.__name__, bases, {"__module__": "memtier.safetensors._bridged",
                                             "__doc__": cls.__doc__})
            _cache[key] = got
    return got


def as_reference(exc: E) -> E:
    """Re-class ``exc`` (a :class:`memtier.MemTierError`) in place so that it is
    also a :class:`SafetensorError` (and ``safetensors.SafetensorError`` when
    installed); OSError kinds and other exceptions are returned unchanged."""
    if not isinstance(exc, MemTierError) or isinstance(exc, _KEEP):
        return exc
    ref = _reference()
    if isinstance(exc, SafetensorError) and (ref is None or isinstance(exc, ref)):
        return exc
    try:
        exc.__class__ = _combined(type(exc), ref)
    except TypeError:  # an incompatible layout: keep the MemTier class
        pass
    return exc


F = TypeVar("F", bound=Callable[..., Any])


def bridge(fn: F) -> F:
    """Decorator: errors of ``fn`` leave through :func:`as_reference`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemTierError as e:
            raise as_reference(e)

    return wrapper  # type: ignore[return-value]


def invalid(message: str) -> MemTierError:
    """An InvalidArgumentError (a ValueError) re-classed for the reference."""
    return as_reference(_errors.make_error(_errors.ERR_INVALID_ARG, message, strerror=""))


def missing_tensor(message: str) -> TensorNotFoundError:
    """The error of an unknown tensor name (KeyError and SafetensorError)."""
    e = TensorNotFoundError(message)
    return as_reference(e)
