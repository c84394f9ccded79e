package engine

import (
	"os"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/policy"
)

// BenchmarkReadCachedRandom256: cached 4 KiB reads at random offsets over a
// prefetched 256 MiB file (bench_hot_path's strict row, without cgo).
func BenchmarkReadCachedRandom256(b *testing.B) { benchCachedRandom(b, 0) }

func benchCachedRandom(b *testing.B, flags uint32) {
	const size = 256 << 20
	path := writeP(b, size)
	c := newCtx(b, func(o *config.Options) { o.CacheBytes = 320 << 20 })
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	offs := make([]uint64, 1<<20)
	seed := uint64(1)
	for i := range offs {
		seed = seed*6364136223846793005 + 1442695040888963407
		offs[i] = (seed >> 33) % (size / 4096) * 4096
	}
	dst := make([]byte, 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Read(path, offs[i&(1<<20-1)], 4096, dst, 0, flags); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadLargeCached: one 256 MiB read served by the DRAM cache against
// the same read through the page cache with the DRAM cache off.
func BenchmarkReadLargeCached(b *testing.B) {
	const size = 256 << 20
	path := writeP(b, size)
	for _, cached := range []bool{true, false} {
		c := newCtx(b, func(o *config.Options) { o.CacheBytes = 320 << 20; o.CacheEnabled = cached })
		if cached {
			if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
				b.Fatal(err)
			}
		}
		dst := make([]byte, size)
		c.Read(path, 0, size, dst, 0, 0)
		name := "pagecache"
		if cached {
			name = "dram"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				if err := c.Read(path, 0, size, dst, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadCachedRandom256Immutable is BenchmarkReadCachedRandom256 with
// READ_IMMUTABLE: no freshness check (bench_hot_path's immutable row).
func BenchmarkReadCachedRandom256Immutable(b *testing.B) {
	benchCachedRandom(b, policy.ReadImmutable)
}

// BenchmarkReadVCached256: memtier_readv of 256 random 4 KiB ranges all in
// the DRAM cache, against a pread loop of the same ranges (page cache warm),
// without cgo.
func BenchmarkReadVCached256(b *testing.B) {
	const size = 256 << 20
	path := writeP(b, size)
	c := newCtx(b, func(o *config.Options) { o.CacheBytes = 320 << 20 })
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
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
	b.Run("readv", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fill()
			if err := c.ReadV(v, 0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
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
