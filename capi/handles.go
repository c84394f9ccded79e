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
}{ctxs: map[uint64]*engine.Context{}, reqs: map[uint64]*request{}}

func addContext(c *engine.Context) uint64 {
	id := nextID.Add(1)
	registry.Lock()
	registry.ctxs[id] = c
	registry.Unlock()
	return id
}

func closedErr(what string) error {
	return errs.New(errs.Closed, what, "unknown or finalized handle")
}

func lookupContext(id uint64) (*engine.Context, error) {
	registry.RLock()
	c := registry.ctxs[id]
	registry.RUnlock()
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
	for rid, r := range registry.reqs {
		if r.ctx == id {
			delete(registry.reqs, rid)
		}
	}
	return c, nil
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
