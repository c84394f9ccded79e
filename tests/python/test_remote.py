"""URLs through the Python API (preview): read / read_into / prefetch of an
http:// object served by a small range-serving server on 127.0.0.1 (206 with
Content-Range, ETag, If-Match / If-None-Match), stopped by the test. The S3
side is tested against versitygw in runtime/remote (ctest go_remote_versitygw),
and every other API that takes a path in test_remote_apis.py."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import memtier

DATA = bytes((i * 7 + i // 4096) & 0xFF for i in range(3 * 1024 * 1024 + 77))
ETAG = '"v1"'


class _Handler(BaseHTTPRequestHandler):
    gets = 0

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        type(self).gets += 1
        if self.path != "/data.bin":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.headers.get("If-None-Match") == ETAG:
            self.send_response(304)
            self.send_header("ETag", ETAG)
            self.end_headers()
            return
        first, last = 0, len(DATA) - 1
        rng = self.headers.get("Range")
        if rng:
            a, b = rng.removeprefix("bytes=").split("-")
            first, last = int(a), min(int(b), len(DATA) - 1)
        body = DATA[first:last + 1]
        self.send_response(206 if rng else 200)
        self.send_header("ETag", ETAG)
        self.send_header("Content-Length", str(len(body)))
        if rng:
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(DATA)}")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def url():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Handler.gets = 0
    yield f"http://127.0.0.1:{srv.server_address[1]}/data.bin"
    srv.shutdown()
    srv.server_close()


def test_read_and_read_into(url):
    with memtier.Context() as ctx:
        assert ctx.read(url, 0, len(DATA)) == DATA
        buf = np.empty(100000, dtype=np.uint8)
        ctx.read_into(url, 2 * 1024 * 1024 + 5, buf)
        assert buf.tobytes() == DATA[2 * 1024 * 1024 + 5:2 * 1024 * 1024 + 5 + 100000]


def test_prefetch_then_cache_hits(url):
    with memtier.Context(freshness="open") as ctx:
        ctx.prefetch(url, 0, 0)  # wait=True: returns when the range is resident
        assert ctx.stats().cache_resident_bytes >= len(DATA)
        gets = _Handler.gets
        ctx.reset_stats()
        assert ctx.read(url, 1000, 50000) == DATA[1000:51000]
        st = ctx.stats()
        assert st.cache_hit_bytes == 50000 and st.buffered_bytes == 0
        assert _Handler.gets == gets  # freshness "open": no revalidation GET


def test_errors(url):
    with memtier.Context() as ctx:
        with pytest.raises(memtier.EndOfFileError, match=r"runs past end of file \(size 3145805\)"):
            ctx.read(url, len(DATA) - 10, 20)
        with pytest.raises(memtier.NotFoundError):
            ctx.read(url.replace("data.bin", "nope.bin"), 0, 10)
        ranges = np.array([[0, 10], [len(DATA) - 5, 5]], dtype=np.uint64)
        assert bytes(ctx.readv(url, ranges)) == DATA[:10] + DATA[-5:]  # back to back
        with pytest.raises(memtier.NotFoundError):
            ctx.readv(url.replace("data.bin", "nope.bin"), ranges)


def test_split_read_into_revalidates_once(url, monkeypatch):
    """A read_into above CHUNK_BYTES runs as several library calls; under
    freshness "strict" only the first sends the revalidation GET (one per
    Python call, as one library call does), and the pieces are DRAM hits."""
    import memtier._context as mc
    from memtier import _ffi

    monkeypatch.setattr(mc, "CHUNK_BYTES", 1 << 20)  # 4 pieces of DATA
    # The compiled read_into serves a host buffer in one library call (one
    # request, no split): the context made here binds no fast path, so the
    # Python method and its split run.
    monkeypatch.setattr(_ffi.runtime(), "fast", None)
    with memtier.Context() as ctx:
        assert ctx.read(url, 0, len(DATA)) == DATA  # opens and fills the DRAM cache
        buf = np.zeros(len(DATA), dtype=np.uint8)
        ctx.reset_stats()
        gets = _Handler.gets
        mc.Context.read_into(ctx, url, 0, buf)  # the Python method: the split path
        st = ctx.stats()
        assert buf.tobytes() == DATA
        assert _Handler.gets - gets == 1  # one conditional GET (304), not 4
        assert (st.requests, st.remote_requests, st.remote_bytes) == (4, 1, 0)
        assert (st.cache_hit_requests, st.cache_hit_bytes) == (4, len(DATA))
