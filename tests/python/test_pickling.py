"""Pickling of every MemTier handle (field case N12, tests/field_cases.md; issue 11 part 2).

Each handle either pickles to something that re-opens itself in the receiving
process (safe_open and SafeSlice by path, framework and device; the datasets
by their configuration) or refuses with a TypeError naming the object and the
fix (Context, Request, ChunkStream). In a torch DataLoader worker a refused
result raises that TypeError in the parent instead of hanging the loader
(pytorch/pytorch#142884). The DataLoader cases run in tests/python/pickling_cases.py.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

import memtier
import memtier.safetensors as mts
from memtier import _pickling

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_SCRIPT = os.path.join(HERE, "pickling_cases.py")
sys.path.insert(0, HERE)
import pickling_cases as cases  # noqa: E402  (the expected bytes come from its helpers)

CONTEXT_MSG = ("memtier.Context cannot be pickled: create a context in each process (or use the "
               "module-level functions, which make one per process)")
REQUEST_MSG = ("memtier.Request cannot be pickled: its {kind} runs in this process; wait() for it "
               "and pickle the destination buffer, or pickle the path and range and read them in "
               "the receiving process")
CHUNKS_MSG = ("memtier.ChunkStream cannot be pickled: its reads run in this process; pickle the "
              "path and chunks and call memtier.iter_chunks in the receiving process")
CTX_SAFE_OPEN_MSG = ("memtier.safetensors.safe_open cannot be pickled when opened with ctx= (a "
                     "memtier.Context belongs to one process): open it without ctx=, or pickle "
                     "the path and open it in each process")


def write_w(path: str, w: np.ndarray = cases.W) -> str:
    hdr = json.dumps({"w": {"dtype": "F32", "shape": [8, 2], "data_offsets": [0, w.nbytes]}},
                     separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + w.tobytes())
    return path


@pytest.fixture
def st(tmp_path):
    return write_w(str(tmp_path / "w.safetensors"))


# ------------------------------------------------------------ in one process


def test_safe_open_round_trip_reopens_lazily(st):
    f = mts.safe_open(st, framework="np")
    g = pickle.loads(pickle.dumps(f))
    assert list(g.__dict__) == ["_pickled"]  # nothing opened while unpickling
    assert g.keys() == ["w"]
    assert g.get_tensor("w").tobytes() == cases.W.tobytes()
    assert g.metadata() is None
    # an unpickled handle not yet used pickles its state on
    h = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(f))))
    assert h.get_tensor("w").tobytes() == cases.W.tobytes()


def test_safe_open_pickles_an_absolute_path(st, monkeypatch, tmp_path):
    monkeypatch.chdir(os.path.dirname(st))
    f = mts.safe_open(os.path.basename(st), framework="np")
    blob = pickle.dumps(f)
    monkeypatch.chdir(str(tmp_path.parent))
    assert pickle.loads(blob).get_tensor("w").tobytes() == cases.W.tobytes()


def test_safe_slice_round_trip(st):
    s = mts.safe_open(st, framework="np").get_slice("w")
    s2 = pickle.loads(pickle.dumps(s))
    assert s2.get_shape() == [8, 2] and s2.get_dtype() == "F32"
    assert s2[3:5].tobytes() == cases.W.reshape(8, 2)[3:5].tobytes()


def test_closed_safe_open_reopens_closed_and_its_slice_still_reads(st):
    f = mts.safe_open(st, framework="np")
    s = f.get_slice("w")
    f.close()
    g, s2 = pickle.loads(pickle.dumps((f, s)))
    with pytest.raises(memtier.ClosedError, match="^memtier.safetensors: File is closed"):
        g.keys()
    assert s2[7].tobytes() == cases.W.reshape(8, 2)[7].tobytes()


def test_safe_open_file_changed_since_pickled(st):
    blob = pickle.dumps(mts.safe_open(st, framework="np"))
    os.unlink(st)
    write_w(st, cases.W + np.float32(1))  # a new inode
    g = pickle.loads(blob)
    with pytest.raises(memtier.MemTierError) as ei:
        g.keys()
    assert str(ei.value).endswith(
        f"{st}: the file changed since it was pickled (size, inode or modification time "
        "differ); open it again")


def test_safe_open_on_an_explicit_context_refuses(st):
    with memtier.Context() as c:
        f = mts.safe_open(st, framework="np", ctx=c)
        with pytest.raises(TypeError) as ei:
            pickle.dumps(f)
        assert str(ei.value) == CTX_SAFE_OPEN_MSG
        f.close()


def test_refused_handles_name_the_object_and_the_fix(st):
    with memtier.Context() as c:
        with pytest.raises(TypeError) as ei:
            pickle.dumps(c)
        assert str(ei.value) == CONTEXT_MSG
        req = c.read_async(st, 0, bytearray(8))
        with pytest.raises(TypeError) as ei:
            pickle.dumps(req)
        assert str(ei.value) == REQUEST_MSG.format(kind="read_async")
        req.wait()
        with pytest.raises(TypeError) as ei:  # completed or not: it belongs to this process
            pickle.dumps(req)
        assert str(ei.value) == REQUEST_MSG.format(kind="read_async")
        req.release()
        pre = c.prefetch(st, 0, 8, wait=False)
        with pytest.raises(TypeError) as ei:
            pickle.dumps(pre)
        assert str(ei.value) == REQUEST_MSG.format(kind="prefetch")
        pre.wait()
        with c.iter_chunks(st, [(0, 4), (4, 4)]) as cs:
            with pytest.raises(TypeError) as ei:
                pickle.dumps(cs)
            assert str(ei.value) == CHUNKS_MSG


def test_refusal_inside_a_dataloader_worker_raises_when_unpickled(monkeypatch):
    # What a worker's result queue does: pickle there, unpickle in the parent.
    class FakeWorker:
        _worker_info = object()

    monkeypatch.setitem(sys.modules, "torch.utils.data._utils.worker", FakeWorker)
    blob = pickle.dumps(memtier.default_context())
    monkeypatch.delitem(sys.modules, "torch.utils.data._utils.worker")
    with pytest.raises(TypeError) as ei:
        pickle.loads(blob)
    assert str(ei.value) == CONTEXT_MSG
    assert _pickling._in_dataloader_worker() is False


def test_plain_value_objects_round_trip(st):
    d = memtier.explain(st, 0, 8)
    assert pickle.loads(pickle.dumps(d)) == d
    s = memtier.stats()
    assert pickle.loads(pickle.dumps(s)) == s


def raised(fn):
    try:
        fn()
    except memtier.MemTierError as e:
        return e
    raise AssertionError("no error")


def test_errors_round_trip_with_class_code_detail_message_errno_filename(st, tmp_path):
    # N12 (a): each error class raised through a real call, then pickled
    bad = str(tmp_path / "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 4) + b"{xx}")
    c = memtier.Context()
    c.close()
    errors = [
        raised(lambda: memtier.read(str(tmp_path / "missing"), 0, 4)),
        raised(lambda: memtier.read(str(tmp_path), 0, 4)),
        raised(lambda: memtier.read(st, 0, 1 << 20)),
        raised(lambda: mts.safe_open(bad, framework="np")),  # FormatError and SafetensorError
        raised(lambda: mts.safe_open(st, framework="np").get_tensor("nope")),
        raised(lambda: memtier.Context(io_threads=100000)),
        raised(lambda: c.read(st, 0, 4)),
    ]
    names = [type(e).__name__ for e in errors]
    assert names == ["NotFoundError", "IsDirectoryError", "EndOfFileError", "FormatError",
                     "TensorNotFoundError", "InvalidArgumentError", "ClosedError"]
    assert isinstance(errors[3], mts.SafetensorError) and isinstance(errors[4], KeyError)
    for e in errors:
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is type(e)
        assert (e2.code, e2.name, e2.detail, str(e2)) == (e.code, e.name, e.detail, str(e))
        assert getattr(e2, "errno", None) == getattr(e, "errno", None)
        assert getattr(e2, "filename", None) == getattr(e, "filename", None)
    assert pickle.loads(pickle.dumps(type(errors[3]))) is type(errors[3])  # the class, as torch pickles it


# -------------------------------------------------------- DataLoader workers


def expected(work: str) -> dict:
    w = cases.W.tobytes()
    rows = cases.W.reshape(8, 2)
    hold = [(w + rows[k:k + 2].tobytes() + cases.fill(k, 100 + k) + cases.fill(k + 50, 60 + k)).hex()
            for k in range(cases.N)]
    return {
        "hold_readers": ["ok", hold],
        "hold_context": ["TypeError", CONTEXT_MSG],
        "hold_request": ["TypeError", REQUEST_MSG.format(kind="read_async")],
        "hold_chunks": ["TypeError", CHUNKS_MSG],
        "ret_safe_open": ["ok", [w.hex()] * cases.N],
        "ret_slice": ["ok", [rows[k:k + 2].tobytes().hex() for k in range(cases.N)]],
        "ret_context": ["TypeError", CONTEXT_MSG],
        "ret_request": ["TypeError", REQUEST_MSG.format(kind="read_async")],
        "ret_chunks": ["TypeError", CHUNKS_MSG],
        "ret_format_error": ["FormatError", (
            f"memtier.safetensors._bridged.FormatError: memtier.safetensors.safe_open: safetensors "
            f"{work}/bad.safetensors at offset 9: invalid JSON: invalid character 'x' looking for "
            "beginning of object key string")],
        "pool_not_found": ["NotFoundError", (
            f"[Errno 2] memtier.read: open {work}/missing.bin: no such file or directory")],
    }


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_dataloader_workers_get_each_handle_or_the_parent_gets_the_type_error(method, tmp_path, torch):
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    try:
        r = subprocess.run([sys.executable, CASES_SCRIPT, method, str(tmp_path)],
                           capture_output=True, text=True, timeout=400, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s cases hung (> 400 s); stderr tail: %s" % (method, (e.stderr or b"")[-3000:]))
    assert r.returncode == 0, r.stderr[-4000:]
    assert json.loads(r.stdout) == expected(str(tmp_path)), r.stderr[-4000:]
