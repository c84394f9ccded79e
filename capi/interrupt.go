package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include <pthread.h>
#include <stdint.h>
#include "memtier.h"

// The interrupt check of the call running on this thread (set by
// mt_ic_enter, cleared by mt_ic_leave): only the thread that made a call
// sees it, which is where the check must run. initial-exec TLS, as hit.c's:
// the default model would make the library need ld-linux besides libc.
#define MT_IC_TLS __thread __attribute__((tls_model("initial-exec")))
static MT_IC_TLS void* mt_ic_fn;
static MT_IC_TLS void* mt_ic_arg;
static MT_IC_TLS uint64_t mt_ic_id;
static MT_IC_TLS int mt_ic_stopped;

// Marks this thread's call with the check, unless the check is for another
// thread (thread: a pthread_self() value, 0 any); returns whether it did.
static int mt_ic_enter(uint64_t id, void* fn, void* arg, uint64_t thread) {
    if (thread != 0 && (uint64_t)pthread_self() != thread) return 0;
    mt_ic_id = id;
    mt_ic_fn = fn;
    mt_ic_arg = arg;
    mt_ic_stopped = 0;
    return 1;
}

// Ends the call's mark; returns whether its check said stop.
static int mt_ic_leave(void) {
    int s = mt_ic_stopped;
    mt_ic_fn = 0;
    mt_ic_arg = 0;
    mt_ic_id = 0;
    mt_ic_stopped = 0;
    return s;
}

// -1: no check on this thread; query: whether it said stop already (1) or
// not (0); else runs the check (once it said stop, only reports it): 1
// stop, 0 go on; *id is the call's context.
static int mt_ic_poll(int query, uint64_t* id) {
    if (mt_ic_fn == 0) return -1;
    if (query) return mt_ic_stopped;
    *id = mt_ic_id;
    if (mt_ic_stopped) return 1;
    if (((memtier_interrupt_check_fn)mt_ic_fn)(mt_ic_arg) != 0) mt_ic_stopped = 1;
    return mt_ic_stopped;
}
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/interrupt"
	"github.com/memtier/memtier/runtime/remote"
)

// interruptCheck is a context's memtier_set_interrupt_check: a C function
// pointer and its argument, both opaque here, and the thread whose calls
// run it (a pthread_self() value; 0: every thread).
type interruptCheck struct {
	fn, arg unsafe.Pointer
	thread  uint64
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
func mtgo_set_interrupt_check(id C.uint64_t, fn, arg unsafe.Pointer, thread C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		setCheck(uint64(id), interruptCheck{fn: fn, arg: arg, thread: uint64(thread)})
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
// remote server (remote: its path, or its handle's, is a URL), with this
// thread marked with the context's interrupt check (runtime/interrupt):
// the remote requests fn blocks on then wait in interrupt.Do or Collect,
// which run the check here, on the caller's thread (cgo keeps an export on
// it). When
// the check said stop, the call returns errs.Interrupted, even if fn
// finished meanwhile, so a caller whose check said stop always hears it.
// Without a check, or for a local call, fn runs unmarked.
func interruptible(id uint64, remote bool, fn func() error) error {
	if !remote {
		return fn()
	}
	chk, ok := checkOf(id)
	if !ok || C.mt_ic_enter(C.uint64_t(id), chk.fn, chk.arg, C.uint64_t(chk.thread)) == 0 {
		return fn()
	}
	interrupt.Enter()
	var err error
	func() {
		defer func() {
			interrupt.Leave()
			if C.mt_ic_leave() != 0 {
				err = stoppedErr(err)
			}
		}()
		err = fn()
	}()
	return err
}

// stoppedErr is the error of a call whose check said stop and that ended
// with err.
func stoppedErr(err error) error {
	switch {
	case errs.CodeOf(err) == errs.Interrupted:
		return err
	case err == nil:
		return errs.New(errs.Interrupted, "memtier", "interrupted (the call had finished)")
	default:
		// A layer above the remote source (a format parse, a tier)
		// reported the canceled request in words of its own.
		return errs.New(errs.Interrupted, "memtier", "interrupted: %v", err)
	}
}

// pollCheck is the interrupt.Hook: the check of the call on this thread
// (mt_ic_poll), interrupting its context when it says stop.
func pollCheck(query bool) int {
	q := C.int(0)
	if query {
		q = 1
	}
	var id C.uint64_t
	r := int(C.mt_ic_poll(q, &id))
	if r == 1 {
		if ctx, err := lookupContext(uint64(id)); err == nil {
			ctx.Interrupt()
		}
	}
	return r
}

func init() { interrupt.SetHook(pollCheck) }
