package diskcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// On-disk entry format, version 2. One file holds one block of one object
// version:
//
//	[0, 4)     magic "MTDC"
//	[4, 6)     format version (2), little endian like every field
//	[6, 8)     piece checksum kind: 0 CRC-32C (Castagnoli), 1 CRC-32 (IEEE),
//	           2 XXH3-64 truncated to its low 32 bits (sum.go)
//	[8, 12)    header length = payload offset, a multiple of 4096 bytes
//	[12, 16)   payload length, bytes
//	[16, 24)   payload's byte offset in the object
//	[24, 32)   object size, bytes
//	[32, 36)   piece length P, bytes (pieceBytes)
//	[36, 38)   length of the identity text
//	[38, 40)   length of the validator text
//	[40, 40+4n) the checksum of each piece of the payload: piece i
//	           is payload bytes [i*P, min((i+1)*P, length)), n = ceil(length/P)
//	...        identity text, then validator text (Key.display, Key.Validator)
//	... zero padding ...
//	[hdr-4, hdr) CRC-32C of header bytes [0, hdr-4)
//	[hdr, hdr+payload) the payload
//
// A read checks the header and only the pieces that overlap the bytes it
// needs, so a small range of a 4 MiB block costs its piece or two, not
// the whole payload. (Version 1 held one CRC-32C of the whole payload at
// [32, 36): its entries are misses, deleted and fetched again, see
// errOldFormat.)
//
// The payload starts on a 4096-byte boundary so that its copy out of the
// page cache is page aligned. A file whose size is not header+payload is
// torn; any mismatch of magic, version, checksums or the expected key,
// offset, length and object size makes the entry corrupt.
const (
	magic         = "MTDC"
	formatVersion = 2
	fixedHeader   = 40
	headerAlign   = 4096
	maxTextBytes  = 1 << 15 // identity + validator; longer keys are not cached
	// pieceBytes is the payload's checksum granularity: a read verifies
	// (and so reads) whole pieces. 64 KiB: a dataset sample of a tar
	// shard (16-112 KiB) costs one to three pieces, and the table of a
	// MaxBlockBytes entry is 4 KiB.
	pieceBytes = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errOldFormat: an entry of an older format version (not corrupt, but
// never served: a miss, deleted and fetched again).
var errOldFormat = errors.New("entry of an older format version")

// header is an entry's decoded header.
type header struct {
	hdrLen     uint32
	payloadLen uint32
	off        uint64
	objSize    uint64
	pieceLen   uint32
	sum        uint16   // piece checksum kind: sumCastagnoli, sumIEEE or sumXXH3
	crcs       []uint32 // one per piece (sumOf(sum, piece))
	id, val    string
}

// numPieces is the number of pieces of a payload of n bytes.
func numPieces(n int) int { return (n + pieceBytes - 1) / pieceBytes }

// pieceCRCs returns the checksum (writeSum) of each piece of data.
func pieceCRCs(data []byte) []uint32 {
	crcs, k := make([]uint32, numPieces(len(data))), writeSum()
	for i := range crcs {
		crcs[i] = sumOf(k, data[i*pieceBytes:min((i+1)*pieceBytes, len(data))])
	}
	return crcs
}

// headerLen is the header size, in bytes, of an entry for key holding a
// payload of payloadLen bytes.
func headerLen(k *Key, payloadLen int) int {
	n := fixedHeader + 4*numPieces(payloadLen) + len(k.display) + len(k.Validator) + 4
	return (n + headerAlign - 1) / headerAlign * headerAlign
}

// encodeHeader returns the header of an entry of k holding a payload of
// payloadLen bytes (with piece checksums crcs of kind writeSum, see
// pieceCRCs) at off.
func encodeHeader(k *Key, off uint64, payloadLen int, crcs []uint32) []byte {
	if len(crcs) != numPieces(payloadLen) {
		panic(fmt.Sprintf("diskcache: %d piece checksums for %d bytes", len(crcs), payloadLen))
	}
	n := headerLen(k, payloadLen)
	b := make([]byte, n)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[4:], formatVersion)
	binary.LittleEndian.PutUint16(b[6:], writeSum())
	binary.LittleEndian.PutUint32(b[8:], uint32(n))
	binary.LittleEndian.PutUint32(b[12:], uint32(payloadLen))
	binary.LittleEndian.PutUint64(b[16:], off)
	binary.LittleEndian.PutUint64(b[24:], k.Size)
	binary.LittleEndian.PutUint32(b[32:], pieceBytes)
	binary.LittleEndian.PutUint16(b[36:], uint16(len(k.display)))
	binary.LittleEndian.PutUint16(b[38:], uint16(len(k.Validator)))
	p := fixedHeader
	for _, c := range crcs {
		binary.LittleEndian.PutUint32(b[p:], c)
		p += 4
	}
	copy(b[p:], k.display)
	copy(b[p+len(k.display):], k.Validator)
	binary.LittleEndian.PutUint32(b[n-4:], crc32.Checksum(b[:n-4], castagnoli))
	return b
}

// decodeFixed reads the fixed part of a header from b (at least
// fixedHeader bytes) and returns the header length it claims. An entry of
// an older format version is errOldFormat.
func decodeFixed(b []byte) (uint32, error) {
	if len(b) < fixedHeader || string(b[:4]) != magic {
		return 0, fmt.Errorf("bad magic")
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != formatVersion {
		if v >= 1 && v < formatVersion {
			return 0, errOldFormat
		}
		return 0, fmt.Errorf("format version %d, want %d", v, formatVersion)
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if n < headerAlign || n%headerAlign != 0 || n > 16*headerAlign {
		return 0, fmt.Errorf("header length %d", n)
	}
	return n, nil
}

// decodeHeader decodes a whole header (len(b) == its header length) and
// checks its CRC.
func decodeHeader(b []byte) (header, error) {
	var h header
	n, err := decodeFixed(b)
	if err != nil {
		return h, err
	}
	if uint32(len(b)) != n {
		return h, fmt.Errorf("header is %d bytes, claims %d", len(b), n)
	}
	if got, want := crc32.Checksum(b[:n-4], castagnoli), binary.LittleEndian.Uint32(b[n-4:]); got != want {
		return h, fmt.Errorf("header checksum %08x, want %08x", got, want)
	}
	h.hdrLen = n
	if h.sum = binary.LittleEndian.Uint16(b[6:]); !knownSum(h.sum) {
		return h, fmt.Errorf("piece checksum kind %d", h.sum)
	}
	h.payloadLen = binary.LittleEndian.Uint32(b[12:])
	h.off = binary.LittleEndian.Uint64(b[16:])
	h.objSize = binary.LittleEndian.Uint64(b[24:])
	h.pieceLen = binary.LittleEndian.Uint32(b[32:])
	if h.pieceLen != pieceBytes {
		return h, fmt.Errorf("piece length %d, want %d", h.pieceLen, pieceBytes)
	}
	np := numPieces(int(h.payloadLen))
	il, vl := int(binary.LittleEndian.Uint16(b[36:])), int(binary.LittleEndian.Uint16(b[38:]))
	if fixedHeader+4*np+il+vl > int(n)-4 {
		return h, fmt.Errorf("%d piece checksums and texts of %d+%d bytes do not fit the header", np, il, vl)
	}
	h.crcs = make([]uint32, np)
	p := fixedHeader
	for i := range h.crcs {
		h.crcs[i] = binary.LittleEndian.Uint32(b[p:])
		p += 4
	}
	h.id = string(b[p : p+il])
	h.val = string(b[p+il : p+il+vl])
	return h, nil
}

// matches reports why h is not the header of the entry of k at off with
// length n ("" when it is).
func (h *header) mismatch(k *Key, off uint64, n int) string {
	switch {
	case h.id != k.display:
		return "another object's entry"
	case h.val != k.Validator:
		return "another version's entry"
	case h.objSize != k.Size:
		return fmt.Sprintf("object size %d, want %d", h.objSize, k.Size)
	case h.off != off:
		return fmt.Sprintf("offset %d, want %d", h.off, off)
	case h.payloadLen != uint32(n):
		return fmt.Sprintf("payload %d bytes, want %d", h.payloadLen, n)
	}
	return ""
}
