"""Generate ``memtier._abi``: the cdef of libmemtier.so, parsed at build time.

Parsing ``memtier._cdef.CDEF`` with ``cffi.FFI().cdef()`` (pycparser) costs
about 100 ms in every process that loads the library, a DataLoader worker
included. cffi's out-of-line ABI mode (``ffi.set_source(name, None)``) does
that parse once, here, and writes a pure-Python module holding the parsed
types; importing it costs about 2 ms. It opens the same library with the same
``ffi.dlopen`` and needs no C compiler.

The module also records the CDEF it was made from (``CDEF``):
``memtier._ffi.get_ffi`` uses it only while that equals ``memtier._cdef.CDEF``,
so a checkout whose header changed after the module was written parses at run
time as before instead of binding a stale table.

setup.py runs :func:`write` (command ``build_abi``) in every install, the
wheel and editable installs included. By hand, e.g. for a checkout used
through ``PYTHONPATH=python``::

    python python/fast/abi_module.py              # writes python/memtier/_abi.py
    python python/fast/abi_module.py --out DIR    # into DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import List, Optional

MODULE = "memtier._abi"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CDEF_FILE = os.path.join(ROOT, "python", "memtier", "_cdef.py")
FILE_NAME = "_abi.py"


def read_cdef(path: str = CDEF_FILE) -> str:
    """``CDEF`` of the generated ``_cdef.py`` at ``path``, read without importing
    the package (the build must not import memtier)."""
    ns: dict = {}
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), ns)  # noqa: S102 - the project's own generated file
    cdef = ns.get("CDEF")
    if not isinstance(cdef, str):
        raise RuntimeError(f"{path} defines no CDEF string")
    return cdef


def render(cdef: str) -> str:
    """The text of the module for ``cdef`` (imports cffi: a build-time need only)."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(MODULE, None)
    with tempfile.TemporaryDirectory(prefix="memtier_abi_") as tmp:
        path = os.path.join(tmp, FILE_NAME)
        ffi.emit_python_code(path)
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return (text.rstrip("\n") + "\n\n"
            "# The cdef this module was made from: memtier._ffi uses the module only while\n"
            "# it equals memtier._cdef.CDEF (python/fast/abi_module.py).\n"
            f"CDEF = {cdef!r}\n")


def write(out_dir: str, cdef_file: str = CDEF_FILE) -> str:
    """Write ``_abi.py`` for ``cdef_file``'s CDEF into ``out_dir``; returns its path.
    Raises ImportError without cffi, OSError when the file cannot be written and
    cffi's CDefError when the cdef does not parse."""
    text = render(read_cdef(cdef_file))
    os.makedirs(out_dir, exist_ok=True)
    dst = os.path.join(out_dir, FILE_NAME)
    tmp = dst + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, dst)  # never a half-written module for a concurrent import
    return dst


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "python", "memtier"),
                    help="directory of the module (default: python/memtier of this checkout)")
    a = ap.parse_args(argv)
    print(write(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
