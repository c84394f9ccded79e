"""Context and module API: reads into every buffer kind, readv, prefetch,
async requests, stats, explain, errors, threads, end of file, zero sizes,
bf16/fp8 without torch, environment overrides.

P-file: byte i = (i*131+7) & 0xFF (conftest.pattern).
"""

from __future__ import annotations

import array
import gc
import os
import re
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import memtier
from memtier import _context, _errors, _ffi
from conftest import pattern, pbytes

MiB = 1 << 20
CANARY = 0xAA


def canaried(n: int, pad: int = 16) -> bytearray:
    return bytearray([CANARY]) * (n + 2 * pad)


def assert_canaries(buf, pad: int = 16) -> None:
    raw = bytes(buf)
    assert raw[:pad] == bytes([CANARY]) * pad, "canary before the destination was overwritten"
    assert raw[-pad:] == bytes([CANARY]) * pad, "canary after the destination was overwritten"


# ---------------------------------------------------------------- lifecycle


def test_import_does_not_load_the_library(run_py):
    r = run_py("""
        import memtier, sys
        maps = open('/proc/self/maps').read()
        assert 'libmemtier' not in maps, 'libmemtier.so mapped at import'
        assert 'torch' not in sys.modules
        memtier.read_into  # attribute access loads nothing either
        assert 'libmemtier' not in open('/proc/self/maps').read()
        print('OK')
    """)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_context_is_a_context_manager_and_close_is_idempotent(pfile):
    path = pfile(4096)
    with memtier.Context() as ctx:
        assert not ctx.closed
        assert ctx.read(path, 0, 16) == pbytes(0, 16)
    assert ctx.closed
    ctx.close()
    ctx.close()
    assert ctx.closed
    with pytest.raises(memtier.ClosedError) as ei:
        ctx.read(path, 0, 1)
    assert isinstance(ei.value, ValueError)  # like I/O on a closed file
    with pytest.raises(memtier.ClosedError):
        ctx.stats()
    assert "closed" in repr(ctx)


def test_public_attributes_hold_no_cdata():
    ctx = memtier.Context()
    ffi = _ffi.get_ffi()
    for name in dir(ctx):
        if name.startswith("_"):
            continue
        value = getattr(ctx, name)
        assert not isinstance(value, ffi.CData), name
    ctx.close()


def test_context_does_not_pickle():
    import pickle

    with memtier.Context() as ctx:
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(ctx)


def test_finalizer_closes_a_dropped_context(pfile):
    ctx = memtier.Context()
    fin = ctx._fin
    assert fin.alive
    del ctx
    gc.collect()
    assert not fin.alive


# ---------------------------------------------------------------- configuration


def test_config_keys_and_overrides():
    with memtier.Context({"cache_bytes": 32 * MiB}, io_threads=3, direct_mode="off",
                         cache_enabled=True, path_recheck_ms=-1) as ctx:
        cfg = ctx.config()
    assert set(cfg) == set(memtier.CONFIG_KEYS)
    assert cfg["cache_bytes"] == 32 * MiB
    assert cfg["io_threads"] == 3
    assert cfg["direct_mode"] == "off"
    assert cfg["cache_enabled"] is True
    assert cfg["path_recheck_ms"] == -1
    with memtier.Context(**cfg) as again:  # round trip
        assert again.config() == cfg


def test_config_rejects_bad_keys_and_values():
    with pytest.raises(TypeError, match="unknown memtier config key"):
        memtier.Context(cache_size=1)
    with pytest.raises(TypeError, match="unknown"):
        memtier.Context({"bogus": 1})
    with pytest.raises(ValueError, match="direct_mode"):
        memtier.Context(direct_mode="sometimes")
    with pytest.raises(ValueError, match=r"gds_mode must be one of \['auto', 'off', 'required'\]"):
        memtier.Context(gds_mode="always")
    with pytest.raises(ValueError, match="out of range"):
        memtier.Context(cache_bytes=-1)
    with pytest.raises(TypeError, match="integer"):
        memtier.Context(io_threads="four")
    with pytest.raises(TypeError):
        memtier.Context(config=[("cache_bytes", 1)])
    with pytest.raises(memtier.InvalidArgumentError):
        memtier.Context(cache_block_bytes=3000)  # not a power of two: the library refuses


def test_direct_mode_accepts_ints():
    with memtier.Context(direct_mode=2) as ctx:
        assert ctx.config()["direct_mode"] == "always"


def test_environment_override_applies_to_new_contexts(monkeypatch):
    monkeypatch.setenv("MEMTIER_CACHE_BYTES", "8M")
    with memtier.Context() as ctx:
        assert ctx.config()["cache_bytes"] == 8 * MiB
    with memtier.Context(cache_bytes=16 * MiB) as ctx:  # code wins over the environment
        assert ctx.config()["cache_bytes"] == 16 * MiB


