"""cffi (ABI mode) binding of libmemtier.so: the cdef and the lazy loader.

The hottest calls also have a compiled path (:mod:`memtier._fastpath`: a
cffi API-mode module given this loader's library), bound here when the
library is loaded; ABI mode serves everything else, and everything when the
compiled module is absent.

Nothing here runs at ``import memtier``: the cdef is bound (``memtier._abi``,
parsed at build time, else parsed here) and the library is opened on the first
call that needs them, once per process. The Go runtime inside libmemtier.so
starts threads when the library is loaded and does not survive ``fork()``
(only the forking thread is copied: golang/go#15538), so a process must not
load it before forking. The loaded handle is keyed by
``os.getpid()``; in a forked child of a process that loaded it every entry
raises :class:`memtier.ForkError`.

Library lookup order (the first that loads wins; every failure is reported):

1. ``$MEMTIER_LIBRARY`` (a path; when set, nothing else is tried);
2. the packaged copy ``memtier/_lib/libmemtier.so``;
3. ``ctypes.util.find_library("memtier")`` (LD_LIBRARY_PATH, ldconfig).
"""

from __future__ import annotations

import os
import threading
from typing import Any, List, Optional, Tuple

from . import _cdef, _constants, _errors, _fastpath, _limits

#: Version of this package: MEMTIER_VERSION_STRING of the header it was
#: generated from (tools/mtgen writes _constants.py from include/memtier.h).
PACKAGE_VERSION = _constants.VERSION
PACKAGE_VERSION_NUMBER = _constants.VERSION_NUMBER  # major * 10000 + minor * 100 + patch

#: The cdef: include/memtier.h's declarations, generated into _cdef.py.
CDEF = _cdef.CDEF

LIB_NAME = "libmemtier.so"
ENV_LIBRARY = "MEMTIER_LIBRARY"

_lock = threading.RLock()
_ffi_obj: Any = None
_runtime: "Optional[Runtime]" = None


class Runtime:
    """The loaded library of this process (internal; never exposed as cdata)."""

    __slots__ = ("ffi", "lib", "path", "pid", "version", "version_number", "fast", "fast_state")

    def __init__(self, ffi: Any, lib: Any, path: str, pid: int) -> None:
        self.ffi = ffi
        self.lib = lib  # module global through _runtime: never collected (P3)
        self.path = path
        self.pid = pid
        self.version = ffi.string(lib.memtier_version()).decode("ascii", "replace")
        self.version_number = int(lib.memtier_version_number())
        #: The compiled fast path (memtier._fastpath.Fast) or None, and why.
        self.fast, self.fast_state = _fastpath.bind(ffi, lib)


class _Lib:
    """A library opened by ``memtier._abi``'s ``ffi.dlopen`` (cffi out-of-line ABI
    mode), behaving as one of a runtime-parsed FFI: a declared symbol the library
    lacks raises AttributeError with the same text (out-of-line cffi raises
    ``ffi.error``), which the loader ("not a libmemtier.so") and optional entries
    (``getattr(lib, name, None)``) rely on. A resolved name is kept on the instance,
    so later reads are plain attribute reads (the cdef declares functions and
    constants only: no variable whose value could change). Thread safe."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        self.__dict__["_mt_lib"] = lib
        self.__dict__["_mt_error"] = ffi.error

    def __getattr__(self, name: str) -> Any:
        try:
            value = getattr(self._mt_lib, name)
        except self._mt_error as e:
            text = str(e)  # "symbol 'x' not found in library ...": in-line cffi says "function/symbol"
            raise AttributeError("function/" + text if text.startswith("symbol ") else text) from None
        self.__dict__[name] = value
        return value

    def __dir__(self) -> List[str]:
        return dir(self._mt_lib)


def _prebuilt_ffi() -> Any:
    """The ``FFI`` of ``memtier._abi`` (the cdef parsed at build time, see
    python/fast/abi_module.py) when that module was made from this :data:`CDEF`,
    else None: absent (a checkout used through ``PYTHONPATH``), stale (the header
    changed since), or written by a cffi this one cannot read."""
    import importlib

    try:
        # by name: a generated module that a checkout may lack (type checkers too)
        _abi = importlib.import_module(__name__.rpartition(".")[0] + "._abi")
    except Exception:  # noqa: BLE001 - any failure: parse at run time instead
        return None
    if getattr(_abi, "CDEF", None) != CDEF:
        return None
    return getattr(_abi, "ffi", None)


def get_ffi() -> Any:
    """The cffi ``FFI`` holding :data:`CDEF`, made once, on first use: the one
    parsed at build time (``memtier._abi``, about 2 ms to import) when it matches
    :data:`CDEF`, else parsed here (about 100 ms). Thread safe."""
    global _ffi_obj
    f = _ffi_obj
    if f is None:
        with _lock:
            f = _ffi_obj
            if f is None:
                f = _prebuilt_ffi()
                if f is None:
                    import cffi

                    f = cffi.FFI()
                    f.cdef(CDEF)
                _ffi_obj = f
    return f


def package_dir_library() -> str:
    """Path of the library shipped inside the package (may not exist)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", LIB_NAME)


