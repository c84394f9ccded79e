"""Path arguments: the one path type, their encoding for the C calls, and URLs.

Paths are ``str``, ``bytes`` or ``os.PathLike``; the library takes them as
``const char*`` in the file-system encoding (``os.fsencode``). Names starting
with ``s3://``, ``http://`` or ``https://`` are remote objects the library
reads itself (runtime/remote). Pure Python: importing loads no library.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Union

#: A path argument of every memtier call (the one path type of the package).
PathType = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

#: Encoded paths (str or bytes path -> the bytes handed to the library as
#: ``const char*``; cffi passes a bytes object without a copy). Keys are exact
#: ``str``/``bytes`` objects only: an ``os.PathLike`` is looked up by the string
#: its ``__fspath__`` returns on this call, so one whose string changes is never
#: served a stale entry. Bounded: cleared when it reaches _PATH_CACHE_MAX.
#: Lookups and stores are single dict operations (atomic under the GIL).
_PATH_CACHE: Dict[Any, bytes] = {}
_PATH_CACHE_MAX = 512


def _cpath(path: PathType) -> bytes:
    """The file-system bytes of ``path`` (rejects embedded NUL, like open()).

    ``str`` paths are encoded as :func:`os.fsencode` does (the file-system
    encoding with ``surrogateescape``; UTF-8 on Linux), ``bytes`` are taken as
    they are, ``os.PathLike`` objects through ``os.fspath``. Results are cached
    per path string (see ``_PATH_CACHE``): a hit costs one dict lookup.

    Raises
    ------
    TypeError
        ``path`` is not a str, bytes or os.PathLike.
    ValueError
        The path contains a NUL byte.
    """
    tp = type(path)
    if tp is str or tp is bytes:
        b = _PATH_CACHE.get(path)
        if b is not None:
            return b
        s: Any = path
    else:
        s = os.fspath(path)  # TypeError for non-paths; called once per call
        tp = type(s)
        if tp is str or tp is bytes:
            b = _PATH_CACHE.get(s)
            if b is not None:
                return b
    b = os.fsencode(s)
    if b"\0" in b:
        raise ValueError(f"path contains a NUL byte: {path!r}")
    if type(b) is not bytes:
        b = bytes(b)
    if tp is str or tp is bytes:  # not a str/bytes subclass (its __eq__/__hash__ may differ)
        if len(_PATH_CACHE) >= _PATH_CACHE_MAX:
            _PATH_CACHE.clear()
        _PATH_CACHE[s] = b
    return b



def _fname(path: Any) -> str:
    """``path`` as a str for messages (``repr`` of anything that is not a path)."""
    try:
        return os.fsdecode(path)
    except TypeError:
        return repr(path)


#: The URL schemes the library reads remotely (runtime/remote); any other
#: name is a local path.
_URL_PREFIXES = ("s3://", "http://", "https://")


def _is_url(path: Any) -> bool:
    """Whether ``path`` names a remote object (``s3://``, ``http://``,
    ``https://``, any case): such names are read by the library, never looked
    up with ``os.stat``/``open`` (which would look for a local file of that
    name). False for anything that is not a path."""
    try:
        s = os.fsdecode(path)
    except TypeError:
        return False
    return s[:8].lower().startswith(_URL_PREFIXES)

