package cache

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Page geometry of the validity bitmap: one bit per 4096-byte page.
const (
	pageShift = 12
	pageSize  = 1 << pageShift
)

// PageSize is the unit in which a Block's bytes become valid (Fill hands out
// runs of whole pages): 4096 bytes.
const PageSize = pageSize

// droppedBit is set in Block.pins once the block is unlinked from its shard
// (dropped or evicted). The low bits count pins. Whoever moves pins to exactly
// droppedBit (the dropper when no pin is held, else the last Release) frees the
// block's memory, so it is freed exactly once.
const droppedBit = int64(1) << 62

// Block is one cached block of a file: BlockSize bytes at file offset
// index*BlockSize, with per-page validity. A *Block is obtained pinned from
// Cache.Acquire or Cache.Peek and must be released exactly once with Release;
// between the two its buffer stays valid and is neither evicted nor reused,
// even if the block is dropped meanwhile. All methods are safe for concurrent
// use.
type Block struct {
	// The fields a hit reads come first, so a hit touches as few cache
	// lines of the Block as possible: the key to confirm the lookup, the pin
	// count, the validity words and the buffer.
	k     key
	pins  atomic.Int64    // pin count | droppedBit
	valid []atomic.Uint64 // bit p set: page p holds file bytes
	data  []byte
	// valid0 backs valid for blocks of up to 64 pages (256 KiB), so the
	// validity check of a hit reads the Block itself, not a separate
	// allocation (one dependent cache miss less on the hot path).
	valid0 [1]atomic.Uint64
	sh     *shard

	fillMu sync.Mutex // serialises Fill

	// S3-FIFO access frequency, 0..maxFreq: bumped by lock-free hits
	// (lossy under races, which only blurs the eviction hint), reset and
	// decremented by eviction under sh.mu.
	freq atomic.Uint32

	// Guarded by sh.mu.
	prev, next *Block
	q          uint8 // qNone, qSmall or qMain
}

// bump raises the access frequency by one, saturating at maxFreq.
func (b *Block) bump() {
	if f := b.freq.Load(); f < maxFreq {
		b.freq.CompareAndSwap(f, f+1)
	}
}

// tryPin takes a pin unless the block was dropped or evicted, without any
// lock. A pin taken before the drop keeps the block (and its buffer) alive,
// exactly like one taken under the shard mutex: eviction only claims a block
// whose pin count it moves from 0 to droppedBit.
func (b *Block) tryPin() bool {
	for {
		p := b.pins.Load()
		if p&droppedBit != 0 {
			return false
		}
		if b.pins.CompareAndSwap(p, p+1) {
			return true
		}
	}
}

const maxFreq = 3

func newBlock(sh *shard, k key, data []byte) *Block {
	pages := (len(data) + pageSize - 1) >> pageShift
	b := &Block{data: data, sh: sh, k: k}
	if pages <= 64 {
		b.valid = b.valid0[:]
	} else {
		b.valid = make([]atomic.Uint64, (pages+63)/64)
	}
	b.pins.Store(1)
	return b
}

// Release unpins the block. It must be called exactly once per successful
// Acquire or Peek; after it the caller must not touch the block or its Data.
// It is one atomic add and takes no lock, except when it releases the last pin
// of a dropped block, whose memory it then returns to the Allocator. Releasing
// more often than pinned panics.
func (b *Block) Release() {
	n := b.pins.Add(-1)
	switch {
	case n == droppedBit:
		b.sh.free(b)
	case n < 0 || n == droppedBit-1:
		panic("cache: Block.Release called more times than Acquire/Peek")
	}
}

// Data returns the whole block buffer (len == BlockSize). The slice is owned by
// the cache and valid only while the block is pinned. Only bytes of pages that
// Covers reports valid hold file data; callers write into it only through Fill.
func (b *Block) Data() []byte { return b.data }

// Covers reports whether every 4096-byte page overlapping [lo, hi) (byte
// offsets within the block, 0 <= lo <= hi <= BlockSize) is valid, i.e. its
// bytes may be copied out. lo == hi returns true. It uses atomic loads only and
// is safe to call while another goroutine fills other pages. Offsets out of
// range panic.
func (b *Block) Covers(lo, hi int) bool {
	b.checkRange(lo, hi)
	if lo == hi {
		return true
	}
	p0, p1 := lo>>pageShift, (hi+pageSize-1)>>pageShift
	return b.scan(p0, p1, false) == p1
}

// Fill makes [lo, hi) (byte offsets within the block, 0 <= lo <= hi <=
// BlockSize) valid. Under the block's fill mutex it finds the pages overlapping
// [lo, hi) that are not valid yet, groups them into maximal contiguous runs and,
// for each run in ascending order, calls fn(b.Data()[plo:phi], plo) with plo and
// phi page aligned (phi clipped to BlockSize). fn must fill that slice from the
// file; it may leave bytes past end-of-file unwritten (the engine never copies
// them out) and must not retain the slice (its capacity is clipped to the run).
// When fn returns nil the run's pages are marked valid with atomic stores, so
// concurrent Covers callers see them only after the bytes are written. When fn
// returns an error Fill stops and returns it; that run's pages and later runs
// stay invalid. filled is the number of bytes fn was asked to fill, the failed
// run included. Concurrent Fill calls on one block are serialised, so each
// page is passed to fn at most once over all successful calls. fn must not call
// Fill on the same block. Offsets out of range panic.
func (b *Block) Fill(lo, hi int, fn func(p []byte, blockOff int) error) (filled int, err error) {
	b.checkRange(lo, hi)
	if lo == hi {
		return 0, nil
	}
	p0, p1 := lo>>pageShift, (hi+pageSize-1)>>pageShift
	if b.scan(p0, p1, false) == p1 {
		return 0, nil // fast path: already valid, no mutex
	}
	b.fillMu.Lock()
	defer b.fillMu.Unlock()
	size := len(b.data)
	for p := b.scan(p0, p1, false); p < p1; p = b.scan(p, p1, false) {
		q := b.scan(p, p1, true)
		plo, phi := p<<pageShift, min(q<<pageShift, size)
		filled += phi - plo
		if err := fn(b.data[plo:phi:phi], plo); err != nil {
			return filled, err
		}
		b.setValid(p, q)
		b.mirrorValid()
		p = q
	}
	return filled, nil
}

func (b *Block) checkRange(lo, hi int) {
	if lo < 0 || lo > hi || hi > len(b.data) {
		panic(fmt.Sprintf("cache: block range [%d, %d) outside [0, %d)", lo, hi, len(b.data)))
	}
}

// scan returns the first valid page in [p, end) when wantValid is true, the
// first invalid one when it is false, or end if there is none. Atomic loads.
func (b *Block) scan(p, end int, wantValid bool) int {
	for p < end {
		w := b.valid[p>>6].Load()
		if !wantValid {
			w = ^w
		}
		w >>= uint(p & 63)
		if w != 0 {
			return min(p+bits.TrailingZeros64(w), end)
		}
		p = (p | 63) + 1
	}
	return end
}

// setValid marks pages [p0, p1) valid with atomic ORs.
func (b *Block) setValid(p0, p1 int) {
	for p0 < p1 {
		bit := p0 & 63
		n := min(64-bit, p1-p0)
		mask := ^uint64(0)
		if n < 64 {
			mask = (uint64(1)<<uint(n) - 1) << uint(bit)
		}
		b.valid[p0>>6].Or(mask)
		p0 += n
	}
}
