package iopath

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
)

// BatchRead is one element of ReadBatch: read len(Dst) bytes of descriptor FD
// at byte offset Off into Dst. ReadBatch sets N and Errno.
type BatchRead struct {
	FD  int
	Dst []byte
	Off int64

	// N is how many bytes of Dst were read. N < len(Dst) with Errno 0 means
	// end of file at Off+N.
	N int
	// Errno is 0 on success, EAGAIN when the batch was nowait and the bytes
	// from Off+N on were not in the page cache (their readahead has been
	// started), else the read's error.
	Errno unix.Errno

	injected bool // the fault hook's EINTR was injected for the current piece
}

// ReadBatch reads every element of b through one io_uring: up to 256
// elements per io_uring_enter(2), so a batch of page-cache reads costs one
// syscall instead of one per element. Elements are independent: each gets
// its own N and Errno, in any order of completion. Zero-length elements are
// done at once.
//
// nowait sets RWF_NOWAIT on every read: bytes not in the page cache are not
// waited for; their element ends with EAGAIN (after any bytes that were
// resident) and the kernel starts their readahead. Without nowait the
// kernel serves resident pages inline and waits for the others (async
// buffered reads or its io-wq workers), and ReadBatch returns when all are
// done. Short counts are resubmitted from where they stopped
// (ShortReadRetries++), EINTR results are resubmitted (EINTRRetries++), and
// the fault hook (config.Fault) clips every read to ShortMax bytes and
// injects EINTR before every Nth read. StorageBytes counts the bytes of
// elements that did not end in EAGAIN.
//
// Returns the number of io_uring_enter calls that submitted reads, and an
// errs.Unsupported error, with nothing read, when io_uring cannot be used
// (UringUnavailable says why once the kernel has refused it). Every read
// has completed when ReadBatch returns: the kernel writes into Dst only
// while it runs, and b (with every Dst) is kept alive until then. Dst may be
// Go or C memory; buffered descriptors only (O_DIRECT would need aligned
// buffers). Safe for concurrent use: each call uses its own ring.
func (r *Reader) ReadBatch(b []BatchRead, nowait bool) (submits int, err error) {
	g, why := getRing()
	if g == nil {
		return 0, errs.New(errs.Unsupported, "io_uring", "%s", why)
	}
	// Holding b in the ring (heap memory) makes b, and every Dst stored in
	// it, escape: a destination on a goroutine stack could move when the
	// stack grows between two io_uring_enter calls, under a read in flight.
	g.holding = b
	submits, broken, inflight := r.runBatch(g, b, nowait)
	g.holding = nil
	runtime.KeepAlive(b)
	if broken != 0 {
		for i := range b {
			if b[i].Errno == 0 && b[i].N < len(b[i].Dst) {
				b[i].Errno = broken
			}
		}
		if inflight > 0 {
			// The kernel refused to wait for reads it had taken (never
			// seen on a working kernel): the ring is neither reused nor
			// closed, as a read it holds may still complete.
			return submits, nil
		}
		g.close() // unsubmitted SQEs only: nothing can write any more
		return submits, nil
	}
	putRing(g)
	return submits, nil
}

