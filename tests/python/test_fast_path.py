"""The compiled fast path (memtier._fast, cffi API mode) and cffi ABI mode give
the same bytes, results, statuses and exceptions for read_into, read and
readv; the compiled module is the one a normal build uses; the fork rules
hold in both modes.

Each case runs twice through the ``mode`` fixture: "compiled" (the module the
build made, bound to the loaded library) and "abi" (the same process with the
runtime's fast path taken away, as ``MEMTIER_PYTHON_FAST=0`` does at load).
"""

from __future__ import annotations

import array
import os

import numpy as np
import pytest

import memtier
from memtier import _ffi, _fastpath

from conftest import pattern, pbytes

MiB = 1 << 20
SIZE = 1 << 20  # the P-file of most cases


@pytest.fixture(params=["compiled", "abi"])
def mode(request, monkeypatch):
    rt = _ffi.runtime()
    if request.param == "compiled":
        assert rt.fast is not None, f"the compiled fast path is not in use: {rt.fast_state}"
    else:
        monkeypatch.setattr(rt, "fast", None)  # contexts made now bind no fast path
    return request.param


@pytest.fixture
def ctx(mode):
    with memtier.Context(cache_bytes=64 * MiB) as c:
        assert (c._fri is not None) == (mode == "compiled")
        yield c


def outcome(fn, *args, **kw):
    """("ok", result) or (exception type, message, code, filename, index)."""
    try:
        return ("ok", fn(*args, **kw))
    except Exception as e:  # noqa: BLE001 - the test compares what was raised
        return (type(e), str(e), getattr(e, "code", None), getattr(e, "filename", None),
                getattr(e, "index", None))


def in_both_modes(monkeypatch, body):
    """{"compiled": body("compiled"), "abi": body("abi")}: body runs first with
    the compiled module, then with contexts that bind no fast path (ABI mode)."""
    rt = _ffi.runtime()
    assert rt.fast is not None, rt.fast_state
    results = {"compiled": body("compiled")}
    monkeypatch.setattr(rt, "fast", None)  # contexts made now bind no fast path
    results["abi"] = body("abi")
    return results


# ---------------------------------------------------------------- the module is used


def test_a_normal_build_uses_the_compiled_module(run_py):
    # CI builds the package (pip install -e); if that build fell back to ABI
    # mode only (no compiler, broken build step), this fails with the reason.
    r = run_py("""
        import memtier
        print(memtier.runtime_info()["python_fast_path"])
    """, env={"MEMTIER_PYTHON_FAST": None})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "compiled"


