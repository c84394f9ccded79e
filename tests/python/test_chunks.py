"""memtier.load_chunks / memtier.iter_chunks (memtier_load_chunks, _async, memtier_request_next)."""

from __future__ import annotations

import gc
import os
import threading
import weakref

import numpy as np
import pytest

import memtier
from memtier import _errors, _ffi

from conftest import pbytes, pattern


def _random_chunks(rng, n, file_size, lo=1, hi=4096):
    sizes = rng.integers(lo, hi + 1, n)
    offs = rng.integers(0, file_size - hi, n)
    return np.stack([offs, sizes], axis=1).astype(np.int64)


def _pread(path, chunks):
    fd = os.open(path, os.O_RDONLY)
    try:
        return [os.pread(fd, int(s), int(o)) for o, s in chunks]
    finally:
        os.close(fd)


def test_load_chunks_matches_pread(pfile):
    path = pfile(4 << 20)
    rng = np.random.default_rng(1)
    chunks = _random_chunks(rng, 2000, 4 << 20)
    # overlapping, duplicate, adjacent and zero-size chunks too
    extra = np.array([[0, 16], [8, 16], [8, 16], [24, 0], [(4 << 20) - 5, 5], [100, 0]])
    chunks = np.concatenate([chunks, extra])
    got = memtier.load_chunks(path, chunks)
    want = _pread(path, chunks)
    assert len(got) == len(chunks)
    for k, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, np.ndarray) and g.dtype == np.uint8 and g.ndim == 1
        assert g.tobytes() == w, k


def test_load_chunks_input_forms(pfile):
    path = pfile(1 << 16)
    pairs = [(10, 5), (0, 3), (60000, 100)]
    want = [pbytes(o, s) for o, s in pairs]
    for form in (pairs, tuple(pairs), iter(pairs), np.array(pairs, dtype=np.uint64),
                 np.array(pairs, dtype=np.int32), [list(p) for p in pairs]):
        got = memtier.load_chunks(path, form)
        assert [g.tobytes() for g in got] == want
    assert memtier.load_chunks(path, []) == []
    assert memtier.load_chunks(path, np.zeros((0, 2), dtype=np.int64)) == []
    with memtier.Context() as ctx:
        assert [g.tobytes() for g in ctx.load_chunks(path, pairs)] == want
        assert [g.tobytes() for g in memtier.load_chunks(path, pairs, ctx=ctx)] == want


def test_load_chunks_bad_arguments(pfile):
    path = pfile(4096)
    with pytest.raises(ValueError, match="shape"):
        memtier.load_chunks(path, [(1, 2, 3)])
    with pytest.raises(ValueError, match="chunk 1 has a negative offset or size"):
        memtier.load_chunks(path, [(0, 1), (-1, 2)])
    with pytest.raises(TypeError, match="chunks must be .*got int"):
        memtier.load_chunks(path, 5)
    # Floats and numeric strings were truncated or parsed into other offsets
    # (a fresh user's finding): only integers are accepted.
    for bad in ([(0.9, 10.7)], [("5", "3")], np.array([[0.0, 1.0]]), "abc"):
        with pytest.raises(TypeError, match="chunks must be"):
            memtier.load_chunks(path, bad)
    with pytest.raises((TypeError, ValueError), match="integer"):
        memtier.readv(path, [(0.5, 1)])
    with pytest.raises(TypeError, match="ranges must be"):
        memtier.readv(path, np.array([[0.5, 1.0]]))
    # Python ints above 2**63 - 1 are still integers (then refused by the library).
    with pytest.raises(memtier.InvalidArgumentError, match="beyond the largest file offset"):
        memtier.load_chunks(path, [(2**63, 1)])
    assert [a.tobytes() for a in memtier.load_chunks(path, iter([(1, 2)]))] == [pbytes(1, 2)]
    with pytest.raises(ValueError, match="2 buffers for 3 chunks"):
        memtier.load_chunks(path, [(0, 1)] * 3, out=[bytearray(1)] * 2)
    with pytest.raises(ValueError, match=r"out\[1\] holds 3 bytes, chunk 1 needs 4"):
        memtier.load_chunks(path, [(0, 1), (0, 4)], out=[bytearray(1), bytearray(3)])
    with pytest.raises(TypeError, match="read-only"):
        memtier.load_chunks(path, [(0, 1)], out=[b"x"])
    for flat in (bytearray(1), np.zeros(4, dtype=np.uint8), memoryview(bytearray(1))):
        with pytest.raises(TypeError, match="one per chunk"):
            memtier.load_chunks(path, [(0, 1)], out=flat)


