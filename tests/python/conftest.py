"""Shared fixtures of the Python suite.

* ``pfile(size, name=None, sparse=False)``: makes a P-file in ``tmp_path``
  (byte i = (i*131+7) & 0xFF) and returns its path; ``sparse=True`` makes a
  sparse file of zeros instead (cheap for GiB sizes).
* ``pbytes(offset, size)`` (a plain function, also importable): the expected bytes.
* ``has_torch``: True when the package uses torch (importable and not
  disabled by MEMTIER_PY_FORCE_NO_TORCH).
* ``torch``: the torch module, or the test is skipped.
* marker ``no_torch``: the test runs with MEMTIER_PY_FORCE_NO_TORCH=1 (numpy
  code paths even where torch is installed).
* ``run_py(code, timeout=..., env=None)``: runs ``code`` in a fresh
  interpreter (the same python) and returns the CompletedProcess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pattern(offset: int, size: int) -> np.ndarray:
    """P-file bytes [offset, offset + size) as a uint8 array."""
    i = np.arange(offset, offset + size, dtype=np.uint64)
    return ((i * np.uint64(131) + np.uint64(7)) & np.uint64(0xFF)).astype(np.uint8)


def pbytes(offset: int, size: int) -> bytes:
    """P-file bytes [offset, offset + size)."""
    return pattern(offset, size).tobytes()


def write_pfile(path: str, size: int) -> str:
    step = 16 << 20
    with open(path, "wb") as f:
        for off in range(0, size, step):
            f.write(pattern(off, min(step, size - off)).tobytes())
    return path


@pytest.fixture
def pfile(tmp_path):
    counter = [0]

    def make(size: int, name: str | None = None, sparse: bool = False) -> str:
        counter[0] += 1
        path = str(tmp_path / (name or f"p{counter[0]}.bin"))
        if sparse:
            with open(path, "wb") as f:
                f.truncate(size)
        else:
            write_pfile(path, size)
        return path

    return make


@pytest.fixture(autouse=True)
def _no_torch_marker(request, monkeypatch):
    if request.node.get_closest_marker("no_torch") is not None:
        monkeypatch.setenv("MEMTIER_PY_FORCE_NO_TORCH", "1")
    yield


@pytest.fixture
def has_torch() -> bool:
    from memtier import _dtypes

    return _dtypes.torch_module() is not None


@pytest.fixture
def torch():
    from memtier import _dtypes

    mod = _dtypes.torch_module()
    if mod is None:
        reason = ("MEMTIER_PY_FORCE_NO_TORCH is set" if _dtypes.torch_disabled()
                  else "torch is not installed")
        pytest.skip(reason)
    return mod


def _child_env(extra: dict | None) -> dict:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    if extra:
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
    return env


@pytest.fixture
def run_py(tmp_path):
    def run(code: str, timeout: float = 60, env: dict | None = None,
            args: tuple = ()) -> subprocess.CompletedProcess:
        script = tmp_path / f"child_{abs(hash(code)) % 10**8}.py"
        script.write_text(textwrap.dedent(code))
        return subprocess.run(
            [sys.executable, str(script), *args],
            capture_output=True, text=True, timeout=timeout, env=_child_env(env),
            cwd=str(tmp_path),
        )

    return run
