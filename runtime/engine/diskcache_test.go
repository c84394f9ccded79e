package engine

// The disk cache tier through the engine: MEMTIER_DISK_CACHE_DIR turns it
// on for URLs; a second context over the same directory reads from disk
// (only Open's GET reaches the server), and the DRAM cache above keeps
// serving repeats.

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/stats"
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

// TestDiskCacheTarWindows: below a disk cache, windows are 8 MiB (the 5
// MiB part rounded up to whole 4 MiB disk blocks); a tar shard's open
// fetches its three disk blocks once each (the header reads). Its first
// epoch (the pass that fetched the object) reads every sample from the disk
// tier (on disk or in the write-behind queue) with no DRAM admission; the
// second copies each window from disk into the DRAM cache, with no block
// GET, and the third is DRAM hits. A second context over the same
// directory reads its headers from disk; its first epoch reads the samples
// from the disk tier, no DRAM admission (a first pass never admits:
// samplepass.go), its second copies the windows into DRAM and its third is
// DRAM hits.
func TestDiskCacheTarWindows(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	const members, size = 120, 100 << 10
	for i := range members {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%04d.bin", i), Mode: 0o644, Size: size, Typeflag: tar.TypeReg})
		tw.Write(pfile(i*31, size))
	}
	tw.Close()
	shard := buf.Bytes() // 12,350,464 bytes: disk blocks of 4, 4 and 3.78 MiB
	url, gets := rangeServer(t, shard)
	withDiskEnv(t, map[string]string{diskcache.EnvDir: t.TempDir() + "/disk", diskcache.EnvBytes: "64M",
		"MEMTIER_REMOTE_PART_BYTES": "5M"})
	opts := func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 }
	epoch := func(c *Context, ds *Dataset) (int64, stats.Snapshot) {
		t.Helper()
		g := gets.Load()
		c.ResetStats()
		for lo := 0; lo < members; lo += 16 {
			n := min(16, members-lo)
			idx, dsts, res := make([]uint64, n), make([][]byte, n), make([]int64, n)
			for k := range idx {
				idx[k], dsts[k] = uint64(lo+k), make([]byte, size)
			}
			if err := ds.ReadBatch(idx, dsts, res, policy.TargetCPU); err != nil {
				t.Fatal(err)
			}
			for k := range idx {
				if res[k] != size || !bytes.Equal(dsts[k], pfile((lo+k)*31, size)) {
					t.Fatalf("sample %d: result %d, bytes differ", lo+k, res[k])
				}
			}
		}
		return gets.Load() - g, c.Stats()
	}
	// The windows hold the whole shard: 12 DRAM blocks of 1 MiB, the last
	// one partial.
	shardBytes, shardBlocks := uint64(len(shard)), uint64(12)
	// fromDisk: an epoch whose windows are all on disk copies them into DRAM.
	fromDisk := func(what string, c *Context, ds *Dataset) {
		t.Helper()
		hit0 := diskStatsOf(t, c).HitBytes
		n, s := epoch(c, ds)
		if n != 0 || s.CacheInsertedBytes != shardBytes || s.CacheMisses != shardBlocks || s.CacheHitBytes != members*size || s.BufferedBytes != 0 {
			t.Fatalf("%s: %d GETs, inserted %d, misses %d, hit %d, buffered %d; want 0 (no revalidation: remoteSamplesTrust), %d, %d, %d, 0",
				what, n, s.CacheInsertedBytes, s.CacheMisses, s.CacheHitBytes, s.BufferedBytes, shardBytes, shardBlocks, members*size)
		}
		if d := diskStatsOf(t, c).HitBytes - hit0; d != shardBytes {
			t.Fatalf("%s: %d bytes from the disk tier, want %d", what, d, shardBytes)
		}
	}
	// dramHits: an epoch after it reads neither the disk tier nor a block.
	dramHits := func(what string, c *Context, ds *Dataset) {
		t.Helper()
		hit0 := diskStatsOf(t, c).HitBytes
		n, s := epoch(c, ds)
		if n != 0 || s.CacheInsertedBytes != 0 || s.CacheMisses != 0 || s.CacheHitBytes != members*size || s.BufferedBytes != 0 {
			t.Fatalf("%s: %d GETs, inserted %d, misses %d, hit %d, buffered %d; want 0, 0, 0, %d, 0",
				what, n, s.CacheInsertedBytes, s.CacheMisses, s.CacheHitBytes, s.BufferedBytes, members*size)
		}
		if d := diskStatsOf(t, c).HitBytes - hit0; d != 0 {
			t.Fatalf("%s: %d bytes from the disk tier, want 0", what, d)
		}
	}
	a := newCtx(t, opts)
	g0 := gets.Load()
	ds, err := a.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if w := a.windowBytes(); w != 8<<20 {
		t.Fatalf("window %d bytes, want 8 MiB", w)
	}
	// The open's header reads fetch the three disk blocks (whole, once
	// each: a block read again before it is written is served from the
	// write-behind queue).
	if n := gets.Load() - g0; n != 1+3 {
		t.Fatalf("first open: %d GETs, want 4 (its Open, 3 disk blocks)", n)
	}
	if n, s := epoch(a, ds); n != 0 || s.CacheInsertedBytes != 0 || s.CacheHitBytes != 0 || s.BufferedBytes != members*size {
		t.Fatalf("first epoch: %d GETs, inserted %d, hit %d, buffered %d; want 0 (no revalidation), 0, 0, %d (from the disk tier)",
			n, s.CacheInsertedBytes, s.CacheHitBytes, s.BufferedBytes, members*size)
	}
	a.src.(*sources).disk.Cache().Flush() // the blocks are on disk, none queued
	fromDisk("second epoch", a, ds)
	dramHits("third epoch", a, ds)
	a.src.(*sources).closeDisk()

	b := newCtx(t, opts)
	g := gets.Load()
	ds2, err := b.OpenTarDataset(url)
	if err != nil {
		t.Fatal(err)
	}
	if n := gets.Load() - g; n != 1 {
		t.Fatalf("second context open: %d GETs, want 1 (the member list comes from disk)", n)
	}
	// The member list the first open kept beside the blocks: no header is
	// read, from the disk tier or the server.
	if st := diskStatsOf(t, b); st.HitBlocks != 0 || st.MissBlocks != 0 || len(ds2.Members) != members {
		t.Fatalf("second context open: disk stats %+v, %d members; want no block read, %d members", st, len(ds2.Members), members)
	}
	// A first pass never admits (samplepass.go): the samples come from the
	// disk tier in runs (diskruns.go), the next pass copies the windows
	// into DRAM.
	if n, s := epoch(b, ds2); n != 0 || s.CacheInsertedBytes != 0 || s.CacheHitBytes != 0 || s.BufferedBytes != members*size {
		t.Fatalf("second context, first epoch: %d GETs, inserted %d, hit %d, buffered %d; want 0, 0, 0, %d (from the disk tier)",
			n, s.CacheInsertedBytes, s.CacheHitBytes, s.BufferedBytes, members*size)
	}
	fromDisk("second context, second epoch", b, ds2)
	dramHits("second context, third epoch", b, ds2)
	if st := diskStatsOf(t, b); st.MissBlocks != 0 {
		t.Fatalf("second context disk stats %+v: want no miss", st)
	}
}

