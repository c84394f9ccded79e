package engine

// The remote_* and disk_cache_* counters of Stats (memtier_stats_t), exact,
// for an object of three disk cache blocks read by several contexts over one
// cache directory, and explain's account of which bytes the disk holds.

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/stats"
)

const (
	dsBlock = diskcache.DefaultBlockBytes
	dsN     = 2*dsBlock + 1<<20 + 4321 // three blocks, the last 1 MiB + 4321 bytes
	dsLast  = dsN - 2*dsBlock
	dsHead  = remote.DefaultOpenBytes // what the open's GET brings and keeps
	dsHdr   = 4096                    // header bytes of an entry with a short URL
)

// flushDisk waits for c's write-behind queue, so written bytes are final.
func flushDisk(t *testing.T, c *Context) {
	t.Helper()
	s := c.src.(*sources)
	s.mu.Lock()
	d := s.disk
	s.mu.Unlock()
	if d == nil {
		t.Fatal("no disk cache open")
	}
	d.Cache().Flush()
}

func readAll(t *testing.T, c *Context, url string, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	if err := c.Read(url, 0, uint64(len(want)), got, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
}

func checkTiers(t *testing.T, step string, c *Context, want stats.Tiers) {
	t.Helper()
	if got := c.Stats().Tiers; got != want {
		t.Errorf("%s: tiers\n got %+v\nwant %+v", step, got, want)
	}
}

// entries returns the cache's entry files in block order (the name ends
// with the block index).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func TestDiskCacheStatsExact(t *testing.T) {
	want := pfile(0, dsN)
	url, gets := rangeServer(t, want)
	dir := t.TempDir() + "/disk"
	withDiskEnv(t, map[string]string{diskcache.EnvDir: dir, diskcache.EnvBytes: "64M"})
	opts := func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = 64<<20, 1<<20 }

	// A context that reads no URL reports zeros.
	checkTiers(t, "no URL read", newCtx(t, opts), stats.Tiers{})

	// (1) First read: the open's GET (64 KiB kept), then each block missed
	// and fetched whole: block 0 past the head (one GET), blocks 1 and 2
	// (one GET each); every block written with its 4 KiB header.
	a := newCtx(t, opts)
	readAll(t, a, url, want)
	flushDisk(t, a)
	checkTiers(t, "(1) cold", a, stats.Tiers{
		RemoteRequests: 4, RemoteBytes: dsN,
		DiskCacheMissBlocks: 3, DiskCacheMissBytes: dsN,
		DiskCacheWrittenBytes: 3*dsHdr + dsN,
	})
	if g := gets.Load(); g != 4 {
		t.Fatalf("(1) server saw %d GETs, want 4", g)
	}
	if e := entries(t, dir); len(e) != 3 {
		t.Fatalf("(1) %d entries on disk, want 3", len(e))
	}

	// (2) A second context over the directory: only the open's GET.
	b := newCtx(t, opts)
	readAll(t, b, url, want)
	checkTiers(t, "(2) from disk", b, stats.Tiers{
		RemoteRequests: 1, RemoteBytes: dsHead,
		DiskCacheHitBlocks: 3, DiskCacheHitBytes: dsN,
	})
	// (3) Reset: the tiers' totals become the baseline; a repeat is a DRAM
	// hit, which costs the revalidation GET only (304, no body).
	b.ResetStats()
	checkTiers(t, "(3) after reset", b, stats.Tiers{})
	readAll(t, b, url, want)
	checkTiers(t, "(3) DRAM hit", b, stats.Tiers{RemoteRequests: 1})

	// (4) Block 0's entry removed: explain says which bytes the disk holds
	// and what a read would fetch; the read then does exactly that.
	e := entries(t, dir)
	if err := os.Remove(e[0]); err != nil {
		t.Fatal(err)
	}
	c := newCtx(t, opts)
	ex, err := c.Explain(url, 0, dsN, true, policy.TargetCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	const wantEx = "row 17: cold and large: buffered streams, kept in the page cache (size 9441505, cached 0, " +
		"page cache 0, direct_threshold 8388608); source -> dram cache (one ranged read per run): 9441505 bytes " +
		"in 1 spans; disk cache: 5247201 bytes in 2 blocks; remote GET: 4194304 bytes in 1 blocks; fills cache"
	if ex.Reason != wantEx {
		t.Errorf("(4) explain\n got %q\nwant %q", ex.Reason, wantEx)
	}
	// A range inside block 1 only.
	ex, err = c.Explain(url, dsBlock+3, 100000, true, policy.TargetCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(ex.Reason, "; disk cache:"); i < 0 ||
		ex.Reason[i:] != "; disk cache: 100000 bytes in 1 blocks; remote GET: 0 bytes in 0 blocks; fills cache" {
		t.Errorf("(4) explain inside block 1: %q", ex.Reason)
	}
	c.ResetStats() // the explains' open and revalidation GET
	readAll(t, c, url, want)
	flushDisk(t, c)
	checkTiers(t, "(4) block 0 refetched", c, stats.Tiers{
		RemoteRequests: 2, RemoteBytes: dsBlock - dsHead, // revalidation (304) + block 0 past the head
		DiskCacheHitBlocks: 2, DiskCacheHitBytes: dsBlock + dsLast,
		DiskCacheMissBlocks: 1, DiskCacheMissBytes: dsBlock,
		DiskCacheWrittenBytes: dsHdr + dsBlock,
	})

	// (5) Block 2's payload corrupted on disk: found, dropped, refetched
	// and rewritten, never served.
	e = entries(t, dir)
	f, err := os.OpenFile(e[2], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^want[2*dsBlock+10]}, dsHdr+10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d := newCtx(t, opts)
	readAll(t, d, url, want)
	flushDisk(t, d)
	checkTiers(t, "(5) corrupt block 2", d, stats.Tiers{
		RemoteRequests: 2, RemoteBytes: dsHead + dsLast,
		DiskCacheHitBlocks: 2, DiskCacheHitBytes: 2 * dsBlock,
		DiskCacheMissBlocks: 1, DiskCacheMissBytes: dsLast,
		DiskCacheWrittenBytes: dsHdr + dsLast, DiskCacheCorruptEntries: 1,
	})
}

// Explain without a disk cache names the remote bytes only.
func TestExplainRemoteWithoutDiskCache(t *testing.T) {
	want := pfile(0, 1<<20)
	url, _ := rangeServer(t, want)
	withDiskEnv(t, map[string]string{})
	c := newCtx(t, nil)
	ex, err := c.Explain(url, 10, 1000, true, policy.TargetCPU, policy.ReadOnce)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(ex.Reason, "; remote GET:"); i < 0 || ex.Reason[i:] != "; remote GET: 1000 bytes (no disk cache)" {
		t.Errorf("explain: %q", ex.Reason)
	}
}

// A 503 SlowDown and a 429 on the first part GETs: each is a throttle and a
// retry, and the retried GETs count as requests.
func TestRemoteRetryAndThrottleStats(t *testing.T) {
	const n = 1 << 20
	want := pfile(0, n)
	var gets atomic.Int64
	mod := time.Unix(1700000000, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch gets.Add(1) {
		case 2:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
				http.StatusServiceUnavailable)
			return
		case 3:
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "data.bin", mod, bytes.NewReader(want))
	}))
	t.Cleanup(srv.Close)
	withDiskEnv(t, map[string]string{})
	c := newCtx(t, nil)
	got := make([]byte, n)
	if err := c.Read(srv.URL+"/data.bin", 0, n, got, policy.TargetCPU, policy.ReadOnce); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	checkTiers(t, "throttled", c, stats.Tiers{
		RemoteRequests: 4, RemoteBytes: n, RemoteRetries: 2, RemoteThrottles: 2,
	})
}

