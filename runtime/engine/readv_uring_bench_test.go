package engine

import (
	"os"
	"testing"

	"github.com/memtier/memtier/runtime/config"
)

// BenchmarkReadVNoCache256: ReadV of 256 random 4 KiB ranges over a warm
// 256 MiB file with the DRAM cache off (bench_hot_path's "readv nocache"
// row, without cgo): the io_uring batch, the per-element preadv2 first pass
// (MEMTIER_IO_URING=0) and a pread loop of the same ranges, in one run.
func BenchmarkReadVNoCache256(b *testing.B) {
	const size = 256 << 20
	path := writeP(b, size)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	v := make([]IOVec, 256)
	bufs := make([]byte, 256*4096)
	seed := uint64(1)
	fill := func() {
		for j := range v {
			seed = seed*6364136223846793005 + 1442695040888963407
			off := (seed >> 33) % (size / 4096) * 4096
			v[j] = IOVec{Path: path, Off: off, Size: 4096, Dst: bufs[j*4096 : (j+1)*4096]}
		}
	}
	warm := make([]byte, 1<<20)
	for off := int64(0); off < size; off += 1 << 20 {
		f.ReadAt(warm, off)
	}
	for _, mode := range []struct {
		name string
		off  bool
	}{{"readv_uring", false}, {"readv_preadv2", true}} {
		c := newCtx(b, func(o *config.Options) { o.CacheEnabled = false; o.NoIOUring = mode.off })
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fill()
				if err := c.ReadV(v, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("pread", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fill()
			for j := range v {
				if _, err := f.ReadAt(v[j].Dst, int64(v[j].Off)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
