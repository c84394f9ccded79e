package diskcache

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/files"
)

// readCold opens name and reads it into dst at off as a cold fill.
func (s *stack) readCold(t testing.TB, name string, dst []byte, off uint64) {
	t.Helper()
	o, _, err := s.src.Open(name, files.TrustNone)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer o.Release()
	if _, err := s.src.ReadAtTiersCold(o, dst, off); err != nil {
		t.Fatalf("cold read [%d, +%d): %v", off, len(dst), err)
	}
}

// misaligned returns n bytes whose address is skew bytes past a
// directAlign boundary (a numpy buffer is 16 past a page).
func misaligned(n, skew int) []byte { return alignedBuf(n + directAlign)[skew : skew+n] }

// headerOf reads and decodes the header of the entry file p.
func headerOf(t *testing.T, p string) (header, int64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	hl, err := decodeFixed(b)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	h, err := decodeHeader(b[:hl])
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return h, int64(len(b))
}

// TestColdFillSkewed: a cold read into a buffer 17 bytes past a page
// writes each whole block from the buffer itself with O_DIRECT (the
// entry's payload 17 bytes after its header, the skew), the two edge
// blocks it covers in part from copies; after Close every entry is whole
// and warmed, and a second instance over the directory is served every
// byte from disk, exact, with no GET but its Open.
func TestColdFillSkewed(t *testing.T) {
	for _, skew := range []int{0, 17, 4095} {
		want := pattern(10*testBlock, byte(21+skew))
		srv := newObjServer(t, want, `"cold"`)
		dir := t.TempDir()
		ro := testOptions()
		ro.MaxConcurrency = directSlots / 2 // every whole block finds a direct slot
		s := newStack(t, ro, Options{Dir: dir})
		off, n := uint64(testBlock/2), uint64(9*testBlock)
		dst := misaligned(int(n), skew)
		s.readCold(t, srv.url(), dst, off)
		if !bytes.Equal(dst, want[off:off+n]) {
			t.Fatalf("skew %d: bytes differ", skew)
		}
		if err := s.c.Close(); err != nil {
			t.Fatal(err)
		}
		st := s.c.Stats()
		if st.MissBlocks != 10 || st.WrittenEntries != 10 || st.ColdWrites != 10 || st.WarmedEntries != 10 ||
			st.ThroughWrites != 0 || st.QueueDrops != 0 || st.WriteErrors != 0 {
			t.Fatalf("skew %d: stats %+v: want 10 misses, 10 cold entries written and warmed", skew, st)
		}
		names, _ := entries(t, dir)
		if len(names) != 10 {
			t.Fatalf("skew %d: %d entries, want 10", skew, len(names))
		}
		skewed := 0
		for _, p := range names {
			h, size := headerOf(t, p)
			if size != h.fileSize() {
				t.Fatalf("%s: %d bytes, header says %d", p, size, h.fileSize())
			}
			if h.skew == uint32(skew) && skew != 0 {
				skewed++
			} else if h.skew != 0 {
				t.Fatalf("%s: skew %d, want 0 or %d", p, h.skew, skew)
			}
		}
		if skew != 0 && skewed != 8 {
			t.Fatalf("skew %d: %d entries written from the caller's buffer, want the 8 whole blocks", skew, skewed)
		}
		before := srv.gets.Load()
		s2 := newStack(t, testOptions(), Options{Dir: dir})
		if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
			t.Fatalf("skew %d: second instance: bytes differ", skew)
		}
		if st := s2.c.Stats(); st.HitBlocks != 10 || st.MissBlocks != 0 || st.CorruptEntries != 0 {
			t.Fatalf("skew %d: second instance stats %+v: want 10 hits", skew, st)
		}
		if g := srv.gets.Load() - before; g != 1 {
			t.Fatalf("skew %d: second instance made %d GETs, want 1 (its Open)", skew, g)
		}
	}
}

