package engine

import (
	"sync/atomic"

	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// samplePass tells a dataset's first pass over a remote object below a
// disk cache from the passes after it, for the DRAM admission of its
// windows (windows.go fillWindows): a pass that fetches the object from
// the server fills the disk tier only (the DRAM cache would hold a second
// copy of every byte the write-behind queue and the disk are taking), and a
// later pass, or the first one of a dataset whose object was on disk
// already when it was opened (a second process over the same disk cache),
// copies the windows from disk into DRAM, so the pass after that is DRAM
// hits as a local file's repeat epoch is page-cache hits. A pass is over
// when a sample is read a second time. Safe for concurrent use.
type samplePass struct {
	warm  bool            // every disk block of the object was on disk at open
	seen  []atomic.Uint64 // one bit per sample: read before
	again atomic.Bool     // a sample was read twice: the first pass is over
}

// peekBlocksMax caps the disk blocks newSamplePass looks up at open (one
// lstat each): past it only the object's first blocks are checked.
const peekBlocksMax = 1024

// newSamplePass returns the pass state of a dataset of n samples over f,
// or nil when f is not a remote object below a disk cache (admitDisk is
// then true: fillWindows does not consult it). It must be called before
// the dataset's open reads anything of f (a tar's headers), so that a
// first open, whose header reads fetch blocks, is not taken for warm.
func (c *Context) newSamplePass(f source.Object) *samplePass {
	ro, ok := f.(*remote.Object)
	disk := c.diskTier()
	if !ok || disk == nil || c.cache == nil || f.Size() == 0 {
		return nil
	}
	n := min(f.Size(), peekBlocksMax*uint64(disk.Cache().BlockBytes()))
	pk, ok := disk.Peek(ro, 0, n)
	return &samplePass{warm: ok && pk.MissBlocks == 0 && pk.PendingBlocks == 0}
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
// DRAM cache now: after the first pass, or from the start when the object
// was on disk at open.
func (p *samplePass) admitDisk() bool {
	return p == nil || p.warm || p.again.Load()
}
