"""Pure-Python parser of MemTier's dataset index format (no libmemtier.so).

The format and its validation rules are specified in the Go package
``runtime/objects`` (``runtime/objects/doc.go``) and in the README. This module
implements the same rules with the same messages, so that
:class:`memtier.MemTierDataset` can be built in a DataLoader's parent process
without loading the Go runtime there (a runtime loaded before ``fork()`` is
unusable in the forked workers). ``tests/data/index_corpus/expected.json`` pins
both parsers to the same records and the same error text.

Entry points: :func:`parse_index` (a path) and :func:`parse_index_bytes`. Both
return an ``(N, 2)`` C-contiguous ``numpy.int64`` array of ``(offset, length)``
rows in bytes, and raise :class:`memtier.FormatError` (a ``ValueError``) with
extra attributes ``kind`` (a short name, the keys of expected.json's
``"kinds"``), ``line`` (1-based, text) or ``row`` (0-based, npy), each None
when it does not apply, and ``message`` (the text after ``"index <path>: "``).
"""

from __future__ import annotations

import os
import re
import struct
from typing import Any, List, Optional, Union

import numpy as np

from ._errors import FormatError

__all__ = ["parse_index", "parse_index_bytes", "NPY_MAGIC", "MAX_HEADER_BYTES"]

NPY_MAGIC = b"\x93NUMPY"
#: npy headers longer than this are refused (as in runtime/objects).
MAX_HEADER_BYTES = 1 << 20
_I64_MAX = 2**63 - 1
_MAX_NESTING = 16
_WANT = "want <i8, <u8, <i4 or <u4"
_DTYPES = {b"<i8": "<i8", b"<u8": "<u8", b"<i4": "<i4", b"<u4": "<u4"}

PathLike = Union[str, "os.PathLike[str]"]


class _Invalid(Exception):
    """A validation failure before it gets its path prefix."""

    def __init__(self, kind: str, message: str, line: Optional[int] = None, row: Optional[int] = None):
        super().__init__(message)
        self.kind, self.message, self.line, self.row = kind, message, line, row


def _quote(b: bytes) -> str:
    """Render bytes for a message exactly like runtime/objects quote()."""
    cut = len(b) > 32
    out = ['"']
    for c in b[:32]:
        if c == 0x22 or c == 0x5C:
            out.append("\\" + chr(c))
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    out.append('"')
    if cut:
        out.append("...")
    return "".join(out)


def _check_range(where: str, off: int, length: int, data_size: Optional[int], line=None, row=None) -> None:
    if off > _I64_MAX - length:
        raise _Invalid("range_overflow", "%s: offset %d + length %d overflows int64" % (where, off, length), line, row)
    if data_size is not None and data_size >= 0 and off + length > data_size:
        raise _Invalid(
            "past_end",
            "%s: range [%d, %d) is past the end of the data file (%d bytes)" % (where, off, off + length, data_size),
            line,
            row,
        )


# ----------------------------------------------------------------------- text

_FAST_LINE = re.compile(rb"\+?([0-9]{1,18})[ \t]+\+?([0-9]{1,18})")
_DECIMAL = re.compile(rb"([+-]?)([0-9]+)")
_BLANKS = re.compile(rb"[ \t]+")


def _decimal(where: str, name: str, tok: bytes, line: int) -> int:
    m = _DECIMAL.fullmatch(tok)
    if m is None:
        raise _Invalid("not_decimal", "%s: %s %s is not a decimal integer" % (where, name, _quote(tok)), line)
    digits = m.group(2).lstrip(b"0") or b"0"
    if len(digits) > 19:  # beyond int64 whatever the digits; int() would refuse > 4300 digits
        if m.group(1) == b"-":
            raise _Invalid("negative", "%s: %s %s is negative" % (where, name, _quote(tok)), line)
        raise _Invalid("overflow", "%s: %s %s overflows int64" % (where, name, _quote(tok)), line)
    v = int(digits)
    if m.group(1) == b"-" and v != 0:
        raise _Invalid("negative", "%s: %s %s is negative" % (where, name, _quote(tok)), line)
    if v > _I64_MAX:
        raise _Invalid("overflow", "%s: %s %s overflows int64" % (where, name, _quote(tok)), line)
    return v