@pytest.mark.parametrize("value,state", [
    ("0", "abi: MEMTIER_PYTHON_FAST=0"),
    ("1", "compiled"),
    ("yes", "abi: MEMTIER_PYTHON_FAST='yes' is not 0 or 1 (unset or 1: compiled when built)"),
])
def test_environment_switch(run_py, tmp_path, value, state):
    p = tmp_path / "d.bin"
    p.write_bytes(bytes(range(256)))
    r = run_py(f"""
        import numpy as np, memtier
        b = bytearray(5)
        assert memtier.read_into({str(p)!r}, 10, b) == 5 and bytes(b) == bytes(range(10, 15))
        out = memtier.readv({str(p)!r}, np.array([[1, 2], [200, 3]], dtype=np.int64))
        assert out.tolist() == [1, 2, 200, 201, 202], out
        print(memtier.runtime_info()["python_fast_path"])
        print(memtier._ffi.runtime().fast is None)
    """, env={"MEMTIER_PYTHON_FAST": value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [state, str(state != "compiled")]
    # A value that is neither 0 nor 1 is also said once on stderr (as a bad MEMTIER_LOG is).
    warning = (f"memtier: warning: {state[len('abi: '):]}; the cffi ABI mode is used\n"
               if value not in ("0", "1") else "")
    assert r.stderr.count("memtier: warning:") == (1 if warning else 0) and warning in r.stderr, r.stderr


def test_stale_module_version_falls_back(monkeypatch):
    rt = _ffi.runtime()  # loaded (and bound) first, with the real version
    from memtier import _fast

    monkeypatch.setattr(_fastpath, "API_VERSION", _fastpath.API_VERSION + 1)
    fast, state = _fastpath.bind(rt.ffi, rt.lib)
    assert fast is None
    assert state == (f"abi: memtier._fast speaks version {_fast.lib.mtf_api_version()}, this "
                     f"package {_fastpath.API_VERSION} (a stale build: rebuild with "
                     "`pip install .` or python/fast/build.py)")


METHOD_KIND = """
import inspect, memtier
from memtier import _context
kind = type(memtier.Context.__dict__["read_into"]).__name__
memtier.Context().close()  # the first context binds the fast path (or not)
m = memtier.Context.__dict__["read_into"]
print(kind, type(m).__name__, m.__qualname__)
print(inspect.signature(m))
print(m.__doc__ == _context._READ_INTO_PY.__doc__, len(m.__doc__) > 1000)
"""


@pytest.mark.parametrize("fast", ["1", "0"])
def test_context_read_into_is_a_c_method_when_compiled(run_py, fast):
    r = run_py(METHOD_KIND, env={"MEMTIER_PYTHON_FAST": fast})
    assert r.returncode == 0, r.stderr
    after = "method_descriptor" if fast == "1" else "function"
    assert r.stdout.splitlines() == [
        f"function {after} Context.read_into",
        "(self, /, path, offset, buffer, *, flags=0, immutable=False)" if fast == "1" else
        "(self, path: 'PathType', offset: 'int', buffer: 'WritableBuffer', *, flags: 'int' = 0, "
        "immutable: 'bool' = False) -> 'int'",
        "True True"]


def _python_frames(fn):
    """The names of the Python functions of memtier and this file that a call
    of fn() entered. Others are not the read's: a garbage collection inside
    the call runs whatever finalizers are due (CI once saw multiprocessing's
    Finalize.__call__ and sub_debug there), so the collector is off for the
    call and frames of other files are left out."""
    import gc
    import sys

    ours = (os.path.dirname(os.path.abspath(memtier.__file__)), os.path.abspath(__file__))
    seen = []

    def prof(frame, event, arg):
        if event == "call" and os.path.abspath(frame.f_code.co_filename).startswith(ours):
            seen.append(frame.f_code.co_name)

    gc.collect()
    gc.disable()
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
        gc.enable()
    return seen


def test_compiled_read_into_runs_no_python(ctx, mode, pfile):
    path = pfile(SIZE)
    b = bytearray(64)
    ctx.read_into(path, 0, b)  # opens the file, caches the encoded path
    calls = [lambda: ctx.read_into(path, 64, b),
             lambda: ctx.read_into(path, 64, b, immutable=True, flags=memtier.READ_ONCE),
             lambda: ctx.read_into(path, 64, memoryview(b))]
    for call in calls:
        frames = _python_frames(call)
        assert bytes(b) == pbytes(64, 64)
        # the lambda itself is the one Python frame when the C method serves the read
        if mode == "compiled":
            assert frames == ["<lambda>"]
        else:
            assert frames[:2] == ["<lambda>", "read_into"]
    # what it declines runs the Python method (the fallback): a path not cached
    # yet, a read above CHUNK_BYTES, an offset that is not an int (a numpy
    # integer: the Python method decides what it takes)... and a closed context
    frames = _python_frames(lambda: ctx.read_into(path, np.int64(64), b))
    assert bytes(b) == pbytes(64, 64)
    assert frames[:2] == ["<lambda>", "read_into"]
    ctx.close()
    frames = _python_frames(lambda: outcome(ctx.read_into, path, 0, b))
    assert "read_into" in frames


def test_read_into_argument_errors_are_the_same_in_both_modes(pfile, monkeypatch):
    """Calls the C method passes to the Python method: the outcome (result or
    exception type and message) is the same as in ABI mode."""
    path = pfile(SIZE)

    def body(mode):
        b = bytearray(8)
        with memtier.Context() as c:
            assert (c._fri is None) == (mode == "abi")
            got = [
                outcome(c.read_into, path=path, offset=3, buffer=b),
                outcome(c.read_into, path, 3, buffer=b, immutable=True),
                outcome(c.read_into, path, 0),
                outcome(c.read_into, path, 0, b, 0),
                outcome(c.read_into, path, 0, b, bogus=1),
                outcome(c.read_into, path, 0, b, flags=None),
                outcome(c.read_into, path, 0, b, immutable=None),
                outcome(c.read_into, path, 2.0, b),
                outcome(memtier.Context.read_into, c, path, 5, b),
                outcome(lambda: (c.read_into(path, 1, b, **{"flags": 0, "immutable": False}),
                                 bytes(b))),
            ]

            class Sub(memtier.Context):
                pass

            with Sub() as s:
                got.append(outcome(lambda: (s.read_into(path, 9, b), bytes(b))))
        return got

    results = in_both_modes(monkeypatch, body)
    assert results["compiled"] == results["abi"]
    assert results["abi"][-1] == ("ok", (8, pbytes(9, 8)))
    assert results["abi"][4][:2] == (
        TypeError, "Context.read_into() got an unexpected keyword argument 'bogus'")


# ---------------------------------------------------------------- read_into


def _dests():
    return {
        "bytearray": lambda n: bytearray(n),
        "memoryview slice": lambda n: memoryview(bytearray(n + 16))[8:8 + n],
        "array.array": lambda n: array.array("B", bytes(n)),
        "numpy uint8": lambda n: np.zeros(n, dtype=np.uint8),
        "numpy float32 2-D": lambda n: np.zeros((n // 8, 2), dtype=np.float32),
        "numpy structured": lambda n: np.zeros(n // 8, dtype=[("a", "<u4"), ("Ob", "<u4")]),
    }


@pytest.mark.parametrize("kind", sorted(_dests()))
@pytest.mark.parametrize("offset", [0, 4096 + 3, SIZE - 4096])
def test_read_into_bytes(ctx, pfile, kind, offset):
    path = pfile(SIZE)
    ctx.prefetch(path, 0, SIZE)
    for immutable in (False, True):
        buf = _dests()[kind](4096)
        assert ctx.read_into(path, offset, buf, immutable=immutable) == 4096
        assert bytes(memoryview(buf).cast("B")) == pbytes(offset, 4096)
    st = ctx.stats()
    assert (st.requests, st.cache_hit_requests, st.bytes) == (2, 2, 8192)


def test_read_into_empty_and_end_of_file(ctx, pfile):
    path = pfile(SIZE)
    assert ctx.read_into(path, SIZE, bytearray(0)) == 0
    assert ctx.read_into(path, 5, np.zeros(0, dtype=np.uint8)) == 0
    b = bytearray(10)
    assert ctx.read_into(path, SIZE - 10, b) == 10 and bytes(b) == pbytes(SIZE - 10, 10)


def test_read_into_path_forms(ctx, pfile):
    import pathlib

    from memtier import _paths

    path = pfile(SIZE)
    _paths._PATH_CACHE.clear()  # the first call of a path encodes it (declined, then cached)
    for form in (path, path, os.fsencode(path), pathlib.Path(path)):
        b = bytearray(32)
        assert ctx.read_into(form, 999, b) == 32 and bytes(b) == pbytes(999, 32)
    assert _paths._PATH_CACHE[path] == os.fsencode(path)


def test_read_into_numpy_integer_offset_and_int_flag(ctx, pfile):
    path = pfile(SIZE)
    b = bytearray(16)
    assert ctx.read_into(path, np.int64(100), b, flags=memtier.READ_ONCE) == 16
    assert bytes(b) == pbytes(100, 16)
    assert ctx.read_into(path, np.uint32(7), b, flags=np.uint32(0)) == 16
    assert bytes(b) == pbytes(7, 16)


class _IndexOnly:
    """An integer-like object with __index__ but no __int__: cffi refuses it."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def test_index_only_arguments_have_one_outcome_in_both_modes_cached_or_not(pfile, monkeypatch):
    """The compiled path used PyNumber_Index, so once a path was cached it took
    an offset, size or flags that the Python path (cffi) refuses: the outcome
    depended on the path's history. Now each call, first or repeated, has the
    outcome of the Python method in both modes."""
    path = pfile(SIZE)

    def body(mode):
        got = []
        with memtier.Context() as c:
            assert (c._fri is None) == (mode == "abi")
            for _ in range(2):  # the second time the path is in the cache
                b = bytearray(8)
                got += [outcome(c.read_into, path, 0, b),
                        outcome(c.read_into, path, _IndexOnly(0), b),
                        outcome(c.read_into, path, 0, b, flags=_IndexOnly(0)),
                        outcome(c.read, path, _IndexOnly(0), 8),
                        outcome(c.read, path, 0, _IndexOnly(8)),
                        outcome(c.read, path, 16, 8)]
        return got

    results = in_both_modes(monkeypatch, body)
    assert results["compiled"] == results["abi"]
    want = results["abi"]
    assert want[:6] == want[6:]  # the cached path changes nothing
    assert want[0] == ("ok", 8)
    assert want[1][0] is TypeError and want[2][0] is TypeError  # cffi's refusal
    assert want[3][0] is TypeError
    assert want[4] == ("ok", pbytes(0, 8))  # read converts its size with operator.index
    assert want[5] == ("ok", pbytes(16, 8))


def test_read_into_freshness_open_context(mode, pfile):
    path = pfile(SIZE)
    with memtier.Context(freshness="open") as c:
        c.prefetch(path, 0, SIZE)
        b = np.empty(4096, dtype=np.uint8)
        assert c.read_into(path, 8192, b) == 4096
        assert b.tobytes() == pbytes(8192, 4096)
        st = c.stats()
        assert (st.requests, st.cache_hit_requests) == (1, 1)


def test_read_into_large_buffers_take_the_split_path(ctx, pfile):
    path = pfile(70 * MiB, sparse=True)
    b = np.full(65 * MiB, 7, dtype=np.uint8)  # above CHUNK_BYTES: two C calls
    assert ctx.read_into(path, MiB, b) == 65 * MiB
    assert not b.any()
    assert ctx.stats().requests == 2


# exact messages: {path} is the file, {d} its directory
ERRORS = [
    ("past end of file", lambda p, d: (p, SIZE - 4, bytearray(10), {}),
     memtier.EndOfFileError, "memtier.read_into: read {path} at offset 1048572: range "
     "[1048572, 1048582) runs past end of file (size 1048576)"),
    ("missing file", lambda p, d: (os.path.join(d, "nope.bin"), 0, bytearray(4), {}),
     memtier.NotFoundError, None),
    ("directory", lambda p, d: (d, 0, bytearray(4), {}), memtier.IsDirectoryError, None),
    ("read-only bytes", lambda p, d: (p, 0, b"abcd", {}), TypeError,
     "destination bytes is read-only; pass a writable buffer (bytearray, numpy array with "
     "writeable=True, ...)"),
    ("read-only numpy", lambda p, d: (p, 0, np.zeros(4, np.uint8).view(), {"ro": True}), TypeError,
     "destination ndarray is read-only; pass a writable buffer (bytearray, numpy array with "
     "writeable=True, ...)"),
    ("non-contiguous", lambda p, d: (p, 0, np.zeros((4, 4), np.uint8)[:, ::2], {}), ValueError,
     "destination ndarray is not C-contiguous (shape (4, 2), strides (4, 2)); pass a contiguous "
     "buffer (e.g. numpy.ascontiguousarray and copy back)"),
    ("Fortran order", lambda p, d: (p, 0, np.zeros((4, 4), np.uint8, order="F"), {}), ValueError,
     "destination ndarray is not C-contiguous (shape (4, 4), strides (1, 4)); pass a contiguous "
     "buffer (e.g. numpy.ascontiguousarray and copy back)"),
    ("object dtype", lambda p, d: (p, 0, np.empty(2, dtype=object), {}), TypeError,
     "destination array has dtype object (it holds Python object pointers); use a numeric dtype "
     "such as numpy.uint8"),
    ("not a buffer", lambda p, d: (p, 0, [0, 0], {}), TypeError,
     "expected a writable buffer (bytearray, memoryview, array.array, numpy.ndarray) or a torch "
     "tensor, got builtins.list"),
    ("negative offset", lambda p, d: (p, -1, bytearray(4), {}), ValueError,
     "offset must be in [0, 2**64), got -1"),
    ("huge offset", lambda p, d: (p, 1 << 64, bytearray(4), {}), ValueError,
     "offset must be in [0, 2**64), got 18446744073709551616"),
    ("flags above 32 bits", lambda p, d: (p, 0, bytearray(4), {"flags": 1 << 32}), ValueError,
     "flags must be in [0, 2**32), got 4294967296"),
    ("immutable not a bool", lambda p, d: (p, 0, bytearray(4), {"immutable": "yes"}), TypeError,
     "memtier.read_into: immutable must be a bool (True or False), got str 'yes'"),
    ("bad buffer before a bad immutable", lambda p, d: (p, 0, b"x", {"immutable": 1}), TypeError,
     "destination bytes is read-only; pass a writable buffer (bytearray, numpy array with "
     "writeable=True, ...)"),
    ("path with NUL", lambda p, d: ("a\0b", 0, bytearray(4), {}), ValueError,
     "path contains a NUL byte: 'a\\x00b'"),
]


@pytest.mark.parametrize("name,args,exc,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_read_into_errors_are_the_same_in_both_modes(ctx, pfile, tmp_path, name, args, exc,
                                                     message):
    path = pfile(SIZE)
    ctx.read_into(path, 0, bytearray(1))  # the file is open: errors come from the call itself
    before = ctx.stats().requests
    target, offset, buf, kw = args(path, str(tmp_path))
    if kw.pop("ro", False):
        buf.flags.writeable = False
    with pytest.raises(exc) as ei:
        ctx.read_into(target, offset, buf, **kw)
    if message is not None:
        assert str(ei.value) == message.format(path=path)
    else:
        assert ei.value.filename == target
    if exc in (TypeError, ValueError):
        assert ctx.stats().requests == before  # refused before any I/O


def test_errors_and_results_equal_across_modes(pfile, tmp_path, monkeypatch):
    """Every case of ERRORS and a few reads, run in both modes in one process:
    the type, message, code, filename and index of each outcome are equal."""
    path = pfile(SIZE)

    def body(mode):
        got = []
        with memtier.Context() as c:
            assert (c._fri is None) == (mode == "abi")
            for _, args, _, _ in ERRORS:
                target, offset, buf, kw = args(path, str(tmp_path))
                if kw.pop("ro", False):
                    buf.flags.writeable = False
                got.append(outcome(c.read_into, target, offset, buf, **kw))
            b = bytearray(100)
            got.append((outcome(c.read_into, path, 17, b), bytes(b)))
            got.append(outcome(c.read, path, 5, 20))
            got.append(outcome(c.read, path, SIZE - 2, 20))
            got.append(outcome(c.read, path, -1, 2))
            got.append(outcome(c.read, path, 0, -2))
            got.append(outcome(c.read, path, 0, 2.0))
            got.append(outcome(c.read, path, 0, 2, immutable=1))
            got.append(outcome(c.read, os.path.join(str(tmp_path), "nope"), 0, 0))
            got.append(outcome(c.read, path, 3, 5, flags=1 << 32))
            got.append(outcome(lambda: c.readv(path, np.array([[0, 3], [SIZE, 1]])).tolist()))
            got.append(outcome(lambda: c.readv(path, np.array([[0, 3], [9, 2]])).tolist()))
        return got

    results = in_both_modes(monkeypatch, body)
    assert results["compiled"] == results["abi"]
    assert results["abi"][-1] == ("ok", list(pbytes(0, 3) + pbytes(9, 2)))


def test_read_into_torch_tensor(ctx, pfile, torch):
    path = pfile(SIZE)
    t = torch.zeros(1024, dtype=torch.int32)  # no buffer protocol: the data_ptr path
    assert ctx.read_into(path, 64, t) == 4096
    assert t.numpy().tobytes() == pbytes(64, 4096)
    with pytest.raises(ValueError) as ei:
        ctx.read_into(path, 0, torch.zeros(4, requires_grad=True))
    assert str(ei.value).startswith("tensor requires grad")


def test_closed_context(mode, pfile):
    path = pfile(SIZE)
    c = memtier.Context()
    c.close()
    for call in (lambda: c.read_into(path, 0, bytearray(4)), lambda: c.read(path, 0, 4),
                 lambda: c.readv(path, _ranges([0], [4]))):
        with pytest.raises(memtier.ClosedError) as ei:
            call()
        assert str(ei.value) == ("memtier: the context is closed: context or request is "
                                 "finalized or unknown")


def test_threads_share_a_context(ctx, pfile):
    import threading

    path = pfile(SIZE)
    ctx.prefetch(path, 0, SIZE)
    bad = []

    def work(seed):
        rng = np.random.default_rng(seed)
        b = np.empty(4096, dtype=np.uint8)
        for _ in range(300):
            off = int(rng.integers(0, SIZE - 4096))
            ctx.read_into(path, off, b)
            if b.tobytes() != pbytes(off, 4096):
                bad.append(off)
            rs = _ranges(rng.integers(0, SIZE - 64, 8), [64] * 8)
            if ctx.readv(path, rs).tobytes() != _want(rs):
                bad.append(-1)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert bad == []
    st = ctx.stats()
    # a readv counts one request per range: 4 threads x 300 x (1 + 8)
    assert (st.requests, st.cache_hit_requests) == (4 * 300 * 9, 4 * 300 * 9)


# ---------------------------------------------------------------- read


def test_read(ctx, pfile):
    path = pfile(SIZE)
    got = ctx.read(path, 123, 4000)
    assert type(got) is bytes and got == pbytes(123, 4000)
    assert ctx.read(path, 123, 4000, immutable=True) == pbytes(123, 4000)
    assert ctx.read(path, SIZE, 0) == b""
    with pytest.raises(memtier.EndOfFileError) as ei:
        ctx.read(path, SIZE - 1, 2)
    assert str(ei.value) == (f"memtier.read: read {path} at offset 1048575: range [1048575, "
                             "1048577) runs past end of file (size 1048576)")


def test_read_above_chunk_bytes(ctx, pfile):
    path = pfile(70 * MiB, sparse=True)
    got = ctx.read(path, 1, 65 * MiB)
    assert type(got) is bytes and got == bytes(65 * MiB)
    with pytest.raises(memtier.EndOfFileError) as ei:
        ctx.read(path, 10 * MiB, 65 * MiB)
    assert str(ei.value) == (f"memtier.read: read {path} at offset 10485760: range [10485760, "
                             "78643200) runs past end of file (size 73400320)")


# ---------------------------------------------------------------- readv


def _ranges(offsets, sizes, dtype=np.int64):
    return np.stack([np.asarray(offsets), np.asarray(sizes)], 1).astype(dtype)


def _want(rs):
    return b"".join(pbytes(int(o), int(n)) for o, n in rs)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint16])
@pytest.mark.parametrize("n", [1, 256, 300])
def test_readv_bytes(ctx, pfile, dtype, n):
    path = pfile(SIZE)
    ctx.prefetch(path, 0, SIZE)
    rng = np.random.default_rng(n)
    offs = rng.integers(0, min(SIZE - 4096, np.iinfo(dtype).max - 4096), n)
    sizes = rng.integers(0, 4097, n)
    rs = _ranges(offs, sizes, dtype)
    got = ctx.readv(path, rs)
    assert got.dtype == np.uint8 and got.tobytes() == _want(rs)
    out = bytearray(int(sizes.sum()) + 5)
    assert ctx.readv(path, rs, out=out, immutable=True) is out
    assert bytes(out[:-5]) == _want(rs) and bytes(out[-5:]) == bytes(5)
    out2 = np.zeros(int(sizes.sum()), dtype=np.uint8)
    assert ctx.readv(path, rs, out=memoryview(out2)).obj is out2
    assert out2.tobytes() == _want(rs)


def test_readv_other_range_forms(ctx, pfile):
    path = pfile(SIZE)
    rs = _ranges([10, 5000, 77], [4, 3, 9])
    want = _want(rs)
    assert ctx.readv(path, rs[::1].copy(order="F")).tobytes() == want  # F-ordered (N, 2)
    big = _ranges([10, 0, 5000, 0, 77, 0], [4, 0, 3, 0, 9, 0])
    assert ctx.readv(path, big[::2]).tobytes() == want  # a strided view
    assert ctx.readv(path, rs.tolist()).tobytes() == want  # a list
    assert ctx.readv(path, np.zeros((0, 2), dtype=np.int64)).tobytes() == b""
    outs = [bytearray(4), bytearray(3), np.zeros(9, np.uint8)]
    assert ctx.readv(path, rs, out=outs) is outs
    assert bytes(outs[0]) + bytes(outs[1]) + outs[2].tobytes() == want


def test_readv_above_chunk_bytes_is_batched(ctx, pfile):
    path = pfile(70 * MiB, sparse=True)
    rs = _ranges([0, 40 * MiB], [40 * MiB, 30 * MiB])
    out = np.full(70 * MiB, 1, dtype=np.uint8)
    assert ctx.readv(path, rs, out=out) is out
    assert not out.any()
    assert ctx.stats().requests == 2  # two batches of at most CHUNK_BYTES


READV_ERRORS = [
    ("past end of file", lambda: _ranges([0, SIZE - 1, 5], [2, 2, 2]), None,
     memtier.EndOfFileError, "memtier.readv: range 1: read {path} at offset 1048575: range "
     "[1048575, 1048577) runs past end of file (size 1048576)", 1),
    ("negative size", lambda: _ranges([0, 8], [2, -1]), None, ValueError,
     "range 1 has a negative offset or size: (8, -1)", None),
    ("2**63", lambda: _ranges([0, 1 << 63], [2, 1], np.uint64), None, ValueError,
     "range 1 is out of range (2**63 or more): (9223372036854775808, 1)", None),
    ("out too small", lambda: _ranges([0, 8], [2, 3]), lambda: bytearray(4), ValueError,
     "out holds 4 bytes, the ranges need 5", None),
    ("read-only out", lambda: _ranges([0, 8], [2, 3]), lambda: b"123456", TypeError,
     "destination bytes is read-only; pass a writable buffer (bytearray, numpy array with "
     "writeable=True, ...)", None),
    ("wrong shape", lambda: np.zeros((3, 3), dtype=np.int64), None, ValueError,
     "ranges must have shape (N, 2), got (3, 3)", None),
    ("float ranges", lambda: np.zeros((3, 2), dtype=np.float64), None, TypeError,
     "ranges must be (offset, size) integer pairs, got float64 values", None),
]


@pytest.mark.parametrize("name,ranges,out,exc,message,index", READV_ERRORS,
                         ids=[e[0] for e in READV_ERRORS])
def test_readv_errors_are_the_same_in_both_modes(ctx, pfile, name, ranges, out, exc, message,
                                                 index):
    path = pfile(SIZE)
    dest = None if out is None else out()
    with pytest.raises(exc) as ei:
        ctx.readv(path, ranges(), out=dest)
    assert str(ei.value) == message.format(path=path)
    assert getattr(ei.value, "index", None) == index


LONG = [[0, 2]] * 50  # above _SMALL_READV: the numpy path of a list

NON_INTEGER_RANGES = [
    ("short list, float size", lambda: [[0, 2], [8, 2.0]], TypeError,
     "ranges must be (offset, size) integer pairs: range 1 is [8, 2.0]"),
    ("short list, float offset", lambda: [(0.5, 2)], TypeError,
     "ranges must be (offset, size) integer pairs: range 0 is (0.5, 2)"),
    ("short tuple, numpy float", lambda: ((0, np.float64(2)),), TypeError,
     f"ranges must be (offset, size) integer pairs: range 0 is {(0, np.float64(2))!r}"),
    ("short list, None", lambda: [[0, None]], TypeError,
     "ranges must be (offset, size) integer pairs: range 0 is [0, None]"),
    ("long list, float", lambda: LONG + [[8, 2.0]], TypeError,
     "ranges must be (offset, size) integer pairs, got float64 values"),
    ("float array", lambda: np.array([[0, 2], [8, 2]], dtype=np.float64), TypeError,
     "ranges must be (offset, size) integer pairs, got float64 values"),
    # the wrong shape stays a ValueError in every form
    ("short list, a triple", lambda: [[0, 2, 3]], ValueError,
     "ranges must have shape (N, 2): range 0 is [0, 2, 3], not an (offset, size) pair of "
     "integers"),
    ("short list, a bare int", lambda: [5], ValueError,
     "ranges must have shape (N, 2): range 0 is 5, not an (offset, size) pair of integers"),
]


@pytest.mark.parametrize("name,ranges,exc,message", NON_INTEGER_RANGES,
                         ids=[e[0] for e in NON_INTEGER_RANGES])
def test_readv_non_integer_ranges_raise_type_error_in_every_form(ctx, pfile, name, ranges, exc,
                                                                 message):
    # A float offset or size is a TypeError whether ranges is a short list (the
    # cffi loop), a long one or an array (numpy), as os.preadv(fd, bufs, 1.0)
    # raises TypeError; a wrong shape is a ValueError in every form.
    path = pfile(SIZE)
    out = bytearray(200)
    with pytest.raises(exc) as ei:
        ctx.readv(path, ranges(), out=out)
    assert type(ei.value) is exc
    assert str(ei.value) == message
    assert out == bytearray(200)  # raised before any I/O


def test_readv_good_ranges_of_a_failed_call_are_read(ctx, pfile):
    path = pfile(SIZE)
    out = np.zeros(6, dtype=np.uint8)
    with pytest.raises(memtier.EndOfFileError):
        ctx.readv(path, _ranges([0, SIZE - 1, 5], [2, 2, 2]), out=out)
    assert out[:2].tobytes() == pbytes(0, 2) and out[4:].tobytes() == pbytes(5, 2)


def test_readv_flags_and_immutable(ctx, pfile):
    path = pfile(SIZE)
    rs = _ranges([1, 2], [3, 4])
    assert ctx.readv(path, rs, flags=memtier.READ_ONCE).tobytes() == _want(rs)
    with pytest.raises(TypeError) as ei:
        ctx.readv(path, rs, immutable=None)
    assert str(ei.value) == ("memtier.readv: immutable must be a bool (True or False), got "
                             "NoneType None")
    with pytest.raises(ValueError) as ei:
        ctx.readv(path, rs, flags=-1)
    assert str(ei.value) == "flags must be in [0, 2**32), got -1"


MODULE_LEVEL = """
import sys, memtier
path = sys.argv[1]
b = bytearray(4)
print(memtier.read_into(path, 1, b), list(b))  # creates the default context
print(memtier.read_into(path, 2, b, immutable=True), list(b))
for call in (lambda: memtier.read_into(path, 4094, b), lambda: memtier.read_into(path, 0, b"xy")):
    try:
        call()
    except Exception as e:
        print(type(e).__name__, e)
memtier.default_context().close()
print(memtier.read_into(path, 3, b), list(b))  # a new default context
print(memtier.runtime_info()["python_fast_path"])
"""


@pytest.mark.parametrize("fast", ["1", "0"])
def test_module_level_read_into(run_py, pfile, fast):
    path = pfile(4096)
    r = run_py(MODULE_LEVEL, args=(path,), env={"MEMTIER_PYTHON_FAST": fast})
    assert r.returncode == 0, r.stderr
    p = list(pbytes(0, 8))
    assert r.stdout.splitlines() == [
        f"4 {p[1:5]}", f"4 {p[2:6]}",
        f"EndOfFileError memtier.read_into: read {path} at offset 4094: range [4094, 4098) "
        "runs past end of file (size 4096)",
        "TypeError destination bytes is read-only; pass a writable buffer (bytearray, numpy "
        "array with writeable=True, ...)",
        f"4 {p[3:7]}", "compiled" if fast == "1" else "abi: MEMTIER_PYTHON_FAST=0"]


# ---------------------------------------------------------------- fork


FORK_CHILD = """
import os, sys, numpy as np, memtier
from memtier import _ffi
path = sys.argv[1]
WANT = ("memtier: libmemtier.so was loaded in process %d and this process (%d) is a fork() "
        "child of it: called in a forked child process: the Go runtime inside libmemtier.so "
        "does not survive fork(); use MemTier only in processes that did not inherit it: pass "
        'multiprocessing_context="spawn" or "forkserver" (torch DataLoader, '
        "multiprocessing.get_context), or do not touch memtier in the parent before forking")
ctx = memtier.Context()
b = bytearray(8)
assert ctx.read_into(path, 0, b) == 8
assert memtier.read_into(path, 0, b) == 8  # the default context exists in the parent too
assert ctx.readv(path, np.array([[0, 2]], dtype=np.int64)).tolist() == [7, 138]
print(memtier.runtime_info()["python_fast_path"])
pid = os.fork()
if pid == 0:
    code = 0
    for call in (lambda: ctx.read_into(path, 0, b), lambda: ctx.read(path, 0, 4),
                 lambda: ctx.readv(path, np.array([[0, 2]], dtype=np.int64)),
                 lambda: memtier.read_into(path, 0, b)):
        try:
            call()
            code = 20
        except memtier.ForkError as e:
            if str(e) != WANT % (os.getppid(), os.getpid()):
                print(str(e))
                code = 21
    rt = _ffi.loaded()
    if rt.fast is not None:
        # the module's own check: a handle of the parent process declines
        if rt.fast.read_into(ctx._hid, ctx._pid, path, 0, b, 0, False) is not None:
            code = 30
        # the C guard, bypassing both: MEMTIER_ERR_FORKED
        if rt.fast.read_into(ctx._hid, os.getpid(), path, 0, b, 0, False) != -14:
            code = 31
    os._exit(code)
_, status = os.waitpid(pid, 0)
print("child", os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
"""


@pytest.mark.parametrize("fast", ["1", "0"])
def test_forked_child_raises_fork_error_in_both_modes(run_py, pfile, fast):
    path = pfile(4096)
    r = run_py(FORK_CHILD, args=(path,), env={"MEMTIER_PYTHON_FAST": fast}, timeout=60)
    assert r.returncode == 0, r.stderr
    state = "compiled" if fast == "1" else "abi: MEMTIER_PYTHON_FAST=0"
    assert r.stdout.splitlines() == [state, "child 0"], r.stdout + r.stderr
