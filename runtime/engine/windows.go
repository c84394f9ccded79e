package engine

import (
	"slices"

	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// Samples of a remote object (dataset members: tar shards, packed records)
// are read in windows: before a batch is served, each aligned window of
// windowBytes that holds a sample not in the DRAM cache is read into the
// cache whole, as one ranged read (split into parts by the remote source),
// and the samples are then copied from the cache. A shard read in order so
// costs one GET per window, not one per sample (a tar epoch of 4096
// samples of 16-112 KiB made 4096 GETs plus the headers'), and the
// samples of the next batches are DRAM hits. The windows fill the DRAM
// cache within its budget (memory stays bounded: a window evicted before
// its samples are read costs a second read, never wrong bytes); a context
// without a DRAM cache reads sample by sample. Below a disk cache, windows
// already on disk are not read into DRAM (fillWindows).

// windowBytes is the window of remote sample reads: the remote client's
// part size (one GET, the size peers read object stores in), rounded up to
// whole DRAM cache blocks and, below a disk cache, whole disk cache blocks
// (the disk tier fetches whole blocks: a block two windows shared would be
// fetched twice while the first copy waits in the write-behind queue).
func (c *Context) windowBytes() uint64 {
	part := c.remoteRunBytes() // at least two blocks; part x parts in flight / IOThreads
	if s, ok := c.src.(*sources); ok {
		s.mu.Lock()
		if s.remote != nil {
			part = uint64(s.remote.Client().Options().PartBytes)
		}
		s.mu.Unlock()
	}
	unit := c.cache.BlockSize()
	if d := c.diskTier(); d != nil {
		db := uint64(d.Cache().BlockBytes())
		unit = unit / gcd(unit, db) * db // lcm
	}
	return max(unit, (part+unit-1)/unit*unit)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// fillWindows reads into the DRAM cache the windows of f (a remote object)
// that hold the chunks idx, when there is a DRAM cache; a no-op for a local
// file. Below a disk cache, a window whose blocks are all on disk is
// skipped: its samples are read from the disk tier (sampleFlags), as a
// local shard's are from the page cache, with no DRAM admission. Errors are
// left to the samples' own reads, which meet them again and report them
// per sample.
func (c *Context) fillWindows(f source.Object, ch []Chunk, idx []int) {
	ro, remoteObj := f.(*remote.Object)
	if !remoteObj || c.cache == nil || len(idx) == 0 {
		return
	}
	W := c.windowBytes()
	var wins []uint64
	for _, i := range idx {
		for w := ch[i].Off / W * W; w < ch[i].Off+ch[i].Size; w += W {
			wins = append(wins, w)
		}
	}
	slices.Sort(wins)
	wins = slices.Compact(wins)
	size := f.Size()
	disk := c.diskTier()
	_ = c.rd.Run(len(wins), c.opts.IOThreads, func(k int) error {
		lo := wins[k]
		n := min(W, size-lo)
		if disk != nil {
			if pk, ok := disk.Peek(ro, lo, n); ok && pk.MissBlocks == 0 {
				return nil
			}
		}
		_, _ = c.serve(f, lo, n, nil, 0, true)
		return nil
	})
}

// diskTier returns the disk cache tier, or nil when it is off (or no URL
// was opened yet).
func (c *Context) diskTier() *diskcache.Source {
	if s, ok := c.src.(*sources); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.disk
	}
	return nil
}
