//go:build cgo

package gpu

import (
	"container/list"
	"fmt"
	"sync"
	"time"
)

// HBMCache keeps file blocks in device memory (the MEMTIER_PREFETCH_TO_HBM
// tier). It owns its memory: blocks of BlockSize bytes allocated with
// cuMemAlloc on one device, never more than Budget / BlockSize of them, kept
// for reuse after eviction rather than freed. Eviction is LRU over blocks
// that no copy is using. A hit is copied device to device
// (cuMemcpyDtoDAsync on a non-blocking stream, then its sync; a request's
// hits share one stream and one sync, LookupAll).
//
// Blocks are keyed by BlockKey; the engine chooses the file identity and
// must call RemoveFile when a file changes. All methods are safe for
// concurrent use.
type HBMCache struct {
	opts      HBMOptions
	ctx       ctxHandle
	maxBlocks int

	mu       sync.Mutex
	closed   bool
	blocks   map[BlockKey]*hbmBlock
	lru      list.List // ready blocks, most recently used at the front
	free     []uintptr // allocated blocks not holding data
	nalloc   int       // blocks allocated (or being allocated)
	resident uint64    // bytes of data in ready blocks
	toFree   []uintptr // blocks to cuMemFree after Close, outside the lock
}

type hbmBlock struct {
	key   BlockKey
	ptr   uintptr
	n     uint64
	refs  int  // copies in progress (the filler counts as one)
	ready bool // filled: visible to Lookup
	dead  bool // removed or evicted while in use: release its memory at refs 0
	elem  *list.Element
}

// NewHBMCache makes an empty cache on opts.Device. It allocates nothing
// until the first insert. Errors: KindUnavailable (no CUDA), KindInvalidArg
// (no such device, Budget below BlockSize).
func NewHBMCache(opts HBMOptions) (*HBMCache, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, err := primaryContext(o.Device)
	if err != nil {
		return nil, err
	}
	return &HBMCache{opts: o, ctx: ctx, maxBlocks: int(o.Budget / o.BlockSize), blocks: map[BlockKey]*hbmBlock{}}, nil
}

// BlockSize is the cache's block size in bytes.
func (c *HBMCache) BlockSize() uint64 { return c.opts.BlockSize }

// Device is the device ordinal that holds the cache.
func (c *HBMCache) Device() int { return c.opts.Device }

// Usage reports the blocks holding data, their bytes, and the device memory
// the cache has allocated (at most Budget rounded down to whole blocks).
func (c *HBMCache) Usage() (blocks int, bytes uint64, allocated uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.resident, uint64(c.nalloc) * c.opts.BlockSize
}

// Fill caches a block of n bytes (1 to BlockSize) under key, calling fill
// with the device address of a free block to write the bytes into (with a
// Stager's ReadToDevice, a GDS read, or a copy). The block becomes visible
// to Lookup only after fill returns nil. It returns false, nil when the key
// is already cached or being filled, or when every block is in use by a
// copy; false and fill's error (the block is dropped) when fill fails; false
// and a KindNoMemory error when no block can be allocated or evicted.
// Evicts the least recently used idle block when the budget is full. fill
// runs without the cache's lock and on the caller's goroutine.
func (c *HBMCache) Fill(key BlockKey, n uint64, fill func(dst uintptr) error) (bool, error) {
	if n == 0 || n > c.opts.BlockSize {
		return false, &Error{Kind: KindInvalidArg, Op: "HBMCache.Fill", Detail: fmt.Sprintf("block of %d bytes (block size %d)", n, c.opts.BlockSize)}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false, &Error{Kind: KindClosed, Op: "HBMCache", Detail: "closed"}
	}
	if _, ok := c.blocks[key]; ok {
		c.mu.Unlock()
		return false, nil
	}
	ptr, err := c.takeBlockLocked() // may drop the lock to allocate
	if err != nil || ptr == 0 {
		c.mu.Unlock()
		return false, err
	}
	if _, ok := c.blocks[key]; ok || c.closed {
		// Another Fill of key, or Close, ran while the lock was dropped.
		closed := c.closed
		c.releaseLocked(&hbmBlock{ptr: ptr})
		toFree := c.takeToFreeLocked()
		c.mu.Unlock()
		_ = c.freeDevice(toFree)
		if closed {
			return false, &Error{Kind: KindClosed, Op: "HBMCache", Detail: "closed"}
		}
		return false, nil
	}
	b := &hbmBlock{key: key, ptr: ptr, n: n, refs: 1}
	c.blocks[key] = b
	c.mu.Unlock()

	err = fill(ptr)

	c.mu.Lock()
	b.refs--
	if err != nil || b.dead || c.closed {
		if !b.dead {
			delete(c.blocks, key)
		}
		c.releaseLocked(b)
		toFree := c.takeToFreeLocked()
		c.mu.Unlock()
		_ = c.freeDevice(toFree)
		return false, err
	}
	b.ready = true
	b.elem = c.lru.PushFront(b)
	c.resident += n
	c.mu.Unlock()
	if st := c.opts.Stats; st != nil {
		st.hbmInserts.Add(1)
		st.hbmInsertBytes.Add(n)
	}
	return true, nil
}