def test_bad_environment_value_is_a_format_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("MEMTIER_CACHE_BYTES", "lots")
    with pytest.raises(memtier.FormatError) as ei:
        memtier.Context()
    assert "MEMTIER_CACHE_BYTES" in str(ei.value)
    assert "MEMTIER_CACHE_BYTES" in ei.value.detail
    assert ei.value.code == -11 and ei.value.name == "FORMAT"
    assert isinstance(ei.value, ValueError)


# ---------------------------------------------------------------- reads and buffers


def test_read_returns_exact_bytes(pfile):
    path = pfile(256 * 1024)
    with memtier.Context() as ctx:
        for off, size in [(0, 1), (0, 4096), (7, 1000), (65535, 3), (100_000, 100_000),
                          (256 * 1024 - 5, 5)]:
            assert ctx.read(path, off, size) == pbytes(off, size)
        assert ctx.read(path, 0, 0) == b""


def test_paths_may_be_str_bytes_or_pathlike(pfile):
    import pathlib

    path = pfile(4096)
    with memtier.Context() as ctx:
        for p in (path, os.fsencode(path), pathlib.Path(path)):
            assert ctx.read(p, 1, 10) == pbytes(1, 10)
        with pytest.raises(ValueError, match="NUL"):
            ctx.read(path + "\0x", 0, 1)


def test_read_into_bytearray_with_canaries(pfile):
    path = pfile(64 * 1024)
    buf = canaried(1000)
    with memtier.Context() as ctx:
        n = ctx.read_into(path, 123, memoryview(buf)[16:-16])
    assert n == 1000
    assert bytes(buf[16:-16]) == pbytes(123, 1000)
    assert_canaries(buf)


def test_read_into_whole_bytearray(pfile):
    path = pfile(8192)
    buf = bytearray(777)
    assert memtier.read_into(path, 5, buf) == 777
    assert bytes(buf) == pbytes(5, 777)


def test_read_into_array_array_float(pfile):
    path = pfile(64 * 1024)
    arr = array.array("f", [0.0]) * 32
    canary_bits = np.frombuffer(bytes([CANARY]) * 4, dtype=np.float32)[0]
    for i in range(32):
        arr[i] = float(canary_bits)
    view = memoryview(arr)[4:-4]  # 24 floats in the middle
    with memtier.Context() as ctx:
        assert ctx.read_into(path, 40, view) == 96
    raw = arr.tobytes()
    assert raw[16:16 + 96] == pbytes(40, 96)
    assert raw[:16] == bytes([CANARY]) * 16 and raw[-16:] == bytes([CANARY]) * 16


def test_read_into_numpy_slice_of_any_dtype(pfile):
    path = pfile(64 * 1024)
    big = np.full(64 + 2 * 4, np.frombuffer(bytes([CANARY]) * 8, "<i8")[0], dtype="<i8")
    with memtier.Context() as ctx:
        assert ctx.read_into(path, 1000, big[4:-4]) == 512
        assert big[4:-4].tobytes() == pbytes(1000, 512)
        assert big[:4].tobytes() == bytes([CANARY]) * 32
        assert big[-4:].tobytes() == bytes([CANARY]) * 32
        m = np.zeros((3, 5), dtype=np.float32)
        ctx.read_into(path, 8, m)
        assert m.tobytes() == pbytes(8, 60)


def test_read_into_torch_view_with_storage_offset(pfile, torch):
    path = pfile(64 * 1024)
    t = torch.full((30,), -1, dtype=torch.int32)
    view = t[10:20]
    assert view.storage_offset() == 10
    with memtier.Context() as ctx:
        assert ctx.read_into(path, 4, view) == 40
    raw = t.numpy().tobytes()
    assert raw[40:80] == pbytes(4, 40)
    assert raw[:40] == b"\xff" * 40 and raw[80:] == b"\xff" * 40


def test_readonly_and_noncontiguous_destinations_fail_before_io(pfile):
    path = pfile(4096)
    with memtier.Context() as ctx:
        before = ctx.stats().requests
        with pytest.raises((TypeError, BufferError)):
            ctx.read_into(path, 0, b"immutable")
        ro = np.zeros(16, dtype=np.uint8)
        ro.flags.writeable = False
        with pytest.raises((TypeError, BufferError)):
            ctx.read_into(path, 0, ro)
        with pytest.raises(ValueError, match="contiguous"):
            ctx.read_into(path, 0, memoryview(bytearray(32))[::2])
        with pytest.raises(ValueError, match="contiguous"):
            ctx.read_into(path, 0, np.zeros((4, 4))[:, ::2])
        with pytest.raises(ValueError, match="contiguous"):
            ctx.read_into(path, 0, np.zeros((4, 4)).T)
        with pytest.raises(TypeError):
            ctx.read_into(path, 0, [0] * 8)
        with pytest.raises(ValueError):
            ctx.read_into(path, -1, bytearray(4))
        assert ctx.stats().requests == before  # nothing reached the engine


