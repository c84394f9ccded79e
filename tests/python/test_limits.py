"""Memory limits (issue 11, part 1; field cases N05 and N06, tests/field_cases.md).

* N05: under ``RLIMIT_AS`` (``ulimit -v``) with 600 MiB of headroom the process
  never dies from a Go fatal error: the loader refuses before ``dlopen`` with
  :class:`memtier.LibraryLoadError` naming the limit (python/memtier/_limits.py),
  or the read works. ``RLIMIT_DATA`` of 300 MiB is the control: reads work.
* N06: the DRAM cache budget follows the smallest memory cgroup limit of the
  process and its ancestors (runtime/config/memlimit.go): the default is 25% of
  it, an explicit budget above that is refused naming the limit. The limit comes
  from a fake cgroup tree (``MEMTIER_CGROUP_ROOT``, a test-only hook), since a
  real one can only be made where the test may create cgroups.

Every child runs with a 120 s limit.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

import pytest

from memtier import _limits

CHILD_TIMEOUT = 120
MiB = 1 << 20

# -------------------------------------------------------------------- N05


def test_headroom_message_exact():
    # 586 MiB limit, 142 MB VmSize: the figures of the N05 report
    msg = _limits.headroom_message(600000 * 1024, 142000)
    assert msg == (
        "memtier: not loading libmemtier.so: RLIMIT_AS (ulimit -v) is 600000 kB and this "
        "process's VmSize is already 142000 kB, leaving 458000 kB; the library's Go runtime "
        "needs about 2097152 kB (2048 MiB) of address space above VmSize, and a reservation "
        "that fails there ends the process with a Go fatal error; run with `ulimit -v "
        "unlimited`, or with `ulimit -v` at least 2239152 kB, or bound memory with "
        "`ulimit -d` (RLIMIT_DATA) instead, which the runtime tolerates"
    )
    # VmSize already above the limit: nothing left, not a negative count
    assert "leaving 0 kB" in _limits.headroom_message(100 * MiB, 200 * 1024)
    # exactly enough, and more, load
    assert _limits.headroom_message(142000 * 1024 + _limits.AS_HEADROOM_BYTES, 142000) is None
    assert _limits.headroom_message(1 << 50, 142000) is None
    assert _limits.AS_HEADROOM_BYTES == 2 << 30


def _modules() -> list:
    """numpy, and torch where installed: the N05 imports."""
    mods = ["numpy"]
    try:
        import torch  # noqa: F401

        mods.append("torch")
    except ImportError:
        pass
    return mods


def _vmsize_kib(mods: list) -> int:
    """VmSize (KiB) of a fresh interpreter after importing mods (N05 step 1)."""
    code = "".join(f"import {m}\n" for m in mods) + textwrap.dedent("""
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                print(line.split()[1])
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=CHILD_TIMEOUT, check=True)
    return int(out.stdout.strip())


# The N05 child: argv = modules (comma-separated), what (read | dataset |
# loader), data file, index file. It prints one result line, then "after".
N05_CHILD = r"""
import sys


def main():
    mods, what, path, index = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4]
    for m in mods:
        __import__(m)
    import numpy as np
    a = np.ones(100 * 1000 * 1000, dtype=np.uint8)  # must succeed under the limit
    assert int(a[-1]) == 1
    del a
    import memtier
    try:
        if what == "read":
            got = bytes(memtier.read(path, 0, 6))
        elif what == "dataset":
            ds = memtier.MemTierDataset(index, path)
            got = bytes(np.asarray(ds[0]).tobytes())
        else:
            import torch.utils.data as tud
            ds = memtier.MemTierDataset(index, path)
            dl = tud.DataLoader(ds, batch_size=None, num_workers=1,
                                multiprocessing_context="spawn")
            got = bytes(np.asarray(next(iter(dl))).tobytes())
        print("RESULT ok", got.hex(), flush=True)
    except BaseException as e:
        print("RESULT", type(e).__name__, str(e).replace("\n", " "), flush=True)
    print("after", flush=True)


if __name__ == "__main__":  # spawn workers import this file again
    main()
"""


def _n05_files(tmp_path):
    data = tmp_path / "p.bin"
    data.write_bytes(b"memtier-n05")
    index = tmp_path / "index.txt"
    index.write_text("0 6\n")
    script = tmp_path / "n05_child.py"
    script.write_text(N05_CHILD)
    return str(script), str(data), str(index)


def _run_limited(tmp_path, what: str, limit: int, mods: list, which=resource.RLIMIT_AS):
    script, data, index = _n05_files(tmp_path)

    def preexec():
        resource.setrlimit(which, (limit, limit))

    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    return subprocess.run(
        [sys.executable, script, ",".join(mods), what, data, index],
        capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, cwd=str(tmp_path),
        preexec_fn=preexec,
    )


def _result(proc) -> str:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    return lines[0]