// TestColdCorruptSkewedRefetched: a byte flipped in the payload of an
// entry written with a skew, and another entry cut short, are found,
// counted, deleted and fetched again, never served.
func TestColdCorruptSkewedRefetched(t *testing.T) {
	want := pattern(4*testBlock, 5)
	srv := newObjServer(t, want, `"cs"`)
	dir := t.TempDir()
	ro := testOptions()
	ro.MaxConcurrency = directSlots / 2
	s := newStack(t, ro, Options{Dir: dir})
	s.readCold(t, srv.url(), misaligned(len(want), 16), 0)
	s.c.Close()
	names, _ := entries(t, dir)
	if len(names) != 4 {
		t.Fatalf("%d entries, want 4", len(names))
	}
	h, size := headerOf(t, names[0])
	if h.skew != 16 {
		t.Fatalf("skew %d, want 16", h.skew)
	}
	if err := flipByte(names[0], h.payloadOff()+100); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(names[1], size-1); err != nil {
		t.Fatal(err)
	}
	s2 := newStack(t, testOptions(), Options{Dir: dir})
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	if st := s2.c.Stats(); st.CorruptEntries != 2 || st.HitBlocks != 2 || st.MissBlocks != 2 {
		t.Fatalf("stats %+v: want 2 corrupt entries refetched, 2 hits", st)
	}
}

// TestColdQueuedCopiesOutliveTheRead: with no direct slot, every block of
// a cold read is copied into the queue; the read returns while the writes
// are held, the caller then overwrites its buffer, a read meanwhile is
// served from the queued copies (no GET), and Close writes them all: a
// second instance reads the exact bytes from disk.
func TestColdQueuedCopiesOutliveTheRead(t *testing.T) {
	old := directSlots
	directSlots = 0
	t.Cleanup(func() { directSlots = old })
	want := pattern(6*testBlock, 9)
	srv := newObjServer(t, want, `"q"`)
	dir := t.TempDir()
	s := newStack(t, testOptions(), Options{Dir: dir})
	release := holdWriter(t)
	dst := misaligned(len(want), 16)
	s.readCold(t, srv.url(), dst, 0)
	if !bytes.Equal(dst, want) {
		t.Fatal("bytes differ")
	}
	if names, _ := entries(t, dir); len(names) != 0 {
		t.Fatalf("%d entries while the writer is held, want 0", len(names))
	}
	for i := range dst {
		dst[i] = 0xee // the caller reuses its buffer
	}
	before := srv.gets.Load()
	if got := s.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("read while queued: bytes differ")
	}
	if g := srv.gets.Load() - before; g != 1 {
		t.Fatalf("read while queued made %d GETs, want 1 (its Open)", g)
	}
	time.AfterFunc(20*time.Millisecond, release)
	if err := s.c.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.c.Stats(); st.ColdWrites != 6 || st.WrittenEntries != 6 {
		t.Fatalf("stats %+v: want the 6 queued blocks written by Close", st)
	}
	s2 := newStack(t, testOptions(), Options{Dir: dir})
	if got := s2.read(t, srv.url(), 0, uint64(len(want))); !bytes.Equal(got, want) {
		t.Fatal("second instance: bytes differ")
	}
	if st := s2.c.Stats(); st.HitBlocks != 6 || st.MissBlocks != 0 {
		t.Fatalf("second instance stats %+v: want 6 hits", st)
	}
}

// TestColdQueueBound: the copies of a cold read are bounded by QueueBytes
// (2 blocks here): with the writer held, two blocks are queued, the other
// four wait QueueWait and are dropped (left uncached, never fetched
// twice), and at most two buffers are ever made.
func TestColdQueueBound(t *testing.T) {
	old := directSlots
	directSlots = 0
	t.Cleanup(func() { directSlots = old })
	want := pattern(6*testBlock, 13)
	srv := newObjServer(t, want, `"b"`)
	ro := testOptions()
	ro.MaxConcurrency = 1 // blocks in order: the first two are queued
	s := newStack(t, ro, Options{Dir: t.TempDir(), QueueBytes: 2 * testBlock, QueueWait: 10 * time.Millisecond})
	release := holdWriter(t)
	dst := misaligned(len(want), 16)
	s.readCold(t, srv.url(), dst, 0)
	if !bytes.Equal(dst, want) {
		t.Fatal("bytes differ")
	}
	s.c.cold.mu.Lock()
	made := s.c.cold.made
	s.c.cold.mu.Unlock()
	if made > 2 {
		t.Fatalf("%d copy buffers made, want at most 2 (QueueBytes)", made)
	}
	release()
	s.c.Close()
	if st := s.c.Stats(); st.MissBlocks != 6 || st.QueueWaits != 4 || st.QueueDrops != 4 || st.ColdWrites != 2 {
		t.Fatalf("stats %+v: want 6 misses, 4 waits dropped, 2 cold writes", st)
	}
}
