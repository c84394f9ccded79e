package diskcache

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// On-disk entry format, version 1. One file holds one block of one object
// version:
//
//	[0, 4)     magic "MTDC"
//	[4, 6)     format version (1), little endian like every field
//	[6, 8)     reserved, 0
//	[8, 12)    header length = payload offset, a multiple of 4096 bytes
//	[12, 16)   payload length, bytes
//	[16, 24)   payload's byte offset in the object
//	[24, 32)   object size, bytes
//	[32, 36)   CRC-32C (Castagnoli) of the payload
//	[36, 38)   length of the identity text
//	[38, 40)   length of the validator text
//	[40, ...)  identity text, then validator text (Key.display, Key.Validator)
//	... zero padding ...
//	[hdr-4, hdr) CRC-32C of header bytes [0, hdr-4)
//	[hdr, hdr+payload) the payload
//
// The payload starts on a 4096-byte boundary so that its copy out of the
// page cache is page aligned. A file whose size is not header+payload is
// torn; any mismatch of magic, version, checksums or the expected key,
// offset, length and object size makes the entry corrupt.
const (
	magic         = "MTDC"
	formatVersion = 1
	fixedHeader   = 40
	headerAlign   = 4096
	maxTextBytes  = 1 << 15 // identity + validator; longer keys are not cached
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is an entry's decoded header.
type header struct {
	hdrLen     uint32
	payloadLen uint32
	off        uint64
	objSize    uint64
	crc        uint32
	id, val    string
}

// headerLen is the header size, in bytes, of an entry for key.
func headerLen(k *Key) int {
	n := fixedHeader + len(k.display) + len(k.Validator) + 4
	return (n + headerAlign - 1) / headerAlign * headerAlign
}

// encodeHeader returns the header of an entry of k holding payload (with
// CRC-32C crc) at off.
func encodeHeader(k *Key, off uint64, payloadLen int, crc uint32) []byte {
	n := headerLen(k)
	b := make([]byte, n)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[4:], formatVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(n))
	binary.LittleEndian.PutUint32(b[12:], uint32(payloadLen))
	binary.LittleEndian.PutUint64(b[16:], off)
	binary.LittleEndian.PutUint64(b[24:], k.Size)
	binary.LittleEndian.PutUint32(b[32:], crc)
	binary.LittleEndian.PutUint16(b[36:], uint16(len(k.display)))
	binary.LittleEndian.PutUint16(b[38:], uint16(len(k.Validator)))
	copy(b[fixedHeader:], k.display)
	copy(b[fixedHeader+len(k.display):], k.Validator)
	binary.LittleEndian.PutUint32(b[n-4:], crc32.Checksum(b[:n-4], castagnoli))
	return b
}

// decodeFixed reads the fixed part of a header from b (at least
// fixedHeader bytes) and returns the header length it claims.
func decodeFixed(b []byte) (uint32, error) {
	if len(b) < fixedHeader || string(b[:4]) != magic {
		return 0, fmt.Errorf("bad magic")
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != formatVersion {
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
	h.payloadLen = binary.LittleEndian.Uint32(b[12:])
	h.off = binary.LittleEndian.Uint64(b[16:])
	h.objSize = binary.LittleEndian.Uint64(b[24:])
	h.crc = binary.LittleEndian.Uint32(b[32:])
	il, vl := int(binary.LittleEndian.Uint16(b[36:])), int(binary.LittleEndian.Uint16(b[38:]))
	if fixedHeader+il+vl > int(n)-4 {
		return h, fmt.Errorf("texts of %d+%d bytes do not fit the header", il, vl)
	}
	h.id = string(b[fixedHeader : fixedHeader+il])
	h.val = string(b[fixedHeader+il : fixedHeader+il+vl])
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