def _candidates() -> List[Tuple[str, str]]:
    """(how, path-or-name) pairs to try, in order."""
    explicit = os.environ.get(ENV_LIBRARY)
    if explicit:
        return [(f"${ENV_LIBRARY}", explicit)]
    out = [("packaged", package_dir_library())]
    import ctypes.util

    found = ctypes.util.find_library("memtier")
    out.append(("ctypes.util.find_library('memtier')", found or ""))
    return out


def _hint(errors: List[str]) -> str:
    text = " ".join(errors)
    hints = []
    if "static TLS" in text:
        hints.append(
            "the process ran out of static TLS space (other libraries loaded first use it up): "
            "import memtier and call it before those libraries load, or start Python with "
            "LD_PRELOAD=<path of libmemtier.so>"
        )
    if "musl" in text or "ld-musl" in text:
        hints.append("musl libc (Alpine) is not supported: use a glibc-based system")
    hints.append(
        "build the library with `pip install .` (needs Go >= 1.26), or point "
        f"{ENV_LIBRARY} at a libmemtier.so (e.g. the CMake build's build/libmemtier.so)"
    )
    return "; ".join(hints)


def _load(pid: int) -> Runtime:
    _limits.check_address_space()  # RLIMIT_AS too tight for the Go runtime: refuse before dlopen (N05)
    ffi = get_ffi()
    errors: List[str] = []
    for how, path in _candidates():
        if not path:
            errors.append(f"{how}: not found")
            continue
        try:
            lib = ffi.dlopen(path)
        except OSError as e:  # cffi puts dlerror() in the message
            errors.append(f"{how}: {path}: {e}")
            continue
        if not hasattr(ffi, "cdef"):  # memtier._abi's (out-of-line) FFI
            lib = _Lib(ffi, lib)
        try:
            rt = Runtime(ffi, lib, path if os.sep in path else _resolve(path), pid)
        except AttributeError as e:  # not a MemTier library (missing symbol)
            errors.append(f"{how}: {path}: not a libmemtier.so ({e})")
            continue
        major = rt.version_number // 10000
        if major != PACKAGE_VERSION_NUMBER // 10000:
            raise _errors.LibraryLoadError(
                f"memtier: {path} is libmemtier {rt.version} (major {major}), but this "
                f"package (memtier {PACKAGE_VERSION}) needs major "
                f"{PACKAGE_VERSION_NUMBER // 10000}; {_hint([])}"
            )
        return rt
    raise _errors.LibraryLoadError(
        "memtier: cannot load libmemtier.so; tried:\n  "
        + "\n  ".join(errors)
        + "\nhint: "
        + _hint(errors)
    )


def _resolve(name: str) -> str:
    """The file a dlopen()ed soname maps to (from /proc/self/maps), or ``name``."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.rstrip().endswith("/" + name):
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return name


def runtime() -> Runtime:
    """The library of this process, loading it on first use.

    Raises
    ------
    ForkError
        The library was loaded by a parent of this forked process.
    LibraryLoadError
        No candidate could be loaded (an ImportError and a RuntimeError).
    """
    rt = _runtime
    pid = os.getpid()
    if rt is not None:
        if rt.pid == pid:
            return rt
        raise _errors.fork_error(rt.pid, pid)
    with _lock:
        rt = _runtime
        if rt is None:
            rt = _load(pid)
            globals()["_runtime"] = rt
        elif rt.pid != pid:
            raise _errors.fork_error(rt.pid, pid)
    return rt


def loaded() -> Optional[Runtime]:
    """The loaded runtime (possibly of a parent process) or None; loads nothing."""
    return _runtime


def error_texts(status: int) -> Tuple[Optional[str], str]:
    """``(memtier_strerror(status), memtier_last_error())`` of this thread.

    Both are pure C in the library and safe in a forked child. Without a
    loaded library: ``(None, "")``.
    """
    rt = _runtime
    if rt is None:
        return None, ""
    ffi, lib = rt.ffi, rt.lib
    detail = ffi.string(lib.memtier_last_error()).decode("utf-8", "replace")
    text = ffi.string(lib.memtier_strerror(status)).decode("utf-8", "replace")
    return text, detail


def strerror(status: int) -> Optional[str]:
    """``memtier_strerror(status)`` (pure C), or None without a loaded library."""
    rt = _runtime
    if rt is None:
        return None
    text: str = rt.ffi.string(rt.lib.memtier_strerror(status)).decode("utf-8", "replace")
    return text


_errors.set_error_texts(error_texts)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # a lock held by another parent thread would hang here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
