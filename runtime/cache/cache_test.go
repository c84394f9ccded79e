package cache

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memtier/memtier/runtime/stats"
)

const testBS = 16 << 10 // 4 pages per block

// countingAlloc is a test Allocator that counts Get/Put and can run out.
type countingAlloc struct {
	size  int
	limit int64 // max outstanding buffers; < 0 means unlimited
	gets  atomic.Int64
	puts  atomic.Int64
	nils  atomic.Int64
	mu    sync.Mutex
}

func newCountingAlloc(size int, limit int64) *countingAlloc {
	return &countingAlloc{size: size, limit: limit}
}

func (a *countingAlloc) Get() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.limit >= 0 && a.gets.Load()-a.puts.Load() >= a.limit {
		a.nils.Add(1)
		return nil
	}
	a.gets.Add(1)
	b := make([]byte, a.size)
	for i := range b {
		b[i] = 0xEE // garbage, as an mmap pool would hand back
	}
	return b
}

func (a *countingAlloc) Put(b []byte) {
	if len(b) != a.size {
		panic("countingAlloc: Put of a foreign buffer")
	}
	a.mu.Lock()
	a.puts.Add(1)
	a.mu.Unlock()
}

func (a *countingAlloc) outstanding() int64 { return a.gets.Load() - a.puts.Load() }

// pat is the byte the test "file" holds at block (f, i), block offset off.
func pat(f, i uint64, off int) byte { return byte(f*131 + i*31 + uint64(off)*7 + uint64(off>>12)) }

// fillFrom returns a Fill callback writing the test pattern of block (f, i).
func fillFrom(f, i uint64) func(p []byte, off int) error {
	return func(p []byte, off int) error {
		for j := range p {
			p[j] = pat(f, i, off+j)
		}
		return nil
	}
}

// checkPattern verifies every valid page of b against the pattern. It reports
// with t.Errorf (safe from any goroutine) and returns false on a mismatch.
func checkPattern(t testing.TB, b *Block, f, i uint64) bool {
	t.Helper()
	d := b.Data()
	for p := 0; p < len(d); p += pageSize {
		if !b.Covers(p, p+pageSize) {
			continue
		}
		for j := p; j < p+pageSize; j++ {
			if d[j] != pat(f, i, j) {
				t.Errorf("block (%d,%d) byte %d = %#x, want %#x", f, i, j, d[j], pat(f, i, j))
				return false
			}
		}
	}
	return true
}

// touch inserts (or hits) a block and releases it at once.
func touch(t testing.TB, c *Cache, f, i uint64) {
	t.Helper()
	b := c.Acquire(f, i, true)
	if b == nil {
		t.Fatalf("Acquire(%d, %d, create) = nil", f, i)
	}
	b.Release()
}

func present(c *Cache, f, i uint64) bool {
	b := c.Peek(f, i)
	if b == nil {
		return false
	}
	b.Release()
	return true
}

func TestNewGeometry(t *testing.T) {
	const bs = 1 << 20
	tests := []struct {
		budget     uint64
		shards     int
		perShard   int64
		smallTgt   int
		totalBytes uint64
	}{
		{0, 1, 0, 1, 0},
		{bs - 1, 1, 0, 1, 0},
		{bs, 1, 1, 1, bs},
		{15 * bs, 1, 15, 1, 15 * bs},
		{16 * bs, 2, 8, 1, 16 * bs},
		{17 * bs, 2, 8, 1, 16 * bs},
		{24 * bs, 2, 12, 1, 24 * bs},
		{32 * bs, 4, 8, 1, 32 * bs},
		{64 * bs, 8, 8, 1, 64 * bs},
		{100 * bs, 8, 12, 1, 96 * bs},
		{128 * bs, 16, 8, 1, 128 * bs},
		{1600*bs + 5, 16, 100, 10, 1600 * bs},
		{1 << 40, 16, 65536, 6553, 1 << 40},
	}
	for _, tt := range tests {
		c := New(tt.budget, bs, nil, nil)
		if len(c.shards) != tt.shards {
			t.Errorf("budget %d: shards = %d, want %d", tt.budget, len(c.shards), tt.shards)
			continue
		}
		var total uint64
		for i := range c.shards {
			s := &c.shards[i]
			if s.capBlocks != tt.perShard || s.smallTarget != tt.smallTgt || len(s.ghost.ring) != int(tt.perShard) {
				t.Errorf("budget %d shard %d: cap %d small %d ghost %d, want %d %d %d", tt.budget, i,
					s.capBlocks, s.smallTarget, len(s.ghost.ring), tt.perShard, tt.smallTgt, tt.perShard)
			}
			total += uint64(s.capBlocks) * bs
		}
		if total != tt.totalBytes || total > tt.budget {
			t.Errorf("budget %d: capacity %d bytes, want %d", tt.budget, total, tt.totalBytes)
		}
		if c.Budget() != tt.budget || c.BlockSize() != bs || c.Resident() != 0 || c.Len() != 0 {
			t.Errorf("budget %d: getters %d %d %d %d", tt.budget, c.Budget(), c.BlockSize(), c.Resident(), c.Len())
		}
	}
}

