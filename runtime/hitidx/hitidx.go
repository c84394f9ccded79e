// Package hitidx is the DRAM cache's hit index for readers outside Go: a
// region of mmap'd memory (never Go heap) that the C entry point
// memtier_read reads without entering Go, to serve a cached range with one
// memcpy (capi/hit.c).
//
// The region holds a header, C-side hit counters, a file table (path ->
// version, descriptor, identity and check times of the files.Table's File)
// and a block table of the cache's hinted blocks (version, block index ->
// address and valid pages). Go is the only writer.
// Every entry carries a sequence counter (a seqlock): a writer makes it odd,
// writes, and makes it even again; a reader copies, then re-reads the
// counter and gives the request back to Go when it moved. The cache clears a
// block's entry before the block's memory can be reused, and the file table
// clears a File's entry before its descriptor can be closed, so a copy that
// raced with either is detected and redone by Go.
//
// The layout (offsets below) is shared with capi/hit.h; capi checks the two
// agree before it registers a region.
package hitidx

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layout, in bytes. Every field is 8-byte aligned; capi/hit.h mirrors it.
const (
	Magic = 0x4d54484954583033 // "MTHITX03"

	HdrMagic      = 0
	HdrFileMask   = 8  // uint64: file slots - 1
	HdrBlockMask  = 16 // uint64: block slots - 1
	HdrBlockShift = 24 // uint64: log2 of the cache block size
	HdrMode       = 32 // uint64: ModeStrict, ModeInterval or ModeOpen
	HdrTrustNs    = 40 // int64: the interval of ModeInterval, ns
	HdrRecheckNs  = 48 // int64: files.Table path recheck, ns (<= 0: stat the path every call)
	HdrMonoOffset = 56 // int64: CLOCK_MONOTONIC - OffsetLow <= the files clock (see New)
	HdrFileOff    = 64 // uint64: offset of the file table
	HdrBlockOff   = 72 // uint64: offset of the block table
	HdrHintOff    = 80 // uint64: offset of the address hints
	HdrHintMask   = 88 // uint64: hint slots - 1
	// C-side hit counters, on a cache line of their own (C adds to them).
	CtrChecked = 128 // hits whose file was checked with fstat (strict)
	CtrTrusted = 136 // hits that trusted the file (open, interval, immutable)
	CtrBytes   = 144 // bytes of both
	// C-side readv calls served whole (mt_hit_readv): their elements are
	// also counted as trusted hits above (one request, one hit each).
	CtrReadvCalls   = 152 // calls
	CtrReadvChecked = 160 // calls whose file was checked with fstat (strict): one revalidation each
	CtrReadvHits    = 168 // elements (readv_inline_hits)
	// Trusted hits whose copy from the hint did not stand (a stale or torn
	// hint, or a writer in between) and were copied again from the entry's
	// address: a measure of how well the hints predict, not in the stats.
	CtrHintMisses = 176
	// Blocks beyond the first of the C-side readv elements that spanned
	// several cache blocks: Go counts a hit per block (cache_hits).
	CtrExtraBlocks = 184
	hdrSize        = 192

	FileSeq      = 0
	FileVersion  = 8 // 0: empty
	FileSize     = 16
	FileDev      = 24
	FileIno      = 32
	FileMtime    = 40
	FileCtime    = 48
	FileResolved = 56 // files clock, ns: last path stat that matched
	FileChecked  = 64 // files clock, ns: last check that matched
	FileFD       = 72
	FilePathLen  = 80
	FileTouched  = 88 // set to 1 by C on a hit (descriptor LRU), cleared by Go
	FilePath     = 96 // NUL-terminated
	FileEntry    = 512
	MaxPath      = FileEntry - FilePath - 1

	BlockSeq   = 0
	BlockFile  = 8 // version; 0: empty
	BlockIndex = 16
	BlockAddr  = 24
	BlockValid = 32 // bit p: page p (4096 bytes) holds file bytes
	BlockRef   = 40 // set to 1 by C on a hit (S3-FIFO frequency), cleared by Go
	BlockEntry = 64

	// An address hint is two uint64s: the address of a block last claimed
	// into that slot (HintSlot), its low 12 bits (zero in the page-aligned
	// address) holding the block's HintTag, or 0; then the sequence value
	// the block's entry took when it last named that address (HintStamp).
	// It is only a prediction: C copies from it before it reads the entry
	// (whose line, in a table too large for the CPU caches, is usually a
	// miss to DRAM that the copy then overlaps), and keeps the copy only
	// when the entry, read after it under its sequence counter, still has
	// the hint's sequence value and names the same address. Sequence values
	// are unique across the region's block entries (Index.stamp), so an
	// equal value means the entry was not written since the hint was, and
	// the copy ran on the block the entry describes; a stale hint costs a
	// second copy, never a wrong one. The tag keeps C from predicting with
	// the hint of another block of the slot. Hints are dense (16 bytes per
	// block, not an entry's 64), so they stay in the CPU caches where the
	// block table does not.
	HintEntry = 16
	HintStamp = 8 // offset of the sequence value in a hint

	// MaxBlockPages is the largest block the index describes: its validity
	// is one 64-bit word.
	MaxBlockPages = 64
)

