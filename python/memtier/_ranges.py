"""The (offset, size) arrays of readv and load_chunks: validation and the
``memtier_iovec_t`` array built with numpy (no per-range Python loop).

numpy is imported on first use, never at import.
"""

from __future__ import annotations

from typing import Any, List, Optional

from . import _buffers
from ._buffers import TARGET_CPU, _dest, _dest_fast

_IOV_P: Any = None  # ffi.typeof("memtier_iovec_t *") once the layout was checked
_UINTPTR: Any = None  # ffi.typeof("uintptr_t"), set with _IOV_P


def _iov_array(ffi: Any, n: int) -> Any:
    """A zeroed (n, 5) uint64 array whose rows have the layout of
    ``memtier_iovec_t`` (offset, size, dst, path, result: five 8-byte fields
    without padding). The layout is checked against ``ffi.offsetof`` and
    ``ffi.sizeof`` on first use (the cdef is parsed lazily); a mismatch
    raises RuntimeError instead of handing the library a wrong array."""
    global _IOV_P, _UINTPTR
    import numpy as np

    if _IOV_P is None:
        names = ("offset", "size", "dst", "path", "result")
        got = ([ffi.offsetof("memtier_iovec_t", f) for f in names], ffi.sizeof("memtier_iovec_t"),
               ffi.sizeof("void *"))
        if got != ([0, 8, 16, 24, 32], 40, 8):
            raise RuntimeError(f"memtier: memtier_iovec_t has layout {got}, expected "
                               "([0, 8, 16, 24, 32], 40, 8) (offsets, size, pointer size)")
        _UINTPTR = ffi.typeof("uintptr_t")
        _IOV_P = ffi.typeof("memtier_iovec_t *")
    return np.zeros((n, 5), dtype=np.uint64)


def _bad_range(arr: Any, what: str = "range") -> None:
    """Raise the ValueError of the first (offset, size) row of ``arr`` that is
    negative or 2**63 or more (there is one)."""
    import numpy as np

    bad_neg = arr < 0 if arr.dtype.kind == "i" else np.zeros(arr.shape, dtype=bool)
    bad_big = arr.astype(np.uint64) >= np.uint64(1 << 63)
    bad = bad_neg | (bad_big & ~bad_neg)
    k = int(np.flatnonzero(bad.any(axis=1))[0])
    row = tuple(int(x) for x in arr[k].tolist())
    if bool(bad_neg[k].any()):
        raise ValueError(f"{what} {k} has a negative offset or size: {row}")
    raise ValueError(f"{what} {k} is out of range (2**63 or more): {row}")


def _list_dsts(ffi: Any, out: Any, sizes: Any, dst: Any) -> List[Any]:
    """readv into a list of buffers: validate ``out`` (one host buffer per
    range, each at least its range's size), write the addresses into ``dst``
    (uint64 column) and return the objects that keep them valid.

    Common case (every buffer a writable C-contiguous buffer-protocol object
    without object dtype): one from_buffer per buffer, then the addresses and
    lengths are gathered by C loops (``ffi.new("char *[]", cdatas)``, numpy).
    Anything else: element by element through :func:`_dest` (precise errors,
    torch tensors)."""
    import numpy as np

    n = sizes.shape[0]
    if len(out) != n:
        raise ValueError(f"out has {len(out)} buffers for {n} ranges")
    fb, char_array = ffi.from_buffer, _buffers._CHAR_ARRAY
    cds: Optional[List[Any]]
    try:
        cds = [fb(char_array, b, True) for b in out]
    except Exception:  # noqa: BLE001 - the element loop below reports it
        cds = None
    if cds is not None and any(getattr(getattr(b, "dtype", None), "hasobject", False)
                               or (type(b) is memoryview and b.format == "O") for b in out):
        cds = None
    if cds is not None:
        lens = np.fromiter(map(len, cds), dtype=np.uint64, count=n)
        short = np.flatnonzero(lens < sizes)
        if short.size:
            k = int(short[0])
            raise ValueError(f"out[{k}] holds {int(lens[k])} bytes, range {k} needs {int(sizes[k])}")
        ptrs = ffi.new("char *[]", cds)
        dst[...] = np.frombuffer(ffi.buffer(ptrs), dtype=np.uint64)
        return [cds, ptrs, out]
    size_list = sizes.tolist()
    keep: List[Any] = []
    addrs: List[int] = []
    for k in range(n):
        buf = out[k]
        cd, nbytes = _dest_fast(ffi, buf)
        if cd is None:
            cd, nbytes, target = _dest(ffi, buf)
            if target != TARGET_CPU:
                raise ValueError(f"readv reads into host memory only; out[{k}] is device memory")
        if nbytes < size_list[k]:
            raise ValueError(f"out[{k}] holds {nbytes} bytes, range {k} needs {size_list[k]}")
        addrs.append(int(ffi.cast(_UINTPTR, cd)))
        keep.append(cd)
        keep.append(buf)
    dst[...] = addrs
    return keep


