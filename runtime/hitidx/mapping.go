package hitidx

import (
	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/mem"
)

// hugePage is the size of a transparent huge page on x86-64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// mapRegion maps size bytes of zeroed anonymous memory for a region. One of
// at least half a huge page is rounded up to whole huge pages, placed at a
// huge-page boundary and marked MADV_HUGEPAGE before anything touches it
// (mem.MapHuge): every C-side hit reads a block entry and a hint at a random
// place of the region, and with 4 KiB pages most of those reads also miss
// the TLB (a page walk before the entry's own cache miss). Where THP is off
// the advice is ignored and the region works the same. A smaller region is
// mapped as is.
func mapRegion(size int) ([]byte, error) {
	if size < hugePage/2 {
		return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	}
	return mem.MapHuge((size + hugePage - 1) / hugePage * hugePage)
}