// disk_cache_trusted_pieces: a context with the DRAM cache off reads an
// object from settled disk-cache entries twice; the first read checks
// every 64 KiB piece, the second serves each of them from trust (the
// entries unchanged and in the page cache): 64 pieces for each of the two
// full blocks, 17 for the last (1 MiB + 4321 bytes).
func TestDiskCacheTrustStatsExact(t *testing.T) {
	want := pfile(0, dsN)
	url, _ := rangeServer(t, want)
	dir := t.TempDir() + "/disk"
	withDiskEnv(t, map[string]string{diskcache.EnvDir: dir, diskcache.EnvBytes: "64M"})
	a := newCtx(t, nil)
	readAll(t, a, url, want)
	flushDisk(t, a)
	// A check counts toward trust only when the entry's last change is
	// older than 100 ms (diskcache trustSettle).
	time.Sleep(150 * time.Millisecond)
	b := newCtx(t, func(o *config.Options) { o.CacheEnabled = false })
	readAll(t, b, url, want)
	checkTiers(t, "first read, checked", b, stats.Tiers{
		RemoteRequests: 1, RemoteBytes: dsHead,
		DiskCacheHitBlocks: 3, DiskCacheHitBytes: dsN,
	})
	b.ResetStats()
	readAll(t, b, url, want)
	checkTiers(t, "second read, trusted", b, stats.Tiers{
		RemoteRequests:     1, // the revalidation (304)
		DiskCacheHitBlocks: 3, DiskCacheHitBytes: dsN,
		DiskCacheTrustedPieces: 64 + 64 + 17,
	})
}
