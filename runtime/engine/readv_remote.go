package engine

import (
	"runtime/debug"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/source"
)

// readvRemote serves the elements of a ReadV named by URLs: idx[k] lists
// the elements of one URL. It runs on a goroutine of its own beside the
// local elements' batch, and returns when every element it was given has
// its result. Each URL is opened (one ranged GET at most, revalidations
// included), then its elements are served like a local group's second pass:
// DRAM-cache hits copied inline, the rest coalesced (gaps are never read)
// and each group read through the plan path (readGroup: a run of cache
// blocks is one ranged read of the source, split into parallel parts by
// it). Opens and groups run SmallIODepth at a time, as the local cold
// groups do. The bytes are accounted per element as any readv element's.
func (c *Context) readvRemote(v []IOVec, idx [][]int, flags uint32, fail func(int, error)) {
	// The goroutine copies into caller memory (destinations): a bad pointer
	// must become that element's error, not a fatal fault, as on the I/O
	// workers (iopath.Reader.Run) and the async requests (submitRequest).
	debug.SetPanicOnFault(true)
	objs := make([]source.Object, len(idx))
	per := make([][]readvGroup, len(idx))
	var groups []readvGroup
	finish := func(err error) {
		if err == nil {
			return
		}
		for _, ix := range idx {
			for _, i := range ix {
				if v[i].Result == 0 && v[i].Err == nil {
					fail(i, err)
				}
			}
		}
	}
	defer func() {
		if p := recover(); p != nil {
			finish(errs.FromPanic("readv", p))
		}
		for _, o := range objs {
			if o != nil {
				o.Release()
			}
		}
	}()
	inline := c.cache != nil && c.cache.Resident() > 0
	err := c.rd.Run(len(idx), c.opts.SmallIODepth, func(k int) error {
		objs[k], per[k] = c.readvPrepare(v, idx[k], flags, inline, nil, fail)
		return nil
	})
	if err == nil {
		for _, g := range per {
			groups = append(groups, g...)
		}
		err = c.rd.Run(len(groups), c.opts.SmallIODepth, func(i int) error {
			c.readGroup(v, &groups[i])
			return nil
		})
	}
	finish(err)
}
