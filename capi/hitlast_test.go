package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/policy"
)

// hit.c remembers, per thread, the file entry of its last hit (mt_last) so
// that a read of the same path skips the lookup. A caller that reuses one
// path buffer for other strings must still get each path's own bytes: a
// path of the same length, a shorter one that is a prefix of the last, a
// longer one that extends it, and the same path on another context. Run on
// one OS thread, so that every call finds the previous one's entry.
func TestHitLastEntryPathReuse(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir := t.TempDir()
	pa, pb, plong := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin"), filepath.Join(dir, "long-b.bin")
	da, db, dlong := pattern(hitFile, 1), pattern(hitFile, 2), pattern(hitFile, 3)
	writeFile(t, pa, da)
	writeFile(t, pb, db)
	writeFile(t, plong, dlong)
	buf := cPathBuf(4096)
	defer cPathFree(buf)
	for _, fresh := range []int{config.FreshStrict, config.FreshOpen} {
		ids := [2]uint64{}
		var served [2]uint64
		ctxStats := [2]func() (uint64, uint64){}
		for i := range ids {
			// A path recheck far above the test's run time: a strict hit
			// gives a path resolved longer ago than the recheck back to Go,
			// which the loaded CI machine's -race run took (the first read
			// of a.bin, after six prefetches, once came to Go).
			id, c := newHitCtx(t, fresh, func(o *config.Options) { o.PathRecheckMs = 60000 })
			for _, p := range []string{pa, pb, plong} {
				if _, err := c.Prefetch(p, 0, hitFile, 0); err != nil {
					t.Fatal(err)
				}
			}
			c.ResetStats()
			ids[i] = id
			ctxStats[i] = func() (uint64, uint64) { s := c.Stats(); return s.Requests, s.CacheHitRequests }
		}
		read := func(ctx int, path string, off uint64, want []byte) {
			t.Helper()
			setCPath(buf, path)
			dst := make([]byte, 4096)
			ok := hitReadCPath(ids[ctx], buf, off, unsafe.Pointer(&dst[0]), 4096, 0)
			if want == nil {
				if ok {
					t.Fatalf("fresh %d, ctx %d, %q: served in C, want given to Go", fresh, ctx, path)
				}
				return
			}
			if !ok || !bytes.Equal(dst, want[off:off+4096]) {
				t.Fatalf("fresh %d, ctx %d, %q at %d: ok=%v, bytes right=%v", fresh, ctx, path, off, ok,
					bytes.Equal(dst, want[off:off+4096]))
			}
			served[ctx]++
		}
		read(0, pa, 0, da)
		read(0, pa, 8192, da)
		read(0, pb, 8192, db) // same length, other bytes
		read(0, pa, 4096, da)
		read(0, pa[:len(pa)-1], 4096, nil) // a prefix of the last path
		read(0, pa+"x", 4096, nil)         // the last path and more
		read(0, pa, 65536, da)
		read(0, plong, 65536, dlong)
		read(1, plong, 4096, dlong) // the same path on another context
		read(0, plong, 4096, dlong)
		read(1, pa, 0, da)
		for i := range ids {
			if req, hits := ctxStats[i](); req != served[i] || hits != served[i] {
				t.Fatalf("fresh %d, ctx %d: requests %d, hits %d, want %d each", fresh, i, req, hits, served[i])
			}
		}
	}
}

// A file rewritten in place after the thread's last hit of it is not served
// from that entry under strict freshness (the fstat check runs as on the
// full lookup), and once Go has read the new version, C serves its bytes.
func TestHitLastEntryNeverStale(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	old, neu := pattern(hitFile, 4), pattern(hitFile, 5)
	writeFile(t, path, old)
	id, c := newHitCtx(t, config.FreshStrict, nil)
	if _, err := c.Prefetch(path, 0, hitFile, 0); err != nil {
		t.Fatal(err)
	}
	buf := cPathBuf(4096)
	defer cPathFree(buf)
	setCPath(buf, path)
	dst := make([]byte, 4096)
	for range 2 { // the second finds the first one's entry
		if !hitReadCPath(id, buf, 4096, unsafe.Pointer(&dst[0]), 4096, 0) || !bytes.Equal(dst, old[4096:8192]) {
			t.Fatal("first hits: not served in C, or wrong bytes")
		}
	}
	time.Sleep(10 * time.Millisecond) // a coarse mtime clock must move
	writeFile(t, path, neu)
	if hitReadCPath(id, buf, 4096, unsafe.Pointer(&dst[0]), 4096, 0) {
		t.Fatal("strict: a rewritten file was served in C from the thread's last entry")
	}
	if err := c.Read(path, 4096, 4096, dst, policy.TargetCPU, 0); err != nil || !bytes.Equal(dst, neu[4096:8192]) {
		t.Fatalf("Go read after the rewrite: %v", err)
	}
	for range 2 {
		clear(dst)
		if !hitReadCPath(id, buf, 4096, unsafe.Pointer(&dst[0]), 4096, 0) || !bytes.Equal(dst, neu[4096:8192]) {
			t.Fatal("new version: not served in C, or wrong bytes")
		}
	}
}
