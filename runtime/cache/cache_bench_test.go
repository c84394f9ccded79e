package cache

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/memtier/memtier/runtime/stats"
)

// BenchmarkAcquireHit measures Acquire of a resident block plus Release, from
// GOMAXPROCS goroutines over 1024 blocks spread across all shards.
func BenchmarkAcquireHit(b *testing.B) {
	const blocks = 1024
	c := New(blocks*testBS, testBS, nil, new(stats.Counters))
	for i := range uint64(blocks) {
		c.Acquire(i%8, i/8, true).Release()
	}
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(seed.Add(1), 3))
		for pb.Next() {
			i := r.Uint64N(blocks)
			blk := c.Acquire(i%8, i/8, false)
			if blk == nil {
				b.Fatal("miss")
			}
			blk.Release()
		}
	})
}

// BenchmarkAcquireMissEvict measures inserting a new block into a full cache
// (one S3-FIFO eviction, buffer reused) during a sequential scan.
func BenchmarkAcquireMissEvict(b *testing.B) {
	c := New(256*testBS, testBS, nil, new(stats.Counters))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		c.Acquire(1, i, true).Release()
	}
}

// BenchmarkCovers measures the validity check of a whole 4 MiB block (1024
// pages).
func BenchmarkCovers(b *testing.B) {
	const bs = 4 << 20
	c := New(bs, bs, nil, nil)
	blk := c.Acquire(1, 0, true)
	defer blk.Release()
	blk.Fill(0, bs, func([]byte, int) error { return nil })
	b.ResetTimer()
	for range b.N {
		if !blk.Covers(0, bs) {
			b.Fatal("not covered")
		}
	}
}