def _parse_text(data: bytes, data_size: Optional[int]) -> np.ndarray:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out: List[int] = []
    check_end = data_size is not None and data_size >= 0
    for i, raw in enumerate(lines):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        s = raw.strip(b" \t")
        if not s or s[0] == 0x23:  # '#'
            continue
        m = _FAST_LINE.fullmatch(s)
        if m is not None:  # common case: two small non-negative numbers
            off, length = int(m.group(1)), int(m.group(2))
            if check_end and off + length > data_size:  # type: ignore[operator]
                _check_range("line %d" % (i + 1), off, length, data_size, line=i + 1)
            out.append(off)
            out.append(length)
            continue
        fields = _BLANKS.split(s)
        lineno = i + 1
        where = "line %d" % lineno
        if len(fields) != 2:
            raise _Invalid(
                "fields", "%s: expected 2 fields (offset length), got %d" % (where, len(fields)), lineno
            )
        off = _decimal(where, "offset", fields[0], lineno)
        length = _decimal(where, "length", fields[1], lineno)
        _check_range(where, off, length, data_size, line=lineno)
        out.append(off)
        out.append(length)
    return np.array(out, dtype=np.int64).reshape(-1, 2)


# ------------------------------------------------------------ npy header literal


class _Tuple(list):
    """A parsed Python tuple (kept apart from lists and parenthesized values)."""


class _NoneType:
    pass


_NONE = _NoneType()
_HEADER_SPACE = b" \t\n\r"
_CLOSER = {0x7B: 0x7D, 0x28: 0x29, 0x5B: 0x5D}  # { } ( ) [ ]


def _is_name_byte(c: int) -> bool:
    return 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or 0x30 <= c <= 0x39 or c == 0x5F


class _HeaderParser:
    """Same grammar and messages as runtime/objects headerParser."""

    def __init__(self, b: bytes):
        self.b = b
        self.pos = 0

    def skip_space(self) -> None:
        b, n = self.b, len(self.b)
        while self.pos < n and b[self.pos] in _HEADER_SPACE:
            self.pos += 1

    def unexpected(self) -> _Invalid:
        if self.pos >= len(self.b):
            return _Invalid("header", "npy header: unexpected end of header at byte %d" % self.pos)
        return _Invalid(
            "header", "npy header: unexpected %s at byte %d" % (_quote(self.b[self.pos : self.pos + 1]), self.pos)
        )

    def value(self, depth: int) -> Any:
        if self.pos >= len(self.b):
            raise self.unexpected()
        c = self.b[self.pos]
        if c in _CLOSER:
            if depth >= _MAX_NESTING:
                raise _Invalid("header", "npy header: nesting deeper than %d at byte %d" % (_MAX_NESTING, self.pos))
            return self.container(depth + 1)
        if c == 0x27 or c == 0x22:  # ' "
            return self.string()
        if c == 0x2D or 0x30 <= c <= 0x39:  # - or digit
            return self.integer()
        if 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or c == 0x5F:
            start = self.pos
            while self.pos < len(self.b) and _is_name_byte(self.b[self.pos]):
                self.pos += 1
            name = self.b[start : self.pos]
            if name == b"True":
                return True
            if name == b"False":
                return False
            if name == b"None":
                return _NONE
            raise _Invalid("header", "npy header: unknown name %s at byte %d" % (_quote(name), start))
        raise self.unexpected()

    def string(self) -> bytes:
        start = self.pos
        q = self.b[start]
        self.pos += 1
        n = len(self.b)
        while self.pos < n:
            c = self.b[self.pos]
            if c == q:
                self.pos += 1
                return self.b[start + 1 : self.pos - 1]
            if c == 0x5C:
                raise _Invalid("header", "npy header: escape in string at byte %d" % self.pos)
            if c == 0x0A:
                break
            self.pos += 1
        raise _Invalid("header", "npy header: unterminated string at byte %d" % start)

    def integer(self) -> int:
        start = self.pos
        if self.b[self.pos] == 0x2D:
            self.pos += 1
        d = self.pos
        while self.pos < len(self.b) and 0x30 <= self.b[self.pos] <= 0x39:
            self.pos += 1
        if self.pos == d:
            raise self.unexpected()
        if len(self.b[d : self.pos].lstrip(b"0")) > 19:  # int() refuses > 4300 digits
            raise _Invalid("header", "npy header: integer at byte %d does not fit in int64" % start)
        v = int(self.b[start : self.pos])
        if not -(2**63) <= v <= _I64_MAX:
            raise _Invalid("header", "npy header: integer at byte %d does not fit in int64" % start)
        return v

    def container(self, depth: int) -> Any:
        b = self.b
        open_ = b[self.pos]
        closer = _CLOSER[open_]
        self.pos += 1
        items: List[Any] = []
        keys: List[bytes] = []
        vals: dict = {}
        comma = False
        self.skip_space()
        while True:
            if self.pos < len(b) and b[self.pos] == closer:
                self.pos += 1
                break
            key_pos = self.pos
            v = self.value(depth)
            self.skip_space()
            if open_ == 0x7B:
                if not isinstance(v, bytes):
                    raise _Invalid("header", "npy header: dict key at byte %d is not a string" % key_pos)
                if v in vals:
                    raise _Invalid("header", "npy header: duplicate key %s at byte %d" % (_quote(v), key_pos))
                if self.pos >= len(b) or b[self.pos] != 0x3A:  # ':'
                    raise self.unexpected()
                self.pos += 1
                self.skip_space()
                val = self.value(depth)
                self.skip_space()
                keys.append(v)
                vals[v] = val
            else:
                items.append(v)
            if self.pos < len(b) and b[self.pos] == 0x2C:  # ','
                comma = True
                self.pos += 1
                self.skip_space()
                continue
            if self.pos < len(b) and b[self.pos] == closer:
                self.pos += 1
                break
            raise self.unexpected()
        if open_ == 0x7B:
            return vals  # insertion-ordered: keys in header order
        if open_ == 0x5B:
            return items
        if len(items) == 1 and not comma:
            return items[0]  # "(x)" is x, as in Python
        return _Tuple(items)


