"""A torch Distributed Checkpoint (``torch.distributed.checkpoint``) reader that reads through MemTier.

:class:`MemTierFileSystemReader` is torch's ``FileSystemReader`` (same
constructor, same checkpoint layout, written by ``FileSystemWriter``) whose
file reads go through a :class:`memtier.Context`: the ``.metadata`` file in
one read, and each data file's items in batched ``readv`` calls (their
``(offset, length)`` ranges, up to ``staging_bytes`` at a time) into buffers
from which each item is decoded and copied into its destination, as torch's
reader does::

    import torch.distributed.checkpoint as dcp
    from memtier.integrations.dcp import MemTierFileSystemReader
    dcp.load(state_dict, storage_reader=MemTierFileSystemReader("ckpt_dir"))

Items of the default format (``SerializationFormat.TORCH_SAVE``) are
``torch.save`` blobs, so a tensor is decoded with ``torch.load`` from the
bytes MemTier read and then copied into the planner's tensor: not straight
into it (the blob is a zip archive, not the raw payload). Stream transforms
(DCP's experimental extensions) are applied as torch applies them.

Importing this module imports torch.
"""

from __future__ import annotations

import io
import os
from typing import Any, Dict, Iterator, List, Optional

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner
from torch.futures import Future

from .. import _context
from .._context import Context

__all__ = ["MemTierFileSystemReader"]

DEFAULT_STAGING_BYTES = 256 << 20


class _MemTierStreams:
    """Stands for the reader's ``fs`` (torch's local ``FileSystem``) and
    opens files for reading through MemTier; everything else is torch's."""

    def __init__(self, inner: Any, reader: "MemTierFileSystemReader") -> None:
        self._inner = inner
        self._reader = reader

    def create_stream(self, path: Any, mode: str) -> Any:
        if mode != "rb":
            return self._inner.create_stream(path, mode)
        return _WholeFile(self._reader._read_whole(path))

    def __getattr__(self, name: str) -> Any:  # concat_path, init_path, ...
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _WholeFile:
    """A context manager yielding a BytesIO of a file's bytes (a small file: ``.metadata``)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __enter__(self) -> io.BytesIO:
        return io.BytesIO(self._data)

    def __exit__(self, *exc: Any) -> None:
        return None


def _narrow(t: torch.Tensor, offsets: Any, lengths: Any) -> torch.Tensor:
    """The part of a saved chunk that a read item asks for."""
    for dim, (off, n) in enumerate(zip(offsets, lengths)):
        if off != 0 or n != t.size(dim):
            t = t.narrow(dim, off, n)
    return t


class MemTierFileSystemReader(FileSystemReader):
    """torch's ``FileSystemReader``, with the checkpoint's files read by MemTier.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint directory (as ``FileSystemReader``).
    _extension_registry : optional
        Passed to ``FileSystemReader`` (torch's experimental extensions).
    ctx : Context, keyword-only, optional
        The context that reads (its stats count the bytes). Default: the
        process's default context.
    staging_bytes : int, keyword-only
        At most this many bytes of one file's items are read before they are
        decoded and copied (one item larger than that is read alone), so the
        extra memory is bounded whatever the checkpoint size. Default 256 MiB.
    immutable : bool, keyword-only
        True: trust the files as last checked (``memtier.READ_IMMUTABLE``; no
        freshness check per read). Default False.

    Raises
    ------
    ValueError
        ``staging_bytes`` is not positive.
    TypeError
        ``ctx`` is not a :class:`memtier.Context`.

    Reads raise MemTier's errors (:class:`memtier.NotFoundError` for a
    missing file, :class:`memtier.EndOfFileError` for an item past the end of
    a truncated file). One reader serves one load at a time, as torch's.
    """

    def __init__(self, path: "str | os.PathLike[str]", _extension_registry: Any = None, *,
                 ctx: Optional[Context] = None, staging_bytes: int = DEFAULT_STAGING_BYTES,
                 immutable: bool = False) -> None:
        if ctx is not None and not isinstance(ctx, Context):
            raise TypeError(f"MemTierFileSystemReader: ctx must be a memtier.Context or None, "
                            f"got {type(ctx).__name__}")
        if isinstance(staging_bytes, bool) or not isinstance(staging_bytes, int) or staging_bytes <= 0:
            raise ValueError(f"MemTierFileSystemReader: staging_bytes must be a positive int, "
                             f"got {staging_bytes!r}")
        super().__init__(path, _extension_registry)
        self.ctx = ctx
        self.staging_bytes = staging_bytes
        self.immutable = bool(immutable)
        self.fs = _MemTierStreams(self.fs, self)

    def _context(self) -> Context:
        return self.ctx if self.ctx is not None else _context.default_context()

    def _read_whole(self, path: Any) -> bytes:
        """Every byte of ``path`` in one MemTier read (the ``.metadata`` file)."""
        size = os.stat(path).st_size
        return self._context().read(path, 0, size, immutable=self.immutable)

    def _batches(self, infos: List[Any]) -> Iterator[List[int]]:
        """Indices of ``infos`` in file order, grouped up to ``staging_bytes``."""
        order = sorted(range(len(infos)), key=lambda i: infos[i].offset)
        batch: List[int] = []
        size = 0
        for i in order:
            n = infos[i].length
            if batch and size + n > self.staging_bytes:
                yield batch
                batch, size = [], 0
            batch.append(i)
            size += n
        if batch:
            yield batch

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        """Read every item of ``plan`` and hand it to ``planner`` (the
        ``StorageReader`` method ``torch.distributed.checkpoint.load`` calls).
        Returns a completed Future. Raises MemTier's read errors, and
        ValueError when a saved chunk's shape is not the destination's."""
        import numpy as np

        ctx = self._context()
        per_file: Dict[str, List[Any]] = {}
        for req in plan.items:
            per_file.setdefault(self.storage_data[req.storage_index].relative_path, []).append(req)
        for rel, reqs in per_file.items():
            path = self.fs.concat_path(self.path, rel)
            infos = [self.storage_data[r.storage_index] for r in reqs]
            for batch in self._batches(infos):
                bufs = [np.empty(infos[i].length, dtype=np.uint8) for i in batch]
                ranges = np.array([(infos[i].offset, infos[i].length) for i in batch], dtype=np.int64)
                ctx.readv(path, ranges.reshape(-1, 2), out=bufs, immutable=self.immutable)
                for i, buf in zip(batch, bufs):
                    self._deliver(reqs[i], infos[i], buf, planner)
        fut: Future = Future()
        fut.set_result(None)
        return fut

    def _deliver(self, req: Any, info: Any, buf: Any, planner: LoadPlanner) -> None:
        """Decode one item's bytes and give them to the planner."""
        stream: Any = io.BytesIO(memoryview(buf))
        descriptors = getattr(info, "transform_descriptors", None) or ()
        if descriptors:
            stream = self.transforms.transform_load_stream(req, descriptors, stream)
        if req.type == LoadItemType.BYTE_IO:
            planner.load_bytes(req, io.BytesIO(stream.read()))
            return
        if not stream.seekable():  # torch.load needs to seek
            stream = io.BytesIO(stream.read())
        saved = torch.load(stream, map_location="cpu", weights_only=True)
        tensor = _narrow(saved, req.storage_offsets, req.lengths)
        target = planner.resolve_tensor(req).detach()
        if target.size() != tensor.size():
            raise ValueError(f"MemTierFileSystemReader: item {req.storage_index} of {info.relative_path} "
                             f"has shape {tuple(tensor.size())}, the destination {tuple(target.size())}")
        target.copy_(tensor)
        planner.commit_tensor(req, target)