def test_a_buffer_cannot_be_resized_while_used(pfile):
    # ffi.from_buffer holds the export; a concurrent resize raises BufferError
    path = pfile(4096)
    buf = bytearray(16)
    mv = memoryview(buf)
    with pytest.raises(BufferError):
        buf.extend(b"x")
    mv.release()
    memtier.read_into(path, 0, buf)
    buf.extend(b"x")  # released after the call


def test_read_larger_than_a_chunk_is_exact(pfile):
    size = memtier.CHUNK_BYTES + 3 * 4096 + 5
    path = pfile(size + 100)
    out = np.empty(size, dtype=np.uint8)
    with memtier.Context() as ctx:
        ctx.reset_stats()
        ctx.read_into(path, 50, out)
        assert ctx.stats().requests == 2  # one C call per piece
    assert np.array_equal(out, pattern(50, size))


def test_chunked_read_past_eof_leaves_the_buffer_untouched(pfile):
    size = memtier.CHUNK_BYTES + 4096
    path = pfile(size)
    out = np.full(size, CANARY, dtype=np.uint8)
    with pytest.raises(memtier.EndOfFileError):
        memtier.read_into(path, 1, out)
    assert (out == CANARY).all()


# ---------------------------------------------------------------- readv


def test_readv_batch_exact_bytes(pfile):
    size = 8 * MiB
    path = pfile(size)
    ranges = [(0, 4), (4, 4), (4, 4), (100, 0)] + [(k * 256 * 1024 + 17, 100) for k in range(30)]
    with memtier.Context(cache_enabled=False) as ctx:
        out = ctx.readv(path, ranges)
    assert out.dtype == np.uint8 and out.shape == (sum(s for _, s in ranges),)
    expect = b"".join(pbytes(o, s) for o, s in ranges)
    assert out.tobytes() == expect


def test_readv_numpy_ranges_and_given_out_with_canaries(pfile):
    path = pfile(1 * MiB)
    ranges = np.array([[10, 7], [500_000, 33], [0, 1], [999, 0]], dtype=np.int64)
    total = int(ranges[:, 1].sum())
    buf = canaried(total)
    res = memtier.readv(path, ranges, memoryview(buf)[16:-16])
    assert isinstance(res, memoryview)
    assert bytes(buf[16:-16]) == b"".join(pbytes(int(o), int(s)) for o, s in ranges)
    assert_canaries(buf)


def test_readv_empty_and_zero_size_ranges(pfile):
    path = pfile(4096)
    out = memtier.readv(path, [])
    assert out.shape == (0,)
    out = memtier.readv(path, np.zeros((0, 2), dtype=np.int64))
    assert out.shape == (0,)
    out = memtier.readv(path, [(1, 2), (3, 0), (5, 2)])  # B15 g
    assert out.tobytes() == pbytes(1, 2) + pbytes(5, 2)


def test_readv_eof_element_sets_index_and_others_are_read(pfile):
    path = pfile(1 * MiB)
    ranges = [(0, 4), (1 * MiB - 6, 16), (17, 100), (1 * MiB, 1)]
    out = np.full(4 + 16 + 100 + 1, CANARY, dtype=np.uint8)
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.readv(path, ranges, out)
    assert ei.value.index == 1
    assert ei.value.code == -4
    assert out[:4].tobytes() == pbytes(0, 4)
    assert out[20:120].tobytes() == pbytes(17, 100)


def test_readv_missing_file_and_bad_ranges(pfile, tmp_path):
    with pytest.raises(memtier.NotFoundError) as ei:
        memtier.readv(str(tmp_path / "absent"), [(0, 1), (2, 3)])
    assert ei.value.index == 0
    path = pfile(4096)
    with pytest.raises(ValueError, match="negative"):
        memtier.readv(path, [(0, 1), (-1, 3)])
    with pytest.raises(ValueError, match="shape"):
        memtier.readv(path, [(0, 1, 2)])
    with pytest.raises(ValueError, match="bytes"):
        memtier.readv(path, [(0, 10)], bytearray(5))


def test_readv_batches_above_a_chunk(pfile):
    path = pfile(4 * MiB)
    ranges = [(0, 3 * MiB)] * 30  # 90 MiB: two memtier_readv calls
    with memtier.Context() as ctx:
        ctx.reset_stats()
        out = ctx.readv(path, ranges)
        assert ctx.stats().readv_calls == 2
    one = pattern(0, 3 * MiB)
    assert all(np.array_equal(out[i * 3 * MiB:(i + 1) * 3 * MiB], one) for i in range(30))


# ---------------------------------------------------------------- prefetch and async


