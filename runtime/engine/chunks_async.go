package engine

import (
	"sync/atomic"
	"time"

	"github.com/memtier/memtier/runtime/errs"
)

// chunkQueue hands out the indices of finished chunks in completion order.
// Every index is queued exactly once: by the load when the chunk's result is
// final, or by settle when the request ends without the load reaching it
// (context finalized before it started, a recovered panic).
type chunkQueue struct {
	ch      chan int      // capacity = chunk count: queueing never blocks
	queued  []atomic.Bool // index i is in ch (or was taken from it)
	taken   atomic.Int64  // indices returned by Next
	publish func(i int)   // makes chunk i's result visible to the caller (may be nil)
	chunks  []Chunk
}

func newChunkQueue(chunks []Chunk, publish func(int)) *chunkQueue {
	return &chunkQueue{ch: make(chan int, len(chunks)), queued: make([]atomic.Bool, len(chunks)),
		publish: publish, chunks: chunks}
}

// push publishes chunk i's result and queues i, once.
func (q *chunkQueue) push(i int) {
	if !q.queued[i].CompareAndSwap(false, true) {
		return
	}
	if q.publish != nil {
		q.publish(i)
	}
	q.ch <- i
}

// settle gives every chunk not queued yet the request's error (Internal if
// the request ended without one) and queues it. It runs on the request's
// goroutine after the load returned, so nothing else writes the chunks.
func (q *chunkQueue) settle(err error) {
	if err == nil {
		err = errs.New(errs.Internal, "load_chunks_async", "request ended before this chunk was read")
	}
	for i := range q.chunks {
		if q.queued[i].Load() {
			continue
		}
		q.chunks[i].Err, q.chunks[i].Result = err, int64(errs.CodeOf(err))
		func() {
			// settle runs in a deferred call: a fault writing a bad result
			// pointer must not escape it. The index is queued regardless.
			defer func() { recover() }()
			if q.publish != nil {
				q.publish(i)
			}
		}()
		q.queued[i].Store(true)
		q.ch <- i
	}
}

// LoadChunksAsync is LoadChunks in the background. publish, if not nil, is
// called on a worker goroutine once per chunk after its Result is final and
// before Next can return its index (capi copies the result into the caller's
// array there). ch and every Dst must stay valid until the request is done;
// Wait reports LoadChunks's error and the bytes of the chunks that succeeded.
func (c *Context) LoadChunksAsync(path string, ch []Chunk, target int, publish func(i int)) (*Request, error) {
	if path == "" {
		return nil, errs.New(errs.InvalidArg, "load_chunks_async", "empty path")
	}
	return c.loadChunksAsync(path, ch, target, 0, publish)
}

func (c *Context) loadChunksAsync(path string, ch []Chunk, target int, want uint64, publish func(int)) (*Request, error) {
	q := newChunkQueue(ch, publish)
	r := &Request{done: make(chan struct{}), chunks: q}
	return c.submitRequest(r, func() (uint64, error) {
		if err := c.enter(); err != nil {
			return 0, err
		}
		defer c.exit()
		err := c.loadChunks(path, ch, target, want, q.push, chunkFlags)
		var n uint64
		for i := range ch {
			if ch[i].Err == nil {
				n += ch[i].Size
			}
		}
		return n, err
	})
}

// Next waits up to timeout (negative: forever, 0: poll) for a chunk of a
// LoadChunksAsync request that has not been returned yet and returns its
// index; its Result is final then. Errors: errs.InvalidArg for a request that
// is not a chunk load, errs.EOF once every chunk has been returned,
// errs.Timeout when none finished in time. Meant for one consumer at a time;
// concurrent callers never get the same index, and none blocks past the end
// of the request.
func (r *Request) Next(timeout time.Duration) (int, error) {
	q := r.chunks
	if q == nil {
		return 0, errs.New(errs.InvalidArg, "request_next", "not a memtier_load_chunks_async request")
	}
	if q.taken.Load() >= int64(len(q.queued)) {
		return 0, errs.New(errs.EOF, "request_next", "every chunk has been reported")
	}
	take := func(i int) (int, error) {
		q.taken.Add(1)
		return i, nil
	}
	select {
	case i := <-q.ch:
		return take(i)
	default:
	}
	var expire <-chan time.Time
	switch {
	case timeout == 0:
		closed := make(chan time.Time)
		close(closed)
		expire = closed
	case timeout > 0:
		t := time.NewTimer(timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case i := <-q.ch:
		return take(i)
	case <-r.done:
		// Every index was queued before done closed: take one if any is left
		// (another consumer may have taken the last one meanwhile).
		select {
		case i := <-q.ch:
			return take(i)
		default:
			return 0, errs.New(errs.EOF, "request_next", "every chunk has been reported")
		}
	case <-expire:
		return 0, errs.New(errs.Timeout, "request_next", "no chunk finished within %v", timeout)
	}
}
