package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/hitidx"
	"github.com/memtier/memtier/runtime/policy"
)

// The C-side hit path (hit.c) against its contracts: it serves exactly the
// cached bytes, counts them as Go would, and gives every call it cannot be
// sure of back to Go (false): changed files in strict freshness, dropped
// files, finalized contexts, ranges outside one valid block, bad buffers.

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131+7) ^ seed
	}
	return b
}

// hitFile is the size of the files whose every cached block the tests expect
// C to serve: two blocks of the default 64 KiB. The block table is 2-way set
// associative (runtime/hitidx/tables.go): a third block of a file whose key
// hashes to the same pair displaces one of the other two, and C gives that
// block's reads back to Go, which serves them (correct, only not in C). The
// pair follows from the file's version ID, a hash of its identity (inode,
// times), so with a 1 MiB file (16 blocks, 256 pairs) about 1 run in 120
// displaced a block the test read ("not served in C"). Two blocks always
// have their two entries (hitidx.TestFullPairKeepsTwo).
const hitFile = 128 << 10

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newHitCtx makes a registered context with freshness f, as memtier_init does.
func newHitCtx(t *testing.T, f int, edit func(*config.Options)) (uint64, *engine.Context) {
	t.Helper()
	o := config.Defaults()
	o.CacheBytes = 8 << 20
	o.Freshness = f
	if edit != nil {
		edit(&o)
	}
	c, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	id := addContext(c)
	t.Cleanup(func() {
		if _, err := removeContext(id); err == nil {
			c.Close()
		}
	})
	return id, c
}

func read4k(id uint64, path string, off uint64, flags uint32) ([]byte, bool) {
	dst := make([]byte, 4096)
	ok := hitRead(id, path, off, unsafe.Pointer(&dst[0]), uint64(len(dst)), flags)
	return dst, ok
}

func TestHitLayout(t *testing.T) {
	if m := hitLayoutMismatch(); m != "" {
		t.Fatal(m)
	}
}

func TestHitServesAndCounts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	data := pattern(hitFile, 0)
	writeFile(t, path, data)
	for _, tc := range []struct {
		name      string
		fresh     int
		flags     uint32
		revalid   uint64
		servedInC bool
	}{
		{"strict", config.FreshStrict, 0, 1, true},
		{"strict+immutable", config.FreshStrict, policy.ReadImmutable, 0, true},
		{"open", config.FreshOpen, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, c := newHitCtx(t, tc.fresh, nil)
			if _, err := c.Prefetch(path, 0, hitFile, 0); err != nil {
				t.Fatal(err)
			}
			c.ResetStats()
			// Both pages of block 0 first, block 1's first, last and a middle page.
			offs := []uint64{0, 4096, 65536, hitFile - 4096, 23 * 4096}
			for _, off := range offs {
				got, ok := read4k(id, path, off, tc.flags)
				if !ok {
					t.Fatalf("offset %d: not served in C", off)
				}
				if !bytes.Equal(got, data[off:off+4096]) {
					t.Fatalf("offset %d: wrong bytes", off)
				}
			}
			s := c.Stats()
			n := uint64(len(offs))
			if s.Requests != n || s.CacheHitRequests != n || s.CacheHits != n || s.Bytes != n*4096 ||
				s.CacheHitBytes != n*4096 || s.Revalidations != n*tc.revalid || s.CacheMisses != 0 {
				t.Fatalf("stats %+v", s)
			}
			c.ResetStats()
			if s := c.Stats(); s.Requests != 0 || s.CacheHitBytes != 0 || s.Revalidations != 0 {
				t.Fatalf("after reset: %+v", s)
			}
		})
	}
}

