"""s3:// URLs through every Python API that takes a path (issue 13, part 1),
against versitygw, a real S3 gateway (SigV4, 206 for Range), started on
127.0.0.1 by this module and stopped by it: read_into_tensor, load_tensor,
load_chunks / iter_chunks, memtier.safetensors.load_file / safe_open /
load_model / load_into (one file and a sharded index), MemTierDataset and
TarShardDataset. Each result is compared with the same file read locally
(and load_file with the reference safetensors package).

The gateway binary comes from scripts/versitygw.sh (MEMTIER_VERSITYGW when
set), which installs it into a cache outside the clone the first time.

Each case runs in a fresh interpreter (this file run as a script: ``python
test_remote_apis.py CASE BUCKET_DIR WORK_DIR``) with the AWS_* environment
pointing at the gateway: the Go runtime of libmemtier.so takes its copy of
the environment when the library is loaded, so a variable set later by
os.environ is never seen by the remote client, and other test modules may
have loaded the library already."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request

import numpy as np
import pytest

import memtier
import memtier.safetensors as mst
from conftest import REPO, pbytes  # as a script too: its folder is on sys.path

ACCESS, SECRET, BUCKET = "memtier-py-access", "memtier-py-secret-Tq7nVb2", "bkt"
DATA = pbytes(0, 3 * 1024 * 1024 + 4567)


def _gateway_binary() -> str:
    b = os.environ.get("MEMTIER_VERSITYGW")
    if b:
        return b
    r = subprocess.run(["bash", os.path.join(REPO, "scripts", "versitygw.sh")],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        pytest.fail("scripts/versitygw.sh failed: %s" % r.stderr[-2000:])
    return r.stdout.strip()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """(bucket directory, url(name)) of a running versitygw; the AWS_*
    environment points the library's client at it while the module runs."""
    root = tmp_path_factory.mktemp("vgw")
    bucket = root / BUCKET
    bucket.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([_gateway_binary(), "--access", ACCESS, "--secret", SECRET,
                             "--port", "127.0.0.1:%d" % port, "--quiet", "--keep-alive",
                             "posix", str(root)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=1)
                break
            except urllib.error.HTTPError:
                break  # any HTTP answer: it is up
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("versitygw did not start: %s" % proc.stdout.read().decode(errors="replace"))
                time.sleep(0.05)
        env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:%d" % port, "AWS_ACCESS_KEY_ID": ACCESS,
               "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}
        yield bucket, env
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _in_child(s3, tmp_path, case):
    """Run case ``case`` in a fresh interpreter against the gateway."""
    bucket, aws = s3
    env = {k: v for k, v in os.environ.items()
           if k not in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3")}
    env.update(aws)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), case, str(bucket), str(tmp_path)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), (
        "case %s: rc %d\nstdout: %s\nstderr: %s" % (case, r.returncode, r.stdout[-3000:], r.stderr[-6000:]))


def _put(s3, tmp_path, name, data):
    """Store data as object name and as a local file; (url, local path).
    In a case, ``s3`` is (bucket directory, url(name))."""
    bucket, url = s3
    (bucket / name).write_bytes(data)
    local = tmp_path / name
    local.write_bytes(data)
    return url(name), str(local)


def _case_tensor_reads(s3, tmp_path, ctx):
    url, local = _put(s3, tmp_path, "data.bin", DATA)
    out = np.empty(1 << 20, dtype=np.uint8)
    memtier.read_into_tensor(url, 12345, out, ctx=ctx)
    assert out.tobytes() == DATA[12345:12345 + (1 << 20)]
    t = memtier.load_tensor(url, 4096, (256, 1024), "float32", ctx=ctx)
    ref = memtier.load_tensor(local, 4096, (256, 1024), "float32", ctx=ctx)
    assert tuple(t.shape) == (256, 1024) and np.asarray(t).tobytes() == np.asarray(ref).tobytes()
    assert np.asarray(t).tobytes() == DATA[4096:4096 + 256 * 1024 * 4]
    with pytest.raises(memtier.NotFoundError, match="bkt/nope.bin"):
        memtier.load_tensor(s3[1]("nope.bin"), 0, 4, "uint8", ctx=ctx)


def _case_readv_urls_and_local(s3, tmp_path, ctx):
    url, local = _put(s3, tmp_path, "data.bin", DATA)
    ranges = np.array([[5, 4096], [1 << 20, 2 << 20], [len(DATA) - 7, 7]], dtype=np.uint64)
    got = ctx.readv(url, ranges)  # the ranges back to back
    ref = ctx.readv(local, ranges)
    assert bytes(got) == bytes(ref) == b"".join(DATA[o:o + n] for o, n in ranges.tolist())
    outs = [bytearray(n) for _, n in ranges.tolist()]
    ctx.readv(url, ranges, out=outs)
    assert [bytes(o) for o in outs] == [DATA[o:o + n] for o, n in ranges.tolist()]


