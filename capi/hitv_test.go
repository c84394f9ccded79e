package main

import (
	"bytes"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/stats"
)

// The C-side readv (mt_hit_readv) against its contracts: a call whose every
// element is a cached range of the call's file is served with exactly the
// file's bytes and the stats Go's ReadV gives the same call; any other call
// is given back to Go whole.

type span struct{ off, size uint64 }

// cachedSpans: ranges of a hitFile (one not 4 KiB aligned), in no
// particular order, one repeated; the last spanBlocks elements cross the
// boundary of its two 64 KiB blocks (Go counts a cache hit per block).
var cachedSpans = []span{{0, 4096}, {65536, 4096}, {1000, 3000}, {hitFile - 4096, 4096}, {23 * 4096, 8192}, {0, 4096},
	{65536 - 2048, 4096}, {65536 - 1, 2}, {100, hitFile - 200}}

const spanBlocks = 3

func TestHitReadvServesAndCountsAsGo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	data := pattern(hitFile, 3)
	writeFile(t, path, data)
	for _, tc := range []struct {
		name  string
		fresh int
		flags uint32
	}{
		{"strict", config.FreshStrict, 0},
		{"strict+immutable", config.FreshStrict, policy.ReadImmutable},
		{"open", config.FreshOpen, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, c := newHitCtx(t, tc.fresh, nil)
			if _, err := c.Prefetch(path, 0, hitFile, 0); err != nil {
				t.Fatal(err)
			}
			// The same call through Go's ReadV: the stats C must give.
			gv := make([]engine.IOVec, len(cachedSpans))
			for k, sp := range cachedSpans {
				gv[k] = engine.IOVec{Path: path, Off: sp.off, Size: sp.size, Dst: make([]byte, sp.size)}
			}
			c.ResetStats()
			if err := c.ReadV(gv, policy.TargetCPU, tc.flags); err != nil {
				t.Fatal(err)
			}
			want := c.Stats()
			n := uint64(len(cachedSpans))
			if want.ReadvCalls != 1 || want.ReadvInlineHits != n || want.CacheHitRequests != n ||
				want.CacheHits != n+spanBlocks {
				t.Fatalf("Go's ReadV did not serve every element inline: %+v", want)
			}

			iov := make([]hitIOVec, len(cachedSpans))
			for k, sp := range cachedSpans {
				iov[k] = cIOVec(sp.off, sp.size, "")
				defer cIOVecFree(iov[k])
			}
			c.ResetStats()
			if !hitReadv(id, path, iov, tc.flags) {
				t.Fatal("not served in C")
			}
			for k, sp := range cachedSpans {
				if r := cIOVecResult(iov[k]); r != int64(sp.size) {
					t.Fatalf("element %d: result %d, want %d", k, r, sp.size)
				}
				if !bytes.Equal(cIOVecBytes(iov[k]), data[sp.off:sp.off+sp.size]) {
					t.Fatalf("element %d: wrong bytes", k)
				}
			}
			if got := c.Stats(); got != want {
				t.Fatalf("stats of the C readv\n%+v\nwant (Go's ReadV)\n%+v", got, want)
			}
			c.ResetStats()
			if s := c.Stats(); s.ReadvCalls != 0 || s.ReadvInlineHits != 0 || s.Revalidations != 0 {
				t.Fatalf("after reset: %+v", s)
			}
		})
	}
}