def test_prefetch_sync_then_reads_hit_the_cache(pfile):
    path = pfile(1 * MiB)
    with memtier.Context() as ctx:
        assert ctx.prefetch(path) is None
        ctx.reset_stats()
        assert ctx.read(path, 4096, 8192) == pbytes(4096, 8192)
        st = ctx.stats()
        assert st.cache_hit_requests == 1 and st.storage_bytes == 0


def test_prefetch_async_request(pfile):
    path = pfile(2 * MiB)
    with memtier.Context() as ctx:
        req = ctx.prefetch(path, 0, 1 * MiB, wait=False)
        assert isinstance(req, memtier.Request)
        assert req.wait(timeout=30) == 1 * MiB
        assert req.done()
        assert req.wait() == 1 * MiB  # the result stays
        with ctx.prefetch(path, 1 * MiB, 0, wait=False) as r2:
            r2.wait()
        assert ctx.explain(path, 0, 2 * MiB).cached_bytes == 2 * MiB


def test_prefetch_errors(pfile, tmp_path):
    path = pfile(4096)
    with memtier.Context(cache_enabled=False) as ctx:
        with pytest.raises(memtier.UnsupportedError):
            ctx.prefetch(path)
    with memtier.Context() as ctx:
        with pytest.raises(memtier.UnsupportedError):
            ctx.prefetch(path, to_hbm=True)
        req = ctx.prefetch(str(tmp_path / "absent"), wait=False)
        with pytest.raises(memtier.NotFoundError):
            req.wait(5)


def test_read_async_holds_its_buffer_until_done(pfile):
    path = pfile(4 * MiB)
    with memtier.Context() as ctx:
        buf = np.zeros(4 * MiB, dtype=np.uint8)
        ref = weakref.ref(buf)
        req = ctx.read_async(path, 0, buf)
        del buf
        gc.collect()
        assert ref() is not None, "the request must keep its destination alive"
        assert req.wait(timeout=30) == 4 * MiB
        del req
        gc.collect()
        assert ref() is None, "released once the request completed"
        keep = np.zeros(4 * MiB, dtype=np.uint8)
        with ctx.read_async(path, 0, keep) as req:
            assert req.wait(timeout=30) == 4 * MiB
        assert np.array_equal(keep, pattern(0, 4 * MiB))


def test_read_async_dropped_unwaited_is_safe(pfile):
    path = pfile(1 * MiB)
    with memtier.Context() as ctx:
        for _ in range(20):
            ctx.read_async(path, 0, np.empty(1 * MiB, dtype=np.uint8))
        gc.collect()
        assert ctx.read(path, 0, 10) == pbytes(0, 10)


def test_read_async_errors_and_release(pfile):
    path = pfile(100)
    with memtier.Context() as ctx:
        req = ctx.read_async(path, 90, bytearray(20))
        with pytest.raises(memtier.EndOfFileError):
            req.wait()
        with pytest.raises(memtier.EndOfFileError):
            req.wait()
        r2 = ctx.read_async(path, 0, bytearray(10))
        r2.release()
        r2.release()
        with pytest.raises(memtier.ClosedError):
            r2.wait()
        with pytest.raises((TypeError, BufferError)):
            ctx.read_async(path, 0, b"readonly")


def test_request_done_polls(pfile):
    path = pfile(1 * MiB)
    with memtier.Context() as ctx:
        req = ctx.read_async(path, 0, bytearray(1 * MiB))
        deadline = time.monotonic() + 30
        while not req.done():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert req.wait() == 1 * MiB


# ---------------------------------------------------------------- stats, explain, drop_cache


def test_stats_values_for_a_simple_sequence(pfile):
    path = pfile(1 * MiB)
    with memtier.Context() as ctx:
        s0 = ctx.stats()
        assert isinstance(s0, memtier.Stats)
        assert s0.requests == 0 and s0.cache_budget_bytes == 1 << 30
        ctx.read(path, 0, 4096)  # cold: buffered, admitted
        ctx.read(path, 0, 4096)  # hit
        with pytest.raises(EOFError):
            ctx.read(path, 1 * MiB - 10, 20)
        st = ctx.stats()
        assert st.requests == 3
        assert st.bytes == 8192
        assert st.buffered_requests == 1 and st.buffered_bytes == 4096
        assert st.cache_hit_requests == 1 and st.cache_hit_bytes == 4096
        assert st.cache_hits == 1 and st.cache_misses == 1
        assert st.cache_inserted_bytes == 4096
        assert st.storage_bytes == 4096
        assert st.errors == 1
        assert st.files_opened == 1
        assert st.direct_requests == 0 and st.readv_calls == 0
        with pytest.raises(Exception):
            st.requests = 5  # frozen
        ctx.reset_stats()
        st = ctx.stats()
        assert st.requests == 0 and st.errors == 0 and st.bytes == 0
        assert st.cache_budget_bytes == 1 << 30 and st.cache_resident_bytes > 0
        assert set(st.as_dict()) == set(_context.STATS_FIELDS)


