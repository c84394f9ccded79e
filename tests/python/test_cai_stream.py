"""The ``stream`` of ``__cuda_array_interface__`` v3 destinations
(python/memtier/_cai_stream.py): parsed and checked before any I/O, and the
producer's stream synchronised before MemTier fills the memory.

The parsing and dispatch tests need nothing; the ordering tests run against the
GPU test double (as test_gpu_double.py does), where with FAKE_CUDA_DEFER_COPIES=1
a copy queued on the producer's stream lands only when something synchronises
it: a fill that does not wait for it is overwritten later, and the bytes differ.
"""

from __future__ import annotations

import textwrap

import cffi
import pytest

from memtier import _cai_stream, _context
from test_gpu_double import GD, run_gpu  # noqa: F401 - run_gpu is a fixture

needs_double = pytest.mark.skipif(
    GD is None, reason="GPU test double not found (see test_gpu_double.py)")


# --------------------------------------------------------------- parsing


@pytest.mark.parametrize("cai, want", [
    ({}, None),                      # v2: no stream key
    ({"stream": None}, None),
    ({"stream": 1}, 1),              # legacy default stream
    ({"stream": 2}, 2),              # per-thread default stream
    ({"stream": 0x7F00DEAD0000}, 0x7F00DEAD0000),
])
def test_cai_stream_values(cai, want):
    assert _cai_stream.cai_stream(cai) == want


def test_cai_stream_zero_is_disallowed():
    with pytest.raises(ValueError, match="0, which the v3 protocol disallows"):
        _cai_stream.cai_stream({"stream": 0})


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), (1 << 64, ValueError),
                                      ("1", TypeError), (1.0, TypeError), (True, TypeError)])
def test_cai_stream_bad_values(bad, exc):
    with pytest.raises(exc, match="stream"):
        _cai_stream.cai_stream({"stream": bad})


# -------------------------------------------------------------- dispatch


def _cai(stream, n=16, ptr=0x10000):
    return {"data": (ptr, False), "shape": (n,), "typestr": "|u1", "strides": None,
            "version": 3, "stream": stream}


@pytest.fixture
def synced(monkeypatch):
    calls = []
    monkeypatch.setattr(_cai_stream, "sync_stream", lambda s, p: calls.append((s, p)))
    return calls


@pytest.mark.parametrize("stream", [1, 2, 0xABC000])
def test_dest_syncs_the_exported_stream(synced, stream):
    cd, n, target = _context._cuda_array_dest(cffi.FFI(), _cai(stream))
    assert (n, target) == (16, _context.TARGET_CUDA)
    assert synced == [(stream, 0x10000)]


def test_dest_without_stream_or_bytes_does_not_sync(synced):
    _context._cuda_array_dest(cffi.FFI(), _cai(None))
    cai = _cai(None)
    del cai["stream"]
    _context._cuda_array_dest(cffi.FFI(), cai)
    _context._cuda_array_dest(cffi.FFI(), _cai(1, n=0, ptr=0))  # nothing is written
    assert synced == []


def test_dest_refuses_stream_zero_before_anything(synced):
    with pytest.raises(ValueError, match="disallows"):
        _context._cuda_array_dest(cffi.FFI(), _cai(0))
    assert synced == []


# ------------------------------------------------- ordering, on the double

PRODUCER = r'''
import ctypes
cu.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
cu.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p]
cu.cuMemcpyDtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
cu.fake_cuda_stat.restype = ctypes.c_longlong
cu.fake_cuda_stat.argtypes = [ctypes.c_char_p]
stat = lambda name: cu.fake_cuda_stat(name.encode())

def producer(flags, n):
    """A stream (flags: 0 blocking, 1 non-blocking) with a copy of 0xEE bytes into
    a new device buffer still queued on it (the producer's pending kernel)."""
    s = ctypes.c_void_p()
    ok(cu.cuStreamCreate(ctypes.byref(s), flags), "cuStreamCreate")
    src, dst = dalloc(n), dalloc(n)
    ok(cu.cuMemcpyHtoDAsync_v2(src, b"\xee" * n, n, s), "htod")  # pageable: taken at once
    ok(cu.cuMemcpyDtoDAsync_v2(dst, src, n, s), "dtod")          # deferred: pending
    assert stat("inflight") >= 1
    return s, dst
'''


@needs_double
@pytest.mark.parametrize("flags, exported, counter", [
    (1, "handle", None),                 # a non-blocking producer stream, by handle
    (0, 1, "legacy_stream_syncs"),       # a blocking stream, ordered by the legacy default stream
])
def test_fill_waits_for_the_producer_stream(run_gpu, pfile, flags, exported, counter):  # noqa: F811
    path = pfile(1 << 20)
    run_gpu(PRODUCER + textwrap.dedent(f"""
        P, N = {path!r}, 300000
        s, dst = producer({flags}, N)
        d = Dev(dst, N)
        d.__cuda_array_interface__["stream"] = s.value if {exported!r} == "handle" else {exported!r}
        with memtier.Context(cache_bytes=0) as ctx:
            ctx.read_into(P, 5, d)
        assert stat("bug_unordered_write") == 0, "the fill started before the producer's stream was done"
        ok(cu.cuStreamSynchronize(s), "the test's own sync")  # whatever was pending lands now
        assert dread(dst, N) == fbytes(P, 5, N), "MemTier's fill was overwritten by the producer"
        if {counter!r}:
            assert stat({counter!r}) == 1, stat({counter!r})
        print("ok")
    """), env={"FAKE_CUDA_DEFER_COPIES": "1"})


@needs_double
def test_the_double_sees_a_fill_before_the_producer(run_gpu, pfile):  # noqa: F811
    # The double's stream-ordering check: a destination that hides its
    # producer's stream (stream None while a copy into it is still queued)
    # gets filled too early, and the double counts the race.
    path = pfile(1 << 20)
    run_gpu(PRODUCER + textwrap.dedent(f"""
        P, N = {path!r}, 300000
        s, dst = producer(1, N)
        with memtier.Context(cache_bytes=0) as ctx:
            ctx.read_into(P, 5, Dev(dst, N))
        assert stat("bug_unordered_write") == 1, stat("bug_unordered_write")
        ok(cu.cuStreamSynchronize(s), "sync")
        assert dread(dst, N) == bytes([0xEE]) * N, "the producer's late copy should have won"
        print("ok")
    """), env={"FAKE_CUDA_DEFER_COPIES": "1"})


@needs_double
def test_per_thread_default_and_none(run_gpu, pfile):  # noqa: F811
    path = pfile(1 << 20)
    run_gpu(PRODUCER + textwrap.dedent(f"""
        P = {path!r}
        p = dalloc(4096)
        with memtier.Context(cache_bytes=0) as ctx:
            d = Dev(p, 4096)
            ctx.read_into(P, 0, d)                            # stream None: no wait
            assert stat("legacy_stream_syncs") == 0 and stat("per_thread_stream_syncs") == 0
            d.__cuda_array_interface__["stream"] = 2
            ctx.read_into(P, 1, d)
            assert stat("per_thread_stream_syncs") == 1
            assert dread(p, 4096) == fbytes(P, 1, 4096)
            d.__cuda_array_interface__["stream"] = 0
            before = stat("bytes_htod")
            try:
                ctx.read_into(P, 2, d)
            except ValueError as e:
                assert "disallows" in str(e), e
            else:
                raise AssertionError("stream 0 accepted")
            assert stat("bytes_htod") == before, "bytes moved for a refused request"
        print("ok")
    """))