// Freshness modes (HdrMode): what a C-side hit checks before it copies.
const (
	ModeStrict   = 0 // fstat the held descriptor, as files.Table.acquireFast does
	ModeInterval = 1 // trust a File checked less than TrustNs ago, else give it to Go
	ModeOpen     = 2 // trust the File as opened
)

// Options size and configure an Index.
type Options struct {
	FileSlots  int   // power of two: direct-mapped file table
	BlockSlots int   // power of two >= 2: block table entries, in pairs (BlockSlot)
	BlockShift uint  // log2 of the cache block size, 12..18 (MaxBlockPages pages)
	Mode       int   // Mode*
	TrustNs    int64 // ModeInterval's interval in ns
	RecheckNs  int64 // the files.Table path recheck in ns; <= 0: none
	// Now is the clock of the files.Table's check times (files.Now), ns.
	Now func() int64
}

// Index is one context's hit region. Writers are serialised per entry by its
// sequence counter, so every method is safe for concurrent use.
type Index struct {
	mem    []byte
	base   unsafe.Pointer
	fmask  uint64
	bmask  uint64
	hmask  uint64
	files  unsafe.Pointer
	blocks unsafe.Pointer
	hints  unsafe.Pointer
	// stamp hands out the block entries' sequence values (unlockPair):
	// unique across entries, so a hint can name an entry's state.
	stamp atomic.Uint64
	// counter values at the last ResetCounters, subtracted by Counters (C
	// adds without a lock, so Go never stores into the counters it reads).
	base0 [7]atomic.Uint64
}

// New maps and initialises a region. Errors: bad options, or mmap failing.
func New(o Options) (*Index, error) {
	if o.FileSlots < 1 || o.FileSlots&(o.FileSlots-1) != 0 ||
		o.BlockSlots < 2 || o.BlockSlots&(o.BlockSlots-1) != 0 ||
		o.BlockShift < 12 || o.BlockShift > 12+6 || o.Now == nil {
		return nil, errors.New("hitidx: bad options")
	}
	// About one hint per block: BlockSlots is about four entries per block.
	hintSlots := uint64(max(1, o.BlockSlots/4))
	hintOff := uint64(hdrSize)
	fileOff := hintOff + hintSlots*HintEntry
	blockOff := fileOff + uint64(o.FileSlots)*FileEntry
	size := int(blockOff + uint64(o.BlockSlots)*BlockEntry)
	mem, err := mapRegion(size)
	if err != nil {
		return nil, err
	}
	x := &Index{mem: mem, base: unsafe.Pointer(&mem[0]),
		fmask: uint64(o.FileSlots - 1), bmask: uint64(o.BlockSlots - 1), hmask: hintSlots - 1}
	x.files = unsafe.Add(x.base, fileOff)
	x.blocks = unsafe.Add(x.base, blockOff)
	x.hints = unsafe.Add(x.base, hintOff)
	x.u64(x.base, HdrFileMask).Store(x.fmask)
	x.u64(x.base, HdrBlockMask).Store(x.bmask)
	x.u64(x.base, HdrBlockShift).Store(uint64(o.BlockShift))
	x.u64(x.base, HdrMode).Store(uint64(o.Mode))
	x.u64(x.base, HdrTrustNs).Store(uint64(o.TrustNs))
	x.u64(x.base, HdrRecheckNs).Store(uint64(o.RecheckNs))
	x.u64(x.base, HdrMonoOffset).Store(uint64(monoOffset(o.Now)))
	x.u64(x.base, HdrFileOff).Store(fileOff)
	x.u64(x.base, HdrBlockOff).Store(blockOff)
	x.u64(x.base, HdrHintOff).Store(hintOff)
	x.u64(x.base, HdrHintMask).Store(x.hmask)
	x.u64(x.base, HdrMagic).Store(Magic)
	return x, nil
}

