package engine

import (
	"slices"
	"sync"

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
// without a DRAM cache reads sample by sample. Below a disk cache, the pass
// that fetches the object fills only the disk tier, and the windows reach
// DRAM from disk in the next pass (fillWindows, samplePass).

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
// file. Below a disk cache each window is looked up in the disk tier first
// (Peek), and it is read into DRAM only from there, as a first load of an
// object is (walk.go fillRun): a window with a block the tier lacks is
// fetched into the disk tier only (fetchWindow), a window with a block
// still in the write-behind queue, or any window during the first pass
// that fetched the object (admitDisk false, samplePass), is left alone, and
// its samples are read from the tier (sampleFlags: no DRAM admission), so a
// first epoch holds no DRAM-cache copy of what the disk tier is about to
// hold; otherwise a window whose blocks are all on disk is read into DRAM
// from there when the DRAM cache has room for it without evicting, so the
// next epoch is DRAM hits (a dataset larger than the room is served from
// the disk tier, never cycled through DRAM; fillFromDisk). It returns the
// windows, sorted, whose samples are to be read from the disk tier (all
// their blocks on disk, none copied into DRAM now: serveFromDisk). Errors
// are left to the samples' own reads, which meet them again and report
// them per sample.
func (c *Context) fillWindows(f source.Object, ch []Chunk, idx []int, admitDisk bool) (onDisk []uint64) {
	ro, remoteObj := f.(*remote.Object)
	if !remoteObj || c.cache == nil || len(idx) == 0 {
		return nil
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
	fromDisk := make([]bool, len(wins))
	_ = c.rd.Run(len(wins), c.opts.IOThreads, func(k int) error {
		lo := wins[k]
		n := min(W, size-lo)
		if disk != nil {
			if pk, ok := disk.Peek(ro, lo, n); ok {
				switch {
				case pk.MissBlocks > 0:
					fetchWindow(disk, ro, lo, n)
					return nil
				case pk.PendingBlocks > 0:
					return nil
				case !admitDisk:
					fromDisk[k] = true
					return nil
				case c.windowCached(f, lo, n):
					return nil
				case c.cache.Resident()+n > c.cache.Budget():
					fromDisk[k] = true
					return nil // no room: the samples are read from the disk tier
				default:
					c.fillFromDisk(disk, ro, lo, n)
					return nil
				}
			}
		}
		_, _ = c.serve(f, lo, n, nil, 0, true)
		return nil
	})
	for k, w := range wins {
		if fromDisk[k] {
			onDisk = append(onDisk, w)
		}
	}
	return onDisk
}

// fillFromDisk reads the window [lo, lo+n) of ro (lo a multiple of the
// DRAM cache block) from the disk tier straight into the DRAM cache blocks'
// pages, counted as fillRun counts a fill (a miss per block, the bytes
// inserted): one copy per byte, where serve would read the window into a
// new buffer of its own first and copy it into the blocks from there (a
// second copy, and an 8 MiB allocation per window). A block the cache has
// no room for is skipped; an error leaves the pages it did not fill
// invalid, for the samples' own reads to meet again.
func (c *Context) fillFromDisk(disk *diskcache.Source, ro *remote.Object, lo, n uint64) {
	bs := c.cache.BlockSize()
	for blo := lo; blo < lo+n; blo += bs {
		blk := c.cache.AcquireQuiet(ro.Version(), blo/bs)
		if blk == nil {
			continue
		}
		end := int(min(bs, lo+n-blo))
		var got int
		_, _ = blk.Fill(0, end, func(pg []byte, boff int) error {
			k := min(len(pg), end-boff)
			if _, err := disk.ReadAtTiers(ro, pg[:k], blo+uint64(boff)); err != nil {
				return err
			}
			got += k
			return nil
		})
		blk.Release()
		if got > 0 {
			c.st.CacheMisses.Add(1)
			c.st.CacheInsertedBytes.Add(uint64(got))
		}
	}
}

// windowScratch holds the buffers fetchWindow reads windows into.
var windowScratch sync.Pool

// fetchWindow reads [lo, lo+n) of ro through the disk tier into a scratch
// buffer, which fetches the blocks the tier lacks (one ranged GET each)
// and queues them for the disk; the bytes are then read from the tier by
// the samples. Its error is left to them.
func fetchWindow(disk *diskcache.Source, ro *remote.Object, lo, n uint64) {
	bp, _ := windowScratch.Get().(*[]byte)
	if bp == nil || uint64(cap(*bp)) < n {
		b := make([]byte, n)
		bp = &b
	}
	_, _ = disk.ReadAtTiers(ro, (*bp)[:n], lo)
	windowScratch.Put(bp)
}

// windowCached reports whether every DRAM cache block of [lo, lo+n) of f
// is in the cache with all its pages valid: the window's samples are DRAM
// hits, and there is nothing to read.
func (c *Context) windowCached(f source.Object, lo, n uint64) bool {
	bs := c.cache.BlockSize()
	for b := lo / bs; b*bs < lo+n; b++ {
		blk := c.cache.Peek(f.Version(), b)
		if blk == nil {
			return false
		}
		full := blk.Covers(int(max(lo, b*bs)-b*bs), int(min(lo+n, (b+1)*bs)-b*bs))
		blk.Release()
		if !full {
			return false
		}
	}
	return true
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