def test_explain_and_drop_cache(pfile, tmp_path):
    path = pfile(1 * MiB)
    with memtier.Context() as ctx:
        d = ctx.explain(path, 0, 4096)
        assert isinstance(d, memtier.Decision)
        assert d.path == "buffered" and d.admit is True and d.cached_bytes == 0
        assert d.tasks >= 1 and d.reason
        assert ctx.explain(path, 0, 4096, flags=memtier.READ_ONCE).admit is False
        assert ctx.explain(path, 0, 0).path == "none"
        ctx.read(path, 0, 4096)
        d = ctx.explain(path, 0, 4096)
        assert d.path == "cache" and d.cached_bytes == 4096
        ctx.drop_cache(path)
        assert ctx.explain(path, 0, 4096).cached_bytes == 0
        ctx.read(path, 0, 4096)
        ctx.drop_cache()
        assert ctx.explain(path, 0, 4096).cached_bytes == 0
        ctx.drop_cache(str(tmp_path / "never-cached"))
        with pytest.raises(memtier.NotFoundError):
            ctx.explain(str(tmp_path / "absent"), 0, 1)
        with pytest.raises(memtier.UnsupportedError, match="CUDA"):
            ctx.explain(path, 0, 1, device="cuda:0")
        with pytest.raises(ValueError):
            ctx.explain(path, 0, 1, device="tpu")


def test_module_level_functions_share_the_default_context(pfile):
    path = pfile(8192)
    ctx = memtier.default_context()
    assert memtier.default_context() is ctx
    memtier.reset_stats()
    memtier.read(path, 0, 10)
    memtier.read_into(path, 0, bytearray(10))
    memtier.readv(path, [(0, 1)])
    memtier.prefetch(path)
    assert memtier.stats().requests == 3
    assert memtier.explain(path, 0, 10).path == "cache"
    memtier.drop_cache(path)
    info = memtier.runtime_info()
    assert info["version"] == memtier.__version__
    assert info["pid"] == os.getpid()
    assert os.path.exists(info["library"])
    assert info["gomaxprocs"] == ctx.config()["gomaxprocs"]
    assert memtier.READ_ONCE == 1 and memtier.READ_WILL_REUSE == 2
    assert memtier.READ_DIRECT == 4 and memtier.READ_BUFFERED == 8


def test_closing_the_default_context_makes_a_new_one(pfile):
    path = pfile(100)
    old = memtier.default_context()
    old.close()
    assert memtier.read(path, 0, 3) == pbytes(0, 3)
    assert memtier.default_context() is not old


# ---------------------------------------------------------------- errors


def _header_statuses():
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "memtier.h")).read()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"MEMTIER_(OK|ERR_[A-Z_]+)\s*=\s*(-?\d+)", text)}


EXPECTED_CLASSES = {
    "ERR_INVALID_ARG": (memtier.InvalidArgumentError, ValueError),
    "ERR_NOT_FOUND": (memtier.NotFoundError, FileNotFoundError),
    "ERR_PERMISSION": (memtier.PermissionDeniedError, PermissionError),
    "ERR_EOF": (memtier.EndOfFileError, EOFError),
    "ERR_IO": (memtier.MemTierError, memtier.MemTierError),
    "ERR_NOMEM": (memtier.MemTierError, memtier.MemTierError),
    "ERR_UNSUPPORTED": (memtier.UnsupportedError, NotImplementedError),
    "ERR_CLOSED": (memtier.ClosedError, ValueError),
    "ERR_BUSY": (memtier.BusyError, memtier.MemTierError),
    "ERR_TIMEOUT": (memtier.MemTierTimeoutError, TimeoutError),
    "ERR_FORMAT": (memtier.FormatError, ValueError),
    "ERR_IS_DIR": (memtier.IsDirectoryError, IsADirectoryError),
    "ERR_INTERNAL": (memtier.InternalError, memtier.MemTierError),
    "ERR_FORKED": (memtier.ForkError, RuntimeError),
    "ERR_DIRECT_IO": (memtier.DirectIOError, memtier.MemTierError),
    "ERR_NOT_REGULAR": (memtier.NotRegularFileError, OSError),
    "ERR_INTERRUPTED": (memtier.CallInterruptedError, memtier.MemTierError),
}


