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

// interrupter holds the current generation (set by NewClient).
type interrupter struct {
	cur atomic.Pointer[callGen]
}

// callContext returns the context the Source's next request runs under.
func (c *Client) callContext() context.Context { return c.intr.cur.Load().ctx }

// Interrupt stops every request the Client's Source started before the
// call: in-flight GETs are canceled, waits for a retry or for a
// concurrency slot end, and each such Open or ReadAt returns
// errs.Interrupted (no retry). Requests started after Interrupt returns
// run normally. Safe for concurrent use, from any goroutine.
func (c *Client) Interrupt() {
	c.intr.cur.Swap(newCallGen()).cancel()
}
