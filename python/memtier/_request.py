"""Asynchronous reads and prefetches: :class:`Request`."""

from __future__ import annotations

import threading
import time
from typing import Any, Optional, Tuple

from . import _errors, _ffi, _fork, _interrupt, _pickling
from ._constants import TARGET_CPU, TARGET_CUDA
from ._cuda import _unsupported_cuda
from ._errors import make_error

class Request:
    """An asynchronous read or prefetch (:meth:`Context.read_async`,
    :meth:`Context.prefetch` with ``wait=False``).

    The request holds a reference to everything the C library uses (the
    destination buffer, the path) until it completes and is released, so the
    caller may drop its own references. Use it as a context manager, or call
    :meth:`wait`; dropping it unwaited waits for the I/O when collected.

    Thread safety: :meth:`wait`, :meth:`done` and :meth:`release` may be called
    from several threads.
    """

    __slots__ = ("_ctx", "_lib", "_ffi", "_h", "_pid", "_lock", "_state", "_fin", "_kind",
                 "_path", "_target", "__weakref__")

    def __init__(self, ctx: Any, handle: Any, keep: Any, kind: str, path: str,
                 target: int = TARGET_CPU) -> None:
        self._ctx = ctx
        self._target = target
        self._lib = ctx._lib
        self._ffi = ctx._ffi
        self._h = handle
        self._pid = ctx._pid
        self._lock = threading.Lock()
        self._kind = kind
        self._path = path
        # None while pending; then ("ok", nbytes) / ("err", exc args) / ("released",)
        self._state: Optional[Tuple[Any, ...]] = None
        self._fin = _fork.finalizer(self, self._lib.memtier_request_release, handle, self._pid, keep)

    def __repr__(self) -> str:
        st = "pending" if self._state is None else self._state[0]
        return f"<memtier.Request {self._kind} {self._path!r} {st}>"

    def __reduce__(self) -> Any:
        """Refuse: the I/O belongs to this process (TypeError naming the fix)."""
        return _pickling.refuse(
            f"memtier.Request cannot be pickled: its {self._kind} runs in this process; "
            "wait() for it and pickle the destination buffer, or pickle the path "
            "and range and read them in the receiving process")

    def __enter__(self) -> "Request":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _record(self, rc: int, nbytes: int, texts: Tuple[Optional[str], str]) -> None:
        # called with self._lock held, right after the completing C call
        if self._state is not None:
            return
        if rc < 0:
            self._state = ("err", rc, texts)
        else:
            self._state = ("ok", nbytes)
        self._h = None
        self._fin()  # memtier_request_release (returns at once: complete) + drop refs

    def _outcome(self) -> int:
        st = self._state
        assert st is not None
        if st[0] == "ok":
            nbytes: int = st[1]
            return nbytes
        if st[0] == "released":
            raise _errors.closed_error("request (released before completion)")
        _, rc, (text, detail) = st
        if rc == _errors.ERR_UNSUPPORTED and self._target == TARGET_CUDA:
            raise _unsupported_cuda(self._ctx, f"memtier.{self._kind}: {self._path}", None, detail)
        raise make_error(rc, f"memtier.{self._kind}", detail, strerror=text,
                         filename=self._path)

    def _entry(self) -> Any:
        _fork.check(self._pid)
        return self._h

    def wait(self, timeout: Optional[float] = None) -> int:
        """Wait for completion and return the bytes moved.

        Parameters
        ----------
        timeout : float or None
            Seconds to wait; None waits until done (in slices of 0.1 s, so
            Ctrl-C is delivered).

        Returns
        -------
        int
            Bytes read (``read_async``) or brought into the cache (prefetch).

        Raises
        ------
        MemTierTimeoutError
            ``timeout`` passed; the request is still running.
        MemTierError
            The request failed (the matching subclass).
        ClosedError
            The request was released before it completed.
        """
        h = self._entry()
        if self._state is not None:
            return self._outcome()
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        nb = self._ffi.new("uint64_t *")
        lib = self._lib
        try:
            return self._wait_slices(h, deadline, timeout, nb)
        except KeyboardInterrupt:
            _interrupt.stop_remote(self._ctx, self._path)
            raise

    def _wait_slices(self, h: Any, deadline: Optional[float], timeout: Optional[float], nb: Any) -> int:
        lib = self._lib
        while True:
            if deadline is None:
                slice_ns = 100_000_000
            else:
                slice_ns = max(0, min(100_000_000, int((deadline - time.monotonic()) * 1e9)))
            rc = lib.memtier_request_wait(h, slice_ns, nb)
            if rc == _errors.ERR_TIMEOUT:
                if deadline is not None and time.monotonic() >= deadline:
                    raise make_error(
                        rc, f"memtier.Request.wait: {self._kind} of {self._path!r} still running "
                        f"after {timeout} s")
                continue
            texts = _ffi.error_texts(rc) if rc < 0 else (None, "")
            with self._lock:
                if self._state is None:
                    self._record(rc, int(nb[0]), texts)
            return self._outcome()

    def done(self) -> bool:
        """True when the request has completed (successfully or not); never blocks."""
        h = self._entry()
        if self._state is not None:
            return True
        nb = self._ffi.new("uint64_t *")
        rc = self._lib.memtier_request_test(h, nb)
        if rc == _errors.ERR_BUSY:
            return False
        texts = _ffi.error_texts(rc) if rc < 0 else (None, "")
        with self._lock:
            if self._state is None:
                self._record(rc, int(nb[0]), texts)
        return True

    def release(self) -> None:
        """Free the request, first waiting for it if it is still running.

        Idempotent. After a release without a completed wait, :meth:`wait`
        raises :class:`ClosedError`.
        """
        with self._lock:
            if self._state is None:
                self._state = ("released",)
                self._h = None
                self._fin()  # waits for running I/O, then drops the buffer

