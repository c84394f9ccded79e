package engine

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"syscall"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/interrupt"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// IOVec is one element of a vectored read. Result is set to Size on success
// or to a negative status; Err holds the detail of a failure.
type IOVec struct {
	Path   string
	Off    uint64
	Size   uint64
	Dst    []byte
	Result int64
	Err    error
}

// phase1ParallelMin: below this many groups, phase 1 runs on the caller
// alone (a helper's wake-up is tens of microseconds to a millisecond here).
const phase1ParallelMin = 64

// maxCoalesce bounds the span of one coalesced read so that merging adjacent
// elements never needs a temporary buffer larger than one task.
func (c *Context) maxCoalesce() uint64 { return c.opts.TaskBytes }

type readvGroup struct {
	f       source.Object
	members []int // indices into v, sorted by offset
	lo, hi  uint64
	done    bool // served in phase 1
}

// ReadV serves every element of v; elements of the same file are sorted by
// offset and adjacent or overlapping ones are coalesced into one read (gaps are
// never read), and the groups run in parallel, SmallIODepth at a time. An
// element's path may be a URL (s3://, http(s)://): those are read through
// the plan path beside the local batch (readvRemote). Each element gets its
// own Result; the returned error is the lowest-index failure.
func (c *Context) ReadV(v []IOVec, target int, flags uint32) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	c.st.ReadvCalls.Add(1)
	fail := func(i int, err error) {
		v[i].Err, v[i].Result = err, int64(errs.CodeOf(err))
	}
	c.st.Requests.Add(uint64(len(v)))
	var gpuErr error // target CUDA without a usable backend
	if target == policy.TargetCUDA {
		gpuErr = gpuUsable("readv", "", -1)
	}
	byPath := map[string][]int{}
	var gpuIdx []int
	for i := range v {
		e := &v[i]
		e.Result, e.Err = 0, nil
		switch {
		case gpuErr != nil:
			fail(i, errs.At(errs.Unsupported, "readv", e.Path, -1, "%s", gpu.Reason()))
		case target != policy.TargetCPU && target != policy.TargetCUDA:
			fail(i, errs.At(errs.InvalidArg, "readv", e.Path, -1, "unknown target %d", target))
		case e.Size == 0:
			c.account(served{})
		default:
			if err := checkRange("readv", e.Path, e.Off, e.Size, len(e.Dst), flags); err != nil {
				fail(i, err)
				continue
			}
			if target == policy.TargetCUDA {
				gpuIdx = append(gpuIdx, i)
				continue
			}
			byPath[e.Path] = append(byPath[e.Path], i)
		}
	}
	if len(gpuIdx) > 0 {
		c.readvGPU(v, gpuIdx)
	}
	// URLs never enter the local batch (io_uring and RWF_NOWAIT are about
	// local files): they run through the plan path on their own goroutine,
	// SmallIODepth at a time, while the local groups batch (readvRemote).
	var remoteIdx [][]int
	for path, idx := range byPath {
		if remote.HasScheme(path) {
			remoteIdx = append(remoteIdx, idx)
			delete(byPath, path)
		}
	}
	waitRemote := func() {}
	if len(remoteIdx) > 0 {
		done := make(chan struct{}, 1)
		go func() {
			defer func() { done <- struct{}{} }()
			c.readvRemote(v, remoteIdx, flags, fail)
		}()
		// Also on a panic out of the local passes: ReadV must not return
		// while the goroutine still writes into the caller's elements. The
		// caller's interrupt check runs while it waits (interrupt.Collect).
		var once sync.Once
		waitRemote = func() { once.Do(func() { interrupt.Collect(done, 1) }) }
		defer waitRemote()
	}
	var groups []readvGroup
	var opened []source.Object
	inline := c.cache != nil && c.cache.Resident() > 0
	for _, idx := range byPath {
		var f source.Object
		if f, groups = c.readvPrepare(v, idx, flags, inline, groups, fail); f != nil {
			opened = append(opened, f)
		}
	}
	defer func() {
		for _, f := range opened {
			f.Release()
		}
	}()
	// Phase 1, on as many workers as CPUs: groups already in the DRAM cache
	// or the page cache are served without blocking; the page-cache probe of
	// a cold group starts its readahead, so phase 2 waits on I/O in flight.
	var cold []int
	runErr := c.readvNoWait(v, groups)
	if runErr == nil {
		for gi := range groups {
			if !groups[gi].done {
				cold = append(cold, gi)
			}
		}
		// Phase 2: the cold groups, SmallIODepth blocking reads at a time.
		runErr = c.rd.Run(len(cold), c.opts.SmallIODepth, func(i int) error {
			c.readGroup(v, &groups[cold[i]])
			return nil
		})
	}
	if runErr != nil { // a recovered panic: mark what was not finished
		failUnfinished(v, groups, runErr, fail)
	}
	waitRemote()
	for i := range v {
		if v[i].Err != nil {
			return v[i].Err
		}
	}
	return nil
}