func TestHitReadvGivesBackToGo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	writeFile(t, path, pattern(256<<10, 0))
	id, c := newHitCtx(t, config.FreshStrict, nil)
	if _, err := c.Prefetch(path, 0, 128<<10, 0); err != nil {
		t.Fatal(err)
	}
	c.ResetStats()
	// Each call has one cached element first and then the one that only Go
	// serves (or refuses): C must not serve any of the call.
	for _, tc := range []struct {
		name  string
		path  string // the call's path
		other span
		opath string // the second element's own path
		flags uint32
	}{
		{"uncached", path, span{200 << 10, 4096}, "", 0},
		{"past EOF", path, span{256<<10 - 2048, 4096}, "", 0},
		{"zero size", path, span{0, 0}, "", 0},
		{"own path", path, span{0, 4096}, path, 0},
		{"unknown flag", path, span{0, 4096}, "", 1 << 20},
		{"other file", filepath.Join(dir, "none"), span{0, 4096}, "", 0},
	} {
		iov := []hitIOVec{cIOVec(4096, 4096, ""), cIOVec(tc.other.off, tc.other.size, tc.opath)}
		if hitReadv(id, tc.path, iov, tc.flags) {
			t.Errorf("%s: served in C", tc.name)
		}
		for _, v := range iov {
			cIOVecFree(v)
		}
	}
	if hitReadv(id, path, nil, 0) {
		t.Error("n = 0: served in C")
	}
	bad := []hitIOVec{cIOVec(0, 4096, "")}
	cIOVecFree(bad[0])
	bad[0].dst = nil
	if hitReadv(id, path, bad, 0) {
		t.Error("NULL dst: served in C")
	}
	// A fault on a destination mid-call: given back (Go reports it).
	mem := mmapNone(t)
	faulty := []hitIOVec{cIOVec(0, 4096, ""), cIOVec(4096, 4096, "")}
	defer cIOVecFree(faulty[0])
	cIOVecFree(faulty[1])
	faulty[1].dst = mem
	faulty[1].path = nil
	if hitReadv(id, path, faulty, 0) {
		t.Error("faulting dst: served in C")
	}
	// A fault stops the call's copies there (one guard for the loop): the
	// elements before it are served, it and every later one are Go's.
	mid := []hitIOVec{cIOVec(0, 4096, ""), cIOVec(4096, 4096, ""), cIOVec(8192, 4096, "")}
	defer cIOVecFree(mid[0])
	defer cIOVecFree(mid[2])
	cIOVecFree(mid[1])
	mid[1].dst, mid[1].path = mem, nil
	mid[2].result = 99 // set by the call
	if hitReadv(id, path, mid, 0) {
		t.Error("faulting dst mid-call: served in C")
	}
	if r := [3]int64{cIOVecResult(mid[0]), cIOVecResult(mid[1]), cIOVecResult(mid[2])}; r != [3]int64{4096, 0, 0} {
		t.Errorf("results of a call faulting at element 1: %v, want [4096 0 0]", r)
	}
	if !bytes.Equal(cIOVecBytes(mid[0]), pattern(256<<10, 0)[:4096]) {
		t.Error("element 0 of the faulting call: wrong bytes")
	}
	// Partly served calls count their hits only (Go counts the call when it
	// reads the rest): the first element of each case but "unknown flag",
	// "other file" and NULL dst, and the faulting calls' first elements.
	if s := c.Stats(); s.ReadvCalls != 0 || s.ReadvInlineHits != 6 || s.Requests != 6 || s.CacheHitRequests != 6 ||
		s.CacheHitBytes != 6*4096 || s.Revalidations != 0 {
		t.Fatalf("stats of the calls given back: %+v", s)
	}
	// Once the context is gone, nothing is served.
	if _, err := removeContext(id); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ok := []hitIOVec{cIOVec(0, 4096, "")}
	defer cIOVecFree(ok[0])
	if hitReadv(id, path, ok, 0) {
		t.Error("finalized context: served in C")
	}
}

// TestHitReadvPartial: memtier_readv_ex with some elements cached and some
// not (and one with its own path, one of size 0) serves the hits in C and
// the rest in Go, with the file's bytes and the stats of Go's ReadV of the
// same call on a context in the same state.
func TestHitReadvPartial(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	data := pattern(512<<10, 9)
	writeFile(t, path, data)
	spans := []span{{0, 4096}, {300 << 10, 4096}, {8192, 4096}, {0, 0}, {400 << 10, 10000}, {65536, 4096}}
	for _, fresh := range []int{config.FreshStrict, config.FreshOpen} {
		var want stats.Snapshot
		for pass := range 2 { // 0: Go's ReadV, 1: memtier_readv_ex
			id, c := newHitCtx(t, fresh, nil)
			if _, err := c.Prefetch(path, 0, 128<<10, 0); err != nil {
				t.Fatal(err)
			}
			c.ResetStats()
			if pass == 0 {
				gv := make([]engine.IOVec, len(spans))
				for k, sp := range spans {
					gv[k] = engine.IOVec{Path: path, Off: sp.off, Size: sp.size, Dst: make([]byte, sp.size)}
				}
				gv[2].Path = path // as the element's own path below
				if err := c.ReadV(gv, policy.TargetCPU, 0); err != nil {
					t.Fatal(err)
				}
				want = c.Stats()
				continue
			}
			iov := make([]hitIOVec, len(spans))
			for k, sp := range spans {
				p := ""
				if k == 2 {
					p = path
				}
				iov[k] = cIOVec(sp.off, sp.size, p)
				defer cIOVecFree(iov[k])
			}
			if rc := readvC(id, path, iov, 0); rc != 0 {
				t.Fatalf("fresh %d: status %d", fresh, rc)
			}
			for k, sp := range spans {
				if r := cIOVecResult(iov[k]); r != int64(sp.size) {
					t.Fatalf("fresh %d element %d: result %d, want %d", fresh, k, r, sp.size)
				}
				if !bytes.Equal(cIOVecBytes(iov[k]), data[sp.off:sp.off+sp.size]) {
					t.Fatalf("fresh %d element %d: wrong bytes", fresh, k)
				}
			}
			if got := c.Stats(); got != want {
				t.Fatalf("fresh %d: stats\n%+v\nwant (Go's ReadV)\n%+v", fresh, got, want)
			}
		}
	}
}

