package remote

import (
	"context"
	"sync/atomic"
)

// callGen is one generation of the Client's requests: every Open and
// ReadObject a Source starts runs under the generation current then, and
// Interrupt cancels it.
type callGen struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newCallGen() *callGen {
	ctx, cancel := context.WithCancel(context.Background())
	return &callGen{ctx: ctx, cancel: cancel}
}

// interrupter holds the current generation (the zero value is ready).
type interrupter struct {
	cur atomic.Pointer[callGen]
}

// callContext returns the context the Source's next request runs under.
func (c *Client) callContext() context.Context {
	for {
		if g := c.intr.cur.Load(); g != nil {
			return g.ctx
		}
		c.intr.cur.CompareAndSwap(nil, newCallGen())
	}
}

// Interrupt stops every request the Client's Source started before the
// call: in-flight GETs are canceled, waits for a retry or for a
// concurrency slot end, and each such Open or ReadAt returns
// errs.Interrupted (no retry). Requests started after Interrupt returns
// run normally. Safe for concurrent use, from any goroutine.
func (c *Client) Interrupt() {
	if old := c.intr.cur.Swap(newCallGen()); old != nil {
		old.cancel()
	}
}
