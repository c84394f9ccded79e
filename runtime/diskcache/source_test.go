package diskcache

import (
	"bytes"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// randomRanges checks exact bytes for random ranges of want read through
// s (block edges, single bytes, the tail, the whole object).
func randomRanges(t *testing.T, s *stack, name string, want []byte, seed int64) {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	n := uint64(len(want))
	ranges := [][2]uint64{{0, n}, {n - 1, 1}, {testBlock - 1, 2}, {0, 1}, {n - testBlock - 5, testBlock + 5}}
	for range 40 {
		off := uint64(r.Int63n(int64(n)))
		ln := 1 + uint64(r.Int63n(int64(min(n-off, 5*testBlock))))
		ranges = append(ranges, [2]uint64{off, ln})
	}
	for _, rg := range ranges {
		got := s.read(t, name, rg[0], rg[1])
		if !bytes.Equal(got, want[rg[0]:rg[0]+rg[1]]) {
			t.Fatalf("range [%d, +%d): bytes differ", rg[0], rg[1])
		}
	}
}

func TestHTTPRandomRangesThenSecondInstanceFromDisk(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "write-behind", true: "synchronous"}[sync], func(t *testing.T) {
			want := pattern(20*testBlock+12345, 3)
			srv := newObjServer(t, want, `"v1"`)
			dir := t.TempDir()
			a := newStack(t, testOptions(), Options{Dir: dir, BudgetBytes: 1 << 30, Synchronous: sync})
			randomRanges(t, a, srv.url(), want, 1)
			a.c.Flush()
			blocks := uint64(len(want)+testBlock-1) / testBlock
			if st := a.c.Stats(); st.WrittenEntries != blocks || st.CorruptEntries != 0 || st.WriteErrors != 0 {
				t.Fatalf("first instance: %+v, want %d entries written", st, blocks)
			}
			names, _ := entries(t, dir)
			if uint64(len(names)) != blocks {
				t.Fatalf("%d entry files, want %d", len(names), blocks)
			}

			// A second instance over the same directory (a new process,
			// in effect): the only GET is Open's.
			b := newStack(t, testOptions(), Options{Dir: dir, BudgetBytes: 1 << 30, Synchronous: sync})
			gets := srv.gets.Load()
			got := b.read(t, srv.url(), 0, uint64(len(want)))
			if !bytes.Equal(got, want) {
				t.Fatal("second instance: bytes differ")
			}
			if d := srv.gets.Load() - gets; d != 1 {
				t.Fatalf("second instance: %d GETs, want 1 (Open's)", d)
			}
			st := b.c.Stats()
			if st.HitBlocks != blocks || st.HitBytes != uint64(len(want)) || st.MissBlocks != 0 || st.WrittenEntries != 0 {
				t.Fatalf("second instance stats %+v, want %d hit blocks, %d hit bytes", st, blocks, len(want))
			}
			randomRanges(t, b, srv.url(), want, 2)
			if d := srv.gets.Load() - gets; d != 1+45 { // one revalidation per read (TrustNone), answered 304
				t.Fatalf("second instance random ranges: %d GETs, want 46 (Opens only)", d)
			}
		})
	}
}

// TestMissingBlocksOnly: a read over cached and uncached blocks fetches
// only the missing blocks, whole.
func TestMissingBlocksOnly(t *testing.T) {
	want := pattern(8*testBlock, 5)
	srv := newObjServer(t, want, `"m"`)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir(), Synchronous: true})
	s.read(t, srv.url(), 2*testBlock+10, 10) // block 2
	s.read(t, srv.url(), 5*testBlock, testBlock)
	srv.mu.Lock()
	srv.ranges = nil
	srv.mu.Unlock()
	got := s.read(t, srv.url(), testBlock+7, 6*testBlock)
	if !bytes.Equal(got, want[testBlock+7:7*testBlock+7]) {
		t.Fatal("bytes differ")
	}
	srv.mu.Lock()
	rs := strings.Join(srv.ranges, " ")
	srv.mu.Unlock()
	// Open's window (0-65535) is one block here: block 0 stays unread.
	b := func(i int) int { return i * testBlock }
	for _, w := range []string{
		"bytes=0-65535",
		"bytes=" + strconv.Itoa(b(1)) + "-" + strconv.Itoa(b(2)-1),
		"bytes=" + strconv.Itoa(b(3)) + "-" + strconv.Itoa(b(4)-1),
		"bytes=" + strconv.Itoa(b(4)) + "-" + strconv.Itoa(b(5)-1),
		"bytes=" + strconv.Itoa(b(6)) + "-" + strconv.Itoa(b(7)-1),
		"bytes=" + strconv.Itoa(b(7)) + "-" + strconv.Itoa(b(8)-1),
	} {
		if !strings.Contains(rs, w) {
			t.Errorf("no GET %s; GETs: %s", w, rs)
		}
	}
	if n := len(strings.Fields(rs)); n != 6 {
		t.Errorf("%d GETs (%s), want 6 (Open's and one per missing block)", n, rs)
	}
}