func TestBudgetBelowOneBlockCachesNothing(t *testing.T) {
	st := new(stats.Counters)
	c := New(testBS-1, testBS, nil, st)
	if b := c.Acquire(1, 0, true); b != nil {
		t.Fatal("Acquire with a budget below one block returned a block")
	}
	if c.Resident() != 0 || c.Len() != 0 || st.CacheMisses.Load() != 1 {
		t.Fatalf("resident %d len %d misses %d", c.Resident(), c.Len(), st.CacheMisses.Load())
	}
}

func TestNewPanicsOnBadBlockSize(t *testing.T) {
	for _, bs := range []uint64{0, 1, 2048, 4095, 4097, 12288} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(block size %d) did not panic", bs)
				}
			}()
			New(1<<20, bs, nil, nil)
		}()
	}
}

func TestBudgetNeverExceeded(t *testing.T) {
	const (
		workers = 8
		ops     = 600
	)
	alloc := newCountingAlloc(testBS, -1)
	c := New(64*testBS, testBS, alloc, nil) // 8 shards x 8 blocks
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			type held struct {
				b    *Block
				f, i uint64
			}
			var pins []held
			for range ops {
				f, i := uint64(r.IntN(4)), uint64(r.IntN(48))
				switch op := r.IntN(100); {
				case op < 50:
					if b := c.Acquire(f, i, true); b != nil {
						lo := r.IntN(testBS)
						hi := lo + r.IntN(testBS-lo+1)
						if _, err := b.Fill(lo, hi, fillFrom(f, i)); err != nil || !b.Covers(lo, hi) {
							failed.Store(true)
						}
						pins = append(pins, held{b, f, i})
					}
				case op < 70:
					if b := c.Peek(f, i); b != nil {
						pins = append(pins, held{b, f, i})
					}
				case op < 97:
					if len(pins) > 0 {
						j := r.IntN(len(pins))
						h := pins[j]
						checkPattern(t, h.b, h.f, h.i)
						h.b.Release()
						pins = append(pins[:j], pins[j+1:]...)
					}
				case op < 99:
					c.DropFile(f)
				default:
					c.DropAll()
				}
				if len(pins) > 3 {
					pins[0].b.Release()
					pins = pins[1:]
				}
				if c.Resident() > c.Budget() {
					failed.Store(true)
				}
			}
			for _, h := range pins {
				h.b.Release()
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		t.Fatal("budget exceeded or Fill/Covers failed during concurrent ops")
	}
	if c.Resident() > c.Budget() {
		t.Fatalf("resident %d > budget %d", c.Resident(), c.Budget())
	}
	if got, want := uint64(c.Len())*testBS, c.Resident(); got != want {
		t.Fatalf("Len*blockSize = %d, Resident = %d", got, want)
	}
	if got := alloc.outstanding() * testBS; uint64(got) != c.Resident() {
		t.Fatalf("allocator outstanding %d bytes, Resident %d", got, c.Resident())
	}
	c.DropAll()
	if c.Resident() != 0 || c.Len() != 0 || alloc.outstanding() != 0 {
		t.Fatalf("after DropAll: resident %d len %d outstanding %d", c.Resident(), c.Len(), alloc.outstanding())
	}
}