// mmapNone is an address with no mapping (mapped, then unmapped).
func mmapNone(t *testing.T) unsafe.Pointer {
	t.Helper()
	hole, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	p := unsafe.Pointer(&hole[0])
	if err := unix.Munmap(hole); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHitReadvEvictionRace: with a 4-block cache, C readv calls of 4
// elements race with evictions, block reuse and drop_cache by other
// goroutines; a call C serves has every byte right, any other is Go's.
func TestHitReadvEvictionRace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	const size = 2 << 20
	data := pattern(size, 0x5c)
	writeFile(t, path, data)
	id, c := newHitCtx(t, config.FreshStrict, func(o *config.Options) { o.CacheBytes = 256 << 10 })
	var wg sync.WaitGroup
	var inC atomic.Int64
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iov := make([]hitIOVec, 4)
			for k := range iov {
				iov[k] = cIOVec(0, 4096, "")
				defer cIOVecFree(iov[k])
			}
			for i := range 1500 {
				offs := make([]uint64, len(iov))
				for k := range iov {
					off := uint64((i*7919+k*31+g*104729)%(size/4096)) * 4096
					if i%4 != 0 {
						off %= 192 << 10 // a hot part that stays cached more often
					}
					offs[k] = off
					iov[k].offset = C_uint64(off)
				}
				if hitReadv(id, path, iov, 0) {
					inC.Add(1)
					for k, off := range offs {
						if !bytes.Equal(cIOVecBytes(iov[k]), data[off:off+4096]) {
							t.Errorf("offset %d: wrong bytes from C", off)
							return
						}
					}
				}
				// Go's reads (of the same ranges) keep the cache turning over.
				dst := make([]byte, 4096)
				for _, off := range offs {
					if err := c.Read(path, off, 4096, dst, policy.TargetCPU, 0); err != nil {
						t.Error(err)
						return
					}
				}
				if g == 0 && i%300 == 0 {
					_ = c.DropCache(path)
				}
			}
		}()
	}
	wg.Wait()
	if inC.Load() == 0 {
		t.Fatal("no readv was served in C")
	}
}

// A readv of more than 1 MiB (hit.c's MT_HIT_STREAM_BYTES) is copied with
// streaming stores: each element, at destinations of every 32-byte
// alignment, still gets exactly the file's bytes.
func TestHitReadvLargeBatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	data := pattern(hitFile, 5)
	writeFile(t, path, data)
	id, c := newHitCtx(t, config.FreshStrict, nil)
	if _, err := c.Prefetch(path, 0, hitFile, 0); err != nil {
		t.Fatal(err)
	}
	var spans []span
	total := uint64(0)
	for k := uint64(0); total <= 3<<20; k++ {
		sp := span{(k * 4099) % 4096, hitFile - 4096 - k%33}
		spans = append(spans, sp)
		total += sp.size
	}
	iov := make([]hitIOVec, len(spans))
	for k, sp := range spans {
		iov[k] = cIOVec(sp.off, sp.size, "")
		defer cIOVecFree(iov[k])
	}
	if !hitReadv(id, path, iov, 0) {
		t.Fatal("not served in C")
	}
	for k, sp := range spans {
		if r := cIOVecResult(iov[k]); r != int64(sp.size) {
			t.Fatalf("element %d: result %d, want %d", k, r, sp.size)
		}
		if !bytes.Equal(cIOVecBytes(iov[k]), data[sp.off:sp.off+sp.size]) {
			t.Fatalf("element %d: wrong bytes", k)
		}
	}
}
