"""memtier_pread_batch (the C entry forked dataset workers read with): exact
bytes, per-range statuses and texts, and that it works in a forked child of a
process that used MemTier, where every Go-backed entry returns MEMTIER_ERR_FORKED."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

import memtier
from memtier import _errors, _ffi

from conftest import pbytes, write_pfile


def _lib():
    # in a forked child: the library inherited from the parent (runtime() would raise ForkError)
    rt = _ffi.loaded() or _ffi.runtime()
    return rt.ffi, rt.lib


def pread_batch(fds, offs, sizes, dsts):
    """Call memtier_pread_batch; (status, results list, last_error text)."""
    ffi, lib = _lib()
    n = len(sizes)
    fd32 = np.asarray(fds, dtype=np.int32)
    off64 = np.asarray(offs, dtype=np.uint64)
    len64 = np.asarray(sizes, dtype=np.uint64)
    dst = np.asarray(dsts, dtype=np.uint64)
    res = np.full(n, 12345, dtype=np.int64)
    fb = ffi.from_buffer
    rc = lib.memtier_pread_batch(ffi.cast("const int32_t *", fb(fd32)), ffi.cast("const uint64_t *", fb(off64)),
                                 ffi.cast("const uint64_t *", fb(len64)), ffi.cast("void * const *", fb(dst)),
                                 n, ffi.cast("int64_t *", fb(res)))
    return rc, res.tolist(), ffi.string(lib.memtier_last_error()).decode()


def addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def fd_of(tmp_path):
    fds = []

    def make(size: int, name: str = "p.bin") -> int:
        fd = os.open(write_pfile(str(tmp_path / name), size), os.O_RDONLY)
        fds.append(fd)
        return fd

    yield make
    for fd in fds:
        os.close(fd)


def test_exact_bytes_scattered_adjacent_and_empty(fd_of):
    a, b = fd_of(1 << 20, "a.bin"), fd_of(300_000, "b.bin")
    # ranges: adjacent in the file and in dst (one preadv), adjacent in the file
    # with scattered dsts, an empty one, random ones on two descriptors
    rng = np.random.default_rng(7)
    spec = [(a, 1000, 700), (a, 1700, 5000), (a, 6700, 1), (a, 0, 0), (b, 299_000, 1000)]
    spec += [(a, 9000, 4096), (a, 13096, 100)]  # file-adjacent, dsts apart (below)
    spec += [(int(rng.choice([a, b])), int(rng.integers(0, 290_000)), int(rng.integers(1, 10_000)))
             for _ in range(100)]
    sizes = [s for _, _, s in spec]
    buf = np.zeros(sum(sizes) + 64 * len(spec), dtype=np.uint8)
    starts, pos = [], 0
    for k, s in enumerate(sizes):
        if k == 6:
            pos += 64  # the second of the file-adjacent pair lands apart from the first
        starts.append(pos)
        pos += s
    rc, res, _ = pread_batch([f for f, _, _ in spec], [o for _, o, _ in spec], sizes,
                             [addr(buf) + p for p in starts])
    assert rc == 0
    assert res == sizes
    for (fd, off, size), p in zip(spec, starts):
        assert buf[p:p + size].tobytes() == pbytes(off, size)


def test_zero_ranges_and_null_arrays():
    ffi, lib = _lib()
    assert lib.memtier_pread_batch(ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 0, ffi.NULL) == 0
    rc = lib.memtier_pread_batch(ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 1, ffi.NULL)
    assert rc == _errors.ERR_INVALID_ARG
    assert ffi.string(lib.memtier_last_error()).decode() == (
        "memtier_pread_batch: fds, offsets, sizes, dsts and results must not be NULL with n > 0")


def test_eof_inside_an_adjacent_run_names_that_range(fd_of):
    fd = fd_of(10_000)
    buf = np.zeros(12_000, dtype=np.uint8)
    base = addr(buf)
    # three file-adjacent ranges into one dst run; the third crosses EOF at 10,000
    rc, res, text = pread_batch([fd] * 4, [0, 4000, 8000, 0], [4000, 4000, 3000, 10],
                                [base, base + 4000, base + 8000, base + 11_000])
    assert rc == _errors.ERR_EOF
    assert res == [4000, 4000, _errors.ERR_EOF, 10]
    assert text == "memtier_pread_batch: element 2 (fd %d, offset 8000, 3000 bytes): the file ends after 2000 of them" % fd
    assert buf[:8000].tobytes() == pbytes(0, 8000)
    assert buf[11_000:11_010].tobytes() == pbytes(0, 10)


def test_lowest_index_failure_is_reported(fd_of, tmp_path):
    fd = fd_of(1000)
    dfd = os.open(str(tmp_path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        buf = np.zeros(100, dtype=np.uint8)
        base = addr(buf)
        big = (1 << 63)  # above SSIZE_MAX
        rc, res, text = pread_batch([fd, -1, dfd, fd, fd, fd], [0, 0, 0, 990, 0, 5],
                                    [10, 10, 10, 20, big, 5], [base, base, base, base, base, 0])
        assert rc == _errors.ERR_INVALID_ARG
        assert res == [10, _errors.ERR_INVALID_ARG, _errors.ERR_IS_DIR, _errors.ERR_EOF,
                       _errors.ERR_INVALID_ARG, _errors.ERR_INVALID_ARG]
        assert text == "memtier_pread_batch: element 1 (fd -1, offset 0, 10 bytes): %s" % os.strerror(errno.EBADF)
        # each failure's own text, when it is the lowest
        _, _, t2 = pread_batch([dfd], [0], [10], [base])
        assert t2 == "memtier_pread_batch: element 0 (fd %d, offset 0, 10 bytes): %s" % (dfd, os.strerror(errno.EISDIR))
        _, _, t4 = pread_batch([fd], [0], [big], [base])
        assert t4 == "memtier_pread_batch: element 0 (offset 0, %d bytes): size above SSIZE_MAX" % big
        _, _, t5 = pread_batch([fd], [5], [5], [0])
        assert t5 == "memtier_pread_batch: element 0 (offset 5, 5 bytes): dst is NULL with size > 0"
        _, _, t6 = pread_batch([fd], [(1 << 63) - 2], [5], [base])
        assert t6 == "memtier_pread_batch: element 0 (offset %d, 5 bytes): offset + size above INT64_MAX" % ((1 << 63) - 2)
    finally:
        os.close(dfd)


def test_works_in_a_forked_child_of_a_process_that_used_memtier(fd_of, tmp_path):
    path = write_pfile(str(tmp_path / "q.bin"), 50_000)
    assert memtier.read(path, 0, 16) == pbytes(0, 16)  # the Go runtime runs in this process
    ffi, lib = _lib()
    fd = fd_of(50_000, "q2.bin")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # never return into pytest
        code = 1
        try:
            import signal

            signal.alarm(30)
            buf = np.zeros(30_000, dtype=np.uint8)
            rc, res, _ = pread_batch([fd] * 3, [100, 20_000, 40_000], [10_000, 10_000, 10_000],
                                     [addr(buf), addr(buf) + 10_000, addr(buf) + 20_000])
            ok = rc == 0 and res == [10_000] * 3 and buf.tobytes() == (
                pbytes(100, 10_000) + pbytes(20_000, 10_000) + pbytes(40_000, 10_000))
            out = ffi.new("char[]", 16)
            forked = lib.memtier_read(ffi.NULL, path.encode(), 0, 16, out, 0)
            os.write(w, ("%s %d" % (ok, forked)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    msg = os.read(r, 100).decode()
    os.close(r)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert msg == "True %d" % _errors.ERR_FORKED
