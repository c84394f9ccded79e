"""MemTier: read byte ranges of files into memory by the fastest correct path.

MemTier is a Go runtime (``libmemtier.so``, C API ``include/memtier.h``) that
reads ranges of model weights, checkpoints, dataset samples or KV blocks with
parallel ``pread``, ``O_DIRECT`` and a userspace DRAM block cache. This
package binds it with cffi in ABI mode; ``read_into``, ``read`` and ``readv``
also have a compiled path (``memtier._fast``, cffi API mode), used when the
install built it (``runtime_info()["python_fast_path"]``).

Quick use::

    import memtier, numpy as np
    buf = np.empty(1 << 20, dtype=np.uint8)
    memtier.read_into("weights.bin", 0, buf)          # default context
    t = memtier.load_tensor("weights.bin", 4096, (1024, 1024), "bfloat16")
    with memtier.Context(cache_bytes=8 << 30, io_threads=8) as ctx:
        data = ctx.read("weights.bin", 0, 4096)
        print(ctx.stats().cache_hit_bytes)

More
    ``memtier.load_chunks`` / ``memtier.iter_chunks``: many (offset, size)
    chunks of one file in one call (streamed in completion order).
    ``memtier.safetensors``: ``load_file`` / ``safe_open`` for safetensors
    files. ``memtier.MemTierDataset`` (packed samples; ``python -m
    memtier.pack`` makes them) and ``memtier.TarShardDataset`` (WebDataset
    tar shards): map-style torch datasets.

Loading
    ``import memtier`` does not load the library (nor torch, nor numpy): it is
    opened on first use, once per process, from ``$MEMTIER_LIBRARY``, else the
    packaged ``memtier/_lib/libmemtier.so``, else
    ``ctypes.util.find_library("memtier")``. A failure raises
    :class:`LibraryLoadError` (an ImportError and a RuntimeError) listing each
    path tried with its dlerror text.

Fork
    The Go runtime does not survive ``fork()``. In a child forked after the
    parent loaded MemTier every call raises :class:`ForkError` at once; use
    ``multiprocessing_context="spawn"`` or ``"forkserver"`` (torch DataLoader,
    multiprocessing), or do not use MemTier in the parent before forking. A
    child whose parent never loaded it works normally.

Freshness
    ``Context(freshness="strict")`` (the default) checks an open file on every
    read (one fstat), so a file rewritten in place is never served stale;
    ``"interval"`` trusts a file checked less than ``freshness_interval_ms``
    ago; ``"open"`` checks only when the file is opened (immutable data: a
    rewrite may be served stale until :func:`drop_cache`). One call can trust
    the file with ``immutable=True`` (``READ_IMMUTABLE``) on ``read_into``,
    ``read``, ``readv`` and ``read_into_tensor``. ``Stats.revalidations``
    counts the checks. Environment: ``MEMTIER_FRESHNESS``,
    ``MEMTIER_FRESHNESS_INTERVAL_MS``.

Signals
    Ctrl-C is delivered between C calls; reads above :data:`CHUNK_BYTES` are
    split so it lands within one piece. A call on the main thread that waits
    on a remote server (``s3://``, ``http(s)://``) takes it within about
    50 ms: the library runs an interrupt check on the waiting thread, stops
    the context's remote requests and the call raises ``KeyboardInterrupt``
    (``memtier._interrupt``). :meth:`Context.interrupt` does the same from
    another thread (the calls raise :class:`CallInterruptedError`).

Errors (``memtier_status`` -> exception; all derive from :class:`MemTierError`
with ``.code``, ``.name`` and ``.detail``):

======================  ==================================================
INVALID_ARG             InvalidArgumentError (ValueError)
NOT_FOUND               NotFoundError (FileNotFoundError)
PERMISSION              PermissionDeniedError (PermissionError)
EOF                     EndOfFileError (EOFError)
IO, NOMEM               MemTierError
UNSUPPORTED             UnsupportedError (NotImplementedError)
CLOSED                  ClosedError (ValueError)
BUSY                    BusyError
TIMEOUT                 MemTierTimeoutError (TimeoutError)
FORMAT                  FormatError (ValueError)
IS_DIR                  IsDirectoryError (IsADirectoryError)
INTERNAL                InternalError
FORKED                  ForkError (RuntimeError)
DIRECT_IO               DirectIOError
NOT_REGULAR             NotRegularFileError (OSError)
INTERRUPTED             CallInterruptedError (Context.interrupt from another
                        thread); Ctrl-C raises KeyboardInterrupt instead
======================  ==================================================

GPU
    A CUDA torch tensor or any object with ``__cuda_array_interface__`` is a
    device destination (``read_into``, ``read_into_tensor``, ``load_chunks``
    ``out``); ``load_tensor(..., device="cuda:N")``,
    ``memtier.safetensors.load_file(path, device="cuda")``, ``safe_open(...,
    device="cuda")`` and ``MemTierDataset(..., target="cuda")`` return device
    tensors. Where CUDA cannot be used (no torch.cuda, a library built without
    the CUDA backend, no libcuda) they raise :class:`UnsupportedError` naming
    the missing piece, with the text of :func:`gpu_info`. CPU work never
    initialises CUDA.

Environment
    ``MEMTIER_LIBRARY``: library to load. ``MEMTIER_*`` settings (see the
    README) apply to every new :class:`Context`. ``MEMTIER_LOG=warn|info|debug``: fallbacks and
    policy decisions on stderr (``memtier: LEVEL: ...``; see :mod:`memtier._log`). ``MEMTIER_PY_FORCE_NO_TORCH=1``:
    behave as if torch were not importable (numpy results, tensors refused).
"""

