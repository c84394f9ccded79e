"""``mypy --strict`` passes on the public API of the memtier package.

The public API is ``memtier.__all__`` and the modules that define those
names (``--follow-imports=silent``: the modules they import are analysed for
their types, their own errors are not reported here). ``cffi`` has no
stubs (``--ignore-missing-imports``). The package ships ``py.typed`` (PEP 561), so these hints are
what users' type checkers see. Issue 10 part 4.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "python" / "memtier"

#: The modules that define the names of memtier.__all__.
PUBLIC_MODULES = ["__init__.py", "_context.py", "_chunks.py", "_tensor.py", "_errors.py",
                  "_request.py", "_stats.py", "_constants.py", "_ffi.py"]


def test_py_typed_ships():
    assert (PKG / "py.typed").is_file()


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not importable in this environment (pip install mypy)")
def test_mypy_strict_passes_on_the_public_api(tmp_path):
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
           "--cache-dir", str(tmp_path / "mypy-cache"), "--ignore-missing-imports",
           # errors of the modules named here only: the private modules they
           # import are analysed for their types but reported by their own checks
           "--follow-imports=silent",
           *(str(PKG / m) for m in PUBLIC_MODULES)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run(cmd, cwd=str(ROOT / "python"), env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
