"""The Python benchmarks' own safety rules (examples/python): what they do to a file
the user names."""

import hashlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bench_tensor_refuses_a_named_file_of_another_size(tmp_path):
    # A --file of another size than --size (say a checkpoint) is refused with exit 2
    # and left as it was, unless --overwrite (found by a new user: it was replaced).
    f = tmp_path / "weights.bin"
    data = os.urandom(300_000)
    f.write_bytes(data)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", "bench_tensor.py"),
                        "--file", str(f), "--size", str(1 << 20)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "refusing to overwrite" in r.stderr and "300000 bytes" in r.stderr
    assert hashlib.sha1(f.read_bytes()).digest() == hashlib.sha1(data).digest()