from typing import Any as _Any

from ._context import (
    CHUNK_BYTES,
    CONFIG_KEYS,
    READ_BUFFERED,
    FRESHNESS_INTERVAL,
    FRESHNESS_OPEN,
    FRESHNESS_STRICT,
    READ_DEFAULT,
    READ_DIRECT,
    READ_IMMUTABLE,
    READ_ONCE,
    READ_WILL_REUSE,
    Context,
    ReadFlag,
    Decision,
    Request,
    Stats,
    default_context,
    drop_cache,
    explain,
    gpu_info,
    prefetch,
    read,
    read_async,
    read_into,
    readv,
    reset_stats,
    runtime_info,
    stats,
)
from . import _errors
from ._errors import (
    BusyError,
    ClosedError,
    DirectIOError,
    EndOfFileError,
    CallInterruptedError,
    ForkError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    IsDirectoryError,
    LibraryLoadError,
    MemTierError,
    MemTierTimeoutError,
    NotFoundError,
    NotRegularFileError,
    PermissionDeniedError,
    UnsupportedError,
)
from ._chunks import ChunkStream, iter_chunks, load_chunks
from ._ffi import PACKAGE_VERSION as __version__
from ._tensor import load_tensor, read_into_tensor

__all__ = [
    "__version__",
    "Context",
    "Request",
    "Stats",
    "Decision",
    "default_context",
    "runtime_info",
    "gpu_info",
    "patch_safetensors",
    "unpatch_safetensors",
    "read",
    "read_into",
    "readv",
    "read_async",
    "prefetch",
    "stats",
    "reset_stats",
    "drop_cache",
    "explain",
    "read_into_tensor",
    "load_tensor",
    "load_chunks",
    "iter_chunks",
    "ChunkStream",
    "ReadFlag",
    "READ_DEFAULT",
    "READ_ONCE",
    "READ_WILL_REUSE",
    "READ_DIRECT",
    "READ_BUFFERED",
    "READ_IMMUTABLE",
    "FRESHNESS_STRICT",
    "FRESHNESS_INTERVAL",
    "FRESHNESS_OPEN",
    "CHUNK_BYTES",
    "CONFIG_KEYS",
    # the exception classes, listed once in _errors
    *(n for n in _errors.__all__ if n.endswith("Error")),
]


# memtier.integrations imports neither torch nor safetensors.
from .integrations import patch_safetensors, unpatch_safetensors  # noqa: E402
from .integrations import _patch as _integrations_patch  # noqa: E402

# MEMTIER_PATCH_SAFETENSORS=1: route safetensors' readers through MemTier for the
# whole process (imports nothing now; safetensors is patched when it is imported).
_integrations_patch.apply_env()


def __getattr__(name: str) -> _Any:  # PEP 562: optional parts, imported on first access
    if name == "MemTierDataset":  # memtier/dataset.py (may import torch: not at import)
        from .dataset import MemTierDataset

        return MemTierDataset
    if name == "TarShardDataset":  # memtier/webdataset.py (may import torch: not at import)
        from .webdataset import TarShardDataset

        return TarShardDataset
    if name in ("safetensors", "pack", "webdataset", "dataset", "integrations"):  # submodules
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'memtier' has no attribute {name!r}")
