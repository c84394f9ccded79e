#!/usr/bin/env python3
"""bench_remote.py: MemTier against the S3 peers, on one S3 server on loopback, in one run.

It starts versitygw (scripts/versitygw.sh; Apache-2.0, a real SigV4 S3 gateway) on a free
127.0.0.1 port over a new temp dir (a bucket is a directory), writes the fixtures into the
bucket as files (with an ETag in the ``user.etag`` extended attribute, where versitygw keeps
the ETags of uploaded objects: the AWS CRT refuses objects without one), and measures:

  a. object     one object (default 512 MiB, ``--size``) into a preallocated host buffer:
                ``memtier.Context.read_into("s3://bench/obj.bin", 0, buf)`` vs boto3
                ``get_object`` with Range parts of 8 MiB in a ThreadPoolExecutor (8/16/32
                threads), s3torchconnector's S3Reader (the CRT), obstore ``get`` and
                ``get_range_async`` parts in flight (8/16/32), Run:ai's FileStreamer over the
                s3 URL (RUNAI_STREAMER_CONCURRENCY 8/16/32). The server ceiling is the best of
                every client at its best setting; ``os.preadv`` of the bucket's file (page
                cache warm) is the local reference.
  b. checkpoint a safetensors checkpoint (default 512 MB, ``--ckpt-size``) into CPU tensors:
                ``memtier.safetensors.load_file("s3://...")`` vs Run:ai's SafetensorsStreamer
                over the s3 URL vs boto3 ranged download + ``safetensors.torch.load(bytes)``.
  c. dataset    a DataLoader epoch (batch 64, 0 and 2 workers, spawn) over tar shards in the
                bucket: ``memtier.TarShardDataset`` of the s3 URLs vs s3torchconnector's
                ``S3IterableDataset`` of the shards (members parsed with tarfile, as a
                WebDataset pipeline does) and ``S3MapDataset`` of the same samples stored one
                object each.
  d. tiers      for a-c: a second process (served by MemTier's disk cache,
                MEMTIER_DISK_CACHE_DIR / MEMTIER_DISK_CACHE_BYTES) and a third load in that
                process (DRAM cache), against the same loads of the bucket's local file
                (first load: page cache; second: DRAM cache).

Every measurement runs in a fresh child process started with the AWS settings in its
environment (libmemtier.so reads the environment the process started with). A MemTier
first load gets an empty disk cache directory. Rows: MB/s (10^6 bytes/s) of the best of
``--runs``; for a dataset epoch the clock starts when the first batch of every worker has
arrived (batch num_workers - 1 in the DataLoader's in-order delivery; batch 0 with no
workers), so no worker's start-up (spawn, imports, worker_init_fn, its first open) is inside
it, and the rate counts the payload bytes after those batches. (It started at batch 0 before:
with 2 workers the second one's start-up, its pretouch included, was timed, 0.3-2 s of a
0.5-2.5 s epoch in a trace of a disk-cache child.) A dataset row also prints its end-to-end
rate: the payload over the dataset's construction, the workers' start-up and the whole first
epoch. It tells the first-load rows apart: building a ``TarShardDataset`` of URLs indexes the
shards through the disk tier, which fetches every piece of a shard of small samples, so a
first epoch's samples come from the disk cache (measured: no data GET inside it); so the
report's first-load dataset rows compare end-to-end rates, the epoch-only ratio in their note. Ratios: first
load / best peer (target >= 1.3x), disk-cache run / local first load (>= 0.9x), DRAM hit on
the remote object / DRAM hit on the local file (>= 0.9x). A row that cannot run prints its
one-line error instead of a figure. Every load is checked (object: sha1; checkpoint: sha1 of
each tensor; dataset: key, length and first bytes of every sample) outside the clock.

Fair start (the disk-cache and DRAM rows compare separate child processes): on a VM whose
guest reports freed memory to the host (Linux free page reporting, e.g. virtio_balloon with
``page_reporting.page_reporting_order`` on the kernel command line), the first touch of a page
that was reported costs a host fault on top of the guest's zeroing, and pages freed less than
about 2 s earlier (the kernel's reporting delay) have not been reported yet. A child that
started right after another one exited then filled its DRAM cache several times faster than
one that did not: ``perf record -g`` of a disk-cache child put 63% of its samples in
clear_page_erms (46% under the DRAM cache's Block.Fill), and the same child run in the order
s3, local, s3, local took 1.46, 0.99, 0.97 and 0.23 s. So every disk-cache and local-file
child writes one byte per page of ``--pretouch`` x the load's bytes of new private anonymous
memory and unmaps it right before its first clock (a DataLoader worker: its share, in its
worker_init_fn): both sides then allocate from memory freed moments ago. Measured on a
512 MiB object's disk-cache child (perf record -g, samples inside the load only; two runs
each, load average 6): without the pretouch the load took 1.55 and 1.25 s with 43-44% of its
samples in clear_page_erms (415 and 278 ms); after a 1 GiB pretouch it took 0.41 and 0.44 s
with 17% there (56 and 70 ms), and a local-file child after the same pretouch 0.41 s. The
pretouch itself, outside the clock, runs at about 0.4 GB/s. And the two children of each
variant run in the order A B, then B A on the next run (``--runs``), the best of each side
reported. A MemTier first-load child pretouches too: it loads once (its disk cache must be
empty), and its disk tier writes the load's bytes into new page-cache memory, while a peer's
row is the best of ``--runs`` loads in one process, whose later loads reuse the memory the
earlier ones freed. Measured below the engine (runtime/diskcache BenchmarkFirstLoadVersitygw,
1 GiB, load average 8-11): 50% of a first load's samples were the disk tier's write into new
page-cache memory (copy_folio_from_iter_atomic, 40x the socket receive's _copy_to_iter; the
entry checksums 0.5%); with the 2 MiB-aligned disk-cache writes then tried (dropped, see
writeSummed in runtime/diskcache/payload.go) the load cost a median 0.545 CPU s/GB after a 2x
pretouch against 1.25 without.

What each client needed for versitygw (endpoint http://127.0.0.1:PORT, region us-east-1,
access key and secret, path-style addressing):
  memtier          AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION in
                   the process environment (path style is implied by the endpoint)
  boto3            client("s3", endpoint_url=, region_name=, aws_access_key_id=,
                   aws_secret_access_key=, config=Config(s3={"addressing_style": "path"},
                   max_pool_connections=threads))
  s3torchconnector S3ClientConfig(force_path_style=True) and endpoint= (keys from the
                   AWS_* environment, CRT default chain); objects must have an ETag
  obstore          S3Store(bucket, endpoint=, access_key_id=, secret_access_key=, region=,
                   virtual_hosted_style_request=False, client_options={"allow_http": True})
  Run:ai           AWS_ENDPOINT_URL and the keys in the environment (boto3 resolves them),
                   RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0
  all              AWS_EC2_METADATA_DISABLED=true, so no client looks for instance metadata

    python examples/python/bench_remote.py                 # about 3 minutes on 2 cores
    python examples/python/bench_remote.py --size 1073741824 --ckpt-size 1073741824
    python examples/python/bench_remote.py --quick         # 64 MiB, 1 run: smoke test
    python examples/python/bench_remote.py --json          # one JSON object on stdout
    python examples/python/bench_remote.py --memtier-only  # the disk-cache and DRAM rows only

Use the test venv (``py=$(./scripts/python_env.sh | tail -n 1)``): it has boto3, obstore,
s3torchconnectorclient and runai-model-streamer-s3 (s3torchconnector itself, an sdist, see
python/requirements-test.txt). Exit status 1 when a row that ran returned wrong bytes, 2 when
versitygw cannot be started; a missed target or a row that cannot run is reported, not fatal.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _peers  # noqa: E402
from _peers import MiB, log  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULT_TAG = "@@bench_remote_result "
BUCKET = "bench"
ACCESS, SECRET, REGION = "memtier-bench", "memtier-bench-secret", "us-east-1"
PART = 8 * MiB
BATCH = 64
MB = 1e6
PEER_VERSIONS = ("boto3", "s3torchconnector", "s3torchconnectorclient", "obstore",
                 "runai-model-streamer", "runai-model-streamer-s3", "safetensors", "torch")
TARGETS = {"first": 1.3, "disk": 0.9, "dram": 0.9}
NOCACHE_LABEL = "memtier first load, no disk or DRAM cache (as the peers)"


# ====================================================================== child side


def _s3_parts(size: int) -> List[tuple]:
    return [(o, min(PART, size - o)) for o in range(0, size, PART)]


def _boto3_client(ep: str, threads: int) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=ep, region_name=REGION, aws_access_key_id=ACCESS,
                        aws_secret_access_key=SECRET,
                        config=Config(s3={"addressing_style": "path"}, max_pool_connections=threads))


def _boto3_ranged(client: Any, pool: Any, key: str, size: int, buf: Any) -> None:
    mv = memoryview(buf).cast("B")

    def part(p: tuple) -> None:
        off, n = p
        body = client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={off}-{off + n - 1}")["Body"]
        data = body.read()
        if len(data) != n:
            raise EOFError(f"part at {off}: {len(data)} of {n} bytes")
        mv[off:off + n] = data

    list(pool.map(part, _s3_parts(size)))


def _s3torch_client(ep: str) -> Any:
    from s3torchconnector._s3client import S3Client, S3ClientConfig

    return S3Client(REGION, endpoint=ep, s3client_config=S3ClientConfig(force_path_style=True))


def _object_loader(spec: Dict[str, Any]) -> Any:
    """A function buf -> None filling buf with the object, for spec["row"]."""
    row, ep, key, size = spec["row"], spec["endpoint"], spec["key"], spec["size"]
    url = f"s3://{BUCKET}/{key}"
    if row == "memtier":
        import memtier

        ctx = memtier.default_context()  # the context memtier.stats() reports (the rows' notes)
        src = spec.get("local") or url
        return lambda buf: ctx.read_into(src, 0, buf)
    if row == "local_preadv":
        def load_local(buf: Any) -> None:
            mv, off = memoryview(buf).cast("B"), 0
            fd = os.open(spec["local"], os.O_RDONLY)
            try:
                while off < size:
                    n = os.preadv(fd, [mv[off:off + 16 * MiB]], off)
                    if n <= 0:
                        raise EOFError(spec["local"])
                    off += n
            finally:
                os.close(fd)
        return load_local
    if row == "boto3":
        from concurrent.futures import ThreadPoolExecutor

        n = int(spec["setting"])
        client, pool = _boto3_client(ep, n), ThreadPoolExecutor(n)
        return lambda buf: _boto3_ranged(client, pool, key, size, buf)
    if row == "s3torch":
        try:
            client = _s3torch_client(ep)
        except ImportError:  # the package is not installed: its CRT client directly
            from s3torchconnectorclient._mountpoint_s3_client import MountpointS3Client

            mc = MountpointS3Client(REGION, "memtier-bench", 10.0, PART, None, False, ep, True)

            def load_crt(buf: Any) -> None:
                mv, off = memoryview(buf).cast("B"), 0
                for chunk in mc.get_object(BUCKET, key):
                    b = memoryview(chunk)
                    mv[off:off + len(b)] = b
                    off += len(b)
                if off != size:
                    raise EOFError(f"{off} of {size} bytes")
            load_crt.label = "s3torchconnectorclient CRT stream"  # type: ignore[attr-defined]
            return load_crt

        def load_s3t(buf: Any) -> None:
            r = client.get_object(BUCKET, key)
            mv, off = memoryview(buf).cast("B"), 0
            while off < size:
                n = r.readinto(mv[off:])
                if not n:
                    raise EOFError(f"{off} of {size} bytes")
                off += n
        return load_s3t
    if row in ("obstore_get", "obstore"):
        import asyncio

        import obstore
        from obstore.store import S3Store

        store = S3Store(BUCKET, endpoint=ep, access_key_id=ACCESS, secret_access_key=SECRET, region=REGION,
                        virtual_hosted_style_request=False, client_options={"allow_http": True})
        if row == "obstore_get":
            def load_get(buf: Any) -> None:
                memoryview(buf).cast("B")[:] = memoryview(obstore.get(store, key).bytes())
            return load_get
        n = int(spec["setting"])

        async def gather(mv: memoryview) -> None:
            sem = asyncio.Semaphore(n)

            async def part(off: int, k: int) -> None:
                async with sem:
                    b = await obstore.get_range_async(store, key, start=off, length=k)
                mv[off:off + k] = memoryview(b)
            await asyncio.gather(*(part(o, k) for o, k in _s3_parts(size)))
        return lambda buf: asyncio.run(gather(memoryview(buf).cast("B")))
    if row == "runai":
        from runai_model_streamer import FileChunks, FileStreamer

        def load_runai(buf: Any) -> None:
            mv = memoryview(buf).cast("B")
            parts = _s3_parts(size)
            with FileStreamer() as fs:
                fs.stream_files([FileChunks.contiguous(0, url, 0, [k for _, k in parts])], None, "cpu")
                for _fid, idx, t in fs.get_chunks():
                    off, k = parts[idx]
                    mv[off:off + k] = memoryview(t.numpy()).cast("B")
        return load_runai
    raise ValueError(f"unknown object row {row!r}")


def _ckpt_loader(spec: Dict[str, Any]) -> Any:
    row, ep, key = spec["row"], spec["endpoint"], spec["key"]
    url = f"s3://{BUCKET}/{key}"
    if row == "memtier":
        import torch  # noqa: F401  (imported before the clock, as the peers' rows do)

        import memtier
        import memtier.safetensors as mts

        memtier.stats()  # loads the library and makes the default context outside the clock
        src = spec.get("local") or url
        return lambda: mts.load_file(src, device="cpu")
    if row == "runai":
        from runai_model_streamer import SafetensorsStreamer

        def load_runai() -> Any:
            with SafetensorsStreamer() as s:
                s.stream_files([url], device="cpu")
                return {name: t for name, t in s.get_tensors()}
        return load_runai
    if row == "boto3":
        from concurrent.futures import ThreadPoolExecutor

        from safetensors.torch import load

        n = int(spec["setting"])
        client, pool, size = _boto3_client(ep, n), ThreadPoolExecutor(n), spec["size"]

        def load_boto3() -> Any:
            buf = bytearray(size)
            _boto3_ranged(client, pool, key, size, buf)
            return load(bytes(buf))
        return load_boto3
    raise ValueError(f"unknown checkpoint row {row!r}")


def _keep(batch: Any) -> Any:
    return batch


class _TarSamples:
    """Picklable transform of s3torchconnector's S3IterableDataset items: each S3Reader
    (one shard) becomes its samples, parsed with tarfile as a WebDataset pipeline does."""

    def __call__(self, reader: Any) -> Any:
        out = []
        with tarfile.open(fileobj=reader, mode="r|") as tf:
            for m in tf:
                if m.isfile():
                    f = tf.extractfile(m)
                    out.append((m.name.split(".", 1)[0], f.read() if f else b""))
        return out


class _ObjectSample:
    """Picklable transform of S3MapDataset items: (key, bytes) of one sample object."""

    def __call__(self, reader: Any) -> Any:
        return (reader.key.rsplit("/", 1)[-1].split(".", 1)[0], reader.read())


def __getattr__(name: str) -> Any:
    """``_Flatten``, made on first use (PEP 562) so that only the children that run a
    DataLoader import torch; a spawn worker unpickling it gets the same class."""
    if name != "_Flatten":
        raise AttributeError(name)
    import torch.utils.data as tud

    class _Flatten(tud.IterableDataset):  # type: ignore[misc]
        """The samples of each shard of an S3IterableDataset, one by one."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __iter__(self) -> Any:
            for shard in self.inner:
                yield from shard

    _Flatten.__module__ = __name__
    _Flatten.__qualname__ = "_Flatten"
    globals()["_Flatten"] = _Flatten
    return _Flatten