func TestScanResistance(t *testing.T) {
	for _, hits := range []int{3, 0} {
		st := new(stats.Counters)
		c := newCache(64*testBS, testBS, 1, nil, st)
		for i := range uint64(8) {
			touch(t, c, 1, i)
		}
		for range hits {
			for i := range uint64(8) {
				c.Acquire(1, i, false).Release()
			}
		}
		for i := range uint64(1000) {
			touch(t, c, 2, i)
		}
		kept := 0
		for i := range uint64(8) {
			if present(c, 1, i) {
				kept++
			}
		}
		if hits > 0 && kept != 8 {
			t.Errorf("hot blocks hit %d times: %d of 8 survived the scan, want 8", hits, kept)
		}
		if hits == 0 && kept != 0 {
			t.Errorf("blocks touched once: %d of 8 survived the scan, want 0", kept)
		}
		wantEvict := uint64(1000 - 56)
		if got := st.CacheEvictions.Load(); got != wantEvict {
			t.Errorf("hits %d: evictions = %d, want %d", hits, got, wantEvict)
		}
		if c.Len() != 64 || c.Resident() != 64*testBS {
			t.Errorf("hits %d: len %d resident %d", hits, c.Len(), c.Resident())
		}
	}
}

// TestScanResistanceSharded runs the scan through New's 16 shards.
func TestScanResistanceSharded(t *testing.T) {
	c := New(256*testBS, testBS, nil, nil) // 16 shards x 16 blocks
	if len(c.shards) != 16 {
		t.Fatalf("shards = %d", len(c.shards))
	}
	for i := range uint64(8) {
		touch(t, c, 1, i)
		touch(t, c, 1, i)
	}
	for i := range uint64(4000) {
		touch(t, c, 2, i)
	}
	for i := range uint64(8) {
		if !present(c, 1, i) {
			t.Errorf("hot block %d evicted by scan", i)
		}
	}
}

