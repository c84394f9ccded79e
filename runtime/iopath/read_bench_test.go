//go:build linux

package iopath

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/files"
)

// Benchmarks report GB/s through b.SetBytes. The machines are shared and
// noisy, so compare ReadBuffered with the single-thread pread loop from the
// same run rather than with absolute figures.

const benchSize = 256 << 20

// benchFile writes a 256 MiB P-file, reads it once so the page cache is
// warm, and returns it with a destination buffer already faulted in.
func benchFile(b *testing.B) (*files.File, []byte) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.bin")
	writePFile(b, path, benchSize)
	f := openFile(b, path)
	dst := make([]byte, benchSize)
	for off := 0; off < benchSize; off += 1 << 20 {
		if _, err := unix.Pread(f.FD, dst[off:off+1<<20], int64(off)); err != nil {
			b.Fatal(err)
		}
	}
	return f, dst
}

// BenchmarkReadBuffered256MiB: the engine's buffered path, tasks of
// TaskBytes on IOThreads goroutines, warm page cache.
func BenchmarkReadBuffered256MiB(b *testing.B) {
	f, dst := benchFile(b)
	r := newReader(b, config.Defaults(), nil)
	b.SetBytes(benchSize)
	for b.Loop() {
		if n, err := r.ReadBuffered(f, dst, 0); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkPreadLoop1MiB is the baseline: one thread, 1 MiB preads, what a
// plain C loop does.
func BenchmarkPreadLoop1MiB(b *testing.B) {
	f, dst := benchFile(b)
	b.SetBytes(benchSize)
	for b.Loop() {
		for off := 0; off < benchSize; off += 1 << 20 {
			if n, err := unix.Pread(f.FD, dst[off:off+1<<20], int64(off)); err != nil || n != 1<<20 {
				b.Fatal(n, err)
			}
		}
	}
}

// BenchmarkReadDirect256MiB: O_DIRECT straight into an aligned buffer; the
// figure is the disk's (or the host's cache behind a virtual disk).
func BenchmarkReadDirect256MiB(b *testing.B) {
	f, dst := benchFile(b)
	if _, _, _, refused, _ := f.Direct(); refused {
		b.Skip("O_DIRECT refused")
	}
	r := newReader(b, config.Defaults(), nil)
	b.SetBytes(benchSize)
	for b.Loop() {
		if n, _, err := r.ReadDirect(f, dst, 0, true); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkReadBuffered4KiB is the small-read path's own cost on top of one
// pread from the page cache.
func BenchmarkReadBuffered4KiB(b *testing.B) {
	f, dst := benchFile(b)
	r := newReader(b, config.Defaults(), nil)
	b.SetBytes(4096)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if n, err := r.ReadBuffered(f, dst[:4096], off); err != nil || n != 4096 {
			b.Fatal(n, err)
		}
		off = (off + 1<<20) % benchSize
	}
}
