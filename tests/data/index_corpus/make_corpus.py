#!/usr/bin/env python3
"""Regenerate the dataset index corpus: small valid and broken index files.

Run from anywhere: ``python tests/data/index_corpus/make_corpus.py``. It
rewrites every corpus file next to this script and ``expected.json``, which
lists for each file the data-file size to validate against and either the
records (valid) or the error: a short kind, the 1-based line (text) or 0-based
row (npy) the message must name (absent when neither applies) and the exact
message, without the "index <path>: " prefix. The Go parser
(runtime/objects) and the Python one (python/memtier/_index.py) are both
tested against this file, so the messages here are the specification.

Needs numpy (the well-formed .npy files are written by numpy itself; broken
ones are assembled byte by byte).
"""

import io
import json
import os
import struct
import sys

import numpy as np
from numpy.lib import format as npformat

HERE = os.path.dirname(os.path.abspath(__file__))
I64_MAX = 2**63 - 1
DATA = 1000  # default data-file size

files = {}  # name -> bytes
expected = {}  # name -> dict


def valid(name, content, records, data_size=DATA):
    files[name] = content
    expected[name] = {"data_size": data_size, "valid": True, "records": [list(r) for r in records]}


def invalid(name, content, kind, message, line=None, row=None, data_size=DATA):
    files[name] = content
    e = {"data_size": data_size, "valid": False, "kind": kind, "message": message}
    if line is not None:
        e["line"] = line
    if row is not None:
        e["row"] = row
    expected[name] = e


def npy(arr, version=(1, 0)):
    b = io.BytesIO()
    npformat.write_array(b, arr, version=version, allow_pickle=False)
    return b.getvalue()


def raw_npy(header, body=b"", version=(1, 0), pad=True, hlen=None):
    """An npy file with a hand-written header text (numpy-style padding)."""
    h = header.encode("latin1") if isinstance(header, str) else header
    pre = 10 if version[0] == 1 else 12
    if pad:
        total = pre + len(h) + 1
        h = h + b" " * ((64 - total % 64) % 64) + b"\n"
    n = len(h) if hlen is None else hlen
    lenfield = struct.pack("<H", n) if version[0] == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes(version) + lenfield + h + body


