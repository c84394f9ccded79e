package diskcache

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
)

// Entries written with either piece checksum are served by a Cache that
// writes the other (the kind is the entry's own, header [6, 8)), and a
// flipped payload byte is found under both; an unknown kind is a corrupt
// entry.
func TestPieceChecksumKinds(t *testing.T) {
	defer func(w uint16) { writeSum = w }(writeSum)
	for _, kind := range []uint16{sumCastagnoli, sumIEEE} {
		want := pattern(2*pieceBlock+77, 51+byte(kind))
		srv := newObjServer(t, want, `"k"`)
		dir := t.TempDir()
		o := Options{Dir: dir, Synchronous: true, BlockBytes: pieceBlock}
		writeSum = kind
		newStack(t, testOptions(), o).read(t, srv.url(), 0, uint64(len(want)))
		writeSum = 1 - kind
		s := newStack(t, testOptions(), o)
		if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
			t.Fatalf("kind %d: bytes differ", kind)
		}
		if st := s.c.Stats(); st.HitBlocks != 3 || st.MissBlocks != 0 || st.CorruptEntries != 0 {
			t.Fatalf("kind %d read by a Cache writing kind %d: %+v, want 3 hits", kind, 1-kind, st)
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
	h[6] = 2
	binary.LittleEndian.PutUint32(h[len(h)-4:], crc32.Checksum(h[:len(h)-4], castagnoli))
	if _, err := decodeHeader(h); err == nil || !strings.Contains(err.Error(), "checksum kind") {
		t.Fatal("checksum kind 2: decoded")
	}
}
