package engine

import (
	"cmp"
	"slices"

	"github.com/memtier/memtier/runtime/iopath"
)

// chunkUnit is one task of LoadChunks: a run of adjacent chunks read as one
// range, or a task-size piece of one large chunk.
type chunkUnit struct {
	members []int  // chunk indices in file order; a piece has one
	lo, hi  uint64 // the file range [lo, hi)
	piece   bool   // a part of a chunk larger than one task
}

// planChunks sorts the chunks idx (all non-empty, inside the file) by offset
// and cuts them into units of at most task bytes: a chunk that starts exactly
// where the open run ends joins it while the run stays within one task and
// one preadv (iopath.MaxIOV buffers); a chunk larger than a task is cut at
// multiples of task in file offsets (as iopath splits large reads, so each
// piece is one pread). A chunk that overlaps the open run is a unit of its own
// and leaves the run open: each chunk gets its bytes from its own read, no
// byte is read for two destinations in one syscall, and a duplicate does not
// break a run of neighbours. Gaps are never read.
func planChunks(ch []Chunk, idx []int, task uint64) []chunkUnit {
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(ch[a].Off, ch[b].Off), cmp.Compare(a, b))
	})
	units := make([]chunkUnit, 0, len(idx))
	run := -1 // position in units of the open run, -1 when none
	for _, i := range idx {
		off, end := ch[i].Off, ch[i].Off+ch[i].Size
		if run >= 0 {
			u := &units[run]
			if off == u.hi && end-u.lo <= task && len(u.members) < iopath.MaxIOV {
				u.members = append(u.members, i)
				u.hi = end
				continue
			}
		}
		overlaps := run >= 0 && off < units[run].hi
		if ch[i].Size > task {
			for lo := off; lo < end; {
				hi := min(end, (lo/task+1)*task)
				units = append(units, chunkUnit{members: []int{i}, lo: lo, hi: hi, piece: true})
				lo = hi
			}
			if !overlaps {
				run = -1
			}
			continue
		}
		units = append(units, chunkUnit{members: []int{i}, lo: off, hi: end})
		if !overlaps {
			run = len(units) - 1
		}
	}
	return units
}
