"""The open-file layer of :mod:`memtier.safetensors`: argument parsing and the handle.

:class:`Handle` wraps one ``memtier_safetensors_t`` (the library parsed and
validated the header) and reads tensors through it; :class:`PyHandle` serves
the files the library's parser refuses although the reference reads them
(packed sub-byte dtypes; a header that starts with whitespace, with an
older library): the header is
parsed by :mod:`._header` and the payloads are read by the library by path
(``memtier_load_chunks``), with the file's identity checked around each read.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

from .. import _context, _dtypes, _errors, _ffi, _fork, _log
from .._context import TARGET_CPU, TARGET_CUDA, Context, PathType, _cpath, _fname, _is_url
from .._errors import make_error
from . import _header
from ._alloc import PAGE, SUBBYTE, TensorInfo, alloc, alloc_each, dtype_of, storage_shape
from ._errors import as_reference, invalid, missing_tensor

_FRAMEWORKS = {"pt": "pt", "torch": "pt", "pytorch": "pt", "np": "np", "numpy": "np"}

#: ``ctx``, or the default context when it is None: the package's one helper.
ctx_of = _context._ctx


def parse_device(device: Any, where: str) -> Optional[str]:
    """None for the CPU, else the torch device string "cuda:N"; anything else
    raises (UnsupportedError for other device types, never a silent CPU result)."""
    if device is None:
        return None
    if isinstance(device, bool):
        raise TypeError(f"{where}: device must be a str, int or torch.device, got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise invalid(f"{where}: device {device!r} is invalid")
        return f"cuda:{device}"
    s = str(device).strip().lower()
    if s == "cpu":
        return None
    if s.isdigit():
        return f"cuda:{int(s)}"
    if s == "cuda" or s.startswith("cuda:"):
        try:
            target, index = _context._parse_device(s)
        except ValueError:
            raise invalid(f"{where}: device {device!r} is invalid") from None
        return f"cuda:{index}"
    raise make_error(_errors.ERR_UNSUPPORTED, f"{where}: device {device!r}",
                     "only 'cpu' and 'cuda[:N]' are supported")


def cuda_setup(ctx: Context, device: Optional[str], framework: Optional[str], where: str) -> Any:
    """For a CUDA device: check framework, torch.cuda and the library's CUDA
    backend before anything is opened or allocated; returns torch."""
    fw = None if framework is None else _FRAMEWORKS.get(str(framework))
    if framework is not None and fw is None:
        raise invalid(f"{where}: framework {framework!r} is invalid; use 'pt' (torch) or 'np' (numpy)")
    if fw == "np":
        raise invalid(f"{where}: device {device!r} returns torch CUDA tensors; "
                         "framework='np' cannot hold GPU memory (use framework='pt')")
    return _context._require_cuda(ctx, f"{where}: device {device!r}")


def framework_of(framework: Optional[str], where: str) -> Tuple[str, Any]:
    """-> ("pt", torch) or ("np", None). Imports torch only when the result needs it."""
    if framework is None:
        torch = _dtypes.torch_module()
        return ("pt", torch) if torch is not None else ("np", None)
    fw = _FRAMEWORKS.get(str(framework))
    if fw is None:
        raise invalid(f"{where}: framework {framework!r} is invalid; use 'pt' (torch) or 'np' (numpy)")
    if fw == "np":
        return "np", None
    torch = _dtypes.torch_module()
    if torch is None:
        why = ("MEMTIER_PY_FORCE_NO_TORCH is set" if _dtypes.torch_disabled()
               else "torch is not importable")
        raise ImportError(f"{where}: framework={framework!r} needs torch, but {why}; use framework='np'")
    return fw, (torch if fw == "pt" else None)


def span(infos: List["TensorInfo"]) -> Tuple[int, int]:
    """(absolute offset of the first payload byte, bytes up to the end of the
    last payload): the part of the data section a load reads."""
    live = [i for i in infos if i.nbytes]
    if not live:
        return 0, 0
    lo = min(i.offset for i in live)
    return lo, max(i.offset + i.nbytes for i in live) - lo


def alloc_all_device(infos: List["TensorInfo"], torch: Any, device: str) -> List[Tuple[Any, int]]:
    """:func:`_alloc_all` on a CUDA device: one ``torch.uint8`` buffer from
    torch's allocator, laid out like the data section and placed so each
    byte's address equals its file offset modulo 4096 (GDS reads then start
    aligned), tensors as dtype views of it (they keep it alive). A tensor
    whose file offset is not a multiple of its element size gets its own
    allocation (a dtype view there would be misaligned)."""
    lo, n = span(infos)
    if not n:
        return [alloc(i, torch, device) for i in infos]
    buf = torch.empty(n + PAGE, dtype=torch.uint8, device=device)
    shift = (lo - buf.data_ptr()) % PAGE
    region = buf[shift:shift + n]
    base = region.data_ptr()
    out: List[Tuple[Any, int]] = []
    for info in infos:
        dt = dtype_of(info.dtype)
        if not info.nbytes or info.offset % dt.itemsize:
            out.append(alloc(info, torch, device))
            continue
        raw = region[info.offset - lo:info.offset - lo + info.nbytes]
        t = raw.view(_dtypes.torch_dtype(dt, torch)).reshape(storage_shape(info))
        out.append((t, base + info.offset - lo))
    return out


class Handle:
    """An open ``memtier_safetensors_t`` and the tensor table read from it."""

    __slots__ = ("ctx", "h", "path", "infos", "by_name", "meta", "fin", "ident", "lock",
                 "_meta_present", "__weakref__")

    def __init__(self, ctx: Context, path: PathType, where: str) -> None:
        h = ctx._handle()
        ffi, lib = ctx._ffi, ctx._lib
        p = _cpath(path)
        self.ctx = ctx
        self.path = path
        self.lock = threading.Lock()
        self.ident: Optional[Tuple[int, ...]] = None  # the library's open below reports an error
        if not _is_url(p):  # a URL is no local file: the handle's loads check its version
            try:
                st = os.stat(p)
                self.ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                pass
        out = ffi.new("memtier_safetensors_t **")
        rc = lib.memtier_safetensors_open(h, p, out)
        if rc:
            ctx._fail(rc, where, path)
        self.h = out[0]
        # closes once, on close() or collection, never in a fork child (_fork.finalizer)
        self.fin = _fork.finalizer(self, lib.memtier_safetensors_close, self.h, ctx._pid, ctx)
        cnt = ffi.new("size_t *")
        self._check(lib.memtier_safetensors_count(self.h, cnt), where)
        info = ffi.new("memtier_tensor_info_t *")
        infos: List[TensorInfo] = []
        for i in range(int(cnt[0])):
            self._check(lib.memtier_safetensors_get(self.h, i, info), where)
            name = ffi.unpack(info.name, info.name_len).decode("utf-8", "surrogateescape")
            shape = tuple(ffi.unpack(info.shape, info.ndim)) if info.ndim else ()
            infos.append(TensorInfo(name, ffi.string(info.dtype).decode("ascii"), shape,
                                    int(info.offset), int(info.nbytes)))
        self.infos = infos  # in data-offset order
        self.by_name = {t.name: i for i, t in enumerate(infos)}
        meta: Dict[str, str] = {}
        k = ffi.new("const char **")
        v = ffi.new("const char **")
        n = ffi.new("size_t *")
        present = ffi.new("int *")
        self._check(lib.memtier_safetensors_metadata_count(self.h, n, present), where)
        for i in range(int(n[0])):
            self._check(lib.memtier_safetensors_metadata(self.h, i, k, v), where)
            meta[ffi.string(k[0]).decode("utf-8", "surrogateescape")] = \
                ffi.string(v[0]).decode("utf-8", "surrogateescape")
        self.meta = meta
        self._meta_present = bool(present[0])

    def _check(self, rc: int, where: str) -> None:
        if rc:
            self.ctx._fail(rc, where, self.path)

    def live(self) -> Any:
        h = self.h
        if h is None:
            raise as_reference(_errors.make_error(
                _errors.ERR_CLOSED, "memtier.safetensors: File is closed",
                strerror="the safetensors file was closed"))
        self.ctx._handle()  # fork and closed-context checks
        return h

    def close(self) -> None:
        with self.lock:
            if self.h is None:
                return
            self.h = None
            self.fin()

    def index(self, name: str) -> int:
        try:
            return self.by_name[name]
        except KeyError:
            raise missing_tensor(f"memtier.safetensors: no tensor named {name!r} in {_fname(self.path)}; "
                                 f"File does not contain tensor {name}") from None

    def load_one(self, i: int, torch: Any, where: str, device: Optional[str] = None) -> Any:
        info = self.infos[i]
        refuse_subbyte(info, where)
        t, addr = alloc(info, torch, device)
        target = TARGET_CUDA if device else TARGET_CPU
        if info.nbytes:
            h = self.live()
            ffi = self.ctx._ffi
            if device:
                _context._sync_torch_stream(t)
            rc = self.ctx._lib.memtier_safetensors_load(h, i, ffi.cast("void *", addr), info.nbytes,
                                                        target)
            if rc:
                self.ctx._fail(rc, f"{where}: tensor {info.name!r}", self.path, target)
        return t

    def load_all(self, torch: Any, where: str, device: Optional[str] = None) -> Dict[str, Any]:
        """Every tensor, one memtier_safetensors_load_all call; dict in file order.
        ``device``: a torch CUDA device string, or None for host memory."""
        n = len(self.infos)
        if n == 0:
            self.live()
            return {}
        for info in self.infos:
            refuse_subbyte(info, where)
        if device:
            pairs = alloc_all_device(self.infos, torch, device)
            for t, addr in pairs:
                if addr:
                    _context._sync_torch_stream(t)
                    break
        else:
            pairs = alloc_each(self.infos, torch)
        self.read_all([addr for _, addr in pairs], TARGET_CUDA if device else TARGET_CPU, where)
        return {info.name: t for info, (t, _) in zip(self.infos, pairs)}  # file (offset) order

    def read_all(self, addrs: List[int], target: int, where: str) -> None:
        """The read part of :meth:`load_all`: one memtier_safetensors_load_all
        call, tensor ``i`` into address ``addrs[i]`` (0 = skip: zero-element
        tensors), host memory or device memory (``target``). The caller owns
        and keeps alive the memory; nothing here allocates a tensor."""
        import numpy as np

        h = self.live()
        ffi, lib = self.ctx._ffi, self.ctx._lib
        n = len(self.infos)
        if n == 0:
            return
        dsts = ffi.new("void *[]", n)  # zero-filled: NULL = skip (zero-element tensors)
        results = ffi.new("int64_t[]", n)
        for i, addr in enumerate(addrs):
            if addr:
                dsts[i] = ffi.cast("void *", addr)
        rc = lib.memtier_safetensors_load_all(h, dsts, results, target)
        if rc:
            detail = _ffi.error_texts(rc)[1]
            res = np.frombuffer(ffi.buffer(results), dtype=np.int64)
            bad = np.flatnonzero(res < 0)
            if bad.size and not (target == TARGET_CUDA and rc == _errors.ERR_UNSUPPORTED):
                k = int(bad[0])
                st = int(res[k])
                raise make_error(st, f"{where}: tensor {self.infos[k].name!r}", detail,
                                 strerror=_ffi.strerror(st), filename=_fname(self.path), index=k)
            self.ctx._fail(rc, where, self.path, target, detail)

    def check_unchanged(self, where: str) -> None:
        """Raise (like the library's "changed since open") if the file at the
        path is no longer the one opened; used around slice reads, which go
        through the path rather than the handle."""
        if _is_url(self.path):
            self._check_object_unchanged(where)
            return
        try:
            st = os.stat(_cpath(self.path))
            now: Optional[Tuple[int, ...]] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            now = None
        if now is None or now != self.ident:
            raise make_error(_errors.ERR_IO, where, changed_text(self.path),
                             strerror=_ffi.strerror(_errors.ERR_IO), filename=_fname(self.path))


    def _check_object_unchanged(self, where: str) -> None:
        """check_unchanged for a URL, which has no stat: the handle's load of
        its smallest non-empty tensor fails with "changed since open" once the
        object is another version (its ETag), as every handle load does. One
        ranged read of that tensor; nothing to check without payload."""
        sizes = [(t.nbytes, i) for i, t in enumerate(self.infos) if t.nbytes]
        if not sizes:
            return
        n, i = min(sizes)
        ffi = self.ctx._ffi
        buf = ffi.new("char[]", n)
        rc = self.ctx._lib.memtier_safetensors_load(self.live(), i, buf, n, TARGET_CPU)
        if rc:
            self.ctx._fail(rc, where, self.path)

    def metadata(self, where: str) -> Optional[Dict[str, str]]:
        """The ``__metadata__`` strings; None when the header has none (absent
        or null), ``{}`` for an empty object, as the reference
        (memtier_safetensors_metadata_count tells the two apart)."""
        return dict(self.meta) if self._meta_present else None


def changed_text(path: PathType) -> str:
    """The detail of a "changed since open" error raised in Python: the text
    of the library's own (a handle load of the same file), so get_tensor and
    get_slice say the same thing."""
    return f"load {_fname(path)}: file changed since open (size, mtime or inode differ): open it again"


def refuse_subbyte(info: TensorInfo, where: str) -> None:
    """The reference parses F6 kinds but hands none out ("Dtype not understood")."""
    if info.dtype in SUBBYTE and info.dtype != "F4":
        raise as_reference(make_error(_errors.ERR_UNSUPPORTED, f"{where}: tensor {info.name!r}",
                                      f"Dtype not understood: {info.dtype}",
                                      strerror="unsupported dtype"))


#: Phrases of the library's FORMAT refusals that safetensors 0.8 accepts;
#: only these send a file to the Python parser (PyHandle).
_FALLBACK_PHRASES = ("sub-byte dtype", "invalid header start")


class PyHandle(Handle):
    """A file the library's parser refuses but the reference reads (see the
    module docstring): the header parsed in Python, payloads read by path
    with ``memtier_load_chunks``. ``h`` is True while open."""

    def __init__(self, ctx: Context, path: PathType, where: str, refusal: BaseException) -> None:
        ctx._handle()
        self.ctx = ctx
        self.path = path
        self.lock = threading.Lock()
        p = _cpath(path)
        if _is_url(p):
            size = _context._object_size(ctx, path, where)  # no stat for an object
            self.ident = None
        else:
            st = os.stat(p)
            size = st.st_size
            self.ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        head = ctx.read(path, 0, min(8, size)) if size else b""
        try:
            n = _header.header_length(head, size, where)
            text = ctx.read(path, 8, n)
            parsed = _header.parse(text, size, where)
        except _errors.FormatError:
            raise refusal from None  # the reference refuses it too: the library's message
        # A URL has no handle to check against: check_unchanged reads the
        # header again and compares.
        self._url_header = head + text if _is_url(p) else b""
        self.check_unchanged(where)
        base = parsed.data_start
        self.infos = [TensorInfo(e.name, e.dtype, e.shape, base + e.begin, e.end - e.begin)
                      for e in parsed.entries]
        self.by_name = {t.name: i for i, t in enumerate(self.infos)}
        self.meta = dict(parsed.metadata or {})
        self._meta_present = parsed.metadata is not None
        self.h = True
        self.fin = weakref.finalize(self, lambda: None)

    def _check_object_unchanged(self, where: str) -> None:
        """check_unchanged for a URL parsed in Python: the header's bytes,
        read again, must be those parsed (offsets of another header would
        read another file's tensors)."""
        hdr = self._url_header
        now = self.ctx.read(self.path, 0, len(hdr)) if hdr else b""
        if now != hdr:
            raise make_error(_errors.ERR_IO, where,
                             f"{_fname(self.path)}: the object changed since open (its header "
                             "differs); open it again",
                             strerror=_ffi.strerror(_errors.ERR_IO), filename=_fname(self.path))

    def load_one(self, i: int, torch: Any, where: str, device: Optional[str] = None) -> Any:
        info = self.infos[i]
        refuse_subbyte(info, where)
        t, addr = alloc(info, torch, device)
        if info.nbytes:
            if device:
                _context._sync_torch_stream(t)
            self.read_all([addr if k == i else 0 for k in range(len(self.infos))],
                          TARGET_CUDA if device else TARGET_CPU, where)
        return t

    def read_all(self, addrs: List[int], target: int, where: str) -> None:
        import numpy as np

        from .._chunks import _load_rows

        self.live()
        sel = [(info, a) for info, a in zip(self.infos, addrs) if a and info.nbytes]
        if not sel:
            return
        offsets = np.array([i.offset for i, _ in sel], dtype=np.uint64)
        sizes = np.array([i.nbytes for i, _ in sel], dtype=np.uint64)
        dsts = np.array([a for _, a in sel], dtype=np.uint64)
        self.check_unchanged(where)
        _load_rows(self.ctx, self.path, offsets, sizes, dsts, where, target)
        self.check_unchanged(where)


def open_handle(ctx: Context, path: PathType, where: str) -> Handle:
    """A :class:`Handle`, or a :class:`PyHandle` for the files the library
    refuses with one of :data:`_FALLBACK_PHRASES` (errors bridged)."""
    try:
        return Handle(ctx, path, where)
    except _errors.FormatError as e:
        if not any(p in str(e) for p in _FALLBACK_PHRASES):
            raise as_reference(e)
        _log.warn("st.pyparser", f"{_fname(path)}: the library refuses it ({e.detail}): header parsed in Python, tensors read by path")
        return PyHandle(ctx, path, where, as_reference(e))
    except _errors.MemTierError as e:
        raise as_reference(e)


_BACKENDS = ("mmap", "pread")


def check_backend(backend: Any, where: str) -> None:
    """``backend=`` as the reference accepts it: "mmap" or "pread" (TypeError
    for a non-str, SafetensorError otherwise). MemTier serves both the same
    way (its own reads into owned memory); the value is only checked."""
    if not isinstance(backend, str):
        raise TypeError(f"{where}: argument 'backend': {backend!r} is not an instance of 'str'")
    if backend not in _BACKENDS:
        raise invalid(f'{where}: backend "{backend}" is invalid (expected one of: "mmap", "pread")')
