"""scripts/gpu_check.sh on a machine without a GPU: ``run`` records every step as
SKIP with its reason, exits 0 (1 with --require-gpu) and writes its table to
$OUT; ``--help`` prints the usage and writes nothing. The checks it runs on a GPU
machine are tested against the GPU test double by ``gpu_check.sh double``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO

SCRIPT = os.path.join(REPO, "scripts", "gpu_check.sh")

pytestmark = [
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
    pytest.mark.skipif(shutil.which("nvidia-smi") is not None or os.path.exists("/dev/nvidiactl"),
                       reason="a GPU machine: gpu_check.sh run would run its real checks here"),
]

STEPS = ["cuda driver", "go: gpu.test (CUDA)", "go: gpu.test (GDS)", "go: engine.test -run GPU",
         "c: test_gpu_staged", "c: test_gpu_gds", "c: test_gpu_hbm", "bench: bytes verified",
         "python: bench_gpu.py", "bench_report --quick (CPU)"]


def _run(args, tmp_path, out=None):
    env = dict(os.environ)
    env.pop("OUT", None)
    if out is not None:
        env["OUT"] = str(out)
    env["TMPDIR"] = str(tmp_path)
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, env=env, timeout=120,
                          cwd=str(tmp_path))


@pytest.fixture
def fake_dir(tmp_path):
    d = tmp_path / "build-gpu"
    (d / "lib").mkdir(parents=True)
    (d / "lib" / "libmemtier.so").write_bytes(b"")  # `run` only checks that prepare ran
    return d


def test_run_without_a_gpu_skips_every_step(tmp_path, fake_dir):
    out = tmp_path / "out"
    out.mkdir()
    r = _run(["run", "--quick", str(fake_dir)], tmp_path, out)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((out / "gpu_check.json").read_text())
    assert [s["step"] for s in res["steps"]] == STEPS
    assert all(s["result"] == "SKIP" and s["detail"] for s in res["steps"]), res["steps"]
    assert res["steps"][0]["detail"].startswith("no GPU: ")
    assert {s["detail"] for s in res["steps"][1:]} == {"not a GPU machine (nothing ran)"}
    assert res["counts"] == {"PASS": 0, "FAIL": 0, "SKIP": len(STEPS), "fallback_or_compat": 0}
    assert res["gpu_machine"] is False and res["budget_seconds"] == 290
    for s in STEPS:
        assert f"SKIP     {s}: " in r.stdout, s
    assert "nvidia-fs loaded: no" in r.stdout and "benchmark dir: " in r.stdout
    assert sorted(os.listdir(out)) == ["gpu_check.json", "gpu_check.log", "summary.txt"]


def test_require_gpu_fails_without_one(tmp_path, fake_dir):
    r = _run(["run", "--require-gpu", str(fake_dir)], tmp_path, tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL     cuda driver: no GPU" in r.stdout


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["double", "--quick", "--help"]])
def test_help_changes_nothing(tmp_path, fake_dir, args):
    before = sorted(p for p in tmp_path.rglob("*"))
    r = _run([*args, str(fake_dir)] if args[0] != "--help" else args, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gpu_check.sh: the one script") and "One call on a device" in r.stdout
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_run_needs_prepare(tmp_path):
    r = _run(["run", str(tmp_path / "nothing")], tmp_path)
    assert r.returncode == 2 and "run 'scripts/gpu_check.sh prepare' first" in r.stderr


def _loader_has_cufile() -> bool:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "libcufile.so.0" in out


@pytest.mark.skipif(_loader_has_cufile(), reason="this machine's loader cache has a libcufile (it comes first)")
@pytest.mark.parametrize("layout", ["nvidia/cu13/lib", "nvidia/cufile/lib", "nvidia/cu12/lib", None])
def test_find_cufile_layouts(tmp_path, layout):
    # find_cufile looks in the CUDA 13 and 12 wheels' layouts, then the copy that
    # prepare carries in DIR/cufile (no toolkit under /usr/local/cuda here).
    if any(os.path.exists(p) for p in ("/usr/local/cuda/lib64/libcufile.so.0",
                                       "/usr/lib/x86_64-linux-gnu/libcufile.so.0")):
        pytest.skip("this machine has a toolkit libcufile (it comes first)")
    site, d = tmp_path / "site", tmp_path / "build-gpu"
    (d / "cufile").mkdir(parents=True)
    (d / "cufile" / "libcufile.so.0").write_bytes(b"")
    want = d / "cufile" / "libcufile.so.0"
    if layout:
        (site / layout).mkdir(parents=True)
        (site / layout / "libcufile.so.0").write_bytes(b"")
        want = site / layout / "libcufile.so.0"
    script = (f'root={REPO!r}; dir={str(d)!r}; rel() {{ echo "$1"; }}; '
              f'eval "$(sed -n \'/^find_cufile() {{/,/^}}/p\' {SCRIPT!r})"; '
              'unset MEMTIER_CUFILE_LIBRARY; find_cufile; echo "$MEMTIER_CUFILE_LIBRARY"')
    env = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(want)
