package engine

import (
	"bytes"
	"cmp"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/remote/s3test"
	"github.com/memtier/memtier/runtime/source"
)

// BenchmarkRemoteFirstLoad reads one object (512 MiB; REMOTE_BENCH_MIB
// changes it) from versitygw on loopback, interleaved in one run, each
// repetition (REMOTE_BENCH_REPS, 3) in a fresh context:
//   - client: remote.Source.ReadAt alone (the bare client);
//   - nocache: a context without a DRAM cache;
//   - dram: a context with a 2 GiB DRAM cache (the first load admits);
//   - disk: dram plus a disk cache in an empty directory (the read's own
//     time; the write-behind flush after it is not counted);
//   - disknodram: a disk cache and no DRAM cache.
//
// REMOTE_BENCH_ROWS (comma-separated) picks the rows and their order. It
// prints, per row, the best and the median MB/s (10^6 bytes/s), the best's
// ratio to client, and the median CPU seconds per GB (10^9 bytes) of this
// process and of versitygw, counted from the read's start to the context's
// Close (so a disk row includes its write-behind flush). On the 2-core
// build machine the two share the CPUs, so the CPU per GB is the figure that
// does not move with the machine's other load.
func BenchmarkRemoteFirstLoad(b *testing.B) {
	g := s3test.Start(b)
	mib := 512
	if v, err := strconv.Atoi(os.Getenv("REMOTE_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("REMOTE_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	rows := []string{"client", "nocache", "dram", "disk"}
	if v := os.Getenv("REMOTE_BENCH_ROWS"); v != "" {
		rows = strings.Split(v, ",")
	}
	n := mib << 20
	want := s3test.Pattern(n, 7)
	g.Seed(b, "big.bin", want)
	env := map[string]string{
		"AWS_ENDPOINT_URL": g.Endpoint, "AWS_ACCESS_KEY_ID": g.Access,
		"AWS_SECRET_ACCESS_KEY": g.Secret, "AWS_REGION": g.Region,
	}
	old := getenv
	defer func() { getenv = old }()
	getenv = func(k string) string { return env[k] }
	url := g.URL("big.bin")
	dst := make([]byte, n)
	for i := range dst {
		dst[i] = 1
	}
	type sample struct{ wall, self, server time.Duration }
	got := map[string][]sample{}
	measure := func(row string, read, done func()) {
		s0, v0 := s3test.SelfCPU(), s3test.ProcCPU(g.Pid)
		t0 := time.Now()
		read()
		wall := time.Since(t0)
		done()
		got[row] = append(got[row], sample{wall, s3test.SelfCPU() - s0, s3test.ProcCPU(g.Pid) - v0})
		if !bytes.Equal(dst, want) {
			b.Fatalf("%s: bytes differ", row)
		}
		clear(dst[:1<<20])
	}
	ctxRead := func(row string, mod func(*config.Options), disk bool) {
		delete(env, diskcache.EnvDir)
		if disk {
			env[diskcache.EnvDir] = b.TempDir()
			env[diskcache.EnvBytes] = "4G"
		}
		c := newCtx(b, mod)
		piece := n
		if v, err := strconv.Atoi(os.Getenv("REMOTE_BENCH_PIECE_MIB")); err == nil && v > 0 {
			piece = v << 20 // as Python's read_into splits (CHUNK_BYTES)
		}
		measure(row, func() {
			for off := 0; off < n; off += piece {
				e := min(n, off+piece)
				if err := c.Read(url, uint64(off), uint64(e-off), dst[off:e], policy.TargetCPU, 0); err != nil {
					b.Fatal(err)
				}
			}
		}, func() { c.Close() })
	}
	for b.Loop() {
		for range reps {
			for _, row := range rows {
				switch row {
				case "client":
					cl, err := remote.NewClient(remote.Options{Getenv: getenv})
					if err != nil {
						b.Fatal(err)
					}
					rs := remote.NewSource(cl)
					o, _, err := rs.Open(url, files.TrustNone)
					if err != nil {
						b.Fatal(err)
					}
					measure(row, func() {
						if _, err := rs.ReadAt(o, dst, 0, source.PathBuffered); err != nil {
							b.Fatal(err)
						}
					}, func() { o.Release(); cl.Close() })
				case "nocache":
					ctxRead(row, func(o *config.Options) { o.CacheEnabled = false }, false)
				case "dram":
					ctxRead(row, func(o *config.Options) { o.CacheBytes = 2 << 30 }, false)
				case "disk":
					ctxRead(row, func(o *config.Options) { o.CacheBytes = 2 << 30 }, true)
				case "disknodram":
					ctxRead(row, func(o *config.Options) { o.CacheEnabled = false }, true)
				default:
					b.Fatalf("REMOTE_BENCH_ROWS: unknown row %q", row)
				}
			}
		}
	}
	mbps := func(d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }
	perGB := func(d time.Duration) float64 { return d.Seconds() / (float64(n) / 1e9) }
	bestOf := func(row string) time.Duration {
		return slices.MinFunc(got[row], func(x, y sample) int { return cmp.Compare(x.wall, y.wall) }).wall
	}
	median := func(xs []sample, f func(sample) time.Duration) time.Duration {
		v := make([]time.Duration, len(xs))
		for i, x := range xs {
			v[i] = f(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	for i, row := range rows {
		xs := got[row]
		if len(xs) == 0 || slices.Index(rows, row) != i {
			continue // a row named twice is printed once
		}
		r := 0.0
		if _, ok := got["client"]; ok {
			r = mbps(bestOf(row)) / mbps(bestOf("client"))
		}
		b.Logf("%-14s best %5.0f MB/s  median %5.0f  %.2fx client  cpu/GB self %.2f s, server %.2f s",
			row, mbps(bestOf(row)), mbps(median(xs, func(x sample) time.Duration { return x.wall })), r,
			perGB(median(xs, func(x sample) time.Duration { return x.self })),
			perGB(median(xs, func(x sample) time.Duration { return x.server })))
	}
}