def test_every_header_status_maps_to_an_exception():
    statuses = _header_statuses()
    assert statuses.pop("OK") == 0
    # every class listed is still a status of the header; a status added to
    # the header with no class of its own is the base MemTierError (_errors)
    assert set(EXPECTED_CLASSES) <= set(statuses), "a status was removed from memtier.h"
    _ffi.runtime()
    for name, value in statuses.items():
        cls, builtin = EXPECTED_CLASSES.get(name, (memtier.MemTierError, memtier.MemTierError))
        assert getattr(_errors, name) == value, name  # re-exported by the generated block
        assert _errors.STATUS_NAMES[value] == name[len("ERR_"):]
        with pytest.raises(cls) as ei:
            _errors._check(value, "prefix", filename="/some/file")
        e = ei.value
        assert type(e) is cls, name
        assert isinstance(e, builtin) and isinstance(e, memtier.MemTierError)
        assert e.code == value and e.name == name[len("ERR_"):]
        text = _ffi.strerror(value)
        # the thread's last error (here whatever failed before) is the specific
        # text; the status's generic text stands in only when there is none
        assert text and ("prefix: " + (e.detail or text)) in str(e)
    assert _errors._check(0) == 0 and _errors._check(5) == 5
    e = _errors.make_error(-2, "x", "detail", filename="/a/b")
    assert e.errno == 2 and e.filename == "/a/b"
    assert type(_errors.make_error(-99)) is memtier.MemTierError


def test_real_errors_carry_code_detail_and_filename(pfile, tmp_path):
    missing = str(tmp_path / "missing.bin")
    with pytest.raises(FileNotFoundError) as ei:
        memtier.read(missing, 0, 10)
    e = ei.value
    assert isinstance(e, memtier.NotFoundError)
    assert e.errno == 2 and e.filename == missing
    assert e.code == -2 and e.name == "NOT_FOUND" and missing in e.detail
    with pytest.raises(IsADirectoryError) as ei:
        memtier.read(str(tmp_path), 0, 10)
    assert ei.value.filename == str(tmp_path)
    path = pfile(100)
    with pytest.raises(memtier.InvalidArgumentError, match="flag"):
        memtier.read(path, 0, 1, flags=1 << 20)
    with pytest.raises(memtier.InvalidArgumentError):
        memtier.read(path, (1 << 64) - 1, 2)  # offset + size overflows


