package engine

import (
	"bytes"
	"os"
	"strconv"
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
//     time; the write-behind flush after it is not counted).
//
// It prints the best MB/s (10^6 bytes/s) of each and its ratio to client.
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
	only := os.Getenv("REMOTE_BENCH_ONLY")
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
	best := map[string]time.Duration{}
	note := func(row string, d time.Duration) {
		if cur, ok := best[row]; !ok || d < cur {
			best[row] = d
		}
		if !bytes.Equal(dst, want) {
			b.Fatalf("%s: bytes differ", row)
		}
		clear(dst[:1<<20])
	}
	ctxRead := func(row string, mod func(*config.Options), disk bool) {
		if only != "" && only != row {
			return
		}
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
		t0 := time.Now()
		for off := 0; off < n; off += piece {
			e := min(n, off+piece)
			if err := c.Read(url, uint64(off), uint64(e-off), dst[off:e], policy.TargetCPU, 0); err != nil {
				b.Fatal(err)
			}
		}
		note(row, time.Since(t0))
		c.Close()
	}
	for b.Loop() {
		for range reps {
			if only == "" || only == "client" {
				cl, err := remote.NewClient(remote.Options{Getenv: getenv})
				if err != nil {
					b.Fatal(err)
				}
				rs := remote.NewSource(cl)
				o, _, err := rs.Open(url, files.TrustNone)
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if _, err := rs.ReadAt(o, dst, 0, source.PathBuffered); err != nil {
					b.Fatal(err)
				}
				note("client", time.Since(t0))
				o.Release()
				cl.Close()
			}
			ctxRead("nocache", func(o *config.Options) { o.CacheEnabled = false }, false)
			ctxRead("dram", func(o *config.Options) { o.CacheBytes = 2 << 30 }, false)
			ctxRead("disk", func(o *config.Options) { o.CacheBytes = 2 << 30 }, true)
		}
	}
	mbps := func(d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }
	for _, row := range []string{"client", "nocache", "dram", "disk"} {
		if d, ok := best[row]; ok {
			r := 0.0
			if c, ok := best["client"]; ok {
				r = mbps(d) / mbps(c)
			}
			b.Logf("%-8s %7.0f MB/s  %.2fx client", row, mbps(d), r)
		}
	}
}
