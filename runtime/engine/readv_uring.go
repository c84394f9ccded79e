package engine

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/logx"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// uringNoWait: readv's io_uring batch sets RWF_NOWAIT, so it takes only what
// the page cache holds (starting the readahead of the rest) and the cold
// groups go to the second pass, SmallIODepth blocking reads at a time, as
// with the per-group preadv2 first pass. Warm, both settings measured the
// same (iopath BenchmarkBatch256x4K: one io_uring_enter either way). Cold
// (256 random 4 KiB of an evicted 256 MiB file, DRAM cache off, loaded
// 2-core VM) this setting took 3.9-4.0 ms per batch (one outlier 7.6 ms) and
// the whole batch in io_uring without RWF_NOWAIT 4.4-4.8 ms, so the second
// pass keeps the cold reads.
const uringNoWait = true

// pendingGroup is a group of the first pass with its plan, for the groups
// that do not go into the io_uring batch.
type pendingGroup struct {
	gi int
	p  plan
}

// batchGroup is the group of one batch element: its index, and whether the
// element reads into its single member's destination (else a temporary
// buffer that finishBatch scatters).
type batchGroup struct {
	gi     int
	single bool
}

// readvScratch is the batch arrays of one readvNoWait, recycled through
// batchScratch: a 256-element batch would otherwise allocate and zero about
// 20 KiB per call.
type readvScratch struct {
	reqs []source.BatchRead
	meta []batchGroup
}

var batchScratch = sync.Pool{New: func() any { return new(readvScratch) }}

// readvNoWait is readv's first pass over its coalesced groups: it serves,
// and marks done, every group that it can serve without blocking on the
// disk; the others are left to the second pass.
//
// A group whose plan is one source span on the buffered path (no byte in the
// DRAM cache, not admitted to it: every group when the cache is off) is read
// with the others like it in batches of the source (io_uring: one
// io_uring_enter per chunk of groups, see batchChunkNoWait, instead of one
// preadv2 each), when the source can batch and MEMTIER_IO_URING is not 0; a
// readv that had such groups and read them one by one counts why
// (readv_uring_fallback_*). From phase1ParallelMin groups on, chunks of
// batchChunk groups are handed to one worker per CPU, each planning, reading
// and finishing its own (planning all groups on the caller first left the
// helper idle for that time; with sourceOnly's one decision per run of
// groups, bench_hot_path's cache-off row went from 0.98x to 1.08x a C pread
// loop, medians of 6 interleaved runs under chrt -f 10, which keeps the
// loaded 2-core VM's other work off its CPUs; at normal priority there the
// helper seldom gets a CPU in time and both made 0.68-0.70x).
// The other groups (cache hits and fills, O_DIRECT) run as before: on the
// caller alone, or from phase1ParallelMin groups on as many workers as CPUs.
func (c *Context) readvNoWait(v []IOVec, groups []readvGroup) error {
	if len(groups) == 0 {
		return nil // every element was copied inline, failed its checks or was empty
	}
	br, _ := c.src.(source.BatchReader)
	switch {
	case c.opts.NoIOUring:
		return c.readvPerGroup(v, groups, &c.st.ReadvUringFallbackOff)
	case br == nil:
		return c.readvPerGroup(v, groups, &c.st.ReadvUringFallbackUnavailable)
	}
	if ok, why := br.CanBatch(); !ok {
		logx.Warnf("uring.fallback", "io_uring unavailable (%s): readv reads with one preadv2 per element", why)
		return c.readvPerGroup(v, groups, &c.st.ReadvUringFallbackUnavailable)
	}
	// Each chunk of groups is planned, read and finished by the worker that
	// takes it, so the per-group Go work (plan, policy, results) runs on
	// both CPUs as the kernel's copies do, instead of serially before them.
	par := phase1Par(len(groups))
	per := len(groups)
	if par > 1 {
		per = batchChunk
	}
	n := (len(groups) + per - 1) / per
	rests := make([][]pendingGroup, n)
	var refused atomic.Bool
	err := c.rd.Run(n, par, func(k int) error {
		lo := k * per
		rests[k] = c.batchChunkNoWait(br, v, groups, lo, min(lo+per, len(groups)), &refused)
		return nil
	})
	var rest []pendingGroup
	for _, r := range rests {
		rest = append(rest, r...)
	}
	if err != nil {
		for k := range rest {
			rest[k].p.release()
		}
		return err
	}
	if len(rest) == 0 {
		return nil
	}
	return c.rd.Run(len(rest), phase1Par(len(rest)), func(k int) error {
		c.execGroupNoWait(v, &groups[rest[k].gi], &rest[k].p)
		return nil
	})
}

// batchChunkNoWait plans groups[lo:hi]; reads those whose plan is one
// buffered source span in one batch of br (ranges the source refused stay
// for the second pass, and the first refusal of the call, tracked by
// refused, counts readv_uring_fallback_unavailable); finishes the groups
// read; and returns the other groups with their plans. Safe to run on
// several workers at once for disjoint ranges of groups.
func (c *Context) batchChunkNoWait(br source.BatchReader, v []IOVec, groups []readvGroup, lo, hi int,
	refused *atomic.Bool) []pendingGroup {
	var rest []pendingGroup
	sc := batchScratch.Get().(*readvScratch)
	reqs, meta := slices.Grow(sc.reqs, hi-lo), slices.Grow(sc.meta, hi-lo)
	defer func() {
		clear(reqs) // drop the references to files and destinations
		sc.reqs, sc.meta = reqs[:0], meta[:0]
		batchScratch.Put(sc)
	}()
	var dc decisionMemo
	noCache := c.cache == nil || c.cache.Resident() == 0
	for gi := lo; gi < hi; gi++ {
		g := &groups[gi]
		if !noCache || !c.sourceOnly(&dc, g) {
			rest = append(rest, pendingGroup{gi: gi})
			pg := &rest[len(rest)-1]
			c.makePlan(&pg.p, g.f, g.lo, g.hi-g.lo, 0, planOpts{})
			if !batchable(&pg.p) {
				continue
			}
			rest = rest[:len(rest)-1] // no pins to release: one source span
		}
		buf, single := c.groupBuffer(v, g)
		reqs = append(reqs, source.BatchRead{Obj: g.f, Dst: buf, Off: g.lo})
		meta = append(meta, batchGroup{gi, single})
	}
	if len(reqs) == 0 {
		return rest
	}
	submits, err := br.ReadBatch(reqs, uringNoWait)
	if err != nil {
		for i := range reqs {
			reqs[i].WouldBlock = true
		}
		if !refused.Swap(true) {
			c.st.ReadvUringFallbackUnavailable.Add(1)
		}
		return rest
	}
	c.st.ReadvUringBatches.Add(uint64(submits))
	c.finishBatch(v, groups, reqs, meta)
	return rest
}

