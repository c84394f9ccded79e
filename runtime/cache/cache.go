package cache

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/memtier/memtier/runtime/stats"
)

// maxShards caps the number of shards; shardDivisor is the minimum number of
// blocks per shard before the budget is split further.
const (
	maxShards    = 16
	shardDivisor = 8
)

// Cache is a DRAM block cache of file bytes with a hard byte budget, split into
// shards that each run S3-FIFO eviction (see the package comment). All methods
// are safe for concurrent use. Create one with New; the zero value is not
// usable.
type Cache struct {
	budget    uint64 // bytes, as given to New
	blockSize uint64 // bytes, power of two >= 4096
	alloc     Allocator
	st        *stats.Counters
	shards    []shard
	mask      uint64 // len(shards) - 1
	resident  atomic.Uint64
	closed    atomic.Bool

	// hint is a direct-mapped index of linked blocks, read without locks: a
	// hit on the hot path is one atomic load, a key compare and a pin CAS,
	// where the shard map costs its mutex, a hash probe and their cache
	// misses. A slot holds the block last inserted or found there; lookups
	// that miss it (collision, empty) take the shard path. Entries are
	// cleared when their block leaves the shard; a stale one is harmless,
	// because tryPin refuses a dropped block.
	hint     []atomic.Pointer[Block]
	hintMask uint64

	// mirror, when set, copies every hint slot change and the validity of
	// hinted blocks into an index that C reads (SetMirror); nil otherwise.
	mirror Mirror
}

// shard is one lock domain: a map of its blocks, the S3-FIFO queues and the
// count of allocated blocks (linked ones plus dropped ones still pinned).
type shard struct {
	mu          sync.Mutex
	c           *Cache
	m           map[key]*Block // guarded by mu
	small, main fifo           // guarded by mu
	ghost       ghost          // guarded by mu
	smallTarget int            // S target length in blocks, >= 1
	capBlocks   int64          // block capacity of this shard
	// blocks counts allocated blocks. It only grows under mu (after checking
	// capBlocks) and shrinks anywhere (a Release freeing a dropped block), so
	// a check under mu stays true until the increment.
	blocks atomic.Int64
	_      [64]byte // keep neighbouring shards' mutexes off one cache line
}

// New returns a cache holding at most budgetBytes bytes in blocks of blockSize
// bytes. blockSize must be a power of two >= 4096 (New panics otherwise; the
// caller validates user input). The number of shards is min(16, max(1,
// budget/blockSize/8)) rounded down to a power of two; each shard gets
// budget/shards bytes in whole blocks, so a budget below one block caches
// nothing. Block memory comes from alloc (nil means HeapAllocator{blockSize}),
// whose buffers must have len == blockSize. st receives CacheHits, CacheMisses
// and CacheEvictions; nil means private counters. The cache keeps alloc and st.
func New(budgetBytes, blockSize uint64, alloc Allocator, st *stats.Counters) *Cache {
	return newCache(budgetBytes, blockSize, shardCount(budgetBytes, blockSize), alloc, st)
}

// shardCount returns min(16, max(1, budget/blockSize/8)) rounded down to a
// power of two.
func shardCount(budget, blockSize uint64) int {
	n := budget / blockSize / shardDivisor
	n = max(1, min(maxShards, n))
	return 1 << (bits.Len64(n) - 1)
}

// newCache is New with an explicit shard count (a power of two); tests use it to
// get a single shard.
func newCache(budget, blockSize uint64, nshards int, alloc Allocator, st *stats.Counters) *Cache {
	if blockSize < pageSize || blockSize&(blockSize-1) != 0 || blockSize > 1<<40 {
		panic(fmt.Sprintf("cache: block size %d is not a power of two >= %d", blockSize, pageSize))
	}
	if nshards < 1 || nshards&(nshards-1) != 0 {
		panic(fmt.Sprintf("cache: shard count %d is not a power of two", nshards))
	}
	if alloc == nil {
		alloc = HeapAllocator{Size: int(blockSize)}
	}
	if st == nil {
		st = new(stats.Counters)
	}
	c := &Cache{
		budget:    budget,
		blockSize: blockSize,
		alloc:     alloc,
		st:        st,
		shards:    make([]shard, nshards),
		mask:      uint64(nshards - 1),
	}
	perShard := budget / uint64(nshards) / blockSize
	slots := uint64(1) << bits.Len64(max(1, 2*perShard*uint64(nshards))-1)
	c.hint, c.hintMask = make([]atomic.Pointer[Block], slots), slots-1
	for i := range c.shards {
		s := &c.shards[i]
		s.c = c
		s.m = make(map[key]*Block)
		s.capBlocks = int64(perShard)
		s.smallTarget = max(1, int(perShard/10))
		s.ghost = newGhost(int(perShard))
	}
	return c
}