def hdr(descr="'<i8'", fortran="False", shape="(3, 2)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def body(rows, dtype="<i8"):
    return np.asarray(rows, dtype=dtype).tobytes()


PAST = "range [%d, %d) is past the end of the data file (%d bytes)"
WANT = "want <i8, <u8, <i4 or <u4"

# ---------------------------------------------------------------- text, valid
valid("text_basic.txt", b"0 10\n10 20\n30 0\n", [(0, 10), (10, 20), (30, 0)])
valid(
    "text_comments_blank.txt",
    b"# offset length\n\n   \t\n  # indented comment\n0\t100\r\n  +5   7  \n-0 0\n"
    b"0000000000000000000000000012 3\n#last\n999 1",
    [(0, 100), (5, 7), (0, 0), (12, 3), (999, 1)],
)
valid("text_empty.txt", b"", [])
valid("text_only_comments.txt", b"# nothing here\n\n#\n", [])
valid("text_zero_length_records.txt", b"1000 0\n0 0\n500 0\n", [(1000, 0), (0, 0), (500, 0)])
valid(
    "text_int64_max.txt",
    b"0 9223372036854775807\n9223372036854775807 0\n",
    [(0, I64_MAX), (I64_MAX, 0)],
    data_size=I64_MAX,
)
long_comment = b"#" + b"x" * 66_000 + b"\n"
valid(
    "text_long_lines.txt",
    long_comment + b"1 2\n" + b" " * 33_000 + b"3 4" + b"\t" * 33_000 + b"\n5 6\n",
    [(1, 2), (3, 4), (5, 6)],
)
valid("text_overlap_repeat.txt", b"0 100\n50 100\n0 100\n", [(0, 100), (50, 100), (0, 100)])

# -------------------------------------------------------------- text, invalid
invalid("text_negative_offset.txt", b"0 1\n# c\n-5 10\n", "negative", 'line 3: offset "-5" is negative', line=3)
invalid("text_negative_length.txt", b"7 -1\n", "negative", 'line 1: length "-1" is negative', line=1)
invalid(
    "text_negative_huge.txt", b"-99999999999999999999 1\n", "negative",
    'line 1: offset "-99999999999999999999" is negative', line=1,
)
invalid(
    "text_overflow_offset.txt", b"1 1\n9223372036854775808 0\n", "overflow",
    'line 2: offset "9223372036854775808" overflows int64', line=2, data_size=I64_MAX,
)
invalid(
    "text_overflow_length.txt", b"0 123456789012345678901234567890\n", "overflow",
    'line 1: length "123456789012345678901234567890" overflows int64', line=1,
)
invalid(
    "text_sum_overflow.txt", b"9223372036854775807 1\n", "range_overflow",
    "line 1: offset 9223372036854775807 + length 1 overflows int64", line=1, data_size=I64_MAX,
)
invalid("text_past_end.txt", b"0 10\n995 10\n", "past_end", "line 2: " + PAST % (995, 1005, 1000), line=2)
invalid("text_past_end_empty.txt", b"1001 0\n", "past_end", "line 1: " + PAST % (1001, 1001, 1000), line=1)
invalid("text_three_fields.txt", b"0 1\n1 2 3\n", "fields", "line 2: expected 2 fields (offset length), got 3", line=2)
invalid("text_one_field.txt", b"\n\n5\n", "fields", "line 3: expected 2 fields (offset length), got 1", line=3)
invalid(
    "text_inline_comment.txt", b"1 2 # sample one\n", "fields",
    "line 1: expected 2 fields (offset length), got 5", line=1,
)
invalid("text_hex.txt", b"0x10 5\n", "not_decimal", 'line 1: offset "0x10" is not a decimal integer', line=1)
invalid("text_float.txt", b"1 2.5\n", "not_decimal", 'line 1: length "2.5" is not a decimal integer', line=1)
invalid(
    "text_trailing_garbage.txt", b"1 2\n10 20abc\n", "not_decimal",
    'line 2: length "20abc" is not a decimal integer', line=2,
)
invalid("text_underscore.txt", b"1_000 2\n", "not_decimal", 'line 1: offset "1_000" is not a decimal integer', line=1)
invalid("text_sign_only.txt", b"- 5\n", "not_decimal", 'line 1: offset "-" is not a decimal integer', line=1)
invalid(
    "text_binary.txt", b"\x00\x01\xff\"\\ 3\n", "not_decimal",
    'line 1: offset "\\x00\\x01\\xff\\"\\\\" is not a decimal integer', line=1,
)
invalid(
    "text_utf8_bom.txt", b"\xef\xbb\xbf0 10\n", "not_decimal",
    'line 1: offset "\\xef\\xbb\\xbf0" is not a decimal integer', line=1,
)
invalid(
    "text_unicode_digits.txt", "\u0661\u0662 3\n".encode(), "not_decimal",
    'line 1: offset "\\xd9\\xa1\\xd9\\xa2" is not a decimal integer', line=1,
)
invalid(
    "text_long_token.txt", b"1" * 40 + b"x 1\n", "not_decimal",
    'line 1: offset "' + "1" * 32 + '"... is not a decimal integer', line=1,
)
invalid("text_vertical_tab.txt", b"1\x0b2\n", "fields", "line 1: expected 2 fields (offset length), got 1", line=1)
invalid(
    "text_error_after_long_line.txt", long_comment + b"1 2\n" + b" " * 66_000 + b"3 x\n", "not_decimal",
    'line 3: length "x" is not a decimal integer', line=3,
)
invalid("text_truncated_magic.txt", b"\x93NUM", "fields", "line 1: expected 2 fields (offset length), got 1", line=1)

# ----------------------------------------------------------------- npy, valid
rows = [(0, 10), (10, 20), (30, 0), (999, 1)]
for dt in ("<i8", "<u8", "<i4", "<u4"):
    valid("npy_%s.npy" % dt[1:], npy(np.asarray(rows, dtype=dt)), rows)
valid("npy_v2.npy", npy(np.asarray(rows, dtype="<i8"), version=(2, 0)), rows)
valid("npy_v3.npy", npy(np.asarray(rows, dtype="<u8"), version=(3, 0)), rows)
valid("npy_empty.npy", npy(np.zeros((0, 2), dtype="<i8")), [])
valid("npy_zero_length.npy", npy(np.asarray([(5, 0), (1000, 0), (0, 3)], dtype="<i8")), [(5, 0), (1000, 0), (0, 3)])
valid(
    "npy_int64_max.npy", npy(np.asarray([(0, I64_MAX), (I64_MAX, 0)], dtype="<u8")),
    [(0, I64_MAX), (I64_MAX, 0)], data_size=I64_MAX,
)
valid(
    "npy_handwritten_header.npy",
    raw_npy('{"shape":(2,2),"fortran_order":False,\t"descr":"<i4"}', body([(1, 2), (3, 4)], "<i4"), pad=False),
    [(1, 2), (3, 4)],
)
valid(
    "npy_extra_parens.npy",
    raw_npy("{'descr': ('<i8'), 'fortran_order': (False), 'shape': ((1), 2)}", body([(7, 8)])),
    [(7, 8)],
)

# --------------------------------------------------------------- npy, invalid
invalid("npy_f8.npy", npy(np.zeros((3, 2), dtype="<f8")), "dtype", "npy dtype \"<f8\" is not supported; " + WANT)
invalid("npy_f4.npy", npy(np.zeros((3, 2), dtype="<f4")), "dtype", "npy dtype \"<f4\" is not supported; " + WANT)
invalid("npy_i2.npy", npy(np.zeros((3, 2), dtype="<i2")), "dtype", "npy dtype \"<i2\" is not supported; " + WANT)
invalid("npy_bool.npy", npy(np.zeros((3, 2), dtype="?")), "dtype", "npy dtype \"|b1\" is not supported; " + WANT)
invalid("npy_big_endian.npy", npy(np.zeros((3, 2), dtype=">i8")), "dtype", "npy dtype \">i8\" is big-endian; " + WANT)
invalid("npy_big_endian_u4.npy", npy(np.zeros((3, 2), dtype=">u4")), "dtype", "npy dtype \">u4\" is big-endian; " + WANT)
invalid("npy_object.npy", raw_npy(hdr("'|O'"), b"\0" * 48), "dtype", "npy dtype \"|O\" is not supported; " + WANT)
invalid(
    "npy_structured.npy", npy(np.zeros(3, dtype=[("offset", "<i8"), ("length", "<i8")])), "dtype",
    "npy dtype is not a type string (structured dtypes are not supported)",
)
invalid("npy_shape_1d.npy", npy(np.zeros(6, dtype="<i8")), "shape", "npy shape (6,) is not (N, 2)")
invalid("npy_shape_3cols.npy", npy(np.zeros((3, 3), dtype="<i8")), "shape", "npy shape (3, 3) is not (N, 2)")
invalid("npy_shape_3d.npy", npy(np.zeros((2, 2, 2), dtype="<i8")), "shape", "npy shape (2, 2, 2) is not (N, 2)")
invalid("npy_shape_scalar.npy", npy(np.zeros((), dtype="<i8")), "shape", "npy shape () is not (N, 2)")
invalid("npy_shape_transposed.npy", npy(np.zeros((2, 3), dtype="<i8")), "shape", "npy shape (2, 3) is not (N, 2)")
invalid(
    "npy_shape_negative.npy", raw_npy(hdr(shape="(-1, 2)")), "shape",
    "npy shape is not a tuple of non-negative integers",
)
invalid(
    "npy_shape_bool.npy", raw_npy(hdr(shape="(True, 2)")), "shape",
    "npy shape is not a tuple of non-negative integers",
)
invalid(
    "npy_shape_int.npy", raw_npy(hdr(shape="(3)"), body([(0, 0)] * 3)), "shape",
    "npy shape is not a tuple of non-negative integers",
)
invalid(
    "npy_fortran.npy", npy(np.asfortranarray(np.zeros((3, 2), dtype="<i8"))), "fortran_order",
    "npy array is in Fortran order; want C order (fortran_order False)",
)
invalid(
    "npy_negative_i8.npy", npy(np.asarray([(0, 1), (1, 1), (-8, 1)], dtype="<i8")), "negative",
    "row 2: offset -8 is negative", row=2,
)
invalid(
    "npy_negative_i4.npy", npy(np.asarray([(0, 1), (1, -3)], dtype="<i4")), "negative",
    "row 1: length -3 is negative", row=1,
)
invalid(
    "npy_u8_overflow.npy", npy(np.asarray([(0, 1), (1, 2**64 - 1)], dtype="<u8")), "overflow",
    "row 1: length 18446744073709551615 overflows int64", row=1,
)
invalid(
    "npy_u8_overflow_offset.npy", npy(np.asarray([(2**63, 0)], dtype="<u8")), "overflow",
    "row 0: offset 9223372036854775808 overflows int64", row=0, data_size=I64_MAX,
)
invalid(
    "npy_sum_overflow.npy", npy(np.asarray([(0, 0), (I64_MAX, I64_MAX)], dtype="<i8")), "range_overflow",
    "row 1: offset 9223372036854775807 + length 9223372036854775807 overflows int64", row=1, data_size=I64_MAX,
)
invalid(
    "npy_past_end.npy", npy(np.asarray([(0, 10), (10, 20), (30, 0), (990, 11)], dtype="<u4")), "past_end",
    "row 3: " + PAST % (990, 1001, 1000), row=3,
)
invalid(
    "npy_past_end_small_data.npy", npy(np.asarray(rows, dtype="<i8")), "past_end",
    "row 1: " + PAST % (10, 30, 20), row=1, data_size=20,
)
good4 = npy(np.asarray(rows, dtype="<i8"))
invalid(
    "npy_truncated_body.npy", good4[:-8], "truncated",
    "npy body truncated: 4 rows declared, 56 bytes present, row 3 is incomplete", row=3,
)
invalid(
    "npy_truncated_no_body.npy", raw_npy(hdr(shape="(1000000000000, 2)")), "truncated",
    "npy body truncated: 1000000000000 rows declared, 0 bytes present, row 0 is incomplete", row=0,
)
invalid(
    "npy_trailing_data.npy", good4 + b"extra", "trailing_data",
    "npy body has 5 bytes of trailing data after 4 rows",
)
invalid(
    "npy_header_too_large.npy", raw_npy(hdr(), version=(2, 0), hlen=2 * 1024 * 1024), "header_too_large",
    "npy header: 2097152 bytes exceeds the 1 MiB limit",
)
invalid(
    "npy_header_truncated.npy", raw_npy(hdr(), pad=False, hlen=200), "header",
    "npy header: truncated (200 header bytes declared, %d present)" % len(hdr().encode()),
)
invalid("npy_bad_version.npy", raw_npy(hdr(), version=(4, 0)), "header", "npy header: unsupported format version 4.0")
invalid("npy_bad_minor.npy", raw_npy(hdr(), version=(1, 1)), "header", "npy header: unsupported format version 1.1")
invalid("npy_magic_only.npy", b"\x93NUMPY\x01", "header", "npy header: file too short for the npy preamble (7 bytes)")
invalid(
    "npy_v2_short_preamble.npy", b"\x93NUMPY\x02\x00\x10\x00\x00", "header",
    "npy header: file too short for the npy preamble (11 bytes)",
)
g = hdr() + " xyz"
invalid(
    "npy_header_garbage.npy", raw_npy(g), "header",
    "npy header: unexpected \"x\" at byte %d" % g.index("xyz"),
)
invalid("npy_header_not_dict.npy", raw_npy("[1, 2]"), "header", "npy header: not a dict literal")
invalid("npy_header_empty.npy", raw_npy("", pad=False), "header", "npy header: unexpected end of header at byte 0")
invalid(
    "npy_header_missing_key.npy", raw_npy("{'descr': '<i8', 'shape': (3, 2)}"), "header",
    'npy header: keys must be descr, fortran_order, shape; got ["descr", "shape"]',
)
invalid(
    "npy_header_extra_key.npy", raw_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 2), 'x': 1}"),
    "header", 'npy header: keys must be descr, fortran_order, shape; got ["descr", "fortran_order", "shape", "x"]',
)
d = "{'descr': '<i8', 'descr': '<i8', 'shape': (0, 2)}"
invalid(
    "npy_header_dup_key.npy", raw_npy(d), "header",
    'npy header: duplicate key "descr" at byte %d' % d.index("'descr'", 2),
)
e = "{'descr': '<i\\x38', 'fortran_order': False, 'shape': (0, 2)}"
invalid("npy_header_escape.npy", raw_npy(e), "header", "npy header: escape in string at byte %d" % e.index("\\"))
u = "{'descr': '<i8, 'fortran_order': False, 'shape': (0, 2)}"
invalid(
    "npy_header_bad_quotes.npy", raw_npy(u), "header",
    "npy header: unexpected \"f\" at byte %d" % u.index("fortran"),
)
u2 = "{'descr': '<i8"
invalid("npy_header_unterminated.npy", raw_npy(u2), "header", "npy header: unterminated string at byte 10")
p2 = hdr(shape="(3L, 2L)")
invalid("npy_header_py2_long.npy", raw_npy(p2), "header", "npy header: unexpected \"L\" at byte %d" % p2.index("L"))
invalid(
    "npy_header_fortran_int.npy", raw_npy(hdr(fortran="0")), "header",
    "npy header: fortran_order is not True or False",
)
f2 = hdr(fortran="false")
invalid(
    "npy_header_unknown_name.npy", raw_npy(f2), "header",
    "npy header: unknown name \"false\" at byte %d" % f2.index("false"),
)
b2 = hdr(shape="(99999999999999999999, 2)")
invalid(
    "npy_header_bigint.npy", raw_npy(b2), "header",
    "npy header: integer at byte %d does not fit in int64" % b2.index("9999"),
)
n2 = "{'descr': " + "[" * 20
invalid("npy_header_nesting.npy", raw_npy(n2), "header", "npy header: nesting deeper than 16 at byte %d" % (len(n2) - 5))
k2 = "{1: '<i8'}"
invalid("npy_header_int_key.npy", raw_npy(k2), "header", "npy header: dict key at byte 1 is not a string")
c2 = "{'descr' '<i8'}"
invalid("npy_header_missing_colon.npy", raw_npy(c2), "header", "npy header: unexpected \"'\" at byte 9")
m2 = hdr(shape="(-, 2)")
invalid("npy_header_lone_minus.npy", raw_npy(m2), "header", "npy header: unexpected \",\" at byte %d" % (m2.index("(-") + 2))