def _format_shape(t: List[int]) -> str:
    if len(t) == 1:
        return "(%d,)" % t[0]
    return "(" + ", ".join("%d" % x for x in t) + ")"


def _check_header(v: Any):
    """Validate the header dict; returns (numpy dtype string, rows)."""
    if not isinstance(v, dict):
        raise _Invalid("header", "npy header: not a dict literal")
    want = {b"descr", b"fortran_order", b"shape"}
    if len(v) != 3 or set(v) != want:
        raise _Invalid(
            "header",
            "npy header: keys must be descr, fortran_order, shape; got [%s]" % ", ".join(_quote(k) for k in v),
        )
    descr = v[b"descr"]
    if not isinstance(descr, bytes):
        raise _Invalid("dtype", "npy dtype is not a type string (structured dtypes are not supported)")
    dtype = _DTYPES.get(descr)
    if dtype is None:
        if descr.startswith(b">"):
            raise _Invalid("dtype", "npy dtype %s is big-endian; %s" % (_quote(descr), _WANT))
        raise _Invalid("dtype", "npy dtype %s is not supported; %s" % (_quote(descr), _WANT))
    fortran = v[b"fortran_order"]
    if type(fortran) is not bool:
        raise _Invalid("header", "npy header: fortran_order is not True or False")
    if fortran:
        raise _Invalid("fortran_order", "npy array is in Fortran order; want C order (fortran_order False)")
    shape = v[b"shape"]
    if not isinstance(shape, _Tuple) or not all(type(d) is int and d >= 0 for d in shape):
        raise _Invalid("shape", "npy shape is not a tuple of non-negative integers")
    if len(shape) != 2 or shape[1] != 2:
        raise _Invalid("shape", "npy shape %s is not (N, 2)" % _format_shape(shape))
    return dtype, shape[0]


def _parse_npy(data: bytes, data_size: Optional[int]) -> np.ndarray:
    size = len(data)
    too_short = _Invalid("header", "npy header: file too short for the npy preamble (%d bytes)" % size)
    if size < 8:
        raise too_short
    major, minor = data[6], data[7]
    if not 1 <= major <= 3 or minor != 0:
        raise _Invalid("header", "npy header: unsupported format version %d.%d" % (major, minor))
    if major == 1:
        if size < 10:
            raise too_short
        (hlen,), start = struct.unpack_from("<H", data, 8), 10
    else:
        if size < 12:
            raise too_short
        (hlen,), start = struct.unpack_from("<I", data, 8), 12
    if hlen > MAX_HEADER_BYTES:
        raise _Invalid("header_too_large", "npy header: %d bytes exceeds the 1 MiB limit" % hlen)
    if start + hlen > size:
        raise _Invalid(
            "header", "npy header: truncated (%d header bytes declared, %d present)" % (hlen, size - start)
        )
    p = _HeaderParser(data[start : start + hlen])
    p.skip_space()
    v = p.value(0)
    p.skip_space()
    if p.pos != hlen:
        raise p.unexpected()
    dtype, rows = _check_header(v)
    item = 8 if dtype[2] == "8" else 4
    row_bytes = 2 * item
    body_start = start + hlen
    body = size - body_start
    have = body // row_bytes
    if rows > have:
        raise _Invalid(
            "truncated",
            "npy body truncated: %d rows declared, %d bytes present, row %d is incomplete" % (rows, body, have),
            row=have,
        )
    extra = body - rows * row_bytes
    if extra > 0:
        raise _Invalid("trailing_data", "npy body has %d bytes of trailing data after %d rows" % (extra, rows))
    arr = np.frombuffer(data, dtype=dtype, count=2 * rows, offset=body_start).reshape(rows, 2)
    _check_rows(arr, dtype, data_size)
    return np.ascontiguousarray(arr, dtype=np.int64)