// phase1Par is how many workers run n first-pass jobs: the caller alone
// below phase1ParallelMin (waking a helper costs more than a few page-cache
// reads), else one per CPU.
func phase1Par(n int) int {
	if n < phase1ParallelMin {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// batchChunk is the size of one batch when a first pass splits its ranges
// over the CPUs: chunks are handed out to the workers one at a time, so a
// worker that gets no CPU soon (a loaded machine) leaves its share to the
// others instead of holding half the batch, at one io_uring_enter (about a
// microsecond) per 64 reads of about a microsecond each.
const batchChunk = 64

// readvPerGroup is the first pass without batches: each group is planned and
// served on its own (one RWF_NOWAIT preadv2 per source span). When some
// group could have gone into a batch, *fallback counts the call.
func (c *Context) readvPerGroup(v []IOVec, groups []readvGroup, fallback *atomic.Uint64) error {
	var batchable1 atomic.Bool
	err := c.rd.Run(len(groups), phase1Par(len(groups)), func(gi int) error {
		var p plan
		g := &groups[gi]
		c.makePlan(&p, g.f, g.lo, g.hi-g.lo, 0, planOpts{})
		if batchable(&p) && !batchable1.Load() {
			batchable1.Store(true)
		}
		c.execGroupNoWait(v, g, &p)
		return nil
	})
	if batchable1.Load() {
		fallback.Add(1)
	}
	return err
}

// batchable reports whether plan p is one source span on the buffered path:
// what the source's batch reads.
func batchable(p *plan) bool {
	ss := p.list()
	return len(ss) == 1 && ss[0].tier == tierSource && p.d.Path == policy.PathBuffered
}

// finishBatch records the groups of a batch that were read: their bytes go
// to their members, who get their results. A group that would have blocked
// or failed stays for the second pass, which reads it again and reports its
// own error (as a failed RWF_NOWAIT pread does). The counters are what
// scatter and account would add per member (one buffered request of Size
// bytes each), added once per batch: four atomic adds per element were a
// measurable part of a 4 KiB element's cost.
func (c *Context) finishBatch(v []IOVec, groups []readvGroup, reqs []source.BatchRead, meta []batchGroup) {
	var read, members, bytes uint64
	for k := range reqs {
		r := &reqs[k]
		if r.Err != nil || r.WouldBlock {
			continue
		}
		g := &groups[meta[k].gi]
		for _, i := range g.members {
			e := &v[i]
			if !meta[k].single {
				if err := copyOut("readv", e.Dst[:e.Size], r.Dst[e.Off-g.lo:e.Off-g.lo+e.Size]); err != nil {
					e.Err, e.Result = err, int64(errs.CodeOf(err)) // its own bad destination
					continue
				}
			}
			e.Result = int64(e.Size)
			members++
			bytes += e.Size
		}
		g.done = true
		read++
	}
	c.st.CoalescedReads.Add(read)
	c.st.ReadvUringReads.Add(read)
	c.st.Bytes.Add(bytes)
	c.st.BufferedRequests.Add(members)
	c.st.BufferedBytes.Add(bytes)
}

// decisionMemo is the last policy decision of a first-pass chunk, reused for
// the next group of the same object and size when the policy's answer cannot
// depend on the range (no residency input): the per-group plan and policy
// were a tenth of a 256 x 4 KiB cache-off readv's CPU time outside the kernel.
type decisionMemo struct {
	obj  source.Object
	size uint64
	d    policy.Decision
	ok   bool
}

// sourceOnly reports whether group g, when no DRAM cache block holds a byte
// of any file (cache off or empty), is planned as one buffered source span,
// the plan batchable reports, without building the plan: no span can be a
// hit, so the plan is the decision's path for the whole range, filling the
// cache only when admitted. It decides as makePlan does, reusing memo's
// decision where it must be the same, and logs the decision when it returns
// true (else makePlan, which the caller runs then, logs it).
func (c *Context) sourceOnly(memo *decisionMemo, g *readvGroup) bool {
	size := g.hi - g.lo
	if !memo.ok || memo.obj != g.f || memo.size != size {
		in := policy.Input{Target: policy.TargetCPU, Size: size, DirectRefused: c.src.DirectRefused(g.f)}
		if policy.NeedsResidency(c.pol, in) {
			memo.ok = false
			return false // makePlan probes the range
		}
		*memo = decisionMemo{obj: g.f, size: size, d: policy.Decide(c.pol, in), ok: true}
	}
	if memo.d.Path != policy.PathBuffered || c.cache != nil && memo.d.Admit {
		return false // makePlan plans (and logs) the group
	}
	c.logDecision(g.f, g.lo, size, 0, memo.d)
	return true
}
