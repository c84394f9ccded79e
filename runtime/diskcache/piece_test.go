package diskcache

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/remote"
)

// pieceBlock is the block size of the piece tests: 16 pieces.
const pieceBlock = 16 * pieceBytes

// keyOf returns the cache key of name as s sees it.
func (s *stack) keyOf(t testing.TB, name string) Key {
	t.Helper()
	o, _, err := s.src.Open(name, files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	k, ok := s.src.KeyOf(o.(*remote.Object))
	if !ok {
		t.Fatal("not cacheable")
	}
	return k
}

// TestPartialReadReadsOnlyItsPieces: a hit reads exactly the pieces that
// overlap the range asked for (a range of a block, across two blocks, the
// short last block, a whole block), and the header only on the first hit
// of its entry in this Cache (the descriptor stays open with it, fds.go).
func TestPartialReadReadsOnlyItsPieces(t *testing.T) {
	const P = pieceBytes
	want := pattern(3*pieceBlock+1000, 21)
	srv, s := secondProcess(t, want, `"p"`, pieceBlock)
	gets := srv.gets.Load()
	for _, c := range []struct {
		what      string
		off, n    uint64
		hits, got uint64 // blocks hit; bytes read from entries
	}{
		{"inside 3 pieces", pieceBlock + 3*P + 100, 2 * P, 1, headerAlign + 3*P},
		{"whole pieces", pieceBlock + 2*P, 4 * P, 1, 4 * P},
		{"one byte", 5, 1, 1, headerAlign + P},
		{"a sample in one piece", 2*pieceBlock + 9*P + 17, 16 << 10, 1, headerAlign + P},
		{"across two blocks", 2*pieceBlock - 100, 200, 2, 2 * P},
		{"short last block", uint64(len(want)) - 10, 10, 1, headerAlign + 1000},
		{"whole block", pieceBlock, pieceBlock, 1, pieceBlock},
		{"whole object", 0, uint64(len(want)), 4, uint64(len(want))},
	} {
		before := s.c.Stats()
		read0 := s.c.st.readBytes.Load()
		got := s.read(t, srv.url(), c.off, c.n)
		if !bytes.Equal(got, want[c.off:c.off+c.n]) {
			t.Fatalf("%s: bytes differ", c.what)
		}
		st := s.c.Stats()
		if d := s.c.st.readBytes.Load() - read0; d != c.got {
			t.Errorf("%s: read %d bytes of entries, want %d", c.what, d, c.got)
		}
		if st.HitBlocks-before.HitBlocks != c.hits || st.HitBytes-before.HitBytes != c.n || st.MissBlocks != 0 || st.CorruptEntries != 0 {
			t.Errorf("%s: stats %+v, want %d more hit blocks, %d more hit bytes", c.what, st, c.hits, c.n)
		}
	}
	if d := srv.gets.Load() - gets; d != 8 {
		t.Fatalf("%d GETs, want 8 (the Opens)", d)
	}
}

// TestCorruptPieceFoundByTheReadThatNeedsIt: a flipped byte in piece 7 of
// a block is not seen by a read of other pieces (which are intact and
// served), and is by the first read that covers piece 7: the entry is
// counted corrupt, deleted, refetched and rewritten, never served.
func TestCorruptPieceFoundByTheReadThatNeedsIt(t *testing.T) {
	const P = pieceBytes
	want := pattern(3*pieceBlock, 23)
	srv := newObjServer(t, want, `"cp"`)
	dir := t.TempDir()
	o := Options{Dir: dir, Synchronous: true, BlockBytes: pieceBlock}
	newStack(t, testOptions(), o).read(t, srv.url(), 0, uint64(len(want)))
	s := newStack(t, testOptions(), o)
	k := s.keyOf(t, srv.url())
	if err := flipByte(s.c.path(k.fileName(1)), headerAlign+7*P+5); err != nil {
		t.Fatal(err)
	}
	gets := srv.gets.Load()
	// Pieces 0-6 and 8-15 of block 1, in two reads: served, nothing seen.
	for _, r := range [][2]uint64{{pieceBlock, 7 * P}, {pieceBlock + 8*P + 1, 8*P - 1}} {
		if got := s.read(t, srv.url(), r[0], r[1]); !bytes.Equal(got, want[r[0]:r[0]+r[1]]) {
			t.Fatal("bytes differ")
		}
	}
	if st := s.c.Stats(); st.HitBlocks != 2 || st.MissBlocks != 0 || st.CorruptEntries != 0 || st.WrittenEntries != 0 {
		t.Fatalf("reads beside the flipped piece: %+v, want 2 hits and nothing else", st)
	}
	if d := srv.gets.Load() - gets; d != 2 {
		t.Fatalf("%d GETs, want 2 (the Opens)", d)
	}
	// A read of piece 7 (and 6, 8 in part): detected, refetched.
	read0 := s.c.st.readBytes.Load()
	off, n := uint64(pieceBlock+6*P+10), uint64(2*P)
	if got := s.read(t, srv.url(), off, n); !bytes.Equal(got, want[off:off+n]) {
		t.Fatal("bytes differ after the corrupt piece")
	}
	st := s.c.Stats()
	if st.HitBlocks != 2 || st.MissBlocks != 1 || st.MissBytes != pieceBlock || st.CorruptEntries != 1 || st.WrittenEntries != 1 ||
		st.WrittenBytes != headerAlign+pieceBlock {
		t.Fatalf("read of the flipped piece: %+v, want 1 corrupt, 1 miss, 1 written", st)
	}
	// Pieces 6 (whole: the good one, read and checked) and 7 (the bad
	// one: read, mismatch, stop); piece 8 is not read, nor the header
	// (read by the first hit, kept with the open descriptor).
	if d := s.c.st.readBytes.Load() - read0; d != 2*P {
		t.Fatalf("read %d bytes of the entry, want %d", d, 2*P)
	}
	if d := srv.gets.Load() - gets; d != 2+1+1 {
		t.Fatalf("%d GETs, want 4 (3 Opens, 1 refetch)", d)
	}
	// The rewritten entry is whole: a fresh instance hits every piece.
	s2 := newStack(t, testOptions(), o)
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if st := s2.c.Stats(); st.HitBlocks != 3 || st.MissBlocks != 0 || st.CorruptEntries != 0 {
		t.Fatalf("after refetch: %+v", st)
	}
	names, _ := entries(t, dir)
	for _, p := range names {
		if err := checkEntryFile(p, want); err != nil {
			t.Fatal(err)
		}
	}
}

// encodeV1Entry returns an entry of format version 1 (one CRC-32C over
// the whole payload at [32, 36), texts at 40), whole and valid in that
// format, for block data at off of k.
func encodeV1Entry(k *Key, off uint64, data []byte) []byte {
	b := make([]byte, headerAlign, headerAlign+len(data))
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[4:], 1)
	binary.LittleEndian.PutUint32(b[8:], headerAlign)
	binary.LittleEndian.PutUint32(b[12:], uint32(len(data)))
	binary.LittleEndian.PutUint64(b[16:], off)
	binary.LittleEndian.PutUint64(b[24:], k.Size)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(data, castagnoli))
	binary.LittleEndian.PutUint16(b[36:], uint16(len(k.display)))
	binary.LittleEndian.PutUint16(b[38:], uint16(len(k.Validator)))
	copy(b[fixedHeader:], k.display)
	copy(b[fixedHeader+len(k.display):], k.Validator)
	binary.LittleEndian.PutUint32(b[headerAlign-4:], crc32.Checksum(b[:headerAlign-4], castagnoli))
	return append(b, data...)
}