def _check_rows(arr: np.ndarray, dtype: str, data_size: Optional[int]) -> None:
    """Vectorized row checks; the first bad row is re-checked in the Go order."""
    if arr.shape[0] == 0:
        return
    if dtype == "<u8":
        cell_bad = arr > np.uint64(_I64_MAX)
    elif dtype == "<u4":
        cell_bad = np.zeros(arr.shape, dtype=bool)
    else:
        cell_bad = arr < 0
    u = arr.astype(np.uint64)  # garbage for bad cells, whose rows are flagged anyway
    with np.errstate(over="ignore"):
        end = u[:, 0] + u[:, 1]
    row_bad = cell_bad.any(axis=1) | (end > np.uint64(_I64_MAX))
    if data_size is not None and data_size >= 0:
        row_bad |= end > np.uint64(data_size)
    if not row_bad.any():
        return
    r = int(np.argmax(row_bad))
    vals = [int(x) for x in arr[r]]
    for col, name in enumerate(("offset", "length")):
        if vals[col] < 0:
            raise _Invalid("negative", "row %d: %s %d is negative" % (r, name, vals[col]), row=r)
        if vals[col] > _I64_MAX:
            raise _Invalid("overflow", "row %d: %s %d overflows int64" % (r, name, vals[col]), row=r)
    _check_range("row %d" % r, vals[0], vals[1], data_size, row=r)
    raise AssertionError("row %d flagged but passes the scalar checks" % r)  # pragma: no cover


# ------------------------------------------------------------------ public API


def _format_error(inv: _Invalid, path: Optional[str]) -> FormatError:
    prefix = "index %s: " % path if path else "index: "
    exc = FormatError(prefix + inv.message)
    exc.detail = prefix + inv.message
    exc.kind = inv.kind  # type: ignore[attr-defined]
    exc.message = inv.message  # type: ignore[attr-defined]
    exc.line = inv.line  # type: ignore[attr-defined]
    exc.row = inv.row  # type: ignore[attr-defined]
    exc.path = path  # type: ignore[attr-defined]
    return exc


def parse_index_bytes(data: bytes, data_size: Optional[int] = None, path: Optional[str] = None) -> np.ndarray:
    """Parse a whole index held in ``data``.

    Parameters
    ----------
    data : bytes-like
        The index file's content (npy when it starts with ``b"\\x93NUMPY"``,
        else text).
    data_size : int or None
        Size of the data file in bytes; every range must end at or before it.
        None (or negative) skips that check.
    path : str or None
        Only used in error messages.

    Returns
    -------
    numpy.ndarray
        ``(N, 2)`` C-contiguous int64: column 0 offsets, column 1 lengths (bytes).

    Raises
    ------
    memtier.FormatError
        The first problem in file order, with ``kind``, ``line``/``row`` and
        ``message`` attributes.
    """
    data = bytes(data)
    try:
        if data[:6] == NPY_MAGIC:
            return _parse_npy(data, data_size)
        return _parse_text(data, data_size)
    except _Invalid as inv:
        raise _format_error(inv, path) from None


def parse_index(path: PathLike, data_size: Optional[int] = None) -> np.ndarray:
    """Read and parse the index file at ``path`` (see :func:`parse_index_bytes`).

    OS errors (missing file, permission, a directory) propagate as the built-in
    ``OSError`` subclasses raised by ``open``.
    """
    p = os.fspath(path)
    with open(p, "rb") as fh:
        data = fh.read()
    return parse_index_bytes(data, data_size, path=p)
