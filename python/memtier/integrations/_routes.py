"""The stand-ins that :func:`memtier.integrations.patch_safetensors` puts where
safetensors' reading functions were: each sends a call MemTier can serve to
:mod:`memtier.safetensors` and any other call to the original function.

A call is served when its arguments are ones MemTier takes with the same
meaning as the reference (safetensors 0.8): a path (str, bytes or
os.PathLike), ``device`` "cpu", "cuda", "cuda:N" or an int N (CUDA only when
this MemTier can use it), ``backend`` "mmap" or "pread", ``framework``
"pt"/"torch"/"pytorch"/"np"/"numpy", and nothing outside the reference's
signature. Anything else (a file-like object, "mps", "meta", a
torch.device, framework="flax", an unknown keyword) goes to the original,
which then does what it always did, errors included: the original always
receives the call exactly as it was made. ``load_model`` also falls back when
MemTier refuses the model before writing anything (a dtype that the
reference would cast, a shape or name mismatch: the reference then loads
and raises its own error) and when a module has load hooks or its own
``_load_from_state_dict`` that MemTier would not run.

Each fallback is counted by reason (:func:`counts`) and logged once per reason
on the ``memtier.integrations`` logger (WARNING), so a patch that serves
nothing is visible. Thread-safe.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from typing import Any, Callable, Dict, Optional, Tuple

from .. import _context
from .. import _log as _mtlog
from .._errors import UnsupportedError
from . import _views

_log = logging.getLogger("memtier.integrations")
_lock = threading.Lock()
_served: "Counter[str]" = Counter()
_fallbacks: "Counter[Tuple[str, str]]" = Counter()

# The reference's framework names that MemTier returns (memtier.safetensors'
# module docstring); "tf", "flax", "jax", "mlx", "paddle" are the original's.
_FRAMEWORKS = {"pt", "torch", "pytorch", "np", "numpy"}
_BACKENDS = {"mmap", "pread"}


def counts() -> Dict[str, Dict[str, int]]:
    """What the stand-ins did since the process started (or :func:`reset_counts`).

    Returns ``{"served": {function: calls}, "fallback": {"function: reason":
    calls}}``; function is e.g. ``"safetensors.torch.load_file"``, or
    ``"safetensors.safe_open (views)"`` for a call the patch
    left to safetensors' mmap (its bytes: :func:`view_bytes`). A copy.
    Thread-safe.
    """
    with _lock:
        return {"served": dict(_served),
                "fallback": {f"{fn}: {why}": n for (fn, why), n in _fallbacks.items()}}


def reset_counts() -> None:
    """Zero :func:`counts` and :func:`view_bytes` (the once-per-reason log
    starts over too). Thread-safe."""
    with _lock:
        _served.clear()
        _fallbacks.clear()
    _views.reset()


def _count_served(fn: str) -> None:
    with _lock:
        _served[fn] += 1


def _fall_back(fn: str, why: str) -> None:
    with _lock:
        first = (fn, why) not in _fallbacks
        _fallbacks[(fn, why)] += 1
    _mtlog.warn("patch.fallback", f"patch_safetensors: {fn} calls the original safetensors function: {why}")
    if first:
        _log.warning("memtier.patch_safetensors: %s calls the original safetensors function: %s", fn, why)


def _path_reason(filename: Any) -> Optional[str]:
    if isinstance(filename, (str, bytes, os.PathLike)):
        return None
    return f"filename is a {type(filename).__name__} (MemTier reads paths)"


def _device_reason(device: Any, ctx: Optional[_context.Context]) -> Optional[str]:
    """None when MemTier serves ``device`` as the reference means it, else why
    not. Only the reference's own spellings are served ("cpu", "cuda",
    "cuda:N", an int N): it refuses "CPU" and torch.device objects, and so
    must the patched call."""
    if isinstance(device, bool):
        return f"device {device!r}"
    if isinstance(device, int):
        cuda = device >= 0
    elif isinstance(device, str) and device == "cpu":
        return None
    elif isinstance(device, str):
        cuda = device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())
    else:
        cuda = False
    if not cuda:
        return f"device {device!r}"
    try:  # the check memtier.safetensors makes first, before any I/O
        _context._require_cuda(ctx if ctx is not None else _context.default_context(),
                               "memtier.patch_safetensors")
    except UnsupportedError:
        return f"device {device!r}: CUDA cannot be used by MemTier here (memtier.gpu_info())"
    return None


# The reference's signatures (safetensors 0.8): a call is bound to them to
# read its arguments, and the original always gets the call exactly as made.
# Each returns its arguments by name (defaults filled): Python's own binding,
# the same TypeErrors as inspect.Signature.bind, which took 17 us a call.
def _load_file_pt(filename: Any, device: Any = "cpu", *, backend: Any = "mmap") -> Dict[str, Any]:
    return {"filename": filename, "device": device, "backend": backend}


def _load_file_np(filename: Any, *, backend: Any = "mmap") -> Dict[str, Any]:
    return {"filename": filename, "backend": backend}


def _load_model(model: Any, filename: Any, strict: Any = True, device: Any = "cpu", *,
                backend: Any = "mmap") -> Dict[str, Any]:
    return {"model": model, "filename": filename, "strict": strict, "device": device, "backend": backend}


def _safe_open(filename: Any, framework: Any, device: Any = "cpu", *, backend: Any = "mmap") -> Dict[str, Any]:
    return {"filename": filename, "framework": framework, "device": device, "backend": backend}


_SIGNATURES: Dict[str, Callable[..., Dict[str, Any]]] = {
    "load_file_pt": _load_file_pt, "load_file_np": _load_file_np,
    "load_model": _load_model, "safe_open": _safe_open}


def _bind(kind: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The call's arguments by name (defaults filled), or None when the
    reference's signature does not take it (the original raises its TypeError)."""
    try:
        return _SIGNATURES[kind](*args, **kwargs)
    except TypeError:
        return None