// TestDiskCachePackedWindows: a packed dataset over a URL (local index)
// below a disk cache: the first epoch fetches its two 8 MiB windows into
// the disk tier only (three disk blocks, one GET each) and reads the
// samples from there, with no DRAM admission; the next epoch finds the
// windows on disk and copies them into the DRAM cache, and the one after is
// DRAM hits. A second context over the same directory does the same with
// no block GET: its first epoch reads the samples from disk, its second
// copies the windows into DRAM, its third hits.
func TestDiskCachePackedWindows(t *testing.T) {
	const records, size, stride = 120, 100 << 10, 100<<10 + 512
	data := pfile(3, records*stride)
	url, gets := rangeServer(t, data)
	var index bytes.Buffer
	for i := range records {
		fmt.Fprintf(&index, "%d %d\n", i*stride, size)
	}
	indexPath := t.TempDir() + "/d.idx"
	if err := os.WriteFile(indexPath, index.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	withDiskEnv(t, map[string]string{diskcache.EnvDir: t.TempDir() + "/disk", diskcache.EnvBytes: "64M",
		"MEMTIER_REMOTE_PART_BYTES": "5M"})
	opts := func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 }
	epoch := func(c *Context, ds *Dataset) (int64, stats.Snapshot) {
		t.Helper()
		g := gets.Load()
		c.ResetStats()
		for lo := 0; lo < records; lo += 16 {
			n := min(16, records-lo)
			idx, dsts, res := make([]uint64, n), make([][]byte, n), make([]int64, n)
			for k := range idx {
				idx[k], dsts[k] = uint64(lo+k), make([]byte, size)
			}
			if err := ds.ReadBatch(idx, dsts, res, policy.TargetCPU); err != nil {
				t.Fatal(err)
			}
			for k := range idx {
				o := (lo + k) * stride
				if res[k] != size || !bytes.Equal(dsts[k], data[o:o+size]) {
					t.Fatalf("record %d: result %d, bytes differ", lo+k, res[k])
				}
			}
		}
		return gets.Load() - g, c.Stats()
	}
	open := func(c *Context) *Dataset {
		t.Helper()
		ds, err := c.OpenDataset(url, indexPath)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	// The two windows hold all the data: 12 DRAM blocks (the last partial).
	const blocks = 12
	check := func(what string, c *Context, ds *Dataset, wantGets int64, inserted, misses, hit, buffered uint64) {
		t.Helper()
		n, s := epoch(c, ds)
		if n != wantGets || s.CacheInsertedBytes != inserted || s.CacheMisses != misses || s.CacheHitBytes != hit || s.BufferedBytes != buffered {
			t.Fatalf("%s: %d GETs, inserted %d, misses %d, hit %d, buffered %d; want %d, %d, %d, %d, %d", what,
				n, s.CacheInsertedBytes, s.CacheMisses, s.CacheHitBytes, s.BufferedBytes, wantGets, inserted, misses, hit, buffered)
		}
	}
	a := newCtx(t, opts)
	ds := open(a)
	check("first epoch", a, ds, 3, 0, 0, 0, records*size) // 3 disk blocks, no revalidation (remoteSamplesTrust)
	a.src.(*sources).disk.Cache().Flush()
	check("second epoch", a, ds, 0, uint64(len(data)), blocks, records*size, 0)
	check("third epoch", a, ds, 0, 0, 0, records*size, 0)
	a.src.(*sources).closeDisk()
	b := newCtx(t, opts)
	ds2 := open(b)
	// A first pass never admits (samplepass.go): the samples come from
	// the disk tier, the next pass copies the windows into DRAM.
	check("second context, first epoch", b, ds2, 0, 0, 0, 0, records*size)
	if st := diskStatsOf(t, b); st.MissBlocks != 0 || st.HitBytes != records*size {
		t.Fatalf("second context disk stats %+v after its first epoch: want no miss, %d hit bytes (the samples)", st, records*size)
	}
	check("second context, second epoch", b, ds2, 0, uint64(len(data)), blocks, records*size, 0)
	check("second context, third epoch", b, ds2, 0, 0, 0, records*size, 0)
	if st := diskStatsOf(t, b); st.MissBlocks != 0 || st.HitBytes != records*size+uint64(len(data)) {
		t.Fatalf("second context disk stats %+v: want no miss, %d hit bytes", st, records*size+len(data))
	}
}