func TestCorruptEntriesAreRefetched(t *testing.T) {
	want := pattern(4*testBlock+777, 9)
	srv := newObjServer(t, want, `"c1"`)
	dir := t.TempDir()
	first := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	first.read(t, srv.url(), 0, uint64(len(want)))
	names, _ := entries(t, dir)
	if len(names) != 5 {
		t.Fatalf("%d entries, want 5", len(names))
	}
	damage := map[string]func(p string) error{
		"flip a payload byte": func(p string) error { return flipByte(p, headerAlign+100) },
		"flip a header byte":  func(p string) error { return flipByte(p, 20) },
		"truncate":            func(p string) error { return os.Truncate(p, headerAlign+testBlock/2) },
		"truncate the header": func(p string) error { return os.Truncate(p, 10) },
		"garbage":             func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("junk"), 5000), 0o600) },
		"empty":               func(p string) error { return os.WriteFile(p, nil, 0o600) },
		"extra bytes":         func(p string) error { return appendBytes(p, []byte{1, 2, 3}) },
	}
	for what, hurt := range damage {
		t.Run(what, func(t *testing.T) {
			s := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
			o, _, err := s.src.Open(srv.url(), files.TrustNone)
			if err != nil {
				t.Fatal(err)
			}
			k, _ := s.src.KeyOf(o.(*remote.Object))
			o.Release()
			p := s.c.path(k.fileName(2))
			if err := hurt(p); err != nil {
				t.Fatal(err)
			}
			got := s.read(t, srv.url(), 0, uint64(len(want)))
			if !bytes.Equal(got, want) {
				t.Fatal("bytes differ after corruption")
			}
			st := s.c.Stats()
			if st.CorruptEntries != 1 || st.HitBlocks != 4 || st.MissBlocks != 1 || st.WrittenEntries != 1 {
				t.Fatalf("stats %+v, want 1 corrupt, 4 hits, 1 miss, 1 written", st)
			}
			// The refetched entry is whole again: a fresh instance hits.
			s2 := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
			if got := s2.read(t, srv.url(), 2*testBlock, testBlock); !bytes.Equal(got, want[2*testBlock:3*testBlock]) {
				t.Fatal("bytes differ")
			}
			if st := s2.c.Stats(); st.HitBlocks != 1 || st.CorruptEntries != 0 {
				t.Fatalf("after refetch: %+v", st)
			}
		})
	}
}

func flipByte(p string, at int64) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		return err
	}
	b[0] ^= 0x40
	_, err = f.WriteAt(b[:], at)
	return err
}

func appendBytes(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(b)
	return err
}

func TestETagChangeGivesNewBytes(t *testing.T) {
	old := pattern(3*testBlock+5, 1)
	srv := newObjServer(t, old, `"one"`)
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	if got := s.read(t, srv.url(), 0, uint64(len(old))); !bytes.Equal(got, old) {
		t.Fatal("old bytes differ")
	}
	oldNames, _ := entries(t, dir)
	// Overwritten with the same size: only the ETag tells.
	neu := pattern(len(old), 77)
	srv.set(neu, `"two"`)
	for _, inst := range []*stack{s, newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})} {
		if got := inst.read(t, srv.url(), 0, uint64(len(neu))); !bytes.Equal(got, neu) {
			t.Fatal("read after overwrite: old bytes served")
		}
	}
	if st := s.c.Stats(); st.StaleEntries != 4 || st.MissBlocks != 8 || st.HitBlocks != 0 {
		t.Fatalf("stats %+v, want 4 stale entries dropped, 8 misses", st)
	}
	names, _ := entries(t, dir)
	if len(names) != 4 {
		t.Fatalf("%d entries, want the 4 of the new version", len(names))
	}
	for _, n := range oldNames {
		if _, err := os.Stat(n); err == nil {
			t.Fatalf("old entry %s is still there", n)
		}
	}
}

