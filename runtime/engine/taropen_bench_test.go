package engine

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/remote/s3test"
)

// BenchmarkTarOpenRemote measures what bench_remote's dataset construction
// costs: opening TARBENCH_SHARDS (4) tar shards of TARBENCH_SAMPLES (512)
// samples of 16-112 KiB in all, held by versitygw (skips without
// MEMTIER_VERSITYGW), into a fresh context over an empty disk cache (a first
// process), TARBENCH_PAR (1) at a time, as memtier.TarShardDataset does,
// TARBENCH_REPS (5) times. It prints per repetition the seconds, the GETs,
// the bytes received, the disk tier's counters and the CPU seconds of this
// process and of versitygw. TARBENCH_PROF names a CPU profile.
func BenchmarkTarOpenRemote(b *testing.B) {
	env := func(k string, d int) int {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
		return d
	}
	shards, samples, reps, par := env("TARBENCH_SHARDS", 4), env("TARBENCH_SAMPLES", 512), env("TARBENCH_REPS", 5), env("TARBENCH_PAR", 1)
	g := s3test.Start(b)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": g.Endpoint, "AWS_ACCESS_KEY_ID": g.Access,
		"AWS_SECRET_ACCESS_KEY": g.Secret, "AWS_REGION": g.Region, "AWS_SESSION_TOKEN": "",
		"AWS_ENDPOINT_URL_S3": "", "AWS_PROFILE": "",
	} {
		b.Setenv(k, v)
	}
	rng := rand.New(rand.NewSource(7))
	var urls []string
	var payload int
	per := (samples + shards - 1) / shards
	for s := range shards {
		var tb bytes.Buffer
		tw := tar.NewWriter(&tb)
		for i := s * per; i < min(samples, (s+1)*per); i++ {
			n := 16<<10 + rng.Intn(96<<10+1)
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("s%07d.bin", i), Mode: 0o644, Size: int64(n), Typeflag: tar.TypeReg})
			tw.Write(pfile(i, n))
			payload += n
		}
		tw.Close()
		name := fmt.Sprintf("shard-%04d.tar", s)
		g.Seed(b, name, tb.Bytes())
		urls = append(urls, g.URL(name))
	}
	if p := os.Getenv("TARBENCH_PROF"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	for r := range reps {
		dir := b.TempDir()
		old := getenv
		getenv = func(k string) string {
			switch k {
			case diskcache.EnvDir:
				return dir
			case diskcache.EnvBytes:
				return "4G"
			}
			return os.Getenv(k)
		}
		c := newCtx(b, nil)
		t0 := time.Now()
		cpu0, gcpu0 := s3test.SelfCPU(), s3test.ProcCPU(g.Pid)
		var wg sync.WaitGroup
		next := make(chan string, len(urls))
		for _, u := range urls {
			next <- u
		}
		close(next)
		for range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range next {
					if _, err := c.OpenTarDataset(u); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(t0)
		cpu, gcpu := s3test.SelfCPU()-cpu0, s3test.ProcCPU(g.Pid)-gcpu0
		fmt.Printf("cpu: self %.3f s, versitygw %.3f s\n", cpu.Seconds(), gcpu.Seconds())
		s := c.Stats()
		ds, _ := c.src.(*sources).diskStats()
		fmt.Printf("rep %d: par %d %d shards %.1f MB open %.3f s (%.0f MB/s) GETs %d bytes %d disk %+v\n", r, par, shards,
			float64(payload)/1e6, el.Seconds(), float64(payload)/1e6/el.Seconds(), s.RemoteRequests, s.RemoteBytes, ds)
		c.Close()
		getenv = old
	}
}
