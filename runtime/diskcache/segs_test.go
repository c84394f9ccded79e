package diskcache

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/remote"
)

// segsOf opens name in s and returns the Object (released at cleanup).
func (s *stack) object(t *testing.T, name string) *remote.Object {
	t.Helper()
	o, _, err := s.src.Open(name, files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Release)
	return o.(*remote.Object)
}

// TestReadSegsReadsEachPieceOnce: segs of neighbouring samples (gaps of a
// tar header between them, across a block boundary, the short last block)
// are served from the entries with each needed piece read once, whatever
// number of segs share it; a seg's bytes are the object's; a gap longer
// than a piece is not read.
func TestReadSegsReadsEachPieceOnce(t *testing.T) {
	const P = pieceBytes
	want := pattern(3*pieceBlock+1000, 31)
	srv, s := secondProcess(t, want, `"s"`, pieceBlock)
	ro := s.object(t, srv.url())
	for _, c := range []struct {
		what   string
		spans  [][2]uint64 // off, len
		hits   uint64      // blocks hit
		pieces uint64      // bytes of entries read (headers: first hit of each entry)
	}{
		{"two samples in one piece", [][2]uint64{{100, 1000}, {1612, 3000}}, 1, headerAlign + P},
		{"samples across pieces, 512-byte gaps", [][2]uint64{{P - 700, 20000}, {P - 700 + 20512, 90000}, {P - 700 + 111024, 5}}, 1, 3 * P},
		{"across the block boundary", [][2]uint64{{pieceBlock - 3000, 2000}, {pieceBlock - 488, 70000}}, 2, headerAlign + 3*P},
		{"a gap of two pieces is not read", [][2]uint64{{2*pieceBlock + 10, 10}, {2*pieceBlock + 3*P + 5, 10}}, 1, headerAlign + 2*P},
		{"short last block", [][2]uint64{{3 * pieceBlock, 10}, {3*pieceBlock + 512, 488}}, 1, headerAlign + 1000},
		{"whole object in one seg", [][2]uint64{{0, uint64(len(want))}}, 4, uint64(len(want))},
	} {
		segs := make([]Seg, len(c.spans))
		var n uint64
		for i, sp := range c.spans {
			segs[i] = Seg{Off: sp[0], Dst: make([]byte, sp[1])}
			n += sp[1]
		}
		before := s.c.Stats()
		read0 := s.c.st.readBytes.Load()
		if !s.src.ReadSegs(ro, segs) {
			t.Fatalf("%s: not served", c.what)
		}
		for i, sg := range segs {
			if !bytes.Equal(sg.Dst, want[sg.Off:sg.Off+uint64(len(sg.Dst))]) {
				t.Fatalf("%s: seg %d differs", c.what, i)
			}
		}
		st := s.c.Stats()
		if d := s.c.st.readBytes.Load() - read0; d != c.pieces {
			t.Errorf("%s: read %d bytes of entries, want %d", c.what, d, c.pieces)
		}
		if st.HitBlocks-before.HitBlocks != c.hits || st.HitBytes-before.HitBytes != n || st.MissBlocks != 0 || st.CorruptEntries != 0 {
			t.Errorf("%s: stats %+v, want %d more hit blocks, %d more hit bytes", c.what, st, c.hits, n)
		}
	}
	// Many small segs: more buffers than one preadv takes.
	var segs []Seg
	for off := uint64(0); off+100 < uint64(len(want)); off += 101 {
		segs = append(segs, Seg{Off: off, Dst: make([]byte, 100)})
	}
	if !s.src.ReadSegs(ro, segs) {
		t.Fatal("small segs: not served")
	}
	for i, sg := range segs {
		if !bytes.Equal(sg.Dst, want[sg.Off:sg.Off+100]) {
			t.Fatalf("small seg %d differs", i)
		}
	}
	// Random sorted segs.
	rng := rand.New(rand.NewSource(5))
	for range 50 {
		var segs []Seg
		for off := uint64(rng.Intn(3 * P)); off < uint64(len(want)); {
			n := min(uint64(1+rng.Intn(3*P)), uint64(len(want))-off)
			segs = append(segs, Seg{Off: off, Dst: make([]byte, n)})
			off += n + uint64(rng.Intn(2*P))
		}
		if !s.src.ReadSegs(ro, segs) {
			t.Fatal("random segs: not served")
		}
		for i, sg := range segs {
			if !bytes.Equal(sg.Dst, want[sg.Off:sg.Off+uint64(len(sg.Dst))]) {
				t.Fatalf("random seg %d differs", i)
			}
		}
	}
	if st := s.c.Stats(); st.MissBlocks != 0 || st.CorruptEntries != 0 {
		t.Fatalf("stats %+v: want no miss, no corrupt entry", st)
	}
}

// TestReadSegsRefusesWhatItCannotServe: overlapping or unsorted segs, a
// seg past the end, a block not on disk: false, nothing counted as
// corrupt; a corrupt piece under a seg: false, the entry counted, deleted,
// and a ReadAt of the bytes fetches them again.
func TestReadSegsRefusesWhatItCannotServe(t *testing.T) {
	const P = pieceBytes
	want := pattern(2*pieceBlock, 37)
	srv := newObjServer(t, want, `"r"`)
	dir := t.TempDir()
	o := Options{Dir: dir, Synchronous: true, BlockBytes: pieceBlock}
	newStack(t, testOptions(), o).read(t, srv.url(), 0, pieceBlock) // block 0 only
	s := newStack(t, testOptions(), o)
	ro := s.object(t, srv.url())
	seg := func(off, n uint64) Seg { return Seg{Off: off, Dst: make([]byte, n)} }
	for _, c := range []struct {
		what string
		segs []Seg
	}{
		{"overlapping", []Seg{seg(0, 100), seg(50, 100)}},
		{"unsorted", []Seg{seg(1000, 100), seg(0, 100)}},
		{"empty seg", []Seg{seg(0, 0)}},
		{"past the end", []Seg{seg(2*pieceBlock-10, 11)}},
		{"block 1 not on disk", []Seg{seg(10, 10), seg(pieceBlock+10, 10)}},
	} {
		if s.src.ReadSegs(ro, c.segs) {
			t.Fatalf("%s: served", c.what)
		}
	}
	if st := s.c.Stats(); st.CorruptEntries != 0 {
		t.Fatalf("stats %+v: want nothing corrupt", st)
	}
	k := s.keyOf(t, srv.url())
	if err := flipByte(s.c.path(k.fileName(0)), headerAlign+3*P+5); err != nil {
		t.Fatal(err)
	}
	if s.src.ReadSegs(ro, []Seg{seg(2*P+10, 10), seg(3*P, 10)}) {
		t.Fatal("corrupt piece: served")
	}
	if st := s.c.Stats(); st.CorruptEntries != 1 {
		t.Fatalf("stats %+v: want 1 corrupt entry", st)
	}
	gets := srv.gets.Load()
	if got := s.read(t, srv.url(), 3*P, 10); !bytes.Equal(got, want[3*P:3*P+10]) {
		t.Fatal("bytes differ after the corrupt piece")
	}
	if d := srv.gets.Load() - gets; d != 2 {
		t.Fatalf("%d GETs, want 2 (the Open, the refetch)", d)
	}
}