func TestBudgetHolds(t *testing.T) {
	want := pattern(40*testBlock, 4)
	srv := newObjServer(t, want, `"b"`)
	dir := t.TempDir()
	budget := uint64(10*(testBlock+headerAlign) + 100)
	s := newStack(t, testOptions(), Options{Dir: dir, BudgetBytes: budget})
	for off := uint64(0); off < uint64(len(want)); off += 3 * testBlock {
		n := min(3*testBlock, uint64(len(want))-off)
		if got := s.read(t, srv.url(), off, n); !bytes.Equal(got, want[off:off+n]) {
			t.Fatal("bytes differ")
		}
		s.c.Flush()
		if _, total := entries(t, dir); uint64(total) > budget {
			t.Fatalf("directory holds %d bytes, budget %d", total, budget)
		}
	}
	names, total := entries(t, dir)
	st := s.c.Stats()
	if st.WrittenEntries+st.WriteDrops != 40 || st.WrittenEntries-st.EvictedEntries != uint64(len(names)) ||
		st.EvictedBytes != st.EvictedEntries*uint64(testBlock+headerAlign) || st.UsedBytes != uint64(total) {
		t.Fatalf("stats %+v with %d entries (%d bytes) left", st, len(names), total)
	}
	if st.EvictedEntries == 0 {
		t.Fatal("nothing evicted")
	}
	// The newest blocks stay: the last read's three are on disk.
	s2 := newStack(t, testOptions(), Options{Dir: dir, BudgetBytes: budget})
	s2.read(t, srv.url(), 39*testBlock, testBlock)
	if st := s2.c.Stats(); st.HitBlocks != 1 {
		t.Fatalf("last block not kept: %+v", st)
	}
	// Opening with a smaller budget trims the directory at once.
	small := uint64(3 * (testBlock + headerAlign))
	s3 := newStack(t, testOptions(), Options{Dir: dir, BudgetBytes: small})
	if _, total := entries(t, dir); uint64(total) > small || s3.c.Stats().UsedBytes != uint64(total) {
		t.Fatalf("after reopening with budget %d: %d bytes", small, total)
	}
}

func TestEntryLargerThanBudgetIsNotCached(t *testing.T) {
	want := pattern(2*testBlock, 6)
	srv := newObjServer(t, want, `"x"`)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir(), BudgetBytes: testBlock, Synchronous: true})
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if st := s.c.Stats(); st.WriteDrops != 2 || st.WrittenEntries != 0 {
		t.Fatalf("stats %+v, want 2 drops", st)
	}
}

