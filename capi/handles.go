package main

import (
	"sync"
	"sync/atomic"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

// Handles given to C are integer ids from one counter that never repeats, so a
// finalized or released handle can never reach a newer object.
var nextID atomic.Uint64

type request struct {
	r   *engine.Request
	ctx uint64
}

var registry = struct {
	sync.RWMutex
	ctxs map[uint64]*engine.Context
	reqs map[uint64]*request
	objs map[uint64]objHandle // safetensors files and datasets
}{ctxs: map[uint64]*engine.Context{}, reqs: map[uint64]*request{}, objs: map[uint64]objHandle{}}

// objHandle is a handle made on a context that owns C memory (info strings,
// shapes, names callers keep pointers to until close).
type objHandle interface {
	ctxID() uint64
	free() // releases the C memory; called once, when the handle leaves the registry
}

// liveCtxs is a read-only copy of registry.ctxs, replaced whole (under the
// registry lock) whenever a context is added or removed, so the lookup every
// call makes is one atomic load and a map read: no process-wide lock on the
// hot path.
var liveCtxs atomic.Pointer[map[uint64]*engine.Context]

// publishContexts copies registry.ctxs into liveCtxs; the caller holds the
// registry lock for writing.
func publishContexts() {
	m := make(map[uint64]*engine.Context, len(registry.ctxs))
	for id, c := range registry.ctxs {
		m[id] = c
	}
	liveCtxs.Store(&m)
}

func addContext(c *engine.Context) uint64 {
	id := nextID.Add(1)
	registry.Lock()
	registry.ctxs[id] = c
	publishContexts()
	hitRegister(id, c)
	registry.Unlock()
	return id
}

func closedErr(what string) error {
	return errs.New(errs.Closed, what, "unknown or finalized handle")
}

func lookupContext(id uint64) (*engine.Context, error) {
	var c *engine.Context
	if m := liveCtxs.Load(); m != nil {
		c = (*m)[id]
	}
	if c == nil {
		return nil, closedErr("context")
	}
	return c, nil
}

// removeContext unregisters a context and the requests made on it.
func removeContext(id uint64) (*engine.Context, error) {
	registry.Lock()
	defer registry.Unlock()
	c := registry.ctxs[id]
	if c == nil {
		return nil, closedErr("finalize")
	}
	delete(registry.ctxs, id)
	publishContexts()
	hitUnregister(id) // before Close unmaps what C-side hits read
	for rid, r := range registry.reqs {
		if r.ctx == id {
			delete(registry.reqs, rid)
		}
	}
	// Finalize closes the context's safetensors files and datasets: their
	// offsets are useless without it, and their C memory would leak.
	for oid, o := range registry.objs {
		if o.ctxID() == id {
			delete(registry.objs, oid)
			o.free()
		}
	}
	return c, nil
}

// addObject registers a handle; its id is never reused.
func addObject(o objHandle) uint64 {
	id := nextID.Add(1)
	registry.Lock()
	registry.objs[id] = o
	registry.Unlock()
	return id
}

// lookupObject returns the handle id of type T; an unknown, closed or
// finalized handle is CLOSED, a handle of another kind INVALID_ARG.
func lookupObject[T objHandle](id uint64, what string) (T, error) {
	var zero T
	registry.RLock()
	o := registry.objs[id]
	registry.RUnlock()
	if o == nil {
		return zero, closedErr(what)
	}
	t, ok := o.(T)
	if !ok {
		return zero, errs.New(errs.InvalidArg, what, "handle is not a %s", what)
	}
	return t, nil
}

// removeObject unregisters handle id of type T and frees its C memory; a
// second close is CLOSED.
func removeObject[T objHandle](id uint64, what string) error {
	registry.Lock()
	defer registry.Unlock()
	o := registry.objs[id]
	if o == nil {
		return closedErr(what)
	}
	if _, ok := o.(T); !ok {
		return errs.New(errs.InvalidArg, what, "handle is not a %s", what)
	}
	delete(registry.objs, id)
	o.free()
	return nil
}

func addRequest(ctx uint64, r *engine.Request) uint64 {
	id := nextID.Add(1)
	registry.Lock()
	registry.reqs[id] = &request{r: r, ctx: ctx}
	registry.Unlock()
	return id
}

func lookupRequest(id uint64) (*request, error) {
	registry.RLock()
	r := registry.reqs[id]
	registry.RUnlock()
	if r == nil {
		return nil, closedErr("request")
	}
	return r, nil
}

func removeRequest(id uint64) (*request, error) {
	registry.Lock()
	defer registry.Unlock()
	r := registry.reqs[id]
	if r == nil {
		return nil, closedErr("request")
	}
	delete(registry.reqs, id)
	return r, nil
}