func TestHitGivesBackToGo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	writeFile(t, path, pattern(256<<10, 0))
	id, c := newHitCtx(t, config.FreshStrict, nil)
	if _, err := c.Prefetch(path, 0, 128<<10, 0); err != nil {
		t.Fatal(err)
	}
	// Not cached (second half), past end of file, across two 64 KiB blocks,
	// unknown flag bits, an unindexed path: Go serves or refuses them.
	for _, tc := range []struct {
		name      string
		path      string
		off, size uint64
		flags     uint32
	}{
		{"uncached", path, 200 << 10, 4096, 0},
		{"past EOF", path, 256<<10 - 2048, 4096, 0},
		{"two blocks", path, 64<<10 - 2048, 4096, 0},
		{"unknown flag", path, 0, 4096, 1 << 20},
		{"other path", filepath.Join(dir, "none"), 0, 4096, 0},
		{"zero size", path, 0, 0, 0},
	} {
		dst := make([]byte, 8192)
		if hitRead(id, tc.path, tc.off, unsafe.Pointer(&dst[0]), tc.size, tc.flags) {
			t.Errorf("%s: served in C", tc.name)
		}
	}
	// A relative path under strict freshness: only a stat of the path can
	// tell which file it names now (files.Table.acquireFast).
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	buf := make([]byte, 4096)
	if err := c.Read("a.bin", 0, 4096, buf, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := read4k(id, "a.bin", 0, 0); ok {
		t.Error("relative path served in C under strict freshness")
	}
	if _, ok := read4k(id, "a.bin", 0, policy.ReadImmutable); !ok {
		t.Error("relative path with READ_IMMUTABLE not served in C")
	}
}

// TestHitNeverStale: a rewrite in place (same size) or a rename over the
// file is never served from C under strict freshness; under open freshness
// the old version is served until drop_cache, as documented.
func TestHitNeverStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	old, neu := pattern(128<<10, 0), pattern(128<<10, 0x5a)
	for _, fresh := range []int{config.FreshStrict, config.FreshOpen} {
		writeFile(t, path, old)
		id, c := newHitCtx(t, fresh, nil)
		if _, err := c.Prefetch(path, 0, 128<<10, 0); err != nil {
			t.Fatal(err)
		}
		if got, ok := read4k(id, path, 4096, 0); !ok || !bytes.Equal(got, old[4096:8192]) {
			t.Fatalf("fresh %d: first hit ok=%v", fresh, ok)
		}
		time.Sleep(10 * time.Millisecond) // a coarse mtime clock must move
		writeFile(t, path, neu)
		got, ok := read4k(id, path, 4096, 0)
		switch fresh {
		case config.FreshStrict:
			if ok {
				t.Fatal("strict: a rewritten file was served in C")
			}
		case config.FreshOpen:
			if !ok || !bytes.Equal(got, old[4096:8192]) {
				t.Fatalf("open: trusted entry ok=%v", ok)
			}
			if err := c.DropCache(path); err != nil {
				t.Fatal(err)
			}
			if _, ok := read4k(id, path, 4096, 0); ok {
				t.Fatal("open: served in C after drop_cache")
			}
		}
		buf := make([]byte, 4096)
		if err := c.Read(path, 4096, 4096, buf, policy.TargetCPU, 0); err != nil || !bytes.Equal(buf, neu[4096:8192]) {
			t.Fatalf("fresh %d: Go read after the rewrite: %v", fresh, err)
		}
		if got, ok := read4k(id, path, 4096, 0); !ok || !bytes.Equal(got, neu[4096:8192]) {
			t.Fatalf("fresh %d: new version not served in C (ok=%v)", fresh, ok)
		}
		// Rename over it: a new inode.
		tmp := filepath.Join(dir, "tmp.bin")
		writeFile(t, tmp, old)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		if fresh == config.FreshStrict {
			if _, ok := read4k(id, path, 4096, 0); ok {
				t.Fatal("strict: a file renamed over was served in C")
			}
		}
	}
}