def test_load_chunks_into_out_buffers(pfile):
    path = pfile(1 << 16)
    pairs = [(100, 8), (0, 4), (5000, 16), (7, 0)]
    outs = [bytearray(8), np.zeros(4, dtype=np.uint8), np.zeros(4, dtype=np.float32), memoryview(bytearray(2))]
    res = memtier.load_chunks(path, pairs, out=outs)
    assert all(r is o for r, o in zip(res, outs))
    assert bytes(outs[0]) == pbytes(100, 8)
    assert outs[1].tobytes() == pbytes(0, 4)
    assert outs[2].tobytes() == pbytes(5000, 16)
    # a larger buffer: only the first `size` bytes are written
    big = bytearray(b"\xee" * 10)
    memtier.load_chunks(path, [(3, 4)], out=[big])
    assert bytes(big) == pbytes(3, 4) + b"\xee" * 6
    # rows of a 2-D array
    rows = np.zeros((3, 32), dtype=np.uint8)
    memtier.load_chunks(path, [(0, 32), (64, 32), (32, 16)], out=rows)
    assert rows[0].tobytes() == pbytes(0, 32) and rows[1].tobytes() == pbytes(64, 32)
    assert rows[2, :16].tobytes() == pbytes(32, 16) and not rows[2, 16:].any()


def test_load_chunks_into_torch_tensors(pfile, torch):
    path = pfile(1 << 16)
    ts = [torch.zeros(4, dtype=torch.float32), torch.zeros(3, dtype=torch.bfloat16)]
    memtier.load_chunks(path, [(40, 16), (2, 6)], out=ts)
    assert ts[0].view(torch.uint8).numpy().tobytes() == pbytes(40, 16)
    assert ts[1].view(torch.uint8).numpy().tobytes() == pbytes(2, 6)
    rows = torch.zeros((2, 8), dtype=torch.uint8)
    memtier.load_chunks(path, [(8, 8), (0, 8)], out=rows)
    assert rows.numpy().tobytes() == pbytes(8, 8) + pbytes(0, 8)


def test_per_chunk_eof_names_the_chunk(pfile):
    size = 10000
    path = pfile(size)
    pairs = [(0, 10), (size - 4, 8), (20, 10), (size + 100, 1)]
    outs = [bytearray(10), bytearray(8), bytearray(10), bytearray(1)]
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.load_chunks(path, pairs, out=outs)
    e = ei.value
    assert e.index == 1, "the lowest-index failed chunk, like the C API"
    assert "chunk 1 " in str(e) and f"offset {size - 4}" in str(e)
    assert e.results.tolist()[0] == 10 and e.results[1] < 0 and e.results[2] == 10 and e.results[3] < 0
    # one bad chunk does not affect the others
    assert bytes(outs[0]) == pbytes(0, 10) and bytes(outs[2]) == pbytes(20, 10)
    with pytest.raises(memtier.NotFoundError):
        memtier.load_chunks(path + ".missing", [(0, 1)])


def test_load_chunks_across_batches(pfile, monkeypatch):
    # Small CHUNK_BYTES: many memtier_load_chunks calls, errors reported by global index.
    from memtier import _chunkio as _chunks  # CHUNK_BYTES of the batching (_chunkio._run)

    monkeypatch.setattr(_chunks, "CHUNK_BYTES", 1000)
    path = pfile(1 << 16)
    pairs = [(k * 300, 300) for k in range(100)] + [((1 << 16) - 1, 2)]
    with pytest.raises(memtier.EndOfFileError) as ei:
        memtier.load_chunks(path, pairs)
    assert ei.value.index == 100
    got = memtier.load_chunks(path, pairs[:-1])
    assert b"".join(g.tobytes() for g in got) == pbytes(0, 30000)


def test_oversized_chunks_raise_eof_before_allocating(pfile):
    # With no out, load_chunks / iter_chunks allocate sum(sizes) bytes; chunks that run
    # past the end of the file must raise EndOfFileError (naming the lowest failing chunk),
    # not MemoryError for a buffer that could never be filled.
    size = 10000
    path = pfile(size)
    cases = [([(0, 2**62)], 0), ([(0, 10), (5, 2**40), (9000, 2**30)], 1), ([(0, 100 << 20)], 0),
             ([(0, 10), (0, 100 << 20), (20, 5)], 1)]
    for name, fn in (("load_chunks", memtier.load_chunks),
                     ("iter_chunks", lambda p, c: list(memtier.iter_chunks(p, c)))):
        for pairs, k in cases:
            with pytest.raises(memtier.EndOfFileError) as ei:
                fn(path, pairs)
            off, n = pairs[k]
            assert ei.value.index == k, (name, pairs)
            assert str(ei.value).startswith(f"memtier.{name}: chunk {k} (offset {off}, size {n})"), str(ei.value)
        with pytest.raises(memtier.NotFoundError):
            fn(path + ".missing", [(0, 2**40)])
    got = memtier.load_chunks(path, [(0, 10), (100, 20)])
    assert [g.tobytes() for g in got] == [pbytes(0, 10), pbytes(100, 20)]