// runBatch drives the ring until every element of b is finished. It returns
// a nonzero errno only when io_uring_enter failed in a way that left reads
// unsubmitted or in flight (inflight of them; the ring must then not be
// reused).
func (r *Reader) runBatch(g *ring, b []BatchRead, nowait bool) (submits int, broken unix.Errno, inflight uint32) {
	// q[qi:] are the elements (indices into b) waiting for a read: all of
	// them at first, then those that completed short or were interrupted.
	q, qi := g.pending[:0], 0
	for i := range b {
		b[i].N, b[i].Errno, b[i].injected = 0, 0, false
		if len(b[i].Dst) > 0 {
			q = append(q, int32(i))
		}
	}
	defer func() { g.pending = q[:0] }()
	var rwFlags uint32
	if nowait {
		rwFlags = unix.RWF_NOWAIT
	}
	every := uint64(r.fault.EINTREvery)
	clip := r.fault.ShortMax
	tail := *g.sqTail // only this goroutine writes the SQ tail
	for qi < len(q) || inflight > 0 {
		// Fill the free SQEs; at most entries reads are in flight, so the
		// CQ ring (twice as large) never overflows.
		free := g.entries - inflight - (tail - atomic.LoadUint32(g.sqHead))
		queued := uint32(0)
		for ; qi < len(q) && queued < free; qi++ {
			i := q[qi]
			e := &b[i]
			if every > 0 && !e.injected && r.faultCalls.Add(1)%every == 0 {
				e.injected = true // an injected EINTR: the real read follows
				r.st.EINTRRetries.Add(1)
				q = append(q, i)
				continue
			}
			e.injected = false
			n := min(len(e.Dst)-e.N, maxIO)
			if clip > 0 && n > clip {
				n = clip
			}
			g.sqes[tail&g.sqMask] = uringSQE{
				Opcode:   uringOpRead,
				FD:       int32(e.FD),
				Off:      uint64(e.Off) + uint64(e.N),
				Addr:     uint64(uintptr(unsafe.Pointer(&e.Dst[e.N]))),
				Len:      uint32(n),
				RWFlags:  rwFlags,
				UserData: uint64(i),
			}
			tail++
			queued++
		}
		atomic.StoreUint32(g.sqTail, tail)
		if queued > 0 {
			submits++
		}
		if e := g.submitAndWait(tail, &inflight); e != 0 {
			return submits, e, inflight
		}
		q = r.reap(g, b, q, &inflight, nowait)
	}
	return submits, 0, 0
}

// submitAndWait hands the unsubmitted SQEs (up to tail) to the kernel and
// waits until every read in flight has completed, with one io_uring_enter
// when the ring has SUBMIT_ALL. An interrupted wait returns early: the
// caller reaps what arrived and calls again. *inflight counts reads the
// kernel took (from its SQ head) and that have not been reaped.
func (g *ring) submitAndWait(tail uint32, inflight *uint32) unix.Errno {
	for busy := 0; ; {
		unsent := tail - atomic.LoadUint32(g.sqHead)
		if unsent == 0 && *inflight == 0 {
			return 0
		}
		wait := unsent == 0 || g.submitAll
		var minComplete uint32
		if wait {
			minComplete = *inflight + unsent
		}
		_, e := g.enter(unsent, minComplete, wait)
		took := unsent - (tail - atomic.LoadUint32(g.sqHead))
		*inflight += took
		switch {
		case (e == 0 || e == unix.EINTR) && wait && took == unsent:
			return 0 // all submitted; waited (or interrupted): reap
		case e == 0 && took > 0:
			continue // submitted part or all without waiting: go on
		case e == unix.EINTR:
			continue
		case busy < 1000 && (e == 0 || e == unix.EAGAIN || e == unix.EBUSY):
			// Out of request memory or completion space: reap, or yield
			// when nothing is in flight, and retry.
			busy++
			if *inflight > 0 {
				return 0
			}
			runtime.Gosched()
			continue
		}
		if e == 0 {
			e = unix.EIO // the kernel took nothing, over and over
		}
		return e
	}
}

// reap consumes the posted completions: a finished element keeps its N and
// Errno, a short or interrupted one goes back on the queue for the rest.
func (r *Reader) reap(g *ring, b []BatchRead, q []int32, inflight *uint32, nowait bool) []int32 {
	head := *g.cqHead // only this goroutine moves the CQ head
	ctail := atomic.LoadUint32(g.cqTail)
	for ; head != ctail; head++ {
		c := g.cqes[head&g.cqMask]
		*inflight--
		i := int32(c.UserData)
		e := &b[i]
		switch res := c.Res; {
		case res > 0:
			e.N += int(res)
			if e.N < len(e.Dst) {
				r.st.ShortReadRetries.Add(1)
				q = append(q, i)
				continue
			}
		case res == 0: // end of file: the element stays short
		case -res == int32(unix.EINTR):
			r.st.EINTRRetries.Add(1)
			q = append(q, i)
			continue
		case -res == int32(unix.EAGAIN) && !nowait:
			q = append(q, i) // never expected without RWF_NOWAIT: try again
			continue
		default:
			e.Errno = unix.Errno(-res)
		}
		if e.Errno == 0 {
			r.st.StorageBytes.Add(uint64(e.N))
		}
	}
	atomic.StoreUint32(g.cqHead, head)
	return q
}