_IOV_DTYPE = None


def _iov_dtype(ffi: Any) -> Any:
    """numpy structured dtype with the exact layout of memtier_iovec_t."""
    global _IOV_DTYPE
    if _IOV_DTYPE is None:
        import numpy as np

        names = ["offset", "size", "dst", "path", "result"]
        _IOV_DTYPE = np.dtype({
            "names": names,
            "formats": ["<u8", "<u8", "<u8", "<u8", "<i8"],
            "offsets": [ffi.offsetof("memtier_iovec_t", f) for f in names],
            "itemsize": ffi.sizeof("memtier_iovec_t"),
        })
        assert ffi.sizeof("void *") == 8, "readv: 64-bit pointers expected"
    return _IOV_DTYPE


def _ranges_array(ranges: Any, what: str = "range") -> Any:
    """``ranges`` as an (N, 2) uint64 array of (offset, size) pairs.

    Only integers are accepted (numpy integer arrays, or sequences of Python
    ints): a float or a numeric string would silently be truncated or parsed
    into another offset. ``what`` names one element in messages ("range" for
    readv, "chunk" for load_chunks). Raises TypeError or ValueError.
    """
    import numpy as np

    plural = what + "s"
    if isinstance(ranges, (str, bytes)):
        raise TypeError(f"{plural} must be a sequence of (offset, size) integer pairs, not {type(ranges).__name__}")
    arr = ranges if isinstance(ranges, np.ndarray) else None
    if arr is None:
        if not isinstance(ranges, (list, tuple)):
            try:
                ranges = list(ranges)  # an iterator is read once
            except TypeError:
                raise TypeError(f"{plural} must be a sequence of (offset, size) integer pairs, "
                                f"not {type(ranges).__name__}") from None
        try:
            arr = np.array(ranges)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"{plural} must be a sequence of (offset, size) integer pairs: {e}") from None
        if arr.size == 0:
            return np.zeros((0, 2), dtype=np.uint64)
        if arr.dtype.kind in "fO" and arr.ndim == 2 and all(
                isinstance(x, (int, np.integer)) for pair in ranges for x in pair):
            # Python ints above 2**63 - 1 make numpy pick float64 or object
            try:
                arr = np.array(ranges, dtype=np.uint64)
            except (TypeError, ValueError, OverflowError) as e:
                raise ValueError(f"{plural} must be (offset, size) pairs of 64-bit integers: {e}") from None
    if arr.size == 0:
        arr = arr.reshape(0, 2)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{plural} must be (offset, size) integer pairs, got {arr.dtype} values")
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"{plural} must have shape (N, 2), got {arr.shape}")
    if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
        bad = int(np.argwhere(arr < 0)[0][0])
        raise ValueError(f"{what} {bad} has a negative offset or size: {tuple(arr[bad].tolist())}")
    return arr.astype(np.uint64, copy=False)