func TestNoValidatorIsNotCached(t *testing.T) {
	// http.ServeContent always sends Last-Modified; without an ETag the
	// entry binds to it.
	want := pattern(testBlock+1, 8)
	srv := newObjServer(t, want, "")
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	s.read(t, srv.url(), 0, uint64(len(want)))
	o, _, err := s.src.Open(srv.url(), files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := s.src.KeyOf(o.(*remote.Object))
	o.Release()
	if !ok || !strings.HasPrefix(k.Validator, "lm:") {
		t.Fatalf("key %+v ok %v, want a Last-Modified validator", k, ok)
	}
	if _, err := NewKey("s3://b/k", "", 5); err == nil {
		t.Fatal("a key without validator was accepted")
	}
}

func TestSecretsStayOffDisk(t *testing.T) {
	want := pattern(2*testBlock+3, 2)
	srv := newObjServer(t, want, `"s"`)
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	const sig1, sig2 = "SIGNATURE-aws-0123456789abcdef", "sas-sig-fedcba9876543210"
	name := srv.url() + "?X-Amz-Signature=" + sig1 + "&X-Amz-Credential=AKIDEXAMPLE&sig=" + sig2
	if got := s.read(t, name, 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	noSecretIn(t, dir, sig1, sig2, "AKIDEXAMPLE", "X-Amz")
	// The same object presigned again (new X-Amz-*): served from disk.
	s2 := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	s2.read(t, srv.url()+"?X-Amz-Signature=other&sig="+sig2, 0, uint64(len(want)))
	if st := s2.c.Stats(); st.HitBlocks != 3 {
		t.Fatalf("re-signed URL: %+v, want 3 hits", st)
	}
}

// noSecretIn fails if any file name or file content under dir holds one
// of secrets.
func noSecretIn(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(dir + "/" + de.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(de.Name(), s) || bytes.Contains(b, []byte(s)) {
				t.Fatalf("%q found in %s", s, de.Name())
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	parent := t.TempDir()
	// Missing: created with mode 0700.
	dir := parent + "/a/b"
	c, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("missing directory: %v", err)
	}
	c.Close()
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("created directory: %v mode %v", err, st.Mode())
	}
	// A file in the way.
	if err := os.WriteFile(parent+"/file", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{parent + "/file", parent + "/file/sub"} {
		if _, err := Open(Options{Dir: bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Fatalf("Open(%s): %v, want an error naming it", bad, err)
		}
	}
	// Not writable: a 0500 directory, or for root (which passes mode
	// checks) sysfs, which refuses new files to everyone.
	ro := parent + "/ro"
	if os.Geteuid() == 0 {
		ro = "/sys"
	} else if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: ro}); err == nil || !strings.Contains(err.Error(), ro) {
		t.Fatalf("Open(read-only %s): %v, want an error naming it", ro, err)
	}
	if _, err := Open(Options{Dir: parent + "/x", BlockBytes: 1000}); err == nil {
		t.Fatal("a 1000-byte block was accepted")
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("no directory was accepted")
	}
}

func TestReadPastEndAndEmpty(t *testing.T) {
	want := pattern(testBlock+10, 1)
	srv := newObjServer(t, want, `"e"`)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir()})
	o, _, err := s.src.Open(srv.url(), files.TrustNone)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Release()
	if _, err := s.src.ReadAt(o, make([]byte, 20), testBlock, source.PathBuffered); err == nil {
		t.Fatal("a read past the end succeeded")
	}
	if _, err := s.src.ReadAt(o, nil, 5, source.PathBuffered); err != nil {
		t.Fatalf("empty read: %v", err)
	}
}

// onceEach fails t when srv was asked for a range twice (a block fetched
// again: double egress).
func onceEach(t *testing.T, srv *objServer) {
	t.Helper()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range srv.ranges {
		if seen[r] {
			t.Fatalf("range %q fetched twice (ranges %q)", r, srv.ranges)
		}
		seen[r] = true
	}
}

// TestQueueSmallerThanABlock: a block larger than the whole write-behind
// queue is written by its reader, once; nothing is fetched twice.
func TestQueueSmallerThanABlock(t *testing.T) {
	noWriteThrough(t)
	want := pattern(12*testBlock, 9)
	srv := newObjServer(t, want, `"q"`)
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir, QueueBytes: 1})
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	s.c.Flush()
	st := s.c.Stats()
	if st.MissBlocks != 12 || st.WrittenEntries != 12 || st.WriteDrops != 0 || st.InlineWrites != 12 ||
		st.QueueWaits != 0 || st.QueueDrops != 0 {
		t.Fatalf("stats %+v: want 12 misses, 12 inline writes, 12 entries written, no waits, drops", st)
	}
	onceEach(t, srv)
	before := srv.gets.Load()
	s2 := newStack(t, testOptions(), Options{Dir: dir})
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("second instance: bytes differ")
	}
	if st := s2.c.Stats(); st.HitBlocks != 12 || st.MissBlocks != 0 {
		t.Fatalf("second instance stats %+v: want 12 hits", st)
	}
	if n := srv.gets.Load() - before; n != 1 {
		t.Fatalf("second instance made %d GETs, want 1 (its Open)", n)
	}
}

// noWriteThrough makes the Caches t opens queue every fetched block
// (copied when it lands in the caller's buffer), as they did before
// write-through, for the tests of the write-behind queue.
func noWriteThrough(t *testing.T) {
	old := writeThroughSlots
	writeThroughSlots = 0
	t.Cleanup(func() { writeThroughSlots = old })
}

