package main

import (
	"bytes"
	"math/rand"
	"testing"
)

// The hit path's copy (hitcopy.h) at every size class it branches on (below
// 1 KiB, the 128-byte steps, the tail, the prefetch distance) and at every
// alignment of source and destination: exactly the source's bytes, and not
// one byte outside the destination; the streaming-store copy of a large
// readv alike (it also branches on the destination's 32-byte alignment).
func TestHitCopyBytes(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testHitCopy(t, hitCopy) })
	t.Run("stream", func(t *testing.T) { testHitCopy(t, hitCopyStream) })
}

func testHitCopy(t *testing.T, copyFn func(dst, src []byte) int) {
	rng := rand.New(rand.NewSource(7))
	src := make([]byte, 80<<10)
	rng.Read(src)
	const guard = 256
	buf := make([]byte, len(src)+2*guard+64)
	sizes := []int{0, 1, 7, 127, 128, 1023, 1024, 1025, 1151, 1152, 4095, 4096, 4097, 4224, 4223, 511, 512, 513,
		640, 65536, 65537, 70000}
	for i := 0; i < 40; i++ {
		sizes = append(sizes, 1024+rng.Intn(70<<10))
	}
	kind := -1
	for _, n := range sizes {
		for _, so := range []int{0, 1, 8, 31, 63} {
			for _, do := range []int{0, 3, 31, 32, 33, 61} {
				for i := range buf {
					buf[i] = 0xA5
				}
				dst := buf[guard+do : guard+do+n]
				kind = copyFn(dst, src[so:so+n])
				if !bytes.Equal(dst, src[so:so+n]) {
					t.Fatalf("size %d, src offset %d, dst offset %d: bytes differ", n, so, do)
				}
				for i, b := range buf {
					if (i < guard+do || i >= guard+do+n) && b != 0xA5 {
						t.Fatalf("size %d, src offset %d, dst offset %d: byte %d outside dst written", n, so, do, i)
					}
				}
			}
		}
	}
	t.Logf("copy kind %d (0 memcpy, 1 rep movsb, 2 AVX2)", kind)
}
