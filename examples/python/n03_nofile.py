#!/usr/bin/env python3
"""n03_nofile.py: reads through MemTier under a low soft RLIMIT_NOFILE (field case N03).

Field case N03 (tests/field_cases.md): a loader that keeps open descriptors
must fit them under the host's soft ``RLIMIT_NOFILE``, which the host may
lower at any time, and give them back when ``open`` fails with EMFILE.

This writes ``--files`` files of 4 KiB (file i filled with byte ``i % 251``)
in a temporary directory, then runs a child interpreter that:

1. loads the library with one read of file 0 (the limit must be lowered
   after that: loading a Go library may change it, case N04);
2. sets the soft limit to ``--limit`` (hard limit unchanged);
3. reads 16 bytes at offset 100 of every file once with
   ``Context.read_into`` into one bytearray, checking each against the
   file's byte, and counts the reads that raise or give wrong bytes;
4. opens a new file with Python's ``open()`` (can the host still open
   files?) and counts the process's descriptors.

It prints one line: ``failed=F reads=N host_open=ok|<error> fds=D limit=L
files_opened=O files_evicted=E`` (the last two from the context's
:class:`memtier.Stats`), plus the first failure's message when there is one.
Exit status 0 when every read succeeded and the host could open a file,
1 otherwise.

    python examples/python/n03_nofile.py               # 1,200 files, limit 64
    python examples/python/n03_nofile.py --limit 33 --files 600

tests/python/test_limits_errors.py and runtime/files/budget_test.go assert
the same behaviour with exact values.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import os, resource, sys
import memtier
d, limit, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = memtier.Context()
buf = bytearray(16)
ctx.read_into(os.path.join(d, "f00000"), 100, buf)     # loads the library first (N04)
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
failed, first = 0, None
for i in range(n):
    try:
        ctx.read_into(os.path.join(d, "f%05d" % i), 100, buf)
        ok = bytes(buf) == bytes([i % 251]) * 16
        err = None if ok else "file %d: wrong bytes" % i
    except (OSError, memtier.MemTierError) as e:
        ok, err = False, "file %d: %s" % (i, e)
    if not ok:
        failed += 1
        first = first or err
try:
    with open(os.path.join(d, "host.txt"), "w") as f:
        f.write("ok")
    host = "ok"
except OSError as e:
    host = repr(e)
try:
    fds = len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor
except OSError as e:
    fds = repr(e)
s = ctx.stats()
print("failed=%d reads=%d host_open=%s fds=%s limit=%d files_opened=%d files_evicted=%d"
      % (failed, n, host, fds, limit, s.files_opened, s.files_evicted))
if first:
    print("first failure:", first)
sys.exit(0 if failed == 0 and host == "ok" else 1)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1200, help="distinct files read once each (default 1200)")
    ap.add_argument("--limit", type=int, default=64, help="soft RLIMIT_NOFILE set in the child (default 64)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for i in range(a.files):
            with open(os.path.join(d, "f%05d" % i), "wb") as f:
                f.write(bytes([i % 251]) * 4096)
        r = subprocess.run([sys.executable, "-c", CHILD, d, str(a.limit), str(a.files)], timeout=300)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
