package engine

import (
	"github.com/memtier/memtier/runtime/cache"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/logx"
	"github.com/memtier/memtier/runtime/mem"
	"github.com/memtier/memtier/runtime/source"
)

// The span walker: the one loop that moves a plan's bytes, tier by tier.

// parallelCopyMin: a plan whose DRAM-cache bytes are at least this large
// copies them on several workers. One thread copies about 9.5 GB/s here and
// two about 17 GB/s (memcpy of 512 MiB on the development machine), while waking a helper costs tens of
// microseconds, so below a few hundred microseconds of copying the caller
// copies alone.
const parallelCopyMin = 2 << 20

// copyUnitMin is the least a parallel copy unit moves.
const copyUnitMin = 1 << 20

// unit is a run of spans [a, b) that one worker executes in order.
type unit struct{ a, b int }

// units cuts the plan into parallel units: every span that does I/O (fill or
// source) is a unit of its own, so reads run concurrently (a source span splits
// itself further into tasks), and DRAM spans are grouped into copy units of
// copyUnitMin or more. A plan that does no I/O and copies less than
// parallelCopyMin is one unit, run on the caller: the hot path. nil means one
// unit.
func (c *Context) units(p *plan) []unit {
	spans := p.list()
	if len(spans) <= 1 {
		return nil
	}
	io := 0
	for _, s := range spans {
		if s.tier != tierDRAM {
			io++
		}
	}
	if io == 0 && (p.cached < parallelCopyMin || p.prefetch) {
		return nil
	}
	if io == 1 && p.cached < parallelCopyMin {
		return nil // one read plus small copies: the read parallelises itself
	}
	target := max(copyUnitMin, p.cached/uint64(4*c.opts.IOThreads))
	var us []unit
	start, acc := 0, uint64(0)
	for i, s := range spans {
		if s.tier != tierDRAM {
			if i > start {
				us = append(us, unit{start, i})
			}
			us = append(us, unit{i, i + 1})
			start, acc = i+1, 0
			continue
		}
		acc += s.size
		if acc >= target {
			us = append(us, unit{start, i + 1})
			start, acc = i+1, 0
		}
	}
	if start < len(spans) {
		us = append(us, unit{start, len(spans)})
	}
	if len(us) == 1 {
		return nil
	}
	return us
}

