"""Build ``memtier._fast``, the compiled fast path of the Python package.

A cffi API-mode (out-of-line) extension made from ``memtier_fast.c`` beside
this file. It does not link libmemtier.so: at first use ``memtier._fastpath``
gives it the addresses of the entry points of the library that the ABI-mode
loader opened (see memtier_fast.c). setup.py builds it (``pip install .``,
``pip install -e .``, ``python -m build``); without a C compiler or the
Python headers the package still works, in cffi ABI mode only.

By hand, e.g. for a checkout used through ``PYTHONPATH=python``::

    python python/fast/build.py              # writes python/memtier/_fast.<suffix>.so
    python python/fast/build.py --out DIR    # into DIR

Python 3.11 and newer build against the stable ABI of 3.11 (``Py_buffer`` is
part of it from 3.11 on): one ``_fast.abi3.so`` serves every later CPython.
Python 3.10 (and free-threaded builds, which have no stable ABI) build for the
running interpreter only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
import tempfile
from typing import Any, Dict, List, Optional

MODULE = "memtier._fast"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCE = os.path.join(HERE, "memtier_fast.c")
INCLUDE = os.path.join(ROOT, "include")  # memtier.h: the entry points' types
#: The stable ABI the module is built against (when limited_api() is True).
LIMITED_API_HEX = "0x030B0000"
LIMITED_API_TAG = "cp311"

CDEF = """
int mtf_api_version(void);
int mtf_bind(const char *mod, uintptr_t read_ex, uintptr_t readv, uintptr_t readv_ex,
             uint64_t chunk_bytes);
"""


def limited_api() -> bool:
    """Whether this interpreter builds the module against the 3.11 stable ABI."""
    return sys.version_info >= (3, 11) and not sysconfig.get_config_var("Py_GIL_DISABLED")


def extension_kwargs() -> Dict[str, Any]:
    """Keywords of the setuptools ``Extension`` (also given to cffi's set_source)."""
    if limited_api():
        macros = [("Py_LIMITED_API", LIMITED_API_HEX)]  # cffi then does not set its own
    else:
        macros = [("_CFFI_NO_LIMITED_API", None)]
    return {"include_dirs": [INCLUDE], "define_macros": macros, "py_limited_api": limited_api(),
            "extra_compile_args": ["-O2"]}


def make_ffi() -> Any:
    """The cffi ``FFI`` of the module (imports cffi: a build-time need only)."""
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    with open(SOURCE, encoding="utf-8") as f:
        ffi.set_source(MODULE, f.read(), **extension_kwargs())
    return ffi


def emit_c(path: str) -> str:
    """Write the generated C source of the module to ``path``; returns it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    make_ffi().emit_c_code(path)
    return path


def build(out_dir: str) -> str:
    """Compile the module into ``out_dir``; returns the path of the .so."""
    ffi = make_ffi()
    with tempfile.TemporaryDirectory(prefix="memtier_fast_") as tmp:
        built = ffi.compile(tmpdir=tmp, verbose=False)
        os.makedirs(out_dir, exist_ok=True)
        dst = os.path.join(out_dir, os.path.basename(built))
        tmp_dst = dst + ".tmp"
        shutil.copyfile(built, tmp_dst)
        os.replace(tmp_dst, dst)  # a process that has the old one mapped keeps it
    return dst


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "python", "memtier"),
                    help="directory of the built module (default: python/memtier of this checkout)")
    a = ap.parse_args(argv)
    print(build(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