// monoOffset returns D with CLOCK_MONOTONIC - D >= now() at every instant,
// and as close as one clock read allows: C converts its clock to the files
// clock with it, and an overestimate of "now" only makes C give more checks
// back to Go (never trust a File longer than Go would).
func monoOffset(now func() int64) int64 {
	best := int64(1<<63 - 1)
	for range 8 {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			continue
		}
		g := now() // after the clock read: CLOCK_MONOTONIC - g is a lower bound of the true offset
		if d := ts.Nano() - g; d < best {
			best = d
		}
	}
	return best
}

// Base is the region's address, for capi to hand to C. Valid until Close.
func (x *Index) Base() unsafe.Pointer { return x.base }

// Close unmaps the region. The caller guarantees that no reader is left
// (capi unregisters the region and waits for C readers first).
func (x *Index) Close() {
	if x.mem != nil {
		_ = unix.Munmap(x.mem)
		x.mem, x.base, x.files, x.blocks, x.hints = nil, nil, nil, nil, nil
	}
}

func (x *Index) u64(p unsafe.Pointer, off uintptr) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(p, off))
}

// lock makes the entry's sequence counter odd (spinning while another
// writer holds it) and returns the even value it had.
func lock(seq *atomic.Uint64) uint64 {
	for {
		s := seq.Load()
		if s&1 == 0 && seq.CompareAndSwap(s, s+1) {
			return s
		}
	}
}

// Counters returns the C-side hits since the last ResetCounters: those that
// checked their file (fstat), those that trusted it, and their bytes.
func (x *Index) Counters() (checked, trusted, bytes uint64) {
	checked = x.u64(x.base, CtrChecked).Load() - x.base0[0].Load()
	trusted = x.u64(x.base, CtrTrusted).Load() - x.base0[1].Load()
	bytes = x.u64(x.base, CtrBytes).Load() - x.base0[2].Load()
	return
}

// ReadvCounters returns the C-side readv calls since the last
// ResetCounters: the calls, those that checked their file (fstat), and their
// elements (each also one of Counters' trusted hits).
func (x *Index) ReadvCounters() (calls, checked, hits uint64) {
	calls = x.u64(x.base, CtrReadvCalls).Load() - x.base0[3].Load()
	checked = x.u64(x.base, CtrReadvChecked).Load() - x.base0[4].Load()
	hits = x.u64(x.base, CtrReadvHits).Load() - x.base0[5].Load()
	return
}

// ExtraBlocks returns the cache blocks, beyond one per element, that the
// C-side readv copied from since the last ResetCounters.
func (x *Index) ExtraBlocks() uint64 {
	return x.u64(x.base, CtrExtraBlocks).Load() - x.base0[6].Load()
}

// ResetCounters makes Counters, ReadvCounters and ExtraBlocks count from zero again.
func (x *Index) ResetCounters() {
	for i, off := range [...]uintptr{CtrChecked, CtrTrusted, CtrBytes, CtrReadvCalls, CtrReadvChecked, CtrReadvHits,
		CtrExtraBlocks} {
		x.base0[i].Store(x.u64(x.base, off).Load())
	}
}

// PathHash is the file table's hash of a path (capi/hit.c computes the same):
// 8 bytes at a time, little endian, the last word zero-padded.
func PathHash(p string) uint64 {
	h := uint64(len(p)) * 0x9e3779b97f4a7c15
	var w [8]byte
	for i := 0; i < len(p); i += 8 {
		n := copy(w[:], p[i:])
		clear(w[n:])
		h = (h ^ binary.LittleEndian.Uint64(w[:])) * 0xff51afd7ed558ccd
		h ^= h >> 32
	}
	return h ^ h>>29
}
