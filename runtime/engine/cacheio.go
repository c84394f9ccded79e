package engine

import (
	"github.com/memtier/memtier/runtime/files"
)

// serveCached serves [off, off+size) block by block through the DRAM cache:
// valid blocks are copied out, missing pages are filled from storage by path
// and then copied out. Blocks are independent tasks run in parallel; each is
// pinned only while it is filled and copied. When the cache cannot make room
// (everything pinned), that block is read straight into dst. dst nil: fill
// only (prefetch).
func (c *Context) serveCached(f *files.File, off, size uint64, dst []byte, path int) (served, error) {
	bs := c.cache.BlockSize()
	first, last := off/bs, (off+size-1)/bs
	if first == last { // one block: no task fan-out, no allocation
		var s served
		err := c.serveBlock(f, off, size, dst, path, first, &s)
		return s, err
	}
	var total served
	todo := make([]uint64, 0, last-first+1)
	if dst != nil && size < parallelCopyMin {
		// Copy the valid blocks inline: a hit is a memcpy bound by memory
		// bandwidth, so waking helpers for a few MiB costs more than it gains.
		for idx := first; idx <= last; idx++ {
			if !c.copyIfValid(f, off, size, dst, idx, &total) {
				todo = append(todo, idx)
			}
		}
	} else {
		for idx := first; idx <= last; idx++ {
			todo = append(todo, idx)
		}
	}
	if len(todo) == 0 {
		return total, nil
	}
	per := make([]served, len(todo))
	err := c.rd.Run(len(todo), c.opts.IOThreads, func(i int) error {
		return c.serveBlock(f, off, size, dst, path, todo[i], &per[i])
	})
	for _, s := range per {
		total.add(s)
	}
	return total, err
}

// parallelCopyMin: cached requests at least this large copy their blocks on
// several workers (two threads add ~20% of memory bandwidth here, and waking
// helpers costs tens of microseconds).
const parallelCopyMin = 64 << 20

// copyIfValid copies the part of the request inside block idx when the block
// holds all of it, counting the hit; reports whether it did.
func (c *Context) copyIfValid(f *files.File, off, size uint64, dst []byte, idx uint64, out *served) bool {
	bs := c.cache.BlockSize()
	blo := idx * bs
	lo := max(off, blo) - blo
	hi := min(off+size, blo+bs) - blo
	blk := c.cache.Touch(f.ID, idx)
	if blk == nil {
		return false
	}
	defer blk.Release()
	if !blk.Covers(int(lo), int(hi)) {
		return false
	}
	dpos := blo + lo - off
	copy(dst[dpos:dpos+hi-lo], blk.Data()[lo:hi])
	c.st.CacheHits.Add(1)
	out.cache += hi - lo
	return true
}

// serveBlock serves the part of [off, off+size) inside cache block idx,
// adding the bytes it delivered, by path, to *out.
func (c *Context) serveBlock(f *files.File, off, size uint64, dst []byte, path int, idx uint64, out *served) error {
	bs := c.cache.BlockSize()
	blo := idx * bs
	lo := max(off, blo) - blo
	hi := min(off+size, blo+bs) - blo
	var part []byte
	if dst != nil {
		dpos := blo + lo - off
		part = dst[dpos : dpos+hi-lo]
	}
	blk := c.cache.AcquireQuiet(f.ID, idx)
	if blk == nil { // no room (everything pinned): read around the cache
		c.st.CacheMisses.Add(1)
		if part == nil {
			return nil // nothing to prefetch into; not an error
		}
		s, err := c.storage(f, part, blo+lo, path)
		out.add(s)
		return err
	}
	defer blk.Release()
	if blk.Covers(int(lo), int(hi)) {
		c.st.CacheHits.Add(1)
		copy(part, blk.Data()[lo:hi])
		out.cache += hi - lo
		return nil
	}
	fileSize := uint64(f.Ident.Size)
	var fillPath served
	var fresh uint64 // bytes of [lo, hi) this call read from storage
	var got uint64   // bytes this call read into the block (whole pages)
	_, err := blk.Fill(int(lo), int(hi), func(p []byte, boff int) error {
		if avail := fileSize - blo - uint64(boff); uint64(len(p)) > avail {
			p = p[:avail] // the page holding end of file: read what exists
		}
		s, err := c.storage(f, p, blo+uint64(boff), path)
		if err == nil {
			run0, run1 := uint64(boff), uint64(boff)+uint64(len(p))
			fresh += min(run1, hi) - min(max(run0, lo), min(run1, hi))
			c.st.CacheInsertedBytes.Add(uint64(len(p)))
			got += uint64(len(p))
		}
		fillPath.add(s)
		return err
	})
	if err != nil {
		return err
	}
	copy(part, blk.Data()[lo:hi])
	out.fetched += got
	if got > 0 {
		c.st.CacheMisses.Add(1)
	} else {
		c.st.CacheHits.Add(1) // another request filled it meanwhile
	}
	out.cache += hi - lo - fresh // pages another request had already filled
	if fillPath.direct > 0 {
		out.direct += fresh
	} else {
		out.buffered += fresh
	}
	return nil
}

// serveUncached serves a request that does not fill the cache: blocks already
// valid in the cache are copied out (counted as cache hits), the rest is read
// from storage in as few large reads as possible, straight into dst.
func (c *Context) serveUncached(f *files.File, off uint64, dst []byte, path int) (served, error) {
	if c.cache == nil || c.cache.Resident() == 0 {
		return c.storage(f, dst, off, path)
	}
	bs := c.cache.BlockSize()
	size := uint64(len(dst))
	var total served
	segStart := off // start of the pending uncached segment
	flush := func(end uint64) error {
		if end > segStart {
			s, err := c.storage(f, dst[segStart-off:end-off], segStart, path)
			if err != nil {
				return err
			}
			total.add(s)
		}
		return nil
	}
	for blo := off / bs * bs; blo < off+size; blo += bs {
		lo, hi := max(off, blo), min(off+size, blo+bs)
		blk := c.cache.Peek(f.ID, blo/bs)
		if blk == nil {
			continue
		}
		if blk.Covers(int(lo-blo), int(hi-blo)) {
			if err := flush(lo); err != nil {
				blk.Release()
				return total, err
			}
			copy(dst[lo-off:hi-off], blk.Data()[lo-blo:hi-blo])
			c.st.CacheHits.Add(1)
			total.cache += hi - lo
			segStart = hi
		}
		blk.Release()
	}
	err := flush(off + size)
	return total, err
}