def _dataset(spec: Dict[str, Any]) -> Any:
    row, ep = spec["row"], spec["endpoint"]
    if row == "memtier":
        import memtier

        return memtier.TarShardDataset(spec.get("local_shards") or spec["shard_urls"])
    from s3torchconnector import S3ClientConfig, S3IterableDataset, S3MapDataset

    cfg = S3ClientConfig(force_path_style=True)
    if row == "s3torch_iterable":
        inner = S3IterableDataset.from_objects(spec["shard_urls"], region=REGION, endpoint=ep,
                                               transform=_TarSamples(), s3client_config=cfg,
                                               enable_sharding=True)
        return __getattr__("_Flatten")(inner)
    if row == "s3torch_map":
        return S3MapDataset.from_objects(spec["sample_urls"], region=REGION, endpoint=ep,
                                         transform=_ObjectSample(), s3client_config=cfg)
    raise ValueError(f"unknown dataset row {row!r}")


def _sample_kb(s: Any) -> tuple:
    """(key, payload bytes) of a sample of any of the datasets."""
    if isinstance(s, dict):
        return s["__key__"].rsplit("/", 1)[-1], s["bin"]
    return s[0].rsplit("/", 1)[-1], s[1]


def _epoch(dl: Any, expect: Dict[str, List[Any]]) -> Dict[str, Any]:
    """One epoch: seconds and payload bytes after the first batch of each worker (module
    doc), and the check."""
    t_first, nbytes, seen, bad = None, 0, 0, 0
    first_bytes = 0
    untimed = max(1, int(getattr(dl, "num_workers", 0) or 0))  # batches before the clock
    t_iter = time.perf_counter()
    for bi, batch in enumerate(dl):
        got = 0
        for s in batch:
            k, b = _sample_kb(s)
            mv = memoryview(b)
            want = expect.get(k)
            if want is None or mv.nbytes != want[0] or bytes(mv[:16]).hex() != want[1]:
                bad += 1
            got += mv.nbytes
            seen += 1
        if bi < untimed:
            first_bytes += got
            if bi == untimed - 1:
                t_first = time.perf_counter()
        else:
            nbytes += got
    t = time.perf_counter() - (t_first or time.perf_counter())
    bad += abs(len(expect) - seen)
    return {"seconds": t, "bytes": nbytes, "first_batch_bytes": first_bytes, "bad": bad,
            "startup_seconds": (t_first or t_iter) - t_iter}


