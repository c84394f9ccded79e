package interrupt

import (
	"sync/atomic"
	"testing"
)

// fakeHook stands in for capi's: the "thread" has a check that says stop at
// its third run, whose stop closes stopped (as the context's interrupt ends
// the requests a wait waits for).
type fakeHook struct {
	runs    atomic.Int32
	said    atomic.Bool
	stopped chan struct{}
}

func (f *fakeHook) hook(query bool) int {
	if query {
		if f.said.Load() {
			return 1
		}
		return 0
	}
	if f.said.Load() || f.runs.Add(1) == 3 {
		if !f.said.Swap(true) {
			close(f.stopped)
		}
		return 1
	}
	return 0
}

func install(t *testing.T) *fakeHook {
	f := &fakeHook{stopped: make(chan struct{})}
	SetHook(f.hook)
	Enter()
	t.Cleanup(func() { Leave(); SetHook(nil) })
	return f
}

// TestDoStopsOnCheck: a blocked fn run by Do is waited for while the check
// runs every Poll; the check's stop ends it, and Do returns after that.
func TestDoStopsOnCheck(t *testing.T) {
	f := install(t)
	if !Watched() {
		t.Fatal("Watched false with a hook and a marked call")
	}
	Do(func() { <-f.stopped })
	if n := f.runs.Load(); n != 3 {
		t.Errorf("check ran %d times, want 3 (it said stop at the third)", n)
	}
	// Stopped already: the next wait interrupts at once (one more run of
	// the hook, no Poll waited), then collects its helpers.
	ch := make(chan struct{}, 2)
	for range 2 {
		go func() { <-f.stopped; ch <- struct{}{} }()
	}
	Collect(ch, 2)
}

// TestCollectPolls: Collect of helpers that end only when the check says
// stop runs the check every Poll until then, with no goroutine of its own.
func TestCollectPolls(t *testing.T) {
	f := install(t)
	ch := make(chan struct{}, 3)
	for range 3 {
		go func() { <-f.stopped; ch <- struct{}{} }()
	}
	Collect(ch, 3)
	if n := f.runs.Load(); n != 3 {
		t.Errorf("check ran %d times, want 3", n)
	}
	Collect(ch, 0) // nothing to wait for
}

// TestDoPanicsInCaller: a panic in fn's goroutine is raised again in Do's
// caller (where an export recovers it).
func TestDoPanicsInCaller(t *testing.T) {
	install(t)
	defer func() {
		if p := recover(); p != "boom" {
			t.Fatalf("recovered %v, want boom", p)
		}
	}()
	Do(func() { panic("boom") })
	t.Fatal("Do returned")
}

// TestUnwatchedInline: with no marked call, Watched is false without asking
// the hook, and Do runs fn on the caller's goroutine.
func TestUnwatchedInline(t *testing.T) {
	asked := false
	SetHook(func(bool) int { asked = true; return 0 })
	defer SetHook(nil)
	if Watched() || asked {
		t.Fatalf("Watched %v, hook asked %v; want false, false", Watched(), asked)
	}
	ran := false
	Do(func() { ran = true })
	if !ran {
		t.Fatal("fn did not run")
	}
}