func TestNoEvictionUntilFull(t *testing.T) {
	for _, n := range []uint64{1, 100, 255, 256} {
		st := new(stats.Counters)
		c := New(256*testBS, testBS, nil, st)
		const file = 77
		for i := range n {
			b := c.Acquire(file, i, true)
			if b == nil {
				t.Fatalf("n=%d: insert %d failed", n, i)
			}
			if _, err := b.Fill(0, testBS, fillFrom(file, i)); err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
		for i := range n {
			b := c.Acquire(file, i, false)
			if b == nil {
				t.Fatalf("n=%d: block %d missing on the second pass", n, i)
			}
			if !b.Covers(0, testBS) {
				t.Fatalf("n=%d: block %d lost validity", n, i)
			}
			checkPattern(t, b, file, i)
			b.Release()
		}
		if h, m, e := st.CacheHits.Load(), st.CacheMisses.Load(), st.CacheEvictions.Load(); h != n || m != n || e != 0 {
			t.Errorf("n=%d: hits %d misses %d evictions %d, want %d %d 0", n, h, m, e, n, n)
		}
		if c.Resident() != n*testBS || uint64(c.Len()) != n {
			t.Errorf("n=%d: resident %d len %d", n, c.Resident(), c.Len())
		}
	}
}

func TestGhost(t *testing.T) {
	c := newCache(64*testBS, testBS, 1, nil, nil)
	s := &c.shards[0]
	// X enters S, the cache fills, and one more insert evicts X (S head).
	touch(t, c, 9, 0)
	for i := range uint64(64) {
		touch(t, c, 2, i)
	}
	if present(c, 9, 0) {
		t.Fatal("X not evicted from S")
	}
	if _, ok := s.ghost.live[key{9, 0}]; !ok {
		t.Fatal("X not in ghost after eviction from S")
	}
	// Re-inserted, X goes to M and survives a following scan.
	touch(t, c, 9, 0)
	if b := s.m[key{9, 0}]; b == nil || b.q != qMain {
		t.Fatal("X not in M after re-insert")
	}
	if _, ok := s.ghost.live[key{9, 0}]; ok {
		t.Fatal("X still in ghost after re-insert")
	}
	for i := range uint64(1000) {
		touch(t, c, 3, i)
	}
	if !present(c, 9, 0) {
		t.Fatal("X re-inserted from ghost did not survive the scan")
	}

	// Control: Y evicted, then pushed out of the bounded ghost by 64 more
	// evictions; re-inserted it lands in S and the scan evicts it.
	c2 := newCache(64*testBS, testBS, 1, nil, nil)
	touch(t, c2, 9, 1)
	for i := range uint64(64 + 64) {
		touch(t, c2, 4, i)
	}
	if _, ok := c2.shards[0].ghost.live[key{9, 1}]; ok {
		t.Fatal("ghost kept Y beyond its bound")
	}
	if n := len(c2.shards[0].ghost.live); n != 64 {
		t.Fatalf("ghost holds %d keys, want 64", n)
	}
	touch(t, c2, 9, 1)
	for i := range uint64(1000) {
		touch(t, c2, 5, i)
	}
	if present(c2, 9, 1) {
		t.Fatal("Y forgotten by the ghost survived the scan")
	}
}

func TestMainFIFOEviction(t *testing.T) {
	// When S is below target, M is the victim queue and frequency protects.
	c := newCache(20*testBS, testBS, 1, nil, nil) // S target 2
	s := &c.shards[0]
	for i := range uint64(20) {
		touch(t, c, 1, i)
		touch(t, c, 1, i) // freq 1: all promoted to M on eviction
	}
	touch(t, c, 2, 0) // evicting: S holds 20 >= 2; promotions drain S...
	if s.main.n+s.small.n != 20 || s.small.n > 2 {
		t.Fatalf("S %d M %d", s.small.n, s.main.n)
	}
	// Block 1,0 (oldest of M, freq 0 after promotion) was the victim.
	if present(c, 1, 0) {
		t.Fatal("oldest main block with freq 0 not evicted")
	}
	if !present(c, 2, 0) {
		t.Fatal("new block missing")
	}
}

func TestPinnedNeverEvicted(t *testing.T) {
	st := new(stats.Counters)
	c := newCache(8*testBS, testBS, 1, nil, st)
	a := c.Acquire(5, 0, true)
	if _, err := a.Fill(0, testBS, fillFrom(5, 0)); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(100) {
		touch(t, c, 6, i)
	}
	if !present(c, 5, 0) {
		t.Fatal("pinned block evicted")
	}
	checkPattern(t, a, 5, 0)
	if !a.Covers(0, testBS) {
		t.Fatal("pinned block lost validity")
	}
	a.Release()
	if got := st.CacheEvictions.Load(); got != 100-7 {
		t.Fatalf("evictions = %d, want %d", got, 100-7)
	}
}

func TestAllPinned(t *testing.T) {
	st := new(stats.Counters)
	alloc := newCountingAlloc(testBS, -1)
	c := newCache(8*testBS, testBS, 1, alloc, st)
	s := &c.shards[0]
	// Blocks 0..3 hit, then one insert promotes them to M and evicts 4.
	for i := range uint64(8) {
		touch(t, c, 1, i)
	}
	for i := range uint64(4) {
		touch(t, c, 1, i)
	}
	touch(t, c, 1, 8)
	if s.main.n != 4 || s.small.n != 4 || present(c, 1, 4) || st.CacheEvictions.Load() != 1 {
		t.Fatalf("setup: S %d M %d evictions %d", s.small.n, s.main.n, st.CacheEvictions.Load())
	}
	// Pin everything in both queues.
	pins := map[uint64]*Block{}
	for _, i := range []uint64{0, 1, 2, 3, 5, 6, 7, 8} {
		pins[i] = c.Acquire(1, i, false)
	}
	if b := c.Acquire(2, 0, true); b != nil {
		t.Fatal("Acquire(create) with everything pinned returned a block")
	}
	if c.Resident() != 8*testBS || c.Len() != 8 || st.CacheEvictions.Load() != 1 || alloc.gets.Load() != 8 {
		t.Fatalf("resident %d len %d evictions %d gets %d", c.Resident(), c.Len(), st.CacheEvictions.Load(), alloc.gets.Load())
	}
	pins[6].Release()
	delete(pins, 6)
	b := c.Acquire(2, 0, true)
	if b == nil {
		t.Fatal("Acquire(create) failed with one block unpinned")
	}
	if present(c, 1, 6) {
		t.Fatal("the only unpinned block was not the victim")
	}
	b.Release()
	if c.Resident() != 8*testBS || alloc.gets.Load() != 8 || alloc.puts.Load() != 0 || st.CacheEvictions.Load() != 2 {
		t.Fatalf("eviction should reuse the buffer: resident %d gets %d puts %d", c.Resident(), alloc.gets.Load(), alloc.puts.Load())
	}
	for _, p := range pins {
		p.Release()
	}
}

func TestDropPinned(t *testing.T) {
	for _, mode := range []string{"file", "all", "close"} {
		alloc := newCountingAlloc(testBS, -1)
		st := new(stats.Counters)
		c := newCache(2*testBS, testBS, 1, alloc, st)
		a := c.Acquire(1, 0, true)
		if _, err := a.Fill(0, 3*pageSize, fillFrom(1, 0)); err != nil {
			t.Fatal(err)
		}
		touch(t, c, 2, 0)
		switch mode {
		case "file":
			c.DropFile(1)
		case "all":
			c.DropAll()
		case "close":
			c.Close()
		}
		if present(c, 1, 0) || c.Acquire(1, 0, false) != nil {
			t.Fatalf("%s: dropped block still findable", mode)
		}
		wantLen := 0
		if mode == "file" {
			wantLen = 1
		}
		if c.Len() != wantLen {
			t.Fatalf("%s: len %d, want %d", mode, c.Len(), wantLen)
		}
		// The pinned block still counts and its buffer is intact.
		if c.Resident() != uint64(wantLen+1)*testBS || alloc.puts.Load() != int64(1-wantLen) {
			t.Fatalf("%s: resident %d puts %d", mode, c.Resident(), alloc.puts.Load())
		}
		checkPattern(t, a, 1, 0)
		if !a.Covers(0, 3*pageSize) {
			t.Fatalf("%s: dropped pinned block lost validity", mode)
		}
		if mode != "close" {
			// Budget: shard capacity 2, one slot held by the dropped block.
			b := c.Acquire(3, 0, true)
			if b == nil {
				t.Fatalf("%s: insert failed with a free slot", mode)
			}
			// Both slots are now held by pinned blocks (one of them dropped).
			if c2 := c.Acquire(3, 1, true); c2 != nil {
				t.Fatalf("%s: budget exceeded: third block inserted", mode)
			}
			if c.Resident() > c.Budget() {
				t.Fatalf("%s: resident %d > budget", mode, c.Resident())
			}
			b.Release()
		} else if c.Acquire(3, 0, true) != nil {
			t.Fatal("Acquire after Close returned a block")
		}
		putsBefore := alloc.puts.Load()
		a.Release()
		if alloc.puts.Load() != putsBefore+1 {
			t.Fatalf("%s: Release of dropped block did not return its memory", mode)
		}
		c.DropAll()
		if c.Resident() != 0 || alloc.outstanding() != 0 || st.CacheEvictions.Load() > 1 {
			t.Fatalf("%s: resident %d outstanding %d evictions %d", mode, c.Resident(), alloc.outstanding(), st.CacheEvictions.Load())
		}
	}
}

func TestDropFileKeepsOthers(t *testing.T) {
	st := new(stats.Counters)
	c := New(64*testBS, testBS, nil, st)
	for i := range uint64(20) {
		touch(t, c, 1, i)
		touch(t, c, 2, i)
	}
	c.DropFile(1)
	for i := range uint64(20) {
		if present(c, 1, i) || !present(c, 2, i) {
			t.Fatalf("DropFile(1) block %d: file1 present %v file2 present %v", i, present(c, 1, i), present(c, 2, i))
		}
	}
	if c.Len() != 20 || c.Resident() != 20*testBS || st.CacheEvictions.Load() != 0 {
		t.Fatalf("len %d resident %d evictions %d", c.Len(), c.Resident(), st.CacheEvictions.Load())
	}
}

func TestAllocatorNil(t *testing.T) {
	st := new(stats.Counters)
	alloc := newCountingAlloc(testBS, 0)
	c := newCache(8*testBS, testBS, 1, alloc, st)
	if b := c.Acquire(1, 0, true); b != nil {
		t.Fatal("Acquire(create) with an exhausted allocator returned a block")
	}
	if c.Resident() != 0 || c.Len() != 0 || alloc.nils.Load() != 1 {
		t.Fatalf("resident %d len %d nils %d", c.Resident(), c.Len(), alloc.nils.Load())
	}

	// Allocator with room for 2 of 8 blocks: the third insert reuses an
	// evicted buffer; with both pinned it fails and nothing changes.
	alloc = newCountingAlloc(testBS, 2)
	c = newCache(8*testBS, testBS, 1, alloc, st)
	a, b := c.Acquire(1, 0, true), c.Acquire(1, 1, true)
	if a == nil || b == nil {
		t.Fatal("insert failed")
	}
	if x := c.Acquire(1, 2, true); x != nil {
		t.Fatal("Acquire(create) succeeded with allocator empty and all pinned")
	}
	if c.Resident() != 2*testBS || c.Len() != 2 {
		t.Fatalf("resident %d len %d", c.Resident(), c.Len())
	}
	a.Release()
	x := c.Acquire(1, 2, true)
	if x == nil {
		t.Fatal("no fallback eviction when the allocator is empty")
	}
	if c.Resident() != 2*testBS || c.Len() != 2 || present(c, 1, 0) || alloc.gets.Load() != 2 {
		t.Fatalf("resident %d len %d gets %d", c.Resident(), c.Len(), alloc.gets.Load())
	}
	if x.Covers(0, 1) {
		t.Fatal("reused buffer came with valid pages")
	}
	x.Release()
	b.Release()
}

func TestWrongSizedAllocatorPanics(t *testing.T) {
	c := New(8*testBS, testBS, HeapAllocator{Size: testBS / 2}, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a wrongly sized buffer")
		}
	}()
	c.Acquire(1, 0, true)
}