// Insert caches src (host memory, 1 to BlockSize bytes) under key: Fill
// with a host-to-device copy. Counted in H2DBytes.
func (c *HBMCache) Insert(key BlockKey, src []byte) (bool, error) {
	start := time.Now()
	ok, err := c.Fill(key, uint64(len(src)), func(dst uintptr) error {
		return withContext(c.ctx, func() error { return copyHostToDevice(c.opts.Device, dst, src) })
	})
	if st := c.opts.Stats; st != nil && ok {
		st.h2dBytes.Add(uint64(len(src)))
		st.h2dNanos.Add(uint64(time.Since(start)))
	}
	return ok, err
}

// takeBlockLocked finds memory for one block: a free block, a new
// allocation within the budget, or the least recently used idle block.
// (0, nil) when every block is busy.
func (c *HBMCache) takeBlockLocked() (uintptr, error) {
	if n := len(c.free); n > 0 {
		p := c.free[n-1]
		c.free = c.free[:n-1]
		return p, nil
	}
	var allocErr error
	if c.nalloc < c.maxBlocks {
		c.nalloc++
		c.mu.Unlock()
		var p uintptr
		err := withContext(c.ctx, func() error {
			var r cuResult
			if p, r = cuMemAlloc(c.opts.BlockSize); r != cudaSuccess {
				return cudaError(KindNoMemory, "cuMemAlloc", r)
			}
			return nil
		})
		c.mu.Lock()
		if err == nil {
			return p, nil
		}
		c.nalloc--
		allocErr = err
	}
	for e := c.lru.Back(); e != nil; e = e.Prev() {
		b := e.Value.(*hbmBlock)
		if b.refs > 0 {
			continue
		}
		c.unlinkLocked(b)
		if st := c.opts.Stats; st != nil {
			st.hbmEvictions.Add(1)
		}
		p := b.ptr
		b.ptr = 0
		return p, nil
	}
	return 0, allocErr
}

// unlinkLocked takes a ready block out of the map and the LRU list.
func (c *HBMCache) unlinkLocked(b *hbmBlock) {
	delete(c.blocks, b.key)
	if b.elem != nil {
		c.lru.Remove(b.elem)
		b.elem = nil
		c.resident -= b.n
	}
	b.ready = false
}

// releaseLocked returns an unused block's memory to the free list (or, once
// closed, collects it for freeing).
func (c *HBMCache) releaseLocked(b *hbmBlock) {
	if b.ptr == 0 || b.refs > 0 {
		return
	}
	if c.closed {
		c.toFree = append(c.toFree, b.ptr)
	} else {
		c.free = append(c.free, b.ptr)
	}
	b.ptr = 0
}

// Lookup copies n bytes at blockOff of the cached block key to device memory
// at dst (device to device; dst should be on the cache's device, other
// devices go through a peer copy). It returns true when the block was
// cached and held the range, false (a miss, no copy) otherwise. Errors:
// KindCUDA when the copy fails (the result is then false). The block stays
// cached during the copy even if it is evicted or removed meanwhile.
func (c *HBMCache) Lookup(key BlockKey, blockOff uint64, dst uintptr, n uint64) (bool, error) {
	hit, err := c.LookupAll([]HBMCopy{{Key: key, BlockOff: blockOff, Dst: dst, Len: n}})
	return hit[0], err
}

