"""Fork (field case B01, Python side) and signals (B03; Ctrl-C reaches Python).

Every scenario runs in a fresh interpreter with a timeout: a hang fails the
test instead of stalling the suite. Children report through their exit status
(0 = as expected) and stdout.
"""

from __future__ import annotations

import json

import pytest

MiB = 1 << 20

PRELUDE = """
import os, sys, signal, time, json
import memtier
from memtier import _ffi
PATH = sys.argv[1]
def P(off, n):
    return bytes(((i * 131 + 7) & 0xFF) for i in range(off, off + n))
def child_checks(expect_fork_error):
    # runs in the forked child; exit status 0 = as expected
    signal.alarm(5)  # a hang becomes SIGALRM (a failure), never a stalled suite
    code = 0
    t0 = time.monotonic()
    try:
        got = memtier.read(PATH, 0, 10)
        if expect_fork_error:
            code = 10
        elif got != P(0, 10):
            code = 13
    except memtier.ForkError as e:
        if not expect_fork_error:
            code = 14
        elif "spawn" not in str(e) or "forkserver" not in str(e):
            code = 11
    if time.monotonic() - t0 > 1.0:
        code = 12
    os._exit(code)
def wait_child(pid):
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        print("child killed by signal", os.WTERMSIG(status)); sys.exit(3)
    rc = os.WEXITSTATUS(status)
    if rc:
        print("child exit", rc); sys.exit(rc)
"""


def _run(run_py, body, path, timeout=60, env=None):
    r = run_py(PRELUDE + body, timeout=timeout, env=env, args=(path,))
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "fatal error" not in r.stderr
    return r


def test_f1_fork_after_use_fails_fast_in_python_and_in_c(run_py, pfile):
    path = pfile(4096)
    r = _run(run_py, """
ctx = memtier.Context()
assert memtier.read(PATH, 0, 10) == P(0, 10)
assert ctx.read(PATH, 0, 10) == P(0, 10)
pid = os.fork()
if pid == 0:
    signal.alarm(5)
    # 1. the Python guard: every entry point raises ForkError at once
    code = 0
    for call in (lambda: memtier.read(PATH, 0, 10),
                 lambda: memtier.read_into(PATH, 0, bytearray(4)),
                 lambda: ctx.read(PATH, 0, 10),
                 lambda: ctx.stats(),
                 lambda: memtier.Context(),
                 lambda: memtier.load_tensor(PATH, 0, (2,), "uint8")):
        t0 = time.monotonic()
        try:
            call()
            code = 20
        except memtier.ForkError as e:
            if "spawn" not in str(e):
                code = 21
        if time.monotonic() - t0 > 1.0:
            code = 22
    # 2. the C guard: bypass Python and call the library directly
    rt = _ffi.loaded()
    ffi, lib = rt.ffi, rt.lib
    buf = ffi.new("char[10]")
    t0 = time.monotonic()
    rc = lib.memtier_read(ctx._h, PATH.encode(), 0, 10, buf, 0)
    if rc != lib.MEMTIER_ERR_FORKED:
        code = 30
    if "fork" not in ffi.string(lib.memtier_last_error()).decode():
        code = 31
    cfg = ffi.new("memtier_config_t *")
    if lib.memtier_config_default(cfg) != -14:
        code = 32
    out = ffi.new("memtier_ctx_t **")
    if lib.memtier_init(ffi.NULL, out) != -14:
        code = 33
    if time.monotonic() - t0 > 1.0:
        code = 34
    os._exit(code)
wait_child(pid)
assert memtier.read(PATH, 0, 10) == P(0, 10)  # the parent is unaffected
print("OK")
""", path)
    assert "OK" in r.stdout


def test_f2_fork_after_load_only(run_py, pfile):
    path = pfile(4096)
    _run(run_py, """
_ffi.runtime()           # load the library, start the Go runtime, no calls
pid = os.fork()
if pid == 0:
    signal.alarm(5)
    rt = _ffi.loaded()
    out = rt.ffi.new("memtier_ctx_t **")
    if rt.lib.memtier_init(rt.ffi.NULL, out) != -14:  # the C guard
        os._exit(40)
    child_checks(expect_fork_error=True)  # the Python guard; exits
wait_child(pid)
print("OK")
""", path)


