"""Compact, exact encodings of the datasets' tables for their pickled form.

A dataset pickled to a spawn or forkserver worker goes through the pipe that
starts the worker, and ``multiprocessing`` writes it in the parent's
``Process.start()``: a pickle larger than the pipe (64 KiB on Linux) blocks
the parent until that worker has imported torch and read it, so a
DataLoader's workers started one after another (bench_remote's 8 shards of
4096 samples: a 235 KB TarShardDataset pickle, the second worker's start-up
after the first's). These encodings make such a table a few bytes per row:
integers as zlib-compressed differences from the previous row (member offsets
from the padded end of the previous member), strings joined and compressed, a
column of few distinct strings as codes into them.

Every decoder returns exactly the values (dtype included) that were encoded.
Pure Python and numpy: nothing here loads libmemtier.so. Thread safety: pure
functions.
"""

from __future__ import annotations

import zlib
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["pack_ints", "unpack_ints", "pack_offsets", "unpack_offsets", "pack_strs", "unpack_strs",
           "pack_codes", "unpack_codes", "check_format"]

# zlib level 6 (the default): level 9 saves under 1% on these tables, at twice the time.
_LEVEL = 6
_SEP = "\0"  # tar member names are C strings: never in a key or an extension


def _narrowest(d: np.ndarray) -> np.ndarray:
    """``d`` (int64 differences) in the narrowest signed dtype that holds it, little-endian."""
    if d.size == 0:
        return d.astype("<i1")
    lo, hi = int(d.min()), int(d.max())
    for t in ("<i1", "<i2", "<i4"):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return d.astype(t)
    return d.astype("<i8")


def pack_ints(a: np.ndarray, delta: bool = True) -> Tuple[str, int, str, bytes]:
    """``a`` (a 1-D integer array) as ``(dtype, length, width, zlib bytes)``.

    ``delta``: store each value's difference from the previous one (wrapping in
    ``a``'s own dtype, so any value round-trips), for sorted or run-length
    columns; else the values themselves."""
    a = np.ascontiguousarray(a).reshape(-1)
    if a.dtype.kind not in "iu" or a.dtype.itemsize > 8:
        raise TypeError("pack_ints: want an integer array of up to 64 bits, got %s" % a.dtype)
    # as int64: exact for every dtype but uint64, whose bits it keeps (its
    # differences then wrap, and unpacking wraps them back)
    w = a.astype(np.uint64).view(np.int64) if a.dtype.kind == "u" and a.dtype.itemsize == 8 \
        else a.astype(np.int64)
    vals = _narrowest(np.diff(w, prepend=np.int64(0)) if delta else w)
    tag = ("d" if delta else "v") + vals.dtype.str
    return (a.dtype.str, int(a.size), tag, zlib.compress(vals.tobytes(), _LEVEL))


def unpack_ints(packed: Sequence[Any]) -> np.ndarray:
    """The array :func:`pack_ints` encoded (same dtype, values and length)."""
    dtype, n, tag, blob = packed
    dt = np.dtype(dtype)
    vals = np.frombuffer(zlib.decompress(blob), dtype=np.dtype(tag[1:]))
    if vals.size != n:
        raise ValueError("unpack_ints: %d values, want %d" % (vals.size, n))
    wide = vals.astype(np.int64)
    out = np.cumsum(wide, dtype=np.int64) if tag[0] == "d" else wide
    return out.astype(dt)  # modular: uint64's bits come back


def _ends(size: np.ndarray, align: int) -> np.ndarray:
    """Per extent, its size plus the padding to ``align`` (the predicted step to
    the next extent's offset, before its gap)."""
    return size + (-size) % align if align > 1 else size


def pack_offsets(offsets: np.ndarray, sizes: np.ndarray, align: int = 1) -> Tuple[str, int, str, bytes]:
    """Offsets of ``sizes``-long extents as their gaps from the end of the
    previous extent padded to ``align`` bytes (the first from 0): a column of
    few distinct small values for extents laid out one after another (packed
    samples: 0; tar members, ``align=512``: their 512-byte header)."""
    off = np.ascontiguousarray(offsets, dtype=np.int64).reshape(-1)
    size = np.ascontiguousarray(sizes, dtype=np.int64).reshape(-1)
    if off.shape != size.shape:
        raise ValueError("pack_offsets: %d offsets, %d sizes" % (off.size, size.size))
    if align < 1:
        raise ValueError("pack_offsets: align %d < 1" % align)
    gaps = np.diff(off, prepend=np.int64(0))  # int64 wraps, and unpacking wraps back
    gaps[1:] -= _ends(size[:-1], align)
    g = _narrowest(gaps)
    return (np.dtype(offsets.dtype).str, int(off.size), "g%d:%s" % (align, g.dtype.str),
            zlib.compress(g.tobytes(), _LEVEL))


def unpack_offsets(packed: Sequence[Any], sizes: np.ndarray) -> np.ndarray:
    """The offsets :func:`pack_offsets` encoded with the same ``sizes``."""
    dtype, n, tag, blob = packed
    align_s, gdt = tag[1:].split(":", 1)
    steps = np.frombuffer(zlib.decompress(blob), dtype=np.dtype(gdt)).astype(np.int64)
    size = np.ascontiguousarray(sizes, dtype=np.int64).reshape(-1)
    if steps.size != n or size.size != n:
        raise ValueError("unpack_offsets: %d gaps and %d sizes, want %d" % (steps.size, size.size, n))
    steps[1:] += _ends(size[:-1], int(align_s))
    return np.cumsum(steps, dtype=np.int64).astype(np.dtype(dtype))


def pack_strs(strs: Sequence[str]) -> Optional[Tuple[int, bytes]]:
    """``strs`` as ``(count, zlib of the NUL-joined UTF-8)`` (any code point
    round-trips: surrogatepass), or None when one of them holds a NUL (the
    caller keeps that list as it is)."""
    joined = _SEP.join(strs)
    if joined.count(_SEP) != max(len(strs) - 1, 0):
        return None
    return (len(strs), zlib.compress(joined.encode("utf-8", "surrogatepass"), _LEVEL))


def unpack_strs(packed: Sequence[Any]) -> List[str]:
    """The list :func:`pack_strs` encoded."""
    n, blob = packed
    if n == 0:
        return []
    out = zlib.decompress(blob).decode("utf-8", "surrogatepass").split(_SEP)
    if len(out) != n:
        raise ValueError("unpack_strs: %d strings, want %d" % (len(out), n))
    return out


def pack_codes(strs: Sequence[str]) -> Tuple[List[str], Tuple[str, int, str, bytes]]:
    """A column of few distinct strings as ``(distinct values, packed codes)``."""
    table: dict = {}
    codes = np.fromiter((table.setdefault(s, len(table)) for s in strs), dtype=np.int64, count=len(strs))
    return list(table), pack_ints(codes, delta=False)


def unpack_codes(packed: Sequence[Any]) -> List[str]:
    """The list :func:`pack_codes` encoded."""
    table, codes = packed
    return [table[c] for c in unpack_ints(codes).tolist()]


def check_format(packed: Any, want: int, owner: str, what: str) -> None:
    """Raise ValueError unless the pickled table ``packed`` (a dict) has
    ``"format"`` ``want``: a pickle made by another version of ``owner`` (a
    dataset class name) must be rebuilt, never misread."""
    got = packed.get("format")
    if got != want:
        raise ValueError("%s: pickled %s of format %r, this version reads %d (build the dataset again)"
                         % (owner, what, got, want))
