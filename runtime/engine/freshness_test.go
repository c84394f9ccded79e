package engine

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/policy"
)

// rewrite replaces path's bytes in place with n bytes of b (same size: only
// mtime/ctime change).
func rewrite(t *testing.T, path string, n int, b byte) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte{b}, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFreshness_StrictChecksEveryCall(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	dst := make([]byte, 4096)
	for i := 0; i < 5; i++ {
		if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The first read opens the file (FilesOpened, no revalidation); each
	// later one checks it once.
	if s := c.Stats(); s.FilesOpened != 1 || s.Revalidations != 4 {
		t.Fatalf("files_opened %d revalidations %d, want 1 and 4", s.FilesOpened, s.Revalidations)
	}
	time.Sleep(10 * time.Millisecond) // let mtime move on coarse-clock file systems
	rewrite(t, path, 1<<20, 0xAB)
	if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0xAB}, 4096)) {
		t.Fatal("strict freshness served stale bytes after a rewrite")
	}
}

func TestFreshness_OpenNeverRechecks(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, func(o *config.Options) { o.Freshness = config.FreshOpen })
	dst := make([]byte, 4096)
	for i := 0; i < 5; i++ {
		if err := c.Read(path, 4096, 4096, dst, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(dst, pfile(4096, 4096)) {
		t.Fatal("wrong bytes")
	}
	if s := c.Stats(); s.FilesOpened != 1 || s.Revalidations != 0 || s.CacheHitRequests != 4 {
		t.Fatalf("files_opened %d revalidations %d cache_hit_requests %d, want 1, 0, 4",
			s.FilesOpened, s.Revalidations, s.CacheHitRequests)
	}
	// drop_cache forgets the file: the next read opens and checks it again.
	time.Sleep(10 * time.Millisecond)
	rewrite(t, path, 1<<20, 0xCD)
	if err := c.DropCache(path); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 4096, 4096, dst, 0, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0xCD}, 4096)) {
		t.Fatal("after drop_cache the new bytes must be read")
	}
}

func TestFreshness_ImmutableFlagPerCall(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	dst := make([]byte, 4096)
	if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.Read(path, 0, 4096, dst, 0, policy.ReadImmutable); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil { // strict again
		t.Fatal(err)
	}
	if s := c.Stats(); s.Revalidations != 1 {
		t.Fatalf("revalidations %d, want 1 (only the last, strict read checks)", s.Revalidations)
	}
	v := []IOVec{{Path: path, Off: 0, Size: 4096, Dst: make([]byte, 4096)}, {Path: path, Off: 8192, Size: 4096, Dst: make([]byte, 4096)}}
	if err := c.ReadV(v, 0, policy.ReadImmutable); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Revalidations != 1 {
		t.Fatalf("readv IMMUTABLE: revalidations %d, want 1", s.Revalidations)
	}
	if err := c.ReadV(v, 0, 1<<20); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Fatalf("readv with an unknown flag: %v", err)
	}
}

func TestFreshness_IntervalBoundsTheCheck(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, func(o *config.Options) {
		o.Freshness, o.FreshnessIntervalMs = config.FreshInterval, 60_000
	})
	dst := make([]byte, 4096)
	for i := 0; i < 4; i++ {
		if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Revalidations != 0 {
		t.Fatalf("revalidations %d within the interval, want 0", s.Revalidations)
	}
	c2 := newCtx(t, func(o *config.Options) {
		o.Freshness, o.FreshnessIntervalMs = config.FreshInterval, 1
	})
	for i := 0; i < 3; i++ {
		time.Sleep(3 * time.Millisecond)
		if err := c2.Read(path, 0, 4096, dst, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if s := c2.Stats(); s.Revalidations != 2 {
		t.Fatalf("revalidations %d with a 1 ms interval and 3 ms between reads, want 2", s.Revalidations)
	}
	time.Sleep(10 * time.Millisecond)
	rewrite(t, path, 1<<20, 0x5A)
	time.Sleep(3 * time.Millisecond)
	if err := c2.Read(path, 0, 4096, dst, 0, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0x5A}, 4096)) {
		t.Fatal("a rewrite older than the interval must be seen")
	}
}

