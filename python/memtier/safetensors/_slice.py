"""``safe_open.get_slice``: a tensor of an open file, read when indexed."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from .. import _context
from .._context import TARGET_CPU, TARGET_CUDA
from ._alloc import TensorInfo, alloc
from ._errors import bridge
from ._handle import refuse_subbyte

if TYPE_CHECKING:
    from . import safe_open

__all__ = ["SafeSlice"]


_ALL = slice(None)


def _is_full(parts: Tuple[Any, ...]) -> bool:
    """True for the keys that select the whole tensor unchanged: ``...``,
    ``:`` and tuples of those (at most one ``...``)."""
    ell = 0
    for p in parts:
        if p is Ellipsis:
            ell += 1
        elif not (isinstance(p, slice) and p == _ALL):
            return False
    return bool(parts) and ell <= 1


class SafeSlice:
    """A tensor of an open file, read when indexed (``safe_open.get_slice``).

    ``get_shape()`` gives the shape as a list of ints and ``get_dtype()`` the
    safetensors dtype name (``"F32"``), as in the reference library.

    Indexing reads only the rows (first-dimension entries) it selects:
    ``s[a:b]`` (any step, negative too), ``s[i]`` and ``s[[i, j, ...]]`` (a
    list or 1-D integer array) become one ``memtier_load_chunks`` call with
    one chunk per selected row (contiguous rows are coalesced by the library
    into a single read), and further indices on the other dimensions
    (``s[a:b, 3:7]``, ``s[i, ..., ::2]``) are applied in memory to those rows.
    The whole-tensor keys (``s[...]``, ``s[:]`` and tuples of those, as
    transformers' ``from_pretrained`` reads every weight) are one
    ``memtier_safetensors_load`` through the open handle, as
    ``safe_open.get_tensor``. Other keys (None first, boolean masks, a scalar
    tensor) load the whole tensor and index it in memory. Results follow numpy/torch
    indexing rules and own their memory (never views of the file).

    As in the reference, rows out of range raise IndexError, a zero step
    ValueError, and a slice keeps working after its file was closed (it reads
    by path; :class:`memtier.MemTierError` "changed since open" when the file
    on disk is no longer the one opened). F4 tensors are indexed in memory, in
    their packed ``float4_e2m1fn_x2`` shape (the reference fails there).
    Negative steps select rows backwards, as numpy does (the reference
    refuses them: "step must be greater than zero").
    """

    __slots__ = ("_f", "_i", "_info")

    def __init__(self, f: "safe_open", i: int) -> None:
        self._f = f
        self._i = i
        self._info = f._h.infos[i]

    def __repr__(self) -> str:
        return f"<memtier.safetensors.SafeSlice {self._info.name!r} {self._info.dtype} {list(self._info.shape)}>"

    def get_shape(self) -> List[int]:
        """Dimensions of the tensor, outermost first."""
        return list(self._info.shape)

    def get_dtype(self) -> str:
        """The safetensors dtype name, e.g. ``"BF16"``."""
        return self._info.dtype

    def __len__(self) -> int:
        """Size of the first dimension (TypeError for a 0-d tensor; the
        reference's slice has no len)."""
        if not self._info.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._info.shape[0]

    def _rows(self, first: Any) -> Optional[Tuple[List[int], bool]]:
        """(row indices, drop the first dim) or None for "load everything"."""
        n0 = self._info.shape[0]
        if isinstance(first, slice):
            return list(range(*first.indices(n0))), False
        if isinstance(first, bool):
            return None
        try:
            i = operator.index(first)
        except TypeError:
            pass
        else:
            if not -n0 <= i < n0:
                raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n0}")
            return [i + n0 if i < 0 else i], True
        import numpy as np

        if isinstance(first, (list, tuple)) or (isinstance(first, np.ndarray) and first.ndim == 1):
            arr = np.asarray(first)
            if arr.size == 0:
                arr = arr.astype(np.int64)
            if arr.ndim != 1 or arr.dtype.kind not in "iu":
                return None  # masks, nested lists: in memory
            arr = arr.astype(np.int64)
            if arr.size and (int(arr.min()) < -n0 or int(arr.max()) >= n0):
                bad = next(int(v) for v in arr.tolist() if not -n0 <= v < n0)
                raise IndexError(f"index {bad} is out of bounds for dimension 0 with size {n0}")
            return np.where(arr < 0, arr + n0, arr).tolist(), False
        return None

    @bridge
    def __getitem__(self, key: Any) -> Any:
        """Read the part of the tensor that ``key`` selects (see the class docstring)."""
        f = self._f
        info = self._info
        torch = f._torch
        where = f"memtier.safetensors.get_slice({info.name!r})"
        parts = key if isinstance(key, tuple) else (key,)
        if f._h.h is not None and _is_full(parts):
            # transformers reads every weight as s[...]: the handle's own
            # load, which checks the file is the one opened (no re-open by path)
            return f._h.load_one(self._i, torch, where, f._device)[key]
        sel = None
        if info.shape and parts and info.dtype != "F4":
            rest = parts[1:]
            if all(isinstance(r, (slice, int)) or r is Ellipsis or r is None for r in rest):
                sel = self._rows(parts[0])
        whole = sel is None
        rows: List[int] = []
        drop = False
        if sel is not None:
            rows, drop = sel
        refuse_subbyte(info, where)
        import numpy as np

        if whole:  # one chunk: the whole payload
            rows, shape, row_bytes = [0], info.shape, info.nbytes
        elif info.shape:
            n0 = info.shape[0]
            shape = (len(rows),) + tuple(info.shape[1:])
            row_bytes = info.nbytes // n0 if n0 else 0
        else:
            shape, row_bytes = (), info.nbytes
        out_info = TensorInfo(info.name, info.dtype, shape, 0, len(rows) * row_bytes)
        out, addr = alloc(out_info, torch, f._device)
        if rows and row_bytes:
            h = f._h
            h.ctx._handle()  # fork and closed-context checks; a closed file is fine
            r = np.asarray(rows, dtype=np.uint64)
            offsets = np.uint64(info.offset) + r * np.uint64(row_bytes)
            sizes = np.full(len(rows), row_bytes, dtype=np.uint64)
            dsts = np.uint64(addr) + np.arange(len(rows), dtype=np.uint64) * np.uint64(row_bytes)
            if len(rows) > 1 and bool((np.diff(r.astype(np.int64)) == 1).all()):
                offsets, sizes, dsts = offsets[:1], np.uint64([row_bytes * len(rows)]), dsts[:1]
            from .._chunks import _load_rows

            h.check_unchanged(where)
            if f._device:
                _context._sync_torch_stream(out)
            _load_rows(h.ctx, h.path, offsets, sizes, dsts, where,
                       TARGET_CUDA if f._device else TARGET_CPU)
            h.check_unchanged(where)
        if whole:
            return out[key]
        rest = parts[1:]
        res = out[0] if drop else out
        if rest:
            res = res[rest] if drop else res[(slice(None),) + tuple(rest)]
        return res