@pytest.mark.parametrize("what", ["read", "dataset", "loader"])
def test_n05_rlimit_as_never_kills(tmp_path, what):
    mods = _modules()
    if what == "loader" and "torch" not in mods:
        pytest.skip("torch is not installed")
    vm = _vmsize_kib(mods)
    proc = _run_limited(tmp_path, what, vm * 1024 + 600 * MiB, mods)
    assert "fatal error" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert proc.stdout.splitlines()[-1] == "after"
    res = _result(proc)
    if res.startswith("RESULT ok"):
        assert res == "RESULT ok " + b"memtie".hex()
        return
    # (a DataLoader worker's error comes back wrapped in torch's traceback text)
    assert res.startswith("RESULT LibraryLoadError "), res
    assert "memtier: not loading libmemtier.so: RLIMIT_AS (ulimit -v) is " in res, res
    for part in ("this process's VmSize is already ", "needs about 2097152 kB (2048 MiB)",
                 "`ulimit -v unlimited`", "`ulimit -d` (RLIMIT_DATA)"):
        assert part in res, res


def test_n05_refused_before_dlopen(run_py):
    # The check itself, called directly: under VmSize + 600 MiB it raises and
    # maps nothing (this holds whether or not the loader calls it yet).
    proc = run_py(r"""
        import resource
        import memtier
        from memtier import _limits
        vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize:")).split()[1])
        lim = vm * 1024 + (600 << 20)
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (lim, hard))  # soft only: raised again below
        try:
            _limits.check_address_space()
            print("no error")
        except memtier.LibraryLoadError as e:
            print("refused", "RLIMIT_AS" in str(e), "VmSize" in str(e))
        print("mapped", any("libmemtier" in l for l in open("/proc/self/maps")))
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        _limits.check_address_space()  # no limit (or the hard one): no error
        print("after")
        """, timeout=CHILD_TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["refused True True", "mapped False", "after"]


def test_n05_rlimit_data_control(tmp_path):
    # RLIMIT_DATA counts written memory, not Go's reservations: reads work.
    proc = _run_limited(tmp_path, "read", 300 * MiB, ["numpy"], which=resource.RLIMIT_DATA)
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:])
    assert _result(proc) == "RESULT ok " + b"memtie".hex()
    assert proc.stdout.splitlines()[-1] == "after"


# -------------------------------------------------------------------- N06

LIMIT = 805306368  # 768 MiB
SHARE = LIMIT // 4  # 192 MiB


def _tree(root, files: dict) -> str:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(root)


TREES = {
    "v2": ({"proc/self/cgroup": "0::/job\n",
            "sys/fs/cgroup/cgroup.controllers": "memory\n",
            "sys/fs/cgroup/job/memory.max": f"{LIMIT}\n"},
           "cgroup v2 memory.max at /sys/fs/cgroup/job"),
    "v2 ancestor": ({"proc/self/cgroup": "0::/a/b\n",
                     "sys/fs/cgroup/cgroup.controllers": "memory\n",
                     "sys/fs/cgroup/a/b/memory.max": "max\n",
                     "sys/fs/cgroup/a/b/memory.high": f"{2 * LIMIT}\n",
                     "sys/fs/cgroup/a/memory.max": f"{LIMIT}\n"},
                    "cgroup v2 memory.max at /sys/fs/cgroup/a"),
    "v1": ({"proc/self/cgroup": "5:memory:/docker/c1\n0::/\n",
            "sys/fs/cgroup/memory/docker/c1/memory.limit_in_bytes": f"{LIMIT}\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"},
           "cgroup v1 memory.limit_in_bytes at /sys/fs/cgroup/memory/docker/c1"),
}

N06_CHILD = r"""
import memtier
try:
    with memtier.Context(cache_bytes=1 << 30) as c:
        print("explicit accepted", c.config()["cache_bytes"])
except memtier.InvalidArgumentError as e:
    print("explicit refused", str(e).replace("\n", " "))
with memtier.Context() as c:
    print("default", c.config()["cache_bytes"], c.config()["cache_enabled"])
with memtier.Context(cache_bytes=%d) as c:
    print("share", c.config()["cache_bytes"])
info = memtier.runtime_info()
print("limit", info["memory_limit"], info["memory_limit_source"])
"""


@pytest.mark.parametrize("tree", sorted(TREES))
def test_n06_cache_budget_follows_cgroup_limit(tmp_path, run_py, tree):
    files, source = TREES[tree]
    root = _tree(tmp_path / "fake", files)
    proc = run_py(N06_CHILD % SHARE, timeout=CHILD_TIMEOUT, env={"MEMTIER_CGROUP_ROOT": root})
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:])
    lines = proc.stdout.splitlines()
    detail = (f"cache_bytes 1073741824 exceeds {SHARE} bytes, 25% of the memory limit of "
              f"{LIMIT} bytes ({source}): the cache counts against that limit and the kernel "
              f"cannot reclaim it; set cache_bytes to at most {SHARE}")
    assert lines[0].startswith("explicit refused ") and lines[0].endswith(detail), lines[0]
    assert lines[1:] == [f"default {SHARE} True", f"share {SHARE}", f"limit {LIMIT} {source}"]


def test_n06_no_limit_keeps_the_default(tmp_path, run_py):
    root = _tree(tmp_path / "fake", {"proc/self/cgroup": "0::/job\n",
                                     "sys/fs/cgroup/cgroup.controllers": "memory\n",
                                     "sys/fs/cgroup/job/memory.max": "max\n"})
    proc = run_py("""
        import memtier
        with memtier.Context() as c:
            print(c.config()["cache_bytes"])
        """, timeout=CHILD_TIMEOUT, env={"MEMTIER_CGROUP_ROOT": root})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(1 << 30)]