def main():
    keep = set(files) | {"expected.json", os.path.basename(__file__)}
    for old in os.listdir(HERE):
        if old not in keep and (old.endswith(".txt") or old.endswith(".npy")):
            os.remove(os.path.join(HERE, old))
    for name, content in files.items():
        with open(os.path.join(HERE, name), "wb") as fh:
            fh.write(content)
    doc = {
        "about": "Dataset index corpus; regenerate with make_corpus.py. 'message' is the exact error "
        "text after the 'index <path>: ' prefix; 'line' is 1-based (text), 'row' 0-based (npy).",
        "kinds": {
            "negative": "a value below 0",
            "overflow": "a value above the int64 maximum",
            "range_overflow": "offset + length above the int64 maximum",
            "past_end": "offset + length past the end of the data file",
            "fields": "a text line without exactly 2 fields",
            "not_decimal": "a text field that is not an optional sign and ASCII digits",
            "dtype": "npy dtype other than <i8, <u8, <i4, <u4",
            "shape": "npy shape other than (N, 2)",
            "fortran_order": "npy array in Fortran order",
            "truncated": "npy body shorter than the shape says",
            "trailing_data": "bytes after the npy body",
            "header": "malformed npy preamble or header",
            "header_too_large": "npy header over 1 MiB",
        },
        "files": {k: expected[k] for k in sorted(expected)},
    }
    with open(os.path.join(HERE, "expected.json"), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")
    print("wrote %d files to %s" % (len(files), HERE), file=sys.stderr)


if __name__ == "__main__":
    main()
