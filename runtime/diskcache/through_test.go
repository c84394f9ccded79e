package diskcache

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// holdThrough makes every write-through wait before it writes until the
// returned function is called (once).
func holdThrough(t *testing.T) (release func()) {
	gate := make(chan struct{})
	throughGate = func() { <-gate }
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { release(); throughGate = nil })
	return release
}

// TestWriteThrough: blocks that land whole in the caller's buffer are
// written from it before the read returns (no queue, no flush needed), and
// a second instance is served all of them from disk.
func TestWriteThrough(t *testing.T) {
	want := pattern(8*testBlock, 11)
	srv := newObjServer(t, want, `"wt"`)
	dir := t.TempDir()
	ro := testOptions()
	ro.MaxConcurrency = writeThroughSlots // no block waits for a slot
	s := newStack(t, ro, Options{Dir: dir})
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	st := s.c.Stats() // no Flush: the entries are written when the read returns
	if st.MissBlocks != 8 || st.ThroughWrites != 8 || st.WrittenEntries != 8 || st.QueueWaits != 0 ||
		st.QueueDrops != 0 || st.InlineWrites != 0 {
		t.Fatalf("stats %+v: want 8 misses, 8 blocks written through, 8 entries, no waits, drops, inline writes", st)
	}
	if names, _ := entries(t, dir); len(names) != 8 {
		t.Fatalf("%d entries on disk after the read, want 8: %q", len(names), names)
	}
	onceEach(t, srv)
	before := srv.gets.Load()
	s2 := newStack(t, testOptions(), Options{Dir: dir})
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("second instance: bytes differ")
	}
	if st := s2.c.Stats(); st.HitBlocks != 8 || st.MissBlocks != 0 {
		t.Fatalf("second instance stats %+v: want 8 hits", st)
	}
	if n := srv.gets.Load() - before; n != 1 {
		t.Fatalf("second instance made %d GETs, want 1 (its Open)", n)
	}
}

// TestWriteThroughEdgesQueued: of a read that covers its first and last
// blocks only in part, those two (fetched into buffers of their own) go to
// the write-behind queue and the eight whole ones between are written
// through.
func TestWriteThroughEdgesQueued(t *testing.T) {
	want := pattern(10*testBlock, 12)
	srv := newObjServer(t, want, `"we"`)
	dir := t.TempDir()
	ro := testOptions()
	ro.MaxConcurrency = writeThroughSlots // no block waits for a slot
	s := newStack(t, ro, Options{Dir: dir})
	lo, hi := uint64(testBlock/2), uint64(19*testBlock/2)
	if got := s.read(t, srv.url(), lo, hi-lo); !bytes.Equal(got, want[lo:hi]) {
		t.Fatal("bytes differ")
	}
	s.c.Flush()
	st := s.c.Stats()
	if st.MissBlocks != 10 || st.ThroughWrites != 8 || st.WrittenEntries != 10 || st.QueueWaits != 0 || st.QueueDrops != 0 {
		t.Fatalf("stats %+v: want 10 misses, 8 written through, 10 entries, no waits or drops", st)
	}
	onceEach(t, srv)
}

// TestWriteThroughSlotWaitExpires: with one slot, held by a write that
// does not finish, the other seven blocks find no slot within QueueWait and
// are dropped (uncached, not fetched again); the read still returns their
// bytes, once the held write is let go.
func TestWriteThroughSlotWaitExpires(t *testing.T) {
	old := writeThroughSlots
	writeThroughSlots = 1
	t.Cleanup(func() { writeThroughSlots = old })
	release := holdThrough(t)
	want := pattern(8*testBlock, 13)
	srv := newObjServer(t, want, `"ws"`)
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir, QueueWait: time.Millisecond})
	done := make(chan []byte)
	go func() { done <- s.read(t, srv.url(), 0, uint64(len(want))) }()
	for s.c.Stats().QueueDrops < 7 {
		time.Sleep(time.Millisecond)
	}
	release()
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	st := s.c.Stats()
	if st.MissBlocks != 8 || st.ThroughWrites != 1 || st.WrittenEntries != 1 || st.QueueWaits != 7 || st.QueueDrops != 7 {
		t.Fatalf("stats %+v: want 8 misses, 1 written through, 1 entry, 7 waits, 7 drops", st)
	}
	onceEach(t, srv)
	s2 := newStack(t, testOptions(), Options{Dir: dir, Synchronous: true})
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("second instance: bytes differ")
	}
	if st := s2.c.Stats(); st.HitBlocks != 1 || st.MissBlocks != 7 {
		t.Fatalf("second instance stats %+v: want 1 hit, 7 misses", st)
	}
}

// TestWriteThroughBlockServedFromMemory: a block being written through
// for one read serves a second read of it from the first read's buffer (a
// hit), not with a second GET.
func TestWriteThroughBlockServedFromMemory(t *testing.T) {
	release := holdThrough(t)
	want := pattern(8*testBlock, 14)
	srv := newObjServer(t, want, `"wm"`)
	s := newStack(t, testOptions(), Options{Dir: t.TempDir(), QueueWait: time.Hour})
	done := make(chan []byte)
	go func() { done <- s.read(t, srv.url(), 0, uint64(len(want))) }()
	for s.c.Stats().MissBlocks < 8 { // every GET of the first read made
		time.Sleep(time.Millisecond)
	}
	var idx uint64
	for found := false; !found; {
		s.c.wb.mu.Lock()
		for _, j := range s.c.wb.pending {
			idx, found = j.idx, true
		}
		s.c.wb.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	gets := srv.gets.Load()
	lo := idx*testBlock + 5
	if got := s.read(t, srv.url(), lo, 100); !bytes.Equal(got, want[lo:lo+100]) {
		t.Fatal("second read: bytes differ")
	}
	if n := srv.gets.Load() - gets; n != 1 {
		t.Fatalf("second read made %d GETs, want 1 (its Open)", n)
	}
	release()
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatal("first read: bytes differ")
	}
	if st := s.c.Stats(); st.MissBlocks != 8 || st.HitBlocks != 1 || st.HitBytes != 100 || st.ThroughWrites != 8 || st.WrittenEntries != 8 {
		t.Fatalf("stats %+v: want 8 misses, 1 hit of 100 bytes from memory, 8 written through", st)
	}
}
