package diskcache

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// Entries written with each piece checksum kind are served by a Cache that
// writes another (the kind is the entry's own, header [6, 8)), and a
// flipped payload byte is found under every kind; an unknown kind is a
// corrupt entry.
func TestPieceChecksumKinds(t *testing.T) {
	defer func(w func() uint16) { writeSum = w }(writeSum)
	for kind := uint16(0); kind < numSumKinds; kind++ {
		want := pattern(2*pieceBlock+77, 51+byte(kind))
		srv := newObjServer(t, want, `"k"`)
		dir := t.TempDir()
		o := Options{Dir: dir, Synchronous: true, BlockBytes: pieceBlock}
		writeSum = func() uint16 { return kind }
		newStack(t, testOptions(), o).read(t, srv.url(), 0, uint64(len(want)))
		other := (kind + 1) % numSumKinds
		writeSum = func() uint16 { return other }
		s := newStack(t, testOptions(), o)
		if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
			t.Fatalf("kind %d: bytes differ", kind)
		}
		if st := s.c.Stats(); st.HitBlocks != 3 || st.MissBlocks != 0 || st.CorruptEntries != 0 {
			t.Fatalf("kind %d read by a Cache writing kind %d: %+v, want 3 hits", kind, other, st)
		}
		k := s.keyOf(t, srv.url())
		if err := flipByte(s.c.path(k.fileName(1)), headerAlign+5*pieceBytes+9); err != nil {
			t.Fatal(err)
		}
		s2 := newStack(t, testOptions(), o)
		if got := s2.read(t, srv.url(), pieceBlock, pieceBlock); !bytes.Equal(got, want[pieceBlock:2*pieceBlock]) {
			t.Fatalf("kind %d: bytes differ after the flip", kind)
		}
		if st := s2.c.Stats(); st.CorruptEntries != 1 || st.MissBlocks != 1 {
			t.Fatalf("kind %d, flipped byte: %+v, want 1 corrupt, 1 miss", kind, st)
		}
	}
	k, _ := NewKey("id", "etag:x", 10)
	h := encodeHeader(&k, 0, 10, pieceCRCs(make([]byte, 10)))
	h[6] = numSumKinds
	binary.LittleEndian.PutUint32(h[len(h)-4:], crc32.Checksum(h[:len(h)-4], castagnoli))
	if _, err := decodeHeader(h); err == nil || !strings.Contains(err.Error(), "checksum kind 3") {
		t.Fatalf("checksum kind 3: decoded (%v)", err)
	}
}

// A piece fed to pieceDigest in parts sums to sumOf of the whole, for every
// kind (ReadSegs checks pieces read into scattered buffers), and the digest
// starts the next piece afresh; the kinds' values are the reference ones.
func TestPieceDigestParts(t *testing.T) {
	data := pattern(3*pieceBytes+1000, 7)
	for k := uint16(0); k < numSumKinds; k++ {
		d := pieceDigest{kind: k}
		for rep := 0; rep < 2; rep++ {
			for _, cut := range [][]int{{0, 1, 4096, 65535}, {0, 30000}, {0}} {
				piece := data[rep*pieceBytes : (rep+1)*pieceBytes]
				for i, c := range cut {
					end := len(piece)
					if i+1 < len(cut) {
						end = cut[i+1]
					}
					d.write(piece[c:end])
				}
				if got, want := d.sum(), sumOf(k, piece); got != want {
					t.Fatalf("kind %d, piece %d, cuts %v: %08x, want %08x", k, rep, cut, got, want)
				}
			}
		}
	}
	// Reference values of "abc" (CRC-32C: RFC 3720's check; CRC-32: the
	// zlib one; XXH3-64 with seed 0: 0x78af5f94892f3950, the xxHash
	// project's value, low 32 bits).
	for k, want := range map[uint16]uint32{sumCastagnoli: 0x364b3fb7, sumIEEE: 0x352441c2, sumXXH3: 0x892f3950} {
		if got := sumOf(k, []byte("abc")); got != want {
			t.Errorf("kind %d of \"abc\": %08x, want %08x", k, got, want)
		}
	}
	if k := pickWriteSum(); !knownSum(k) {
		t.Fatalf("pickWriteSum: kind %d", k)
	}
}