// LookupAll copies each entry of cps whose block is cached and holds the
// range, as Lookup does, but queues all those copies on one stream and waits
// once (a request's HBM hits cost one wait, not one per block; HBMWaits
// counts the waits). hit[i] reports whether cps[i] was cached and copied; a
// miss copies nothing. Errors: KindCUDA when a copy or the wait fails; then
// every hit is false and the destinations hold an unspecified mix of old and
// new bytes, but no copy is still running. The blocks stay cached during the
// copies even if they are evicted or removed meanwhile. The destinations
// must not overlap.
func (c *HBMCache) LookupAll(cps []HBMCopy) ([]bool, error) {
	hit := make([]bool, len(cps))
	held := make([]*hbmBlock, len(cps))
	var copies []dtodCopy
	c.mu.Lock()
	for i, cp := range cps {
		b, ok := c.blocks[cp.Key]
		if !ok || !b.ready || c.closed || cp.BlockOff > b.n || cp.Len > b.n-cp.BlockOff {
			continue
		}
		b.refs++
		c.lru.MoveToFront(b.elem)
		held[i], hit[i] = b, true
		if cp.Len > 0 {
			copies = append(copies, dtodCopy{dst: cp.Dst, src: b.ptr + uintptr(cp.BlockOff), n: cp.Len})
		}
	}
	c.mu.Unlock()

	var err error
	if len(copies) > 0 {
		err = withContext(c.ctx, func() error { return copyDevicesToDevice(c.opts.Device, copies) })
		if st := c.opts.Stats; st != nil {
			st.hbmWaits.Add(1)
		}
	}

	c.mu.Lock()
	for _, b := range held {
		if b == nil {
			continue
		}
		b.refs--
		if b.dead {
			c.releaseLocked(b)
		}
	}
	toFree := c.takeToFreeLocked()
	c.mu.Unlock()
	c.freeDevice(toFree)
	if err != nil {
		return make([]bool, len(cps)), err
	}
	if st := c.opts.Stats; st != nil {
		for i, h := range hit {
			if h {
				st.hbmHits.Add(1)
				st.hbmHitBytes.Add(cps[i].Len)
			} else {
				st.hbmMisses.Add(1)
			}
		}
	}
	return hit, nil
}

// Contains reports whether key is cached and the length of its data.
func (c *HBMCache) Contains(key BlockKey) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.blocks[key]; ok && b.ready {
		return b.n, true
	}
	return 0, false
}

// Remove drops key (a block in use is released when its copy ends; a block
// being filled is discarded when its fill returns). It reports whether key
// was present.
func (c *HBMCache) Remove(key BlockKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blocks[key]
	if ok {
		c.dropLocked(b)
	}
	return ok
}

// RemoveFile drops every block of file (call it when the file changed) and
// returns how many there were.
func (c *HBMCache) RemoveFile(file uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, b := range c.blocks {
		if k.File == file {
			c.dropLocked(b)
			n++
		}
	}
	return n
}

func (c *HBMCache) dropLocked(b *hbmBlock) {
	c.unlinkLocked(b)
	b.dead = true
	c.releaseLocked(b)
}

func (c *HBMCache) takeToFreeLocked() []uintptr {
	p := c.toFree
	c.toFree = nil
	return p
}

// freeDevice frees blocks after Close.
func (c *HBMCache) freeDevice(ptrs []uintptr) error {
	if len(ptrs) == 0 {
		return nil
	}
	return withContext(c.ctx, func() error {
		var first error
		for _, p := range ptrs {
			if r := cuMemFree(p); r != cudaSuccess && first == nil {
				first = cudaError(KindCUDA, "cuMemFree", r)
			}
		}
		return first
	})
}

// Close empties the cache and frees its device memory; blocks still being
// copied are freed when their copy ends. Later Fill/Insert calls fail with
// KindClosed and Lookups miss. A second Close returns nil. Not for
// process-exit paths.
func (c *HBMCache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, b := range c.blocks {
		c.dropLocked(b)
	}
	c.toFree = append(c.toFree, c.free...)
	c.free = nil
	toFree := c.takeToFreeLocked()
	c.mu.Unlock()
	return c.freeDevice(toFree)
}
