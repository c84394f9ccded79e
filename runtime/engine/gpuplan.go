package engine

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// Device plans: a read into CUDA device memory as spans over the tiers, like
// a CPU plan (plan.go), with three device tiers:
//   - tierHBM: an HBM cache block on the destination's device, copied device
//     to device;
//   - tierGDS: a range neither cache holds that policy.DecideGPU sends to
//     GDS, read by cuFile straight into device memory;
//   - tierStaged: everything else, in merged runs through the Stager's
//     pinned pipeline. Each pinned buffer is filled by a CPU plan of its
//     range (planHost): DRAM cache blocks are copied into it, the rest is
//     read from the source, while the previous buffer is copied to the
//     device. So a DRAM-cache hit reaches the device at the pipeline's
//     speed, not one pageable copy and stream sync per cache block.
//
// A device plan holds no pins: a staged run plans its buffers' DRAM spans
// again as it fills them, and an HBM block evicted since planning is served
// staged. Device reads never fill the DRAM cache.

// devOpts are what a device request adds to its range.
type devOpts struct {
	noHBM   bool // skip the HBM tier (filling an HBM block)
	exact   bool // explain: plan what a read would do, without failing for gds_mode REQUIRED
	managed bool // the destination is managed memory, which cuFile cannot read into
}

// planDevice plans [off, off+size) of obj (inside it, size > 0) into device
// memory on device dev. The HBM tier comes first when its cache lives on dev;
// each range between HBM spans is split at the DRAM cache's runs, and every
// piece that no cache holds goes to GDS or staged as the policy says. Errors:
// errs.Unsupported with gds_mode REQUIRED when GDS cannot serve a piece that
// no cache holds.
func (c *Context) planDevice(p *plan, obj source.Object, off, size uint64, dev int, flags uint32, o devOpts) error {
	*p = plan{obj: obj, off: off, size: size}
	end := off + size
	var h *gpu.HBMCache
	if !o.noHBM {
		h = c.tgt.HBMOn(dev)
	}
	if h == nil {
		return c.planDeviceGap(p, off, end, o)
	}
	bs := h.BlockSize()
	pos := off
	for blo := off / bs * bs; blo < end; blo += bs {
		lo, hi := max(off, blo), min(end, blo+bs)
		if n, ok := h.Contains(gpu.BlockKey{File: obj.Version(), Index: blo / bs}); !ok || hi-blo > n {
			continue
		}
		if err := c.planDeviceGap(p, pos, lo, o); err != nil {
			return err
		}
		p.push(span{off: lo, size: hi - lo, tier: tierHBM})
		pos = hi
	}
	return c.planDeviceGap(p, pos, end, o)
}

// planDeviceGap adds the spans of [lo, hi), a range the HBM tier does not
// serve: DRAM-cache runs staged, the pieces between them GDS or staged.
func (c *Context) planDeviceGap(p *plan, lo, hi uint64, o devOpts) error {
	if lo >= hi {
		return nil
	}
	if c.cache == nil || c.cache.Resident() == 0 {
		return c.planDeviceSource(p, lo, hi, o)
	}
	bs := c.cache.BlockSize()
	pos := lo
	for blo := lo / bs * bs; blo < hi; blo += bs {
		a, b := max(lo, blo), min(hi, blo+bs)
		blk := c.cache.Peek(p.obj.Version(), blo/bs) // planning is not a use: the fill touches it
		if blk == nil {
			continue
		}
		covers := blk.Covers(int(a-blo), int(b-blo))
		blk.Release()
		if !covers {
			continue
		}
		if err := c.planDeviceSource(p, pos, a, o); err != nil {
			return err
		}
		p.pushStaged(a, b-a)
		p.cached += b - a
		pos = b
	}
	return c.planDeviceSource(p, pos, hi, o)
}

// planDeviceSource adds [lo, hi), which no cache holds: GDS when the policy
// says so for it, else staged.
func (c *Context) planDeviceSource(p *plan, lo, hi uint64, o devOpts) error {
	if lo >= hi {
		return nil
	}
	d := c.decideDevice(p.obj, lo, hi-lo, 0, 0, o.managed)
	switch {
	case d.Path == policy.PathGDS:
		p.push(span{off: lo, size: hi - lo, tier: tierGDS})
	case c.opts.GDSMode == policy.GDSRequired && !o.exact: // explain reports it itself
		return errs.At(errs.Unsupported, "read", p.obj.Name(), int64(lo),
			"gds_mode REQUIRED but GDS cannot serve this read: %s", d.Reason)
	default:
		p.pushStaged(lo, hi-lo)
	}
	return nil
}