// readvPrepare opens path, the name of the elements idx of v, as a read
// with flags does; fails the elements past its end (and all of them when
// the open fails); with inline, copies those the DRAM cache holds whole
// (readvInline); and appends the coalesced groups of the rest to groups. It
// returns the object the groups read, which the caller releases (nil when
// the open failed), and groups.
func (c *Context) readvPrepare(v []IOVec, idx []int, flags uint32, inline bool, groups []readvGroup,
	fail func(int, error)) (source.Object, []readvGroup) {
	f, err := c.openFlags(v[idx[0]].Path, flags)
	if err != nil {
		for _, i := range idx {
			fail(i, err)
		}
		return nil, groups
	}
	rest := idx[:0]
	for _, i := range idx {
		if err := checkEOF(f, v[i].Off, v[i].Size); err != nil {
			fail(i, err)
			continue
		}
		rest = append(rest, i)
	}
	idx = rest
	if inline {
		idx = c.readvInline(f, v, idx, fail)
	}
	sortByOffset(v, idx)
	// At most one group per element left after the inline pass: one
	// allocation instead of doubling appends (31 KB per 256-element
	// cache-off call, the most readv allocated), none when all hit.
	groups = slices.Grow(groups, len(idx))
	var g *readvGroup
	for k, i := range idx {
		e := &v[i]
		end := e.Off + e.Size
		if g != nil && e.Off <= g.hi && max(g.hi, end)-g.lo <= c.maxCoalesce() {
			g.members = idx[k-len(g.members) : k+1]
			g.hi = max(g.hi, end)
			continue
		}
		groups = append(groups, readvGroup{f: f, members: idx[k : k+1], lo: e.Off, hi: end})
		g = &groups[len(groups)-1]
	}
	return f, groups
}

// failUnfinished fails, with err (a recovered panic), every member of groups
// that has no result yet.
func failUnfinished(v []IOVec, groups []readvGroup, err error, fail func(int, error)) {
	for _, g := range groups {
		for _, i := range g.members {
			if v[i].Result == 0 && v[i].Err == nil {
				fail(i, err)
			}
		}
	}
}

// readvInline copies the elements idx of v that the DRAM cache holds whole
// (no I/O, no blocking) on the caller's thread and returns the others. A hit
// is a memcpy, cheaper than any hand-off: splitting 256 cached 4 KiB
// elements over the 2 CPUs of the build VM measured slower from Python
// (131-137 µs against 84-90 µs per batch), as the second thread's wake-up and
// the shared memory bandwidth cost more than the copies it takes over.
func (c *Context) readvInline(f source.Object, v []IOVec, idx []int, fail func(int, error)) []int {
	rest := idx[:0]
	for _, i := range idx {
		if served, err := c.readInline(f, &v[i]); err != nil {
			fail(i, err)
		} else if !served {
			rest = append(rest, i)
		}
	}
	return rest
}

// readInline serves element e with no I/O when the DRAM cache holds all
// of it, and reports whether it did. The copies cannot fail but on a bad
// destination: that fault (the goroutine runs with debug.SetPanicOnFault)
// is e's own IO error, so one bad element does not fail the others (the
// memtier_readv contract), as on the paths that read from the source.
func (c *Context) readInline(f source.Object, e *IOVec) (bool, error) {
	var p plan
	c.makePlan(&p, f, e.Off, e.Size, 0, planOpts{cachedOnly: true})
	if p.cached != e.Size {
		p.release()
		return false, nil
	}
	s, err := guarded("readv", func() (served, error) { return c.exec(&p, e.Dst[:e.Size], true) })
	if err != nil {
		return true, err // exec released p's pins
	}
	c.st.ReadvInlineHits.Add(1)
	e.Result = int64(e.Size)
	c.account(s)
	return true, nil
}

// execGroupNoWait serves g by its plan p if it can without blocking on the
// disk: p's cached spans are copied and its other bytes come from the page
// cache with RWF_NOWAIT preads (into cache blocks when the group is
// admitted, so warm samples are admitted on their first read and later
// epochs hit the DRAM cache). Sets g.done when served; otherwise phase 2
// reads the group.
func (c *Context) execGroupNoWait(v []IOVec, g *readvGroup, p *plan) {
	buf, single := c.groupBuffer(v, g)
	s, err := guarded("readv", func() (served, error) { return c.exec(p, buf, true) })
	if isFault(err) { // a single member's bad destination (exec released p's pins)
		for _, i := range g.members {
			v[i].Err, v[i].Result = err, int64(errs.CodeOf(err))
		}
		g.done = true
		return
	}
	if err != nil {
		return
	}
	c.st.CoalescedReads.Add(1)
	c.scatter(v, g, buf, single, s)
	g.done = true
}