// TestOldFormatEntryIsAMiss: an entry of format version 1, whole and
// right in that format, is never served: a miss (counted stale, not
// corrupt), deleted, refetched and rewritten in the current format.
func TestOldFormatEntryIsAMiss(t *testing.T) {
	want := pattern(2*pieceBlock, 25)
	srv := newObjServer(t, want, `"old"`)
	dir := t.TempDir()
	o := Options{Dir: dir, Synchronous: true, BlockBytes: pieceBlock}
	s := newStack(t, testOptions(), o)
	k := s.keyOf(t, srv.url())
	for b := range 2 {
		e := encodeV1Entry(&k, uint64(b*pieceBlock), want[b*pieceBlock:(b+1)*pieceBlock])
		if err := os.WriteFile(s.c.path(k.fileName(uint64(b))), e, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gets := srv.gets.Load()
	if got := s.read(t, srv.url(), 100, 10); !bytes.Equal(got, want[100:110]) {
		t.Fatal("bytes differ")
	}
	st := s.c.Stats()
	if st.HitBlocks != 0 || st.MissBlocks != 1 || st.StaleEntries != 1 || st.CorruptEntries != 0 || st.WrittenEntries != 1 {
		t.Fatalf("stats %+v, want 1 miss, 1 stale entry, 0 corrupt, 1 written", st)
	}
	if d := srv.gets.Load() - gets; d != 2 {
		t.Fatalf("%d GETs, want 2 (Open, the block)", d)
	}
	b, err := os.ReadFile(s.c.path(k.fileName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != formatVersion || checkEntryFile(s.c.path(k.fileName(0)), want) != nil {
		t.Fatalf("rewritten entry: version %d, want %d, or not whole", v, formatVersion)
	}
	// Block 1 is still the old format until read; then it goes too.
	s.read(t, srv.url(), 0, uint64(len(want)))
	if st := s.c.Stats(); st.HitBlocks != 1 || st.MissBlocks != 2 || st.StaleEntries != 2 {
		t.Fatalf("whole read: %+v, want 1 hit, 2 misses, 2 stale", st)
	}
	if names, _ := entries(t, dir); len(names) != 2 {
		t.Fatalf("%d entries, want 2", len(names))
	}
}