func TestHitInterval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	writeFile(t, path, pattern(64<<10, 0))
	id, c := newHitCtx(t, config.FreshInterval, func(o *config.Options) { o.FreshnessIntervalMs = 50 })
	if _, err := c.Prefetch(path, 0, 64<<10, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := read4k(id, path, 0, 0); !ok {
		t.Fatal("within the interval: not served in C")
	}
	time.Sleep(60 * time.Millisecond)
	if _, ok := read4k(id, path, 0, 0); ok {
		t.Fatal("interval expired: served in C without a check")
	}
	buf := make([]byte, 4096)
	if err := c.Read(path, 0, 4096, buf, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := read4k(id, path, 0, 0); !ok {
		t.Fatal("after Go's check: not served in C")
	}
	if s := c.Stats(); s.Revalidations != 1 {
		t.Fatalf("revalidations %d, want 1 (Go's check only)", s.Revalidations)
	}
}

func TestHitFinalized(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	writeFile(t, path, pattern(64<<10, 0))
	id, c := newHitCtx(t, config.FreshOpen, nil)
	if _, err := c.Prefetch(path, 0, 64<<10, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := read4k(id, path, 0, 0); !ok {
		t.Fatal("not served in C")
	}
	if _, err := removeContext(id); err != nil {
		t.Fatal(err)
	}
	if _, ok := read4k(id, path, 0, 0); ok {
		t.Fatal("served in C after finalize")
	}
	c.Close()
}

func TestHitBadDst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	writeFile(t, path, pattern(64<<10, 0))
	id, c := newHitCtx(t, config.FreshOpen, nil)
	if _, err := c.Prefetch(path, 0, 64<<10, 0); err != nil {
		t.Fatal(err)
	}
	hole, err := unix.Mmap(-1, 0, 4*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	p := unsafe.Pointer(&hole[0])
	if err := unix.Munmap(hole); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the guard is re-armed after each caught fault
		if hitRead(id, path, 0, p, 4096, 0) {
			t.Fatal("a copy into unmapped memory reported success")
		}
	}
	if got, ok := read4k(id, path, 0, 0); !ok || !bytes.Equal(got, pattern(64<<10, 0)[:4096]) {
		t.Fatal("no hit after the faults")
	}
	if s := c.Stats(); s.Requests != 1 {
		t.Fatalf("requests %d, want 1 (faulted copies are Go's to count)", s.Requests)
	}
}

// TestHitEvictionRace: with a 4-block cache, C copies race with evictions
// and block reuse by other goroutines; every byte must still be right.
// Strict reads copy after reading the block entry; open ones copy from the
// hint first and check the entry after (mt_hit_copy_hinted).
func TestHitEvictionRace(t *testing.T) {
	for _, fresh := range []int{config.FreshStrict, config.FreshOpen} {
		testHitEvictionRace(t, fresh)
	}
}

func testHitEvictionRace(t *testing.T, fresh int) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	const size = 2 << 20
	data := pattern(size, 0x33)
	writeFile(t, path, data)
	id, c := newHitCtx(t, fresh, func(o *config.Options) { o.CacheBytes = 256 << 10 })
	var wg sync.WaitGroup
	var inC sync.Map
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, 4096)
			hits := 0
			for i := range 3000 {
				off := uint64((i*7919+g*104729)%(size/4096)) * 4096
				if i%3 == 0 {
					off %= 256 << 10 // a hot part that stays cached more often
				}
				if hitRead(id, path, off, unsafe.Pointer(&dst[0]), 4096, 0) {
					hits++
				} else if err := c.Read(path, off, 4096, dst, policy.TargetCPU, 0); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(dst, data[off:off+4096]) {
					t.Errorf("fresh %d, offset %d: wrong bytes", fresh, off)
					return
				}
				if g == 0 && i%500 == 0 {
					_ = c.DropCache(path)
				}
			}
			inC.Store(g, hits)
		}()
	}
	wg.Wait()
	total := 0
	inC.Range(func(_, v any) bool { total += v.(int); return true })
	if total == 0 {
		t.Fatalf("fresh %d: no read was served in C", fresh)
	}
}

// TestHitStaleHints: the address hints are only predictions. As the prefetch
// left them, every open read's copy from its hint stands. With every hint
// naming an unmapped page under the right tag (a wrong prediction), naming
// another cached block (mapped memory holding other bytes) under the right
// tag and sequence value, with a sequence value the entry no longer has,
// with every tag wrong (no prediction) and with every hint zero, C still
// serves exactly the cached bytes (from the entries' own addresses) and
// counts them once.
func TestHitStaleHints(t *testing.T) {
	// Open freshness copies from the hint; strict prefetches from it before
	// its fstat (a prefetch of an unmapped page must not fault).
	for _, fresh := range []int{config.FreshOpen, config.FreshStrict} {
		testHitStaleHints(t, fresh)
	}
}