// BlockSize returns the block size in bytes. Safe for concurrent use.
func (c *Cache) BlockSize() uint64 { return c.blockSize }

// Budget returns the byte budget given to New: Resident never exceeds it. Safe
// for concurrent use.
func (c *Cache) Budget() uint64 { return c.budget }

// Resident returns the bytes held by blocks now: allocated blocks times
// BlockSize, counting dropped blocks whose memory is not yet returned because
// they are still pinned. One atomic load; safe for concurrent use.
func (c *Cache) Resident() uint64 { return c.resident.Load() }

// Len returns the number of blocks that can be found (dropped-but-pinned blocks
// are not counted). It locks every shard in turn, so it is meant for tests and
// diagnostics. Safe for concurrent use.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// shardFor spreads a file's consecutive blocks round-robin over the shards,
// starting at a shard chosen by hashing fileID.
func (c *Cache) shardFor(fileID, index uint64) *shard {
	return &c.shards[(mix64(fileID)+index)&c.mask]
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Acquire returns block (fileID, index) pinned, or nil. index is the file
// offset divided by BlockSize. When the block is present it counts a CacheHit
// and bumps the block's access frequency (saturating at 3). Otherwise it counts
// a CacheMiss and, if create is true, inserts a new empty block (no valid
// pages), evicting unpinned blocks as S3-FIFO says to stay within the shard's
// budget. It returns nil when create is false, when no space can be made (every
// block of the shard pinned, or the allocator out of memory with nothing
// evictable), or after Close. The caller must Release a non-nil result exactly
// once. Safe for concurrent use.
func (c *Cache) Acquire(fileID, index uint64, create bool) *Block {
	if b := c.pinHinted(fileID, index, true); b != nil {
		c.st.CacheHits.Add(1)
		return b
	}
	s := c.shardFor(fileID, index)
	k := key{fileID, index}
	s.mu.Lock()
	if c.closed.Load() {
		s.mu.Unlock()
		return nil
	}
	if b := s.m[k]; b != nil {
		b.pins.Add(1)
		b.bump()
		c.setHint(b)
		s.mu.Unlock()
		c.st.CacheHits.Add(1)
		return b
	}
	var b *Block
	if create {
		b = s.insertLocked(k)
	}
	s.mu.Unlock()
	c.st.CacheMisses.Add(1)
	return b
}

// Peek is Acquire(fileID, index, false) without touching stats or the access
// frequency; the engine uses it to plan reads. A non-nil result is pinned and

// AcquireQuiet is Acquire(create=true) without stats: the engine counts a
// hit or a miss itself once it knows whether the block covered the request
// or had to be filled, so a block created by a non-blocking attempt that
// gave up is not counted twice. Returns nil when no room can be made or the
// cache is closed. Safe for concurrent use.
func (c *Cache) AcquireQuiet(fileID, index uint64) *Block {
	if b := c.pinHinted(fileID, index, true); b != nil {
		return b
	}
	s := c.shardFor(fileID, index)
	k := key{fileID, index}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed.Load() {
		return nil
	}
	if b := s.m[k]; b != nil {
		b.pins.Add(1)
		b.bump()
		c.setHint(b)
		return b
	}
	return s.insertLocked(k)
}

// Touch is Acquire(create=false) without stats: it pins the block and bumps
// its access frequency (so S3-FIFO sees the use) but counts neither a hit nor
// a miss. The engine's inline hit path uses it and counts the hits itself, so
// a block that turns out to need filling is counted once, by the Acquire that
// fills it. Returns nil if absent or closed. Safe for concurrent use.
func (c *Cache) Touch(fileID, index uint64) *Block { return c.pin(fileID, index, true) }

// pin pins the block (fileID, index) if present, bumping its frequency when
// bump is set; no stats.
func (c *Cache) pin(fileID, index uint64, bump bool) *Block {
	if b := c.pinHinted(fileID, index, bump); b != nil {
		return b
	}
	s := c.shardFor(fileID, index)
	s.mu.Lock()
	b := s.m[key{fileID, index}]
	if b != nil && !c.closed.Load() {
		b.pins.Add(1)
		if bump {
			b.bump()
		}
		c.setHint(b)
	} else {
		b = nil
	}
	s.mu.Unlock()
	return b
}

// slotIndex is the number of the hint slot of a key.
func (c *Cache) slotIndex(fileID, index uint64) uint64 {
	return mix64(fileID^index*0x9e3779b97f4a7c15) & c.hintMask
}

// slot is the hint slot of a key.
func (c *Cache) slot(fileID, index uint64) *atomic.Pointer[Block] {
	return &c.hint[c.slotIndex(fileID, index)]
}

// setHint makes b the hint of its slot. s.mu of b's shard is held, so b is
// linked.
func (c *Cache) setHint(b *Block) {
	c.slot(b.k.file, b.k.index).Store(b)
	if c.mirror != nil {
		c.mirror.Claim(b.k.file, b.k.index, b.addr(), b.valid0[0].Load())
	}
}

// clearHint empties b's slot if it still names b. s.mu of b's shard is held,
// and b's memory is not reused yet: the mirror forgets b first.
func (c *Cache) clearHint(b *Block) {
	c.slot(b.k.file, b.k.index).CompareAndSwap(b, nil)
	if c.mirror != nil {
		c.mirror.Clear(b.k.file, b.k.index, b.addr())
	}
}

// pinHinted pins block (fileID, index) through the hint index without any
// lock, or returns nil (not hinted, or dropped meanwhile): the caller then
// asks the shard.
func (c *Cache) pinHinted(fileID, index uint64, bump bool) *Block {
	b := c.slot(fileID, index).Load()
	if b == nil || b.k.file != fileID || b.k.index != index || !b.tryPin() {
		return nil
	}
	if c.closed.Load() {
		b.Release()
		return nil
	}
	if bump {
		b.bump()
	}
	return b
}

// must be Released exactly once. Safe for concurrent use.
func (c *Cache) Peek(fileID, index uint64) *Block { return c.pin(fileID, index, false) }

// insertLocked makes room for, links and returns a new pinned block k, or nil.
// s.mu must be held.
func (s *shard) insertLocked(k key) *Block {
	c := s.c
	var data []byte
	if s.blocks.Load() < s.capBlocks {
		data = c.alloc.Get()
		if data != nil {
			if uint64(len(data)) != c.blockSize {
				panic(fmt.Sprintf("cache: allocator returned %d bytes, want %d", len(data), c.blockSize))
			}
			s.blocks.Add(1)
			c.resident.Add(c.blockSize)
		}
	}
	if data == nil {
		// Shard full, or the allocator is out of memory: reuse the buffer of
		// an evicted block (the allocation count does not change).
		data = s.evictLocked()
		if data == nil {
			return nil
		}
	}
	b := newBlock(s, k, data)
	if s.ghost.take(k) {
		b.q = qMain
		s.main.pushBack(b)
	} else {
		b.q = qSmall
		s.small.pushBack(b)
	}
	s.m[k] = b
	c.setHint(b)
	return b
}

// evictLocked frees one unpinned block by S3-FIFO and returns its buffer for
// reuse (still counted as allocated), or nil when nothing could be freed within
// a bounded number of steps. s.mu must be held.
func (s *shard) evictLocked() []byte {
	limit := 4*int(s.capBlocks) + 8
	// Consecutive pinned blocks met at the head of S / M: once a queue has
	// been rotated through without finding an unpinned block, try the other.
	sPinned, mPinned := 0, 0
	for range limit {
		sOK := s.small.n > 0 && sPinned < s.small.n
		mOK := s.main.n > 0 && mPinned < s.main.n
		switch {
		case sOK && (s.small.n >= s.smallTarget || !mOK):
			b := s.small.popFront()
			if b.pins.Load() != 0 {
				s.small.pushBack(b)
				sPinned++
				continue
			}
			s.c.foldUse(b)
			if b.freq.Load() > 0 {
				b.freq.Store(0)
				b.q = qMain
				s.main.pushBack(b)
				sPinned = 0
				continue
			}
			if !b.pins.CompareAndSwap(0, droppedBit) {
				s.small.pushBack(b)
				sPinned++
				continue
			}
			s.ghost.add(b.k)
			return s.unlinkEvicted(b)
		case mOK:
			b := s.main.popFront()
			if b.pins.Load() != 0 {
				s.main.pushBack(b)
				mPinned++
				continue
			}
			mPinned = 0
			s.c.foldUse(b)
			if f := b.freq.Load(); f > 0 {
				b.freq.CompareAndSwap(f, f-1)
				s.main.pushBack(b)
				continue
			}
			if !b.pins.CompareAndSwap(0, droppedBit) {
				s.main.pushBack(b)
				mPinned++
				continue
			}
			return s.unlinkEvicted(b)
		default:
			return nil // empty, or everything pinned
		}
	}
	return nil
}

// unlinkEvicted finishes evicting b, already popped from its queue and marked
// dropped with no pins, and returns its buffer. s.mu must be held.
func (s *shard) unlinkEvicted(b *Block) []byte {
	delete(s.m, b.k)
	s.c.clearHint(b)
	b.q = qNone
	data := b.data
	b.data = nil
	s.c.st.CacheEvictions.Add(1)
	return data
}

// dropLocked unlinks b and marks it dropped. It returns true when no pin is
// held, in which case the caller must free b (after unlocking); otherwise the
// last Release frees it. s.mu must be held.
func (s *shard) dropLocked(b *Block) bool {
	delete(s.m, b.k)
	s.c.clearHint(b)
	switch b.q {
	case qSmall:
		s.small.remove(b)
	case qMain:
		s.main.remove(b)
	}
	b.q = qNone
	return b.pins.Add(droppedBit) == droppedBit
}

// free returns a dropped, unpinned block's memory to the allocator and then
// lowers Resident and the shard's count, in that order, so that Resident never
// exceeds the budget and a new Get never finds the allocator holding memory
// that the counters already gave back.
func (s *shard) free(b *Block) {
	c := s.c
	data := b.data
	b.data = nil
	c.alloc.Put(data)
	c.resident.Add(-c.blockSize)
	s.blocks.Add(-1)
}

// drop unlinks every block of every shard for which match is true and frees
// those that are not pinned; pinned ones are freed by their last Release.
func (c *Cache) drop(match func(k key) bool, resetGhost bool) {
	var toFree []*Block
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, b := range s.m {
			if match(k) && s.dropLocked(b) {
				toFree = append(toFree, b)
			}
		}
		if resetGhost {
			s.ghost.reset()
		}
		s.mu.Unlock()
		for _, b := range toFree {
			s.free(b)
		}
		toFree = toFree[:0]
	}
}

// DropFile removes every block of fileID (for example because the file changed
// on disk). Pinned blocks are unlinked at once, so they cannot be found any
// more, and their memory is returned to the allocator when the last pin is
// released; until then Resident still counts them. Drops are not counted as
// evictions. Safe for concurrent use; cost is proportional to the number of
// cached blocks.
func (c *Cache) DropFile(fileID uint64) {
	c.drop(func(k key) bool { return k.file == fileID }, false)
}

// DropAll removes every block, as DropFile does for one file, and forgets the
// eviction history (ghost keys). Safe for concurrent use.
func (c *Cache) DropAll() {
	c.drop(func(key) bool { return true }, true)
}

// Close drops everything; later Acquire and Peek return nil. Blocks pinned at
// the time stay usable until released, and their memory then goes back to the
// allocator. Calling Close more than once is harmless. Safe for concurrent use.
func (c *Cache) Close() {
	c.closed.Store(true)
	c.DropAll()
}
