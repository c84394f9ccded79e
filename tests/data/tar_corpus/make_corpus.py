#!/usr/bin/env python3
"""Regenerate the tar member index corpus in runtime/objects/testdata/tar/.

Run from anywhere: ``python3 tests/data/tar_corpus/make_corpus.py``. It
rewrites every ``*.tar`` file of the corpus and ``expected.json``, which gives
for each file either

  {"members": [[name, offset, size, sha256], ...]}

the regular-file members in archive order, as Python's tarfile lists them
(``TarInfo.name``, ``.offset_data``, ``.size``; ``isreg()`` members only) with
the sha256 of the bytes at [offset, offset+size), checked here against the
content the generator put in; or

  {"error": phrase, "offset": n}

the stable phrase the Go error message must start with and the byte offset it
must name (the first header block of the failing entry). The Go test
(runtime/objects/tar_test.go, TestParseTar_Corpus) checks every file against
this. Standard library only; the output is byte for byte deterministic.

Well-formed archives are written by tarfile itself (USTAR, GNU and PAX
formats); V7 archives, unusual typeflags and broken files are tarfile output
patched block by block (checksums recomputed unless the point is a bad one).
Python's tarfile is more lenient than the Go parser on broken input (it stops
silently at a bad header after the first member), so error entries are written
by hand here, not computed.
"""

import hashlib
import io
import json
import os
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "..", "runtime", "objects", "testdata", "tar")
MAX_FILE = 20 * 1024
MTIME = 1700000000

files = {}  # name -> bytes
expected = {}  # name -> dict


def content(tag, n):
    """n deterministic pseudo-random bytes, different for each tag."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{tag}:{i}".encode()).digest()
        i += 1
    return bytes(out[:n])


def sha(b):
    return hashlib.sha256(b).hexdigest()


def info(name, size=0, type=tarfile.REGTYPE, linkname="", pax=None, **kw):
    ti = tarfile.TarInfo(name)
    ti.size = size
    ti.type = type
    ti.linkname = linkname
    ti.mtime = MTIME
    ti.mode = 0o755 if type == tarfile.DIRTYPE else 0o644
    ti.uid = ti.gid = 1000
    ti.uname = ti.gname = "user"
    if pax:
        ti.pax_headers = dict(pax)
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


def reg(name, n, pax=None, data=None):
    """A regular member of n bytes; returns (TarInfo, data)."""
    if data is None:
        data = content(name, n)
    return (info(name, len(data), pax=pax), data)


def other(name, type, linkname="", **kw):
    """A non-regular member (no data)."""
    return (info(name, 0, type, linkname, **kw), None)


def build(fmt, entries, pax_headers=None):
    """The archive tarfile writes for entries, padded to its 10 KiB record."""
    buf = io.BytesIO()
    with tarfile.TarFile(fileobj=buf, mode="w", format=fmt, pax_headers=pax_headers) as tf:
        for ti, data in entries:
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def listing(data):
    """(name, offset_data, size, sha256) of tarfile's regular members."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        out = []
        for ti in tf.getmembers():
            if ti.isreg():
                body = data[ti.offset_data : ti.offset_data + ti.size]
                assert len(body) == ti.size, (ti.name, "truncated")
                out.append([ti.name, ti.offset_data, ti.size, sha(body)])
        return out


def entry_offsets(data):
    """TarInfo.offset (first header block, extended headers included) of every entry."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        return [ti.offset for ti in tf.getmembers()]


def header_offsets(data):
    """Offset of the real header block (after pax / long-name entries) of every entry."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        return [ti.offset_data - 512 for ti in tf.getmembers()]


def fix_checksum(buf, off):
    blk = bytearray(buf[off : off + 512])
    blk[148:156] = b" " * 8
    buf[off + 148 : off + 156] = b"%06o\x00 " % sum(blk)


def patch(buf, off, field_start, value, checksum=True):
    """Overwrite bytes of the header block at off, then fix its checksum."""
    buf[off + field_start : off + field_start + len(value)] = value
    if checksum:
        fix_checksum(buf, off)


def valid(name, data, want):
    """A file the parser must accept; want is [(member name, bytes)] in order."""
    got = listing(data)
    assert [(m[0], m[3]) for m in got] == [(n, sha(b)) for n, b in want], (name, got)
    files[name] = data
    expected[name] = {"members": got}