def test_permission_denied(pfile, tmp_path, run_py):
    path = pfile(100)
    if os.geteuid() != 0:
        os.chmod(path, 0)
        with pytest.raises(PermissionError) as ei:
            memtier.read(path, 0, 1)
        assert isinstance(ei.value, memtier.PermissionDeniedError)
        assert ei.value.filename == path
        return
    # root reads anything: check as uid 65534 if it can run this interpreter
    try:
        probe = subprocess.run([sys.executable, "-c", "import memtier"], capture_output=True,
                               preexec_fn=lambda: os.setuid(65534), timeout=60)
    except OSError:
        probe = None
    if probe is None or probe.returncode != 0:
        pytest.skip("running as root and uid 65534 cannot run this interpreter")
    import tempfile

    d = tempfile.mkdtemp()
    os.chmod(d, 0o755)
    target = os.path.join(d, "secret.bin")
    with open(target, "wb") as f:
        f.write(b"x" * 10)
    os.chmod(target, 0)
    code = (f"import memtier\ntry:\n    memtier.read({target!r}, 0, 1)\n"
            "except PermissionError as e:\n    assert isinstance(e, memtier.PermissionDeniedError)\n"
            "    print('DENIED', e.filename)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       preexec_fn=lambda: os.setuid(65534), timeout=60)
    assert "DENIED " + target in r.stdout, r.stderr


def test_internal_error_from_a_recovered_panic(run_py):
    r = run_py("""
        import memtier
        from memtier import _ffi
        ctx = memtier.Context()
        rc = ctx._lib.memtier_debug_hook(ctx._h, 1)
        try:
            memtier._errors._check(rc, "hook")
        except memtier.InternalError as e:
            print("INTERNAL", e.code)
        print(memtier.read(__file__, 0, 6))
    """, env={"MEMTIER_TEST_HOOKS": "1"})
    assert r.returncode == 0, r.stderr
    assert "INTERNAL -13" in r.stdout


def test_error_details_are_per_thread(tmp_path):
    # M5: each thread sees the detail of its own failure
    errors = []

    def worker(k):
        missing = str(tmp_path / f"missing-{k}.bin")
        for _ in range(300):
            try:
                memtier.read(missing, k, 1)
            except memtier.NotFoundError as e:
                if f"missing-{k}.bin" not in e.detail:
                    errors.append((k, e.detail))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_library_survives_gc_in_a_loop(pfile):
    path = pfile(4096)
    lib = _ffi.runtime().lib
    for i in range(300):
        with memtier.Context() as ctx:
            assert ctx.read(path, i, 4) == pbytes(i, 4)
        if i % 50 == 0:
            gc.collect()
    gc.collect()
    assert _ffi.runtime().lib is lib
    assert memtier.read(path, 0, 8) == pbytes(0, 8)


# ---------------------------------------------------------------- threads


def test_eight_threads_read_correct_bytes(pfile):
    size = 4 * MiB
    path = pfile(size)
    failures = []

    def worker(k):
        rng = np.random.default_rng(k)
        buf = np.empty(64 * 1024, dtype=np.uint8)
        for _ in range(200):
            n = int(rng.integers(1, 64 * 1024))
            off = int(rng.integers(0, size - n))
            memtier.read_into(path, off, buf[:n])
            if not np.array_equal(buf[:n], pattern(off, n)):
                failures.append((k, off, n))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_reads_release_the_gil_and_overlap(pfile):
    size = 64 * MiB
    path = pfile(4 * size, sparse=True)
    spans = [None] * 4
    bufs = [np.empty(size, dtype=np.uint8) for _ in range(4)]
    barrier = threading.Barrier(4)

    with memtier.Context() as ctx:
        def worker(k):
            barrier.wait()
            t0 = time.perf_counter()
            ctx.read_into(path, k * size, bufs[k], flags=memtier.READ_ONCE)
            spans[k] = (t0, time.perf_counter())

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t0 = time.perf_counter()
        for k in range(4):
            ctx.read_into(path, k * size, bufs[k], flags=memtier.READ_ONCE)
        serial = time.perf_counter() - t0
    spans.sort()
    overlaps = sum(1 for a, b in zip(spans, spans[1:]) if b[0] < a[1])
    parallel = max(e for _, e in spans) - min(s for s, _ in spans)
    print(f"4 x 64 MiB: parallel {parallel * 1e3:.1f} ms, serial {serial * 1e3:.1f} ms")
    # With the GIL held during the call, a thread could only start after the
    # previous one returned: no overlap at all.
    assert overlaps >= 1, spans
    assert all((b == 0).all() for b in bufs)


# ---------------------------------------------------------------- B07: end of file


@pytest.fixture
def hundred(pfile):
    return pfile(100, "hundred.bin")


def _dst():
    return bytearray([CANARY]) * 32


@pytest.mark.parametrize("how", ["cold", "warm", "readv", "direct"])
def test_b07a_read_past_eof_raises_and_leaves_the_buffer(hundred, how):
    dst = _dst()
    cfg = {"direct_mode": "always"} if how == "direct" else {}
    with memtier.Context(**cfg) as ctx:
        if how == "warm":
            ctx.prefetch(hundred)
            assert ctx.explain(hundred, 0, 100).cached_bytes == 100
        with pytest.raises(memtier.EndOfFileError) as ei:
            if how == "readv":
                ctx.readv(hundred, [(90, 20)], dst)
            else:
                ctx.read_into(hundred, 90, memoryview(dst)[:20],
                              flags=memtier.READ_DIRECT if how == "direct" else 0)
    assert isinstance(ei.value, EOFError)
    assert dst == _dst(), "no byte may be written on a failed read"


def test_b07bcdf_edges(hundred, tmp_path):
    assert memtier.read(hundred, 100, 0) == b""  # (b)
    for off, size in [(100, 1), (200, 4)]:  # (c), (d)
        dst = _dst()
        with pytest.raises(memtier.EndOfFileError):
            memtier.read_into(hundred, off, memoryview(dst)[:size])
        assert dst == _dst()
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    dst = _dst()
    with pytest.raises(memtier.EndOfFileError):  # (f)
        memtier.read_into(str(empty), 0, memoryview(dst)[:16])
    assert dst == _dst()


@pytest.mark.parametrize("torch_mode", ["numpy", "torch"])
def test_b07e_load_tensor_past_eof_returns_nothing(hundred, torch_mode, monkeypatch, has_torch):
    if torch_mode == "numpy":
        monkeypatch.setenv("MEMTIER_PY_FORCE_NO_TORCH", "1")
    elif not has_torch:
        pytest.skip("torch not available")
    result = None
    with pytest.raises(memtier.EndOfFileError):
        result = memtier.load_tensor(hundred, 90, (5,), "float32")
    assert result is None


# ---------------------------------------------------------------- B15: zero sizes


def test_b15_zero_length_reads(hundred):
    assert memtier.read(hundred, 0, 0) == b""
    assert memtier.read(hundred, 100, 0) == b""
    assert memtier.read_into(hundred, 0, bytearray()) == 0
    assert memtier.read_into(hundred, 100, np.empty(0, dtype=np.float32)) == 0


@pytest.mark.no_torch
def test_b15_zero_size_tensors_numpy(hundred):
    a = memtier.load_tensor(hundred, 0, (0,), "float32")
    assert isinstance(a, np.ndarray) and a.shape == (0,) and a.dtype == np.float32
    for shape in [(2, 0), (0, 3)]:
        b = memtier.load_tensor(hundred, 0, shape, "bfloat16")
        assert b.shape == shape and b.dtype.itemsize == 2
    e = np.empty(0, dtype=np.float32)
    assert memtier.read_into_tensor(hundred, 0, e) is e


def test_b15_zero_size_tensors_torch(hundred, torch):
    t = memtier.load_tensor(hundred, 0, (0,), torch.float32, "cpu")
    assert isinstance(t, torch.Tensor) and tuple(t.shape) == (0,) and t.dtype == torch.float32
    for shape in [(2, 0), (0, 3)]:
        b = memtier.load_tensor(hundred, 0, shape, "bfloat16")
        assert tuple(b.shape) == shape and b.dtype == torch.bfloat16
    e = torch.empty(0)
    assert memtier.read_into_tensor(hundred, 0, e) is e


# ---------------------------------------------------------------- B16: bf16 and fp8 without torch

BF16 = bytes([0x80, 0x3F, 0x00, 0xC0, 0x49, 0x40])
E4M3 = bytes([0x38, 0xC0, 0x7E, 0x7F])
E5M2 = bytes([0x3C, 0xC0, 0x7B, 0x7C])


@pytest.fixture
def b16file(tmp_path):
    p = tmp_path / "b16.bin"
    p.write_bytes(BF16 + E4M3 + E5M2)
    return str(p)


@pytest.mark.no_torch
def test_b16_with_ml_dtypes(b16file):
    ml = pytest.importorskip("ml_dtypes")
    a = memtier.load_tensor(b16file, 0, (3,), "bfloat16", "cpu")
    assert isinstance(a, np.ndarray) and a.dtype == np.dtype(ml.bfloat16)
    assert a.astype(np.float32).tolist() == [1.0, -2.0, 3.140625]
    e = memtier.load_tensor(b16file, 6, (4,), "float8_e4m3fn")
    assert e.dtype == np.dtype(ml.float8_e4m3fn)
    v = e.astype(np.float32)
    assert v[:3].tolist() == [1.0, -2.0, 448.0] and np.isnan(v[3])
    f = memtier.load_tensor(b16file, 10, (4,), "F8_E5M2")
    assert f.astype(np.float32).tolist() == [1.0, -2.0, 57344.0, float("inf")]
    assert memtier.load_tensor(b16file, 0, 3, "BF16").dtype == np.dtype(ml.bfloat16)


@pytest.mark.no_torch
def test_b16_without_ml_dtypes_gives_raw_bits(b16file, monkeypatch):
    from memtier import _dtypes

    monkeypatch.setattr(_dtypes, "ml_dtypes_module", lambda: None)
    a = memtier.load_tensor(b16file, 0, (3,), "bfloat16")
    assert a.dtype == np.uint16
    assert a.tolist() == [0x3F80, 0xC000, 0x4049]
    e = memtier.load_tensor(b16file, 6, (4,), "float8_e4m3fn")
    assert e.dtype == np.uint8 and e.tobytes() == E4M3
    f = memtier.load_tensor(b16file, 10, (4,), "float8_e5m2")
    assert f.dtype == np.uint8 and f.tobytes() == E5M2
    # never misread as float16
    assert not np.allclose(a.view(np.float16).astype(np.float32), [1.0, -2.0, 3.140625])


def test_b16_with_torch(b16file, torch):
    a = memtier.load_tensor(b16file, 0, (3,), "bfloat16")
    assert a.dtype == torch.bfloat16
    assert a.float().tolist() == [1.0, -2.0, 3.140625]
    if hasattr(torch, "float8_e4m3fn"):
        e = memtier.load_tensor(b16file, 6, (4,), torch.float8_e4m3fn)
        v = e.float()
        assert v[:3].tolist() == [1.0, -2.0, 448.0] and bool(torch.isnan(v[3]))
        f = memtier.load_tensor(b16file, 10, (4,), "F8_E5M2")
        assert f.float().tolist() == [1.0, -2.0, 57344.0, float("inf")]


def test_object_dtype_destination_is_refused_before_io(tmp_path):
    # A fresh user's crash: file bytes over an object array's PyObject pointers
    # segfaulted the interpreter when the array was freed.
    np = pytest.importorskip("numpy")
    p = tmp_path / "x.bin"
    p.write_bytes(b"x" * 64)
    a = np.empty(2, dtype=object)
    with pytest.raises(TypeError, match="object"):
        memtier.read_into(str(p), 0, a)
    del a


def test_cache_bytes_zero_turns_the_cache_off():
    with memtier.Context(cache_bytes=0) as ctx:
        assert ctx.config()["cache_enabled"] is False
    with pytest.raises(TypeError):
        memtier.Context(cache_enabled="no")


def test_gds_mode_by_name_round_trips():
    # A fresh user's finding: MEMTIER_GDS_MODE takes names, Context(gds_mode=) took only ints.
    for name, code in (("auto", 0), ("off", 1), ("OFF", 1)):
        with memtier.Context(gds_mode=name) as ctx:
            assert ctx.config()["gds_mode"] == name.lower()
        with memtier.Context(gds_mode=code) as ctx:
            cfg = ctx.config()
            assert cfg["gds_mode"] == name.lower()
            with memtier.Context(**cfg) as again:
                assert again.config() == cfg
