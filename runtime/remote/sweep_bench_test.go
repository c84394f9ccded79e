package remote

import (
	"bytes"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/remote/s3test"
	"github.com/memtier/memtier/runtime/source"
)

// BenchmarkVersitygwSweep reads one object (512 MiB; SWEEP_MIB changes it)
// from versitygw on loopback through remote.Source.ReadAt at every part
// size (SWEEP_PART_MIB, default 8,16,32,64) and concurrency (SWEEP_CONC,
// default 2,4,8,16,32,64), round-robin over SWEEP_REPS (3) rounds so that
// the noise of a shared machine falls on every setting alike, and prints
// the best and median MB/s (10^6 B/s) of each. It picked
// DefaultPartBytes and DefaultMaxConcurrency (options.go).
func BenchmarkVersitygwSweep(b *testing.B) {
	g := startVersitygw(b)
	mib := s3test.EnvInts("SWEEP_MIB", []int{512})[0]
	parts := s3test.EnvInts("SWEEP_PART_MIB", []int{8, 16, 32, 64})
	concs := s3test.EnvInts("SWEEP_CONC", []int{2, 4, 8, 16, 32, 64})
	reps := s3test.EnvInts("SWEEP_REPS", []int{3})[0]
	size := mib << 20
	data := pattern(size, 51)
	g.seed(b, "sweep.bin", data)
	data = nil
	dst := make([]byte, size)
	for i := range dst {
		dst[i] = 1 // fault the pages in before timing
	}
	type setting struct{ part, conc int }
	var order []setting
	for _, p := range parts {
		for _, c := range concs {
			order = append(order, setting{p, c})
		}
	}
	got := map[setting][]float64{}
	for b.Loop() {
		for range reps {
			for _, s := range order {
				o := g.options(vgwSecret)
				o.PartBytes = int64(s.part) << 20
				o.MaxConcurrency = s.conc
				c, err := NewClient(o)
				if err != nil {
					b.Fatal(err)
				}
				src := NewSource(c)
				obj, _, err := src.Open("s3://"+vgwBucket+"/sweep.bin", files.TrustForever)
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if _, err := src.ReadAt(obj, dst, 0, source.PathBuffered); err != nil {
					b.Fatal(err)
				}
				got[s] = append(got[s], float64(size)/time.Since(t0).Seconds()/1e6)
				obj.Release()
				c.Close()
			}
		}
	}
	want := pattern(size, 51)
	if !bytes.Equal(dst, want) {
		b.Fatal("bytes differ")
	}
	fmt.Printf("\nremote.Source.ReadAt, %d MiB from versitygw on loopback, %d rounds (MB/s best / median)\n", mib, reps)
	fmt.Printf("%10s", "part\\conc")
	for _, c := range concs {
		fmt.Printf(" %12d", c)
	}
	fmt.Println()
	for _, p := range parts {
		fmt.Printf("%7d MiB", p)
		for _, c := range concs {
			v := append([]float64(nil), got[setting{p, c}]...)
			sort.Float64s(v)
			fmt.Printf(" %5.0f / %4.0f", v[len(v)-1], v[len(v)/2])
		}
		fmt.Println()
	}
}
