"""The ``views=True`` mode of :func:`memtier.integrations.patch_safetensors`:
local files are left to safetensors' own mmap (its tensors are views of the
page cache), after MemTier has asked the kernel to read ahead whatever of the
payload is not in the page cache yet.

Why: ``from_pretrained`` binds every tensor it gets from ``safe_open`` as a
parameter. On a warm page cache the reference's views cost no copy at all,
while any loader that returns tensors owning their memory fills fresh pages
(about 1.9 GB/s on the 2-core build VM, see
``examples/python/bench_from_pretrained.py``), so no copying loader can win
there. What is added here: the bytes are counted (:func:`view_bytes`), and a
file not wholly in the page cache gets one ``POSIX_FADV_WILLNEED`` over its
payload, so its pages are read ahead in large requests instead of page fault
by page fault. The views are the reference's, with the reference's contract:
they read the file's pages, so a file rewritten in place changes them (use
the default ``views=False`` for tensors that own their memory).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any, Dict, Optional

from .._context import _is_url

_lock = threading.Lock()
_bytes: "Counter[str]" = Counter()

#: Pages sampled (one byte each, RWF_NOWAIT) to decide whether a file is in the page cache.
SAMPLES = 16


def view_bytes() -> Dict[str, int]:
    """Tensor payload bytes of the files handed to safetensors' mmap by the
    ``views=True`` patch, per function (e.g. ``"safetensors.safe_open"``),
    since the process started or :func:`memtier.integrations.reset_counts`.
    These bytes are read by page faults, not by MemTier's engine, so
    :meth:`memtier.Context.stats` does not count them. A copy. Thread-safe."""
    with _lock:
        return dict(_bytes)


def reset() -> None:
    with _lock:
        _bytes.clear()


def _resident(fd: int, start: int, n: int) -> bool:
    """True when SAMPLES pages spread over [start, start+n) are all in the page
    cache (a one-byte RWF_NOWAIT read of each succeeds); False on any miss or
    when the kernel cannot tell (no RWF_NOWAIT)."""
    flag = getattr(os, "RWF_NOWAIT", None)
    if flag is None or n <= 0:
        return n <= 0
    buf = bytearray(1)
    step = max(1, n // SAMPLES)
    try:
        for off in range(start, start + n, step):
            if os.preadv(fd, [buf], off, flag) != 1:
                return False
        return os.preadv(fd, [buf], start + n - 1, flag) == 1
    except (BlockingIOError, OSError):
        return False


def prepare(fn: str, filename: Any) -> bool:
    """Before ``fn`` (a safetensors function) maps ``filename`` itself: for a
    local safetensors file, count its payload bytes and read ahead the
    payload when it is not in the page cache. False (nothing done) for a URL
    or anything that is not a readable file with a safetensors length prefix;
    the original then reports its own error. Never raises for bad input."""
    try:
        p = os.fsdecode(os.fspath(filename))
    except TypeError:
        return False
    if _is_url(p):
        return False
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 8, 0)
        if len(head) != 8:
            return False
        start = 8 + int.from_bytes(head, "little")
        n = size - start
        if n < 0:
            return False
        if not _resident(fd, start, n):
            os.posix_fadvise(fd, start, n, os.POSIX_FADV_WILLNEED)
    except OSError:
        return False
    finally:
        os.close(fd)
    with _lock:
        _bytes[fn] += n
    return True


def serve(fn: str, original: Any, filename: Any, args: Any, kwargs: Dict[str, Any]) -> Optional[Any]:
    """The original's result when ``views=True`` applies to ``filename`` (a
    local file), else None (the caller serves it with MemTier)."""
    if not prepare(fn, filename):
        return None
    return original(*args, **kwargs)
