package engine

import (
	"github.com/memtier/memtier/runtime/cache"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// serveUnit serves one unit of LoadChunks and finalizes its chunks. Failures
// are per chunk, never returned: Run stops handing out units after an error,
// and one bad chunk must not cost the others.
func (l *chunkLoad) serveUnit(f source.Object, u *chunkUnit) {
	l.c.st.CoalescedReads.Add(1)
	switch {
	case u.piece:
		l.servePiece(f, u)
	case len(u.members) == 1:
		l.serveOne(f, u.members[0])
	default:
		l.serveRun(f, u)
	}
}

// serveOne serves a chunk of at most one task on its own, not admitted to the
// DRAM cache (policy.ReadNoAdmit: unlike READ_ONCE it keeps the page cache, so
// the next process finds the bytes warm): bytes already in the DRAM cache are
// copied from it, the rest is read straight into the destination. Staging a
// chunk through cache blocks costs a second copy of every byte and evicts
// what prefetch put there; measured on 100k random 4-64 KiB chunks that made
// load_chunks slower than a Python pread loop. Hot chunks belong in the cache
// through memtier_prefetch or memtier_readv, which admit.
func (l *chunkLoad) serveOne(f source.Object, i int) {
	e := &l.ch[i]
	s, err := guarded("load_chunks", func() (served, error) {
		return l.c.serve(f, e.Off, e.Size, e.Dst[:e.Size], l.flags, false)
	})
	if err != nil {
		l.fail(i, err)
		return
	}
	l.c.account(s)
	l.done(i)
}

// servePiece serves one task-size piece of a large chunk by the path decided
// for the whole chunk; the last piece to finish finalizes the chunk.
func (l *chunkLoad) servePiece(f source.Object, u *chunkUnit) {
	i := u.members[0]
	e := &l.ch[i]
	p := l.pieces[i]
	dst := e.Dst[u.lo-e.Off : u.hi-e.Off]
	s, err := guarded("load_chunks", func() (served, error) {
		return l.c.serveDecided(f, u.lo, dst, p.path, p.admit)
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.add(s)
	if err != nil && p.err == nil {
		p.err = err
	}
	if p.left.Add(-1) > 0 {
		return
	}
	if p.err != nil {
		l.fail(i, p.err)
		return
	}
	l.c.account(p.s)
	l.done(i)
}

// serveRun serves a run of adjacent chunks. Chunks whose bytes are all in the
// DRAM cache are copied from it; each stretch of the others is read with one
// preadv straight into the chunks' destinations, with no staging buffer. A
// run is a scan (the tensors of a checkpoint, consecutive samples), so its
// bytes are not admitted into the DRAM cache: that would stage every byte
// through cache blocks, one pread per block plus a copy. With direct_mode
// ALWAYS (on a file system that takes O_DIRECT) or REQUIRED every uncached
// byte must go O_DIRECT, which preadv into unaligned caller buffers cannot
// do, so the chunks are served one by one (REQUIRED then reports a refusal).
func (l *chunkLoad) serveRun(f source.Object, u *chunkUnit) {
	c := l.c
	if mode := c.pol.DirectMode; mode == policy.DirectRequired || mode == policy.DirectAlways && !c.src.DirectRefused(f) {
		for _, i := range u.members {
			l.serveOne(f, i)
		}
		return
	}
	cached := c.cache != nil && c.cache.Resident() > 0
	start := -1 // position in u.members of the pending uncached stretch
	for k, i := range u.members {
		e := &l.ch[i]
		hit := false
		var err error
		if cached {
			_, err = guarded("load_chunks", func() (served, error) {
				hit = c.copyCached(f, e.Off, e.Dst[:e.Size])
				return served{}, nil
			})
		}
		if hit || err != nil {
			if start >= 0 {
				l.readStretch(f, u.members[start:k])
				start = -1
			}
			if err != nil {
				l.fail(i, err)
				continue
			}
			c.account(served{cache: e.Size})
			l.done(i)
			continue
		}
		if start < 0 {
			start = k
		}
	}
	if start >= 0 {
		l.readStretch(f, u.members[start:])
	}
}

// readStretch reads adjacent chunks (members, in file order) with one preadv.
// A file that shrank since the size check fails the chunks past its new end.
// A remote object has no preadv: readStretchRemote.
func (l *chunkLoad) readStretch(f source.Object, members []int) {
	c := l.c
	lf, local := f.(*files.File)
	if !local {
		l.readStretchRemote(f, members)
		return
	}
	bufs := make([][]byte, len(members))
	for k, i := range members {
		bufs[k] = l.ch[i].Dst[:l.ch[i].Size]
	}
	lo := l.ch[members[0]].Off
	got, err := c.rd.ReadBufferedV(lf, bufs, int64(lo))
	end := lo + uint64(got)
	for _, i := range members {
		e := &l.ch[i]
		switch {
		case e.Off+e.Size <= end:
			c.account(served{buffered: e.Size})
			l.done(i)
		case err != nil:
			l.fail(i, err)
		default:
			l.fail(i, source.Shrunk(lf, e.Off, e.Size))
		}
	}
}

// readStretchRemote reads adjacent chunks of a remote object with one read
// of the source (a round trip per request: the source splits it into
// parallel ranged GETs) into a buffer of the stretch's size, at most one
// task (planChunks), then copies each chunk out.
func (l *chunkLoad) readStretchRemote(f source.Object, members []int) {
	c := l.c
	first, last := &l.ch[members[0]], &l.ch[members[len(members)-1]]
	buf := make([]byte, last.Off+last.Size-first.Off)
	_, err := guarded("load_chunks", func() (served, error) {
		_, err := c.src.ReadAt(f, buf, first.Off, source.PathBuffered)
		return served{}, err
	})
	for _, i := range members {
		if err != nil {
			l.fail(i, err)
			continue
		}
		e := &l.ch[i]
		if cerr := copyOut("load_chunks", e.Dst[:e.Size], buf[e.Off-first.Off:]); cerr != nil {
			l.fail(i, cerr) // its own bad destination: the others get their bytes
			continue
		}
		c.account(served{buffered: l.ch[i].Size})
		l.done(i)
	}
}

// guarded runs fn for operation op and turns a panic into its error
// (errs.FromPanic): a memory fault while copying into a bad destination (the
// goroutine runs with SetPanicOnFault) is then the IO error of the chunk or
// element fn served, and the other units and groups go on.
func guarded(op string, fn func() (served, error)) (s served, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = served{}, errs.FromPanic(op, p)
		}
	}()
	return fn()
}

// copyCached copies [off, off+len(dst)) out of the DRAM cache if every block
// of it is valid, counting one hit per block; otherwise it copies nothing.
func (c *Context) copyCached(f source.Object, off uint64, dst []byte) bool {
	bs := c.cache.BlockSize()
	end := off + uint64(len(dst))
	first, last := off/bs, (end-1)/bs
	var stack [4]*cache.Block
	blks := stack[:0]
	defer func() {
		for _, b := range blks {
			b.Release()
		}
	}()
	for idx := first; idx <= last; idx++ {
		b := c.cache.Touch(f.Version(), idx)
		if b == nil {
			return false
		}
		blks = append(blks, b)
		blo := idx * bs
		if !b.Covers(int(max(off, blo)-blo), int(min(end, blo+bs)-blo)) {
			return false
		}
	}
	for k, b := range blks {
		blo := (first + uint64(k)) * bs
		lo, hi := max(off, blo), min(end, blo+bs)
		copy(dst[lo-off:hi-off], b.Data()[lo-blo:hi-blo])
	}
	c.st.CacheHits.Add(uint64(len(blks)))
	return true
}
