"""Putting MemTier's stand-ins (:mod:`._routes`) where safetensors' reading
functions are, and putting the originals back.

The names replaced: ``safetensors.safe_open``, ``safetensors.torch.load_file``,
``safetensors.torch.load_model`` and ``safetensors.numpy.load_file``, plus
the module-level names in any other loaded module that hold one of those
objects (``from safetensors import safe_open`` in
``transformers.modeling_utils``, ``from safetensors.torch import load_file as
safe_load_file`` elsewhere): the names in :data:`NAMES` (``scan="names"``,
the default), or every name (``scan="all"``). A safetensors module imported while the patch
is on is patched as soon as its code has run (an import hook on
``sys.meta_path``), and a module imported while it is on binds the stand-ins
itself; taking the patch off puts the original back wherever a stand-in is
found, so both cases are undone. A stand-in left somewhere else (a local
variable, a closure) calls the original once the patch is off.

Activations nest and may overlap across threads: the first one installs, the
last one to stop restores (a counter under a lock).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import threading
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._context import Context
from . import _routes

ENV_PATCH = "MEMTIER_PATCH_SAFETENSORS"

# (module, attribute, the name counted in _routes.counts())
_TARGETS: Tuple[Tuple[str, str], ...] = (
    ("safetensors", "safe_open"),
    ("safetensors.torch", "load_file"),
    ("safetensors.torch", "load_model"),
    ("safetensors.numpy", "load_file"),
)
_TARGET_MODULES = frozenset(m for m, _ in _TARGETS)

_lock = threading.RLock()
_active: List["SafetensorsPatch"] = []
_installed: List[Tuple[Any, str, Any, Any]] = []  # (module, attribute, original, stand-in)
# One stand-in per original object, made once and reused by later installs.
# _keep holds both alive, so an id found in these dicts is that very object.
_originals: Dict[int, Any] = {}  # id(original) -> its stand-in
_standins: Dict[int, Any] = {}  # id(stand-in) -> its original
_keep: List[Any] = []
_finder: Optional["_Finder"] = None


def _route() -> Tuple[bool, Optional[Context], Optional[bool]]:
    """(patch on?, the context and the views mode of the most recently started
    active patch)."""
    try:
        p = _active[-1]
    except IndexError:
        return False, None, False
    return True, p.ctx, p.views


def _make_standin(module: str, attr: str, original: Any) -> Any:
    fn = f"{module}.{attr}"
    if attr == "safe_open":
        return _routes.make_safe_open(original, fn, _route)
    if attr == "load_model":
        return _routes.make_load_model(original, fn, _route)
    return _routes.make_load_file(original, fn, "np" if module.endswith("numpy") else "pt", _route)


def _standin_for(module: str, attr: str, original: Any) -> Any:
    s = _originals.get(id(original))
    if s is None:
        s = _make_standin(module, attr, original)
        _originals[id(original)] = s
        _standins[id(s)] = original
        _keep.extend((s, original))
    return s


def _set(mod: Any, attr: str, original: Any, standin: Any) -> None:
    setattr(mod, attr, standin)
    _installed.append((mod, attr, original, standin))


def _patch_target_module(mod: Any) -> None:
    """Replace the target names of one safetensors module (lock held)."""
    for m, attr in _TARGETS:
        if m != mod.__name__:
            continue
        cur = mod.__dict__.get(attr)
        if cur is None or id(cur) in _standins:
            continue
        _set(mod, attr, cur, _standin_for(m, attr, cur))


#: The names looked up in every loaded module by the default scan
#: (``scan="names"``): the functions' own names and the aliases libraries bind
#: them to (transformers: ``safe_load_file``). Another alias is found only by
#: ``scan="all"``.
NAMES = ("safe_open", "load_file", "load_model", "safe_load_file", "safe_load_model",
         "safetensors_load_file", "st_load_file", "load_safetensors")

# The binding sites found so far: module name -> (id of the module object
# scanned, scanned with scan="all"?, attributes recorded then). A module is
# scanned once, when a patch starts or stops after it appeared in sys.modules
# (or was replaced there; again by the first scan="all" after a "names"
# scan); later installs and restores visit only its recorded sites. With
# transformers loaded (2,600 modules), looking up NAMES everywhere costs
# about 5 ms of CPU, every value of every module about 17 ms, a visit of the
# recorded sites under 1 ms.
_sites: Dict[str, Tuple[int, bool, Tuple[str, ...]]] = {}
# The names of _sites with attributes recorded (insertion-ordered; a set
# of the few modules that a visit walks instead of all of _sites).
_hits: Dict[str, None] = {}
_NAME_SET = frozenset(NAMES)
_full_scan = False  # the install in effect used scan="all"


def _skip(name: str, skip_safetensors: bool) -> bool:
    if name == "memtier" or name.startswith("memtier."):
        return True
    # safetensors' own modules keep their internal names: a fallback runs the reference as is
    return skip_safetensors and (name == "safetensors" or name.startswith("safetensors."))


def _scan_new(watch: Dict[int, Any], full: bool) -> None:
    """Record the sites of the modules not scanned yet (lock held). "names":
    the names of NAMES the module has (whatever they hold now; a visit checks
    the value). ``full``: every name whose value's id is in ``watch``
    (originals and stand-ins)."""
    sites = _sites
    for name, mod in list(sys.modules.items()):
        seen = sites.get(name)
        if seen is not None and seen[0] == id(mod) and (seen[1] or not full):
            continue
        if mod is None or _skip(name, False):
            continue
        d = getattr(mod, "__dict__", None)
        attrs: Tuple[str, ...] = ()
        if not isinstance(d, dict):
            pass
        elif full:
            if not watch.keys().isdisjoint(map(id, d.values())):
                attrs = tuple(k for k, v in list(d.items()) if id(v) in watch)
        elif not d.keys().isdisjoint(_NAME_SET):
            # a C-level test over the 8 names: a first scan visits 2,600
            # modules, nearly all without one
            attrs = tuple(a for a in NAMES if a in d)
        sites[name] = (id(mod), full, attrs)
        if attrs:
            _hits[name] = None
        else:
            _hits.pop(name, None)


def _site_modules(skip_safetensors: bool) -> List[Tuple[Any, str]]:
    """(module, attribute) of every recorded site still in sys.modules as scanned."""
    out = []
    for name in _hits:
        if _skip(name, skip_safetensors):
            continue
        mid, _, attrs = _sites[name]
        mod = sys.modules.get(name)
        if mod is not None and id(mod) == mid:
            out.extend((mod, a) for a in attrs)
    return out


def _watched() -> Dict[int, Any]:
    return {**_originals, **_standins}


def _sites_now(full: bool, skip_safetensors: bool) -> List[Tuple[Any, str]]:
    _scan_new(_watched(), full)
    return _site_modules(skip_safetensors)


def _install(full: bool) -> None:
    """Patch everything loaded now and hook later imports (lock held);
    ``full``: scan="all"."""
    global _finder, _full_scan
    _full_scan = full
    for m in _TARGET_MODULES:
        mod = sys.modules.get(m)
        if mod is not None:
            _patch_target_module(mod)
    if _originals:  # nothing to look for before safetensors is imported
        for mod, attr in _sites_now(full, skip_safetensors=True):
            v = mod.__dict__.get(attr)
            s = _originals.get(id(v))
            if s is not None:
                _set(mod, attr, v, s)
    _finder = _Finder()
    sys.meta_path.insert(0, _finder)


def _restore() -> None:
    """Put the originals back (lock held): where this install put a stand-in
    and it is still there, and wherever else a stand-in is found (a module
    imported while the patch was on; a module scanned before only at the
    sites recorded then). A name someone else rebound since is left as it is."""
    global _finder
    if _finder is not None:
        try:
            sys.meta_path.remove(_finder)
        except ValueError:
            pass
        _finder = None
    for mod, attr, original, standin in reversed(_installed):
        if mod.__dict__.get(attr) is standin:
            setattr(mod, attr, original)
    _installed.clear()
    if not _standins:
        return
    for mod, attr in _sites_now(_full_scan, skip_safetensors=False):
        original = _standins.get(id(mod.__dict__.get(attr)))
        if original is not None:
            setattr(mod, attr, original)


def _preload() -> None:
    """Import :mod:`memtier.safetensors` now, once safetensors is loaded and a
    ``views=False`` patch is on: that mode serves every ``safe_open`` with it,
    so its import would otherwise land inside the first load (35-42 ms
    without bytecode caches on the 2-core build VM, a tenth of a 400 MB
    ``from_pretrained``). It imports neither torch nor numpy, nor loads the
    library."""
    from .. import safetensors  # noqa: F401


class _Loader(importlib.abc.Loader):
    """Runs a safetensors module's own loader, then patches the module."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        with _lock:
            if _active:
                _patch_target_module(module)
                copy = any(p.views is False for p in _active)
            else:
                copy = False
        if copy:
            _preload()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the real loader
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the safetensors target modules with the other finders and wraps their loader."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if fullname not in _TARGET_MODULES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


