package engine

import "testing"

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
