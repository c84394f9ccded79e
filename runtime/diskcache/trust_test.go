package diskcache

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// TestMain turns trust off for the tests written for checked reads (they
// count the bytes a read takes from an entry, or corrupt an entry and
// expect a later read to find it); the trust tests turn it on (withTrust).
func TestMain(m *testing.M) {
	testNoTrust = true
	os.Exit(m.Run())
}

// withTrust lets the Caches t opens trust, with the real clock and
// RWF_NOWAIT reads, restored when t ends.
func withTrust(t testing.TB) {
	t.Helper()
	testNoTrust = false
	t.Cleanup(func() {
		testNoTrust = true
		trustNow = time.Now
		preadNoWait = realPreadNoWait
	})
}

var realPreadNoWait = preadNoWait

// benchTrust is withTrust for the benchmarks, which read with trust as a
// process does, unless DISKCACHE_BENCH_NOTRUST=1 (every read checked).
func benchTrust(b *testing.B) {
	if os.Getenv("DISKCACHE_BENCH_NOTRUST") != "1" {
		withTrust(b)
	}
}

// trustBlock is the block size of the trust tests: 16 pieces.
const trustBlock = 16 * pieceBytes

// settle waits until the entries written so far count toward trust when
// checked (trustSettle).
func settle() { time.Sleep(trustSettle + 50*time.Millisecond) }

// trustedProcess is a second process (secondProcess, blocks of
// trustBlock) reading with trust, once its entries have settled.
func trustedProcess(t *testing.T, want []byte, etag string) (*objServer, *stack) {
	t.Helper()
	withTrust(t)
	srv, s := secondProcess(t, want, etag, trustBlock)
	settle()
	return srv, s
}

// openObject opens the server's object through s, released at the end of
// the test.
func openObject(t *testing.T, srv *objServer, s *stack) *remote.Object {
	t.Helper()
	o, _, err := s.src.Open(srv.url(), files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Release)
	return o.(*remote.Object)
}

// changedAt is when the file p last changed (lastChange).
func changedAt(t *testing.T, p string) time.Time {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, max(st.Mtim.Nano(), st.Ctim.Nano()))
}

// trustCase is a read of [off, off+n) of the object and the pieces of
// entries it overlaps.
type trustCase struct {
	what   string
	off, n uint64
	pieces uint64
}

var trustCases = []trustCase{
	{"inside 4 pieces of a block", trustBlock + 1000, 200000, 4},
	{"across two blocks", 2*trustBlock - 70000, 140000, 4},
	{"one byte", 7, 1, 1},
	{"a whole block", 0, trustBlock, 16},
}

// TestTrustServesASecondReadUnchecked: a range read and checked once
// (after its entry settled) is served from trust the next times: every
// piece it overlaps counted as trusted, nothing read twice from a piece
// the range does not need, the bytes the object's.
func TestTrustServesASecondReadUnchecked(t *testing.T) {
	want := pattern(3*trustBlock+12345, 5)
	srv, s := trustedProcess(t, want, `"t"`)
	for _, c := range trustCases {
		before := s.c.Stats()
		for pass := 0; pass < 3; pass++ {
			if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
				t.Fatalf("%s, pass %d: bytes differ", c.what, pass)
			}
			st := s.c.Stats()
			if wantT := uint64(pass) * c.pieces; st.TrustedPieces-before.TrustedPieces != wantT || st.TrustFallbacks != 0 {
				t.Fatalf("%s, pass %d: %d pieces trusted, %d fallbacks; want %d, 0", c.what, pass,
					st.TrustedPieces-before.TrustedPieces, st.TrustFallbacks, wantT)
			}
			if st.MissBlocks != 0 || st.CorruptEntries != 0 {
				t.Fatalf("%s: stats %+v", c.what, st)
			}
		}
	}
	// A trusted read takes from the entry only the bytes asked for.
	c := trustCases[0]
	read0 := s.c.st.readBytes.Load()
	s.read(t, srv.url(), c.off, c.n)
	if d := s.c.st.readBytes.Load() - read0; d != c.n {
		t.Fatalf("trusted read took %d bytes from the entry, want %d", d, c.n)
	}
}

