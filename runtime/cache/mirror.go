package cache

import "unsafe"

// Mirror is told of every change of the hint index, and of the validity of
// the blocks it names, so that an index outside Go (runtime/hitidx, read by
// capi/hit.c) describes the same blocks: Claim when a block becomes the hint
// of its slot, Valid when it gains valid pages. addr is the block buffer's
// address; valid is its page
// validity word (bit p: page p valid). The cache calls Clear before a block's
// memory can be reused, and Used when eviction looks at a block, to learn
// whether the mirror's reader hit it (its S3-FIFO frequency is bumped then).
// Methods must be safe for concurrent use and must not call the cache.
type Mirror interface {
	Claim(file, index uint64, addr uintptr, valid uint64)
	Valid(file, index uint64, addr uintptr, valid uint64)
	Clear(file, index uint64, addr uintptr)
	Used(file, index uint64, addr uintptr) bool
}

// MirrorMaxBlock is the largest block size a Mirror can describe, in bytes:
// its validity fits one 64-bit word.
const MirrorMaxBlock = 64 * pageSize

// SetMirror installs m. Call it right after New, before the cache is used;
// it returns false (and installs nothing) when the block size exceeds
// MirrorMaxBlock. The block memory must not be Go heap memory (the mirror's
// reader copies from it outside Go): use an off-heap Allocator.
func (c *Cache) SetMirror(m Mirror) bool {
	if c.blockSize > MirrorMaxBlock {
		return false
	}
	c.mirror = m
	return true
}

// HintSlots is the number of hint slots (a power of two, about twice the
// blocks the budget holds), to size a Mirror. Safe for concurrent use.
func (c *Cache) HintSlots() int { return len(c.hint) }

// foldUse bumps b's frequency when the mirror's reader served a hit of it
// since eviction last looked. s.mu of b's shard is held.
func (c *Cache) foldUse(b *Block) {
	if c.mirror != nil && c.mirror.Used(b.k.file, b.k.index, b.addr()) {
		b.bump()
	}
}

// addr is the address of b's buffer (0 once its memory was given back).
func (b *Block) addr() uintptr {
	if len(b.data) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(b.data)))
}

// mirrorValid tells the mirror that b has more valid pages.
func (b *Block) mirrorValid() {
	if c := b.sh.c; c.mirror != nil {
		c.mirror.Valid(b.k.file, b.k.index, b.addr(), b.valid0[0].Load())
	}
}
