"""Ctrl-C for calls that wait on a remote server (s3://, http://, https://).

Python runs signal handlers only on the main thread, between bytecodes: a
``KeyboardInterrupt`` cannot reach a thread that waits inside a C call. So
every :class:`memtier.Context` gives the library an interrupt check
(``memtier_set_interrupt_check``): while a call on a URL waits, the library
invokes it on the calling thread about every 50 ms. On the main thread the
check's Python frame lets the interpreter run a pending signal handler; an
exception the handler raises (``KeyboardInterrupt`` for Ctrl-C) is kept
here and the check returns 1, which stops the context's remote requests, and
the call returns ``MEMTIER_ERR_INTERRUPTED``. The error path
(:func:`memtier._errors.make_error`) then raises the kept exception itself,
so the caller sees the ``KeyboardInterrupt`` the user pressed, from the
call that was waiting. The check is registered for the main thread only
(:func:`main_thread_id`): other threads' calls never enter it.

Thread safety: the kept exception is one slot (only the main thread runs
signal handlers); :func:`take_pending` empties it.
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional

from . import _paths

_pending: List[BaseException] = []
_lock = threading.Lock()
#: (ffi, callback) per loaded library: the callback must stay alive as long
#: as the library may call it (every context of the process).
_callbacks: dict = {}


def _onerror(exc_type: Any, exc: Optional[BaseException], tb: Any) -> int:
    # cffi calls this with the exception the check's frame raised (a signal
    # handler's); 1 tells the library to stop the call.
    if exc is None:
        exc = exc_type()
    with _lock:
        # No traceback: the one it has ends in _check's "return 0", which
        # says nothing; raised again by the call that waited, it shows that.
        _pending.append(exc.with_traceback(None))
    return 1


def _check(arg: Any) -> int:
    # A Python frame: entering it runs any pending signal handler (on the
    # main thread), whose exception goes to _onerror.
    return 0


def check_for(ffi: Any) -> Any:
    """The ``memtier_interrupt_check_fn`` callback of the library bound to
    ``ffi`` (made once per ffi, kept alive here)."""
    cb = _callbacks.get(id(ffi))
    if cb is None or cb[0] is not ffi:
        fn = ffi.callback("int(void*)", _check, onerror=_onerror)
        _callbacks[id(ffi)] = cb = (ffi, fn)
    return cb[1]


def main_thread_id() -> int:
    """The main thread's ``pthread_self()`` (``threading`` idents are that on
    POSIX): the only thread whose calls run the check. Signal handlers run
    nowhere else, and a daemon thread that entered the interpreter through
    the check during its shutdown would be ended inside the library."""
    return threading.main_thread().ident or 0


def take_pending() -> Optional[BaseException]:
    """The oldest exception a signal handler raised inside the check, or
    None; it leaves the slot (later ones are dropped: one Ctrl-C is enough).
    Only the main thread takes it: that is where handlers run, so its call
    is the one whose check saw the exception; other threads' calls that the
    same interrupt stopped get None (a CallInterruptedError)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    with _lock:
        if not _pending:
            return None
        exc = _pending[0]
        _pending.clear()
        return exc


def stop_remote(ctx: Any, path: Any) -> None:
    """After a ``KeyboardInterrupt`` that landed between two slices of a
    wait on an asynchronous request or stream of ``path``: interrupt the
    context's remote GETs when ``path`` is a URL, or releasing the request
    waits for a stalled server (the remote timeouts). Never raises: the
    caller re-raises the ``KeyboardInterrupt``."""
    if _paths._is_url(path):
        try:
            ctx.interrupt()
        except Exception:
            pass
