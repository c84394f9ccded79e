package engine

import (
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
)

// PreadPlan is the plan of a readv that the engine hands to its caller to
// execute as one buffered pread per element (capi's readv_pread.c runs it
// on the calling thread and one resident C worker thread): every element is
// a range of one local file, there is no DRAM cache (it is off), and the
// policy sends a range of the call's element size to the page cache
// (PathBuffered). The Go plan of each such element is that one buffered
// source span, so the executor only moves the plan's bytes, with no Go
// scheduling between the preads and no coalescing (a page-cache read of a
// neighbour costs less than the temporary buffer and scatter). On the
// loaded 2-core build VM (load 7.5, bench_hot_path readv nocache, medians
// of 3 alternated runs) the Go path's io_uring batch (plans, sort, groups,
// a helper goroutine woken per call, sysmon ticks in io_uring_enter) made
// 0.66x a C pread loop under chrt -f 10 and 0.36x at normal priority; the
// executed plan made 1.09x and 0.73x, against 1.21x for a 2-thread C pread
// loop claiming 16 reads at a time (the ceiling of the 2 CPUs).
//
// The executor serves what it reads in full and leaves every other element
// (a range past the file's end, a short read, a read that would block on
// the disk, a bad destination) to ReadV, which reports it as the Go path
// does. Explain describes each element as this plan reads it: a buffered
// read of its range. A plan holds the file open, and the context entered,
// until Done.
type PreadPlan struct {
	FD   int    // buffered descriptor of the file; valid until Done
	Size uint64 // the file's size at the version opened

	c *Context
	f *files.File
}

// preadPlanMin: below this many elements the Go path's overhead is too
// small a share to matter, and a readv of a few elements keeps its
// coalescing.
const preadPlanMin = 16

// PlanReadVPread returns the pread plan of a readv of n elements of size
// bytes each, all of path, with flags, when the plan applies (see
// PreadPlan), else nil: ReadV then serves the call. The file is opened (and
// checked) as ReadV opens it with flags, so strict freshness still fstats
// once per call. Safe for concurrent use; the caller must call Done.
func (c *Context) PlanReadVPread(path string, n int, size uint64, flags uint32) *PreadPlan {
	if n < preadPlanMin || size == 0 || flags&^policy.AllFlags != 0 || path == "" || remote.HasScheme(path) {
		return nil
	}
	if c.cache != nil {
		return nil
	}
	if err := c.enter(); err != nil {
		return nil
	}
	obj, err := c.openFlags(path, flags)
	if err != nil {
		c.exit()
		return nil // ReadV reports the open's error
	}
	f, ok := obj.(*files.File)
	in := policy.Input{Target: policy.TargetCPU, Size: size, DirectRefused: ok && c.src.DirectRefused(obj)}
	if !ok || policy.NeedsResidency(c.pol, in) {
		obj.Release()
		c.exit()
		return nil
	}
	d := policy.Decide(c.pol, in)
	if d.Path != policy.PathBuffered {
		obj.Release()
		c.exit()
		return nil
	}
	c.logDecision(obj, 0, size, 0, d)
	return &PreadPlan{FD: f.FD, Size: f.Size(), c: c, f: f}
}

// Done records what the executor served, served elements of bytes in all
// (each one buffered request, one read), releases the file and leaves the
// context. whole says the executor served every element: the call counts
// as one readv call here; else ReadV, which serves the rest, counts the call
// and the rest's requests.
func (p *PreadPlan) Done(served, bytes uint64, whole bool) {
	c := p.c
	if whole {
		c.st.ReadvCalls.Add(1)
	}
	c.st.Requests.Add(served)
	c.st.CoalescedReads.Add(served)
	c.st.Bytes.Add(bytes)
	c.st.BufferedRequests.Add(served)
	c.st.BufferedBytes.Add(bytes)
	c.st.StorageBytes.Add(bytes)
	p.f.Release()
	c.exit()
}
