package engine

import (
	"sync/atomic"

	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// samplePass tells a dataset's first pass over a remote object below a
// disk cache from the passes after it, for the DRAM admission of its
// windows (windows.go fillWindows): a first pass fills the disk tier only,
// or, where the object is on disk already (a second process over the same
// disk cache), reads its samples from the disk tier (diskruns.go); a later
// pass copies the windows from disk into DRAM, so the pass after that is
// DRAM hits as a local file's repeat epoch is page-cache hits. A first pass
// never admits, wherever its bytes come from: the DRAM cache's pages are
// fresh memory in a new process, and faulting them in cost more than the
// rest of the epoch (BenchmarkDiskTierSecondProcess, a tar epoch from disk
// into a new context: 0.28-0.58 GB/s copied into DRAM, 1.8-2.2 GB/s read
// from the disk tier sample by sample, against 5-6 GB/s for the local
// file), while a single pass over a dataset, which would never read those
// pages again, is common. A pass is over when a sample is read a second
// time. Safe for concurrent use.
type samplePass struct {
	seen  []atomic.Uint64 // one bit per sample: read before
	again atomic.Bool     // a sample was read twice: the first pass is over
}

// newSamplePass returns the pass state of a dataset over f, or nil when f
// is not a remote object below a disk cache (admitDisk is then true:
// fillWindows does not consult it).
func (c *Context) newSamplePass(f source.Object) *samplePass {
	if _, ok := f.(*remote.Object); !ok || c.diskTier() == nil || c.cache == nil || f.Size() == 0 {
		return nil
	}
	return &samplePass{}
}

// sized makes room for n samples' bits (at the dataset's construction).
func (p *samplePass) sized(n int) *samplePass {
	if p != nil {
		p.seen = make([]atomic.Uint64, (n+63)/64)
	}
	return p
}

// mark records that sample i is read; a second read of it ends the
// first pass.
func (p *samplePass) mark(i uint64) {
	if p == nil || p.again.Load() || i/64 >= uint64(len(p.seen)) {
		return
	}
	bit := uint64(1) << (i % 64)
	if p.seen[i/64].Or(bit)&bit != 0 {
		p.again.Store(true)
	}
}

// admitDisk reports whether windows found on disk may be copied into the
// DRAM cache now: after the first pass.
func (p *samplePass) admitDisk() bool {
	return p == nil || p.again.Load()
}
