"""Many chunks of one file in one call: :func:`load_chunks` and :func:`iter_chunks`.

A chunk is an ``(offset, size)`` byte range of one file: a RAG chunk, a
KV-cache block, an index block, a row range of a tensor. Both functions bind
``memtier_load_chunks`` / ``memtier_load_chunks_async`` of ``memtier.h``: the
library sorts the chunks by offset, coalesces adjacent ones into larger reads,
runs the reads in parallel on the context's I/O workers and writes each
chunk's bytes straight into its own destination (no staging copy).

The ``memtier_chunk_t`` array handed to the library is built with numpy (a
structured dtype with the C struct's layout), not element by element through
cffi, so 100,000 chunks cost a few numpy operations in Python.

The reads themselves are in :mod:`._chunkio`; this module adds the
default context. Units are bytes. Every function here is thread-safe; the GIL is released
while the library reads.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from . import _chunkio, _context
from ._chunkio import ChunkStream as ChunkStream, _load_rows as _load_rows  # noqa: F401  (re-exported)
from ._context import Context
from ._paths import PathType

__all__ = ["load_chunks", "iter_chunks", "ChunkStream"]


def load_chunks(path: PathType, chunks: Any, out: Optional[Sequence[Any]] = None, *,
                ctx: Optional[Context] = None) -> List[Any]:
    """Read many ``(offset, size)`` chunks of one file, each into its own buffer.

    Parameters
    ----------
    path : str, bytes or os.PathLike
    chunks : iterable of (offset, size) pairs, or an (n, 2) integer numpy array
        Byte offsets and sizes. Sizes may be 0; chunks may overlap, repeat and
        come in any order.
    out : sequence of writable buffers, optional
        One destination per chunk (``bytearray``, ``memoryview``, numpy
        arrays of any dtype, contiguous torch tensors, or the rows of a
        2-D numpy array / tensor); each must hold at least its chunk's size
        (the first ``size`` bytes are written). Device buffers (CUDA tensors,
        objects with ``__cuda_array_interface__``) use the GPU target; one
        call takes host buffers only or device buffers only. Default: one new
        ``numpy.uint8`` buffer for all chunks, returned as per-chunk views.
    ctx : Context, optional
        Default: the process's default context.

    Returns
    -------
    list
        Chunk ``k`` at index ``k``: a 1-D ``numpy.uint8`` array of exactly
        ``size`` bytes (views of one shared buffer), or ``out[k]`` itself.

    Raises
    ------
    TypeError, ValueError
        Before any I/O: ``chunks`` is not (n, 2) non-negative integers, a
        size is 2**63 or more, ``out`` has the wrong length, a buffer is
        too small, read-only or not contiguous.
    EndOfFileError, NotFoundError, PermissionDeniedError, MemTierError
        The failure of the lowest-index failed chunk, like the C API; the
        message names the chunk (``chunk 7 (offset ..., size ...)``),
        ``exc.index`` is its index and ``exc.results`` the int64 array of
        per-chunk results (bytes read, or a negative status). The other
        chunks were still read (into ``out``, when given). With no ``out``
        and more than :data:`memtier.CHUNK_BYTES` in all, the library is
        asked first (``memtier_explain``, no I/O): a chunk past the end of
        the file raises before the buffer is allocated (no ``results`` then),
        not MemoryError.

    Notes
    -----
    One ``memtier_load_chunks`` call per group of chunks totalling at most
    :data:`memtier.CHUNK_BYTES` (64 MiB), so Ctrl-C is delivered between
    groups. Thread-safe; the GIL is released while reading.
    """
    return _chunkio.load(_context._ctx(ctx), path, chunks, out)


def iter_chunks(path: PathType, chunks: Any, out: Optional[Sequence[Any]] = None, *,
                ctx: Optional[Context] = None) -> ChunkStream:
    """Read chunks like :func:`load_chunks`, yielding each as soon as it is read.

    Parameters
    ----------
    path, chunks, out, ctx
        As :func:`load_chunks` (validated here, before any I/O).

    Returns
    -------
    ChunkStream
        An iterator of ``(index, data)`` in completion order, each index
        exactly once (see :class:`ChunkStream`); use it in a ``with`` block
        (or call ``close()``) to release it deterministically. The reads
        start now, in one ``memtier_load_chunks_async`` call.

    Raises
    ------
    TypeError, ValueError
        Bad ``chunks`` or ``out`` (before any I/O).
    MemTierError
        The library refused the request (argument errors); I/O errors of a
        chunk are raised by ``next()`` when that chunk is reported. With no
        ``out`` and more than :data:`memtier.CHUNK_BYTES` in all, a chunk the
        library would refuse before any I/O (past the end of the file, a
        missing file) raises here, as :func:`load_chunks` does, before the
        buffer is allocated.
    """
    return _chunkio.stream(_context._ctx(ctx), path, chunks, out)
