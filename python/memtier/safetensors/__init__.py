"""safetensors files through MemTier: a drop-in for the reading side of Hugging Face's safetensors.

The format is the one published by Hugging Face's safetensors project
(https://github.com/huggingface/safetensors): an 8-byte little-endian header
length N, N bytes of UTF-8 JSON mapping tensor names to ``{"dtype", "shape",
"data_offsets": [begin, end]}`` (plus an optional ``"__metadata__"`` object of
strings), then the data section; offsets are relative to its first byte.
libmemtier.so parses and validates the header (``memtier_safetensors_open``,
see ``include/memtier.h``) and reads the payloads; this package allocates the
destinations (or, for :func:`load_into`, uses the caller's).

Counterparts of the reference's reading API (safetensors 0.8), same arguments,
keywords and defaults:

=====================================================  ==========================================
reference                                              MemTier
=====================================================  ==========================================
``safetensors.safe_open(f, framework, device, *,      :class:`safe_open` (``framework`` may be
backend)`` and its ``keys``, ``offset_keys``,           omitted: torch when importable), same
``metadata``, ``get_tensor``, ``get_tensors``,          methods; :class:`SafeSlice`
``get_slice`` (``get_shape``, ``get_dtype``, ``[]``)
``safetensors.deserialize(bytes)``                     :func:`deserialize`
``safetensors.torch.load_file(f, device, *, backend)``  :func:`memtier.safetensors.torch.load_file`
``safetensors.torch.load(bytes)``                      :func:`memtier.safetensors.torch.load`
``safetensors.torch.load_model(model, f, strict,       :func:`memtier.safetensors.torch.load_model`
device, *, backend)``                                  (= :func:`load_model`, on :func:`load_into`)
``safetensors.numpy.load_file(f, *, backend)``         :func:`memtier.safetensors.numpy.load_file`
``safetensors.numpy.load(bytes)``                      :func:`memtier.safetensors.numpy.load`
``safetensors.SafetensorError``                        :class:`SafetensorError` (raised errors are
                                                       also ``safetensors.SafetensorError``)
=====================================================  ==========================================

``backend=`` ("mmap", the default, or "pread"; anything else is refused as
the reference refuses it) is accepted and checked but changes nothing here:
MemTier never maps the file; it reads with its own engine (buffered pread,
O_DIRECT, its DRAM cache, batched and parallel) into memory the tensors own.

::

    from memtier.safetensors import load_file, safe_open, load_into
    state = load_file("model.safetensors")              # dict name -> tensor
    with safe_open("model.safetensors", framework="pt") as f:
        print(f.keys(), f.metadata())
        rows = f.get_slice("embeddings.weight")[1000:2000]   # reads only those rows
    load_into(model, "model.safetensors")                # into the model's own storage
    load_into(model, "model.safetensors.index.json")     # a sharded checkpoint

Differences from the reference, kept on purpose (each with its reason):

* Every tensor owns its memory (never a view of an mmap of the file), so a
  file overwritten or truncated after loading cannot change or crash tensors
  already loaded (field case B11). Each tensor of :func:`load_file` has its own
  allocation, so keeping one frees the others; the reads still go out as one
  ``memtier_safetensors_load_all`` call into the per-tensor destinations.
* :func:`load_into` / :func:`load_model` refuse a dtype mismatch
  (:class:`StateDictError`) where the reference's ``load_state_dict`` casts
  silently: a silent cast hides a wrong checkpoint, and reading in place is
  the point. They check names, shapes and dtypes before writing anything
  (the reference raises for missing/unexpected names after loading). Modules
  with custom ``_load_from_state_dict`` hooks are not consulted: bytes go to
  the tensors ``module.state_dict()`` lists.
* ``load_model``'s ``device=`` is checked but not used: the bytes go straight
  into the model's tensors wherever they live (the reference loads to
  ``device`` first and then copies).
* ``framework`` may be omitted (torch when importable, else numpy); also
  ``"torch"``/``"numpy"``/``"pytorch"``. ``device`` may be a
  ``torch.device`` too (the reference refuses those). ``"tf"``/``"flax"``/
  ``"jax"``/``"mlx"``/``"paddle"`` are refused (SafetensorError).
* Without torch (or with ``MEMTIER_PY_FORCE_NO_TORCH=1``) results are numpy
  arrays; BF16 and the F8 types come back as ml_dtypes arrays when ml_dtypes
  is installed, else as raw unsigned integers of the same width
  (``safetensors.numpy`` refuses them); F4 as its packed bytes (uint8, last
  dimension halved; the reference raises AttributeError).
* A name missing from a file raises an error that is both SafetensorError
  (as the reference) and KeyError. :class:`SafeSlice` has ``len()``, takes
  negative steps (numpy's rule; the reference refuses them) and slices F4
  tensors in their packed shape (the reference fails there).
* A file changed on disk after :class:`safe_open` fails the next load with
  "changed since open" instead of returning another file's bytes.
* ``device="cuda"``/``"cuda:N"`` loads straight into GPU memory through the
  library's CUDA target (GDS, or the staged pinned pipeline); where CUDA
  cannot be used it raises :class:`memtier.UnsupportedError` (a
  NotImplementedError, so a RuntimeError as torch's error is) with
  :func:`memtier.gpu_info`'s text, never silently CPU tensors.

dtype mapping (safetensors name -> torch / numpy): F64 F32 F16 -> float64
float32 float16; BF16 -> bfloat16 (numpy: ml_dtypes.bfloat16 or uint16); I8
I16 I32 I64, U8 U16 U32 U64 -> the integer types; BOOL -> bool; C64 ->
complex64; F8_E4M3 F8_E5M2 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ -> float8_e4m3fn
float8_e5m2 float8_e8m0fnu float8_e4m3fnuz float8_e5m2fnuz (numpy: ml_dtypes or
uint8); F4 -> float4_e2m1fn_x2 with the last dimension halved (two values a
byte; an odd last dimension is refused, as the reference does). F6_E2M3 and
F6_E3M2 files open (keys, metadata, shapes) but their tensors are refused
("Dtype not understood"), as the reference does. The library's parser takes
the sub-byte dtypes; with a library older than this package, files it refuses
(sub-byte dtypes, headers that start with JSON whitespace) are parsed by
:mod:`._header` and read by path with ``memtier_load_chunks``.

Errors: a malformed file raises :class:`memtier.FormatError` (a ValueError and
a ``safetensors.SafetensorError``); a missing file :class:`memtier.NotFoundError`
(a FileNotFoundError, as the reference); a handle used after close
:class:`memtier.ClosedError` ("File is closed"). See :mod:`._errors`.

Thread safety: :func:`load_file` may run in many threads at once; one
:class:`safe_open` object may be used from several threads at once (its
handle is thread-safe in the library), but close it only when no other
thread is using it. :func:`load_into` must not run while other code reads or
writes the destination tensors.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .._context import TARGET_CUDA, Context, PathType, _fname
from . import _pickle
from ._alloc import TensorInfo
from ._bytes import deserialize, load
from ._errors import SafetensorError, StateDictError, TensorNotFoundError, bridge
from ._handle import (check_backend, ctx_of, cuda_setup, framework_of, open_handle, parse_device,
                      span)
from ._into import load_into, load_model
from ._slice import SafeSlice

__all__ = ["load_file", "safe_open", "load", "deserialize", "load_into", "load_model",
           "TensorInfo", "SafeSlice", "SafetensorError", "TensorNotFoundError", "StateDictError"]


@bridge
def load_file(filename: PathType, device: Any = "cpu", *, backend: str = "mmap",
              framework: Optional[str] = None, ctx: Optional[Context] = None) -> Dict[str, Any]:
    """Load every tensor of a safetensors file (like ``safetensors.torch.load_file``).

    Parameters
    ----------
    filename : str, bytes or os.PathLike
    device : str, int or torch.device
        ``"cpu"`` (default), or ``"cuda"``/``"cuda:N"`` (an int N means
        ``"cuda:N"``): torch CUDA tensors read by the library's CUDA target.
        Needs torch.cuda and a library whose CUDA target is usable, checked
        before the file is opened (:class:`memtier.UnsupportedError`
        otherwise, with :func:`memtier.gpu_info`'s text). Other device types
        raise :class:`memtier.UnsupportedError`.
    backend : {"mmap", "pread"}, keyword-only
        Accepted for the reference's signature and checked; MemTier reads the
        same way for both (see the module docstring).
    framework : {"pt", "torch", "np", "numpy"}, optional
        Result type. Default: torch tensors when torch is importable (and
        ``MEMTIER_PY_FORCE_NO_TORCH`` is not set), else numpy arrays.
    ctx : Context, optional
        Default: the process's default context.

    Returns
    -------
    dict
        name -> tensor, in the order of the data in the file (as
        ``safetensors.torch.load_file`` 0.8 returns them), each a new
        contiguous tensor/array of the file's shape and dtype with its own
        allocation (``untyped_storage().nbytes()`` is its byte count; keeping
        one tensor does not keep the others' memory). Zero-element tensors are
        empty tensors of their shape. Equal (dtype, shape, bytes) to
        ``safetensors.torch.load_file`` (torch) or
        ``safetensors.numpy.load_file`` (numpy; see the module docstring).

    Raises
    ------
    FormatError
        The file is not valid safetensors (also a ``SafetensorError``).
    NotFoundError, PermissionDeniedError, IsDirectoryError
        The file cannot be opened (OSError kinds, as the reference).
    MemTierError
        A read failed, or the file changed while loading ("changed since
        open"); the message names the tensor.
    UnsupportedError
        CUDA cannot be used (see ``device``), a device type other than cpu
        and cuda, or an F6 tensor ("Dtype not understood").
    ImportError
        ``framework="pt"`` without torch.
    TypeError
        ``backend`` is not a str, or a dtype this torch build lacks.

    Notes
    -----
    One ``memtier_safetensors_load_all`` call reads everything (Ctrl-C is
    delivered when it returns). Thread-safe. With the file in the page
    cache, most of the time is the kernel's first touch of the new tensors'
    memory, not the copy (on the 2-core build machine, 402 MB: ~0.04 s to
    copy into memory touched before, ~0.23 s into fresh pages; see
    the ceiling rows of ``examples/python/bench_load_model.py``): :func:`load_into`
    into existing tensors does not pay it.
    """
    where = "memtier.safetensors.load_file"
    check_backend(backend, where)
    dev = parse_device(device, where)
    c = ctx_of(ctx)
    if dev:
        torch = cuda_setup(c, dev, framework, where)
    else:
        _, torch = framework_of(framework, where)
    h = open_handle(c, filename, where)
    try:
        return h.load_all(torch, where, dev)
    finally:
        h.close()


def _load_all_to_pointer(filename: PathType, ptr: int, nbytes: int, *, target: int = TARGET_CUDA,
                         ctx: Optional[Context] = None) -> Dict[str, Tuple[TensorInfo, int]]:
    """Internal (the read part of ``load_file(device=...)``, without torch):
    read every tensor of ``filename`` into the memory at address ``ptr``
    (device memory for ``target`` TARGET_CUDA), laid out like the file's data
    section from its first payload byte, with one memtier_safetensors_load_all
    call. ``nbytes`` is the memory's size, checked against that span first.
    Returns name -> (TensorInfo, byte offset of the tensor in the memory)."""
    where = "memtier.safetensors._load_all_to_pointer"
    h = open_handle(ctx_of(ctx), filename, where)
    try:
        lo, n = span(h.infos)
        if nbytes < n:
            raise ValueError(f"{where}: the memory holds {nbytes} bytes, the tensors span {n}")
        if n and not ptr:
            raise ValueError(f"{where}: NULL destination")
        rel = [i.offset - lo if i.nbytes else 0 for i in h.infos]
        h.read_all([ptr + r if i.nbytes else 0 for i, r in zip(h.infos, rel)], target, where)
        return {i.name: (i, r) for i, r in zip(h.infos, rel)}
    finally:
        h.close()


class safe_open:  # noqa: N801 - the name of the reference API
    """An open safetensors file (like ``safetensors.safe_open``), lazily loading tensors.

    Parameters
    ----------
    filename : str, bytes or os.PathLike
    framework : {"pt", "torch", "np", "numpy"}, optional
        Result type; default torch when importable, else numpy.
    device : str, int or torch.device
        ``"cpu"``, or ``"cuda"``/``"cuda:N"``: tensors are loaded straight
        into GPU memory (as :func:`load_file`; slices too).
    backend : {"mmap", "pread"}, keyword-only
        Checked as the reference checks it; no effect (module docstring).
    ctx : Context, keyword-only, optional
        Default: the process's default context.

    The header is parsed and validated here (errors as :func:`load_file`).
    Use it as a context manager or call :meth:`close`; it is also closed when
    garbage collected. After close every method raises
    :class:`memtier.ClosedError` ("File is closed", a SafetensorError), as in
    the reference; slices taken before keep working. A load after the file
    changed on disk raises :class:`memtier.MemTierError` ("changed since open").
    """

    @bridge
    def __init__(self, filename: PathType, framework: Optional[str] = None, device: Any = "cpu", *,
                 backend: str = "mmap", ctx: Optional[Context] = None) -> None:
        where = "memtier.safetensors.safe_open"
        check_backend(backend, where)
        self._device = parse_device(device, where)
        c = ctx_of(ctx)
        if self._device:
            self._fw, self._torch = "pt", cuda_setup(c, self._device, framework, where)
        else:
            self._fw, self._torch = framework_of(framework, where)
        self._h = open_handle(c, filename, where)
        self._names = sorted(self._h.by_name)

    def __reduce__(self) -> Any:
        """Pickle by path, framework and device; re-opens on first use in the
        receiving process (:mod:`._pickle`). TypeError if opened with ``ctx=``."""
        return _pickle.reduce(self)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """See :meth:`__reduce__`."""
        _pickle.setstate(self, state)

    def __getattr__(self, name: str) -> Any:
        """Open an unpickled handle's file on first use (:mod:`._pickle`)."""
        return _pickle.reopen(self, name)

    def __enter__(self) -> "safe_open":
        """Return self (the file is already open)."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the file."""
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._h.h is None else f"{len(self._names)} tensors"
        return f"<memtier.safetensors.safe_open {_fname(self._h.path)!r} {self._fw} {state}>"

    def close(self) -> None:
        """Close the file's handle (idempotent)."""
        self._h.close()

    @bridge
    def keys(self) -> List[str]:
        """Tensor names, sorted (as ``safetensors.safe_open.keys``)."""
        self._h.live()
        return list(self._names)

    @bridge
    def offset_keys(self) -> List[str]:
        """Tensor names in the order of their data in the file."""
        self._h.live()
        return [t.name for t in self._h.infos]

    @bridge
    def metadata(self) -> Optional[Dict[str, str]]:
        """The ``"__metadata__"`` strings: a dict (``{}`` for an empty object),
        or None when the header has none (absent or null), as the reference."""
        self._h.live()
        return self._h.metadata("memtier.safetensors.safe_open.metadata")

    @bridge
    def info(self, name: str) -> TensorInfo:
        """Dtype, header shape, absolute byte offset and size of tensor ``name``
        (a TensorNotFoundError, also KeyError, if absent). MemTier only."""
        return self._h.infos[self._h.index(name)]

    @bridge
    def get_tensor(self, name: str) -> Any:
        """Tensor ``name`` as a new tensor/array that owns its memory.

        Raises TensorNotFoundError (a KeyError and SafetensorError) for an
        unknown name, :class:`memtier.ClosedError` after :meth:`close`, and
        the errors of :func:`load_file`.
        """
        self._h.live()
        return self._h.load_one(self._h.index(name), self._torch,
                                "memtier.safetensors.safe_open.get_tensor", self._device)

    @bridge
    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor (one ``memtier_safetensors_load_all`` call), as :func:`load_file`."""
        self._h.live()
        return self._h.load_all(self._torch, "memtier.safetensors.safe_open.get_tensors", self._device)

    @bridge
    def get_slice(self, name: str) -> SafeSlice:
        """A lazy view of tensor ``name``; index it to read part of it (see :class:`SafeSlice`)."""
        self._h.live()
        return SafeSlice(self, self._h.index(name))
