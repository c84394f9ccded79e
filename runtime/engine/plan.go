package engine

import (
	"fmt"

	"github.com/memtier/memtier/runtime/cache"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// Tiers a span is served by, top of the stack first. CPU plans use the first
// three; device plans (gpuplan.go) the last three.
const (
	tierDRAM    uint8 = iota // copied out of a valid DRAM cache block
	tierFill                 // read from the source into a DRAM cache block, then copied out
	tierSource               // read from the source straight into the destination
	tierFillRun              // one source read for a run of blocks, then into the blocks and out (remote objects)
	tierHBM                  // device to device from an HBM cache block
	tierGDS                  // cuFile from the file straight into device memory
	tierStaged               // DRAM cache and source through pinned buffers to the device
	numTiers
)

var tierNames = [numTiers]string{tierDRAM: "dram cache", tierFill: "source -> dram cache", tierSource: "source",
	tierFillRun: "source -> dram cache (one ranged read per run)",
	tierHBM:     "hbm cache", tierGDS: "gds", tierStaged: "staged (dram cache and source via pinned buffers)"}

// span is one piece of a plan: the file range [off, off+size) and the tier
// that serves it. A tierDRAM span holds a pin on its block (blk) from planning
// until it is copied out or the plan is released, so the bytes the plan saw
// are the bytes it copies. tierFill spans lie inside one cache block each;
// tierSource spans are as long as the merged uncached run they cover.
type span struct {
	off, size uint64
	tier      uint8
	blk       *cache.Block // tierDRAM: the pinned block; nil once released
}

// plan is one CPU request made concrete: which tier serves each byte, the
// policy's decision for the bytes that come from the source, and how many
// tasks execute it. makePlan builds it once; exec is the read, and Explain
// formats the same plan, so what explain says is what a read does.
type plan struct {
	obj       source.Object // the source's open version of the file or object
	off, size uint64
	in        policy.Input // what the policy saw (explain only)
	d         policy.Decision
	// The spans in file order: few[:n] while they are at most two (no
	// allocation on the hot path; a slice into few would make every plan
	// escape to the heap), else more.
	n        int
	few      [2]span
	more     []span
	cached   uint64 // bytes in tierDRAM spans
	prefetch bool   // fill the cache only; there is no destination
}

// planOpts are what a caller adds to the request itself.
type planOpts struct {
	prefetch bool             // force admission, no destination
	exact    bool             // measure page-cache residency of the whole range (explain)
	decided  *policy.Decision // the path and admission decided for a larger whole (chunk pieces)
	// cachedOnly stops after the cache lookups (no policy, no source spans)
	// when the cache does not hold the whole range: readv's inline pass
	// plans the rest with its group.
	cachedOnly bool
}

// makePlan plans [off, off+size) of f (inside the file, size > 0): it pins the
// DRAM cache blocks that hold their part of the range, runs the policy for the
// rest, and splits the rest into fill spans (one per block, when the policy
// admits the request) or merged source spans. The caller must exec or release
// the plan.
func (c *Context) makePlan(p *plan, obj source.Object, off, size uint64, flags uint32, o planOpts) {
	*p = plan{obj: obj, off: off, size: size, prefetch: o.prefetch}
	version := obj.Version()
	if o.prefetch {
		flags |= policy.ReadWillUse
	}
	end := off + size
	if c.cache != nil && c.cache.Resident() > 0 {
		bs := c.cache.BlockSize()
		pin := c.cache.Touch // a read is a use: S3-FIFO sees it
		if o.exact {
			pin = c.cache.Peek // explain looks without changing what is evicted
		}
		for blo := off / bs * bs; blo < end; blo += bs {
			lo, hi := max(off, blo), min(end, blo+bs)
			blk := pin(version, blo/bs)
			if blk == nil {
				continue
			}
			if !blk.Covers(int(lo-blo), int(hi-blo)) {
				blk.Release()
				continue
			}
			p.push(span{off: lo, size: hi - lo, tier: tierDRAM, blk: blk})
			p.cached += hi - lo
		}
	}
	if o.cachedOnly && p.cached != size {
		return
	}
	switch {
	case o.decided != nil:
		p.d = *o.decided
	case o.exact:
		p.in, p.d = c.decideFor(obj, off, size, flags, p.cached, decideExplain)
	default:
		p.d = c.decide(obj, off, size, flags, p.cached)
	}
	if p.cached == size {
		return
	}
	// The gaps between DRAM spans come from the source.
	fill := c.cache != nil && p.d.Admit
	var hits [2]span
	var hitList []span
	if p.more != nil {
		hitList = p.more
	} else {
		copy(hits[:], p.few[:p.n])
		hitList = hits[:p.n]
	}
	p.n, p.more = 0, nil
	pos := off
	for _, h := range hitList {
		c.planGap(p, pos, h.off, fill)
		p.push(h)
		pos = h.off + h.size
	}
	c.planGap(p, pos, end, fill)
}

// planGap adds the spans that serve [lo, hi) from the source: one merged
// source span, or one fill span per cache block when the request fills the
// cache.
func (c *Context) planGap(p *plan, lo, hi uint64, fill bool) {
	if lo >= hi {
		return
	}
	if !fill {
		p.push(span{off: lo, size: hi - lo, tier: tierSource})
		return
	}
	bs := c.cache.BlockSize()
	if _, local := p.obj.(*files.File); !local {
		// A remote read costs a round trip per request: one read per run
		// of blocks (split into parallel parts by the source), not one per
		// cache block. Runs are cut at remoteRunBytes so that IOThreads of
		// them fill the client's parts in flight, and each run's copies
		// into the destination and the cache overlap the other runs' GETs
		// instead of following the whole read; their staging buffers
		// (walk.go fillRun) then hold at most parts in flight x part size.
		run := c.remoteRunBytes()
		for b := lo; b < hi; {
			e := hi
			if hi-b > run {
				e = (b + run) / bs * bs
			}
			p.push(span{off: b, size: e - b, tier: tierFillRun})
			b = e
		}
		return
	}
	for b := lo; b < hi; {
		e := min(hi, (b/bs+1)*bs)
		p.push(span{off: b, size: e - b, tier: tierFill})
		b = e
	}
}

// push appends a span.
func (p *plan) push(s span) {
	switch {
	case p.more != nil:
		p.more = append(p.more, s)
	case p.n < len(p.few):
		p.few[p.n] = s
		p.n++
	default:
		p.more = make([]span, len(p.few), 8)
		copy(p.more, p.few[:])
		p.more = append(p.more, s)
	}
}

// list returns the spans in file order.
func (p *plan) list() []span {
	if p.more != nil {
		return p.more
	}
	return p.few[:p.n]
}

// release unpins every block the plan still holds. Safe to call twice.
func (p *plan) release() { releaseSpans(p.list()) }

func releaseSpans(ss []span) {
	for i := range ss {
		if b := ss[i].blk; b != nil {
			ss[i].blk = nil
			b.Release()
		}
	}
}

// describe formats the plan for memtier_explain: the decision's row and
// reason with its numbers, then what each tier serves.
func (c *Context) describe(p *plan) string {
	return fmt.Sprintf("row %d: %s", p.d.Row, policy.Detail(c.pol, p.in, p.d)) + p.tiersText()
}

// tiersText lists what each tier serves: "; dram cache: 65536 bytes in 1
// spans" per tier that has spans, top of the stack first.
func (p *plan) tiersText() string {
	var n [numTiers]int
	var b [numTiers]uint64
	for _, s := range p.list() {
		n[s.tier]++
		b[s.tier] += s.size
	}
	text := ""
	for t := range numTiers {
		if n[t] > 0 {
			text += fmt.Sprintf("; %s: %d bytes in %d spans", tierNames[t], b[t], n[t])
		}
	}
	return text
}
