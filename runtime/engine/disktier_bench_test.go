package engine

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote/s3test"
)

// BenchmarkDiskTierSecondProcess measures what bench_remote's disk-cache
// rows measure, in one process: a fresh context (an empty DRAM cache, as a
// second process has) over a disk cache that holds the whole object, against
// the same load of the object's bytes from a local file (page cache warm),
// interleaved, DISKTIER_BENCH_REPS (5) times each:
//   - obj-disk / obj-local: one read of the whole object (DISKTIER_BENCH_MIB,
//     256) into a preallocated buffer (row 16);
//   - tar-disk / tar-local: an epoch of a tar shard of 4096 samples of
//     16-112 KiB in batches of 64 (ReadBatch, as a DataLoader's batches;
//     row 22), and, for tar-disk, the epoch after it in the same context
//     (tar-disk2: the disk-to-DRAM copy of the second pass; tar-disk3: DRAM
//     hits; DISKTIER_BENCH_EPOCHS=1 skips both).
//
// DISKTIER_BENCH_ROWS picks the rows; DISKTIER_BENCH_PROF names a CPU
// profile of the measured part. It prints per row the median MB/s and the
// median CPU seconds per GB of this process (the figure that moves least
// with the machine's load).
func BenchmarkDiskTierSecondProcess(b *testing.B) {
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("DISKTIER_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	reps := 5
	if v, err := strconv.Atoi(os.Getenv("DISKTIER_BENCH_REPS")); err == nil && v > 0 {
		reps = v
	}
	rows := []string{"obj-disk", "obj-local", "tar-disk", "tar-local"}
	if v := os.Getenv("DISKTIER_BENCH_ROWS"); v != "" {
		rows = strings.Split(v, ",")
	}
	dir := b.TempDir()
	obj := pfile(5, mib<<20)
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	rng := rand.New(rand.NewSource(1))
	var sizes []int
	for i := range 4096 {
		if !strings.Contains(strings.Join(rows, ","), "tar") {
			break
		}
		n := (16 + rng.Intn(97)) << 10
		sizes = append(sizes, n)
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%05d.bin", i), Mode: 0o644, Size: int64(n), Typeflag: tar.TypeReg})
		tw.Write(pfile(i*17, n))
	}
	tw.Close()
	shard := tb.Bytes()
	files := map[string][]byte{"/obj.bin": obj, "/shard.tar": shard}
	mod := time.Unix(1700000000, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, r.URL.Path, mod, bytes.NewReader(data))
	}))
	defer srv.Close()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	env := map[string]string{diskcache.EnvDir: filepath.Join(dir, "disk"), diskcache.EnvBytes: "4G"}
	old := getenv
	defer func() { getenv = old }()
	getenv = func(k string) string { return env[k] }
	opts := func(o *config.Options) { o.CacheBytes = 2 << 30 }
	newC := func() *Context {
		o := config.Defaults()
		opts(&o)
		c, err := New(o)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	dst := make([]byte, len(obj))
	for i := range dst {
		dst[i] = 1
	}
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		bufs[i] = make([]byte, n)
	}
	epoch := func(ds *Dataset) {
		for lo := 0; lo < len(sizes); lo += 64 {
			n := min(64, len(sizes)-lo)
			idx, res := make([]uint64, n), make([]int64, n)
			for k := range idx {
				idx[k] = uint64(lo + k)
			}
			if err := ds.ReadBatch(idx, bufs[lo:lo+n], res, policy.TargetCPU); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Fill the disk cache: one context reads both objects, then flushes.
	w := newC()
	if err := w.Read(srv.URL+"/obj.bin", 0, uint64(len(obj)), dst, policy.TargetCPU, 0); err != nil {
		b.Fatal(err)
	}
	if len(sizes) > 0 {
		ds, err := w.OpenTarDataset(srv.URL + "/shard.tar")
		if err != nil {
			b.Fatal(err)
		}
		epoch(ds)
	}
	w.src.(*sources).disk.Cache().Flush()
	w.Close()

	var payload int
	for _, n := range sizes {
		payload += n
	}
	type sample struct{ wall, cpu time.Duration }
	got := map[string][]sample{}
	measure := func(row string, run func()) {
		c0 := s3test.SelfCPU()
		t0 := time.Now()
		run()
		got[row] = append(got[row], sample{time.Since(t0), s3test.SelfCPU() - c0})
	}
	bytesOf := map[string]int{}
	if p := os.Getenv("DISKTIER_BENCH_PROF"); p != "" {
		pf, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(pf)
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for r := range reps {
		order := slices.Clone(rows)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, row := range order {
			c := newC()
			switch row {
			case "obj-disk", "obj-local":
				p := srv.URL + "/obj.bin"
				if row == "obj-local" {
					p = filepath.Join(dir, "obj.bin")
				}
				bytesOf[row] = len(obj)
				measure(row, func() {
					if err := c.Read(p, 0, uint64(len(obj)), dst, policy.TargetCPU, 0); err != nil {
						b.Fatal(err)
					}
				})
				if r == 0 {
					s := c.Stats()
					b.Logf("%s: inserted %d, buffered %d, hit %d", row, s.CacheInsertedBytes, s.BufferedBytes, s.CacheHitBytes)
				}
				if !bytes.Equal(dst, obj) {
					b.Fatalf("%s: bytes differ", row)
				}
			case "tar-disk", "tar-local":
				p := srv.URL + "/shard.tar"
				if row == "tar-local" {
					p = filepath.Join(dir, "shard.tar")
				}
				ds, err := c.OpenTarDataset(p)
				if err != nil {
					b.Fatal(err)
				}
				bytesOf[row] = payload
				measure(row, func() { epoch(ds) })
				if row == "tar-disk" && os.Getenv("DISKTIER_BENCH_EPOCHS") != "1" {
					if st, ok := c.src.(*sources).diskStats(); ok && r == 0 {
						s := c.Stats()
						b.Logf("tar-disk epoch 1: disk hit blocks %d, hit bytes %d, miss blocks %d; DRAM inserted %d, buffered %d",
							st.HitBlocks, st.HitBytes, st.MissBlocks, s.CacheInsertedBytes, s.BufferedBytes)
					}
					bytesOf["tar-disk2"] = payload
					measure("tar-disk2", func() { epoch(ds) })
					bytesOf["tar-disk3"] = payload
					measure("tar-disk3", func() { epoch(ds) })
				}
				for i, n := range sizes {
					if !bytes.Equal(bufs[i], pfile(i*17, n)) {
						b.Fatalf("%s: sample %d differs", row, i)
					}
				}
			}
			c.Close()
		}
	}
	b.StopTimer()
	names := make([]string, 0, len(got))
	for k := range got {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, row := range names {
		s := got[row]
		walls := make([]time.Duration, len(s))
		cpus := make([]time.Duration, len(s))
		for i := range s {
			walls[i], cpus[i] = s[i].wall, s[i].cpu
		}
		slices.Sort(walls)
		slices.Sort(cpus)
		mbps := func(d time.Duration) float64 { return float64(bytesOf[row]) / d.Seconds() / 1e6 }
		b.Logf("%-10s median %6.0f MB/s (best %6.0f), CPU %.3f s/GB", row, mbps(walls[len(walls)/2]), mbps(walls[0]),
			cpus[len(cpus)/2].Seconds()/(float64(bytesOf[row])/1e9))
	}
}