class SafetensorsPatch:
    """One activation of :func:`patch_safetensors`: on from its creation until
    :meth:`stop` (or the end of its ``with`` block).

    Attributes
    ----------
    ctx : Context or None
        The context the routed calls use (None: the default context) while
        this is the most recently started active patch.
    views : bool or None
        The mode of :func:`patch_safetensors` (``views=``): None (the
        default: ``safe_open`` views), True or False.
    scan : str
        ``"names"`` or ``"all"`` (:func:`patch_safetensors`).
    """

    def __init__(self, ctx: Optional[Context] = None, views: Optional[bool] = None, scan: str = "names") -> None:
        if ctx is not None and not isinstance(ctx, Context):
            raise TypeError(f"memtier.patch_safetensors: ctx must be a memtier.Context or None, "
                            f"got {type(ctx).__name__}")
        if views is not None and not isinstance(views, bool):
            raise TypeError(f"memtier.patch_safetensors: views must be None, True or False, got {views!r}")
        if scan not in ("names", "all"):
            raise ValueError(f"memtier.patch_safetensors: scan must be 'names' or 'all', got {scan!r}")
        self.ctx = ctx
        self.views = views
        self.scan = scan
        self._on = False

    @property
    def active(self) -> bool:
        """True until :meth:`stop` (or :func:`unpatch_safetensors`)."""
        return self._on

    def _start(self) -> "SafetensorsPatch":
        with _lock:
            if not _active:
                try:
                    _install(self.scan == "all")
                except BaseException:
                    _restore()
                    raise
            _active.append(self)
            self._on = True
        if self.views is False and "safetensors" in sys.modules:
            _preload()
        return self

    def stop(self) -> None:
        """End this activation; the last one to end puts the originals back.
        Idempotent. Thread-safe."""
        with _lock:
            if not self._on:
                return
            self._on = False
            _active.remove(self)
            if not _active:
                _restore()

    def __enter__(self) -> "SafetensorsPatch":
        """Return self (already on)."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """:meth:`stop`; an exception in the block propagates."""
        self.stop()

    def __repr__(self) -> str:
        mode = {None: "", True: ", views", False: ", copy"}[self.views]
        return f"<memtier.SafetensorsPatch {'on' if self._on else 'off'}{mode}>"


def patch_safetensors(ctx: Optional[Context] = None, *, views: Optional[bool] = None,
                      scan: str = "names") -> SafetensorsPatch:
    """Route safetensors' reading functions through MemTier, with no change to the caller's code.

    ``safetensors.safe_open``, ``safetensors.torch.load_file``,
    ``safetensors.torch.load_model`` and ``safetensors.numpy.load_file`` (and
    the names other modules bound to them (see ``scan``), such as
    ``transformers.modeling_utils.safe_open``) are replaced by stand-ins that
    call :mod:`memtier.safetensors` for the arguments MemTier serves with the
    reference's meaning, and the original function for the rest (a file-like
    object, a device such as "mps"; see :func:`memtier.integrations.counts`).

    Use it as a context manager::

        with memtier.patch_safetensors():
            model = AutoModel.from_pretrained(path)

    or as a plain call that stays on until ``.stop()`` on the result or
    :func:`unpatch_safetensors`. Activations nest and may overlap in threads;
    the originals come back, exactly the objects that were there, when the
    last one stops, also when the block raises.

    Parameters
    ----------
    ctx : Context, optional
        The context that serves the routed calls (its stats count their
        bytes). Default: the process's default context. With several active
        patches the most recently started one's context (and mode) is used.
    views : None, True or False, keyword-only
        None (default): ``safe_open`` of a local file on the CPU returns
        safetensors' own mmap views, as without the patch (the reference's
        semantics: the tensors are views of the page cache, and a file
        rewritten in place changes them); MemTier counts their bytes in
        :func:`memtier.integrations.view_bytes`. ``load_file``,
        ``load_model``, URLs and CUDA devices are MemTier's.
        True: ``load_file`` of a local file on the CPU is left to
        safetensors' views too.
        False: MemTier reads every served call into tensors that own their
        memory (a file rewritten later cannot change them), ``safe_open``
        on the CPU included.
        Why views are the default for ``safe_open``: transformers'
        ``from_pretrained`` keeps what ``safe_open`` returns as its
        parameters; views cost no copy, while tensors that own their memory
        need fresh pages backed (about 0.11 s per 400 MB on the 2-core
        build VM, more than the reference's whole load), so owned tensors
        made ``from_pretrained`` 0.07-0.38x the reference warm and 0.68x
        cold (``examples/python/bench_from_pretrained.py``).
    scan : {"names", "all"}, keyword-only
        Where other modules' bindings are looked for when the patch starts
        (by the first activation; the last one's stop looks again).
        "names" (default): the names in :data:`NAMES` of every loaded module
        (about 5 ms of CPU with transformers loaded). "all": every
        module-level name of every loaded module, whatever its alias (about
        17 ms). Either scans a module once per process: later starts and
        stops visit the sites found (under 1 ms) and scan only the modules
        loaded since.

    Returns
    -------
    SafetensorsPatch
        Already on.

    Raises
    ------
    ImportError
        safetensors is not installed (nothing to route).
    TypeError
        ``ctx`` is not a :class:`memtier.Context`, or ``views`` not None or a bool.
    ValueError
        ``scan`` is not "names" or "all".

    Notes
    -----
    Thread-safe. Starting and stopping cost the ``scan`` above; with
    ``views=False`` the start (or the import of safetensors, if later) also
    imports :mod:`memtier.safetensors`, which serves every call then, so the
    first load does not pay for it. The calls
    routed cost one check of their arguments. Results follow
    :mod:`memtier.safetensors` (each tensor owns its memory; its documented
    differences apply), except what ``views`` leaves to safetensors.
    """
    import importlib.util

    if "safetensors" not in sys.modules and importlib.util.find_spec("safetensors") is None:
        raise ImportError("memtier.patch_safetensors: safetensors is not installed, so there is "
                          "nothing to route (pip install safetensors)")
    return SafetensorsPatch(ctx, views, scan)._start()


def unpatch_safetensors() -> int:
    """Stop every active :func:`patch_safetensors` activation (those still in a
    ``with`` block too): the originals are back when it returns. Returns how
    many were stopped (0 when the patch was off). Thread-safe."""
    with _lock:
        live = list(_active)
        for p in reversed(live):
            p.stop()
        return len(live)


def is_patched() -> bool:
    """True while at least one :func:`patch_safetensors` activation is on. Thread-safe."""
    return bool(_active)


_env_patch: Optional[SafetensorsPatch] = None


def apply_env() -> Optional[SafetensorsPatch]:
    """Turn the patch on when ``MEMTIER_PATCH_SAFETENSORS`` asks for it (called
    by ``import memtier``); returns that activation, or None.

    "1", "true", "yes", "on": on for the life of the process (or until
    :func:`unpatch_safetensors`), with the default context (``views=None``:
    ``safe_open`` views); "views": the same with ``views=True``; "copy":
    with ``views=False``. Unset, "", "0",
    "false", "no", "off": nothing. Another value: a warning naming it, and
    nothing. Importing nothing itself (but :mod:`memtier.safetensors` for
    "copy" once safetensors is loaded): safetensors, torch and numpy are
    patched when they are imported, so ``import memtier`` stays light. Does
    nothing when safetensors is not installed. Idempotent. Thread-safe.
    """
    global _env_patch
    raw = os.environ.get(ENV_PATCH, "")
    v = raw.strip().lower()
    if v in ("", "0", "false", "no", "off"):
        return None
    if v not in ("1", "true", "yes", "on", "views", "copy"):
        warnings.warn(f"{ENV_PATCH}={raw!r} is not understood (use 1, views, copy or 0); the safetensors "
                      f"patch stays off", RuntimeWarning, stacklevel=2)
        return None
    with _lock:
        if _env_patch is not None and _env_patch.active:
            return _env_patch
        try:
            _env_patch = patch_safetensors(views={"views": True, "copy": False}.get(v))
        except ImportError:
            return None
        return _env_patch
