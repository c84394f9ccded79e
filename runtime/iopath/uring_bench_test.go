//go:build linux

package iopath

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
)

// BenchmarkBatch256x4K: 256 random 4 KiB reads from a warm 256 MiB file, one
// batch per op: a pread loop (the baseline), an RWF_NOWAIT preadv2 loop
// (readv's per-element first pass) and ReadBatch with and without nowait.
// Compare the sub-benchmarks of one run; the machine is shared. On the
// 2-core build VM (loaded) ReadBatch ran at 1.02-1.10x the pread loop and
// the preadv2 loop at 0.87-0.98x; marking every SQE IOSQE_ASYNC (io-wq
// workers do the copies) ran at 0.4x, every 2nd to 4th at 0.8-1.1x, so
// ReadBatch leaves the reads inline.
func BenchmarkBatch256x4K(b *testing.B) {
	f, _ := benchFile(b)
	r := newReader(b, config.Defaults(), nil)
	const n = 256
	buf := make([]byte, n*4096)
	offs := make([]int64, 1<<16)
	seed := uint64(1)
	for i := range offs {
		seed = seed*6364136223846793005 + 1442695040888963407
		offs[i] = int64((seed >> 33) % (benchSize / 4096) * 4096)
	}
	batch := make([]BatchRead, n)
	round := 0
	next := func() []int64 {
		o := offs[round*n%len(offs):][:n]
		round++
		return o
	}
	b.Run("pread", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, off := range next() {
				if k, err := unix.Pread(f.FD, buf[j*4096:(j+1)*4096], off); k != 4096 || err != nil {
					b.Fatal(k, err)
				}
			}
		}
	})
	b.Run("preadv2_nowait", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, off := range next() {
				if !r.PreadNowait(f.FD, buf[j*4096:(j+1)*4096], off) {
					b.Fatal("not resident")
				}
			}
		}
	})
	for _, nowait := range []bool{true, false} {
		name := "uring_wait"
		if nowait {
			name = "uring_nowait"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for j, off := range next() {
					batch[j] = BatchRead{FD: f.FD, Dst: buf[j*4096 : (j+1)*4096], Off: off}
				}
				if _, err := r.ReadBatch(batch, nowait); err != nil {
					b.Skip(err)
				}
				for j := range batch {
					if batch[j].N != 4096 || batch[j].Errno != 0 {
						b.Fatal(j, batch[j].N, batch[j].Errno)
					}
				}
			}
		})
	}
}
