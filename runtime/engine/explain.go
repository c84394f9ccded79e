package engine

import (
	"fmt"
	"math"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// Explanation is what a read would do now (memtier_explain).
type Explanation struct {
	policy.Decision
	CachedBytes   uint64 // bytes of the range valid in the DRAM cache
	ResidentBytes uint64 // bytes of the range in the page cache
	Tasks         uint64 // parallel tasks (blocks when admitted, else TaskBytes pieces)
}

// Explain runs the policy for a read without reading. dstAligned tells
// whether the destination is page-aligned (O_DIRECT into it needs no bounce).
func (c *Context) Explain(path string, off, size uint64, dstAligned bool, target int, flags uint32) (Explanation, error) {
	if err := c.enter(); err != nil {
		return Explanation{}, err
	}
	defer c.exit()
	if target == policy.TargetCUDA {
		return c.explainGPU(path, off, size, flags)
	}
	if target != policy.TargetCPU {
		return Explanation{}, errs.At(errs.InvalidArg, "explain", path, -1, "unknown target %d", target)
	}
	if size == 0 {
		// A CPU question never initialises CUDA.
		d := policy.Decide(c.pol, policy.Input{Target: target, Size: size, Flags: flags})
		d.Reason = fmt.Sprintf("row %d: %s", d.Row, d.Reason)
		return Explanation{Decision: d}, nil
	}
	f, err := c.explainFile(path, off, size, flags)
	if err != nil {
		return Explanation{}, err
	}
	defer f.Release()
	var p plan
	c.makePlan(&p, f, off, size, flags, planOpts{exact: true})
	defer p.release()
	ex := Explanation{Decision: p.d, CachedBytes: p.cached, ResidentBytes: p.in.ResidentBytes,
		Tasks: c.planTasks(&p)}
	ex.Reason = c.describe(&p) + c.remoteText(f, &p)
	if ex.Path == policy.PathDirect && !dstAligned && !ex.Admit {
		ex.Reason += "; unaligned dst: head and tail through bounce buffers"
	}
	if ex.Admit {
		ex.Reason += "; fills cache"
	}
	return ex, nil
}

// remoteText says, for a remote object, where the bytes p reads from the
// source would come from: "; disk cache: N bytes in M blocks; remote GET: K
// bytes in L blocks" with the disk cache tier on (the blocks its directory
// holds now, found by name, and the whole blocks a read would fetch, as
// stats disk_cache_hit_* and disk_cache_miss_* count them), "; remote GET: K
// bytes (no disk cache)" without it, and "" for a local file or when the
// DRAM cache holds every byte.
func (c *Context) remoteText(f source.Object, p *plan) string {
	ro, ok := f.(*remote.Object)
	if !ok {
		return ""
	}
	var src uint64
	for _, s := range p.list() {
		if s.tier == tierSource || s.tier == tierFill || s.tier == tierFillRun {
			src += s.size
		}
	}
	if src == 0 {
		return ""
	}
	s, _ := c.src.(*sources)
	if s == nil {
		return ""
	}
	d, ok := s.of(f).(*diskcache.Source)
	if !ok {
		return fmt.Sprintf("; remote GET: %d bytes (no disk cache)", src)
	}
	var sum diskcache.Peek
	for _, sp := range p.list() {
		if sp.tier != tierSource && sp.tier != tierFill && sp.tier != tierFillRun {
			continue
		}
		pk, ok := d.Peek(ro, sp.off, sp.size)
		if !ok { // not cacheable (no validator): every byte is a remote GET
			return fmt.Sprintf("; remote GET: %d bytes (not cacheable on disk: no ETag or Last-Modified)", src)
		}
		sum.HitBlocks += pk.HitBlocks
		sum.HitBytes += pk.HitBytes
		sum.MissBlocks += pk.MissBlocks
		sum.MissBytes += pk.MissBytes
	}
	return fmt.Sprintf("; disk cache: %d bytes in %d blocks; remote GET: %d bytes in %d blocks",
		sum.HitBytes, sum.HitBlocks, sum.MissBytes, sum.MissBlocks)
}

// quietPath is the file-side path a read with flags would take, decided
// without running the device probe.
func (c *Context) quietPath(f source.Object, off, size uint64, flags uint32) int {
	_, d := c.decideFor(f, off, size, flags, 0, decideQuiet)
	return d.Path
}

// planTasks is how many parallel tasks executing p runs: its units, with a
// source span counted as the task-size pieces it is split into.
func (c *Context) planTasks(p *plan) uint64 {
	us := c.units(p)
	spans := p.list()
	if us == nil {
		us = []unit{{0, len(spans)}}
	}
	var n uint64
	for _, u := range us {
		k := uint64(1)
		for _, s := range spans[u.a:u.b] {
			if s.tier == tierSource {
				k = max(k, (s.size+c.opts.TaskBytes-1)/c.opts.TaskBytes)
			}
		}
		n += k
	}
	return n
}

// explainGPU is Explain for target CUDA: the GPU table (policy.DecideGPU)
// with the bytes in the HBM and DRAM caches, the remembered GDS fallback of
// the file and whether GDS was found unavailable. It never probes GDS (the
// first GDS read does); the reason says when it has not been probed yet.
func (c *Context) explainGPU(path string, off, size uint64, flags uint32) (Explanation, error) {
	if !gpu.Available() {
		d := policy.DecideGPU(c.gpuPolicy(), policy.GPUInput{Size: size})
		d.Reason = fmt.Sprintf("row %d: %s: %s", d.Row, d.Reason, gpu.Reason())
		return Explanation{Decision: d}, errs.At(errs.Unsupported, "explain", path, int64(off), "%s", gpu.Reason())
	}
	if size == 0 {
		d := policy.DecideGPU(c.gpuPolicy(), policy.GPUInput{GPUAvailable: true})
		d.Reason = fmt.Sprintf("row %d: %s", d.Row, d.Reason)
		return Explanation{Decision: d}, nil
	}
	if remote.IsURL(path) {
		return Explanation{}, errRemoteHere(path) // as readGPU answers
	}
	f, err := c.explainFile(path, off, size, flags)
	if err != nil {
		return Explanation{}, err
	}
	defer f.Release()
	// The plan the read would execute, with the destination on the HBM
	// cache's device.
	var p plan
	_ = c.planDevice(&p, f, off, size, c.opts.HBMDevice, flags, devOpts{exact: true})
	var ex Explanation
	var hbmBytes uint64
	for _, s := range p.list() {
		if s.tier == tierHBM {
			hbmBytes += s.size
		}
	}
	ex.CachedBytes = p.cached
	if lf, ok := f.(*files.File); ok {
		if n, err := iopath.Resident(lf.FD, int64(off), int64(size)); err == nil {
			ex.ResidentBytes = uint64(n)
		}
	}
	ex.Decision = c.decideDevice(f, off, size, hbmBytes, ex.CachedBytes, false) // explain has no destination
	uncached := size - hbmBytes - ex.CachedBytes
	reason := fmt.Sprintf("%s (size %d, hbm %d, dram cache %d, gds_threshold %d)",
		ex.Reason, size, hbmBytes, ex.CachedBytes, c.opts.GDSThreshold)
	var rerr error
	switch ex.Path {
	case policy.PathHBM, policy.PathCache:
		ex.Tasks = 1
	case policy.PathGDS:
		ex.Tasks = 1
		if !c.tgt.GDSProbed() {
			reason += "; GDS not probed yet (the first GDS read opens the cuFile driver; if that fails, reads go staged)"
		}
	case policy.PathStaged:
		chunk := uint64(gpu.DefaultChunkSize)
		ex.Tasks = (uncached + chunk - 1) / chunk
		reason += fmt.Sprintf("; file side %s into pinned buffers",
			map[int]string{policy.PathDirect: "O_DIRECT", policy.PathBuffered: "buffered pread"}[c.quietPath(f, off, size, flags|policy.ReadOnce)])
		if c.opts.GDSMode == policy.GDSRequired {
			rerr = errs.At(errs.Unsupported, "explain", path, int64(off), "gds_mode REQUIRED but GDS cannot serve this read: %s", ex.Reason)
		}
	}
	ex.Reason = fmt.Sprintf("row %d: %s", ex.Row, reason) + p.tiersText()
	return ex, rerr
}

// explainFile checks the range and opens path as the read would, so explain
// fails with the status the read would fail with before any I/O. The caller
// releases the file.
func (c *Context) explainFile(path string, off, size uint64, flags uint32) (source.Object, error) {
	if err := checkRange("explain", path, off, size, int(min(size, math.MaxInt64)), flags); err != nil {
		return nil, err
	}
	f, err := c.openFlags(path, flags)
	if err != nil {
		return nil, err
	}
	if err := checkEOF(f, off, size); err != nil {
		f.Release()
		return nil, err
	}
	return f, nil
}
