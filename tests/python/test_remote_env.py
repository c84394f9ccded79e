"""The remote settings are read when a context opens its first URL, through libc's getenv: a
child interpreter that sets AWS_* / MEMTIER_REMOTE_* / MEMTIER_DISK_CACHE_* in os.environ after
``import memtier`` (and after the library is loaded) reads s3:// objects from versitygw with
them. versitygw (Apache-2.0, a real SigV4 S3 gateway) comes from MEMTIER_VERSITYGW, else
scripts/versitygw.sh; the test stops it."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACCESS, SECRET, BUCKET = "memtier-env-access", "memtier-env-secret-Qx7", "envbkt"
SIZE = 9 * 1024 * 1024 + 12345  # two 5 MiB parts after the open window; three 4 MiB disk blocks

CHILD = r"""
import json, os, sys
import memtier
memtier.Context().close()  # the library is loaded and a context made before any AWS_* is set
spec = json.loads(sys.argv[1])
out = {}

def attempt(name, env):
    for k, v in env.items():
        os.environ[k] = v
    try:
        with memtier.Context() as ctx:
            data = ctx.read(spec["url"], 0, spec["size"])
            import hashlib
            out[name] = hashlib.sha1(data).hexdigest()
    except memtier.MemTierError as e:
        out[name] = type(e).__name__ + ": " + str(e)

attempt("no_endpoint", {})
base = {"AWS_ENDPOINT_URL": spec["endpoint"], "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": spec["access"], "AWS_SECRET_ACCESS_KEY": "wrong-" + spec["secret"]}
attempt("wrong_secret", base)
attempt("bad_concurrency", {"AWS_SECRET_ACCESS_KEY": spec["secret"], "MEMTIER_REMOTE_CONCURRENCY": "0"})
attempt("ok", {"MEMTIER_REMOTE_CONCURRENCY": "3", "MEMTIER_REMOTE_PART_BYTES": "5M",
               "MEMTIER_DISK_CACHE_DIR": spec["cache_dir"]})
print(json.dumps(out))
"""


def _versitygw() -> str:
    exe = os.environ.get("MEMTIER_VERSITYGW")
    if exe:
        return exe
    p = subprocess.run([os.path.join(ROOT, "scripts", "versitygw.sh")], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("versitygw is not available: " + p.stderr.strip()[-200:])
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture
def gateway(tmp_path):
    root = tmp_path / "root"
    (root / BUCKET).mkdir(parents=True)
    data = bytes((i * 13 + i // 65536) & 0xFF for i in range(SIZE))
    (root / BUCKET / "obj.bin").write_bytes(data)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([_versitygw(), "--access", ACCESS, "--secret", SECRET, "--port",
                             f"127.0.0.1:{port}", "--quiet", "--keep-alive", "posix", str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # any HTTP answer: it is serving
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("versitygw did not start")
                time.sleep(0.05)
        yield endpoint, data
    finally:
        proc.terminate()
        proc.wait(10)


def test_settings_set_in_os_environ_after_import(gateway, tmp_path):
    endpoint, data = gateway
    unset = {"MEMTIER_REMOTE_PART_BYTES", "MEMTIER_REMOTE_CONCURRENCY", "MEMTIER_DISK_CACHE_DIR",
             "MEMTIER_DISK_CACHE_BYTES"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in unset}
    env["HOME"] = str(tmp_path)  # no ~/.aws files
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    cache_dir = str(tmp_path / "dc")
    spec = {"url": f"s3://{BUCKET}/obj.bin", "size": SIZE, "endpoint": endpoint, "access": ACCESS,
            "secret": SECRET, "cache_dir": cache_dir}
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    # No endpoint or keys yet: the default AWS endpoint is not tried without credentials.
    assert out["no_endpoint"].startswith("PermissionDeniedError: "), out["no_endpoint"]
    # The endpoint and a wrong secret, set after import: versitygw refuses the signature.
    assert out["wrong_secret"].startswith("PermissionDeniedError: "), out["wrong_secret"]
    assert "SignatureDoesNotMatch" in out["wrong_secret"] and SECRET not in out["wrong_secret"]
    assert out["bad_concurrency"].startswith("FormatError: ")
    assert 'MEMTIER_REMOTE_CONCURRENCY="0"' in out["bad_concurrency"], out["bad_concurrency"]
    assert out["ok"] == hashlib.sha1(data).hexdigest(), out["ok"]
    # MEMTIER_DISK_CACHE_DIR set after import: the blocks were cached there (write-behind,
    # flushed when the context closed): one entry per 4 MiB block.
    entries = [f for f in os.listdir(cache_dir) if f.endswith(".blk")]
    assert len(entries) == 3, os.listdir(cache_dir)
