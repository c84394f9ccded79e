package engine

import (
	"runtime/debug"
	"time"

	"github.com/memtier/memtier/gpu"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// Request is an asynchronous read, prefetch or chunk load. Wait for it with
// Wait; take the finished chunks of a chunk load with Next.
type Request struct {
	done   chan struct{}
	n      uint64
	err    error
	chunks *chunkQueue // nil unless made by LoadChunksAsync
}

// Wait waits up to timeout (negative: forever, 0: poll) and reports whether
// the request finished, with its byte count and error.
func (r *Request) Wait(timeout time.Duration) (n uint64, err error, done bool) {
	if timeout < 0 {
		<-r.done
		return r.n, r.err, true
	}
	if timeout == 0 {
		select {
		case <-r.done:
			return r.n, r.err, true
		default:
			return 0, nil, false
		}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
		return r.n, r.err, true
	case <-t.C:
		return 0, nil, false
	}
}

// submit starts fn on its own goroutine; at most 4*IOThreads run at once, the
// rest queue. Close makes queued requests finish with errs.Closed and waits
// for running ones. A panic in fn becomes errs.Internal (a memory fault on a
// bad destination errs.IO).
func (c *Context) submit(fn func() (uint64, error)) (*Request, error) {
	return c.submitRequest(&Request{done: make(chan struct{})}, fn)
}

// submitRequest is submit for a request made by the caller (a chunk load
// carries its queue). A chunk request's unreported chunks are settled with
// the final error before the request is marked done.
func (c *Context) submitRequest(r *Request, fn func() (uint64, error)) (*Request, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, errs.New(errs.Closed, "submit", "context is finalized")
	}
	c.st.AsyncRequests.Add(1)
	c.asyncWG.Add(1)
	go func() {
		defer c.asyncWG.Done()
		defer close(r.done)
		defer func() {
			if r.chunks != nil {
				r.chunks.settle(r.err)
			}
		}()
		defer func() {
			if p := recover(); p != nil {
				// FromPanic: a fault on a bad destination is IO, a bug Internal.
				r.n, r.err = 0, errs.FromPanic("async", p)
			}
		}()
		// The request writes into caller memory (destinations, a C chunk
		// array): a bad pointer must become an error, not a fatal fault.
		debug.SetPanicOnFault(true)
		select {
		case c.asyncQ <- struct{}{}:
			defer func() { <-c.asyncQ }()
		case <-c.closing:
			r.err = errs.New(errs.Closed, "async", "context finalized before the request started")
			return
		}
		r.n, r.err = fn()
	}()
	return r, nil
}

// ReadAsync validates the arguments now and reads in the background; dst
// must stay valid until the request is done.
func (c *Context) ReadAsync(path string, off, size uint64, dst []byte, target int, flags uint32) (*Request, error) {
	if target == policy.TargetCPU && size > 0 {
		if err := checkRange("read_async", path, off, size, len(dst), flags); err != nil {
			return nil, err
		}
	}
	return c.submit(func() (uint64, error) {
		if err := c.Read(path, off, size, dst, target, flags); err != nil {
			return 0, err
		}
		return size, nil
	})
}

// PrefetchAsync is Prefetch in the background.
func (c *Context) PrefetchAsync(path string, off, size uint64, flags uint32) (*Request, error) {
	if path == "" {
		return nil, errs.New(errs.InvalidArg, "prefetch_async", "empty path")
	}
	switch {
	case flags&^PrefetchToHBM != 0:
		return nil, errs.At(errs.InvalidArg, "prefetch_async", path, -1, "unknown prefetch flags 0x%x", flags)
	case c.toHBM(flags) && c.opts.HBMCacheBytes == 0:
		return nil, errs.At(errs.Unsupported, "prefetch_async", path, int64(off),
			"MEMTIER_PREFETCH_TO_HBM: the HBM tier is off (hbm_cache_bytes is 0)")
	case c.toHBM(flags) && !gpu.Available():
		return nil, errs.At(errs.Unsupported, "prefetch_async", path, int64(off), "MEMTIER_PREFETCH_TO_HBM: %s", gpu.Reason())
	case !c.toHBM(flags) && c.cache == nil:
		return nil, errs.At(errs.Unsupported, "prefetch_async", path, int64(off), "the DRAM cache is disabled (cache_enabled = 0)")
	}
	return c.submit(func() (uint64, error) { return c.Prefetch(path, off, size, flags) })
}
