package engine

import (
	"math/bits"
	"time"
	"unsafe"

	"github.com/memtier/memtier/runtime/cache"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/hitidx"
	"github.com/memtier/memtier/runtime/stats"
)

// The hit index: a copy of the descriptor table's Files and of the DRAM
// cache's hinted blocks in memory outside the Go heap, which capi/hit.c
// reads to serve a cached memtier_read without entering Go (runtime/hitidx
// says how it stays consistent). The engine only keeps it up to date and
// adds the hits C counted to the stats.

// hitMirror feeds the descriptor table's changes to the index.
type hitMirror struct{ x *hitidx.Index }

func (m hitMirror) Installed(f *files.File) {
	r, ck := f.CheckTimes()
	m.x.PutFile(&hitidx.FileInfo{Path: f.Path, Version: f.ID, FD: f.FD, Size: f.Ident.Size,
		Dev: f.Ident.Dev, Ino: f.Ident.Ino, MtimeNs: f.Ident.MtimeNs, CtimeNs: f.Ident.CtimeNs,
		Resolved: r, Checked: ck})
}

func (m hitMirror) Detached(f *files.File) { m.x.DropFile(f.Path, f.ID, f.FD) }

func (m hitMirror) Checked(f *files.File) {
	r, ck := f.CheckTimes()
	m.x.FileTimes(f.Path, f.ID, f.FD, r, ck)
}

func (m hitMirror) Used(f *files.File) bool { return m.x.FileUsed(f.Path, f.ID, f.FD) }

// newHitIndex builds the index when the cache is on, its blocks live in the
// arena (off the Go heap) and are small enough for the index; without it
// every read goes through Go, as before.
func (c *Context) newHitIndex() {
	if c.cache == nil || c.arena == nil || c.cache.BlockSize() > cache.MirrorMaxBlock {
		return
	}
	o := hitidx.Options{
		FileSlots:  1 << bits.Len(uint(max(16, 2*c.opts.MaxOpenFiles)-1)),
		BlockSlots: 2 * c.cache.HintSlots(), // pairs: about 4 entries per block
		BlockShift: uint(bits.TrailingZeros64(c.cache.BlockSize())),
		Now:        files.Now,
	}
	switch {
	case c.trust == files.TrustForever:
		o.Mode = hitidx.ModeOpen
	case c.trust > 0:
		o.Mode, o.TrustNs = hitidx.ModeInterval, int64(c.trust)
	}
	if c.opts.PathRecheckMs > 0 {
		o.RecheckNs = int64(time.Duration(c.opts.PathRecheckMs) * time.Millisecond)
	}
	x, err := hitidx.New(o)
	if err != nil {
		return
	}
	if !c.cache.SetMirror(x) {
		x.Close()
		return
	}
	c.files.SetMirror(hitMirror{x})
	c.hit = x
}

// HitIndex is the address of the context's hit region for capi/hit.c, or
// nil when it has none. The region stays mapped until Close returns; capi
// must stop its C readers before it calls Close.
func (c *Context) HitIndex() unsafe.Pointer {
	if c.hit == nil {
		return nil
	}
	return c.hit.Base()
}

// addHitStats adds the hits C served to s: each was one request, one hit
// request and one block copy, and a checked one a revalidation; a readv call
// C served whole adds one readv call, one inline hit per element (each
// element one of the trusted hits) and, when it checked its file, one
// revalidation, as ReadV counts a call served by readvInline; an element
// that spanned several blocks adds one cache hit per block.
func (c *Context) addHitStats(s *stats.Snapshot) {
	if c.hit == nil {
		return
	}
	checked, trusted, n := c.hit.Counters()
	s.Requests += checked + trusted
	s.CacheHitRequests += checked + trusted
	s.CacheHits += checked + trusted + c.hit.ExtraBlocks()
	s.Revalidations += checked
	s.Bytes += n
	s.CacheHitBytes += n
	calls, rchecked, rhits := c.hit.ReadvCounters()
	s.ReadvCalls += calls
	s.Revalidations += rchecked
	s.ReadvInlineHits += rhits
}

// closeHitIndex unmaps the region (Close, after the cache and arena).
func (c *Context) closeHitIndex() {
	if c.hit != nil {
		c.hit.Close()
	}
}
