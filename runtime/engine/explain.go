package engine

import (
	"fmt"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/policy"
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
	if target != policy.TargetCPU || size == 0 {
		d := policy.Decide(c.pol, policy.Input{Target: target, Size: size, Flags: flags, GPUAvailable: gpu.Available()})
		d.Reason = fmt.Sprintf("row %d: %s", d.Row, d.Reason)
		if target == policy.TargetCUDA && !gpu.Available() {
			return Explanation{Decision: d}, errs.At(errs.Unsupported, "explain", path, int64(off), "%s", gpu.Reason())
		}
		if target != policy.TargetCPU {
			return Explanation{}, errs.At(errs.InvalidArg, "explain", path, -1, "unknown target %d", target)
		}
		return Explanation{Decision: d}, nil
	}
	if err := checkRange("explain", path, off, size, int(min(size, 1<<62)), flags); err != nil {
		return Explanation{}, err
	}
	f, err := c.acquire(path)
	if err != nil {
		return Explanation{}, err
	}
	defer f.Release()
	if err := checkEOF(f, off, size); err != nil {
		return Explanation{}, err
	}
	var ex Explanation
	if c.cache != nil {
		bs := c.cache.BlockSize()
		for blo := off / bs * bs; blo < off+size; blo += bs {
			lo, hi := max(off, blo), min(off+size, blo+bs)
			if blk := c.cache.Peek(f.ID, blo/bs); blk != nil {
				if blk.Covers(int(lo-blo), int(hi-blo)) {
					ex.CachedBytes += hi - lo
				}
				blk.Release()
			}
		}
	}
	if n, err := iopath.Resident(f.FD, int64(off), int64(size)); err == nil {
		ex.ResidentBytes = uint64(n)
	}
	in := policy.Input{Target: target, Size: size, Flags: flags, CachedBytes: ex.CachedBytes,
		ResidentBytes: ex.ResidentBytes, ResidentKnown: true, DirectRefused: f.DirectRefused()}
	ex.Decision = policy.Decide(c.pol, in)
	ex.Reason = policy.Detail(c.pol, in, ex.Decision)
	uncached := size - ex.CachedBytes
	switch {
	case ex.Path == policy.PathCache:
		ex.Tasks = 1
	case ex.Admit:
		bs := c.cache.BlockSize()
		ex.Tasks = (off+size-1)/bs - off/bs + 1
	default:
		ex.Tasks = (uncached + c.opts.TaskBytes - 1) / c.opts.TaskBytes
	}
	if ex.Path == policy.PathDirect && !dstAligned && !ex.Admit {
		ex.Reason += "; unaligned dst: bounce buffers"
	}
	if ex.Admit {
		ex.Reason += "; fills cache"
	}
	ex.Reason = fmt.Sprintf("row %d: %s", ex.Row, ex.Reason)
	return ex, nil
}