// holdWriter makes the write-behind goroutine wait before each write
// until the returned function is called (once).
func holdWriter(t *testing.T) (release func()) {
	gate := make(chan struct{})
	writeGate = func() { <-gate }
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { release(); writeGate = nil })
	return release
}

// waitFor polls until w has n readers waiting for room.
func waitFor(w *writer, n int) {
	for {
		w.mu.Lock()
		k := w.waiting
		w.mu.Unlock()
		if k == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueueBackPressure: with the writer held and room for two blocks,
// the readers of the other four wait (none dropped, none fetched again);
// once the writer goes on, all six are written.
func TestQueueBackPressure(t *testing.T) {
	noWriteThrough(t)
	want := pattern(6*testBlock, 4)
	srv := newObjServer(t, want, `"bp"`)
	release := holdWriter(t)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir(), QueueBytes: 2 * testBlock, QueueWait: time.Hour})
	done := make(chan []byte)
	go func() { done <- s.read(t, srv.url(), 0, uint64(len(want))) }()
	waitFor(s.c.wb, 4)
	release()
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	s.c.Flush()
	st := s.c.Stats()
	if st.MissBlocks != 6 || st.WrittenEntries != 6 || st.QueueWaits != 4 || st.QueueDrops != 0 || st.InlineWrites != 0 {
		t.Fatalf("stats %+v: want 6 misses, 6 entries written, 4 waits, 0 drops, 0 inline writes", st)
	}
	onceEach(t, srv)
}

// TestQueueWaitExpires: with the writer held past the read, the four
// blocks that found no room within QueueWait are dropped (left
// uncached, not fetched again); the next instance fetches only those.
func TestQueueWaitExpires(t *testing.T) {
	noWriteThrough(t)
	want := pattern(6*testBlock, 5)
	srv := newObjServer(t, want, `"wx"`)
	release := holdWriter(t)
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir, QueueBytes: 2 * testBlock, QueueWait: time.Millisecond})
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	release()
	s.c.Flush()
	st := s.c.Stats()
	if st.MissBlocks != 6 || st.WrittenEntries != 2 || st.QueueWaits != 4 || st.QueueDrops != 4 || st.InlineWrites != 0 {
		t.Fatalf("stats %+v: want 6 misses, 2 entries written, 4 waits, 4 drops", st)
	}
	onceEach(t, srv)
	s2 := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("second instance: bytes differ")
	}
	if st := s2.c.Stats(); st.HitBlocks != 2 || st.MissBlocks != 4 {
		t.Fatalf("second instance stats %+v: want 2 hits, 4 misses", st)
	}
}

func TestQueueWaitNegative(t *testing.T) {
	_, err := Open(Options{Dir: t.TempDir(), QueueWait: -time.Second})
	if err == nil || err.Error() != "disk cache: queue wait -1s: want >= 0" {
		t.Fatalf("Open with a negative queue wait: %v", err)
	}
}

// TestQueuedBlockServedFromMemory: a block fetched by one read and still
// waiting in the write-behind queue serves a second read of it from
// memory (a hit), not with a second GET.
func TestQueuedBlockServedFromMemory(t *testing.T) {
	noWriteThrough(t)
	want := pattern(2*testBlock, 6)
	srv := newObjServer(t, want, `"qm"`)
	release := holdWriter(t)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir()})
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("first read: bytes differ")
	}
	gets := srv.gets.Load()
	if got := s.read(t, srv.url(), testBlock+5, 100); !bytes.Equal(got, want[testBlock+5:testBlock+105]) {
		t.Fatal("second read: bytes differ")
	}
	if st := s.c.Stats(); st.MissBlocks != 2 || st.HitBlocks != 1 || st.HitBytes != 100 || st.WrittenEntries != 0 {
		t.Fatalf("stats %+v: want 2 misses, 1 hit of 100 bytes from the queue, nothing written yet", st)
	}
	if n := srv.gets.Load() - gets; n != 1 {
		t.Fatalf("second read made %d GETs, want 1 (its Open)", n)
	}
	release()
	s.c.Flush()
	if st := s.c.Stats(); st.WrittenEntries != 2 {
		t.Fatalf("after the flush %d entries written, want 2", st.WrittenEntries)
	}
}
