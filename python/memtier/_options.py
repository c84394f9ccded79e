"""Arguments shared by the calls: the READ_* flags, freshness and target
constants, Context settings (names, modes, C fields), devices, offsets and
bool keywords. Pure Python: importing loads no library.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from . import _constants

# Per-call hints (MEMTIER_READ_* of memtier.h; OR them), freshness settings
# and targets: generated from the header into _constants.py. The READ_*
# flags are members of the IntFlag ReadFlag (an int subclass, so they pass
# to the C calls as they are).
ReadFlag = _constants.ReadFlag
READ_DEFAULT = _constants.READ_DEFAULT
READ_ONCE = _constants.READ_ONCE  #: do not admit the bytes into the DRAM cache
READ_WILL_REUSE = _constants.READ_WILL_REUSE  #: admit into the DRAM cache whatever the size
READ_DIRECT = _constants.READ_DIRECT  #: prefer O_DIRECT for bytes not cached
READ_BUFFERED = _constants.READ_BUFFERED  #: never O_DIRECT for this call
#: trust the file as last checked: no freshness syscall for a file already open
#: (the per-call form of ``freshness="open"``; the ``immutable=True`` keyword)
READ_IMMUTABLE = _constants.READ_IMMUTABLE
_READ_IMMUTABLE = int(READ_IMMUTABLE)  # the hot paths OR plain ints (an IntFlag op allocates)

# Freshness of a context (MEMTIER_FRESHNESS_*; the ``freshness`` setting).
FRESHNESS_STRICT = _constants.FRESHNESS_STRICT  #: every call checks the open file (one fstat): never stale
FRESHNESS_INTERVAL = _constants.FRESHNESS_INTERVAL  #: a file checked < freshness_interval_ms ago is trusted
FRESHNESS_OPEN = _constants.FRESHNESS_OPEN  #: checked when opened only: for immutable data

TARGET_CPU = _constants.TARGET_CPU
TARGET_CUDA = _constants.TARGET_CUDA


#: Reads larger than this are split into C calls of at most this many bytes,
#: so that Ctrl-C (KeyboardInterrupt) lands between pieces: a Python signal
#: handler only runs once the C call in progress returns.
CHUNK_BYTES = 64 << 20

_DIRECT_MODES = _constants.DIRECT_MODES  # MEMTIER_DIRECT_*
_GDS_MODES = _constants.GDS_MODES  # MEMTIER_GDS_*
_FRESHNESS_MODES = _constants.FRESHNESS_MODES  # MEMTIER_FRESHNESS_*
#: Config keys given by name (as the MEMTIER_* environment variables take them).
_MODE_NAMES = {"direct_mode": _DIRECT_MODES, "gds_mode": _GDS_MODES,
               "freshness": _FRESHNESS_MODES}

#: Context keyword -> C field (lowercase memtier_config_t field names; generated
#: from include/memtier.h into _constants.py).
CONFIG_KEYS = _constants.CONFIG_FIELDS


def _check_off(offset: Any, what: str = "offset", bits: int = 64) -> int:
    try:
        off: int = offset.__index__()
    except AttributeError:
        raise TypeError(f"{what} must be an integer, got {type(offset).__name__}") from None
    if off < 0 or off >= 1 << bits:
        raise ValueError(f"{what} must be in [0, 2**{bits}), got {off}")
    return off


def _check_bool(value: Any, keyword: str, api: str) -> bool:
    """``value`` as a bool, for a bool keyword of ``api``: True, False or a
    numpy bool. Anything else (``"yes"``, ``1``, ``None``) is a TypeError
    naming the keyword: a truthy string would silently mean True."""
    if value is True or value is False:
        return value
    t = type(value)
    if t.__name__ in ("bool_", "bool") and t.__module__ == "numpy":
        return bool(value)
    raise TypeError(f"{api}: {keyword} must be a bool (True or False), got {t.__name__} {value!r}")



def _set_field(cfg: Any, key: str, value: Any) -> None:
    if key in _MODE_NAMES and isinstance(value, str):
        names = _MODE_NAMES[key]
        try:
            value = names[value.lower()]
        except KeyError:
            raise ValueError(
                f"{key} must be one of {list(names)} (or 0-{len(names) - 1}), got {value!r}"
            ) from None
    elif key == "cache_enabled":
        if not isinstance(value, (bool, int)):
            raise TypeError(f"config key 'cache_enabled' needs a bool, got {type(value).__name__} {value!r}")
        value = 1 if value else 0
    if isinstance(value, bool) and key != "cache_enabled":
        raise TypeError(f"config key {key!r} needs an integer, got a bool")
    try:
        value = value.__index__()
    except AttributeError:
        raise TypeError(
            f"config key {key!r} needs an integer, got {type(value).__name__} {value!r}"
        ) from None
    try:
        setattr(cfg, key, value)
    except OverflowError:
        raise ValueError(f"config value {key}={value} is out of range for its C field") from None


def _parse_device(device: Any) -> Tuple[int, Optional[int]]:
    """("cpu" | "cuda[:N]" | torch.device) -> (target, device index)."""
    s = str(device) if device is not None else "cpu"
    if s == "cpu":
        return TARGET_CPU, None
    if s == "cuda" or s.startswith("cuda:"):
        idx = 0
        if ":" in s:
            try:
                idx = int(s.split(":", 1)[1])
            except ValueError:
                raise ValueError(f"bad device {device!r}") from None
        return TARGET_CUDA, idx
    raise ValueError(f"unsupported device {device!r}: use 'cpu' or 'cuda[:N]'")


_IOV_P: Any = None  # ffi.typeof("memtier_iovec_t *") once the layout was checked


def config_dict(cfg: Any) -> Dict[str, Any]:
    """A ``memtier_config_t`` as the dict :meth:`memtier.Context.config` returns:
    every key of :data:`CONFIG_KEYS`, modes as names, ``cache_enabled`` a bool."""
    out: Dict[str, Any] = {}
    for key in CONFIG_KEYS:
        v = getattr(cfg, key)
        if key in _MODE_NAMES:
            v = next((n for n, c in _MODE_NAMES[key].items() if c == v), v)
        elif key == "cache_enabled":
            v = bool(v)
        out[key] = v
    return out