def _common_reason(a: Dict[str, Any], ctx: Optional[_context.Context]) -> Optional[str]:
    backend = a["backend"]
    if not isinstance(backend, str) or backend not in _BACKENDS:
        return f"backend {backend!r}"
    why = _path_reason(a["filename"])
    if why is None and "device" in a:
        why = _device_reason(a["device"], ctx)
    return why


#: () -> (patch on?, its context, views mode: None, True or False), see _patch._route.
Route = Callable[[], Tuple[bool, Optional[_context.Context], Optional[bool]]]


def make_load_file(original: Callable[..., Any], fn: str, framework: str, route: Route) -> Callable[..., Any]:
    """The stand-in for ``safetensors.torch.load_file`` (``framework`` "pt") or
    ``safetensors.numpy.load_file`` ("np"): takes what the original takes."""
    kind = "load_file_pt" if framework == "pt" else "load_file_np"

    def load_file(*args: Any, **kwargs: Any) -> Dict[str, Any]:
        on, ctx, views = route()
        if not on:
            return original(*args, **kwargs)
        a = _bind(kind, args, kwargs)
        why = "arguments outside the reference's signature" if a is None else _common_reason(a, ctx)
        if why:
            _fall_back(fn, why)
            return original(*args, **kwargs)
        if views is True and a.get("device", "cpu") == "cpu":
            out = _views.serve(fn, original, a["filename"], args, kwargs)
            if out is not None:
                _count_served(fn + " (views)")
                return out
        from ..safetensors import load_file as memtier_load_file

        _count_served(fn)
        return memtier_load_file(a["filename"], a.get("device", "cpu"), backend=a["backend"],
                                 framework=framework, ctx=ctx)

    _dress(load_file, original, fn)
    return load_file