// decideDevice runs policy.DecideGPU for [off, off+size) of obj with hbm and
// dram bytes of it already cached. GDS needs a local file's O_DIRECT
// descriptor and device memory that is not managed, so anything else is
// staged.
func (c *Context) decideDevice(obj source.Object, off, size, hbm, dram uint64, managed bool) policy.Decision {
	in := policy.GPUInput{Size: size, Off: off, FileSize: obj.Size(), HBMBytes: hbm, CachedBytes: dram,
		GPUAvailable: true, GDSUnavailable: c.tgt.GDSUnavailable(), FileFallback: c.tgt.FileFallback(obj.Version()),
		GDSCompat: c.tgt.GDSCompat()}
	if _, local := obj.(*files.File); !local {
		in.GDSUnavailable = "GDS reads local files only"
	}
	if managed { // cuFile answers CU_FILE_CUDA_MEMORY_TYPE_INVALID
		in.GDSUnavailable = "the destination is managed memory (cuMemAllocManaged), which cuFile cannot read into"
	}
	return policy.DecideGPU(c.gpuPolicy(), in)
}

// pushStaged appends a staged span, merged into the previous span when that
// is a staged span ending at off.
func (p *plan) pushStaged(off, size uint64) {
	ss := p.list()
	if n := len(ss); n > 0 && ss[n-1].tier == tierStaged && ss[n-1].off+ss[n-1].size == off {
		ss[n-1].size += size
		return
	}
	p.push(span{off: off, size: size, tier: tierStaged})
}

// serveDevice fills device memory [dst, dst+size) on device dev with the
// bytes of obj at off (inside it): it plans the request and executes it.
func (c *Context) serveDevice(obj source.Object, off, size uint64, dst uintptr, dev int, flags uint32, o devOpts) (gpuServed, error) {
	var p plan
	if err := c.planDevice(&p, obj, off, size, dev, flags, o); err != nil {
		return gpuServed{}, err
	}
	return c.execDevice(&p, dst, flags)
}