func TestStatsAndFrequency(t *testing.T) {
	st := new(stats.Counters)
	c := newCache(8*testBS, testBS, 1, nil, st)
	if c.Acquire(1, 0, false) != nil {
		t.Fatal("Acquire(create=false) of a missing block")
	}
	touch(t, c, 1, 0)
	for range 5 {
		touch(t, c, 1, 0)
	}
	p := c.Peek(1, 0)
	p.Release()
	if h, m := st.CacheHits.Load(), st.CacheMisses.Load(); h != 5 || m != 2 {
		t.Fatalf("hits %d misses %d, want 5 2", h, m)
	}
	if f := c.shards[0].m[key{1, 0}].freq.Load(); f != maxFreq {
		t.Fatalf("freq %d, want %d (saturated)", f, maxFreq)
	}
	touch(t, c, 1, 1)
	c.Peek(1, 1).Release()
	if f := c.shards[0].m[key{1, 1}].freq.Load(); f != 0 {
		t.Fatalf("Peek bumped freq to %d", f)
	}
	if c.Peek(1, 9) != nil {
		t.Fatal("Peek of a missing block")
	}
}

func TestDoubleReleasePanics(t *testing.T) {
	for _, dropped := range []bool{false, true} {
		c := newCache(8*testBS, testBS, 1, nil, nil)
		b := c.Acquire(1, 0, true)
		if dropped {
			c.DropAll()
		}
		b.Release()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("dropped=%v: second Release did not panic", dropped)
				}
			}()
			b.Release()
		}()
	}
}

