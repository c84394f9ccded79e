//go:build linux

package iopath

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/interrupt"
)

// helperTokens bounds helper goroutines across every Reader in the process.
// Each helper blocked in pread pins one OS thread, so without a global bound
// many contexts times many concurrent calls would multiply threads.
var helperTokens struct {
	used  atomic.Int64
	limit atomic.Int64
}

// minTokens is the floor of the process-wide helper bound.
const minTokens = 64

func init() { helperTokens.limit.Store(minTokens) }

// raiseTokenLimit makes the bound at least n, so one context configured with
// more IOThreads than the floor can use them all.
func raiseTokenLimit(n int) {
	for {
		cur := helperTokens.limit.Load()
		if int64(n) <= cur || helperTokens.limit.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// tryToken takes a helper token if one is free. It never waits: a Run that
// gets none does its work on the calling goroutine, so nested or concurrent
// Runs cannot deadlock on tokens.
func tryToken() bool {
	for {
		u := helperTokens.used.Load()
		if u >= helperTokens.limit.Load() {
			return false
		}
		if helperTokens.used.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

func releaseToken() { helperTokens.used.Add(-1) }

// Run calls fn(i) for every i in [0, n) using at most par goroutines in total
// (par < 1 counts as 1): the calling goroutine works too, and up to par-1
// helpers start while the process-wide token bound (max(IOThreads of every
// Reader, 64)) has tokens; Run never waits for a token. Indices are handed
// out in increasing order from one atomic counter, so each worker reads
// neighbouring spans.
//
// After a failure no new indices are handed out; indices below it were handed
// out already and run to completion. Run returns the error of the lowest
// failing index, or nil, and returns only after every fn call has returned,
// so fn may write into memory the caller frees afterwards. A panic in fn, on
// any goroutine, is recovered into an errs.Internal error with the panic text
// and stack. Safe for concurrent and nested use.
func (r *Reader) Run(n, par int, fn func(i int) error) error {
	if n <= 0 {
		return nil
	}
	var (
		next    atomic.Int64
		failed  atomic.Bool
		mu      sync.Mutex
		lowest  = n
		lowErr  error
		helpers = 0
		done    = make(chan struct{}, max(par, 1))
	)
	work := func(helper bool) {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if err := r.call(fn, i, helper); err != nil {
				mu.Lock()
				if i < lowest {
					lowest, lowErr = i, err
				}
				mu.Unlock()
				failed.Store(true)
			}
		}
	}
	for h := min(max(par, 1), n) - 1; h > 0 && tryToken(); h-- {
		helpers++
		go func() {
			defer func() { done <- struct{}{} }()
			defer releaseToken()
			work(true)
		}()
	}
	work(false)
	interrupt.Collect(done, helpers) // helpers may wait on a server: the caller's check runs meanwhile
	return lowErr
}

// call runs one task with panic recovery: in a c-shared library an
// unrecovered panic aborts the host process (Python, C), and on a helper
// goroutine nothing above it could recover it.
func (r *Reader) call(fn func(int) error, i int, helper bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			if len(stack) > 4096 {
				stack = stack[:4096]
			}
			if e := errs.FromPanic("read", p); e.Code != errs.Internal {
				err = e
				return
			}
			err = errs.New(errs.Internal, "iopath", "panic in I/O task %d: %v\n%s", i, p, stack)
		}
	}()
	if helper {
		// Helpers copy into caller memory too: a bad pointer must become
		// an error, not a fatal fault (the setting is per goroutine).
		debug.SetPanicOnFault(true)
	}
	if helper && r.panicNext.CompareAndSwap(true, false) {
		panic("injected by PanicNextTask")
	}
	return fn(i)
}
