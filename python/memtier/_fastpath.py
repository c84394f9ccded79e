"""The compiled fast path: ``memtier._fast`` bound to the loaded library.

``memtier._fast`` is a cffi API-mode extension (built by setup.py from
python/fast/) that holds the addresses of ``memtier_read_ex``,
``memtier_readv`` and ``memtier_readv_ex`` of the library :mod:`memtier._ffi`
opened in ABI mode, so both modes call the same library and the loader's
rules (``MEMTIER_LIBRARY``, the packaged copy, fork detection) hold for both.
Its functions take Python objects directly (buffers through the buffer
protocol), so a cached 4 KiB ``read_into`` skips cffi's argument conversion
and ``ffi.from_buffer``; ``Context.read_into`` itself becomes a method of the
module (:meth:`Fast.bind_context`), so it has no Python frame either. They decline (return None) whatever they do not
handle, and the caller's ABI-mode path then does the work or raises.

Without the compiled module (not built: no C compiler at install, a
checkout used through ``PYTHONPATH``), with one built for another version of
this file, or with ``MEMTIER_PYTHON_FAST=0``, everything runs in ABI mode,
with the same results and errors. ``memtier.runtime_info()["python_fast_path"]``
says which mode is in use and why.

Nothing here runs at ``import memtier``: :func:`bind` runs when the library
is loaded.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional, Tuple

from . import _log, _options, _paths

ENV = "MEMTIER_PYTHON_FAST"
#: MTF_API_VERSION of python/fast/memtier_fast.c that this module speaks.
API_VERSION = 4
#: The state string of a bound compiled module.
COMPILED = "compiled"


class Fast:
    """The compiled functions (see python/fast/memtier_fast.c for each one's
    arguments and results). Thread safety: they may be called from many
    threads at once; each releases the GIL during its library call."""

    __slots__ = ("read_into", "read", "readv", "ranges_total", "_bind_context", "_context_bound")

    def __init__(self, mod: Any) -> None:
        self.read_into: Callable[..., Any] = mod.read_into
        self.read: Callable[..., Any] = mod.read
        self.readv: Callable[..., Any] = mod.readv
        self.ranges_total: Callable[..., Any] = mod.ranges_total
        self._bind_context: Callable[[type, Callable[..., Any]], None] = mod.bind_context
        self._context_bound = False

    def bind_context(self, cls: type, fallback: Callable[..., Any]) -> None:
        """Make ``cls.read_into`` the compiled method (memtier_fast.c,
        ``bind_context``): the reads :attr:`read_into` serves, without the
        Python method's frame; every other call goes to ``fallback`` (the
        Python method it replaces) with the same arguments. ``cls`` is
        :class:`memtier.Context` (its slots ``_hid``, ``_pid``, ``_fri`` are
        read by the method; ``_fri`` None: the fallback). Once per process;
        later calls return at once. Thread-safe. Raises TypeError for a
        class without those slots."""
        if self._context_bound:
            return
        with _BIND_LOCK:
            if not self._context_bound:
                self._bind_context(cls, fallback)
                self._context_bound = True


# bind_context edits a class: one thread at a time (free-threaded builds too).
_BIND_LOCK = threading.Lock()


def _address(ffi: Any, lib: Any, name: str) -> int:
    """The address of ``lib``'s function ``name``, 0 when the library lacks it."""
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return 0
    return int(ffi.cast("uintptr_t", fn))


def bind(ffi: Any, lib: Any) -> Tuple[Optional[Fast], str]:
    """``(Fast, "compiled")`` when the compiled module can serve the library
    ``lib`` (an ABI-mode handle of ``ffi``), else ``(None, why)``, ``why``
    starting with ``"abi: "``. Called once per process, when the library is
    loaded (under the loader's lock). Raises nothing."""
    setting = os.environ.get(ENV, "").strip()
    if setting == "0":
        return None, f"abi: {ENV}=0"
    if setting not in ("", "1"):
        why = f"{ENV}={setting!r} is not 0 or 1 (unset or 1: compiled when built)"
        # Said once on stderr, as a bad MEMTIER_LOG value is.
        _log._write(f"memtier: warning: {why}; the cffi ABI mode is used\n")
        return None, "abi: " + why
    try:
        import memtier._fast as _fast  # an extension module: no stub
    except ImportError as e:
        return None, f"abi: memtier._fast is not built or does not load ({e})"
    try:
        version = int(_fast.lib.mtf_api_version())
    except AttributeError as e:
        return None, f"abi: memtier._fast is not the fast-path module ({e})"
    if version != API_VERSION:
        return None, (f"abi: memtier._fast speaks version {version}, this package {API_VERSION} "
                      "(a stale build: rebuild with `pip install .` or python/fast/build.py)")
    rc = _fast.lib.mtf_bind(_fast.__name__.encode(), _address(ffi, lib, "memtier_read_ex"),
                            _address(ffi, lib, "memtier_readv"),
                            _address(ffi, lib, "memtier_readv_ex"), _options.CHUNK_BYTES)
    if rc != 0:
        return None, "abi: memtier._fast could not bind the library's entry points"
    _fast.set_path_cache(_paths._PATH_CACHE)  # read_into looks the caller's path up there
    return Fast(_fast), COMPILED
