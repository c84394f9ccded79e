"""``MEMTIER_LOG``: the Python package's policy decisions and fallbacks on stderr.

The same levels and line format as the library's runtime/logx, so one
setting shows both: ``off`` (default), ``warn`` (fallbacks: a forked
DataLoader worker reading with ``os.pread``, the safetensors Python parser
taking a file the library refuses, a patched safetensors call going to the
original function), ``info`` and ``debug`` (the library's policy choices; no
Python-only lines yet). Each line is ``memtier: LEVEL: text``; each call site
(``key``) prints at most :data:`BURST` lines, then one per second, the next
printed line saying how many it suppressed.

The level is read from ``os.environ`` at first use in each process (a fork
child keeps its parent's). An unknown value prints one warning and means off.
Thread safety: all functions may be called from any thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Dict, List, Optional

__all__ = ["LEVELS", "BURST", "level", "enabled", "warn", "info", "debug"]

#: Level names, quietest first; a level prints the lines of itself and those before it.
LEVELS = ("off", "warn", "info", "debug")
OFF, WARN, INFO, DEBUG = range(4)

#: Lines a call site prints before the one-per-second limit applies.
BURST = 5

_level: Optional[int] = None
_lock = threading.Lock()
_keys: Dict[str, List[float]] = {}  # key -> [printed, last print time, suppressed]
_clock = time.monotonic


def level() -> int:
    """The level (an index into :data:`LEVELS`), reading ``MEMTIER_LOG`` on first use."""
    lv = _level
    return lv if lv is not None else _load()


def _load() -> int:
    global _level
    with _lock:
        if _level is None:
            v = os.environ.get("MEMTIER_LOG", "")
            s = v.strip().lower()
            if s in LEVELS or s == "":
                _level = LEVELS.index(s) if s else OFF
            else:
                _level = OFF
                _write("memtier: warning: MEMTIER_LOG=%s is not a level (off, warn, info, debug); "
                       "logging is off\n" % v)
        return _level


def enabled(lv: int) -> bool:
    """Whether lines of level ``lv`` (WARN, INFO, DEBUG) print."""
    return level() >= lv


def _write(s: str) -> None:
    try:
        sys.stderr.write(s)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # no stderr (closed, None): drop the line
        pass


def _log(lv: int, key: str, text: str) -> None:
    if level() < lv:
        return
    now = _clock()
    with _lock:
        st = _keys.setdefault(key, [0, 0.0, 0])
        dropped = 0
        if st[0] < BURST:
            st[0] += 1
            st[1] = now
        elif now - st[1] >= 1.0:
            st[1] = now
            dropped, st[2] = int(st[2]), 0
        else:
            st[2] += 1
            return
    line = "memtier: %s: %s" % (LEVELS[lv], text)
    if dropped:
        line += " (%d similar lines suppressed)" % dropped
    _write(line + "\n")


def warn(key: str, text: str) -> None:
    """Print ``memtier: warn: text`` when MEMTIER_LOG is warn or more (rate limited per key)."""
    _log(WARN, key, text)


def info(key: str, text: str) -> None:
    """Print ``memtier: info: text`` when MEMTIER_LOG is info or debug (rate limited per key)."""
    _log(INFO, key, text)


def debug(key: str, text: str) -> None:
    """Print ``memtier: debug: text`` when MEMTIER_LOG is debug (rate limited per key)."""
    _log(DEBUG, key, text)


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # another parent thread may have held it at fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
