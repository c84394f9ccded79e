package engine

import (
	"slices"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
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
// without a DRAM cache reads sample by sample.

// windowBytes is the window of remote sample reads: the remote client's
// part size (one GET, the size peers read object stores in), rounded up to
// whole DRAM cache blocks.
func (c *Context) windowBytes() uint64 {
	part := c.remoteRunBytes() // at least two blocks; part x parts in flight / IOThreads
	if s, ok := c.src.(*sources); ok {
		s.mu.Lock()
		if s.remote != nil {
			part = uint64(s.remote.Client().Options().PartBytes)
		}
		s.mu.Unlock()
	}
	bs := c.cache.BlockSize()
	return max(bs, (part+bs-1)/bs*bs)
}

// fillWindows reads into the DRAM cache the windows of f (a remote object)
// that hold the chunks idx, when the samples are admitted (flags) and
// there is a DRAM cache; a no-op otherwise. Errors are left to the
// samples' own reads, which meet them again and report them per sample.
func (c *Context) fillWindows(f source.Object, ch []Chunk, idx []int, flags uint32) {
	if _, local := f.(*files.File); local || c.cache == nil || flags&policy.ReadNoAdmit != 0 || len(idx) == 0 {
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
	_ = c.rd.Run(len(wins), c.opts.IOThreads, func(k int) error {
		lo := wins[k]
		_, _ = c.serve(f, lo, min(W, size-lo), nil, flags, true)
		return nil
	})
}