// TestTrustReadSegs: ReadSegs serves a batch from trust the second time,
// counting each piece its segs overlap once.
func TestTrustReadSegs(t *testing.T) {
	want := pattern(2*trustBlock, 6)
	srv, s := trustedProcess(t, want, `"ts"`)
	ro := openObject(t, srv, s)
	// Pieces 0; 1 (twice); 3-4 of block 0; 0 of block 1 (after a gap
	// longer than a piece): 5.
	spans := [][2]uint64{{1000, 5000}, {70000, 100}, {70200, 300}, {200000, 70000}, {trustBlock + 10, 20}}
	const pieces = 5
	for pass := 0; pass < 3; pass++ {
		segs := make([]Seg, len(spans))
		for i, sp := range spans {
			segs[i] = Seg{Off: sp[0], Dst: make([]byte, sp[1])}
		}
		if !s.src.ReadSegs(ro, segs) {
			t.Fatalf("pass %d: not served", pass)
		}
		for i, sg := range segs {
			if !bytes.Equal(sg.Dst, want[sg.Off:sg.Off+uint64(len(sg.Dst))]) {
				t.Fatalf("pass %d, seg %d: bytes differ", pass, i)
			}
		}
		if st := s.c.Stats(); st.TrustedPieces != uint64(pass)*pieces || st.TrustFallbacks != 0 {
			t.Fatalf("pass %d: %d pieces trusted, %d fallbacks; want %d, 0", pass, st.TrustedPieces, st.TrustFallbacks, pass*pieces)
		}
	}
	// Not in the page cache: each entry's batch is read and checked.
	preadNoWait = func(int, [][]byte, int64) (int, error) { return 0, unix.EAGAIN }
	segs := make([]Seg, len(spans))
	for i, sp := range spans {
		segs[i] = Seg{Off: sp[0], Dst: make([]byte, sp[1])}
	}
	if !s.src.ReadSegs(ro, segs) {
		t.Fatal("not served without the page cache")
	}
	for i, sg := range segs {
		if !bytes.Equal(sg.Dst, want[sg.Off:sg.Off+uint64(len(sg.Dst))]) {
			t.Fatalf("without the page cache, seg %d: bytes differ", i)
		}
	}
	if st := s.c.Stats(); st.TrustedPieces != 2*pieces || st.TrustFallbacks != 2 || st.CorruptEntries != 0 {
		t.Fatalf("without the page cache: stats %+v, want %d pieces trusted, 2 fallbacks", st, 2*pieces)
	}
}

// TestTrustEndsWhenAnotherWriterChangesTheEntry: garbage written into a
// trusted piece in place (another process: the page cache holds the
// garbage, mtime and ctime move) is not served: the read falls back to a
// checked one, which finds the entry corrupt, drops and refetches it.
func TestTrustEndsWhenAnotherWriterChangesTheEntry(t *testing.T) {
	want := pattern(3*trustBlock, 7)
	srv, s := trustedProcess(t, want, `"tw"`)
	c := trustCases[0]
	for range 2 {
		if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
			t.Fatal("bytes differ")
		}
	}
	if st := s.c.Stats(); st.TrustedPieces != c.pieces {
		t.Fatalf("%d pieces trusted before the write, want %d", st.TrustedPieces, c.pieces)
	}
	k := s.keyOf(t, srv.url())
	p := s.c.path(k.fileName(1))
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, 100), int64(headerLen(&k, trustBlock))+int64(c.off-trustBlock)+10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	gets := srv.gets.Load()
	if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
		t.Fatal("after the write: bytes differ")
	}
	st := s.c.Stats()
	if st.TrustedPieces != c.pieces || st.TrustFallbacks != 1 || st.CorruptEntries != 1 || st.MissBlocks != 1 {
		t.Fatalf("after the write: stats %+v, want %d trusted pieces, 1 fallback, 1 corrupt entry, 1 miss", st, c.pieces)
	}
	if d := srv.gets.Load() - gets; d != 2 {
		t.Fatalf("%d GETs after the write, want 2 (Open's, the refetch)", d)
	}
}

// TestTrustNeedsASettledEntry: a check made within trustSettle of the
// entry's last change does not count (the first reads after the write);
// one made later does, and the next read is trusted.
func TestTrustNeedsASettledEntry(t *testing.T) {
	withTrust(t)
	want := pattern(2*trustBlock, 8)
	srv := newObjServer(t, want, `"tn"`)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir(), Synchronous: true, BlockBytes: trustBlock})
	s.read(t, srv.url(), 0, uint64(len(want))) // writes the entries
	k := s.keyOf(t, srv.url())
	chg := changedAt(t, s.c.path(k.fileName(1)))
	c := trustCases[0]
	read := func(at time.Duration, trusted, fallbacks uint64) {
		t.Helper()
		trustNow = func() time.Time { return chg.Add(at) }
		if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
			t.Fatalf("at +%v: bytes differ", at)
		}
		if st := s.c.Stats(); st.TrustedPieces != trusted || st.TrustFallbacks != fallbacks {
			t.Fatalf("at +%v: %d pieces trusted, %d fallbacks; want %d, %d", at, st.TrustedPieces, st.TrustFallbacks, trusted, fallbacks)
		}
	}
	read(0, 0, 0)
	read(trustSettle/2, 0, 0)
	read(trustSettle, 0, 0)                  // not more than trustSettle: still checked, not recorded
	read(trustSettle+time.Millisecond, 0, 0) // checked, recorded
	read(trustSettle+2*time.Millisecond, c.pieces, 0)
	if st := s.c.Stats(); st.MissBlocks != 2 || st.HitBlocks != 5 {
		t.Fatalf("stats %+v, want the 2 first misses, then 5 hits", st)
	}
}

