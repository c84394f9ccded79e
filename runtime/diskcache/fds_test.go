package diskcache

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHitsKeepEntriesOpen: the first hit of an entry opens it, later hits
// read through the same descriptor; an entry removed by another process
// stays readable through it (same key, same bytes, checksums checked); an
// entry this Cache drops leaves the table; Close closes them all.
func TestHitsKeepEntriesOpen(t *testing.T) {
	want := pattern(3*testBlock, 41)
	srv, s := secondProcess(t, want, `"fd"`, 0)
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if n := s.c.fds.held(); n != 3 {
		t.Fatalf("%d entries open after hitting 3, want 3", n)
	}
	k := s.keyOf(t, srv.url())
	if err := os.Remove(s.c.path(k.fileName(1))); err != nil { // another process evicts it
		t.Fatal(err)
	}
	gets := srv.gets.Load()
	if got := s.read(t, srv.url(), testBlock, testBlock); !bytes.Equal(got, want[testBlock:2*testBlock]) {
		t.Fatal("removed entry: bytes differ")
	}
	if st := s.c.Stats(); st.HitBlocks != 4 || st.MissBlocks != 0 || srv.gets.Load()-gets != 1 {
		t.Fatalf("removed entry: %+v, %d GETs; want 4 hits, no miss, 1 GET (the Open)", st, srv.gets.Load()-gets)
	}
	if err := flipByte(s.c.path(k.fileName(2)), headerAlign+5); err != nil {
		t.Fatal(err)
	}
	if got := s.read(t, srv.url(), 2*testBlock, 10); !bytes.Equal(got, want[2*testBlock:2*testBlock+10]) {
		t.Fatal("corrupt entry: bytes differ")
	}
	if st := s.c.Stats(); st.CorruptEntries != 1 || st.MissBlocks != 1 {
		t.Fatalf("corrupt entry: %+v, want 1 corrupt, 1 miss", st)
	}
	if n := s.c.fds.held(); n != 2 {
		t.Fatalf("%d entries open after dropping one, want 2", n)
	}
	s.c.Close()
	if n := s.c.fds.held(); n != 0 {
		t.Fatalf("%d entries open after Close, want 0", n)
	}
}

// TestOpenEntriesBoundedByRlimit: under a soft RLIMIT_NOFILE of 128 the
// process budget is 32 descriptors (files.Budget) and a Cache keeps
// 32/fdShare = 8 entries open, however many it hits.
func TestOpenEntriesBoundedByRlimit(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	want := pattern(12*testBlock, 43)
	srv, s := secondProcess(t, want, `"rl"`, 0)
	low := rl
	low.Cur = 128
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	got := s.read(t, srv.url(), 0, uint64(len(want)))
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if n := s.c.fds.held(); n != 8 {
		t.Fatalf("%d entries open, want 8", n)
	}
	if st := s.c.Stats(); st.HitBlocks != 12 || st.MissBlocks != 0 {
		t.Fatalf("stats %+v, want 12 hits", st)
	}
}

// TestOpenEntriesUpToMaxOpen: with descriptors to spare (soft
// RLIMIT_NOFILE 8192: a budget of 2048, a share of 512), a Cache keeps
// each of the 200 entries it hit open, so a second read of the object
// opens none of them again, and 300 hit entries keep maxOpen (256) open.
func TestOpenEntriesUpToMaxOpen(t *testing.T) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Max < 8192 {
		t.Skipf("hard RLIMIT_NOFILE %d < 8192", rl.Max)
	}
	high := rl
	high.Cur = 8192
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &high); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	want := pattern(300*testBlock, 47)
	srv, s := secondProcess(t, want, `"mo"`, 0)
	n := uint64(200 * testBlock)
	for pass := 0; pass < 2; pass++ {
		if got := s.read(t, srv.url(), 0, n); !bytes.Equal(got, want[:n]) {
			t.Fatal("bytes differ")
		}
		if h := s.c.fds.held(); h != 200 {
			t.Fatalf("pass %d: %d entries open, want 200", pass, h)
		}
	}
	if st := s.c.Stats(); st.HitBlocks != 400 || st.MissBlocks != 0 {
		t.Fatalf("stats %+v, want 400 hits", st)
	}
	// The second pass read only payload: no header was read again.
	hdr := s.c.st.readBytes.Load() - 2*n
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if h := s.c.fds.held(); h != maxOpen {
		t.Fatalf("%d entries open after hitting 300, want %d", h, maxOpen)
	}
	if hdr != 200*headerAlign {
		t.Fatalf("%d header bytes read over two passes of 200 entries, want %d (one header each)", hdr, 200*headerAlign)
	}
}

// TestRacingOpensShareEntry: two readers that open the same entry file at
// once (both missed the table) end with one openEntry, so what each
// checks adds to one trust; the second descriptor is closed. A file
// another process renamed over the name (a new inode) stays out of the
// table.
func TestRacingOpensShareEntry(t *testing.T) {
	p := filepath.Join(t.TempDir(), "e")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func(ino uint64) *openEntry {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return &openEntry{f: f, ino: ino}
	}
	var tb fdTable
	a, b := open(7), open(7)
	if got := tb.insert("n", a); got != a {
		t.Fatal("first insert: not its own entry")
	}
	if got := tb.insert("n", b); got != a || a.refs != 2 {
		t.Fatalf("racing insert: got the table's entry %v, refs %d; want it, refs 2", got == a, a.refs)
	}
	if _, err := b.f.Stat(); err == nil {
		t.Fatal("the losing descriptor is still open")
	}
	c := open(8)
	if got := tb.insert("n", c); got != c || !c.gone || tb.held() != 1 {
		t.Fatalf("new inode: got own %v, gone %v, held %d; want own, gone, 1", got == c, c.gone, tb.held())
	}
	tb.release(c)
	if _, err := c.f.Stat(); err == nil {
		t.Fatal("the replaced file's descriptor is open after its release")
	}
	tb.release(a)
	tb.release(a)
	tb.closeAll()
}
