// Package interrupt lets a call that waits on a remote server be stopped by
// its caller's interrupt check (memtier_set_interrupt_check), which must run
// on the caller's own thread: Python runs signal handlers only on its main
// thread, so Ctrl-C is seen only there.
//
// capi marks the thread of a call that has a check (the goroutine of a cgo
// export stays on its C thread for the whole call, and no other goroutine
// runs there meanwhile) and installs the Hook that runs the check. Code
// that is about to block on the network runs it with Do, or collects its
// helpers with Collect, which on a Watched thread run the check about
// every Poll while they wait; a check that says stop interrupts the call's
// context (the Hook does), so the request returns errs.Interrupted and the
// wait ends. Other goroutines (a
// read's parallel workers) see Watched false and block as before; they are
// stopped by the same interrupt.
package interrupt

import (
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Poll is how often a wait runs the check: Ctrl-C stops a stalled remote
// read within about this long, and a wait costs 20 checks a second.
const Poll = 50 * time.Millisecond

// Hook is capi's link to the calling thread's check. It returns -1 when
// the thread has none. query true only asks: 1 when the check already said
// stop in this call, else 0. query false runs the check (once it said
// stop, it only reports that again) and interrupts the call's context when
// it says stop: 1 stop, 0 go on.
type Hook func(query bool) int

var (
	hook atomic.Pointer[Hook]
	// marked counts the threads now inside a call with a check, so that
	// Watched costs one atomic load when there is none (local reads, and
	// every program that set no check).
	marked atomic.Int64
)

// SetHook installs h (capi, at library load); nil removes it.
func SetHook(h Hook) {
	if h == nil {
		hook.Store(nil)
		return
	}
	hook.Store(&h)
}

// Enter and Leave bracket a call whose thread capi marked (they only
// count, so that Watched is free while no call is marked).
func Enter() { marked.Add(1) }

// Leave ends what Enter began.
func Leave() { marked.Add(-1) }

// Watched reports whether the calling goroutine runs on a thread whose
// call has an interrupt check, so that a wait here should run it.
func Watched() bool {
	if marked.Load() == 0 {
		return false
	}
	h := hook.Load()
	return h != nil && (*h)(true) >= 0
}

// Do runs fn, on a goroutine of its own when the caller is Watched (so
// that the caller can Collect it, running the check, while fn blocks), else
// inline. fn's goroutine has the export's guards: a memory fault (a bad
// destination) is a panic, and a panic is raised again in the caller,
// where the export recovers it.
func Do(fn func()) {
	if !Watched() {
		fn()
		return
	}
	done := make(chan struct{}, 1)
	var p any
	go func() {
		defer func() { done <- struct{}{} }()
		defer func() { p = recover() }()
		debug.SetPanicOnFault(true)
		fn()
	}()
	Collect(done, 1)
	if p != nil {
		panic(p)
	}
}

// Collect receives n values from ch, the completions of n helper
// goroutines; when the caller is Watched it runs the check every Poll
// meanwhile (a helper may wait on a server). No goroutine of its own: a
// wait that ends before Poll costs what n plain receives cost.
func Collect(ch <-chan struct{}, n int) {
	if n <= 0 {
		return
	}
	h := hook.Load()
	if h == nil || !Watched() {
		for range n {
			<-ch
		}
		return
	}
	var t *time.Ticker
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	stopped := (*h)(true) == 1
	for n > 0 {
		select {
		case <-ch:
			n--
			continue
		default:
		}
		if stopped {
			(*h)(false) // interrupt what started after the stop
			for ; n > 0; n-- {
				<-ch
			}
			return
		}
		if t == nil {
			t = time.NewTicker(Poll)
		}
		select {
		case <-ch:
			n--
		case <-t.C:
			stopped = (*h)(false) == 1
		}
	}
}
