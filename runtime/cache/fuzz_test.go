package cache

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/memtier/memtier/runtime/stats"
)

// FuzzCacheOps decodes bytes into a sequence of cache operations against a
// small cache (0..23 blocks of 16 KiB, one or two shards, an allocator that may
// run out) and checks the invariants after every operation:
//   - Resident <= Budget, and Resident == allocator buffers outstanding;
//   - Len*BlockSize == Resident when nothing is pinned;
//   - each shard's FIFOs hold exactly its map, frequencies stay <= 3, the
//     ghost stays within its bound;
//   - after a successful Fill the range is covered, and valid pages hold the
//     bytes written for that block (no buffer reused while pinned);
//   - after Close nothing can be acquired; at the end DropAll frees everything.
func FuzzCacheOps(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 2, 30, 300, 1500, 3000} {
		seed := make([]byte, n)
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		if n >= 2 {
			seed[0] = byte(n) // vary the budget
			seed[1] = byte(n / 7)
		}
		f.Add(seed)
	}
	f.Add([]byte{8, 255, 0, 0, 1, 0, 4, 1, 3, 0, 0x35, 2, 0, 0, 6, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		runCacheOps(t, data)
	})
}

var errFuzzFill = errors.New("fuzz fill error")

type fuzzHeld struct {
	b    *Block
	f, i uint64
}

func runCacheOps(t *testing.T, data []byte) {
	if len(data) < 2 {
		return
	}
	budget := uint64(data[0]%24) * testBS
	limit := int64(data[1] % 12)
	if limit >= 10 {
		limit = -1
	}
	data = data[2:]
	alloc := newCountingAlloc(testBS, limit)
	c := New(budget, testBS, alloc, new(stats.Counters))
	var held []fuzzHeld
	closed := false
	pick := func(a byte) int { return int(a) % len(held) }

	for n := 0; len(data) >= 3 && n < 4096; n++ {
		op, a, b := data[0]%8, data[1], data[2]
		data = data[3:]
		f, i := uint64(a%3), uint64(a>>2)%8
		switch op {
		case 0, 1: // Acquire (create when b is odd)
			blk := c.Acquire(f, i, b&1 == 1)
			if closed && blk != nil {
				t.Fatal("Acquire after Close returned a block")
			}
			if blk != nil {
				held = append(held, fuzzHeld{blk, f, i})
			}
		case 2: // Peek
			if blk := c.Peek(f, i); blk != nil {
				held = append(held, fuzzHeld{blk, f, i})
			}
		case 3: // Release
			if len(held) > 0 {
				j := pick(a)
				held[j].b.Release()
				held = append(held[:j], held[j+1:]...)
			}
		case 4: // Fill, failing on the first run when a's top bit is set
			if len(held) == 0 {
				break
			}
			h := held[pick(a)]
			lo := int(b&15) * 1024
			hi := min(testBS, lo+int(b>>4)*1536)
			fail := a&0x80 != 0
			var runs [][2]int
			filled, err := h.b.Fill(lo, hi, func(p []byte, off int) error {
				runs = append(runs, [2]int{off, off + len(p)})
				if off%pageSize != 0 || (len(p)%pageSize != 0 && off+len(p) != testBS) {
					t.Fatalf("run [%d, %d) not page aligned", off, off+len(p))
				}
				if fail {
					return errFuzzFill
				}
				return fillFrom(h.f, h.i)(p, off)
			})
			sum := 0
			for _, r := range runs {
				sum += r[1] - r[0]
				if r[0] < lo&^(pageSize-1) || r[1] > hi+pageSize-1 {
					t.Fatalf("run %v outside [%d, %d)", r, lo, hi)
				}
			}
			if filled != sum {
				t.Fatalf("Fill returned %d, fn asked for %d", filled, sum)
			}
			switch {
			case fail && len(runs) > 0:
				if err != errFuzzFill || len(runs) != 1 || h.b.Covers(runs[0][0], runs[0][0]+1) {
					t.Fatalf("failed Fill: err %v runs %v", err, runs)
				}
			case err != nil:
				t.Fatalf("Fill: %v", err)
			case !h.b.Covers(lo, hi):
				t.Fatalf("Covers(%d, %d) false after Fill", lo, hi)
			}
		case 5: // verify contents
			if len(held) > 0 {
				h := held[pick(a)]
				if !checkPattern(t, h.b, h.f, h.i) {
					t.FailNow()
				}
			}
		case 6: // drops
			switch {
			case b < 200:
				c.DropFile(f)
			case b < 250:
				c.DropAll()
			default:
				c.Close()
				closed = true
			}
		case 7: // hit without keeping the pin
			if blk := c.Acquire(f, i, false); blk != nil {
				blk.Release()
			}
		}
		checkFuzzInvariants(t, c, alloc, len(held))
	}
	for _, h := range held {
		if !checkPattern(t, h.b, h.f, h.i) {
			t.FailNow()
		}
		h.b.Release()
	}
	checkFuzzInvariants(t, c, alloc, 0)
	c.DropAll()
	if c.Resident() != 0 || c.Len() != 0 || alloc.outstanding() != 0 {
		t.Fatalf("after DropAll: resident %d len %d outstanding %d", c.Resident(), c.Len(), alloc.outstanding())
	}
}

func checkFuzzInvariants(t *testing.T, c *Cache, alloc *countingAlloc, pinned int) {
	t.Helper()
	res := c.Resident()
	if res > c.Budget() {
		t.Fatalf("resident %d > budget %d", res, c.Budget())
	}
	if got := uint64(alloc.outstanding()) * testBS; got != res {
		t.Fatalf("allocator outstanding %d bytes, resident %d", got, res)
	}
	if pinned == 0 {
		if got := uint64(c.Len()) * testBS; got != res {
			t.Fatalf("Len*blockSize %d != resident %d with nothing pinned", got, res)
		}
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n := 0
		for _, q := range []*fifo{&s.small, &s.main} {
			for b := q.head; b != nil; b = b.next {
				n++
				if s.m[b.k] != b || b.freq.Load() > maxFreq || b.pins.Load()&droppedBit != 0 {
					s.mu.Unlock()
					t.Fatalf("shard %d: bad queued block %+v", i, b.k)
				}
			}
		}
		if n != len(s.m) || n != s.small.n+s.main.n || int64(n) > s.blocks.Load() || s.blocks.Load() > s.capBlocks {
			s.mu.Unlock()
			t.Fatalf("shard %d: queued %d map %d S %d M %d blocks %d cap %d", i, n, len(s.m),
				s.small.n, s.main.n, s.blocks.Load(), s.capBlocks)
		}
		if len(s.ghost.live) > len(s.ghost.ring) {
			s.mu.Unlock()
			t.Fatalf("shard %d: ghost holds %d keys, bound %d", i, len(s.ghost.live), len(s.ghost.ring))
		}
		s.mu.Unlock()
	}
}
