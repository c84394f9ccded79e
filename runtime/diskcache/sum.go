package diskcache

import (
	"hash/crc32"
	"sync"
	"time"

	"github.com/zeebo/xxh3"
)

// Piece checksums ([6, 8) of an entry's header, see entry.go). A reader
// checks an entry with the entry's own kind; a writer uses writeSum, the
// kind this CPU computes fastest. Every disk-cache hit checksums each byte
// it serves once, so the kind sets the cost of a second process's load
// beside a plain pread of a local file (bench_remote's disk-cache rows).
//
// Measured over 64 KiB pieces, GB/s on one core:
//
//	CPU                                   CRC-32C  CRC-32 (IEEE)  XXH3-64  memmove
//	AMD EPYC, AVX2, no AVX-512 (2026-12)      6.1           11.0     19.6     27.5
//	AMD EPYC with AVX-512 VPCLMULQDQ           24             33        -        -
//
// (Go's crc32 folds IEEE with VPCLMULQDQ only on AVX-512, and CRC-32C uses
// the SSE 4.2 instruction; github.com/zeebo/xxh3 uses AVX2 or AVX-512 where
// present and plain Go elsewhere, so on arm64 CRC-32C's instruction may win.)
// Since no single kind is fastest on every CPU, writeSum is measured once
// per process (pickWriteSum) at the first write, well under a millisecond.
//
// XXH3 is not a CRC: it detects any torn or flipped piece with probability
// 1 - 2^-32 per piece like the CRCs do for random damage (the checks exist
// to catch torn writes and media errors, not an adversary: an entry is
// only as trusted as the directory it sits in).
const (
	sumCastagnoli = 0
	sumIEEE       = 1
	sumXXH3       = 2 // the low 32 bits of XXH3-64 with seed 0
	numSumKinds   = 3
)

// knownSum reports whether k is a piece checksum kind this version reads.
// An entry of another kind (a newer writer's) is corrupt to this one: not
// served, deleted and refetched.
func knownSum(k uint16) bool { return k < numSumKinds }

// sumOf returns the checksum of kind k (knownSum) of b.
func sumOf(k uint16, b []byte) uint32 {
	switch k {
	case sumXXH3:
		return uint32(xxh3.Hash(b))
	case sumIEEE:
		return crc32.Checksum(b, crc32.IEEETable)
	default:
		return crc32.Checksum(b, castagnoli)
	}
}

// pieceDigest computes the checksum of kind k of a piece fed in several
// parts (ReadSegs reads a piece into scattered buffers); sum equals sumOf
// of the concatenated parts. Not safe for concurrent use.
type pieceDigest struct {
	kind uint16
	crc  uint32
	x    xxh3.Hasher // sumXXH3 only; by value, so a check allocates nothing
}

func (d *pieceDigest) write(b []byte) {
	switch d.kind {
	case sumXXH3:
		_, _ = d.x.Write(b)
	case sumIEEE:
		d.crc = crc32.Update(d.crc, crc32.IEEETable, b)
	default:
		d.crc = crc32.Update(d.crc, castagnoli, b)
	}
}

// sum returns the piece's checksum and starts the next piece.
func (d *pieceDigest) sum() uint32 {
	s := d.crc
	if d.kind == sumXXH3 {
		s = uint32(d.x.Sum64())
		d.x.Reset()
	}
	d.crc = 0
	return s
}

// writeSum returns the kind new entries get, picked on the first write of
// the process (not at library load: most processes open no disk cache).
// Tests replace it to write each kind.
var writeSum = sync.OnceValue(pickWriteSum)

// pickWriteSum times each kind over one 64 KiB piece, interleaved, and
// returns the fastest (the best of a few rounds, so a preemption during one
// does not decide it): about 0.2 ms once per process.
func pickWriteSum() uint16 {
	const rounds = 4
	buf := make([]byte, pieceBytes)
	for i := range buf {
		buf[i] = byte(i * 131)
	}
	var best [numSumKinds]time.Duration
	var sink uint32
	for r := 0; r < rounds; r++ {
		for k := uint16(0); k < numSumKinds; k++ {
			t := time.Now()
			sink ^= sumOf(k, buf)
			d := time.Since(t)
			if r == 0 || d < best[k] {
				best[k] = d
			}
		}
	}
	_ = sink
	pick := uint16(0)
	for k := uint16(1); k < numSumKinds; k++ {
		if best[k] < best[pick] {
			pick = k
		}
	}
	return pick
}