def test_raw_fork_bypassing_python_hooks_is_caught_by_the_c_guard(run_py, pfile):
    # libc fork() called directly skips os.register_at_fork hooks: the
    # Python-side pid check cannot see it, the C guard still answers FORKED.
    path = pfile(4096)
    _run(run_py, """
import ctypes
assert memtier.read(PATH, 0, 10) == P(0, 10)
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.fork()
if pid == 0:
    signal.alarm(5)
    t0 = time.monotonic()
    code = 0
    try:
        memtier.read(PATH, 0, 10)
        code = 50
    except memtier.ForkError as e:
        if e.code != -14 or "spawn" not in str(e):
            code = 51
    if time.monotonic() - t0 > 1.0:
        code = 52
    os._exit(code)
wait_child(pid)
print("OK")
""", path)


def test_fork_child_of_a_parent_that_never_loaded_works(run_py, pfile):
    path = pfile(4096)
    r = _run(run_py, """
assert 'libmemtier' not in open('/proc/self/maps').read()
pid = os.fork()
if pid == 0:
    child_checks(expect_fork_error=False)
wait_child(pid)
# the parent may still load and use it afterwards
assert memtier.read(PATH, 5, 5) == P(5, 5)
print("OK")
""", path)
    assert "OK" in r.stdout


def test_b01_multiprocessing_pools(run_py, pfile):
    path = pfile(64 * 1024)
    r = _run(run_py, """
import multiprocessing as mp

def work(k):
    return memtier.read(PATH, 4096 * k, 4096) == P(4096 * k, 4096)

if __name__ == "__main__":
    # D: parent never loaded -> fork workers read correctly
    with mp.get_context("fork").Pool(2) as pool:
        assert all(pool.map(work, range(16), chunksize=1))
    # A: parent used MemTier -> fork workers fail fast with the fix named
    assert memtier.read(PATH, 0, 4) == P(0, 4)
    t0 = time.monotonic()
    with mp.get_context("fork").Pool(2) as pool:
        try:
            pool.map(work, range(4), chunksize=1)
            print("fork pool unexpectedly worked"); sys.exit(5)
        except memtier.ForkError as e:
            assert "spawn" in str(e) and "forkserver" in str(e), str(e)
    assert time.monotonic() - t0 < 20
    # C: spawn and forkserver workers work after the parent loaded MemTier
    for method in ("spawn", "forkserver"):
        with mp.get_context(method).Pool(2) as pool:
            assert all(pool.map(work, range(16), chunksize=1)), method
    print("OK")
""", path, timeout=120)
    assert "OK" in r.stdout


def test_f4_import_does_not_map_the_library(run_py):
    r = run_py("""
        import memtier
        import memtier._context, memtier._tensor, memtier._dtypes, memtier._errors
        print('libmemtier' in open('/proc/self/maps').read())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_f5_subprocess_run_works_with_the_library_active(run_py, pfile):
    path = pfile(4096)
    r = _run(run_py, """
import subprocess, threading
assert memtier.read(PATH, 0, 10) == P(0, 10)
stop = threading.Event()
def bg():
    while not stop.is_set():
        memtier.read(PATH, 100, 100)
t = threading.Thread(target=bg); t.start()
for _ in range(50):
    assert subprocess.run(["true"]).returncode == 0
out = subprocess.run([sys.executable, "-c", "print(42)"], capture_output=True, text=True)
assert out.stdout.strip() == "42"
stop.set(); t.join()
assert memtier.read(PATH, 0, 10) == P(0, 10)
print("OK")
""", path)
    assert "OK" in r.stdout


B03 = """
import random, subprocess, threading
import numpy as np
SPARSE = sys.argv[2]
SIZE = os.path.getsize(PATH)
def pattern(off, n):
    i = np.arange(off, off + n, dtype=np.uint64)
    return ((i * np.uint64(131) + np.uint64(7)) & np.uint64(0xFF)).astype(np.uint8)

memtier.read(PATH, 0, 16)
stop = threading.Event()
bad, reads = [], [0]
def background():
    rng = random.Random(3)
    buf = np.empty(1 << 20, dtype=np.uint8)
    while not stop.is_set():
        off = rng.randrange(0, SIZE - buf.size)
        memtier.read_into(PATH, off, buf)
        if not np.array_equal(buf, pattern(off, buf.size)):
            bad.append(off)
        reads[0] += 1
bg = threading.Thread(target=background); bg.start()

counts = {"usr1": 0, "chld": 0, "alrm": 0}
def bump(name):
    def h(signum, frame):
        counts[name] += 1
    return h
signal.signal(signal.SIGUSR1, bump("usr1"))
signal.signal(signal.SIGCHLD, bump("chld"))
signal.signal(signal.SIGALRM, bump("alrm"))
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
for _ in range(5000):
    os.kill(os.getpid(), signal.SIGUSR1)
for _ in range(100):
    subprocess.run(["true"])
t_end = time.monotonic() + 5
while time.monotonic() < t_end:
    time.sleep(0.01)
signal.setitimer(signal.ITIMER_REAL, 0, 0)

caught4 = False
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)
except KeyboardInterrupt:
    caught4 = True

