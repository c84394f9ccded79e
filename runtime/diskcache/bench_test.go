package diskcache

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
	"github.com/memtier/memtier/runtime/stats"
)

// BenchmarkDiskCacheVersitygw reads one object (256 MiB; DISKCACHE_BENCH_MIB
// changes it, DISKCACHE_BENCH_BLOCK_MIB the block size, DISKCACHE_BENCH_REPS the repetitions,
// DISKCACHE_BENCH_WRITERS the write-behind goroutines; DISKCACHE_BENCH_NOTRUST=1
// checks every read, see trust.go) from versitygw on loopback, in one run:
//   - remote: remote.Source alone;
//   - first (write-behind) and first (sync): remote + disk cache into an
//     empty directory, the read's own time (the write-behind flush after it
//     is shown apart);
//   - second: a new Cache over the filled directory, page cache warm;
//   - local: the same bytes from a local file through source.Local (the
//     engine's buffered path: parallel preads), page cache warm;
//   - second cold and local cold: the same after dropping both files from
//     the page cache (fsync, then POSIX_FADV_DONTNEED).
//
// It prints MB/s (10^6 bytes per second) and the ratios the disk cache
// targets: first/remote (~1), second/local (>= 0.9). Each row is the best
// of the repetitions (3) to lessen the noise of a shared machine.
func BenchmarkDiskCacheVersitygw(b *testing.B) {
	benchTrust(b)
	g := startVersitygw(b)
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("DISKCACHE_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	n := mib << 20
	want := pattern(n, 31)
	g.seed(b, "big.bin", want)
	local := filepath.Join(b.TempDir(), "big.bin")
	if err := os.WriteFile(local, want, 0o644); err != nil {
		b.Fatal(err)
	}
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("DISKCACHE_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	if v, err := strconv.Atoi(os.Getenv("DISKCACHE_BENCH_WRITERS")); err == nil && v > 0 {
		defer func(old int) { writeWorkers = old }(writeWorkers)
		writeWorkers = v
	}
	block := DefaultBlockBytes
	if v, err := strconv.Atoi(os.Getenv("DISKCACHE_BENCH_BLOCK_MIB")); err == nil && v > 0 {
		block = v << 20
	}
	name := "s3://" + vgwBucket + "/big.bin"
	ro := g.options()
	ro.PartBytes = remote.DefaultPartBytes
	dst := make([]byte, n)
	for i := range dst {
		dst[i] = 1 // fault the pages in before timing
	}
	check := func(what string) {
		if !bytes.Equal(dst, want) {
			b.Fatalf("%s: bytes differ", what)
		}
		clear(dst[:1<<20])
	}
	timeRead := func(src source.Source, what string) time.Duration {
		o, _, err := src.Open(name, files.TrustNone)
		if err != nil {
			b.Fatal(err)
		}
		defer o.Release()
		t0 := time.Now()
		if _, err := src.ReadAt(o, dst, 0, source.PathBuffered); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		d := time.Since(t0)
		check(what)
		return d
	}
	cl, err := remote.NewClient(ro)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rsrc := remote.NewSource(cl)

	var st stats.Counters
	rd, err := iopath.New(config.Defaults(), &st)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	tab := files.NewTable(16, &st)
	defer tab.Close()
	lsrc := &source.Local{Files: tab, RD: rd}
	localRead := func() time.Duration {
		o, _, err := lsrc.Open(local, files.TrustNone)
		if err != nil {
			b.Fatal(err)
		}
		defer o.Release()
		t0 := time.Now()
		if _, err := lsrc.ReadAt(o, dst, 0, source.PathBuffered); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		check("local")
		return d
	}

	best := map[string]time.Duration{}
	note := func(row string, d time.Duration) {
		if cur, ok := best[row]; !ok || d < cur {
			best[row] = d
		}
	}
	var flush time.Duration
	var dir string
	for b.Loop() {
		for range reps {
			note("remote", timeRead(rsrc, "remote"))
			for _, mode := range firstModes {
				dir = b.TempDir()
				c, err := Open(Options{Dir: dir, Synchronous: mode.sync, DirectWrites: !mode.buffered, BlockBytes: block})
				if err != nil {
					b.Fatal(err)
				}
				note(mode.row, timeRead(NewSource(rsrc, c), mode.row))
				t0 := time.Now()
				c.Close()
				if !mode.sync {
					flush = max(flush, time.Since(t0))
					if s := c.Stats(); s.InlineWrites > 0 {
						b.Logf("%s: %d of %d blocks written by the reader (queue full)", mode.row, s.InlineWrites, s.MissBlocks)
					}
				}
			}
			// dir now holds every block (the last, synchronous, run wrote
			// them all, with O_DIRECT: the first read below comes from the
			// device, the next from the page cache it filled).
			c, err := Open(Options{Dir: dir, BlockBytes: block})
			if err != nil {
				b.Fatal(err)
			}
			note("second (after direct writes)", timeRead(NewSource(rsrc, c), "second"))
			note("second (warm)", timeRead(NewSource(rsrc, c), "second"))
			if s := c.Stats(); s.MissBlocks != 0 {
				b.Fatalf("second run missed %d blocks", s.MissBlocks)
			}
			note("local (warm)", localRead())
			dropPageCache(b, dir)
			dropPageCache(b, local)
			note("second (cold)", timeRead(NewSource(rsrc, c), "second cold"))
			note("local (cold)", localRead())
			c.Close()
		}
	}
	mbs := func(row string) float64 { return float64(n) / best[row].Seconds() / 1e6 }
	fmt.Printf("\ndisk cache, %d MiB object from versitygw on loopback, %d MiB blocks, best of %d (MB/s = 10^6 B/s)\n", mib, block>>20, reps)
	rows := []string{"remote"}
	for _, m := range firstModes {
		rows = append(rows, m.row)
	}
	for _, row := range append(rows, "second (after direct writes)", "second (warm)", "local (warm)", "second (cold)", "local (cold)") {
		fmt.Printf("  %-22s %8.0f MB/s\n", row, mbs(row))
	}
	fmt.Printf("  write-behind flush after the read: %v\n", flush.Round(time.Millisecond))
	fmt.Printf("  first (write-behind) / remote = %.2fx\n", mbs("first (write-behind)")/mbs("remote"))
	fmt.Printf("  first (write-behind, buffered writes) / remote = %.2fx\n", mbs("first (write-behind, buffered writes)")/mbs("remote"))
	fmt.Printf("  first (sync) / remote         = %.2fx\n", mbs("first (sync)")/mbs("remote"))
	fmt.Printf("  second / local, warm          = %.2fx\n", mbs("second (warm)")/mbs("local (warm)"))
	fmt.Printf("  second / local, cold          = %.2fx\n", mbs("second (cold)")/mbs("local (cold)"))
	b.ReportMetric(mbs("second (warm)")/mbs("local (warm)"), "second/local")
	b.ReportMetric(mbs("first (write-behind)")/mbs("remote"), "first/remote")
}

// firstModes are the first-run rows of BenchmarkDiskCacheVersitygw: how
// the fetched blocks are written (the last one must be synchronous with
// direct writes: the second-run rows read its directory).
var firstModes = []struct {
	row            string
	sync, buffered bool
}{
	{"first (write-behind)", false, false},
	{"first (write-behind, buffered writes)", false, true},
	{"first (sync)", true, false},
}

// dropPageCache writes back and drops from the page cache the file p, or
// every file in the directory p.
func dropPageCache(tb testing.TB, p string) {
	tb.Helper()
	paths := []string{p}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		des, _ := os.ReadDir(p)
		paths = paths[:0]
		for _, de := range des {
			paths = append(paths, filepath.Join(p, de.Name()))
		}
	}
	for _, q := range paths {
		f, err := os.OpenFile(q, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		f.Sync()
		if st, err := f.Stat(); err == nil {
			_ = iopath.DropPageCache(int(f.Fd()), 0, st.Size())
		}
		f.Close()
	}
}

// BenchmarkDiskCacheRandomRanges reads 4096 random 64 KiB ranges (any
// offset, seeded) of one cached object (256 MiB; DISKCACHE_BENCH_MIB
// changes it, default 4 MiB blocks) through the disk cache, the entries
// filled first and warm in the page cache, and the same ranges by pread
// from a local file holding the same bytes (warm), in one run, and prints
// both rates and their ratio (the dataset-sample access of a tar shard:
// a read needing a small part of a block). Each row is the best of
// DISKCACHE_BENCH_REPS (3) repetitions. The repetitions after the first
// are served from trust (trust.go) unless DISKCACHE_BENCH_NOTRUST=1.
func BenchmarkDiskCacheRandomRanges(b *testing.B) {
	benchTrust(b)
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("DISKCACHE_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("DISKCACHE_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	const nRanges, rangeBytes = 4096, 64 << 10
	n := mib << 20
	want := pattern(n, 17)
	srv := newObjServer(b, want, `"rr"`)
	local := filepath.Join(b.TempDir(), "obj.bin")
	if err := os.WriteFile(local, want, 0o644); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	fill := newStack(b, testOptions(), Options{Dir: dir, BudgetBytes: 4 << 30, Synchronous: true, BlockBytes: DefaultBlockBytes})
	fill.read(b, srv.url(), 0, uint64(n))
	s := newStack(b, testOptions(), Options{Dir: dir, BudgetBytes: 4 << 30, Synchronous: true, BlockBytes: DefaultBlockBytes})
	o, _, err := s.src.Open(srv.url(), files.TrustNone)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Release()
	lf, err := os.Open(local)
	if err != nil {
		b.Fatal(err)
	}
	defer lf.Close()
	r := rand.New(rand.NewSource(1))
	offs := make([]int64, nRanges)
	for i := range offs {
		offs[i] = r.Int63n(int64(n - rangeBytes + 1))
	}
	dst := make([]byte, rangeBytes)
	cacheRun := func() time.Duration {
		t0 := time.Now()
		for _, off := range offs {
			if _, err := s.src.ReadAt(o, dst, uint64(off), source.PathBuffered); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	localRun := func() time.Duration {
		t0 := time.Now()
		for _, off := range offs {
			if _, err := lf.ReadAt(dst, off); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	// Check the bytes once, and warm both files' pages.
	for _, off := range offs[:64] {
		if _, err := s.src.ReadAt(o, dst, uint64(off), source.PathBuffered); err != nil || !bytes.Equal(dst, want[off:off+rangeBytes]) {
			b.Fatalf("range at %d: bytes differ (%v)", off, err)
		}
	}
	cacheRun()
	localRun()
	var bc, bl time.Duration
	for b.Loop() {
		for range reps {
			if d := cacheRun(); bc == 0 || d < bc {
				bc = d
			}
			if d := localRun(); bl == 0 || d < bl {
				bl = d
			}
		}
	}
	if st := s.c.Stats(); st.MissBlocks != 0 || st.CorruptEntries != 0 {
		b.Fatalf("reads missed: %+v", st)
	}
	mbs := func(d time.Duration) float64 { return float64(nRanges*rangeBytes) / d.Seconds() / 1e6 }
	fmt.Printf("\ndisk cache, %d random 64 KiB ranges of a cached %d MiB object (4 MiB blocks), page cache warm, best of %d\n", nRanges, mib, reps)
	fmt.Printf("  disk cache  %8.0f MB/s  (%v)\n", mbs(bc), bc.Round(time.Microsecond))
	fmt.Printf("  local pread %8.0f MB/s  (%v)\n", mbs(bl), bl.Round(time.Microsecond))
	fmt.Printf("  disk cache / local pread = %.2fx\n", mbs(bc)/mbs(bl))
	b.ReportMetric(mbs(bc)/mbs(bl), "cache/local")
}