// isFault reports whether err is guarded's error of a fault on a
// destination (errs.FromPanic's IO with EFAULT).
func isFault(err error) bool {
	var e *errs.Error
	return errors.As(err, &e) && e.Errno == syscall.EFAULT && e.Code == errs.IO
}

// groupBuffer returns where g's range is read: the member's own dst for a
// single-member group, else a temporary buffer (bounded by maxCoalesce).
func (c *Context) groupBuffer(v []IOVec, g *readvGroup) ([]byte, bool) {
	if len(g.members) == 1 {
		e := &v[g.members[0]]
		return e.Dst[:e.Size], true
	}
	return make([]byte, g.hi-g.lo), false
}

// scatter copies a group's bytes to its members and records their results.
func (c *Context) scatter(v []IOVec, g *readvGroup, buf []byte, single bool, s served) {
	for _, i := range g.members {
		e := &v[i]
		if !single {
			if err := copyOut("readv", e.Dst[:e.Size], buf[e.Off-g.lo:e.Off-g.lo+e.Size]); err != nil {
				e.Err, e.Result = err, int64(errs.CodeOf(err))
				continue
			}
		}
		e.Result = int64(e.Size)
		c.account(share(s, e.Size))
	}
}

// copyOut copies src into dst, a caller's destination, and returns the IO
// error of a fault on dst (a bad destination: the goroutine runs with
// debug.SetPanicOnFault) instead of panicking, so that a bad member of a
// coalesced group fails alone, as a member read by a pread of its own does
// (EFAULT), and the group's other members get their bytes.
func copyOut(op string, dst, src []byte) error {
	_, err := guarded(op, func() (served, error) {
		copy(dst, src)
		return served{}, nil
	})
	return err
}

// readGroup reads one coalesced range and scatters it to its members.
func (c *Context) readGroup(v []IOVec, g *readvGroup) {
	c.st.CoalescedReads.Add(1)
	var s served
	var err error
	if len(g.members) == 1 {
		e := &v[g.members[0]]
		s, err = guarded("readv", func() (served, error) { return c.serve(g.f, e.Off, e.Size, e.Dst[:e.Size], 0, false) })
	} else {
		buf := make([]byte, g.hi-g.lo)
		s, err = c.serve(g.f, g.lo, g.hi-g.lo, buf, 0, false)
		if err == nil {
			for _, i := range g.members {
				e := &v[i]
				if cerr := copyOut("readv", e.Dst[:e.Size], buf[e.Off-g.lo:e.Off-g.lo+e.Size]); cerr != nil {
					e.Err, e.Result = cerr, int64(errs.CodeOf(cerr))
				}
			}
		}
	}
	for _, i := range g.members {
		e := &v[i]
		if err != nil {
			e.Err, e.Result = err, int64(errs.CodeOf(err))
			continue
		}
		if e.Err != nil {
			continue // its own bad destination (copyOut)
		}
		e.Result = int64(e.Size)
		c.account(share(s, e.Size))
	}
}

// share attributes n bytes of a group to the path that moved most of it.
func share(s served, n uint64) served {
	switch {
	case s.direct >= s.buffered && s.direct >= s.cache && s.direct > 0:
		return served{direct: n}
	case s.buffered >= s.cache && s.buffered > 0:
		return served{buffered: n}
	}
	return served{cache: n}
}

// sortByOffset sorts idx (indices into v) by v[i].Off, ties in any order.
// When every offset leaves room for the index in the low bits of a uint64,
// it sorts packed keys with the ordered sort, which makes no call per
// comparison: comparator calls were a tenth of a 256-element cache-off
// readv's CPU time outside the kernel on the build VM.
func sortByOffset(v []IOVec, idx []int) {
	bits := uint(0)
	for 1<<bits < len(v) {
		bits++
	}
	limit := uint64(1) << (64 - bits)
	keys := make([]uint64, len(idx))
	for k, i := range idx {
		if v[i].Off >= limit {
			slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(v[a].Off, v[b].Off) })
			return
		}
		keys[k] = v[i].Off<<bits | uint64(i)
	}
	slices.Sort(keys)
	mask := uint64(1)<<bits - 1
	for k, key := range keys {
		idx[k] = int(key & mask)
	}
}
