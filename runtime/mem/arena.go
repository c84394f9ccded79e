// Package mem hands out page-aligned byte buffers that live outside the Go
// heap.
//
// Two users need this. The DRAM cache must not sit on the Go heap, because the
// garbage collector lets the heap grow to about twice the live size before it
// collects, so a 1 GiB cache could cost 2 GiB of RSS. O_DIRECT bounce buffers
// need memory aligned to the file system's direct-I/O alignment, which the Go
// allocator does not promise. Anonymous mmap gives both: the memory is
// page-aligned, and the GC never scans, moves or accounts for it.
package mem

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize is the alignment of every buffer an Arena returns, in bytes. It is
// 4096 rather than os.Getpagesize() so that buffer sizes, and therefore cache
// and bounce layouts, are the same on every machine; mmap still returns memory
// aligned to the real page size, which is a multiple of 4096 on Linux.
const PageSize = 4096

// slabMin is the smallest mmap an Arena makes when buffers are small, so that
// a cache of 4 KiB blocks does not cost one mmap (and one VMA) per block.
const slabMin = 2 << 20

// Arena hands out fixed-size, page-aligned buffers carved from mmap'ed slabs.
// At most maxBufs buffers exist at once (in use or free); Get returns nil
// beyond that, or if mmap fails. Put returns a buffer for reuse. Memory is
// mapped on demand and only given back to the kernel by Close.
//
// All methods are safe for concurrent use.
type Arena struct {
	bufSize  int // bytes per buffer, a multiple of PageSize
	maxBufs  int
	slabBufs int // buffers per full slab

	mu     sync.Mutex
	free   [][]byte         // LIFO: the most recently used buffer is the most likely to be in the CPU cache and TLB
	inUse  map[uintptr]bool // address of each buffer handed out; catches double and foreign Puts
	slabs  [][]byte         // every mapping, for Close
	carved int              // buffers created so far, in use or free
	closed bool
}

// NewArena returns an Arena of buffers of bufSize bytes (rounded up to a
// multiple of 4096; values < 1 count as 1) with at most maxBufs buffers
// (values < 1 count as 1). Slabs are max(bufSize, 2 MiB) rounded up to a
// multiple of bufSize, but never more than the buffers still allowed. No
// memory is mapped until the first Get.
func NewArena(bufSize int, maxBufs int) *Arena {
	if bufSize < 1 {
		bufSize = 1
	}
	if maxBufs < 1 {
		maxBufs = 1
	}
	bufSize = (bufSize + PageSize - 1) &^ (PageSize - 1)
	slabBufs := 1
	if bufSize < slabMin {
		slabBufs = (slabMin + bufSize - 1) / bufSize
	}
	return &Arena{
		bufSize:  bufSize,
		maxBufs:  maxBufs,
		slabBufs: slabBufs,
		inUse:    make(map[uintptr]bool),
	}
}

// BufSize returns the length of every buffer in bytes (a multiple of 4096).
// Safe for concurrent use.
func (a *Arena) BufSize() int { return a.bufSize }

// MaxBufs returns the bound on the number of buffers. Safe for concurrent use.
func (a *Arena) MaxBufs() int { return a.maxBufs }

// InUse returns how many buffers are handed out and not yet Put back. Safe for
// concurrent use; the value may be stale by the time it is read.
func (a *Arena) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.inUse)
}

// Get returns a buffer of BufSize() bytes whose first byte is 4096-aligned,
// or nil when maxBufs buffers are already in use, when mmap fails, or after
// Close. Its contents are whatever the previous user left (zero when fresh).
// Safe for concurrent use; never blocks on I/O, but may call mmap.
func (a *Arena) Get() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	if len(a.free) == 0 && !a.grow() {
		return nil
	}
	b := a.free[len(a.free)-1]
	a.free[len(a.free)-1] = nil
	a.free = a.free[:len(a.free)-1]
	a.inUse[addr(b)] = true
	return b
}

// grow maps one more slab and pushes its buffers on the free list. Caller
// holds a.mu.
func (a *Arena) grow() bool {
	n := min(a.slabBufs, a.maxBufs-a.carved)
	if n <= 0 {
		return false
	}
	slab, err := mapSlab(n * a.bufSize)
	if err != nil {
		return false
	}
	a.slabs = append(a.slabs, slab)
	a.carved += n
	// Push in reverse so that Get hands out the slab front to back.
	for i := n - 1; i >= 0; i-- {
		a.free = append(a.free, slab[i*a.bufSize:(i+1)*a.bufSize:(i+1)*a.bufSize])
	}
	return true
}

// Put gives b, obtained from Get on this Arena, back for reuse. b may be a
// prefix reslice (b[:n], n may be 0); the address of its first byte identifies it. Putting a buffer
// twice, a buffer of another Arena, or nil is ignored, so that a caller bug
// can never hand one buffer to two users. After Close, Put does nothing.
// Safe for concurrent use.
func (a *Arena) Put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p := addr(b)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || !a.inUse[p] {
		return
	}
	delete(a.inUse, p)
	a.free = append(a.free, unsafe.Slice(unsafe.SliceData(b), a.bufSize))
}

// Close unmaps every slab. Callers must have stopped using every buffer: a
// later access faults. Get returns nil afterwards. Safe to call more than once
// and concurrently with other methods.
func (a *Arena) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	for _, s := range a.slabs {
		_ = unix.Munmap(s) // only fails for a bad range, which Mmap's own slice cannot be
	}
	a.slabs, a.free, a.inUse = nil, nil, nil
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// hugePage is the size of a transparent huge page on x86-64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// mapSlab maps size bytes of anonymous memory. A slab that is a whole number
// of huge pages is placed at a huge-page boundary and marked MADV_HUGEPAGE:
// the cache copies 4 KiB pieces from random places and large runs out of
// these slabs, and with 4 KiB pages every such copy pays TLB misses that the
// kernel's own page-cache copies (through its huge-page direct map) do not.
// Where THP is off, the advice is ignored and the slab works the same.
func mapSlab(size int) ([]byte, error) {
	if size%hugePage != 0 {
		return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	}
	return MapHuge(size)
}

// MapHuge maps size bytes (a multiple of 2 MiB) of zeroed, private,
// read-write anonymous memory at a huge-page boundary and marks it
// MADV_HUGEPAGE before anything touches it; where THP is off the advice is
// ignored. Unmap it with unix.Munmap. Errors: mmap's.
func MapHuge(size int) ([]byte, error) {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	raw, err := unix.Mmap(-1, 0, size+hugePage, prot, flags)
	if err != nil {
		return nil, err
	}
	head := int((hugePage - addr(raw)%hugePage) % hugePage)
	if head > 0 {
		_ = unix.Munmap(raw[:head])
	}
	if tail := hugePage - head; tail > 0 {
		_ = unix.Munmap(raw[head+size:])
	}
	slab := raw[head : head+size : head+size]
	_ = unix.Madvise(slab, unix.MADV_HUGEPAGE)
	return slab, nil
}