def valid_manual(name, data, members):
    """A valid file tarfile cannot list (it refuses a 0-byte file)."""
    files[name] = data
    expected[name] = {"members": members}


def invalid(name, data, phrase, offset):
    files[name] = bytes(data)
    expected[name] = {"error": phrase, "offset": offset}


def regulars(entries):
    return [(ti.name, d) for ti, d in entries if d is not None and ti.type == tarfile.REGTYPE]


SIZES = [0, 1, 511, 512, 513]


def main():
    # --- ustar: every size class, every skipped type between regular files.
    ustar = [reg(f"a{n}.bin", n) for n in SIZES] + [
        other("d/", tarfile.DIRTYPE),
        other("d/ln", tarfile.SYMTYPE, "../a1.bin"),
        other("d/hard", tarfile.LNKTYPE, "a513.bin"),
        other("fifo", tarfile.FIFOTYPE),
        other("chr", tarfile.CHRTYPE, devmajor=1, devminor=3),
        other("blk", tarfile.BLKTYPE, devmajor=8, devminor=0),
        reg("tail.bin", 7),
    ]
    ustar_sizes = build(tarfile.USTAR_FORMAT, ustar)
    valid("ustar_sizes.tar", ustar_sizes, regulars(ustar))

    # ustar splits a long path into the 155-byte prefix and the 100-byte name.
    long_path = "p" * 60 + "/" + "q" * 80 + "/file.txt"
    e = [reg(long_path, 513), reg("short", 1)]
    valid("ustar_prefix.tar", build(tarfile.USTAR_FORMAT, e), regulars(e))

    # --- GNU: names over 100 bytes in 'L' entries, long link targets in 'K'.
    e = [reg("g" * 150 + f"/{n}.bin", n) for n in SIZES] + [
        other("L" * 120 + "/", tarfile.DIRTYPE),
        other("link", tarfile.SYMTYPE, "t" * 200),
        reg("x" * 300, 3),
        reg("short.txt", 2),
    ]
    gnu = build(tarfile.GNU_FORMAT, e)
    valid("gnu_longnames.tar", gnu, regulars(e))

    # GNU base-256 size field (what GNU tar writes for sizes >= 8 GiB), here
    # for 513 bytes so that the file stays small.
    e = [reg("b256.bin", 513), reg("after.bin", 5)]
    b = bytearray(build(tarfile.GNU_FORMAT, e))
    patch(b, 0, 124, b"\x80" + (513).to_bytes(11, "big"))
    valid("gnu_base256_size.tar", bytes(b), regulars(e))

    # --- pax: long and non-ASCII names, a global header, a big pax entry.
    e = [
        reg("n" * 300 + ".bin", 513),
        reg("données/été.jpg", 511),
        reg("日本語/ファイル.txt", 512),
        reg("emoji_😀.bin", 1),
        reg("zero.bin", 0),
        reg("comment.bin", 9, pax={"comment": "c" * 600}),  # pax entry spans 2 blocks
        other("D" * 200 + "/", tarfile.DIRTYPE),
        other("sym", tarfile.SYMTYPE, "s" * 300),
        reg("last.bin", 100),
    ]
    valid("pax_longnames.tar", build(tarfile.PAX_FORMAT, e, pax_headers={"comment": "shard 0"}), regulars(e))

    # An explicit pax "size" record (agreeing with the ustar field).
    e = [reg("sized.bin", 1000, pax={"size": "1000"}), reg("next.bin", 3)]
    valid("pax_size_record.tar", build(tarfile.PAX_FORMAT, e), regulars(e))

    # The pax "size" record overrides the ustar size field (zeroed here): how
    # members of 8 GiB and more are stored.
    b = bytearray(build(tarfile.PAX_FORMAT, e))
    h = header_offsets(bytes(b))[0]
    patch(b, h, 124, b"00000000000\x00")
    valid("pax_size_override.tar", bytes(b), regulars(e))

    # --- V7: no magic, no user/group names, typeflag '\0' for regular files,
    # and the pre-POSIX directory ('\0' with a trailing slash).
    e = [reg("v0.bin", 0), reg("v1.bin", 1), other("olddir/", tarfile.DIRTYPE),
         reg("v511.bin", 511), reg("v512.bin", 512), reg("v513.bin", 513)]
    b = bytearray(build(tarfile.USTAR_FORMAT, e))
    for i, off in enumerate(header_offsets(bytes(b))):
        b[off + 257 : off + 500] = bytes(243)  # magic, version, uname, gname, dev, prefix
        if i != 3:  # keep '0' on v511.bin: V7 readers accept both
            b[off + 156] = 0
        fix_checksum(b, off)
    valid("v7.tar", bytes(b), regulars(e))

    # --- typeflags: '7' contiguous file is regular; unknown ones are skipped
    # with their data stepped over.
    e = [reg("c.bin", 513), reg("z.bin", 700), reg("v.bin", 0), reg("after.bin", 11)]
    b = bytearray(build(tarfile.GNU_FORMAT, e))
    offs = header_offsets(bytes(b))
    patch(b, offs[0], 156, b"7")
    patch(b, offs[1], 156, b"Z")
    patch(b, offs[2], 156, b"V")  # GNU volume label
    valid("typeflags.tar", bytes(b), [("c.bin", e[0][1]), ("after.bin", e[3][1])])

    # --- names are kept as stored; duplicates are all listed.
    e = [other("./", tarfile.DIRTYPE), reg("./a.jpg", 600), reg("./a.cls", 1),
         reg("./a.cls", 2, data=b"42"), reg("b/../c.txt", 4), reg("/abs.txt", 3)]
    valid("dot_slash_dups.tar", build(tarfile.USTAR_FORMAT, e), regulars(e))

    # --- archive boundaries.
    valid("empty.tar", build(tarfile.USTAR_FORMAT, []), [])
    valid_manual("empty_0_bytes.tar", b"", [])
    valid("one_zero_block.tar", bytes(512), [])
    e = [reg("a.txt", 5), reg("b.txt", 600)]
    full = build(tarfile.USTAR_FORMAT, e)
    valid("trailing_garbage.tar", full + b"this is not tar data\n" * 20, regulars(e))
    end = 512 + 512 + 512 + 1024  # a.txt header+data, b.txt header+data
    valid("no_end_marker.tar", full[:end], regulars(e))

    # --- broken files.
    # GNU tar and tarfile refuse a last member without its padding.
    invalid("no_padding.tar", full[: end - 1024 + 600], "truncated archive", 1024)
    invalid("partial_trailing_block.tar", full[:end] + bytes(300), "truncated archive", end)
    # A pax entry with no header after it: at the end of the file, or before
    # the end-of-archive marker.
    pax = build(tarfile.PAX_FORMAT, [reg("ok.bin", 3), reg("p" * 300, 0)])
    dangling = entry_offsets(pax)[1]
    invalid("dangling_pax.tar", pax[: dangling + 1024], "truncated archive", dangling)
    invalid("dangling_pax_then_marker.tar", pax[: dangling + 1024] + bytes(1024), "truncated archive", dangling)

    ust_offs = entry_offsets(ustar_sizes)
    invalid("truncated_first_header.tar", ustar_sizes[:300], "truncated archive", 0)
    invalid("truncated_header.tar", ustar_sizes[: ust_offs[2] + 100], "truncated archive", ust_offs[2])
    last = entry_offsets(full)[1]
    invalid("truncated_data.tar", full[: last + 512 + 100], "truncated archive", last)

    pax = build(tarfile.PAX_FORMAT, [reg("p" * 300, 10), reg("q" * 300, 10)])
    second = entry_offsets(pax)[1]
    invalid("truncated_pax.tar", pax[: second + 512 + 50], "truncated archive", second)
    second = entry_offsets(gnu)[1]
    invalid("truncated_longname.tar", gnu[: second + 512 + 50], "truncated archive", second)

    e = [reg("tiny.bin", 5, pax={"size": "10000000000"})]  # pax says 10 GB
    b = build(tarfile.PAX_FORMAT, e)
    invalid("pax_size_past_end.tar", b, "truncated archive", 0)

    b = bytearray(ustar_sizes)
    b[ust_offs[1] + 3] ^= 0x20  # a name byte, checksum not fixed
    invalid("bad_checksum.tar", b, "invalid header", ust_offs[1])
    b = bytearray(ustar_sizes)
    b[0] ^= 0x01
    invalid("bad_checksum_first.tar", b, "invalid header", 0)
    b = bytearray(ustar_sizes)
    patch(b, ust_offs[1], 124, b"0000000x777\x00")  # not octal, checksum fixed
    invalid("garbage_size.tar", b, "invalid header", ust_offs[1])
    b = bytearray(ustar_sizes)
    patch(b, ust_offs[1], 124, b"\xff" * 12)  # base-256 -1
    invalid("negative_size.tar", b, "invalid header", ust_offs[1])
    b = bytearray(ustar_sizes)
    patch(b, ust_offs[1], 148, b"\x00" * 8, checksum=False)  # no checksum at all
    invalid("no_checksum.tar", b, "invalid header", ust_offs[1])
    invalid("zero_block_then_header.tar", bytes(512) + ustar_sizes, "invalid header", 0)
    invalid("garbage.tar", content("garbage", 2048), "invalid header", 0)

    b = build(tarfile.PAX_FORMAT, [reg("ok.bin", 1), reg("nul.bin", 1, pax={"path": "a\x00b"})])
    invalid("pax_nul_in_path.tar", b, "invalid header", 1024)  # after ok.bin's header and data
    b = bytearray(build(tarfile.PAX_FORMAT, [reg("bad.bin", 1, pax={"size": "12"})]))
    i = b.index(b" size=12\n")
    b[i : i + 9] = b" size=1a\n"  # same length, not a number
    invalid("pax_bad_size.tar", b, "invalid header", 0)
    b = bytearray(build(tarfile.PAX_FORMAT, [reg("bad.bin", 1, pax={"comment": "x"})]))
    i = b.index(b" comment=x\n")
    b[i - 2 : i] = b"99"  # record length past the end of the pax data
    invalid("pax_bad_record.tar", b, "invalid header", 0)

    # GNU sparse, old format: typeflag 'S', map in the header (one 512-byte
    # piece at 0), real size 4096.
    e = [reg("ok.bin", 3), reg("sparse.bin", 512)]
    b = bytearray(build(tarfile.GNU_FORMAT, e))
    h = header_offsets(bytes(b))[1]
    b[h + 156] = ord("S")
    b[h + 386 : h + 410] = b"%011o\x00%011o\x00" % (0, 512)
    b[h + 482] = 0
    b[h + 483 : h + 495] = b"%011o\x00" % 4096
    fix_checksum(b, h)
    invalid("gnu_sparse_old.tar", b, "unsupported member", h)

    # GNU sparse in pax, format 1.0 (map at the start of the data) and 0.1
    # (map in a record), as GNU tar --sparse --format=posix writes them.
    e = [reg("ok.bin", 3), reg("GNUSparseFile.0/sparse.bin", 1024,
         data=b"1\n0\n512\n".ljust(512, b"\x00") + content("sparse10", 512),
         pax={"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
              "GNU.sparse.name": "sparse.bin", "GNU.sparse.realsize": "4096"})]
    b = build(tarfile.PAX_FORMAT, e)
    invalid("pax_sparse_1_0.tar", b, "unsupported member", entry_offsets(b)[1])
    e = [reg("sparse01.bin", 512, pax={"GNU.sparse.numblocks": "1", "GNU.sparse.map": "0,512",
                                          "GNU.sparse.name": "sparse01.bin", "GNU.sparse.size": "4096"})]
    invalid("pax_sparse_0_1.tar", build(tarfile.PAX_FORMAT, e), "unsupported member", 0)

    e = [reg("ok.bin", 3), reg("", 4)]
    b = build(tarfile.USTAR_FORMAT, e)
    invalid("empty_name.tar", b, "invalid name", entry_offsets(b)[1])

    e = [reg("ok.bin", 3), reg("big.bin", 1)]
    b = bytearray(build(tarfile.GNU_FORMAT, e))
    h = header_offsets(bytes(b))[1]
    patch(b, h, 124, b"%011o\x00" % 1000000)
    patch(b, h, 156, b"Z")  # a skipped type whose data still must fit
    invalid("skipped_data_past_end.tar", b, "truncated archive", h)

    write()


def write():
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        if old.endswith(".tar"):
            os.remove(os.path.join(OUT, old))
    for name, data in sorted(files.items()):
        assert len(data) <= MAX_FILE, (name, len(data))
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        # One file per line, one member per line: diffs stay readable.
        lines = []
        for name, e in sorted(expected.items()):
            key = json.dumps(name)
            if "error" in e:
                lines.append(f" {key}: {json.dumps(e, ensure_ascii=False)}")
            elif not e["members"]:
                lines.append(f' {key}: {{"members": []}}')
            else:
                rows = ",\n".join("  " + json.dumps(m, ensure_ascii=False) for m in e["members"])
                lines.append(f' {key}: {{"members": [\n{rows}\n ]}}')
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    main()
