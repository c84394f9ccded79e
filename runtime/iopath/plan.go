package iopath

// The pure arithmetic of splitting and aligning reads lives here, apart from
// the syscalls, so FuzzDirectPlan can check it against a naive reference.

// taskPlan is the split of the file range [off, end) into tasks whose
// boundaries fall on multiples of size in file offsets. Boundaries are fixed
// to the file, not to the request, so two overlapping requests cut the file
// at the same places and each task is at most one aligned size-block.
type taskPlan struct {
	off, end int64
	size     int64
	count    int
}

// splitTasks plans [off, off+n). n == 0 gives no tasks. Callers guarantee
// off >= 0, n >= 0, size > 0 and off+n without overflow.
func splitTasks(off, n, size int64) taskPlan {
	p := taskPlan{off: off, end: off + n, size: size}
	if n > 0 {
		p.count = int((p.end-1)/size - off/size + 1)
	}
	return p
}

// task returns the file range [start, end) of task i, 0 <= i < count.
func (p taskPlan) task(i int) (start, end int64) {
	block := p.off/p.size + int64(i)
	start = max(p.off, block*p.size)
	end = min(p.end, (block+1)*p.size)
	return start, end
}

// alignWindow returns the smallest range [ws, we) with both ends multiples of
// align that contains [off, off+n). align > 0 need not be a power of two
// (statx reports what the device says). n == 0 gives the empty window at
// alignDown(off).
func alignWindow(off, n, align int64) (ws, we int64) {
	ws = alignDown(off, align)
	we = alignUp(off+n, align)
	return ws, we
}

func alignDown(x, a int64) int64 { return x - x%a }

func alignUp(x, a int64) int64 {
	if r := x % a; r != 0 {
		return x + a - r
	}
	return x
}
