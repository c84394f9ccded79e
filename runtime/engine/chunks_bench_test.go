package engine

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkLoadChunksRandom: 20k random 4-64 KiB chunks of a warm 256 MiB
// file into preallocated buffers (the warm load_chunks case of
// bench_chunks.py without Python), one LoadChunks call per iteration.
func BenchmarkLoadChunksRandom(b *testing.B) {
	const size = 256 << 20
	path := writeP(b, size)
	c := newCtx(b, nil)
	r := rand.New(rand.NewPCG(1, 2))
	ch := make([]Chunk, 20000)
	var total int
	for i := range ch {
		n := 4096 + r.IntN(60<<10)
		ch[i] = Chunk{Off: uint64(r.IntN(size - n)), Size: uint64(n)}
		total += n
	}
	buf := make([]byte, total)
	pos := 0
	for i := range ch {
		ch[i].Dst = buf[pos : pos+int(ch[i].Size)]
		pos += int(ch[i].Size)
	}
	if err := c.LoadChunks(path, ch, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(total))
	b.ResetTimer()
	for b.Loop() {
		if err := c.LoadChunks(path, ch, 0); err != nil {
			b.Fatal(err)
		}
	}
}