// execDevice executes a device plan into [dst, dst+p.size): the HBM spans
// first, all at once (one stream, one wait), then the others span by span
// (a staged span parallelises itself over the Stager's lanes).
func (c *Context) execDevice(p *plan, dst uintptr, flags uint32) (gpuServed, error) {
	var total gpuServed
	hit, err := c.hbmSpans(p, dst)
	if err != nil {
		return total, err
	}
	for i, s := range p.list() {
		at := dst + uintptr(s.off-p.off)
		var got gpuServed
		var err error
		switch s.tier {
		case tierHBM:
			if hit[i] {
				got = gpuServed{hbm: s.size}
			} else { // evicted since planning
				got, err = c.stagedRead(p.obj, s.off, s.size, at, flags)
			}
		case tierGDS:
			var fellBack bool
			got, fellBack, err = c.gdsRead(p.obj, s.off, s.size, at)
			if fellBack {
				got, err = c.stagedRead(p.obj, s.off, s.size, at, flags)
			}
		default:
			got, err = c.stagedRead(p.obj, s.off, s.size, at, flags)
		}
		total.add(got)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// hbmSpans copies every HBM span of p (each inside one HBM block) device to
// device out of the HBM cache, queued together and waited for once
// (HBMCache.LookupAll), and reports by span index which were hits; a block
// evicted since planning is a miss, for the caller to read staged.
func (c *Context) hbmSpans(p *plan, dst uintptr) ([]bool, error) {
	ss := p.list()
	hit := make([]bool, len(ss))
	var cps []gpu.HBMCopy
	var idx []int
	for i, s := range ss {
		if s.tier == tierHBM {
			idx = append(idx, i)
			cps = append(cps, gpu.HBMCopy{Dst: dst + uintptr(s.off-p.off), Len: s.size})
		}
	}
	if len(cps) == 0 {
		return hit, nil
	}
	h, err := c.tgt.HBM() // exists: the plan found blocks in it
	if err != nil {
		return hit, err
	}
	bs := h.BlockSize()
	for k, i := range idx {
		blo := ss[i].off / bs * bs
		cps[k].Key, cps[k].BlockOff = gpu.BlockKey{File: p.obj.Version(), Index: blo / bs}, ss[i].off-blo
	}
	got, err := h.LookupAll(cps)
	if err != nil {
		return hit, err
	}
	for k, i := range idx {
		hit[i] = got[k]
	}
	return hit, nil
}

// gdsRead reads with cuFile through the file's O_DIRECT descriptor.
// fellBack: GDS could not serve the range (counted, and remembered per file
// where it is about the file); the caller reads it staged. With gds_mode
// REQUIRED those cases are errors instead.
func (c *Context) gdsRead(obj source.Object, off, size uint64, dst uintptr) (s gpuServed, fellBack bool, err error) {
	f := obj.(*files.File) // planDevice plans GDS for local files only
	required := c.opts.GDSMode == policy.GDSRequired
	g, gerr := c.tgt.GDS()
	if gerr != nil {
		if required {
			return s, false, errs.At(errs.Unsupported, "read", f.Path, int64(off),
				"gds_mode REQUIRED but %s", gpu.UnavailableText(gerr))
		}
		c.tgt.NoteFallback(f.ID, f.Path, gerr.Reason(), gerr, false)
		return s, true, nil
	}
	if g.Compat() && !required {
		// The probe just found cuFile in compatibility mode: this read, planned
		// before it, goes staged like every later AUTO read (policy row 11).
		// Not a failure, so not counted as a fallback.
		return s, true, nil
	}
	dfd, _, _, refused, err := f.Direct()
	if err != nil {
		return s, false, err
	}
	if refused {
		if required {
			return s, false, errs.At(errs.DirectIO, "read", f.Path, int64(off),
				"gds_mode REQUIRED but the file system refuses O_DIRECT, which GDS needs")
		}
		c.tgt.NoteFallback(f.ID, f.Path, "odirect_refused", errors.New("the file system refuses O_DIRECT"), true)
		return s, true, nil
	}
	n, err := g.Read(dfd, dst, size, int64(off))
	if err != nil {
		reason, ok := gpu.FallbackReason(err)
		if !ok || required {
			return s, false, err
		}
		// A buffer's fault (managed memory, say) says nothing about the file.
		c.tgt.NoteFallback(f.ID, f.Path, reason, err, !gpu.AboutBuffer(err))
		return s, true, nil
	}
	if uint64(n) < size {
		return s, false, source.Shrunk(f, off, size)
	}
	s.gds = size
	return s, false, nil
}

// stagedPartMin: a staged read of at least two of these is split into parts
// (at most one per Stager lane) run at once, so several pinned pipelines
// read the file and feed the device in parallel; a smaller one runs on one
// lane (its reads are still split into tasks by the CPU path).
const stagedPartMin = 2 * gpu.DefaultChunkSize

// stagedRead moves [off, off+size) of obj into device memory through the
// Stager: each pinned buffer is filled by a CPU plan of its range (DRAM cache
// blocks copied, the rest read by the path the policy picks for the file
// side: buffered pread, or O_DIRECT straight into the page-aligned buffer)
// while the previous one is copied to the device. Large runs go as several
// parts on several lanes at once, cut at multiples of the chunk size in file
// offsets (so every part but the first starts aligned for O_DIRECT).
func (c *Context) stagedRead(obj source.Object, off, size uint64, dst uintptr, flags uint32) (gpuServed, error) {
	stg, err := c.tgt.Stager()
	if err != nil {
		return gpuServed{}, err
	}
	d := c.decide(obj, off, size, flags|policy.ReadOnce, 0)
	d.Admit = false // device reads never fill the DRAM cache
	var fromCache atomic.Uint64
	fill := func(buf []byte, fo uint64) error {
		var hp plan
		c.makePlan(&hp, obj, fo, uint64(len(buf)), 0, planOpts{decided: &d})
		s, err := c.exec(&hp, buf, false)
		fromCache.Add(s.cache)
		return err
	}
	chunk := stg.Options().ChunkSize
	parts := int(min(uint64(stg.Options().Lanes), size/stagedPartMin))
	start := time.Now()
	if parts <= 1 {
		err = stg.ReadToDevice(dst, size, fill, off)
	} else {
		// Cut points: multiples of chunk, about size/parts apart.
		per := (size/uint64(parts) + chunk - 1) / chunk * chunk
		var cuts []uint64
		for lo := off; lo < off+size; {
			hi := min(off+size, (lo+per)/chunk*chunk)
			if hi <= lo {
				hi = min(off+size, lo+per)
			}
			cuts = append(cuts, lo)
			lo = hi
		}
		cuts = append(cuts, off+size)
		err = c.rd.Run(len(cuts)-1, len(cuts)-1, func(i int) error {
			return stg.ReadToDevice(dst+uintptr(cuts[i]-off), cuts[i+1]-cuts[i], fill, cuts[i])
		})
	}
	if err != nil {
		return gpuServed{}, err
	}
	c.st.H2DBytes.Add(size)
	c.st.H2DNanos.Add(uint64(time.Since(start)))
	cached := fromCache.Load()
	return gpuServed{cache: cached, staged: size - cached}, nil
}
