"""Why a CUDA request cannot be served: the UnsupportedError that names the
missing piece (torch.cuda, the library's CUDA backend) with the text of
``memtier_gpu_info``. Checked before any allocation or I/O.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, Tuple

from . import _dtypes, _errors
from ._errors import make_error


class GpuInfoSource(Protocol):
    """What the diagnostics need of a :class:`memtier.Context`: its ``gpu_info``."""

    def gpu_info(self) -> str:
        """The library's ``memtier_gpu_info`` text."""
        ...


_CUDA_HINT = (
    "read into a CPU tensor and call .to('cuda') instead"
)


def _gpu_info_text(ctx: GpuInfoSource) -> str:
    """memtier_gpu_info of ``ctx``, or why it could not be had (never raises)."""
    try:
        return ctx.gpu_info()
    except Exception as e:  # noqa: BLE001 - a diagnostic must not hide the real error
        return f"(memtier_gpu_info failed: {e})"


def _library_cuda_missing(info: str) -> Optional[str]:
    """The library's reason the CUDA target is unusable (its ``cuda:`` line),
    or None when that line says CUDA is available."""
    for line in info.splitlines():
        if line.startswith("cuda:"):
            reason = line[len("cuda:"):].strip()
            return None if reason.startswith("CUDA available") else reason
    return "memtier_gpu_info has no cuda: line"


def _torch_cuda_missing() -> Tuple[Any, Optional[str]]:
    """(torch or None, why torch.cuda cannot allocate device tensors or None)."""
    torch = _dtypes.torch_module()
    if torch is None:
        why = ("MEMTIER_PY_FORCE_NO_TORCH is set" if _dtypes.torch_disabled()
               else "torch is not importable")
        return None, f"torch.cuda ({why})"
    try:
        ok = bool(torch.cuda.is_available())
    except Exception as e:  # noqa: BLE001
        return torch, f"torch.cuda (torch.cuda.is_available() failed: {e})"
    if not ok:
        return torch, "torch.cuda (torch.cuda.is_available() is False: no CUDA device or a CPU-only torch build)"
    return torch, None


def _unsupported_cuda(ctx: GpuInfoSource, where: str, missing: Any = None, detail: str = "",
                      info: Optional[str] = None) -> _errors.MemTierError:
    """The UnsupportedError of a CUDA request: names the missing piece(s) and
    carries the library's memtier_gpu_info text (``exc.gpu_info`` too).
    ``missing`` None: ask memtier_gpu_info whether the library's CUDA target
    is the missing piece (an UNSUPPORTED answer of the library)."""
    if info is None:
        info = _gpu_info_text(ctx)
    if missing is None:
        lib_why = _library_cuda_missing(info)
        missing = [f"CUDA support in libmemtier.so ({lib_why})"] if lib_why else []
    elif isinstance(missing, str):
        missing = [missing]
    if missing:
        msg = f"{where}: the CUDA target needs {'; '.join(missing)}"
        if detail:
            msg += f": {detail}"
        msg += f"; {_CUDA_HINT}"
    else:
        msg = f"{where}: {detail or 'not supported'}"
    # the info's "cuda:" line is left out when the message already quotes it
    # (the dlopen text once, not twice); exc.gpu_info keeps all of it
    shown = "\n".join(ln for ln in info.rstrip().splitlines()
                      if not (ln.startswith("cuda: ") and ln[len("cuda: "):] in msg))
    msg += f".\nmemtier_gpu_info:\n{shown}"
    exc = make_error(_errors.ERR_UNSUPPORTED, msg, strerror="")
    exc.detail = detail or "; ".join(missing)
    exc.gpu_info = info  # type: ignore[attr-defined]
    return exc


def _require_cuda(ctx: GpuInfoSource, where: str, *, need_torch: bool = True) -> Any:
    """Check, before any allocation or I/O, that a CUDA request can be served:
    torch.cuda (when ``need_torch``: the result is a torch CUDA tensor) and
    the library's CUDA backend (memtier_gpu_info's ``cuda:`` line). Returns
    torch (or None when not needed); raises UnsupportedError naming every
    missing piece, with the memtier_gpu_info text."""
    missing = []
    torch = None
    if need_torch:
        torch, why = _torch_cuda_missing()
        if why:
            missing.append(why)
    info = _gpu_info_text(ctx)
    lib_why = _library_cuda_missing(info)
    if lib_why:
        missing.append(f"CUDA support in libmemtier.so ({lib_why})")
    if missing:
        raise _unsupported_cuda(ctx, where, missing, info=info)
    return torch

