package engine

// The disk cache tier through the engine: MEMTIER_DISK_CACHE_DIR turns it
// on for URLs; a second context over the same directory reads from disk
// (only Open's GET reaches the server), and the DRAM cache above keeps
// serving repeats.

import (
	"bytes"
	"os"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/policy"
)

// withDiskEnv makes the engine read the disk cache settings from kv.
func withDiskEnv(t *testing.T, kv map[string]string) {
	old := getenv
	getenv = func(k string) string { return kv[k] }
	t.Cleanup(func() { getenv = old })
}

func diskStatsOf(t *testing.T, c *Context) diskcache.Stats {
	t.Helper()
	st, ok := c.src.(*sources).diskStats()
	if !ok {
		t.Fatal("no disk cache open")
	}
	return st
}

func TestDiskCacheAcrossContexts(t *testing.T) {
	const n = 9<<20 + 4321 // three 4 MiB blocks, the last partial
	want := pfile(0, n)
	url, gets := rangeServer(t, want)
	dir := t.TempDir() + "/disk"
	withDiskEnv(t, map[string]string{diskcache.EnvDir: dir, diskcache.EnvBytes: "64M"})
	opts := func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 }

	a := newCtx(t, opts)
	got := make([]byte, n)
	if err := a.Read(url, 0, n, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("first context: bytes differ")
	}
	a.src.(*sources).closeDisk() // flush the write-behind queue
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("cache directory: %v", err)
	}

	b := newCtx(t, opts)
	before := gets.Load()
	clear(got)
	if err := b.Read(url, 0, n, got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("second context: bytes differ")
	}
	if d := gets.Load() - before; d != 1 {
		t.Fatalf("second context: %d GETs, want 1 (Open's)", d)
	}
	if st := diskStatsOf(t, b); st.HitBlocks != 3 || st.HitBytes != n || st.MissBlocks != 0 {
		t.Fatalf("second context disk stats %+v, want 3 blocks, %d bytes from disk", st, n)
	}
	// A repeat in the same context is a DRAM-cache hit, not a disk read.
	b.ResetStats()
	part := make([]byte, 100000)
	if err := b.Read(url, 5<<20+3, uint64(len(part)), part, policy.TargetCPU, policy.ReadImmutable); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(part, want[5<<20+3:5<<20+3+len(part)]) {
		t.Fatal("DRAM hit: bytes differ")
	}
	if s := b.Stats(); s.CacheHitBytes != uint64(len(part)) {
		t.Fatalf("repeat: cache_hit_bytes %d, want %d", s.CacheHitBytes, len(part))
	}
	if st := diskStatsOf(t, b); st.HitBlocks != 3 {
		t.Fatalf("repeat read the disk: %+v", st)
	}
}

func TestDiskCacheOffAndDisabled(t *testing.T) {
	want := pfile(0, 1<<20)
	url, _ := rangeServer(t, want)
	// Unset: no disk cache.
	withDiskEnv(t, map[string]string{})
	c := newCtx(t, nil)
	got := make([]byte, len(want))
	if err := c.Read(url, 0, uint64(len(want)), got, policy.TargetCPU, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("without a disk cache: %v", err)
	}
	if _, ok := c.src.(*sources).diskStats(); ok {
		t.Fatal("a disk cache opened without MEMTIER_DISK_CACHE_DIR")
	}
	// A directory that cannot be used: the tier is disabled (one warning
	// on stderr) and reads still work.
	file := t.TempDir() + "/file"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{
		{diskcache.EnvDir: file},
		{diskcache.EnvDir: t.TempDir(), diskcache.EnvBytes: "10GB"},
	} {
		withDiskEnv(t, env)
		c := newCtx(t, nil)
		clear(got)
		if err := c.Read(url, 0, uint64(len(want)), got, policy.TargetCPU, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("disk cache disabled (%v): read %v", env, err)
		}
		s := c.src.(*sources)
		if _, ok := s.diskStats(); ok || s.diskErr == nil {
			t.Fatalf("%v: disk cache open %v, error %v", env, ok, s.diskErr)
		}
	}
}

// A first load below the disk cache fills the disk tier, not the DRAM cache
// (fillRun): the next read copies the blocks from disk into DRAM, and the
// one after is a DRAM hit. A prefetch still fills the DRAM cache at once.
func TestDiskCacheFirstLoadAdmitsFromDisk(t *testing.T) {
	const n = 9<<20 + 4321 // three 4 MiB disk blocks, the last partial
	want := pfile(0, n)
	url, gets := rangeServer(t, want)
	withDiskEnv(t, map[string]string{diskcache.EnvDir: t.TempDir() + "/disk", diskcache.EnvBytes: "64M"})
	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 })
	got := make([]byte, n)
	read := func(what string) {
		t.Helper()
		clear(got)
		c.ResetStats()
		if err := c.Read(url, 0, n, got, policy.TargetCPU, policy.ReadImmutable); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: bytes differ", what)
		}
	}
	read("first")
	if s := c.Stats(); s.CacheInsertedBytes != 0 || s.CacheMisses != 0 || s.BufferedBytes != n {
		t.Fatalf("first load: inserted %d, misses %d, buffered %d; want 0, 0, %d", s.CacheInsertedBytes, s.CacheMisses, s.BufferedBytes, n)
	}
	if st := diskStatsOf(t, c); st.MissBlocks != 3 || st.HitBlocks != 0 {
		t.Fatalf("first load disk stats %+v, want 3 misses", st)
	}
	c.src.(*sources).disk.Cache().Flush()
	g := gets.Load()
	read("second")
	if s := c.Stats(); s.CacheInsertedBytes != n || s.CacheMisses != 10 || s.CacheHitBytes != 0 {
		t.Fatalf("second load: inserted %d, misses %d, hit bytes %d; want %d, 10, 0", s.CacheInsertedBytes, s.CacheMisses, s.CacheHitBytes, n)
	}
	if st := diskStatsOf(t, c); st.HitBlocks != 3 || st.HitBytes != n || st.MissBlocks != 3 {
		t.Fatalf("second load disk stats %+v, want 3 hit blocks, %d bytes", st, n)
	}
	read("third")
	if s := c.Stats(); s.CacheHitBytes != n || s.CacheInsertedBytes != 0 {
		t.Fatalf("third load: hit bytes %d, inserted %d; want %d, 0", s.CacheHitBytes, s.CacheInsertedBytes, n)
	}
	if st := diskStatsOf(t, c); st.HitBlocks != 3 || gets.Load() != g {
		t.Fatalf("third load read the disk or the server: %+v, %d GETs", st, gets.Load()-g)
	}

	// A prefetch of another object admits what it fetches.
	url2, _ := rangeServer(t, want)
	c.ResetStats()
	if _, err := c.Prefetch(url2, 0, n, 0); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.CacheInsertedBytes != n {
		t.Fatalf("prefetch inserted %d bytes, want %d", s.CacheInsertedBytes, n)
	}
}
