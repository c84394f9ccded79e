"""Ctrl-C and Context.interrupt for calls that wait on a remote server
(memtier._interrupt, memtier_set_interrupt_check / memtier_interrupt).

A range-serving HTTP server on 127.0.0.1 answers the head window of an
object and stalls every later part without sending headers (/hdr.bin: every
GET, the open's too), so a read
of the whole object waits on the remote timeouts (30 s for headers, then
retries within a 60 s budget). The Ctrl-C case runs in a child process
(a SIGINT that reached pytest itself would end the session): the parent
sends SIGINT once the server holds the stalled GET, and the child must
report a KeyboardInterrupt from the read, then read another object
normally through the same context."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import memtier

SIZE = 24 << 20
DATA = bytes((i * 13 + i // 65536) & 0xFF for i in range(SIZE))
ETAG = '"i1"'
# Far below the remote timeouts a stalled part would otherwise wait for
# (30 s for headers, retried within 60 s): the read returned because it was
# interrupted, not because the client gave up.
RETURNS_WITHIN_S = 15


def _checkpoint() -> bytes:
    """A safetensors file of one 8 MiB tensor: its header lies in the head
    window of the first GET, its data beyond it."""
    import numpy as np
    from safetensors.numpy import save

    return save({"w": np.arange(2 << 20, dtype=np.float32)})


CKPT = _checkpoint()


class _Handler(BaseHTTPRequestHandler):
    stalled = threading.Event()  # a stalled GET is being held
    release = threading.Event()  # teardown: let the held GETs go

    def log_message(self, *args):
        pass

    def do_GET(self):
        rng = self.headers.get("Range", "bytes=0-")
        a, b = rng.removeprefix("bytes=").split("-")
        first, last = int(a), min(int(b or SIZE - 1), SIZE - 1)
        obj = CKPT if self.path == "/model.safetensors" else DATA
        last = min(last, len(obj) - 1)
        if self.path.startswith("/hdr") or (self.path in ("/stall.bin", "/model.safetensors") and first > 0):
            type(self).stalled.set()
            type(self).release.wait(120)
            return
        body = obj[first:last + 1]
        self.send_response(206)
        self.send_header("ETag", ETAG)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(obj)}")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def base():
    _Handler.stalled.clear()
    _Handler.release.clear()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    _Handler.release.set()
    srv.shutdown()
    srv.server_close()


CHILD = textwrap.dedent("""
    import sys, time
    import memtier, memtier.safetensors
    base, what = sys.argv[1], sys.argv[2]
    ctx = memtier.Context()
    t0 = time.monotonic()
    try:
        if what == "read":
            ctx.read(base + "/stall.bin", 0, %d)
        elif what == "readv":
            ctx.readv(base + "/stall.bin", [[0, 4096], [20 << 20, 4096]])
        elif what == "explain":
            ctx.explain(base + "/hdr.bin", 0, 4096)  # its open waits on the server
        elif what == "read_async":
            buf = bytearray(8 << 20)
            r = ctx.read_async(base + "/stall.bin", 1 << 20, buf)
            try:
                r.wait()
            finally:
                r.release()  # returns at once: the wait's Ctrl-C stopped the GETs
        elif what == "tar":  # shards opened on threads of their own
            len(memtier.TarShardDataset([base + "/hdr0.tar", base + "/hdr1.tar"]))
        else:
            memtier.safetensors.load_file(base + "/model.safetensors", ctx=ctx)
        print("RETURNED")
    except KeyboardInterrupt:
        print("KEYBOARDINTERRUPT %%.3f" %% (time.monotonic() - t0))
    data = ctx.read(base + "/ok.bin", 1000, 5000)
    print("AFTER", len(data), data == bytes((i * 13 + i // 65536) & 0xFF for i in range(1000, 6000)))
    print("ERRORS", ctx.stats().errors)
""" % SIZE)


@pytest.mark.parametrize("what", ["read", "readv", "explain", "read_async", "tar", "safetensors"])
def test_ctrl_c_stops_a_stalled_remote_read(base, what):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    p = subprocess.Popen([sys.executable, "-c", CHILD, base, what], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert _Handler.stalled.wait(30), "the child never reached the stalled part"
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=RETURNS_WITHIN_S + 30)
        waited = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    lines = out.split("\n")
    assert lines[0].startswith("KEYBOARDINTERRUPT "), (out, err)
    assert waited < RETURNS_WITHIN_S, (waited, out)
    assert lines[1] == "AFTER 5000 True", (out, err)
    # the interrupted call; an async read's failure is seen by no call (the
    # KeyboardInterrupt came out of wait between two slices)
    # (the dataset's shards are read by a context of its own)
    assert lines[2] == f"ERRORS {0 if what in ('read_async', 'tar') else 1}", (out, err)


def test_interrupt_from_another_thread(base):
    with memtier.Context() as ctx:
        def stop():
            if _Handler.stalled.wait(30):
                ctx.interrupt()
        th = threading.Thread(target=stop)
        th.start()
        t0 = time.monotonic()
        with pytest.raises(memtier.CallInterruptedError) as ei:
            ctx.read(base + "/stall.bin", 0, SIZE)
        th.join()
        assert time.monotonic() - t0 < RETURNS_WITHIN_S
        assert ei.value.code == memtier.CallInterruptedError.code
        assert "interrupted" in str(ei.value) and "/stall.bin" in str(ei.value)
        # The context goes on: a read started after the interrupt runs.
        assert ctx.read(base + "/ok.bin", 0, 4096) == DATA[:4096]
    with memtier.Context() as ctx:
        ctx.interrupt()  # nothing in flight: a no-op
        assert ctx.read(base + "/ok.bin", SIZE - 10, 10) == DATA[-10:]


DAEMON_CHILD = textwrap.dedent("""
    import sys, threading
    import memtier
    base = sys.argv[1]
    ctx = memtier.Context()
    def reader():
        try:
            ctx.read(base + "/stall.bin", 0, %d)
        except BaseException as e:
            print("READER", type(e).__name__)
    threading.Thread(target=reader, daemon=True).start()
    print("READY")
    sys.stdin.readline()  # the parent saw the stalled GET: exit with the reader inside it
""" % SIZE)


def test_exit_with_a_daemon_thread_waiting_on_a_server(base):
    """The interpreter exits while a daemon thread waits inside a remote read.
    Finalizing the context (at exit) interrupts its remote requests, so the
    exit does not wait out the remote timeouts (it took 60 s, the retry
    budget, before memtier_finalize interrupted them); the check is
    registered for the main thread only, so the daemon thread never enters
    the interpreter from inside the library during shutdown. The process
    exits 0; the reader, if it still runs Python code then, saw
    CallInterruptedError."""
    p = subprocess.Popen([sys.executable, "-c", DAEMON_CHILD, base], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "READY\n"
        assert _Handler.stalled.wait(30), "the reader never reached the stalled part"
        time.sleep(0.2)  # the reader's wait runs a few interrupt polls
        t0 = time.monotonic()
        out, err = p.communicate("\n", timeout=60)
        waited = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, (p.returncode, err)
    assert out in ("", "READER CallInterruptedError\n"), out
    assert waited < RETURNS_WITHIN_S, waited
