"""Resource limits and error texts (issue 11; field cases N03 and N04, tests/field_cases.md).

* N03: under a low soft RLIMIT_NOFILE, set after the library loaded, every read
  succeeds and the host can still open files (runtime/files keeps MemTier's
  descriptors within a quarter of the soft limit, shared by all contexts).
* N04: loading the library leaves the soft limit as the host set it, for the
  process and for the children it starts.
* A read past end of file names the caller's range and the file's size, and a
  large one fails before its result is allocated.
* Bool keywords take bools only.
* A misspelled MEMTIER_* variable gets one warning naming the closest known name.
"""

from __future__ import annotations

import resource
import time

import numpy as np
import pytest

import memtier
from memtier import _context

# -------------------------------------------------------------------- N03

N03_CHILD = r"""
import os, resource, sys, tempfile
import memtier
d = tempfile.mkdtemp()
paths = []
for i in range(600):
    p = os.path.join(d, f"f{i:03d}")
    with open(p, "wb") as f:
        f.write(bytes([i % 251]) * 4096)
    paths.append(p)
assert memtier.read(paths[0], 0, 4) == b"\0" * 4    # loads the library (N04: lower the limit after)
variant = sys.argv[1]
base = len(os.listdir("/proc/self/fd"))
soft = base + 24
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
if variant == "default":
    readers = [memtier.read]
else:  # three contexts used in turn share the process budget
    readers = [memtier.Context(max_open_files=16).read for _ in range(3)]
bad = 0
for rnd in range(2):
    for i, p in enumerate(paths):
        try:
            if readers[i % len(readers)](p, 100, 16) != bytes([i % 251]) * 16:
                bad += 1
        except memtier.MemTierError as e:
            bad += 1
            if bad == 1:
                print("first failure:", e)
with open(os.path.join(d, "host.txt"), "w") as f:  # the host can still open files
    f.write("ok")
held = len(os.listdir("/proc/self/fd"))
print(f"bad={bad} reads={2 * len(paths)} held_ok={held <= soft - 8} soft={soft} held={held}")
"""


@pytest.mark.parametrize("variant", ["default", "three_contexts"])
def test_n03_reads_under_a_low_descriptor_limit(run_py, variant):
    r = run_py(N03_CHILD, timeout=120, args=(variant,))
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("bad=0 reads=1200 held_ok=True "), r.stdout


N03_SAFE_OPEN_CHILD = r"""
import json, os, resource, struct, tempfile
import memtier, memtier.safetensors as mts
d = tempfile.mkdtemp()
paths = [os.path.join(d, f"s{i}.safetensors") for i in range(300)]
for i, p in enumerate(paths):
    h = json.dumps({"w": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}},
                   separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes([i % 251]) * 16)
memtier.read(paths[0], 0, 4)
soft = len(os.listdir("/proc/self/fd")) + 24
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
handles = [mts.safe_open(p, framework="np") for p in paths]   # all 300 kept open
good = sum(bytes(h.get_tensor("w")) == bytes([i % 251]) * 16 for i, h in enumerate(handles))
open(os.path.join(d, "host.txt"), "w").close()
print(f"good={good} held_ok={len(os.listdir('/proc/self/fd')) <= soft - 8}")
"""


