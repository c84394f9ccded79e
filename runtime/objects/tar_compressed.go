package objects

import (
	"bytes"
	"io"
)

// Compressed shards. WebDataset writes .tar.gz (and .tar.zst) shards as
// readily as plain ones, but a compressed archive has no member at a fixed
// byte range, so MemTier cannot serve it. Without this check its first
// block fails the header checksum and the caller reads "invalid header" or
// "truncated archive" with no hint that the file is simply compressed.

// compressMagics are the leading bytes of the compressed formats tar shards
// come in, from each format's specification: gzip (RFC 1952, section 2.3.1),
// zstd (RFC 8878, section 3.1.1), bzip2 ("BZh" + block size digit), xz (the
// .xz file format, section 2.1.1.1) and lz4 frames (the LZ4 frame format).
var compressMagics = []struct {
	name  string
	magic []byte
	tool  string
}{
	{"gzip", []byte{0x1f, 0x8b}, "gunzip"},
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}, "unzstd"},
	{"bzip2", []byte("BZh"), "bunzip2"},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, "unxz"},
	{"lz4", []byte{0x04, 0x22, 0x4d, 0x18}, "unlz4"},
}

// tarCompressed returns a "compressed archive" errs.Format error when the
// first bytes of r are a compression format's magic, else nil. It is called
// only after the first entry failed to parse, so a valid archive whose first
// member name happens to start with those bytes is never refused.
func tarCompressed(r io.ReaderAt, size int64) error {
	var head [8]byte
	n, _ := r.ReadAt(head[:min(int64(len(head)), size)], 0)
	for _, m := range compressMagics {
		if n >= len(m.magic) && bytes.Equal(head[:len(m.magic)], m.magic) {
			return tarErr(0, "compressed archive: the file is %s-compressed (it starts with % x); "+
				"MemTier reads members of uncompressed tar shards by byte range, so decompress it first (%s)",
				m.name, m.magic, m.tool)
		}
	}
	return nil
}
