"""MEMTIER_LOG (issue 11 part 4): policy decisions and fallbacks on stderr.

Each level's exact lines for a read that takes a known path (a context whose
cache_admit_max_bytes is below the read's size: the library refuses the
admission and reads buffered), in a fresh interpreter, since the level is read
once per process; the Python fallbacks' lines; the rate limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from memtier import _log

READ = """
import sys, memtier
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(bytes(range(256)) * 64)
c = memtier.Context(cache_admit_max_bytes=4096)
for _ in range(3):
    assert c.read(p, 0, 8192) == bytes(range(256)) * 32
print("OK")
"""


def run_child(code: str, tmp_path, level, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTIER_LOG")}
    env.pop("PYTEST_CURRENT_TEST", None)
    if level is not None:
        env["MEMTIER_LOG"] = level
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                       timeout=120, env=env, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout.endswith("OK\n"), r.stderr[-3000:]
    return r


def memtier_lines(stderr: str) -> list:
    return [ln for ln in stderr.splitlines() if ln.startswith("memtier: ")]


@pytest.mark.parametrize("level", [None, "off", "warn", "info", "debug", "INFO"])
def test_levels_print_exactly_their_lines(tmp_path, level):
    p = str(tmp_path / "f.bin")
    r = run_child(READ, tmp_path, level, p)
    admit = (f"memtier: info: {p} [0, 8192): not admitted to the DRAM cache: 8192 bytes exceed "
             "cache_admit_max_bytes 4096 (hint READ_WILL_REUSE to admit)")
    path = f"memtier: debug: {p} [0, 8192): buffered, row 8: small: uncached bytes below direct_threshold"
    want = {None: [], "off": [], "warn": [], "info": [admit] * 3, "INFO": [admit] * 3,
            "debug": [admit, path] * 3}[level]
    assert r.stderr.splitlines() == want


def test_unknown_level_warns_once_and_is_off(tmp_path):
    r = run_child(READ, tmp_path, "loud", str(tmp_path / "f.bin"))
    assert r.stderr.splitlines() == [
        "memtier: warning: MEMTIER_LOG=loud is not a level (off, warn, info, debug); logging is off"]


FORK = """
import os, sys, warnings
import numpy as np
from memtier.dataset import MemTierDataset
d = sys.argv[1]
np.save(os.path.join(d, "i.npy"), np.array([[0, 4]], dtype=np.int64))
with open(os.path.join(d, "d.bin"), "wb") as f:
    f.write(b"abcd")
ds = MemTierDataset(os.path.join(d, "i.npy"), os.path.join(d, "d.bin"))
assert bytes(np.asarray(ds[0])) == b"abcd"  # the parent loads libmemtier.so
pid = os.fork()
if pid == 0:
    warnings.simplefilter("ignore")
    ds._fork_batch = False  # the per-range os.pread path (no memtier_pread_batch)
    ok = bytes(np.asarray(ds[0])) == b"abcd" and ds.io_path == "pread"
    bytes(np.asarray(ds[0]))  # once per process
    sys.stderr.write("child %d\\n" % os.getpid())
    os._exit(0 if ok else 1)
_, st = os.waitpid(pid, 0)
assert st == 0, st
print("OK")
"""


def test_fork_fallback_logs_one_warn_line(tmp_path, torch):
    r = run_child(FORK, tmp_path, "warn", str(tmp_path))
    lines = r.stderr.splitlines()
    child = int(lines[-1].split()[1])
    assert memtier_lines(r.stderr) == [
        f"memtier: warn: MemTierDataset: process {child} was forked after libmemtier.so was loaded "
        "and reads one range at a time with os.pread (slower); fix: DataLoader(..., "
        "multiprocessing_context=\"spawn\" or \"forkserver\", persistent_workers=True)"]


# ------------------------------------------------------- the Python logger


@pytest.fixture
def fake(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(_log, "_clock", lambda: now[0])
    monkeypatch.setattr(_log, "_keys", {})
    return now


def test_python_lines_and_levels(monkeypatch, capsys, fake):
    for lv, want in ((_log.OFF, ""), (_log.WARN, "memtier: warn: w\n"),
                     (_log.INFO, "memtier: warn: w\nmemtier: info: i\n"),
                     (_log.DEBUG, "memtier: warn: w\nmemtier: info: i\nmemtier: debug: d\n")):
        monkeypatch.setattr(_log, "_level", lv)
        monkeypatch.setattr(_log, "_keys", {})
        _log.warn("a", "w")
        _log.info("b", "i")
        _log.debug("c", "d")
        assert capsys.readouterr().err == want


def test_python_rate_limit_per_key(monkeypatch, capsys, fake):
    monkeypatch.setattr(_log, "_level", _log.WARN)
    for i in range(100):
        _log.warn("hot", "n %d" % i)
    _log.warn("other", "o")
    fake[0] += 1.0
    _log.warn("hot", "n 100")
    _log.warn("hot", "n 101")
    fake[0] += 2.0
    _log.warn("hot", "n 102")
    assert capsys.readouterr().err.splitlines() == [
        "memtier: warn: n 0", "memtier: warn: n 1", "memtier: warn: n 2", "memtier: warn: n 3",
        "memtier: warn: n 4", "memtier: warn: o",
        "memtier: warn: n 100 (95 similar lines suppressed)",
        "memtier: warn: n 102 (1 similar lines suppressed)"]


def test_python_reads_the_environment_once(monkeypatch, capsys):
    monkeypatch.setattr(_log, "_level", None)
    monkeypatch.setenv("MEMTIER_LOG", " Debug ")
    assert _log.level() == _log.DEBUG
    monkeypatch.setenv("MEMTIER_LOG", "off")
    assert _log.level() == _log.DEBUG  # read once
    monkeypatch.setattr(_log, "_level", None)
    monkeypatch.setenv("MEMTIER_LOG", "2")
    assert _log.level() == _log.OFF
    assert capsys.readouterr().err == (
        "memtier: warning: MEMTIER_LOG=2 is not a level (off, warn, info, debug); logging is off\n")