def test_n03_300_safe_open_handles_under_a_low_limit(run_py):
    r = run_py(N03_SAFE_OPEN_CHILD, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "good=300 held_ok=True\n"


# -------------------------------------------------------------------- N04

N04_CHILD = r"""
import resource, subprocess, sys
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
import memtier
assert memtier.read(sys.argv[1], 0, 4) == b"abcd"
own = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
sh = subprocess.run(["sh", "-c", "ulimit -Sn"], capture_output=True, text=True, check=True).stdout.strip()
print(own, sh)
"""


def test_n04_children_see_the_hosts_soft_limit(run_py, tmp_path):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 1025:
        pytest.skip(f"hard RLIMIT_NOFILE is {hard}: Go leaves the soft limit alone")
    p = tmp_path / "abcd.bin"
    p.write_bytes(b"abcdefgh")
    r = run_py(N04_CHILD, args=(str(p),))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "1024 1024\n"


# ------------------------------------------------------- errors for big reads

def _tenk(tmp_path) -> str:
    p = tmp_path / "ten_k.bin"
    p.write_bytes(bytes(range(256)) * 40)  # 10,240 bytes
    return str(p)


def test_big_read_past_eof_names_the_callers_range(tmp_path):
    p = _tenk(tmp_path)
    n = 200 << 20
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.read(p, 0, n)
    msg = str(ei.value)
    assert f"range [0, {n}) runs past end of file (size 10240)" in msg
    assert "201326592" not in msg  # the last 64 MiB piece's offset
    assert ei.value.name == "EOF"
    assert ei.value.detail == f"read {p} at offset 0: range [0, {n}) runs past end of file (size 10240)"
    buf = np.zeros(n, dtype=np.uint8)
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.read_into(p, 0, buf)
    assert f"range [0, {n}) runs past end of file (size 10240)" in str(ei.value)
    assert str(ei.value).startswith("memtier.read_into: ")
    assert not buf.any()  # nothing written


@pytest.mark.parametrize("offset,size", [(1 << 40, 8 << 30), (0, 64 << 30)])
def test_read_far_past_eof_fails_before_allocating(tmp_path, offset, size):
    p = _tenk(tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(memtier.EndOfFileError) as ei:  # not MemoryError
        memtier.read(p, offset, size)
    took = time.perf_counter() - t0
    assert f"range [{offset}, {offset + size}) runs past end of file (size 10240)" in str(ei.value)
    assert took < 1.0, f"{took:.2f} s: the result was allocated before the size check"


def test_big_read_that_fits_the_file_still_reads(pfile):
    from conftest import pbytes

    n = (64 << 20) + 4099
    p = pfile(n + 10)
    assert memtier.read(p, 10, n) == pbytes(10, n)


def test_memory_error_names_the_size(pfile, monkeypatch):
    n = 96 << 20
    p = pfile(n, sparse=True)

    def no_memory(size):
        raise MemoryError

    monkeypatch.setattr(_context, "bytearray", no_memory, raising=False)
    with pytest.raises(MemoryError) as ei:
        memtier.read(p, 0, n)
    assert str(ei.value) == (
        f"memtier.read: {p}: no memory for a {n}-byte result (range [0, {n})); "
        "read smaller ranges, or read_into a buffer you own")


def _huge_ranges(kind, pairs):
    if kind == "list":
        return pairs
    return np.array(pairs, dtype=np.int64 if kind == "int64" else np.uint64)


@pytest.mark.parametrize("kind", ["list", "int64", "uint64"])
@pytest.mark.parametrize("pairs,index,rng", [
    ([(0, 1 << 62)], 0, (0, 1 << 62)),                                       # 4 EiB
    ([(0, 100), (0, 1 << 62)], 1, (0, 1 << 62)),
    ([(0, 10), (10000, 1000), (0, 1 << 40), (0, 5)], 1, (10000, 11000)),   # lowest failing index
    ([(0, 0), (1 << 50, 0), (100, 1 << 40)], 2, (100, 100 + (1 << 40))),   # empty ranges never fail
])
def test_readv_far_past_eof_fails_before_allocating(tmp_path, kind, pairs, index, rng):
    # The result array is allocated only after the library said the ranges
    # can be read: the EndOfFileError of the lowest failing range, never a
    # MemoryError for exabytes.
    p = _tenk(tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.readv(p, _huge_ranges(kind, pairs))
    took = time.perf_counter() - t0
    assert ei.value.index == index
    assert str(ei.value).startswith(f"memtier.readv: range {index}: ")
    assert f"range [{rng[0]}, {rng[1]}) runs past end of file (size 10240)" in str(ei.value)
    assert took < 1.0, f"{took:.2f} s: the result was allocated before the size check"


def test_readv_huge_of_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(memtier.NotFoundError) as ei:
        memtier.readv(str(tmp_path / "missing.bin"), [(0, 0), (0, 1 << 62)])
    assert ei.value.index == 1


def test_big_readv_that_fits_the_file_still_reads(pfile):
    from conftest import pbytes

    n = (64 << 20) + 4099
    p = pfile(n + 10)
    got = memtier.readv(p, np.array([[10, n], [0, 5]], dtype=np.int64))
    assert got.shape == (n + 5,)
    assert got[:n].tobytes() == pbytes(10, n) and got[n:].tobytes() == pbytes(0, 5)


# -------------------------------------------------------- bool keywords

@pytest.mark.parametrize("value", ["yes", 1, None, "False", 0.0])
def test_bool_keywords_reject_non_bools(tmp_path, value):
    p = _tenk(tmp_path)
    shown = f"{type(value).__name__} {value!r}"
    with pytest.raises(TypeError) as ei:
        memtier.read(p, 0, 4, immutable=value)
    assert str(ei.value) == f"memtier.read: immutable must be a bool (True or False), got {shown}"
    with pytest.raises(TypeError) as ei:
        memtier.read_into(p, 0, bytearray(4), immutable=value)
    assert str(ei.value) == f"memtier.read_into: immutable must be a bool (True or False), got {shown}"
    with pytest.raises(TypeError) as ei:
        memtier.readv(p, [(0, 4)], immutable=value)
    assert str(ei.value) == f"memtier.readv: immutable must be a bool (True or False), got {shown}"
    with pytest.raises(TypeError) as ei:
        memtier.prefetch(p, 0, 4, wait=value)
    assert str(ei.value) == f"memtier.prefetch: wait must be a bool (True or False), got {shown}"
    with pytest.raises(TypeError) as ei:
        memtier.prefetch(p, 0, 4, to_hbm=value)
    assert str(ei.value) == f"memtier.prefetch: to_hbm must be a bool (True or False), got {shown}"


def test_bool_keywords_take_bools(tmp_path):
    p = _tenk(tmp_path)
    want = bytes(range(4))
    for v in (True, False, np.True_, np.False_):
        assert memtier.read(p, 0, 4, immutable=v) == want
        b = bytearray(4)
        assert memtier.read_into(p, 0, b, immutable=v) == 4 and bytes(b) == want


# ------------------------------------------------- misspelled MEMTIER_* names

ENV_CHILD = r"""
import os, sys
import memtier
p = sys.argv[1]
memtier.read(p, 0, 4)
memtier.Context().read(p, 0, 4)   # a second context: no second warning
os.environ["MEMTIER_FRESHNES"] = "open"  # misspelled on purpose; set late: warned at the next init
memtier.Context().read(p, 0, 4)
memtier.Context()
print("done")
"""


def test_unknown_memtier_variable_warns_once_with_closest_name(run_py, tmp_path):
    p = _tenk(tmp_path)
    env = {"MEMTIER_CACHE_BYTE": "1G", "MEMTIER_IOTHREADS": "2"}  # misspelled on purpose
    r = run_py(ENV_CHILD, args=(p,), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("memtier: warning:")]
    assert warnings == [
        "memtier: warning: unknown environment variable MEMTIER_CACHE_BYTE "
        "(did you mean MEMTIER_CACHE_BYTES?); it is ignored",
        "memtier: warning: unknown environment variable MEMTIER_IOTHREADS "
        "(did you mean MEMTIER_IO_THREADS?); it is ignored",
        "memtier: warning: unknown environment variable MEMTIER_FRESHNES "
        "(did you mean MEMTIER_FRESHNESS?); it is ignored",
    ]


def test_known_memtier_variables_do_not_warn(run_py, tmp_path):
    p = _tenk(tmp_path)
    code = ENV_CHILD.replace('"MEMTIER_FRESHNES"', '"MEMTIER_FRESHNESS"')  # misspelled on purpose
    r = run_py(code, args=(p,),
               env={"MEMTIER_CACHE_BYTES": "8M", "MEMTIER_IO_URING": "1", "MEMTIER_VENV": "x"})
    assert r.returncode == 0, r.stderr
    assert "memtier: warning" not in r.stderr


def test_size_near_2_63_names_the_range_not_explain(tmp_path):
    p = tmp_path / "small.bin"
    p.write_bytes(b"x" * 100)
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.read(str(p), 0, 2**63 - 1)
    msg = str(ei.value)
    assert "runs past end of file (size 100)" in msg and "destination holds" not in msg, msg
