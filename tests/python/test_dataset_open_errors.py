"""MemTierDataset's open errors are MemTier's classes, in the library's style
(a fresh-user finding of issue 10): ``[Errno N] MemTierDataset <which> file:
<strerror>: '<path>'``, the class of the matching status, which also derives
from the matching built-in, so ``except FileNotFoundError`` keeps working."""

from __future__ import annotations

import errno
import os

import pytest

import memtier
from memtier import _errors
from memtier.dataset import MemTierDataset


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"abcdefgh")
    index = tmp_path / "index.txt"
    index.write_text("0 4\n4 4\n")
    (tmp_path / "dir").mkdir()
    return tmp_path


@pytest.mark.parametrize("which,cls,builtin,code,text", [
    ("data", memtier.NotFoundError, FileNotFoundError, errno.ENOENT, "file not found"),
    ("index", memtier.NotFoundError, FileNotFoundError, errno.ENOENT, "file not found"),
])
def test_missing_file(files, which, cls, builtin, code, text):
    missing = str(files / "missing")
    args = (str(files / "index.txt"), missing) if which == "data" else (missing, str(files / "data.bin"))
    with pytest.raises(cls) as ei:
        MemTierDataset(*args)
    e = ei.value
    assert isinstance(e, builtin) and isinstance(e, memtier.MemTierError)
    assert (e.errno, e.filename, e.code) == (code, missing, _errors.ERR_NOT_FOUND)
    assert str(e) == "[Errno %d] MemTierDataset %s file: %s: '%s'" % (code, which, text, missing)


@pytest.mark.parametrize("which", ["data", "index"])
def test_directory(files, which):
    d = str(files / "dir")
    args = (str(files / "index.txt"), d) if which == "data" else (d, str(files / "data.bin"))
    with pytest.raises(memtier.IsDirectoryError) as ei:
        MemTierDataset(*args)
    e = ei.value
    assert isinstance(e, IsADirectoryError)
    assert (e.errno, e.filename, e.code) == (errno.EISDIR, d, _errors.ERR_IS_DIR)
    assert str(e) == "[Errno 21] MemTierDataset %s file: path is a directory: '%s'" % (which, d)


def test_malformed_index_is_format_error(files):
    bad = files / "bad.txt"
    bad.write_text("0 40\n")
    with pytest.raises(memtier.FormatError) as ei:
        MemTierDataset(str(bad), str(files / "data.bin"))
    assert str(ei.value) == ("index %s: line 1: range [0, 40) is past the end of the data file (8 bytes)"
                             % bad)


@pytest.mark.parametrize("err,cls,status,text,detail", [
    (errno.EACCES, memtier.PermissionDeniedError, _errors.ERR_PERMISSION, "permission denied", ""),
    (errno.EPERM, memtier.PermissionDeniedError, _errors.ERR_PERMISSION, "permission denied", ""),
    (errno.ENOTDIR, memtier.NotFoundError, _errors.ERR_NOT_FOUND, "file not found", ""),
    (errno.EIO, memtier.MemTierError, _errors.ERR_IO, "I/O error", os.strerror(errno.EIO) + ": '/x/f'"),
])
def test_from_os_error_maps_like_the_library(err, cls, status, text, detail):
    # Root reads a mode-000 file, so the errnos a test cannot provoke are built.
    e = _errors.from_os_error(OSError(err, os.strerror(err), "/x/f"), "MemTierDataset index file", "/x/f")
    assert type(e) is cls and e.code == status
    # A specific detail replaces the status's generic text (one message style).
    want = "MemTierDataset index file: " + (detail or text)
    if isinstance(e, OSError):
        assert (e.errno, e.filename) == ({_errors.ERR_PERMISSION: errno.EACCES,
                                          _errors.ERR_NOT_FOUND: errno.ENOENT}[status], "/x/f")
        assert e.strerror == want
    else:
        assert str(e) == want


def test_from_os_error_keeps_a_memtier_error():
    e = _errors.make_error(_errors.ERR_NOT_FOUND, "x", filename="/y")
    assert _errors.from_os_error(e, "z", "/w") is e


@pytest.mark.parametrize("which", ["data", "index"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_fifo_or_device_is_refused_before_any_open(files, which, kind):
    # A FIFO index used to block in open() until a writer came, and /dev/zero
    # as the index grew memory without end (a fresh-user finding).
    special = str(files / "ff") if kind == "fifo" else "/dev/zero"
    if kind == "fifo":
        os.mkfifo(special)
    args = (str(files / "index.txt"), special) if which == "data" else (special, str(files / "data.bin"))
    with pytest.raises(memtier.NotRegularFileError) as ei:
        MemTierDataset(*args)
    assert isinstance(ei.value, OSError) and ei.value.code == _errors.ERR_NOT_REGULAR
    assert str(ei.value) == ("MemTierDataset %s file: not a regular file (device, FIFO, socket, "
                             "procfs/sysfs): %r" % (which, special))
