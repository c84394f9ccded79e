//go:build linux

package files

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkAcquireOpen is the per-read cost of the table for a file that is
// already open: one stat syscall plus a read-locked map lookup. BenchmarkStat
// is the bare syscall, for the ratio.
func BenchmarkAcquireOpen(b *testing.B) {
	p := filepath.Join(b.TempDir(), "model.safetensors")
	write(b, p, make([]byte, 4096))
	tb := NewTable(128, nil)
	defer tb.Close()
	b.ReportAllocs()
	for b.Loop() {
		f, _, err := tb.Acquire(p)
		if err != nil {
			b.Fatal(err)
		}
		f.Release()
	}
}

func BenchmarkAcquireOpenParallel(b *testing.B) {
	p := filepath.Join(b.TempDir(), "model.safetensors")
	write(b, p, make([]byte, 4096))
	tb := NewTable(128, nil)
	defer tb.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f, _, err := tb.Acquire(p)
			if err != nil {
				b.Error(err)
				return
			}
			f.Release()
		}
	})
}

func BenchmarkStat(b *testing.B) {
	p := filepath.Join(b.TempDir(), "model.safetensors")
	write(b, p, make([]byte, 4096))
	var st unix.Stat_t
	b.ReportAllocs()
	for b.Loop() {
		if err := unix.Stat(p, &st); err != nil {
			b.Fatal(err)
		}
	}
}