func testHitStaleHints(t *testing.T, fresh int) {
	dir := t.TempDir()
	data := pattern(hitFile, 0x5a)
	blocks := int(hitFile / config.Defaults().CacheBlockBytes)
	nowhere := uint64(uintptr(mmapNone(t)))
	var (
		path  string
		id    uint64
		c     *engine.Context
		u64   func(off uintptr) *atomic.Uint64
		hints uintptr
		mask  uint64
		addrs []uint64             // the blocks' addresses, as the prefetch left the hints
		orig  map[uint64][2]uint64 // slot -> its words as the prefetch left them
	)
	// A file's blocks share a hint slot when their keys hash alike (the file
	// ID comes from the inode, about 1 in HintSlots per pair): such a block
	// is never predicted, and "as the prefetch left them" would miss. Each
	// try is a new file and context; keep the first whose blocks own a slot.
	for try := 0; len(addrs) != blocks; try++ {
		if try == 8 {
			t.Fatalf("%d hints set by the prefetch of %d blocks, in 8 files", len(addrs), blocks)
		}
		path = filepath.Join(dir, fmt.Sprintf("a%d.bin", try))
		writeFile(t, path, data)
		id, c = newHitCtx(t, fresh, nil)
		if _, err := c.Prefetch(path, 0, hitFile, 0); err != nil {
			t.Fatal(err)
		}
		base := c.HitIndex()
		u64 = func(off uintptr) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Add(base, off)) }
		hints, mask = uintptr(u64(hitidx.HdrHintOff).Load()), u64(hitidx.HdrHintMask).Load()
		addrs, orig = nil, map[uint64][2]uint64{}
		for i := uint64(0); i <= mask; i++ {
			h := hints + uintptr(i)*hitidx.HintEntry
			if w := u64(h).Load(); w != 0 {
				addrs = append(addrs, w&^0xfff)
				orig[i] = [2]uint64{w, u64(h + hitidx.HintStamp).Load()}
			}
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(w uint64, k int) uint64 // k: the k-th hint set
		stamp func(v uint64) uint64        // nil: left
	}{
		{"as the prefetch left them", func(w uint64, _ int) uint64 { return w }, nil},
		{"wrong address", func(w uint64, _ int) uint64 { return nowhere | w&0xfff }, nil},
		{"another block", func(w uint64, k int) uint64 { return addrs[(k+1)%len(addrs)] | w&0xfff }, nil},
		{"old sequence value", func(w uint64, _ int) uint64 { return w }, func(v uint64) uint64 { return v - 2 }},
		{"wrong tag", func(w uint64, _ int) uint64 { return w ^ 1 }, nil},
		{"zero", func(uint64, int) uint64 { return 0 }, nil},
	} {
		set := 0 // each case edits the hints as the prefetch left them
		for i := uint64(0); i <= mask; i++ {
			o, ok := orig[i]
			if !ok {
				continue
			}
			u64(hints + uintptr(i)*hitidx.HintEntry).Store(tc.edit(o[0], set))
			v := o[1]
			if tc.stamp != nil {
				v = tc.stamp(v)
			}
			u64(hints + uintptr(i)*hitidx.HintEntry + hitidx.HintStamp).Store(v)
			set++
		}
		if set == 0 && tc.name != "zero" {
			t.Fatalf("%s: no hint left to edit", tc.name)
		}
		c.ResetStats()
		misses0 := u64(hitidx.CtrHintMisses).Load()
		n := uint64(0)
		for off := uint64(0); off < hitFile; off += 12 << 10 {
			n++
			got, ok := read4k(id, path, off, 0)
			if !ok {
				t.Fatalf("%s, offset %d: not served in C", tc.name, off)
			}
			if !bytes.Equal(got, data[off:off+4096]) {
				t.Fatalf("%s, offset %d: wrong bytes", tc.name, off)
			}
		}
		revalid := uint64(0)
		if fresh == config.FreshStrict {
			revalid = n
		}
		if s := c.Stats(); s.Requests != n || s.CacheHitRequests != n || s.CacheHitBytes != n*4096 ||
			s.Revalidations != revalid {
			t.Fatalf("fresh %d, %s: stats %+v", fresh, tc.name, s)
		}
		// Open reads copy from the hint first and again from the entry
		// when the hint's copy does not stand: none of the untouched
		// hints miss, and every edited one does ("wrong tag" and "zero"
		// predict nothing, a miss without a copy from the hint). Strict
		// reads never copy from the hint.
		wantMisses := uint64(0)
		if fresh == config.FreshOpen && set > 0 && tc.name != "as the prefetch left them" {
			wantMisses = n
		}
		if got := u64(hitidx.CtrHintMisses).Load() - misses0; got != wantMisses {
			t.Fatalf("fresh %d, %s: %d hint misses, want %d", fresh, tc.name, got, wantMisses)
		}
	}
}