def _hook_reason(model: Any) -> Optional[str]:
    """Why MemTier's in-place load would skip code the reference's
    ``load_state_dict`` runs, or None. torch's own modules that override
    ``_load_from_state_dict`` (BatchNorm: an old checkpoint's missing
    num_batches_tracked) behave the same on a complete safetensors file."""
    torch = _torch()
    if torch is None or not isinstance(model, torch.nn.Module):
        return f"model is a {type(model).__name__}, not a torch.nn.Module"
    base = torch.nn.Module._load_from_state_dict
    for m in model.modules():
        if m._load_state_dict_pre_hooks or m._load_state_dict_post_hooks:
            return f"module {type(m).__name__} has load_state_dict hooks"
        own = type(m)._load_from_state_dict
        if own is not base and not getattr(own, "__module__", "").startswith("torch.nn.modules"):
            return f"module {type(m).__name__} defines its own _load_from_state_dict"
    return None


def make_load_model(original: Callable[..., Any], fn: str, route: Route) -> Callable[..., Any]:
    """The stand-in for ``safetensors.torch.load_model``: takes what the original takes."""

    def load_model(*args: Any, **kwargs: Any) -> Any:
        on, ctx, _ = route()
        if not on:
            return original(*args, **kwargs)
        a = _bind("load_model", args, kwargs)
        why = ("arguments outside the reference's signature" if a is None
               else _common_reason(a, ctx) or _hook_reason(a["model"]))
        if why is None:
            from ..safetensors import StateDictError
            from ..safetensors import load_model as memtier_load_model

            try:  # MemTier checks names, shapes and dtypes before it writes anything
                result = memtier_load_model(a["model"], a["filename"], a["strict"], a["device"],
                                            backend=a["backend"], ctx=ctx)
            except StateDictError as e:
                why = f"MemTier refused the model: {str(e).splitlines()[0]}"
            else:
                _count_served(fn)
                return result
        _fall_back(fn, why)
        return original(*args, **kwargs)

    _dress(load_model, original, fn)
    return load_model


class _SafeOpenMeta(type):
    """``isinstance(f, safetensors.safe_open)`` stays true under the patch for
    both kinds of handle the stand-in returns."""

    original: Any = None

    def __instancecheck__(cls, obj: Any) -> bool:
        from ..safetensors import safe_open as memtier_safe_open

        return isinstance(obj, (memtier_safe_open, cls.original))


def make_safe_open(original: Any, fn: str, route: Route) -> Any:
    """The stand-in for ``safetensors.safe_open``: a class whose construction
    returns a :class:`memtier.safetensors.safe_open` or an instance of the
    original (takes what the original takes)."""

    def __new__(cls: Any, *args: Any, **kwargs: Any) -> Any:
        on, ctx, views = route()
        if not on:
            return original(*args, **kwargs)
        a = _bind("safe_open", args, kwargs)
        if a is None:
            why: Optional[str] = "arguments outside the reference's signature"
        elif not isinstance(a["framework"], str) or a["framework"] not in _FRAMEWORKS:
            why = f"framework {a['framework']!r}"
        else:
            why = _common_reason(a, ctx)
        if why:
            _fall_back(fn, why)
            return original(*args, **kwargs)
        if views is not False and a["device"] == "cpu":  # None (default) or True: the reference's views
            out = _views.serve(fn, original, a["filename"], args, kwargs)
            if out is not None:
                _count_served(fn + " (views)")
                return out
        from ..safetensors import safe_open as memtier_safe_open

        _count_served(fn)
        return memtier_safe_open(a["filename"], a["framework"], a["device"], backend=a["backend"],
                                 ctx=ctx)

    cls = _SafeOpenMeta("safe_open", (), {
        "__new__": __new__,
        "__doc__": getattr(original, "__doc__", None),
        "__module__": getattr(original, "__module__", "safetensors"),
        "__qualname__": getattr(original, "__qualname__", "safe_open"),
        "__memtier_original__": original,
    })
    cls.original = original
    return cls


def _dress(wrapper: Callable[..., Any], original: Callable[..., Any], fn: str) -> None:
    """Make the stand-in look like the original to introspection (help(),
    inspect.signature through __wrapped__) and say where it came from."""
    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(original, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__memtier_original__ = original  # type: ignore[attr-defined]


def _torch() -> Any:
    from .. import _dtypes

    return _dtypes.torch_module()
