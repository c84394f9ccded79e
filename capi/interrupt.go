package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"

static int mt_call_interrupt_check(void* fn, void* arg) {
    return ((memtier_interrupt_check_fn)fn)(arg);
}
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/remote"
)

// interruptPoll is how often a waiting call invokes the context's
// interrupt check: Ctrl-C then stops a stalled remote read within about
// this long, and an idle wait costs 20 checks a second.
const interruptPoll = 50 * time.Millisecond

// interruptCheck is a context's memtier_set_interrupt_check: a C function
// pointer and its argument, both opaque here.
type interruptCheck struct {
	fn, arg unsafe.Pointer
}

// checks holds the interrupt check of each context that set one, by id: a
// read-only map replaced whole under checksMu (as liveCtxs), so a call
// looks its check up with one atomic load, no process-wide lock.
var (
	checks   atomic.Pointer[map[uint64]interruptCheck]
	checksMu sync.Mutex
)

func checkOf(id uint64) (interruptCheck, bool) {
	if m := checks.Load(); m != nil {
		c, ok := (*m)[id]
		return c, ok
	}
	return interruptCheck{}, false
}

// anyChecks reports whether some context has an interrupt check (else no
// call needs to look for URLs among its paths).
func anyChecks() bool {
	m := checks.Load()
	return m != nil && len(*m) > 0
}

// setCheck makes c the check of context id (c.fn nil: none).
func setCheck(id uint64, c interruptCheck) {
	checksMu.Lock()
	defer checksMu.Unlock()
	m := map[uint64]interruptCheck{}
	if old := checks.Load(); old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	if c.fn == nil {
		delete(m, id)
	} else {
		m[id] = c
	}
	checks.Store(&m)
}

// forgetCheck drops the check of a finalized context.
func forgetCheck(id uint64) {
	if _, ok := checkOf(id); ok {
		setCheck(id, interruptCheck{})
	}
}

//export mtgo_interrupt
func mtgo_interrupt(id C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		ctx.Interrupt()
		return nil
	})
}

//export mtgo_set_interrupt_check
func mtgo_set_interrupt_check(id C.uint64_t, fn, arg unsafe.Pointer) C.int {
	return call(id, func(ctx *engine.Context) error {
		setCheck(uint64(id), interruptCheck{fn: fn, arg: arg})
		return nil
	})
}

// anyURL reports whether one of paths is a URL (a remote call).
func anyURL(paths ...string) bool {
	for _, p := range paths {
		if remote.IsURL(p) {
			return true
		}
	}
	return false
}

// interruptible runs fn, an engine call of context id that may wait on a
// remote server (remote: its path, or its handle's, is a URL), so that the
// context's interrupt check can stop it: fn runs on a goroutine of its own
// (with the export's fault guard and panic recovery), while this
// goroutine, which stays on the caller's C thread for the whole export
// (cgo runs a call from C on that thread), invokes the check every
// interruptPoll and interrupts the context when it returns nonzero; the
// call then returns errs.Interrupted, even if fn finished meanwhile, so a
// caller whose check said stop always hears it. Without a check, or for a
// local call, fn runs here as before.
func interruptible(id uint64, remote bool, fn func() error) error {
	if !remote {
		return fn()
	}
	chk, ok := checkOf(id)
	if !ok {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if p := recover(); p != nil {
				err = errs.FromPanic("memtier", p)
			}
			done <- err
		}()
		defer guardFaults()()
		err = fn()
	}()
	t := time.NewTicker(interruptPoll)
	defer t.Stop()
	stopped := false
	for {
		select {
		case err := <-done:
			switch {
			case !stopped || errs.CodeOf(err) == errs.Interrupted:
				return err
			case err == nil:
				return errs.New(errs.Interrupted, "memtier", "interrupted (the call had finished)")
			default:
				// A layer above the remote source (a format parse, a
				// tier) reported the canceled request in words of its own.
				return errs.New(errs.Interrupted, "memtier", "interrupted: %v", err)
			}
		case <-t.C:
			if !stopped && C.mt_call_interrupt_check(chk.fn, chk.arg) != 0 {
				stopped = true
				if ctx, err := lookupContext(id); err == nil {
					ctx.Interrupt()
				}
			}
		}
	}
}