def _case_chunks(s3, tmp_path, ctx):
    url, local = _put(s3, tmp_path, "data.bin", DATA)
    chunks = [(0, 1000), (1000, 3000), (100000, 2 * 1024 * 1024 + 17), (50, 10), (len(DATA) - 1, 1), (7, 0)]
    got = memtier.load_chunks(url, chunks, ctx=ctx)
    ref = memtier.load_chunks(local, chunks, ctx=ctx)
    assert [bytes(g) for g in got] == [bytes(r) for r in ref] == [DATA[o:o + n] for o, n in chunks]
    seen = {}
    with memtier.iter_chunks(url, chunks, ctx=ctx) as stream:
        for i, buf in stream:
            seen[i] = bytes(buf)
    assert seen == {i: DATA[o:o + n] for i, (o, n) in enumerate(chunks)}
    with pytest.raises(memtier.EndOfFileError):
        memtier.load_chunks(url, [(len(DATA) - 5, 10)], ctx=ctx)
    with pytest.raises(memtier.NotFoundError, match="bkt/nope.bin"):
        memtier.load_chunks(s3[1]("nope.bin"), [(0, 10)], ctx=ctx)


def _checkpoint():
    """A safetensors file (reference writer) of a few dtypes and shapes,
    with a header larger than the 64 KiB a remote open fetches."""
    from safetensors.numpy import save

    rng = np.random.default_rng(7)
    tensors = {
        "w": rng.standard_normal((512, 600)).astype(np.float32),
        "b": rng.standard_normal(600).astype(np.float16),
        "ids": np.arange(1000, dtype=np.int64).reshape(10, 100),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    meta = {"pad": "p" * (100 << 10)}
    return save(tensors, metadata=meta), tensors


def _case_safetensors(s3, tmp_path, ctx):
    blob, tensors = _checkpoint()
    url, local = _put(s3, tmp_path, "m.safetensors", blob)
    got = mst.load_file(url, framework="np", ctx=ctx)
    from safetensors.numpy import load_file as ref_load

    ref = ref_load(local)
    assert list(got) == list(mst.load_file(local, framework="np", ctx=ctx))
    assert set(got) == set(ref) == set(tensors)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and got[k].shape == ref[k].shape
        assert got[k].tobytes() == ref[k].tobytes()
    with mst.safe_open(url, framework="np", ctx=ctx) as f:
        assert sorted(f.keys()) == sorted(tensors)
        assert f.metadata() == {"pad": "p" * (100 << 10)}
        assert f.get_tensor("ids").tobytes() == tensors["ids"].tobytes()
        assert f.get_slice("w")[3:5].tobytes() == tensors["w"][3:5].tobytes()
    with pytest.raises(memtier.NotFoundError, match="bkt/nope.safetensors"):
        mst.load_file(s3[1]("nope.safetensors"), framework="np", ctx=ctx)


def _case_safetensors_load_model_sharded(s3, tmp_path, ctx):
    torch = pytest.importorskip("torch")
    if memtier._dtypes.torch_disabled():
        pytest.skip("MEMTIER_PY_FORCE_NO_TORCH is set")
    from safetensors.torch import save

    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    first = {k: v for k, v in sd.items() if k.startswith("0.")}
    second = {k: v for k, v in sd.items() if k.startswith("1.")}
    _put(s3, tmp_path, "a.safetensors", save(first))
    _put(s3, tmp_path, "b.safetensors", save(second))
    index = {"weight_map": {**{k: "a.safetensors" for k in first}, **{k: "b.safetensors" for k in second}}}
    url, _ = _put(s3, tmp_path, "model.safetensors.index.json", json.dumps(index).encode())
    fresh = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))
    missing, unexpected = mst.load_model(fresh, url, ctx=ctx)
    assert not missing and not unexpected
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, sd[k]), k
    one_url, _ = _put(s3, tmp_path, "one.safetensors", save(sd))
    fresh = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))
    mst.load_model(fresh, one_url, ctx=ctx)
    assert all(torch.equal(v, sd[k]) for k, v in fresh.state_dict().items())


def _samples(ds):
    return [bytes(np.asarray(ds[i])) for i in range(len(ds))]