func TestCloseIdempotent(t *testing.T) {
	c := New(8*testBS, testBS, nil, nil)
	touch(t, c, 1, 0)
	c.Close()
	c.Close()
	if c.Acquire(1, 0, true) != nil || c.Peek(1, 0) != nil || c.Len() != 0 || c.Resident() != 0 {
		t.Fatal("cache usable after Close")
	}
}

// ---- Block.Fill / Covers ----

type call struct{ off, n int }

func recordFill(calls *[]call, fail map[int]error) func(p []byte, off int) error {
	return func(p []byte, off int) error {
		*calls = append(*calls, call{off, len(p)})
		if cap(p) != len(p) {
			panic("Fill passed a slice with spare capacity")
		}
		for j := range p {
			p[j] = byte(off + j)
		}
		return fail[off]
	}
}

func newTestBlock(t *testing.T, bs uint64) (*Cache, *Block) {
	t.Helper()
	c := newCache(bs, bs, 1, nil, nil)
	b := c.Acquire(1, 0, true)
	if b == nil {
		t.Fatal("Acquire failed")
	}
	t.Cleanup(b.Release)
	return c, b
}

func TestFillRuns(t *testing.T) {
	_, b := newTestBlock(t, 64<<10) // 16 pages
	var calls []call
	fn := recordFill(&calls, nil)

	if n, err := b.Fill(0, 2*pageSize, fn); n != 8192 || err != nil {
		t.Fatalf("Fill = %d, %v", n, err)
	}
	calls = nil
	n, err := b.Fill(0, 5*pageSize, fn)
	if n != 12288 || err != nil || len(calls) != 1 || calls[0] != (call{8192, 12288}) {
		t.Fatalf("Fill = %d, %v, calls %v; want one call [8192, 20480)", n, err, calls)
	}
	// Already valid: fn not called.
	calls = nil
	if n, err := b.Fill(1, 5*pageSize-1, fn); n != 0 || err != nil || len(calls) != 0 {
		t.Fatalf("Fill of valid range = %d, %v, calls %v", n, err, calls)
	}
	// Empty range.
	if n, err := b.Fill(7*pageSize+5, 7*pageSize+5, fn); n != 0 || err != nil || len(calls) != 0 {
		t.Fatalf("empty Fill = %d, %v, calls %v", n, err, calls)
	}
	// Gaps: pages 0..4 valid, make 6 and 8 valid, then fill 4..10 partially
	// covering pages 4 and 9.
	b.Fill(6*pageSize+100, 6*pageSize+101, fn)
	b.Fill(8*pageSize, 9*pageSize, fn)
	calls = nil
	n, err = b.Fill(4*pageSize+1, 9*pageSize+1, fn)
	want := []call{{5 * pageSize, pageSize}, {7 * pageSize, pageSize}, {9 * pageSize, pageSize}}
	if n != 3*pageSize || err != nil || !equalCalls(calls, want) {
		t.Fatalf("Fill = %d, %v, calls %v; want %v", n, err, calls, want)
	}
	// The rest up to the block end is one run clipped to the block size.
	calls = nil
	n, err = b.Fill(0, 64<<10, fn)
	if n != 6*pageSize || err != nil || !equalCalls(calls, []call{{10 * pageSize, 6 * pageSize}}) {
		t.Fatalf("Fill = %d, %v, calls %v", n, err, calls)
	}
	d := b.Data()
	for j := range d {
		if d[j] != byte(j) {
			t.Fatalf("byte %d = %d", j, d[j])
		}
	}
}