// exec serves plan p into dst (len p.size; nil for a prefetch) and releases
// it. nowait: never block on storage; a byte that is not in the page cache
// fails the plan with errWouldBlock (readv's first pass), after starting its
// readahead.
func (c *Context) exec(p *plan, dst []byte, nowait bool) (served, error) {
	defer p.release()
	us := c.units(p)
	if us == nil || nowait {
		var s served
		spans := p.list()
		stream := p.cached >= mem.StreamThreshold
		for i := range spans {
			if err := c.execSpan(p.obj, p.off, p.d.Path, &spans[i], dst, nowait, stream, &s); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	return c.execParallel(p, us, dst)
}

// execParallel runs the units of p on the I/O workers. It moves the spans
// (and their pins) to memory of its own, so the plan itself never escapes to
// the heap on the hot path.
func (c *Context) execParallel(p *plan, us []unit, dst []byte) (served, error) {
	spans := append([]span(nil), p.list()...)
	for i := range p.list() {
		p.list()[i].blk = nil // owned by spans now
	}
	defer releaseSpans(spans)
	f, off, path := p.obj, p.off, p.d.Path
	stream := p.cached >= mem.StreamThreshold
	per := make([]served, len(us))
	err := c.rd.Run(len(us), c.opts.IOThreads, func(k int) error {
		for i := us[k].a; i < us[k].b; i++ {
			if err := c.execSpan(f, off, path, &spans[i], dst, false, stream, &per[k]); err != nil {
				return err
			}
		}
		return nil
	})
	var total served
	for _, s := range per {
		total.add(s)
	}
	return total, err
}

// errWouldBlock stops a non-blocking plan: the pages are not in the page
// cache yet (their readahead has been started).
var errWouldBlock = errs.New(errs.Busy, "readv", "pages not in the page cache yet")

// execSpan serves one span, adding the bytes it delivered, by path, to *out.
// stream: the plan copies at least mem.StreamThreshold bytes out of the DRAM
// cache, more than the CPU cache holds, so its block copies bypass the CPU
// cache (mem.CopyStream: 1 GiB of 64 KiB hits copied at about 2x the speed
// of plain copy on the build VM, BenchmarkCopyStream).
func (c *Context) execSpan(f source.Object, base uint64, path int, s *span, dst []byte, nowait, stream bool, out *served) error {
	var part []byte
	if dst != nil {
		part = dst[s.off-base : s.off-base+s.size]
	}
	switch s.tier {
	case tierDRAM:
		blk := s.blk
		bs := c.cache.BlockSize()
		lo := s.off % bs
		if stream && part != nil {
			mem.CopyStream(part, blk.Data()[lo:lo+s.size])
		} else {
			copy(part, blk.Data()[lo:lo+s.size])
		}
		s.blk = nil
		blk.Release()
		c.st.CacheHits.Add(1)
		out.cache += s.size
		return nil
	case tierSource:
		return c.readSource(f, part, s.off, path, nowait, out)
	case tierFillRun:
		if nowait {
			return errWouldBlock // remote bytes are never close
		}
		return c.fillRun(f, path, s, part, out)
	}
	return c.fillSpan(f, path, s, part, nowait, out)
}

// fillRun serves a run of blocks with one source read: the run's whole
// pages (clipped to the object), then into the cache blocks' invalid pages.
// When the span is whole pages and has a destination (part; nil: prefetch),
// the read goes straight into part and the blocks are filled from there;
// otherwise into a buffer of the run's own, copied out to part. (Staging
// every run cost a run-sized allocation and a second copy: a 512 MiB remote
// read with admission on ran at about 220 MB/s against 1.2-2.5 GB/s with
// admission off on the loaded 2-core build machine.)
//
// Below a disk cache, a read (not a prefetch) whose run the disk tier
// fetched from the remote source, in part or whole, is not admitted into
// DRAM: those blocks are being written to the disk tier, and the next read
// of the run copies them from there into DRAM. A first load then touches
// only its destination, as the peers' loads do, instead of the DRAM blocks
// too: fresh memory cost more than the network on the build machine (a
// 512 MiB first load with the disk cache on at 145-280 MB/s admitted, at
// 460-720 MB/s not; BenchmarkRemoteFirstLoad).
func (c *Context) fillRun(f source.Object, path int, s *span, part []byte, out *served) error {
	const page = cache.PageSize // Fill hands out whole pages
	lo := s.off / page * page
	hi := min(f.Size(), (s.off+s.size+page-1)/page*page)
	var buf []byte
	var fresh uint64
	var err error
	if part != nil && lo == s.off && hi == s.off+s.size {
		buf = part[:s.size]
		if _, fresh, err = c.fetchTiered(f, buf, lo, path); err != nil {
			return err
		}
	} else {
		buf = make([]byte, hi-lo)
		if _, fresh, err = c.fetchTiered(f, buf, lo, path); err != nil {
			return err
		}
		copy(part, buf[s.off-lo:s.off-lo+s.size])
	}
	out.buffered += s.size
	if fresh > 0 && part != nil {
		return nil // on its way to the disk tier; admitted from there on the next read
	}
	bs := c.cache.BlockSize()
	for blo := lo / bs * bs; blo < hi; blo += bs {
		blk := c.claimBlock(f, blo/bs)
		if blk == nil {
			continue // no room: the bytes were served anyway
		}
		a, b := max(lo, blo), min(hi, blo+bs)
		var got int
		_, _ = blk.Fill(int(a-blo), int(b-blo), func(pg []byte, boff int) error {
			got += copy(pg, buf[blo+uint64(boff)-lo:]) // past-EOF bytes stay unwritten
			return nil
		})
		blk.Release()
		c.st.CacheMisses.Add(1)
		c.st.CacheInsertedBytes.Add(uint64(got))
		out.fetched += uint64(got)
	}
	return nil
}

// claimBlock pins f's cache block idx for filling, or returns nil when the
// cache has no room for it or f's bytes may not be cached yet (a file
// changed within its file system's timestamp tick: files.File.CacheSafe);
// the caller then reads around the cache.
func (c *Context) claimBlock(f source.Object, idx uint64) *cache.Block {
	if !cacheSafe(f) {
		return nil
	}
	return c.cache.AcquireQuiet(f.Version(), idx)
}

// cacheSafe is source.CacheSafe(f), saying at debug level why a read of f
// was not cached when it is false; the DRAM (claimBlock) and HBM
// (prefetchHBM) tiers both ask it before they keep bytes of f.
func cacheSafe(f source.Object) bool {
	if source.CacheSafe(f) {
		return true
	}
	logx.Debugf("cache.racy", "not cached yet: %s changed within its file system's timestamp tick", f.Name())
	return false
}

// readSource reads dst from the source at off by path, or, nowait, only if
// the source has it without waiting (else errWouldBlock), adding the bytes by
// path to *out.
func (c *Context) readSource(f source.Object, dst []byte, off uint64, path int, nowait bool, out *served) error {
	if nowait {
		if !c.src.ReadNoWait(f, dst, off) {
			return errWouldBlock
		}
		out.buffered += uint64(len(dst))
		return nil
	}
	r, err := c.fetch(f, dst, off, path)
	out.add(r)
	return err
}

// fillSpan reads the pages of a span's block that are not valid yet from the
// source into the block, then copies the span out (part nil: fill only). When
// the cache cannot make room (everything pinned) the span is read straight
// into part instead.
func (c *Context) fillSpan(f source.Object, path int, s *span, part []byte, nowait bool, out *served) error {
	bs := c.cache.BlockSize()
	blo := s.off / bs * bs
	lo, hi := s.off-blo, s.off-blo+s.size
	blk := c.claimBlock(f, blo/bs)
	if blk == nil { // no room, or not cacheable yet: read around the cache
		c.st.CacheMisses.Add(1)
		if part == nil {
			return nil // nothing to prefetch into; not an error
		}
		return c.readSource(f, part, s.off, path, nowait, out)
	}
	defer blk.Release()
	fileSize := f.Size()
	var fillPath served
	var fresh uint64 // bytes of [lo, hi) this call read from the source
	var got uint64   // bytes this call read into the block (whole pages)
	_, err := blk.Fill(int(lo), int(hi), func(pg []byte, boff int) error {
		if avail := fileSize - blo - uint64(boff); uint64(len(pg)) > avail {
			pg = pg[:avail] // the page holding end of file: read what exists
		}
		var r served
		if err := c.readSource(f, pg, blo+uint64(boff), path, nowait, &r); err != nil {
			return err
		}
		run0, run1 := uint64(boff), uint64(boff)+uint64(len(pg))
		fresh += min(run1, hi) - min(max(run0, lo), min(run1, hi))
		c.st.CacheInsertedBytes.Add(uint64(len(pg)))
		got += uint64(len(pg))
		fillPath.add(r)
		return nil
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
	out.cache += s.size - fresh // pages another request had already filled
	if fillPath.direct > 0 {
		out.direct += fresh
	} else {
		out.buffered += fresh
	}
	return nil
}