// TestTrustOwnTouch: this Cache's own mtime refresh (endRead) moves the
// entry's ctime, so the next reads are checked, but once it settled one
// checked read makes it trusted again: the refresh costs one more check,
// not every read after it.
func TestTrustOwnTouch(t *testing.T) {
	want := pattern(2*trustBlock, 9)
	srv, s := trustedProcess(t, want, `"to"`)
	c := trustCases[0]
	k := s.keyOf(t, srv.url())
	p := s.c.path(k.fileName(1))
	check := func(what string, trusted, fallbacks uint64) {
		t.Helper()
		if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
			t.Fatalf("%s: bytes differ", what)
		}
		if st := s.c.Stats(); st.TrustedPieces != trusted || st.TrustFallbacks != fallbacks {
			t.Fatalf("%s: %d pieces trusted, %d fallbacks; want %d, %d", what, st.TrustedPieces, st.TrustFallbacks, trusted, fallbacks)
		}
	}
	check("first", 0, 0)
	check("second", c.pieces, 0)
	e := s.c.fds.acquire(k.fileName(1))
	s.c.fds.mu.Lock()
	e.touched = time.Time{} // due a refresh at the next hit
	s.c.fds.mu.Unlock()
	s.c.fds.release(e)
	before := changedAt(t, p)
	check("trusted, then refreshed", 2*c.pieces, 0)
	touched := changedAt(t, p)
	if !touched.After(before) {
		t.Fatalf("the hit did not refresh the entry (changed %v, before %v)", touched, before)
	}
	trustNow = func() time.Time { return touched }
	check("right after the refresh", 2*c.pieces, 1)
	trustNow = func() time.Time { return touched.Add(trustSettle + time.Millisecond) }
	check("settled after the refresh", 2*c.pieces, 2)
	check("trusted again", 3*c.pieces, 2)
	check("and again", 4*c.pieces, 2)
}

// TestTrustNeedsThePageCache: a trusted range whose bytes are not all in
// the page cache (RWF_NOWAIT: EAGAIN or a short read) is read and checked
// instead; the check trusts it again.
func TestTrustNeedsThePageCache(t *testing.T) {
	want := pattern(2*trustBlock, 10)
	srv, s := trustedProcess(t, want, `"tp"`)
	c := trustCases[0]
	check := func(what string, trusted, fallbacks uint64) {
		t.Helper()
		if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
			t.Fatalf("%s: bytes differ", what)
		}
		if st := s.c.Stats(); st.TrustedPieces != trusted || st.TrustFallbacks != fallbacks || st.CorruptEntries != 0 {
			t.Fatalf("%s: stats %+v, want %d pieces trusted, %d fallbacks", what, st, trusted, fallbacks)
		}
	}
	check("first", 0, 0)
	check("second", c.pieces, 0)
	for i, fake := range []func(int, [][]byte, int64) (int, error){
		func(int, [][]byte, int64) (int, error) { return 0, unix.EAGAIN },
		func(fd int, iov [][]byte, off int64) (int, error) { // short: the last page is not cached
			b := iov[0][:len(iov[0])-1]
			return realPreadNoWait(fd, [][]byte{b}, off)
		},
	} {
		preadNoWait = fake
		n := uint64(i)
		check("not cached", (1+n)*c.pieces, 1+n)
		preadNoWait = realPreadNoWait
		check("cached again", (2+n)*c.pieces, 1+n)
	}
	if s.c.trustOff.Load() {
		t.Fatal("EAGAIN turned trust off")
	}
}

