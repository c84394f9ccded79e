"""DataLoader workers and MemTier handles (field case N12, tests/field_cases.md), one start method per interpreter.

Usage: ``python pickling_cases.py METHOD WORKDIR`` with METHOD ``spawn`` or
``forkserver``. Builds its files under WORKDIR, runs every case below through
a ``DataLoader(num_workers=2, batch_size=None, timeout=60,
multiprocessing_context=METHOD)`` and prints one JSON object: case name ->
``["ok", [hex of each item's bytes, in index order]]`` or ``["TypeError",
message]`` (the exception the parent's iteration raised), ``["other", repr]``
for anything else. tests/python/test_pickling.py runs it under a subprocess
timeout and asserts every value, so a hang is a failure, not a wait.

Cases whose Dataset *holds* a handle (pickled by the parent at worker start):

=================  ==========================================================
hold_readers       a safe_open, a SafeSlice of it, a MemTierDataset and a
                   TarShardDataset, all made (and read once) in the parent;
                   item k is the bytes each of them reads in the worker
hold_context       a memtier.Context: TypeError in the parent
hold_request       a completed memtier.Request: TypeError in the parent
hold_chunks        a memtier.ChunkStream: TypeError in the parent
=================  ==========================================================

Cases whose ``__getitem__`` *returns* a handle made in the worker (pickled
by torch's result queue in the worker, unpickled in the parent):

=================  ==========================================================
ret_safe_open      a safe_open; the parent reads ``w`` through it
ret_slice          a SafeSlice; the parent reads rows k:k+2
ret_context        a Context: TypeError in the parent's next(), no hang
ret_request        a Request: TypeError in the parent's next(), no hang
ret_chunks         a ChunkStream: TypeError in the parent's next(), no hang
ret_format_error   raises the FormatError (a SafetensorError) of a bad file:
                   the parent's next() raises it (its class pickles)
=================  ==========================================================

And ``pool_not_found``: a Pool(1) of METHOD maps a read of a missing file;
the parent gets the NotFoundError. Errors are reported as ``[class name,
last line of the message]``.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import tarfile

import numpy as np

try:
    import memtier
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import memtier

import memtier.safetensors as mts
from memtier.dataset import MemTierDataset
from memtier.webdataset import TarShardDataset

N = 4  # items per DataLoader
W = np.arange(16, dtype=np.float32) * np.float32(1.5) - np.float32(3.0)  # tensor "w": 8 rows of 2


def fill(k: int, n: int) -> bytes:
    """Sample k of the packed data and the tar shard: n bytes of (7k + i) % 251."""
    return bytes((7 * k + i) % 251 for i in range(n))


def make_files(work: str) -> dict:
    st = os.path.join(work, "w.safetensors")
    hdr = json.dumps({"w": {"dtype": "F32", "shape": [8, 2], "data_offsets": [0, W.nbytes]}},
                     separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + W.tobytes())
    data = os.path.join(work, "data.bin")
    index = os.path.join(work, "index.npy")
    rows, pos, blob = [], 0, b""
    for k in range(N):
        b = fill(k, 100 + k)
        rows.append((pos, len(b)))
        blob += b + b"\xee" * 3
        pos += len(b) + 3
    with open(data, "wb") as f:
        f.write(blob)
    np.save(index, np.array(rows, dtype=np.int64))
    tar = os.path.join(work, "shard.tar")
    with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as t:
        for k in range(N):
            b = fill(k + 50, 60 + k)
            ti = tarfile.TarInfo("s%03d.bin" % k)
            ti.size = len(b)
            t.addfile(ti, io.BytesIO(b))
    bad = os.path.join(work, "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(struct.pack("<Q", 4) + b"{xx}")
    return {"st": st, "data": data, "index": index, "tar": tar, "bad": bad,
            "missing": os.path.join(work, "missing.bin")}


def read_missing(path: str) -> bytes:
    """A Pool task: read 4 bytes of ``path`` (missing: NotFoundError)."""
    return memtier.read(path, 0, 4)


def as_bytes(x) -> bytes:
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    if hasattr(x, "numpy"):
        x = x.numpy()
    return np.ascontiguousarray(x).tobytes()


class Holding:
    """A Dataset holding ``obj`` (made in the parent); item k is ``read(obj, k)``."""

    def __init__(self, obj, kind: str) -> None:
        self.obj, self.kind = obj, kind

    def __len__(self) -> int:
        return N

    def __getitem__(self, k: int) -> bytes:
        f, s, ds, tar = self.obj
        return b"".join([as_bytes(f.get_tensor("w")), as_bytes(s[k:k + 2]), as_bytes(ds[k]),
                         as_bytes(tar[k]["bin"])])


class Returning:
    """A Dataset whose item k is a handle of ``kind`` made in the worker."""

    def __init__(self, files: dict, kind: str) -> None:
        self.files, self.kind = files, kind

    def __len__(self) -> int:
        return N

    def __getitem__(self, k: int):
        p = self.files["st"]
        if self.kind == "safe_open":
            return mts.safe_open(p, framework="np")
        if self.kind == "slice":
            return mts.safe_open(p, framework="np").get_slice("w")
        if self.kind == "format_error":
            return mts.safe_open(self.files["bad"], framework="np")
        if self.kind == "context":
            return memtier.Context()
        if self.kind == "request":
            r = memtier.read_async(p, 0, bytearray(8))
            r.wait()
            return r
        return memtier.iter_chunks(p, [(0, 8)])


def consume(ds, method: str, after) -> list:
    """Every item of a 2-worker DataLoader over ``ds``, through ``after``."""
    import torch.utils.data as tud

    dl = tud.DataLoader(ds, batch_size=None, num_workers=2, timeout=60,
                        multiprocessing_context=method)
    return [after(k, x).hex() for k, x in enumerate(dl)]


def run(name: str, fn) -> list:
    try:
        return ["ok", fn()]
    except TypeError as e:
        return ["TypeError", str(e)]
    except memtier.MemTierError as e:
        return [type(e).__name__, str(e).splitlines()[-1]]
    except Exception as e:  # reported, so the test shows what went wrong
        return ["other", "%s: %s" % (type(e).__name__, e)]


def main() -> None:
    method, work = sys.argv[1], sys.argv[2]
    files = make_files(work)
    f = mts.safe_open(files["st"], framework="np")
    readers = (f, f.get_slice("w"), MemTierDataset(files["index"], files["data"]),
               TarShardDataset(files["tar"]))
    readers[2][0], readers[3][0]  # the parent has read through each (the library is loaded)
    req = memtier.read_async(files["st"], 0, bytearray(8))
    req.wait()
    out = {}
    same = lambda k, x: x  # noqa: E731
    out["hold_readers"] = run("hold_readers", lambda: consume(Holding(readers, "r"), method, same))
    for kind, obj in (("context", memtier.Context()), ("request", req),
                      ("chunks", memtier.iter_chunks(files["st"], [(0, 8)]))):
        out["hold_" + kind] = run(kind, lambda: consume(Holding(obj, kind), method, same))
    out["ret_safe_open"] = run("ret_safe_open", lambda: consume(
        Returning(files, "safe_open"), method, lambda k, x: as_bytes(x.get_tensor("w"))))
    out["ret_slice"] = run("ret_slice", lambda: consume(
        Returning(files, "slice"), method, lambda k, x: as_bytes(x[k:k + 2])))
    for kind in ("context", "request", "chunks"):
        out["ret_" + kind] = run(kind, lambda: consume(Returning(files, kind), method, same))
    out["ret_format_error"] = run("ret_format_error", lambda: consume(
        Returning(files, "format_error"), method, same))

    def pool() -> list:
        import multiprocessing as mp

        with mp.get_context(method).Pool(1) as p:
            return p.map(read_missing, [files["missing"]])
    out["pool_not_found"] = run("pool_not_found", pool)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
