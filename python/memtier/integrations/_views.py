"""The views of :func:`memtier.integrations.patch_safetensors`: local files
are left to safetensors' own mmap (its tensors are views of the page cache),
and their bytes are counted (:func:`view_bytes`). ``safe_open`` on the CPU
takes this path by default (``views=None``), ``load_file`` too with
``views=True``; ``views=False`` never does.

Why views are the default for ``safe_open``: a user of the patch expects the
reference's semantics there, and they measure best.

Measured: ``from_pretrained`` binds every tensor it gets from ``safe_open`` as a
parameter. On a warm page cache the reference's views cost no copy at all,
while any loader that returns tensors owning their memory fills fresh pages
(about 1.9 GB/s on the 2-core build VM, see
``examples/python/bench_load_model.py``'s fresh-pages row), so no copying
loader can win there; on a cold one, MemTier's copy lost too (0.68x the
reference, ``examples/python/bench_from_pretrained.py --cold``). A
``POSIX_FADV_WILLNEED`` read-ahead of a cold file before the reference maps
it, tried here, changed nothing measurable (0.93-0.96x with, 0.95-0.96x without), so
nothing is added to the reference's reads: MemTier only counts. Filling the
page tables of safetensors' mapping in a background thread
(``MADV_POPULATE_READ``, so the first touch finds them mapped) was tried
too: it took the first touch of a 400 MB checkpoint from 19 to 4 ms, but the
load itself went from 97 to 133 ms (medians of 11 interleaved runs on the
loaded 2-core VM: the thread took the core the caller needed), so it is not
done. Doing the same in the caller, one ``madvise(MADV_POPULATE_READ)`` over
each file's mapping right after ``safe_open`` (read-only page-table entries,
no copy-on-write broken; the work ``MAP_POPULATE`` would do), was tried too:
first touch 20 -> 5 ms, but ``from_pretrained`` 161 -> 186 ms, so the ready
time did not improve (190 against 185 ms without it, the reference 196 ms;
medians of 5 interleaved runs, 402 MB in 5 shards, load average 4-5). The views are
the reference's, with the reference's contract: they read the file's pages,
so a file rewritten in place changes them (``views=False`` gives
tensors that own their memory).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any, Dict, Optional

from .._context import _is_url

_lock = threading.Lock()
_bytes: "Counter[str]" = Counter()


def view_bytes() -> Dict[str, int]:
    """Tensor payload bytes of the files handed to safetensors' mmap by the
    ``views=True`` patch, per function (e.g. ``"safetensors.safe_open"``),
    since the process started or :func:`memtier.integrations.reset_counts`.
    These bytes are read by page faults, not by MemTier's engine, so
    :meth:`memtier.Context.stats` does not count them. A copy. Thread-safe."""
    with _lock:
        return dict(_bytes)


def reset() -> None:
    """Zero :func:`view_bytes`. Thread-safe."""
    with _lock:
        _bytes.clear()


def prepare(fn: str, filename: Any) -> bool:
    """Before ``fn`` (a safetensors function) maps ``filename`` itself: for a
    local safetensors file, count its payload bytes (file size minus the
    length prefix and header). False (nothing counted) for a URL or anything
    that is not a readable file with a plausible length prefix; MemTier then
    serves the call (and reports its own error). Never raises for bad input."""
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
    except OSError:
        return False
    finally:
        os.close(fd)
    with _lock:
        _bytes[fn] += n
    return True


def serve(fn: str, original: Any, filename: Any, args: Any, kwargs: Dict[str, Any]) -> Optional[Any]:
    """The original's result when the views apply to ``filename`` (a
    local file), else None (the caller serves it with MemTier)."""
    if not prepare(fn, filename):
        return None
    return original(*args, **kwargs)