def test_load_chunks_many_small(pfile):
    path = pfile(8 << 20)
    rng = np.random.default_rng(5)
    chunks = _random_chunks(rng, 100_000, 8 << 20, 1, 64)
    got = memtier.load_chunks(path, chunks)
    flat = pattern(0, 8 << 20)
    for k in rng.integers(0, len(chunks), 2000).tolist():
        o, s = chunks[k]
        assert np.array_equal(got[k], flat[o:o + s])


# ---------------------------------------------------------------- streaming


def test_iter_chunks_yields_each_index_once(pfile):
    path = pfile(2 << 20)
    rng = np.random.default_rng(2)
    chunks = _random_chunks(rng, 500, 2 << 20, 1, 8192)
    seen = {}
    with memtier.iter_chunks(path, chunks) as stream:
        assert len(stream) == 500
        for k, data in stream:
            assert k not in seen
            seen[k] = data.tobytes()
        assert stream.closed
    assert sorted(seen) == list(range(500))
    for k, w in enumerate(_pread(path, chunks)):
        assert seen[k] == w


def test_iter_chunks_out_buffers_and_empty(pfile):
    path = pfile(1 << 16)
    outs = [bytearray(5), bytearray(7)]
    got = dict(memtier.iter_chunks(path, [(1, 5), (9, 7)], out=outs))
    assert got[0] is outs[0] and got[1] is outs[1]
    assert bytes(outs[0]) == pbytes(1, 5) and bytes(outs[1]) == pbytes(9, 7)
    assert list(memtier.iter_chunks(path, [])) == []
    with memtier.Context() as ctx:
        assert sorted(k for k, _ in ctx.iter_chunks(path, [(0, 1), (1, 1)])) == [0, 1]


def test_iter_chunks_error_names_chunk_and_closes(pfile):
    path = pfile(4096)
    stream = memtier.iter_chunks(path, [(0, 10), (4090, 100), (10, 10)])
    got = []
    with pytest.raises(memtier.EndOfFileError) as ei:
        for k, _ in stream:
            got.append(k)
    assert ei.value.index == 1 and "chunk 1 " in str(ei.value)
    assert 1 not in got
    assert stream.closed
    assert list(stream) == []


def _next_status(handle):
    rt = _ffi.runtime()
    idx = rt.ffi.new("size_t *")
    return rt.lib.memtier_request_next(handle, 0, idx)


def test_close_releases_the_request_and_buffers(pfile):
    path = pfile(1 << 20)
    buf = np.zeros(4096, dtype=np.uint8)
    ref = weakref.ref(buf)
    stream = memtier.iter_chunks(path, [(0, 4096), (8192, 100)], out=[buf, bytearray(100)])
    handle = stream._req
    k, data = next(stream)
    del buf, data
    gc.collect()
    assert ref() is not None, "the stream must keep its buffers alive"
    stream.close()
    assert stream.closed and stream._req is None
    assert _next_status(handle) == _errors.ERR_CLOSED, "request not released by close()"
    gc.collect()
    assert ref() is None, "buffers still referenced after close()"
    stream.close()  # idempotent
    with pytest.raises(StopIteration):
        next(stream)


def test_break_and_exception_release_the_request(pfile):
    path = pfile(1 << 20)
    chunks = [(k * 4096, 4096) for k in range(64)]
    handles = []
    for k, _ in memtier.iter_chunks(path, chunks):
        break
    gc.collect()
    # a break out of a `with` block releases at once
    with memtier.iter_chunks(path, chunks) as s:
        handles.append(s._req)
        for k, _ in s:
            break
    assert _next_status(handles[-1]) == _errors.ERR_CLOSED
    with pytest.raises(RuntimeError):
        with memtier.iter_chunks(path, chunks) as s:
            handles.append(s._req)
            next(s)
            raise RuntimeError("boom")
    assert _next_status(handles[-1]) == _errors.ERR_CLOSED
    # dropped unfinished without close: released when collected
    s = memtier.iter_chunks(path, chunks)
    handles.append(s._req)
    next(s)
    del s
    gc.collect()
    assert _next_status(handles[-1]) == _errors.ERR_CLOSED


def test_iter_chunks_overlaps_consumer_work(pfile):
    # consume in a thread while the main thread waits: the stream is usable across threads
    path = pfile(4 << 20)
    chunks = [(k * 65536, 65536) for k in range(64)]
    out = {}

    def consume():
        for k, d in memtier.iter_chunks(path, chunks):
            out[k] = d.tobytes()

    t = threading.Thread(target=consume)
    t.start()
    t.join(60)
    assert sorted(out) == list(range(64))
    assert out[63] == pbytes(63 * 65536, 65536)
