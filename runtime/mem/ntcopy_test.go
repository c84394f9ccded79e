package mem

import (
	"bytes"
	"sync"
	"testing"
)

// TestCopyStreamEveryAlignment checks the bytes and the count for every
// destination and source misalignment and lengths around the thresholds,
// and that nothing outside dst[:n] is written.
func TestCopyStreamEveryAlignment(t *testing.T) {
	src := make([]byte, 3*streamMin+200)
	for i := range src {
		src[i] = byte(i*7 + i>>8)
	}
	for _, n := range []int{0, 1, 63, 64, streamMin - 1, streamMin, streamMin + 1, 2*streamMin + 65, 3 * streamMin} {
		for da := 0; da < 70; da += 3 {
			for sa := 0; sa < 70; sa += 5 {
				buf := make([]byte, n+da+100)
				for i := range buf {
					buf[i] = 0xEE
				}
				dst := buf[da : da+n]
				if got := CopyStream(dst, src[sa:sa+n]); got != n {
					t.Fatalf("n=%d da=%d sa=%d: CopyStream = %d", n, da, sa, got)
				}
				if !bytes.Equal(dst, src[sa:sa+n]) {
					t.Fatalf("n=%d da=%d sa=%d: wrong bytes", n, da, sa)
				}
				for i, b := range buf {
					if (i < da || i >= da+n) && b != 0xEE {
						t.Fatalf("n=%d da=%d sa=%d: byte %d outside dst written", n, da, sa, i)
					}
				}
			}
		}
	}
	if got := CopyStream(make([]byte, 10), src[:5]); got != 5 {
		t.Fatalf("short src: %d, want 5", got)
	}
}

// BenchmarkCopyStream compares plain copy with CopyStream for what a large
// DRAM-cache hit does: 2 workers copying 64 KiB blocks out of anonymous
// memory into one 256 MiB destination.
func BenchmarkCopyStream(b *testing.B) {
	const total, blk = 256 << 20, 64 << 10
	src := make([]byte, total)
	dst := make([]byte, total)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	for _, c := range []struct {
		name string
		f    func(d, s []byte) int
	}{{"copy", func(d, s []byte) int { return copy(d, s) }}, {"stream", CopyStream}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for o := w * total / 2; o < (w+1)*total/2; o += blk {
							c.f(dst[o:o+blk], src[o:o+blk])
						}
					}()
				}
				wg.Wait()
			}
		})
	}
}
