package diskcache

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
	"github.com/memtier/memtier/runtime/stats"
)

// BenchmarkFirstLoadVersitygw times what bench_remote's first-load row
// does below the engine: one object (1024 MiB; FIRSTLOAD_MIB changes it)
// from versitygw on loopback into a buffer, at each concurrency in
// FIRSTLOAD_CONC (default 8,16,64), alternating over FIRSTLOAD_REPS (3)
// rounds:
//   - remote: remote.Source alone (the client's ceiling on this server);
//   - first: remote + disk cache into an empty directory (default
//     Options), the read's own time, which includes its write-through;
//   - second: a new Cache over that directory (page cache warm), as the
//     second process of bench_remote's disk-cache row reads it;
//   - local: the same bytes from a local file written in one call,
//     through source.Local (page cache warm), that row's reference.
//
// It prints the median and best MB/s (10^6 B/s) of each. Run it with
// -cpuprofile to see where a first load's CPU goes.
func BenchmarkFirstLoadVersitygw(b *testing.B) {
	g := startVersitygw(b)
	mib := firstLoadEnv("FIRSTLOAD_MIB", []int{1024})[0]
	concs := firstLoadEnv("FIRSTLOAD_CONC", []int{8, 16, 64})
	reps := firstLoadEnv("FIRSTLOAD_REPS", []int{3})[0]
	modes := []string{"remote", "first", "second", "local"}
	if os.Getenv("FIRSTLOAD_ONLY") != "" {
		modes = []string{os.Getenv("FIRSTLOAD_ONLY")}
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
	got := map[string][]float64{}
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
						if c, err = Open(Options{Dir: lastDir}); err != nil {
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
					t0 := time.Now()
					if _, err := src.ReadAt(o, dst, 0, source.PathBuffered); err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					o.Release()
					if c != nil {
						c.Close()
						if s := c.Stats(); mode == "second" && s.MissBlocks != 0 {
							b.Fatalf("second read missed %d blocks", s.MissBlocks)
						}
					}
					cl.Close()
					k := fmt.Sprintf("%-6s conc %3d", mode, conc)
					got[k] = append(got[k], float64(n)/d.Seconds()/1e6)
				}
			}
		}
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("\n%d MiB from versitygw on loopback, %d rounds (MB/s median / best)\n", mib, reps)
	for _, k := range keys {
		v := append([]float64(nil), got[k]...)
		sort.Float64s(v)
		fmt.Printf("  %s %6.0f / %6.0f\n", k, v[len(v)/2], v[len(v)-1])
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

// firstLoadEnv parses the comma-separated positive integers of the
// variable name, or returns def.
func firstLoadEnv(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range splitComma(v) {
		var x int
		if _, err := fmt.Sscanf(f, "%d", &x); err != nil || x <= 0 {
			return def
		}
		out = append(out, x)
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