func equalCalls(a, b []call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFillPartialPages(t *testing.T) {
	_, b := newTestBlock(t, 64<<10)
	var calls []call
	n, err := b.Fill(100, 4097, recordFill(&calls, nil))
	if n != 8192 || err != nil || !equalCalls(calls, []call{{0, 8192}}) {
		t.Fatalf("Fill(100, 4097) = %d, %v, calls %v; want one call [0, 8192)", n, err, calls)
	}
}

func TestCoversEdges(t *testing.T) {
	_, b := newTestBlock(t, 64<<10)
	if !b.Covers(0, 0) || !b.Covers(5, 5) || !b.Covers(64<<10, 64<<10) {
		t.Fatal("empty range not covered")
	}
	if b.Covers(0, 1) || b.Covers(64<<10-1, 64<<10) {
		t.Fatal("empty block covers bytes")
	}
	var calls []call
	b.Fill(0, 2*pageSize, recordFill(&calls, nil)) // pages 0, 1
	tests := []struct {
		lo, hi int
		want   bool
	}{
		{0, 8192, true},
		{0, 8193, false},
		{1, 8191, true},
		{8191, 8192, true},
		{8192, 8192, true},
		{8192, 8193, false},
		{4095, 4097, true},
		{4096, 12288, false},
		{12288, 16384, false},
	}
	for _, tt := range tests {
		if got := b.Covers(tt.lo, tt.hi); got != tt.want {
			t.Errorf("Covers(%d, %d) = %v, want %v", tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestCoversMultiWord(t *testing.T) {
	const bs = 1 << 20 // 256 pages, 4 bitmap words
	_, b := newTestBlock(t, bs)
	var calls []call
	fn := recordFill(&calls, nil)
	b.Fill(60*pageSize, 130*pageSize, fn) // crosses words 0|1|2
	if !equalCalls(calls, []call{{60 * pageSize, 70 * pageSize}}) {
		t.Fatalf("calls %v", calls)
	}
	if !b.Covers(60*pageSize, 130*pageSize) || b.Covers(59*pageSize, 130*pageSize) || b.Covers(60*pageSize, 130*pageSize+1) {
		t.Fatal("Covers wrong around word boundaries")
	}
	b.Fill(192*pageSize, 256*pageSize, fn) // whole word 3
	calls = nil
	n, _ := b.Fill(0, bs, fn)
	want := []call{{0, 60 * pageSize}, {130 * pageSize, 62 * pageSize}}
	if n != 122*pageSize || !equalCalls(calls, want) {
		t.Fatalf("Fill = %d calls %v, want %v", n, calls, want)
	}
	if !b.Covers(0, bs) {
		t.Fatal("full block not covered")
	}
}

func TestFillError(t *testing.T) {
	_, b := newTestBlock(t, 64<<10)
	var calls []call
	b.Fill(pageSize, 2*pageSize, recordFill(&calls, nil))   // page 1
	b.Fill(3*pageSize, 4*pageSize, recordFill(&calls, nil)) // page 3
	errBoom := errors.New("boom")
	calls = nil
	n, err := b.Fill(0, 6*pageSize, recordFill(&calls, map[int]error{2 * pageSize: errBoom}))
	if !errors.Is(err, errBoom) || n != 2*pageSize {
		t.Fatalf("Fill = %d, %v; want %d, boom", n, err, 2*pageSize)
	}
	if !equalCalls(calls, []call{{0, pageSize}, {2 * pageSize, pageSize}}) {
		t.Fatalf("calls %v: Fill did not stop at the error", calls)
	}
	if !b.Covers(0, 2*pageSize) || b.Covers(2*pageSize, 2*pageSize+1) || b.Covers(4*pageSize, 4*pageSize+1) {
		t.Fatal("validity wrong after error")
	}
	// A retry fills the failed run and the rest.
	calls = nil
	n, err = b.Fill(0, 6*pageSize, recordFill(&calls, nil))
	if n != 3*pageSize || err != nil || !equalCalls(calls, []call{{2 * pageSize, pageSize}, {4 * pageSize, 2 * pageSize}}) {
		t.Fatalf("retry = %d, %v, calls %v", n, err, calls)
	}
}

func TestFillRangePanics(t *testing.T) {
	_, b := newTestBlock(t, 64<<10)
	for _, r := range [][2]int{{-1, 0}, {5, 4}, {0, 64<<10 + 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Covers(%d, %d) did not panic", r[0], r[1])
				}
			}()
			b.Covers(r[0], r[1])
		}()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Fill(%d, %d) did not panic", r[0], r[1])
				}
			}()
			b.Fill(r[0], r[1], func([]byte, int) error { return nil })
		}()
	}
}

