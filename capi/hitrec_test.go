package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
)

// More OS threads than hit.c has reader records (64) hit one context at
// once: the record threads count in their own shards with plain stores, the
// others in the shared counters, and each hit is counted exactly once.
// Then the context is removed while every thread keeps reading: removal
// waits out the readers of both kinds (a copy from the unmapped region
// would fault or return wrong bytes), and no read is served after it.
func TestHitThreadRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	data := pattern(1<<20, 0)
	writeFile(t, path, data)
	id, c := newHitCtx(t, config.FreshOpen, nil)
	if _, err := c.Prefetch(path, 0, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	c.ResetStats()
	const threads, reads = 80, 200
	var bad, served atomic.Int64
	var removed atomic.Bool
	var wg, counted sync.WaitGroup
	start, phase2 := make(chan struct{}), make(chan struct{})
	for g := range threads {
		wg.Add(1)
		counted.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // one OS thread each, alive together
			defer runtime.UnlockOSThread()
			<-start
			for i := range reads {
				off := uint64((g*reads+i)%256) * 4096
				got, ok := read4k(id, path, off, 0)
				if !ok || !bytes.Equal(got, data[off:off+4096]) {
					bad.Add(1)
				}
			}
			counted.Done()
			<-phase2
			for i := 0; ; i++ {
				gone := removed.Load()
				off := uint64((g+i)%256) * 4096
				got, ok := read4k(id, path, off, 0)
				if ok {
					served.Add(1)
					if gone || !bytes.Equal(got, data[off:off+4096]) {
						bad.Add(1)
					}
				} else if gone {
					return
				}
			}
		}()
	}
	close(start)
	counted.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d of %d concurrent reads not served in C or wrong", n, threads*reads)
	}
	s := c.Stats()
	if n := uint64(threads * reads); s.Requests != n || s.CacheHitRequests != n || s.CacheHits != n ||
		s.CacheHitBytes != n*4096 || s.Bytes != n*4096 {
		t.Fatalf("stats of %d hits on %d threads: %+v", n, threads, s)
	}
	close(phase2)
	time.Sleep(20 * time.Millisecond)
	if _, err := removeContext(id); err != nil {
		t.Fatal(err)
	}
	c.Close() // unmaps the region: a reader not waited out would fault outside the copy's guard
	removed.Store(true)
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d reads wrong or served after the context was removed", n)
	}
	if served.Load() == 0 {
		t.Fatal("no read was served before the removal")
	}
}
