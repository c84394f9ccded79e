package diskcache

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/remote/s3test"
	"github.com/memtier/memtier/runtime/source"
	"github.com/memtier/memtier/runtime/stats"
)

// BenchmarkFirstLoadVersitygw times what bench_remote's first-load row
// does below the engine: one object (1024 MiB; FIRSTLOAD_MIB changes it)
// from versitygw on loopback into a buffer, at each concurrency in
// FIRSTLOAD_CONC (default 8,16,64), alternating over FIRSTLOAD_REPS (3)
// rounds, each read but remote after a pretouch of FIRSTLOAD_PRETOUCH (0)
// times the object's bytes:
//   - remote: remote.Source alone (the client's ceiling on this server);
//   - first: remote + disk cache into an empty directory (default
//     Options), the read's own time, which includes its write-through;
//   - second: a new Cache over that directory (page cache warm), as the
//     second process of bench_remote's disk-cache row reads it;
//   - local: the same bytes from a local file written in one call,
//     through source.Local (page cache warm), that row's reference.
//
// It prints the median and best MB/s (10^6 B/s) of each. Run it with
// -cpuprofile to see where a first load's CPU goes. FIRSTLOAD_QUEUE_WAIT
// (a Go duration) sets the first load's Options.QueueWait: how long a read
// waits for room in the write-behind queue before its block is dropped
// (left uncached); the second read then fetches what was dropped, and both
// print the blocks dropped or missed: the trade between the two rows.
func BenchmarkFirstLoadVersitygw(b *testing.B) {
	g := startVersitygw(b)
	mib := s3test.EnvInts("FIRSTLOAD_MIB", []int{1024})[0]
	concs := s3test.EnvInts("FIRSTLOAD_CONC", []int{8, 16, 64})
	reps := s3test.EnvInts("FIRSTLOAD_REPS", []int{3})[0]
	modes := []string{"remote", "first", "second", "local"}
	if os.Getenv("FIRSTLOAD_ONLY") != "" {
		modes = []string{os.Getenv("FIRSTLOAD_ONLY")}
	}
	touch := s3test.EnvInts("FIRSTLOAD_PRETOUCH", []int{0})[0]
	var queueWait time.Duration // 0: the default
	if v := os.Getenv("FIRSTLOAD_QUEUE_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("FIRSTLOAD_QUEUE_WAIT=%q: want a positive Go duration (1ns: drop at once)", v)
		}
		queueWait = d
	}
	n := mib << 20
	want := pattern(n, 31)
	g.seed(b, "big.bin", want)
	local := filepath.Join(b.TempDir(), "big.bin")
	if err := os.WriteFile(local, want, 0o644); err != nil {
		b.Fatal(err)
	}
	want = nil
	lsrc, closeLocal := newLocalSource(b)
	defer closeLocal()
	lastDir := ""
	name := "s3://" + vgwBucket + "/big.bin"
	dst := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		dst[i] = 1 // fault the pages in before timing
	}
	got, cpus, srv := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for b.Loop() {
		for range reps {
			for _, conc := range concs {
				for _, mode := range modes {
					ro := g.options()
					ro.PartBytes = remote.DefaultPartBytes
					ro.MaxConcurrency = conc
					cl, err := remote.NewClient(ro)
					if err != nil {
						b.Fatal(err)
					}
					var src source.Source = remote.NewSource(cl)
					var c *Cache
					key := name
					switch mode {
					case "first", "second":
						if mode == "first" {
							lastDir = b.TempDir()
						} else if lastDir == "" {
							continue
						}
						opts := Options{Dir: lastDir}
						if mode == "first" {
							opts.QueueWait = queueWait
						}
						if c, err = Open(opts); err != nil {
							b.Fatal(err)
						}
						src = NewSource(src.(*remote.Source), c)
					case "local":
						src, key = lsrc, local
					}
					o, _, err := src.Open(key, files.TrustNone)
					if err != nil {
						b.Fatal(err)
					}
					if touch > 0 && mode != "remote" {
						pretouch(b, touch*n)
					}
					s0, c0, t0 := s3test.ProcCPU(g.Pid), s3test.SelfCPU(), time.Now()
					if _, err := src.ReadAt(o, dst, 0, source.PathBuffered); err != nil {
						b.Fatal(err)
					}
					d, cpu, scpu := time.Since(t0), s3test.SelfCPU()-c0, s3test.ProcCPU(g.Pid)-s0
					o.Release()
					if c != nil {
						c.Close()
						s := c.Stats()
						if mode == "second" && s.MissBlocks != 0 && queueWait == 0 {
							b.Fatalf("second read missed %d blocks", s.MissBlocks)
						}
						if queueWait != 0 {
							fmt.Printf("  %s conc %d: %d blocks dropped, %d missed\n", mode, conc, s.QueueDrops, s.MissBlocks)
						}
					}
					cl.Close()
					k := fmt.Sprintf("%-6s conc %3d", mode, conc)
					got[k] = append(got[k], float64(n)/d.Seconds()/1e6)
					cpus[k] = append(cpus[k], cpu.Seconds()/(float64(n)/1e9))
					srv[k] = append(srv[k], scpu.Seconds()/(float64(n)/1e9))
				}
			}
		}
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("\n%d MiB from versitygw on loopback, %d rounds (MB/s median / best; CPU s per GB of this process and of versitygw, medians)\n", mib, reps)
	for _, k := range keys {
		v := append([]float64(nil), got[k]...)
		sort.Float64s(v)
		u := append([]float64(nil), cpus[k]...)
		sort.Float64s(u)
		w := append([]float64(nil), srv[k]...)
		sort.Float64s(w)
		fmt.Printf("  %s %6.0f / %6.0f MB/s  client %5.2f, server %5.2f CPU s/GB\n", k, v[len(v)/2], v[len(v)-1], u[len(u)/2], w[len(w)/2])
	}
}

// pretouch writes a byte per page of n bytes of new anonymous memory
// (huge pages asked for) and unmaps it, as bench_remote's children do
// before their clock ("Fair start" in its doc): the memory the read then
// allocates was freed a moment ago, not yet handed back to the host.
func pretouch(b *testing.B, n int) {
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		b.Fatal(err)
	}
	_ = syscall.Madvise(m, 14) // MADV_HUGEPAGE
	for i := 0; i < n; i += 4096 {
		m[i] = 1
	}
	if err := syscall.Munmap(m); err != nil {
		b.Fatal(err)
	}
}

// newLocalSource returns a source.Local as the engine's buffered path
// has it (parallel preads), and its closer.
func newLocalSource(b *testing.B) (*source.Local, func()) {
	var st stats.Counters
	rd, err := iopath.New(config.Defaults(), &st)
	if err != nil {
		b.Fatal(err)
	}
	tab := files.NewTable(16, &st)
	return &source.Local{Files: tab, RD: rd}, func() { tab.Close(); rd.Close() }
}
