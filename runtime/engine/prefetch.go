package engine

import (
	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/source"
)

// Prefetch destinations; values equal MEMTIER_PREFETCH_*.
const (
	PrefetchToDRAM uint32 = 0
	PrefetchToHBM  uint32 = 1
)

// Prefetch brings [off, off+size) of path into the DRAM cache (size 0: to end
// of file; a range past end of file is clipped) and returns the bytes it read
// from storage. A range larger than the cache budget keeps its last budget's
// worth. With PrefetchToHBM (or the MEMTIER_PREFETCH_TO_HBM=1 environment)
// the range goes into the HBM cache instead (prefetchHBM). Errors:
// errs.Unsupported when the cache is disabled or TO_HBM is asked without a
// GPU backend or with the HBM tier off, errs.InvalidArg for unknown flags,
// open errors.
func (c *Context) Prefetch(path string, off, size uint64, flags uint32) (uint64, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.exit()
	return c.prefetch(path, off, size, flags)
}

// toHBM reports whether a prefetch with flags goes to the HBM cache.
func (c *Context) toHBM(flags uint32) bool {
	return flags&PrefetchToHBM != 0 || c.opts.PrefetchToHBM
}

func (c *Context) prefetch(path string, off, size uint64, flags uint32) (uint64, error) {
	switch {
	case flags&^PrefetchToHBM != 0:
		return 0, errs.At(errs.InvalidArg, "prefetch", path, -1, "unknown prefetch flags 0x%x", flags)
	case path == "":
		return 0, errs.New(errs.InvalidArg, "prefetch", "empty path")
	case c.toHBM(flags):
		return c.prefetchHBM(path, off, size)
	case c.cache == nil:
		return 0, errs.At(errs.Unsupported, "prefetch", path, int64(off), "the DRAM cache is disabled (cache_enabled = 0)")
	}
	c.st.PrefetchRequests.Add(1)
	f, err := c.openTrusting(path, c.trust) // a local file or a URL
	if err != nil {
		return 0, err
	}
	defer f.Release()
	off, end := prefetchRange(f, off, size, c.cache.Budget(), c.cache.BlockSize())
	if off >= end {
		return 0, nil
	}
	s, err := c.serve(f, off, end-off, nil, 0, true)
	n := s.fetched
	c.st.PrefetchBytes.Add(n)
	return n, err
}

// GPUReason says why GPU targets are unavailable (for messages).
func GPUReason() string { return gpu.Reason() }

// prefetchRange clips a prefetch of [off, off+size) of f (size 0: to end of
// file) to the file, then to its last budget bytes starting at a block
// boundary of bs: a range larger than the tier keeps its tail. off >= end
// means nothing to prefetch.
func prefetchRange(f source.Object, off, size, budget, bs uint64) (uint64, uint64) {
	end := f.Size()
	if size != 0 && off+size >= off && off+size < end {
		end = off + size
	}
	if off < end && end-off > budget {
		off = (end - budget + bs - 1) / bs * bs
	}
	return off, end
}
