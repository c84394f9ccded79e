"""Process identity after ``fork()``, and the one finalizer of library handles.

The Go runtime inside libmemtier.so does not survive ``fork()`` (see
:mod:`memtier._ffi`): a handle made in a parent must never be passed to the
library in a fork child, not even to release it. Every object that owns a
library handle (a Context, a Request, a ChunkStream, a shard) releases it
through :func:`finalizer`, which skips the call in any other process.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Optional, Tuple

from . import _errors, _ffi

#: The pid of this process, refreshed in a fork child by os.register_at_fork:
#: comparing it with the pid a handle was made in costs a global read instead
#: of a getpid() system call on every entry. A fork that bypasses Python's
#: hooks is still caught by the C guard (MEMTIER_ERR_FORKED).
_pid_now = os.getpid()


def _after_fork_in_child() -> None:
    global _pid_now
    _pid_now = os.getpid()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check(pid: int) -> None:
    """Raise :class:`memtier.ForkError` unless ``pid`` is this process."""
    if pid != _pid_now:
        raise _errors.fork_error(pid, os.getpid())


def _release(release: Callable[[Any], Any], handle: Any, pid: int, keep: Any) -> None:
    # weakref.finalize callback; also the backstop when the owner is dropped.
    # The release call may wait for running I/O, and ``keep`` (destination
    # buffers, paths, options, the context) lives until it returns.
    if pid == _pid_now:  # never enter the library in a fork child
        release(handle)
    del keep


def finalizer(owner: object, release: Callable[[Any], Any], handle: Any, pid: int,
              keep: Any = None) -> "weakref.finalize[..., Any]":
    """The ``weakref.finalize`` that calls ``release(handle)`` once: when called,
    or when ``owner`` is collected, and only in process ``pid``.

    ``keep`` is held until the release returns (what the library may still
    write or read). Thread safety: a finalize runs its callback at most once.
    """
    return weakref.finalize(owner, _release, release, handle, pid, keep)


def inherited_pread_batch() -> Optional[Tuple[Any, Any]]:
    """``(ffi, lib.memtier_pread_batch)`` of the library this process inherited
    through ``fork()``, or None: not a fork child of a process that loaded it,
    or a library without that entry (older than 0.3's successor).

    ``memtier_pread_batch`` is pure C in the library (no Go runtime), so a
    forked child may call it; nothing else of that library but the error
    texts. Loads nothing."""
    rt = _ffi.loaded()
    if rt is None or rt.pid == os.getpid():  # getpid: a raw fork() bypasses _pid_now's hook
        return None
    try:
        fn = rt.lib.memtier_pread_batch
    except AttributeError:
        return None
    return rt.ffi, fn