# step 5: Ctrl-C 100 ms into a 1 GiB read lands within 2 s
big = np.empty(1 << 30, dtype=np.uint8)
sent = []
def interrupter():
    time.sleep(0.1)
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupter).start()
t0 = time.monotonic()
interrupted = False
try:
    for _ in range(1000):  # keep reading until the interrupt lands
        memtier.read_into(SPARSE, 0, big, flags=memtier.READ_ONCE)
except KeyboardInterrupt:
    interrupted = True
t_kbd = time.monotonic()
stop.set(); bg.join()
ok_after = memtier.read(PATH, 12345, 100) == pattern(12345, 100).tobytes()
st = memtier.stats()
print(json.dumps({"usr1": counts["usr1"], "chld": counts["chld"], "alrm": counts["alrm"],
                  "caught4": caught4, "interrupted": interrupted,
                  "latency": t_kbd - sent[0] if sent else None,
                  "bad": len(bad), "reads": reads[0], "ok_after": ok_after,
                  "requests": st.requests}))
"""


@pytest.mark.slow
def test_b03_signals_with_the_go_runtime(run_py, pfile):
    path = pfile(64 * MiB)
    sparse = pfile(2 << 30, "sparse.bin", sparse=True)
    r = run_py(PRELUDE + B03, timeout=180, args=(path, sparse))
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "fatal error" not in r.stderr and "signal stack" not in r.stderr, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    print(res)
    assert res["usr1"] > 0 and res["chld"] > 0 and res["alrm"] > 0
    assert res["caught4"], "KeyboardInterrupt from os.kill(SIGINT) not raised"
    assert res["interrupted"], "the 1 GiB reads were not interrupted"
    assert res["latency"] < 2.0, res
    assert res["bad"] == 0 and res["reads"] > 0
    assert res["ok_after"]


S4 = """
import random
import numpy as np
SIZE = os.path.getsize(PATH)
def pattern(off, n):
    i = np.arange(off, off + n, dtype=np.uint64)
    return ((i * np.uint64(131) + np.uint64(7)) & np.uint64(0xFF)).astype(np.uint8)
ref = pattern(0, SIZE)
ticks = [0]
def tick(signum, frame):
    ticks[0] += 1
signal.signal(signal.SIGALRM, tick)
with memtier.Context(cache_enabled=False) as ctx:
    rng = random.Random(4)
    buf = np.empty(256 * 1024, dtype=np.uint8)
    bad = 0
    signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
    try:
        for _ in range(10000):
            n = rng.randrange(1, buf.size)
            off = rng.randrange(0, SIZE - n)
            ctx.read_into(PATH, off, buf[:n])
            if not np.array_equal(buf[:n], ref[off:off + n]):
                bad += 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
    st = ctx.stats()
print(json.dumps({"bad": bad, "ticks": ticks[0], "eintr": st.eintr_retries,
                  "errors": st.errors, "requests": st.requests}))
"""


def test_s4_eintr_storm(run_py, pfile):
    path = pfile(16 * MiB)
    r = run_py(PRELUDE + S4, timeout=180, args=(path,))
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    print(res)
    assert res["bad"] == 0 and res["errors"] == 0
    assert res["requests"] == 10000
    assert res["ticks"] > 100
