package engine

import (
	"testing"

	"github.com/memtier/memtier/runtime/config"
)

// BenchmarkReadCached4K is the per-call cost of a 4 KiB read served by the
// DRAM cache (the C call adds about 80 ns of cgo on top).
func BenchmarkReadCached4K(b *testing.B) {
	path := writeP(b, 64<<20)
	c := newCtx(b, nil)
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 4096)
	b.SetBytes(4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := uint64(i*7919%16000) * 4096
		if err := c.Read(path, off, 4096, dst, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadVWarm4K: batches of 256 random 4 KiB reads from the page cache
// with the DRAM cache off (bench_small_readv's warm case, without cgo).
func BenchmarkReadVWarm4K(b *testing.B) {
	const size = 64 << 20
	path := writeP(b, size)
	c := newCtx(b, func(o *config.Options) { o.CacheEnabled = false })
	v := make([]IOVec, 256)
	bufs := make([]byte, 256*4096)
	seed := uint64(1)
	b.SetBytes(256 * 4096)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range v {
			seed = seed*6364136223846793005 + 1442695040888963407
			off := (seed >> 33) % (size / 4096) * 4096
			v[j] = IOVec{Path: path, Off: off, Size: 4096, Dst: bufs[j*4096 : (j+1)*4096]}
		}
		if err := c.ReadV(v, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadCachedChunks: a 256 MiB file served from the DRAM cache in
// 1 MiB reads (bench_reuse's second pass, without cgo).
func BenchmarkReadCachedChunks(b *testing.B) {
	const size = 256 << 20
	path := writeP(b, size)
	c := newCtx(b, func(o *config.Options) { o.CacheBytes = 320 << 20 })
	dst := make([]byte, 1<<20)
	for off := uint64(0); off < size; off += 1 << 20 {
		if err := c.Read(path, off, 1<<20, dst, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for off := uint64(0); off < size; off += 1 << 20 {
			if err := c.Read(path, off, 1<<20, dst, 0, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReadVCachedSmall: 4 ranges of 4 KiB already in the DRAM cache.
func BenchmarkReadVCachedSmall(b *testing.B) {
	path := writeP(b, 1<<20)
	c := newCtx(b, nil)
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	bufs := make([]byte, 4*4096)
	v := make([]IOVec, 4)
	for i := 0; i < b.N; i++ {
		for j := range v {
			v[j] = IOVec{Path: path, Off: uint64(j) * 65536, Size: 4096, Dst: bufs[j*4096 : (j+1)*4096]}
		}
		if err := c.ReadV(v, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}