// TestTrustDroppedPages: the same with the entry's pages really dropped
// from the page cache (fsync, POSIX_FADV_DONTNEED), where the file system
// drops them (not tmpfs).
func TestTrustDroppedPages(t *testing.T) {
	want := pattern(2*trustBlock, 11)
	srv, s := trustedProcess(t, want, `"td"`)
	c := trustCases[0]
	for range 2 {
		s.read(t, srv.url(), c.off, c.n)
	}
	k := s.keyOf(t, srv.url())
	p := s.c.path(k.fileName(1))
	dropPageCache(t, p)
	if resident(t, p, int64(headerLen(&k, trustBlock))+int64(c.off-trustBlock), int(c.n)) {
		t.Skip("the file system keeps the entry's pages after POSIX_FADV_DONTNEED (tmpfs?); TestTrustNeedsThePageCache covers the fallback")
	}
	if got := s.read(t, srv.url(), c.off, c.n); !bytes.Equal(got, want[c.off:c.off+c.n]) {
		t.Fatal("bytes differ")
	}
	if st := s.c.Stats(); st.TrustedPieces != c.pieces || st.TrustFallbacks != 1 || st.CorruptEntries != 0 || st.MissBlocks != 0 {
		t.Fatalf("after dropping the pages: stats %+v, want %d pieces trusted, 1 fallback", st, c.pieces)
	}
	s.read(t, srv.url(), c.off, c.n)
	if st := s.c.Stats(); st.TrustedPieces != 2*c.pieces || st.TrustFallbacks != 1 {
		t.Fatalf("read back in: stats %+v, want %d pieces trusted", st, 2*c.pieces)
	}
}

// resident reports whether any byte of [off, off+n) of the file p is in
// the page cache.
func resident(t *testing.T, p string, off int64, n int) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := iopath.Resident(int(f.Fd()), off, int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return r > 0
}

// TestTrustConcurrentReaders: goroutines reading overlapping ranges of
// the same entries, trusted and checked at once, all get the object's
// bytes (run under -race).
func TestTrustConcurrentReaders(t *testing.T) {
	want := pattern(4*trustBlock, 12)
	srv, s := trustedProcess(t, want, `"tc"`)
	o := openObject(t, srv, s)
	const n, reads = 100000, 40
	offs := func(g int) []uint64 {
		var r []uint64
		for i := range reads {
			r = append(r, uint64((g*7919+i*104729)%(len(want)-n)))
		}
		return r
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, n)
			for i, off := range offs(g) {
				if _, err := s.src.ReadAt(o, dst, off, source.PathBuffered); err != nil || !bytes.Equal(dst, want[off:off+n]) {
					t.Errorf("goroutine %d read %d at %d: bytes differ (%v)", g, i, off, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := s.c.Stats(); st.CorruptEntries != 0 || st.MissBlocks != 0 || st.TrustFallbacks != 0 {
		t.Fatalf("stats %+v: want no corrupt entry, miss or fallback", st)
	}
	// Every range was checked or trusted by now: read again, each is
	// trusted whole.
	before := s.c.Stats().TrustedPieces
	var pieces uint64
	for g := range 4 {
		for _, off := range offs(g) {
			if got := s.read(t, srv.url(), off, n); !bytes.Equal(got, want[off:off+n]) {
				t.Fatalf("read at %d after: bytes differ", off)
			}
			for b := off / trustBlock; b <= (off+n-1)/trustBlock; b++ {
				lo, hi := max(off, b*trustBlock), min(off+n, (b+1)*trustBlock)
				p0, p1 := pieceSpan(int(lo-b*trustBlock), int(hi-lo))
				pieces += uint64(p1 - p0)
			}
		}
	}
	if d := s.c.Stats().TrustedPieces - before; d != pieces {
		t.Fatalf("%d pieces trusted on the sequential pass, want %d", d, pieces)
	}
}

// TestAllCached: cachestat tells a range whose pages were dropped from
// one read back in, page by page (the check preadNoWait makes first).
func TestAllCached(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	data := pattern(64*int(pageBytes), 13)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if !allCached(fd, 0, len(data)) {
		t.Fatal("a file just written: not all cached")
	}
	dropPageCache(t, p)
	if resident(t, p, 0, len(data)) {
		t.Skip("the file system keeps the pages after POSIX_FADV_DONTNEED (tmpfs?)")
	}
	cached := allCached(fd, 0, len(data))
	if noCachestat.Load() {
		t.Skip("no cachestat(2) here (Linux < 6.5 or refused): RWF_NOWAIT is the only check")
	}
	if cached {
		t.Fatal("dropped pages: all cached")
	}
	// One page read back (no readahead): a range of it alone is cached, one
	// byte more is not.
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 10)
	if _, err := f.ReadAt(b, int64(5*pageBytes)+7); err != nil {
		t.Fatal(err)
	}
	if !allCached(fd, int64(5*pageBytes), int(pageBytes)) || !allCached(fd, int64(5*pageBytes)+100, 1) {
		t.Fatal("the page read back: not cached")
	}
	if resident(t, p, int64(6*pageBytes), int(pageBytes)) {
		t.Skip("readahead brought the next page in too")
	}
	if allCached(fd, int64(5*pageBytes), int(pageBytes)+1) {
		t.Fatal("a range one byte into a dropped page: all cached")
	}
}