def pretouch(nbytes: int) -> None:
    """Write one byte per page of `nbytes` of new anonymous memory, then unmap it (see the
    module doc, "Fair start"): the memory the next allocations of this process get is then
    memory the guest kernel has not yet handed back to the host."""
    if nbytes <= 0:
        return
    import mmap

    import numpy as np

    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # not shmem
    try:
        if hasattr(m, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
            m.madvise(mmap.MADV_HUGEPAGE)  # as the DRAM cache's arena and numpy's buffers are
        a = np.frombuffer(m, dtype=np.uint8)
        a[::4096] = 1
        del a
    finally:
        m.close()


def _worker_pretouch(nbytes: int, _worker_id: int) -> None:
    """DataLoader worker_init_fn (with functools.partial): pretouch in each worker."""
    pretouch(nbytes)


def run_job(spec: Dict[str, Any]) -> Dict[str, Any]:
    """One measurement: spec["loads"] loads of spec["case"] by spec["row"]; spec["pretouch"]
    bytes are pretouched right before the first load (its worker processes' share in each)."""
    out: Dict[str, Any] = {"row": spec["row"], "setting": spec.get("setting")}
    for k, v in (spec.get("setenv") or {}).items():  # read by Run:ai when a stream starts
        os.environ[k] = v
    try:
        case, loads = spec["case"], int(spec["loads"])
        times: List[float] = []
        check = None
        if case == "object":
            import numpy as np

            buf = np.empty(spec["size"], dtype=np.uint8)
            buf.fill(0)  # page faults outside the clock
            load = _object_loader(spec)
            out["label"] = getattr(load, "label", None)
            pretouch(int(spec.get("pretouch") or 0))
            for i in range(loads):
                t0 = time.perf_counter()
                load(buf)
                times.append(time.perf_counter() - t0)
                h = hashlib.sha1(buf).hexdigest()
                check = h if check in (None, h) else "differs between loads"
                buf.fill(0)
        elif case == "ckpt":
            load = _ckpt_loader(spec)
            pretouch(int(spec.get("pretouch") or 0))
            for i in range(loads):
                t0 = time.perf_counter()
                sd = load()
                times.append(time.perf_counter() - t0)
                if i == 0:
                    check = _ckpt_digest(sd)
                del sd
        elif case == "dataset":
            from torch.utils.data import DataLoader

            import functools

            t_build = time.perf_counter()
            ds = _dataset(spec)
            out["build_seconds"] = time.perf_counter() - t_build
            w = int(spec["workers"])
            touch = int(spec.get("pretouch") or 0)
            init = functools.partial(_worker_pretouch, touch // w) if w and touch else None
            dl = DataLoader(ds, batch_size=BATCH, shuffle=False, num_workers=w, collate_fn=_keep,
                            persistent_workers=w > 0, multiprocessing_context="spawn" if w else None,
                            worker_init_fn=init)
            if not w:
                pretouch(touch)
            expect = spec["expect"]
            epochs = [_epoch(dl, expect) for _ in range(loads)]
            del dl
            times = [e["seconds"] for e in epochs]
            out["bytes_timed"] = min(e["bytes"] for e in epochs)
            # end to end: the dataset's construction (MemTier's indexes the shards, which
            # fills its disk cache), the workers' start-up and the whole first epoch
            e0 = epochs[0]
            out["end_to_end_seconds"] = out["build_seconds"] + e0["startup_seconds"] + e0["seconds"]
            nbad = sum(e["bad"] for e in epochs)
            check = "ok" if not nbad else f"{nbad} bad samples"
        out["times"] = times
        out["check"] = check
    except BaseException as e:  # one line: the table shows it
        msg = " ".join(str(e).split())
        out["error"] = f"{type(e).__name__}: {msg}"[:400]
    return out


def child_main(jobs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The jobs of one child process in order, and MemTier's counters after them."""
    res = [run_job(j) for j in jobs]
    out: Dict[str, Any] = {"jobs": res}
    if any(j["row"] == "memtier" for j in jobs) and "memtier._ffi" in sys.modules:
        try:
            import memtier

            out["stats"] = {k: v for k, v in memtier.stats().as_dict().items() if isinstance(v, int) and v}
        except Exception as e:  # noqa: BLE001 (the counters are a note)
            out["stats_error"] = str(e)[:200]
    return out


def _ckpt_digest(sd: Dict[str, Any]) -> str:
    import torch

    h = hashlib.sha1()
    for k in sorted(sd):
        t = sd[k].contiguous()
        h.update(k.encode())
        h.update(str(t.dtype).encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


# ====================================================================== parent side


class Gateway:
    """versitygw on a free 127.0.0.1 port over a temp root; stopped by stop()."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.proc: Optional[subprocess.Popen] = None
        self.endpoint = ""

    def start(self) -> None:
        exe = os.environ.get("MEMTIER_VERSITYGW")
        if not exe:
            p = subprocess.run([os.path.join(ROOT, "scripts", "versitygw.sh")], capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"scripts/versitygw.sh failed: {p.stderr.strip()[-300:]}")
            exe = p.stdout.strip().splitlines()[-1]
        os.makedirs(os.path.join(self.root, BUCKET), exist_ok=True)
        last = ""
        for _ in range(3):  # a free port can be taken before versitygw binds it
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            # --keep-alive: without it versitygw closes every connection (runtime/remote tests)
            self.proc = subprocess.Popen([exe, "--access", ACCESS, "--secret", SECRET, "--port",
                                          f"127.0.0.1:{port}", "--quiet", "--keep-alive", "posix", self.root],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.endpoint = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    urllib.request.urlopen(self.endpoint + "/", timeout=1).close()
                    return
                except urllib.error.HTTPError:
                    return  # any HTTP answer: it is serving
                except OSError:
                    time.sleep(0.05)
            last = (self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else "")
            self.stop()
        raise SystemExit(f"versitygw did not start: {last.strip()[-300:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def dir_bytes(d: str) -> int:
    """Bytes of the regular files under d (what a disk cache directory holds)."""
    n = 0
    for base, _, files in os.walk(d):
        for f in files:
            try:
                n += os.lstat(os.path.join(base, f)).st_size
            except OSError:
                pass
    return n


def set_etag(path: str) -> str:
    """md5 of the file as its ETag, in the xattr versitygw serves (see the module doc)."""
    h = hashlib.md5()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(16 * MiB)
            if not b:
                break
            h.update(b)
    os.setxattr(path, "user.etag", h.hexdigest().encode())
    return h.hexdigest()


def sha1_file(path: str) -> str:
    h = hashlib.sha1()
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(16 * MiB)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def write_shards(bucket_dir: str, samples: int, shards: int, seed: int = 20261201) -> Dict[str, Any]:
    """`shards` tar shards of `samples` one-member samples (16-112 KiB of seeded random bytes,
    member ``<key>.bin``), and the same payloads as one object each under samples/."""
    import numpy as np

    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(bucket_dir, "shards"), exist_ok=True)
    os.makedirs(os.path.join(bucket_dir, "samples"), exist_ok=True)
    expect: Dict[str, List[Any]] = {}
    per = -(-samples // shards)
    names, total = [], 0
    for s in range(shards):
        name = f"shards/shard-{s:04d}.tar"
        names.append(name)
        with tarfile.open(os.path.join(bucket_dir, name), "w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(s * per, min(samples, (s + 1) * per)):
                key = f"s{i:07d}"
                data = rng.bytes(int(rng.integers(16 << 10, (112 << 10) + 1)))
                ti = tarfile.TarInfo(key + ".bin")
                ti.size, ti.mtime = len(data), 0
                tf.addfile(ti, io.BytesIO(data))
                p = os.path.join(bucket_dir, "samples", key + ".bin")
                with open(p, "wb") as f:
                    f.write(data)
                set_etag(p)
                expect[key] = [len(data), data[:16].hex()]
                total += len(data)
        set_etag(os.path.join(bucket_dir, name))
    return {"shards": names, "samples": sorted(expect), "expect": expect, "payload_bytes": total}


def run_child(jobs: List[Dict[str, Any]], env: Dict[str, str], timeout: float) -> Dict[str, Any]:
    try:
        # the jobs go on stdin: a dataset's expected samples are too long for one argument
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--_child"], input=json.dumps(jobs),
                           capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"TimeoutExpired: child ran over {timeout:.0f} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = " ".join((p.stderr or "").strip().splitlines()[-1:]) or f"exit status {p.returncode}"
    return {"error": f"child failed: {tail}"[:400]}


def versions() -> Dict[str, Optional[str]]:
    import importlib.metadata as md

    out = {}
    for name in PEER_VERSIONS + ("memtier",):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


class Bench:
    def __init__(self, args: argparse.Namespace, gw: Gateway, tmp: str) -> None:
        self.args, self.gw, self.tmp = args, gw, tmp
        self.base_env = dict(os.environ)
        for k in list(self.base_env):  # the run's own AWS settings only
            if k.startswith("AWS_"):
                del self.base_env[k]
        self.base_env.update(AWS_ENDPOINT_URL=gw.endpoint, AWS_ACCESS_KEY_ID=ACCESS,
                             AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION=REGION, AWS_DEFAULT_REGION=REGION,
                             AWS_EC2_METADATA_DISABLED="true",
                             RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0",
                             RUNAI_STREAMER_LOG_LEVEL="WARNING", RUNAI_STREAMER_DIST="0",
                             # the DRAM cache holds the whole object (reads over 16 MiB bypass it
                             # by default) in every MemTier row, remote and local alike
                             MEMTIER_CACHE_BYTES=str(args.cache_bytes),
                             MEMTIER_CACHE_ADMIT_MAX_BYTES=str(args.cache_bytes),
                             MEMTIER_DISK_CACHE_BYTES=str(args.disk_cache_bytes))
        self.base_env.pop("MEMTIER_DISK_CACHE_DIR", None)
        self.disk_dirs = 0
        self.bad: List[str] = []

    def env(self, disk_dir: Optional[str] = None, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        e = dict(self.base_env)
        if disk_dir:
            e["MEMTIER_DISK_CACHE_DIR"] = disk_dir
        e.update(extra or {})
        return e

    def new_disk_dir(self) -> str:
        self.disk_dirs += 1
        d = os.path.join(self.tmp, f"disk-cache-{self.disk_dirs}")
        os.makedirs(d)
        return d

    def run(self, jobs: List[Dict[str, Any]], env: Dict[str, str], want: Any,
            what: Sequence[str], case: str = "") -> List[Dict[str, Any]]:
        """Run `jobs` in one child; each result gets its label, the child's MemTier counters
        and wrong_bytes when its check differs from `want`."""
        jobs = [dict(j, endpoint=self.gw.endpoint) for j in jobs]
        r = run_child(jobs, env, self.args.timeout)
        res = r.get("jobs") or [{"row": j["row"], "setting": j.get("setting"), "error": r.get("error", "?")}
                                for j in jobs]
        for x, label, j in zip(res, what, jobs):
            x["label"] = x.get("label") or label
            x["workers"] = j.get("workers")
            x["stats"] = r.get("stats")
            if "error" not in x and want is not None and x.get("check") != want:
                self.bad.append(f"{label}: {x.get('check')}")
                x["wrong_bytes"] = True
            shown = (" ".join(f"{t:.3f}" for t in x["times"]) + " s") if x.get("times") else \
                x.get("error", "")[:160]
            log(f"  {case} {label}: {shown}")
        return res

    # ---- one case: the peers, then MemTier first / disk + DRAM / local + DRAM

    def case(self, case: str, spec: Dict[str, Any], nbytes: int, want: Any,
             peer_groups: Sequence[Sequence[tuple]], local_spec: Dict[str, Any],
             memtier_variants: Sequence[Dict[str, Any]] = ({},), tier_runs: Optional[int] = None
             ) -> Dict[str, Any]:
        """peer_groups: per child, (row, setting, label, extra job keys) tuples.
        memtier_variants: job keys per MemTier measurement (e.g. workers); each first load
        is its own child with an empty disk cache; then, tier_runs times, a disk-cache child
        and a local-file child per variant, each 1 + runs loads (first: disk cache / local
        file, then DRAM), in the order A B, then B A (module doc, "Fair start")."""
        runs = self.args.runs
        tier_runs = runs if tier_runs is None else tier_runs
        res: Dict[str, Any] = {"bytes": nbytes, "peers": [], "memtier": {}}
        for group in ([] if self.args.memtier_only else peer_groups):
            jobs = [dict(spec, row=row, setting=setting, loads=runs, **extra) for row, setting, _, extra in group]
            res["peers"] += self.run(jobs, self.env(), want, [label for _, _, label, _ in group], case)
        mt: Dict[str, Any] = {}
        touch = int(self.args.pretouch * nbytes)
        for vi, var in enumerate(memtier_variants):
            tag = var.get("tag", "")
            first, last_dir = [], None
            for i in range(runs):
                last_dir = self.new_disk_dir()
                first += self.run([dict(spec, row="memtier", loads=1, pretouch=touch, **var)], self.env(last_dir), want,
                                  [f"{case}{tag} memtier first (run {i + 1})"])
            mt[vi] = {"first": first, "dir": last_dir, "tiers": [], "local": [],
                      "dir_bytes": dir_bytes(last_dir) if last_dir else None}
        for i in range(tier_runs):
            for vi, var in enumerate(memtier_variants):
                tag = var.get("tag", "")
                sides = [("tiers", dict(spec, row="memtier", loads=1 + runs, pretouch=touch, **var),
                          mt[vi]["dir"], f"{case}{tag} memtier disk cache, then DRAM (run {i + 1})"),
                         ("local", dict(spec, row="memtier", loads=1 + runs, pretouch=touch, **var, **local_spec),
                          self.new_disk_dir(), f"{case}{tag} memtier local file, then DRAM (run {i + 1})")]
                if i % 2:  # A B, B A, ...: neither side always starts right after the other
                    sides.reverse()
                for side, job, ddir, label in sides:
                    mt[vi][side] += self.run([job], self.env(ddir), want, [label])
        res["memtier"] = [mt[vi] for vi in range(len(memtier_variants))]
        return res


def best_rate(results: Sequence[Dict[str, Any]], nbytes: int, which: str = "all") -> Optional[float]:
    """Best MB/s over the jobs' loads: "all", "first" (the first load of each job) or "rest"
    (the loads after it)."""
    rates = []
    for r in results:
        if "error" in r or r.get("wrong_bytes") or not r.get("times"):
            continue
        ts = {"all": r["times"], "first": r["times"][:1], "rest": r["times"][1:]}[which]
        b = r.get("bytes_timed") or nbytes
        rates += [b / t / MB for t in ts if t > 0]
    return max(rates) if rates else None


def first_error(results: Sequence[Dict[str, Any]]) -> Optional[str]:
    for r in results:
        if "error" in r:
            return r["error"]
    return None


def disk_hit_bytes(results: Sequence[Dict[str, Any]]) -> Optional[int]:
    """Bytes MemTier's counters report as disk-cache hits (None: no such counter)."""
    found = None
    for r in results:
        for k, v in (r.get("stats") or {}).items():
            if "disk" in k and "hit" in k:
                found = (found or 0) + v
    return found


def summarize(name: str, res: Dict[str, Any], vi: int = 0, workers: Optional[int] = None) -> Dict[str, Any]:
    n = res["bytes"]
    peers = []
    for p in res["peers"]:
        if p["row"] in ("local_preadv", "memtier") or (workers is not None and p.get("workers") != workers):
            continue  # a reference or MemTier itself, not a peer
        peers.append({"label": p["label"], "setting": p.get("setting"), "mbps": best_rate([p], n),
                      "error": p.get("error"), "wrong_bytes": p.get("wrong_bytes", False)})
    m = res["memtier"][vi]
    out: Dict[str, Any] = {
        "case": name, "bytes": n, "peers": peers,
        "memtier_first": best_rate(m["first"], n, "first"), "memtier_first_error": first_error(m["first"]),
        "memtier_disk": best_rate(m["tiers"], n, "first"), "memtier_dram": best_rate(m["tiers"], n, "rest"),
        "memtier_tiers_error": first_error(m["tiers"]),
        "local_first": best_rate(m["local"], n, "first"), "local_dram": best_rate(m["local"], n, "rest"),
        "local_error": first_error(m["local"]),
        "disk_cache_hit_bytes": disk_hit_bytes(m["tiers"]), "disk_cache_dir_bytes": m.get("dir_bytes"),
        "memtier_stats": {k: (m[k][0].get("stats") if m[k] else None) for k in ("first", "tiers", "local")},
    }
    loc = [p for p in res["peers"] if p["row"] == "local_preadv"]
    out["local_preadv"] = best_rate(loc, n) if loc else None
    ok = [p for p in peers if p["mbps"]]
    bp = max(ok, key=lambda p: p["mbps"]) if ok else None
    out["best_peer"] = bp
    nc = [p for p in res["peers"] if p["row"] == "memtier"]
    out["memtier_nocache"] = best_rate(nc, n) if nc else None
    cands = ok + ([{"label": "memtier", "mbps": out["memtier_first"]}] if out["memtier_first"] else [])
    cands += [{"label": NOCACHE_LABEL, "mbps": out["memtier_nocache"]}] if out["memtier_nocache"] else []
    out["server_ceiling"] = max(cands, key=lambda p: p["mbps"]) if cands else None

    def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return a / b if a and b else None

    def e2e(results: Sequence[Dict[str, Any]]) -> Optional[float]:
        r = [n / x["end_to_end_seconds"] / MB for x in results
             if x.get("end_to_end_seconds") and "error" not in x and not x.get("wrong_bytes")]
        return max(r) if r else None

    peer_jobs = [p for p in res["peers"] if p["row"] not in ("local_preadv", "memtier")
                 and (workers is None or p.get("workers") == workers)]
    out["end_to_end"] = {"memtier_first": e2e(m["first"]), "best_peer": e2e(peer_jobs)}
    out["ratios"] = {"first_vs_best_peer": ratio(out["memtier_first"], bp["mbps"] if bp else None),
                     "nocache_vs_best_peer": ratio(out["memtier_nocache"], bp["mbps"] if bp else None),
                     "disk_vs_local": ratio(out["memtier_disk"], out["local_first"]),
                     "dram_remote_vs_dram_local": ratio(out["memtier_dram"], out["local_dram"])}
    return out


def fmt(v: Optional[float]) -> str:
    return f"{v:.0f}" if v else "-"


def fmt_r(v: Optional[float], target: float) -> str:
    return f"{v:.2f}x ({'met' if v >= target else 'MISSED'})" if v else "n/a"


def print_report(rep: Dict[str, Any]) -> None:
    v = rep["versions"]
    print(f"bench_remote: versitygw on loopback, {rep['cpus']} CPUs; best of {rep['runs']} run(s); "
          f"MB/s = 10^6 bytes/s")
    print("  versions: " + ", ".join(f"{k} {v[k] or '-'}" for k in v))
    errors: Dict[str, str] = {}

    def err(e: Optional[str]) -> str:
        if not e:
            return ""
        if e not in errors:
            errors[e] = f"[{len(errors) + 1}]"
        return "error " + errors[e]

    for s in rep["summary"]:
        print(f"\n== {s['title']} ({s['bytes'] / MB:.0f} MB)")
        rows = []
        for p in s["peers"]:
            rows.append([p["label"], fmt(p["mbps"]), err(p["error"]) or ("wrong bytes" if p["wrong_bytes"] else "")])
        disk = s["disk_cache_hit_bytes"]
        held = s.get("disk_cache_dir_bytes")
        served = (f"disk-cache hits {disk / MB:.0f} MB" if disk is not None else
                  "no disk-cache counter in memtier.stats()")
        if held is not None:
            served += f"; the cache dir held {held / MB:.0f} MB after the first load"
        rows.append(["memtier first load (remote, empty disk cache)", fmt(s["memtier_first"]),
                     err(s["memtier_first_error"])])
        if s.get("memtier_nocache"):
            rows.append([NOCACHE_LABEL, fmt(s["memtier_nocache"]), ""])
        rows.append(["memtier 2nd process (disk cache)", fmt(s["memtier_disk"]),
                     err(s["memtier_tiers_error"]) or served])
        rows.append(["memtier 3rd load, same process (DRAM)", fmt(s["memtier_dram"]), ""])
        rows.append(["memtier local file (page cache)", fmt(s["local_first"]), err(s["local_error"])])
        rows.append(["memtier local file, DRAM hit", fmt(s["local_dram"]), ""])
        if s.get("local_preadv"):
            rows.append(["local os.preadv of the bucket file (reference)", fmt(s["local_preadv"]), ""])
        print(_peers.table(["row", "MB/s", "note"], rows))
        r = s["ratios"]
        bp, ceil = s["best_peer"], s["server_ceiling"]
        print(f"  memtier first / best peer ({bp['label'] if bp else '-'}): "
              f"{fmt_r(r['first_vs_best_peer'], TARGETS['first'])}, target >= {TARGETS['first']}x")
        if r.get("nocache_vs_best_peer"):
            print(f"  memtier first with no disk or DRAM cache / best peer: {r['nocache_vs_best_peer']:.2f}x "
                  "(the cost of filling the disk cache is the gap to the row above)")
        print(f"  disk-cache run / local file: {fmt_r(r['disk_vs_local'], TARGETS['disk'])}, "
              f"target >= {TARGETS['disk']}x")
        print(f"  DRAM hit remote / DRAM hit local: {fmt_r(r['dram_remote_vs_dram_local'], TARGETS['dram'])}, "
              f"target >= {TARGETS['dram']}x")
        e2 = s.get("end_to_end") or {}
        if e2.get("memtier_first"):
            print(f"  end to end (dataset construction + worker start-up + first epoch, payload MB/s): "
                  f"memtier first {fmt(e2['memtier_first'])}, best peer {fmt(e2.get('best_peer'))}"
                  " (MemTier's construction indexes the shards through the disk tier, which fetches them)")
        if ceil:
            print(f"  server ceiling (fastest client at its best setting): {ceil['mbps']:.0f} MB/s ({ceil['label']})")
    if errors:
        print("\nerrors:")
        for e, tag in errors.items():
            print(f"  {tag} {e}")
    if rep["wrong_bytes"]:
        print("\nWRONG BYTES:\n" + "\n".join("  " + b for b in rep["wrong_bytes"]))


def report_rows(rep: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Rows for scripts/bench_report.py: key, row, memtier, base, unit, ratio, available, note."""
    out = []
    for s in rep["summary"]:
        c = s["case"]
        bp = s["best_peer"]
        ceil = s["server_ceiling"]
        note = (f"server ceiling {ceil['mbps']:.0f} MB/s ({ceil['label']})" if ceil else "")
        if s.get("memtier_nocache") and s["ratios"].get("nocache_vs_best_peer"):
            note += f"; no disk or DRAM cache {s['memtier_nocache']:.0f} MB/s = {s['ratios']['nocache_vs_best_peer']:.2f}x"
        first_m, first_b, first_r = s["memtier_first"], bp["mbps"] if bp else None, s["ratios"]["first_vs_best_peer"]
        e2e = s.get("end_to_end") or {}
        if e2e.get("memtier_first") and e2e.get("best_peer"):
            # A dataset's first load is judged end to end (construction, worker start-up and
            # the whole first epoch): a TarShardDataset of URLs fetches its shards while it
            # indexes them, before the epoch's clock starts, so the epoch alone reads the disk cache.
            note = "; ".join(x for x in (note, f"epoch only (clock from the workers' first batches): memtier "
                                                f"{fmt(first_m)} MB/s vs {fmt(first_b)} = "
                                                f"{(first_r or 0):.2f}x") if x)
            first_m, first_b = e2e["memtier_first"], e2e["best_peer"]
            first_r = first_m / first_b
        specs = [
            (f"remote_{c}_first_vs_best_peer", f"{s['title']}: first load vs best peer", first_m,
             first_b, first_r, TARGETS["first"],
             bp["label"] if bp else "best peer", s["memtier_first_error"] or ("no peer ran" if not bp else ""),
             note),
            (f"remote_{c}_disk_vs_local", f"{s['title']}: 2nd process (disk cache) vs local file",
             s["memtier_disk"], s["local_first"], s["ratios"]["disk_vs_local"], TARGETS["disk"],
             "memtier local file", s["memtier_tiers_error"] or s["local_error"], ""),
            (f"remote_{c}_dram_vs_local_dram", f"{s['title']}: DRAM hit remote vs DRAM hit local",
             s["memtier_dram"], s["local_dram"], s["ratios"]["dram_remote_vs_dram_local"], TARGETS["dram"],
             "memtier local DRAM hit", s["memtier_tiers_error"] or s["local_error"], ""),
        ]
        for key, name, m, b, ratio, target, blabel, err, nt in specs:
            out.append({"key": key, "row": name, "memtier": m, "base": b, "unit": "MB/s", "ratio": ratio,
                        "target": target, "baseline_label": blabel, "available": ratio is not None,
                        "note": (err or nt or "")[:300]})
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=512 * MiB, help="object bytes (default 512 MiB)")
    ap.add_argument("--ckpt-size", type=int, default=512 * 10**6, help="checkpoint bytes (default 512 MB)")
    ap.add_argument("--samples", type=int, default=4096, help="dataset samples (16-112 KiB each; default 4096)")
    ap.add_argument("--shards", type=int, default=8, help="tar shards (default 8)")
    ap.add_argument("--runs", type=int, default=2, help="runs per row; the best is reported (default 2)")
    ap.add_argument("--threads", default="8,16,32", help="boto3 threads / obstore parts in flight / "
                    "Run:ai concurrency tried (default 8,16,32)")
    ap.add_argument("--cases", default="object,ckpt,dataset", help="subset of object,ckpt,dataset")
    ap.add_argument("--workers", default="0,2", help="DataLoader num_workers (default 0,2)")
    ap.add_argument("--cache-bytes", type=int, default=2 << 30, help="MemTier DRAM cache (default 2 GiB)")
    ap.add_argument("--disk-cache-bytes", type=int, default=4 << 30, help="disk cache budget (default 4 GiB)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per child (default 300)")
    ap.add_argument("--pretouch", type=float, default=2.0, help="memory pretouched and freed by each "
                    "MemTier child (first load, disk cache, local file) before its clock, in multiples of the load's bytes "
                    "(default 2; 0: off; see 'Fair start' in the module doc)")
    ap.add_argument("--memtier-only", action="store_true", help="skip the peers' rows (the disk-cache and "
                    "DRAM rows only; first-load ratios print n/a)")
    ap.add_argument("--quick", action="store_true", help="64 MiB object and checkpoint, 512 samples, 1 run")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        print(RESULT_TAG + json.dumps(child_main(json.loads(sys.stdin.read()))), flush=True)
        return 0
    if args.quick:
        args.size, args.ckpt_size, args.samples, args.shards, args.runs = 64 * MiB, 64 * 10**6, 512, 4, 1
        args.threads = "16"
    threads = [int(x) for x in args.threads.split(",") if x.strip()]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in ("object", "ckpt", "dataset"):
            ap.error(f"--cases: unknown case {c!r}")
    workers = [int(x) for x in args.workers.split(",") if x.strip()]

    tmp = tempfile.mkdtemp(prefix="memtier_bench_remote_")
    for sig in (signal.SIGTERM, signal.SIGHUP):  # unwind like Ctrl-C: the finally stops versitygw
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    gw = Gateway(os.path.join(tmp, "root"))
    t_start = time.monotonic()
    summary: List[Dict[str, Any]] = []
    b: Optional[Bench] = None
    try:
        need = args.size + args.ckpt_size + 2 * args.samples * (112 << 10) + 2 * (args.size + args.ckpt_size)
        _peers.require_disk(tmp, need * 1.2, need, None)
        gw.start()
        log(f"bench_remote: versitygw serving on a loopback port (bucket {BUCKET!r} in a temp dir)")
        bdir = os.path.join(gw.root, BUCKET)
        b = Bench(args, gw, tmp)
        if "object" in cases:
            obj = os.path.join(bdir, "obj.bin")
            _peers.write_random_file(obj, args.size)
            set_etag(obj)
            want = sha1_file(obj)
            spec = {"case": "object", "key": "obj.bin", "size": args.size}
            light = [("boto3", str(n), f"boto3 get_object Range 8 MiB, {n} threads", {}) for n in threads]
            light += [("obstore_get", None, "obstore get (one stream)", {})]
            light += [("obstore", str(n), f"obstore get_range_async 8 MiB, {n} in flight", {}) for n in threads]
            light += [("local_preadv", None, "local os.preadv of the bucket file (page cache)", {"local": obj})]
            light += [("memtier", None, NOCACHE_LABEL, {"setenv": {"MEMTIER_CACHE": "0"}})]
            torchy = [("s3torch", None, "s3torchconnector S3Reader (CRT)", {})]
            torchy += [("runai", str(n), f"runai FileStreamer, concurrency {n}",
                        {"setenv": {"RUNAI_STREAMER_CONCURRENCY": str(n)}}) for n in threads]
            res = b.case("object", spec, args.size, want, [light, torchy], {"local": obj})
            s = summarize("object", res)
            s["title"] = "a. object into host memory"
            summary.append(s)
            os.unlink(obj)
        if "ckpt" in cases:
            ck = os.path.join(bdir, "ckpt.safetensors")
            _peers.write_checkpoint(ck, args.ckpt_size)
            set_etag(ck)
            from safetensors.torch import load_file

            want = _ckpt_digest(load_file(ck))
            size = os.path.getsize(ck)
            spec = {"case": "ckpt", "key": "ckpt.safetensors", "size": size}
            group = [("runai", str(n), f"runai SafetensorsStreamer, concurrency {n}",
                      {"setenv": {"RUNAI_STREAMER_CONCURRENCY": str(n)}}) for n in (8, 16)]
            group += [("boto3", "16", "boto3 16 threads + safetensors.torch.load", {})]
            group += [("memtier", None, NOCACHE_LABEL, {"setenv": {"MEMTIER_CACHE": "0"}})]
            res = b.case("ckpt", spec, size, want, [group], {"local": ck})
            s = summarize("ckpt", res)
            s["title"] = "b. safetensors checkpoint load_file"
            summary.append(s)
            os.unlink(ck)
        if "dataset" in cases:
            info = write_shards(bdir, args.samples, args.shards)
            spec = {"case": "dataset", "expect": info["expect"],
                    "shard_urls": [f"s3://{BUCKET}/{n}" for n in info["shards"]],
                    "sample_urls": [f"s3://{BUCKET}/samples/{k}.bin" for k in info["samples"]]}
            local_shards = [os.path.join(bdir, n) for n in info["shards"]]
            group = []
            for w in workers:
                group += [("s3torch_iterable", None, f"s3torchconnector S3IterableDataset + tarfile, {w} workers",
                           {"workers": w}),
                          ("s3torch_map", None, f"s3torchconnector S3MapDataset (object per sample), {w} workers",
                           {"workers": w})]
            variants = [{"workers": w, "tag": f" w{w}"} for w in workers]
            res = b.case("dataset", spec, info["payload_bytes"], "ok", [group], {"local_shards": local_shards},
                         variants)
            for vi, w in enumerate(workers):
                s = summarize(f"dataset_w{w}", res, vi, w)
                s["title"] = f"c. DataLoader epoch over tar shards, {w} workers"
                summary.append(s)
    finally:
        gw.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rep = {"benchmark": "bench_remote", "cpus": os.cpu_count(), "runs": args.runs, "versions": versions(),
           "seconds": round(time.monotonic() - t_start, 1), "targets": TARGETS, "summary": summary,
           "wrong_bytes": b.bad if b else []}
    rep["rows"] = report_rows(rep)
    rep["ok"] = not rep["wrong_bytes"]
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print_report(rep)
        print(f"\n({rep['seconds']:.0f} s)")
    return 1 if rep["wrong_bytes"] else 0


if __name__ == "__main__":
    sys.exit(main())