func TestConcurrentFill(t *testing.T) {
	const bs = 256 << 10 // 64 pages
	_, b := newTestBlock(t, bs)
	var perPage [bs / pageSize]atomic.Int32
	fn := func(p []byte, off int) error {
		for j := range p {
			p[j] = pat(1, 0, off+j)
		}
		for q := off / pageSize; q < (off+len(p))/pageSize; q++ {
			perPage[q].Add(1)
		}
		return nil
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20 {
				lo := r.IntN(bs)
				hi := lo + r.IntN(bs-lo+1)
				if _, err := b.Fill(lo, hi, fn); err != nil || !b.Covers(lo, hi) {
					t.Error("Fill/Covers failed")
				}
			}
			b.Fill(0, bs, fn)
		}()
		// Readers copy out pages as soon as they are valid.
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, pageSize)
			d := b.Data()
			for range 200 {
				for p := 0; p < bs; p += pageSize {
					if b.Covers(p, p+pageSize) {
						copy(buf, d[p:p+pageSize])
						if buf[0] != pat(1, 0, p) || buf[pageSize-1] != pat(1, 0, p+pageSize-1) {
							t.Error("reader saw unfilled bytes in a valid page")
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	for q := range perPage {
		if n := perPage[q].Load(); n != 1 {
			t.Fatalf("page %d filled %d times, want 1", q, n)
		}
	}
	checkPattern(t, b, 1, 0)
}
