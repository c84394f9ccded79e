"""A safetensors header parser in Python, with the rules of the reference library 0.8.

libmemtier.so's parser (``memtier_safetensors_open``) validates files for
:func:`memtier.safetensors.load_file` and :class:`~memtier.safetensors.safe_open`.
This one exists for three cases the C API cannot serve:

* :func:`memtier.safetensors.load` / ``deserialize`` of bytes already in memory
  (there is no file for the library to open);
* files the C parser refuses although safetensors 0.8 reads them: the packed
  sub-byte dtypes (F4, F6_E2M3, F6_E3M2) and a JSON header that starts with
  whitespace (the C parser requires ``{`` first; serde_json skips whitespace);
* telling an empty ``"__metadata__": {}`` (the reference gives ``{}``) from an
  absent one (``None``): the C API lists the entries of both as none.

Rules (from safetensors' ``lib.rs`` ``Metadata::validate`` and the serde
derive of its header types, 0.8): at least 8 bytes; header length N at most
100,000,000 and within the buffer; UTF-8; JSON (whitespace around allowed,
nothing else after the object); the top level an object; ``__metadata__``
null or an object of strings; every other entry an object with ``dtype`` (one
of :data:`BITS`), ``shape`` (non-negative integers) and ``data_offsets``
(exactly two non-negative integers), other keys ignored; entries sorted by
offsets must tile the data section from 0 without gap or overlap; elements x
bits a whole number of bytes equal to end - begin (no overflow); the data
section ends at the end of the buffer. Every refusal is a
:class:`memtier.FormatError` (re-classed as ``SafetensorError``).
"""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .. import _errors
from ._errors import as_reference

#: dtype name -> bits per element, as safetensors 0.8's ``Dtype`` lists them.
BITS: Dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
    "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
    "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
    "U64": 64,
}

#: The reference's limit on the header length N.
MAX_HEADER = 100_000_000
_U64 = (1 << 64) - 1


class Entry(NamedTuple):
    """One tensor as parsed: ``begin``/``end`` relative to the data section."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    begin: int
    end: int


class Parsed(NamedTuple):
    """A parsed header: entries in data order, metadata (None when absent or
    null), and the absolute offset of the data section (8 + N)."""

    entries: List[Entry]
    metadata: Optional[Dict[str, str]]
    data_start: int


def _bad(where: str, why: str) -> _errors.MemTierError:
    return as_reference(_errors.make_error(_errors.ERR_FORMAT, where, why,
                                           strerror="malformed safetensors header"))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json accepts NaN/Infinity; serde does not


def _pairs(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    # serde_json keeps the last of duplicate keys (HashMap insert); so does this.
    return dict(pairs)


def _uint(v: Any) -> bool:
    return type(v) is int and 0 <= v <= _U64


def header_length(head: bytes, total: int, where: str) -> int:
    """N from the first 8 bytes of a buffer or file of ``total`` bytes, checked."""
    if total < 8 or len(head) < 8:
        raise _bad(where, "header too small")
    n = struct.unpack("<Q", head[:8])[0]
    if n > MAX_HEADER:
        raise _bad(where, "header too large")
    if 8 + n > total:
        raise _bad(where, "invalid header length")
    return int(n)


def parse(text: bytes, total: int, where: str) -> Parsed:
    """Parse and validate header bytes ``text`` (the N bytes after the length)
    of a buffer or file of ``total`` bytes; raises FormatError (see module)."""
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(where, f"invalid UTF-8 in header: {e}") from None
    try:
        doc = json.loads(s, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except ValueError as e:
        raise _bad(where, f"invalid JSON in header: {e}") from None
    if not isinstance(doc, dict):
        raise _bad(where, "invalid JSON in header: the header is not an object")
    meta: Optional[Dict[str, str]] = None
    entries: List[Entry] = []
    for name, v in doc.items():
        if name == "__metadata__":
            if v is None:
                continue
            if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                raise _bad(where, "invalid JSON in header: __metadata__ must map strings to strings")
            meta = dict(v)
            continue
        if not isinstance(v, dict):
            raise _bad(where, f"invalid JSON in header: tensor {name!r} is not an object")
        dtype, shape, offs = v.get("dtype"), v.get("shape"), v.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in BITS:
            raise _bad(where, f"invalid JSON in header: tensor {name!r}: unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(_uint(d) for d in shape):
            raise _bad(where, f"invalid JSON in header: tensor {name!r}: bad shape {shape!r}")
        if not isinstance(offs, list) or len(offs) != 2 or not all(_uint(o) for o in offs):
            raise _bad(where, f"invalid JSON in header: tensor {name!r}: bad data_offsets {offs!r}")
        entries.append(Entry(name, dtype, tuple(shape), offs[0], offs[1]))
    entries.sort(key=lambda e: (e.begin, e.end))
    pos = 0
    for e in entries:
        if e.begin != pos or e.end < e.begin:
            raise _bad(where, f"invalid offset for tensor {e.name!r}")
        n = 1
        for d in e.shape:
            n *= d
        bits = n * BITS[e.dtype]
        if n > _U64 or bits > _U64:
            raise _bad(where, f"overflow computing the size of tensor {e.name!r}")
        if bits % 8:
            raise _bad(where, f"tensor {e.name!r}: the sub-byte dtype {e.dtype} does not end "
                       "at a byte boundary")
        if bits // 8 != e.end - e.begin:
            raise _bad(where, f"invalid shape, data type, or offset for tensor {e.name!r}")
        pos = e.end
    start = 8 + len(text)
    if start + pos != total:
        raise _bad(where, "incomplete metadata, file not fully covered")
    return Parsed(entries, meta, start)


def parse_buffer(data: Any, where: str) -> Parsed:
    """Parse a whole safetensors file held in memory (bytes-like)."""
    mv = memoryview(data).cast("B")
    n = header_length(bytes(mv[:8]), len(mv), where)
    return parse(bytes(mv[8:8 + n]), len(mv), where)
