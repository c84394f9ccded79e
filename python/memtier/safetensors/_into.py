"""Load a checkpoint into tensors that already exist: :func:`load_into` and :func:`load_model`.

``load_file`` + ``model.load_state_dict`` costs a fresh allocation as large as
the checkpoint (its page faults) and a second copy. Here each tensor's bytes
go from the file straight into the destination's storage:

* contiguous destinations (CPU, or CUDA through the library's CUDA target)
  are filled by one ``memtier_safetensors_load_all`` call per file and target,
  with the destination addresses as the per-tensor buffers (for 64 MiB or
  more of a local file in the page cache, the library copies out of 32 MiB
  windows mapped from the file, in parallel: runtime/engine/mapcopy.go);
* the others (non-contiguous views, tensors overlapping another destination,
  numpy arrays that are not C-contiguous) are read in pieces of at most
  ``staging_bytes`` into one staging buffer, several small tensors per
  ``memtier_load_chunks`` call, and copied into place. Peak extra memory is the
  staging buffer, whatever the checkpoint size.

Names, shapes and dtypes are all checked before anything is written.
A sharded checkpoint (``*.index.json`` with a ``weight_map``) goes through the
same call; its shards are read in parallel threads (the library calls release
the GIL).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

from .. import _context, _dtypes, _errors
from .._context import TARGET_CPU, TARGET_CUDA, Context, PathType, _fname, _is_url, _read_object
from ._alloc import TensorInfo, dtype_of, storage_shape
from ._errors import StateDictError, as_reference, bridge
from ._handle import Handle, check_backend, ctx_of, open_handle, parse_device, refuse_subbyte

__all__ = ["load_into", "load_model", "LoadResult"]

#: Default size of the staging buffer for destinations that are not contiguous.
STAGING_BYTES = 64 << 20


class LoadResult(NamedTuple):
    """Names :func:`load_into` did not match (like torch's ``_IncompatibleKeys``).

    Attributes
    ----------
    missing_keys : list of str
        Destination names the checkpoint does not hold (left unchanged).
    unexpected_keys : list of str
        Checkpoint names with no destination (not read).
    """

    missing_keys: List[str]
    unexpected_keys: List[str]


class _Dest(NamedTuple):
    name: str
    tensor: Any          # torch.Tensor or numpy.ndarray
    is_torch: bool
    cuda: bool
    addr: int            # first byte
    nbytes: int
    contiguous: bool


def _shards(filename: PathType, where: str, ctx: Context) -> Dict[str, Optional[Set[str]]]:
    """path -> names the index assigns to it (None: a single file, all names).
    A URL index (``s3://.../model.safetensors.index.json``) is read through
    ``ctx``, and its shards are URLs beside it."""
    p = os.fsdecode(os.fspath(filename))
    if not p.endswith(".json"):
        return {p: None}
    try:
        if _is_url(p):
            raw = _read_object(ctx, p, where)
        else:
            with open(p, "rb") as fh:  # a small JSON index, not payload
                raw = fh.read()
        doc = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise
    except (ValueError, UnicodeDecodeError) as e:
        raise as_reference(_errors.make_error(_errors.ERR_FORMAT, where, f"{_fname(p)}: {e}",
                                              strerror="malformed checkpoint index")) from None
    wm = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise as_reference(_errors.make_error(
            _errors.ERR_FORMAT, where, f"{_fname(p)}: no \"weight_map\" object of name -> shard file",
            strerror="malformed checkpoint index"))
    base = os.path.dirname(p)
    out: Dict[str, Optional[Set[str]]] = {}
    for name, shard in wm.items():
        if os.path.isabs(shard) or ".." in shard.replace("\\", "/").split("/"):
            raise as_reference(_errors.make_error(
                _errors.ERR_FORMAT, where, f"{_fname(p)}: shard {shard!r} is outside the index's folder",
                strerror="malformed checkpoint index"))
        s = out.setdefault(os.path.join(base, shard), set())
        assert s is not None
        s.add(name)
    return out


def _destinations(obj: Any, where: str) -> Tuple[Dict[str, Any], Any]:
    """name -> tensor of a module (its state_dict: parameters and persistent
    buffers, sharing storage) or a mapping; and the torch module or None."""
    torch = _dtypes.torch_module()
    if torch is not None and isinstance(obj, torch.nn.Module):
        return dict(obj.state_dict()), torch
    if not hasattr(obj, "items"):
        raise TypeError(f"{where}: expected a torch.nn.Module or a dict of tensors, got "
                        f"{type(obj).__name__}")
    return dict(obj.items()), torch


def _describe(name: str, t: Any, torch: Any, where: str) -> _Dest:
    import numpy as np

    if torch is not None and isinstance(t, torch.Tensor):
        if t.device.type not in ("cpu", "cuda"):
            raise as_reference(_errors.make_error(
                _errors.ERR_UNSUPPORTED, f"{where}: tensor {name!r}",
                f"destination on device {t.device} (only cpu and cuda)"))
        n = t.numel() * t.element_size()
        return _Dest(name, t, True, t.device.type == "cuda", t.data_ptr() if n else 0, n,
                     bool(t.is_contiguous()))
    if isinstance(t, np.ndarray):
        if not t.flags.writeable:
            raise ValueError(f"{where}: destination {name!r} is a read-only array")
        n = int(t.nbytes)
        return _Dest(name, t, False, False, t.__array_interface__["data"][0] if n else 0, n,
                     bool(t.flags.c_contiguous))
    raise TypeError(f"{where}: destination {name!r} is a {type(t).__name__}, not a tensor or array")


def _dtype_name(d: _Dest) -> str:
    return str(d.tensor.dtype).replace("torch.", "")


def _check(info: TensorInfo, d: _Dest, torch: Any) -> Optional[str]:
    """A mismatch message, or None when ``info`` fits ``d``."""
    try:
        refuse_subbyte(info, "")
        dt = dtype_of(info.dtype)
    except (TypeError, _errors.MemTierError):
        return f"{info.name!r}: the checkpoint's dtype {info.dtype} cannot be loaded"
    shape = tuple(int(x) for x in d.tensor.shape)
    try:
        want = storage_shape(info)
    except ValueError as e:
        return f"{info.name!r}: {e}"
    if shape != tuple(want):
        return (f"size mismatch for {info.name}: copying a param with shape {list(want)} from "
                f"checkpoint, the shape in current model is {list(shape)}")
    if d.is_torch:
        ok = _dtypes.torch_dtype(dt, torch) == d.tensor.dtype
    else:
        from ._alloc import _np_dtype

        ok = _np_dtype(dt).itemsize == d.tensor.dtype.itemsize and \
            (_np_dtype(dt) == d.tensor.dtype or dt.numpy is None)
    if not ok:
        return (f"dtype mismatch for {info.name}: the checkpoint holds {info.dtype} "
                f"({dt.name}), the destination is {_dtype_name(d)}; convert the destination "
                f"(e.g. model.to(dtype)) or the checkpoint")
    return None


def _plan_overlaps(dests: List[_Dest], order: Dict[str, int]) -> Tuple[Set[str], Set[str]]:
    """(names to skip, names to stage) among destinations that share memory.

    Identical ranges (tied weights) are read once: the last in state-dict
    order wins, as sequential copies would leave it. Partial overlaps are
    staged and copied one after another in state-dict order."""
    skip: Set[str] = set()
    stage: Set[str] = set()
    live = sorted((d for d in dests if d.nbytes), key=lambda d: (d.cuda, d.addr, d.addr + d.nbytes))
    groups: List[List[_Dest]] = []
    end = -1
    last_cuda = None
    for d in live:
        if groups and d.cuda == last_cuda and d.addr < end:
            groups[-1].append(d)
            end = max(end, d.addr + d.nbytes)
        else:
            groups.append([d])
            end = d.addr + d.nbytes
            last_cuda = d.cuda
    for g in groups:
        if len(g) < 2:
            continue
        same = all(x.addr == g[0].addr and x.nbytes == g[0].nbytes and x.contiguous for x in g)
        ranked = sorted(g, key=lambda x: order[x.name])
        if same:
            skip.update(x.name for x in ranked[:-1])
        else:
            stage.update(x.name for x in g)
    return skip, stage


def _pieces(d_tensor: Any, offset: int, nbytes: int, budget: int) -> List[Tuple[Any, int, int]]:
    """Split a destination (view) into (sub-view, file offset, bytes) pieces of
    at most ``budget`` bytes along its leading dimensions (C order)."""
    if nbytes <= budget or d_tensor.ndim == 0:
        return [(d_tensor, offset, nbytes)]
    n0 = d_tensor.shape[0]
    row = nbytes // n0
    if row > budget:
        out: List[Tuple[Any, int, int]] = []
        for i in range(n0):
            out.extend(_pieces(d_tensor[i], offset + i * row, row, budget))
        return out
    per = max(1, budget // row)
    return [(d_tensor[i:i + per], offset + i * row, row * len(range(i, min(n0, i + per))))
            for i in range(0, n0, per)]


def _copy(dst: Any, staged_bytes: Any, torch: Any, is_torch: bool) -> None:
    """Copy raw bytes (a numpy uint8 view of the staging buffer) into ``dst``."""
    import numpy as np

    if is_torch:
        src = torch.from_numpy(staged_bytes).view(dst.dtype).reshape(dst.shape)
        with torch.no_grad():
            dst.copy_(src)
    else:
        np.copyto(dst, staged_bytes.view(dst.dtype).reshape(dst.shape), casting="no")


def _stage(h: Handle, items: List[Tuple[TensorInfo, _Dest]], budget: int, torch: Any,
           where: str) -> None:
    """Read ``items`` through one staging buffer of ``budget`` bytes, batching
    pieces into one memtier_load_chunks call per fill, in the given order."""
    import numpy as np

    from .._chunks import _load_rows

    if not items:
        return
    pieces: List[Tuple[Any, int, int, bool]] = []
    for info, d in items:
        for view, off, n in _pieces(d.tensor, info.offset, info.nbytes, budget):
            pieces.append((view, off, n, d.is_torch))
    total = max(n for _, _, n, _ in pieces)
    buf = np.empty(min(budget, max(total, sum(n for _, _, n, _ in pieces))), dtype=np.uint8)
    base = buf.__array_interface__["data"][0]
    i = 0
    while i < len(pieces):
        batch: List[Tuple[Any, int, int, bool]] = []
        used = 0
        while i < len(pieces) and (not batch or used + pieces[i][2] <= buf.size):
            batch.append(pieces[i])
            used += pieces[i][2]
            i += 1
        pos = np.cumsum([0] + [n for _, _, n, _ in batch[:-1]]).astype(np.uint64)
        h.check_unchanged(where)
        _load_rows(h.ctx, h.path, np.array([o for _, o, _, _ in batch], dtype=np.uint64),
                   np.array([n for _, _, n, _ in batch], dtype=np.uint64), np.uint64(base) + pos,
                   where, TARGET_CPU)
        h.check_unchanged(where)
        for (view, _, n, is_t), p in zip(batch, pos.tolist()):
            _copy(view, buf[p:p + n], torch, is_t)


def _load_shard(h: Handle, work: List[Tuple[TensorInfo, _Dest]], staged: List[Tuple[TensorInfo, _Dest]],
                budget: int, torch: Any, where: str) -> None:
    index = {info.name: k for k, info in enumerate(h.infos)}
    for cuda in (False, True):
        addrs = [0] * len(h.infos)
        any_ = False
        for info, d in work:
            if d.cuda == cuda and d.nbytes:
                addrs[index[info.name]] = d.addr
                any_ = True
        if any_:
            if cuda:
                _context._sync_torch_stream(next(d.tensor for _, d in work if d.cuda))
            h.read_all(addrs, TARGET_CUDA if cuda else TARGET_CPU, where)
    _stage(h, staged, budget, torch, where)


@bridge
def load_into(state_dict_or_module: Any, filename: PathType, *, strict: bool = True,
              device: Any = None, staging_bytes: int = STAGING_BYTES,
              ctx: Optional[Context] = None) -> LoadResult:
    """Read a checkpoint straight into existing tensors (a module's, or a dict's).

    Parameters
    ----------
    state_dict_or_module : torch.nn.Module or dict of str -> tensor/array
        A module: the tensors of ``module.state_dict()`` (parameters and
        persistent buffers; their storage is written in place). A dict: torch
        tensors (CPU or CUDA) or writable numpy arrays.
    filename : str or os.PathLike
        A safetensors file, or a ``*.index.json`` whose ``weight_map`` maps
        names to shard files in the index's folder (as transformers writes
        ``model.safetensors.index.json``); shards are read in parallel.
    strict : bool, keyword-only
        True: raise :class:`StateDictError` (a RuntimeError) when a
        destination name is missing from the checkpoint or a checkpoint name
        has no destination; nothing is written then.
    device : optional, keyword-only
        Checked as ``load_file``'s ``device`` and otherwise unused: each
        tensor's bytes go where its destination lives.
    staging_bytes : int, keyword-only
        Size of the one staging buffer used for destinations that cannot be
        written directly (non-contiguous, overlapping); default 64 MiB.
    ctx : Context, optional

    Returns
    -------
    LoadResult
        ``(missing_keys, unexpected_keys)``, sorted lists.

    Raises
    ------
    StateDictError
        Shape or dtype mismatch (all listed, nothing written; no silent
        cast), or missing/unexpected names with ``strict``.
    FormatError
        A malformed safetensors file or index; a name the index assigns to a
        shard that lacks it.
    NotFoundError
        A file or shard is missing.
    UnsupportedError
        A destination on a device other than cpu/cuda, or CUDA destinations
        without a usable CUDA target.

    Not thread-safe with respect to the destinations: nothing else may use
    them during the call.
    """
    where = "memtier.safetensors.load_into"
    if device is not None:
        parse_device(device, where)
    if staging_bytes <= 0:
        raise ValueError(f"{where}: staging_bytes must be positive, got {staging_bytes}")
    c = ctx_of(ctx)
    dests, torch = _destinations(state_dict_or_module, where)
    return _load_opened(state_dict_or_module, dests, torch, _shards(filename, where, c), {},
                        strict, staging_bytes, c, where)


def _load_opened(state_dict_or_module: Any, dests: Dict[str, Any], torch: Any, shards: Dict[str, Optional[Set[str]]],
                 opened: Dict[str, Handle], strict: bool, staging_bytes: int, c: Context,
                 where: str) -> LoadResult:
    """:func:`load_into` once its arguments are checked: ``dests`` (name ->
    tensor, as :func:`_destinations` gives) from the ``shards`` of
    :func:`_shards`; ``opened``: handles of some of those paths already open
    (load_model's, which read their names), used instead of opening them
    again. Closes every handle, those of ``opened`` too."""
    order = {k: i for i, k in enumerate(dests)}
    handles: List[Handle] = list(opened.values())
    try:
        plan: List[Tuple[Handle, List[Tuple[TensorInfo, Any]]]] = []
        seen: Set[str] = set()
        for path, names in shards.items():
            h = opened.get(path)
            if h is None:
                h = open_handle(c, path, where)
                handles.append(h)
            if names is not None:
                absent = sorted(names - set(h.by_name))
                if absent:
                    raise as_reference(_errors.make_error(
                        _errors.ERR_FORMAT, where,
                        f"{_fname(path)} lacks {absent[:5]} that the index assigns to it",
                        strerror="malformed checkpoint index"))
            infos = [i for i in h.infos if names is None or i.name in names]
            plan.append((h, [(i, None) for i in infos]))
            seen.update(i.name for i in infos)
        unexpected = sorted(seen - set(dests))
        missing = sorted(set(dests) - seen)
        if strict and (missing or unexpected):
            raise _strict_error(state_dict_or_module, missing, unexpected)
        descs = {k: _describe(k, v, torch, where) for k, v in dests.items() if k in seen}
        problems = []
        for _, items in plan:
            for info, _ in items:
                if info.name in descs:
                    why = _check(info, descs[info.name], torch)
                    if why:
                        problems.append((order[info.name], why))
        if problems:
            # in the destination's order (a module's: its state_dict order), as
            # load_state_dict lists them, not the file's (data-offset) order
            problems.sort()
            raise StateDictError(f"Error(s) in loading state_dict for "
                                 f"{type(state_dict_or_module).__name__}:\n\t" +
                                 "\n\t".join(why for _, why in problems))
        if any(d.cuda for d in descs.values()):
            _context._require_cuda(c, f"{where}: CUDA destinations")
        skip, stage = _plan_overlaps(list(descs.values()), order)
        jobs = []
        for h, items in plan:
            direct, staged = [], []
            for info, _ in items:
                d = descs.get(info.name)
                if d is None or info.name in skip or not d.nbytes:
                    continue
                if d.contiguous and info.name not in stage:
                    direct.append((info, d))
                else:
                    staged.append((info, d))
            staged.sort(key=lambda x: order[x[0].name])
            jobs.append((h, direct, staged))
        if len(jobs) == 1:
            _load_shard(*jobs[0], staging_bytes, torch, where)
        else:
            with ThreadPoolExecutor(max_workers=min(len(jobs), 8)) as ex:
                for f in [ex.submit(_load_shard, h, d, s, staging_bytes, torch, where)
                          for h, d, s in jobs]:
                    f.result()
        return LoadResult(missing, unexpected)
    finally:
        for h in handles:
            h.close()


def _strict_error(obj: Any, missing: Any, unexpected: Any) -> StateDictError:
    """The reference's (and torch's) strict-mode message."""
    error = f"Error(s) in loading state_dict for {obj.__class__.__name__}:"
    if missing:
        error += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(missing))
    if unexpected:
        error += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
    return StateDictError(error)


# ---------------------------------------------------------------- load_model
# The reference's shared-tensor handling (safetensors/torch.py 0.8,
# _find_shared_tensors / _remove_duplicate_names), so that load_model reports
# the same (missing, unexpected) for tied weights: a name whose storage it
# shares with another kept name is neither missing nor loaded separately.


def _storage(t: Any) -> Tuple[int, int]:
    try:
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    except Exception:  # meta tensors
        return 0, 0


def _end_ptr(t: Any) -> int:
    return (t.view(-1)[-1].data_ptr() + t.element_size()) if t.nelement() else t.data_ptr()


def _shared_groups(sd: Dict[str, Any], torch: Any) -> List[Set[str]]:
    groups: Dict[Tuple[Any, int, int], Set[str]] = {}
    meta = torch.device("meta")  # made once: a torch.device per tensor costs more than the test
    for k, v in sd.items():
        ptr, size = _storage(v)
        if ptr != 0 and size != 0 and v.device != meta:
            groups.setdefault((v.device, ptr, size), set()).add(k)
    out: List[Set[str]] = []
    for shared in sorted(groups.values(), key=lambda s: sorted(s)):
        if len(shared) < 2:
            out.append(shared)
            continue
        areas = sorted((sd[n].data_ptr(), _end_ptr(sd[n]), n) for n in shared)
        _, last_stop, last_name = areas[0]
        out.append({last_name})
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                out.append({name})
            else:
                out[-1].add(name)
            last_stop = stop
    return out


def _covers(t: Any) -> bool:
    """True when ``t`` spans its whole storage (one storage look-up)."""
    ptr, size = _storage(t)
    return t.data_ptr() == ptr and t.nelement() * t.element_size() == size


def _to_remove(sd: Dict[str, Any], preferred: Set[str], torch: Any) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    for shared in _shared_groups(sd, torch):
        complete = {n for n in shared if _covers(sd[n])}
        if not complete:
            raise RuntimeError(
                f"Error while trying to find names to remove to save state dict, but found no suitable "
                f"name to keep for saving amongst: {shared}. None is covering the entire storage."
                "Refusing to save/load the model since you could be storing much more memory than "
                "needed. Please refer to https://huggingface.co/docs/safetensors/torch_shared_tensors "
                "for more information. Or open an issue.")
        keep = sorted(complete)[0]
        pref = preferred.intersection(complete)
        if pref:
            keep = sorted(pref)[0]
        for n in sorted(shared):
            if n != keep:
                out.setdefault(keep, []).append(n)
    return out


@bridge
def load_model(model: Any, filename: PathType, strict: bool = True, device: Any = "cpu", *,
               backend: str = "mmap", ctx: Optional[Context] = None) -> Tuple[Set[str], List[str]]:
    """``safetensors.torch.load_model`` on :func:`load_into`: the bytes go into the model's storage.

    Parameters
    ----------
    model : torch.nn.Module
    filename : str or os.PathLike
        A safetensors file or a sharded checkpoint's ``*.index.json``.
    strict : bool
        Raise RuntimeError (:class:`StateDictError`, the reference's message)
        when names are missing or unexpected after the shared-tensor rules.
    device : str or int
        Checked, not used (the model's tensors decide where bytes go).
    backend : {"mmap", "pread"}, keyword-only
        Checked, no effect (see the package docstring).
    ctx : Context, keyword-only, optional

    Returns
    -------
    (missing, unexpected) : (set of str, list of str)
        As the reference: names of the model not loaded, names of the file
        not used. A name tied to another (shared storage, e.g. tied
        embeddings) is not missing when the file holds the kept name, and is
        reported unexpected when the file holds both.

    Raises
    ------
    StateDictError
        Shape/dtype mismatch (nothing written), or ``strict`` failures
        (raised after loading, as the reference).
    Errors of :func:`load_into`.

    Not thread-safe with respect to the model.
    """
    where = "memtier.safetensors.load_model"
    check_backend(backend, where)
    parse_device(device, where)
    torch = _dtypes.torch_module()
    if torch is None:
        raise ImportError(f"{where} needs torch")
    c = ctx_of(ctx)
    shards = _shards(filename, where, c)
    opened: Dict[str, Handle] = {}
    try:
        # one open per file and one state_dict: the names they give serve
        # the shared-tensor rules and the load itself
        file_names = _file_names(shards, c, where, opened)
        sd = model.state_dict()
        removes = _to_remove(sd, file_names, torch)
        res = _load_opened(model, dict(sd), torch, shards, opened, False, STAGING_BYTES, c,
                           "memtier.safetensors.load_into")
    finally:
        for h in opened.values():
            h.close()
    missing = set(res.missing_keys)
    unexpected = list(res.unexpected_keys)
    for group in removes.values():
        for name in group:
            if name not in missing:
                unexpected.append(name)
            else:
                missing.remove(name)
    if strict and (missing or unexpected):
        raise _strict_error(model, missing, unexpected)
    return missing, unexpected


def _file_names(shards: Dict[str, Optional[Set[str]]], c: Context, where: str,
                opened: Dict[str, Handle]) -> Set[str]:
    """Every tensor name of the checkpoint: the index's, or the file's (its
    handle opened into ``opened``, which the caller closes)."""
    names: Set[str] = set()
    for path, sel in shards.items():
        if sel is not None:
            names.update(sel)
            continue
        h = open_handle(c, path, where)
        opened[path] = h
        names.update(h.by_name)
    return names