def _case_memtier_dataset(s3, tmp_path, ctx):
    data_url, data_local = _put(s3, tmp_path, "d.bin", DATA)
    index = b"0 10\n10 20\n500 0\n900 100\n100000 2097152\n"
    idx_url, idx_local = _put(s3, tmp_path, "d.idx", index)
    want = [DATA[0:10], DATA[10:30], b"", DATA[900:1000], DATA[100000:100000 + 2097152]]
    ref = memtier.MemTierDataset(idx_local, data_local)
    assert _samples(ref) == want
    for i, d in [(idx_url, data_url), (idx_local, data_url), (idx_url, data_local)]:
        ds = memtier.MemTierDataset(i, d)
        try:
            assert ds.data_size == len(DATA) and ds.index_file == (i if "://" in i else os.path.abspath(i))
            assert np.array_equal(ds.ranges, ref.ranges)
            assert _samples(ds) == want
            assert [bytes(np.asarray(s)) for s in ds.__getitems__([4, 1, 3, 0])] == [want[4], want[1], want[3], want[0]]
        finally:
            ds.close()
    ref.close()
    (s3[0] / "bad.idx").write_bytes(b"0 10\n990 20 x\n")
    with pytest.raises(memtier.FormatError, match="line 2"):
        memtier.MemTierDataset(s3[1]("bad.idx"), data_url)
    with pytest.raises(memtier.NotFoundError, match="bkt/nope.bin"):
        memtier.MemTierDataset(idx_url, s3[1]("nope.bin"))


def _shard(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, body in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(body)
            tf.addfile(ti, io.BytesIO(body))
    return buf.getvalue()


def _case_tar_shard_dataset(s3, tmp_path, ctx):
    members = []
    for k in range(30):  # more than a 1 MiB metadata window of headers
        members += [("s%03d.jpg" % k, pbytes(k * 1000, 60000)), ("s%03d.cls" % k, b"%d" % k)]
    blob1 = _shard(members[:40])
    blob2 = _shard(members[40:])
    u1, l1 = _put(s3, tmp_path, "shard-0.tar", blob1)
    u2, l2 = _put(s3, tmp_path, "shard-1.tar", blob2)
    ref = memtier.TarShardDataset([l1, l2])
    ds = memtier.TarShardDataset([u1, u2])
    try:
        assert len(ds) == len(ref) == 30
        for i in range(30):
            a, b = ds[i], ref[i]
            assert a["__url__"] == (u1 if i < 20 else u2)
            assert {k: v for k, v in a.items() if k != "__url__"} == {k: v for k, v in b.items() if k != "__url__"}
            assert a["jpg"] == pbytes(i * 1000, 60000) and a["cls"] == b"%d" % i
        batch = ds.__getitems__([29, 0, 17])
        assert [s["__key__"] for s in batch] == ["s029", "s000", "s017"]
    finally:
        ds.close()
        ref.close()
    with pytest.raises(memtier.NotFoundError, match="bkt/nope.tar"):
        memtier.TarShardDataset([s3[1]("nope.tar")])
    # URL shards are opened in parallel threads: the error raised is the first
    # missing shard's in list order, whichever open failed first.
    with pytest.raises(memtier.NotFoundError, match="bkt/nope-a.tar") as ei:
        memtier.TarShardDataset([u1, s3[1]("nope-a.tar"), u2, s3[1]("nope-b.tar")])
    assert "nope-b" not in str(ei.value)
    with pytest.raises(ValueError, match="pipe: spec or a URL of a scheme"):
        memtier.TarShardDataset(["ftp://host/x.tar"])


# -- the tests: one fresh interpreter per case ---------------------------------


def test_tensor_reads(s3, tmp_path):
    _in_child(s3, tmp_path, "tensor_reads")


def test_readv_urls_and_local(s3, tmp_path):
    _in_child(s3, tmp_path, "readv_urls_and_local")


def test_chunks(s3, tmp_path):
    _in_child(s3, tmp_path, "chunks")


def test_safetensors(s3, tmp_path):
    _in_child(s3, tmp_path, "safetensors")


def test_safetensors_load_model_sharded(s3, tmp_path):
    pytest.importorskip("torch")  # the no-torch pass hides torch from the child too
    _in_child(s3, tmp_path, "safetensors_load_model_sharded")


def test_memtier_dataset(s3, tmp_path):
    _in_child(s3, tmp_path, "memtier_dataset")


def test_tar_shard_dataset(s3, tmp_path):
    _in_child(s3, tmp_path, "tar_shard_dataset")


def _main(argv):
    """Run case argv[1] with bucket directory argv[2] and work folder argv[3]."""
    import pathlib

    case = globals()["_case_" + argv[1]]
    bucket, work = pathlib.Path(argv[2]), pathlib.Path(argv[3])
    with memtier.Context() as ctx:
        case((bucket, lambda name: "s3://%s/%s" % (BUCKET, name)), work, ctx)
    print("OK")


if __name__ == "__main__":
    _main(sys.argv)