func TestReadV_CachedElementsInline(t *testing.T) {
	path := writeP(t, 4<<20)
	c := newCtx(t, nil)
	if _, err := c.Prefetch(path, 0, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	c.ResetStats()
	v := make([]IOVec, 0, 8)
	for i := 0; i < 8; i++ {
		off := uint64(i) * 300_000 // 4 in the prefetched MiB, 4 beyond it
		v = append(v, IOVec{Path: path, Off: off, Size: 5000, Dst: make([]byte, 5000)})
	}
	if err := c.ReadV(v, 0, 0); err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if v[i].Result != 5000 || !bytes.Equal(v[i].Dst, pfile(int(v[i].Off), 5000)) {
			t.Fatalf("element %d: result %d or bytes wrong", i, v[i].Result)
		}
	}
	if s := c.Stats(); s.ReadvInlineHits != 4 || s.CacheHitRequests != 4 {
		t.Fatalf("readv_inline_hits %d cache_hit_requests %d, want 4 and 4", s.ReadvInlineHits, s.CacheHitRequests)
	}
}

func TestExplain_FormatsThePlanTheReadRuns(t *testing.T) {
	path := writeP(t, 4<<20)
	c := newCtx(t, nil)
	if _, err := c.Prefetch(path, 0, 128<<10, 0); err != nil {
		t.Fatal(err)
	}
	// [64 KiB, 256 KiB): one block cached, two to fill.
	ex, err := c.Explain(path, 64<<10, 192<<10, true, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "; dram cache: 65536 bytes in 1 spans; source -> dram cache: 131072 bytes in 2 spans"
	if ex.CachedBytes != 64<<10 || !ex.Admit || !strings.Contains(ex.Reason, want) {
		t.Fatalf("explain: cached %d admit %v reason %q, want 65536, true and %q", ex.CachedBytes, ex.Admit, ex.Reason, want)
	}
	c.ResetStats()
	dst := make([]byte, 192<<10)
	if err := c.Read(path, 64<<10, 192<<10, dst, 0, 0); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.CacheHitBytes != 64<<10 || s.BufferedBytes != 128<<10 || s.CacheInsertedBytes != 128<<10 {
		t.Fatalf("read: cache_hit_bytes %d buffered %d inserted %d, want 65536, 131072, 131072",
			s.CacheHitBytes, s.BufferedBytes, s.CacheInsertedBytes)
	}
	if !bytes.Equal(dst, pfile(64<<10, 192<<10)) {
		t.Fatal("wrong bytes")
	}
}

func TestPlan_LargeCachedReadCopiesInParallelUnits(t *testing.T) {
	path := writeP(t, 8<<20)
	c := newCtx(t, nil)
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	f, err := c.acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	var p plan
	c.makePlan(&p, f, 0, 8<<20, 0, planOpts{})
	us := c.units(&p)
	if p.cached != 8<<20 || len(p.list()) != 128 || len(us) != 8 {
		t.Fatalf("plan: cached %d spans %d units %d, want 8 MiB, 128, 8", p.cached, len(p.list()), len(us))
	}
	dst := make([]byte, 8<<20)
	if _, err := c.exec(&p, dst, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, pfile(0, 8<<20)) {
		t.Fatal("wrong bytes")
	}
}

func TestReadV_LargeCachedBatchInline(t *testing.T) {
	path := writeP(t, 4<<20)
	c := newCtx(t, nil)
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	c.ResetStats()
	v := make([]IOVec, 300)
	for i := range v {
		off := uint64(i*7919%1000) * 4000
		v[i] = IOVec{Path: path, Off: off, Size: 3000, Dst: make([]byte, 3000)}
	}
	if err := c.ReadV(v, 0, 0); err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if v[i].Result != 3000 || !bytes.Equal(v[i].Dst, pfile(int(v[i].Off), 3000)) {
			t.Fatalf("element %d: result %d or bytes wrong", i, v[i].Result)
		}
	}
	if s := c.Stats(); s.ReadvInlineHits != 300 || s.CacheHitRequests != 300 || s.StorageBytes != 0 {
		t.Fatalf("readv_inline_hits %d cache_hit_requests %d storage_bytes %d, want 300, 300, 0",
			s.ReadvInlineHits, s.CacheHitRequests, s.StorageBytes)
	}
}
