package remote

import (
	"context"
	"testing"
	"time"
)

func TestLimiter_AIMD(t *testing.T) {
	l := newLimiter(8, 100*time.Millisecond)
	now := time.Unix(0, 0)
	ctx := context.Background()
	for range 8 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Eight throttled answers to requests sent together: one halving.
	for range 8 {
		l.release(outcomeThrottled, now)
	}
	if got := l.current(); got != 4 {
		t.Fatalf("limit after a burst of throttles = %d, want 4", got)
	}
	// A later throttle halves again; the floor is 1.
	for i, want := range []int{2, 1, 1} {
		l.acquire(ctx)
		l.release(outcomeThrottled, now.Add(time.Duration(i+1)*100*time.Millisecond))
		if got := l.current(); got != want {
			t.Fatalf("limit = %d, want %d", got, want)
		}
	}
	// limit successes in a row raise it by one: 1 -> 2 after 1, -> 3 after 2 more.
	for i, want := range []int{2, 2, 3} {
		l.acquire(ctx)
		l.release(outcomeOK, now)
		if got := l.current(); got != want {
			t.Fatalf("after %d successes limit = %d, want %d", i+1, got, want)
		}
	}
	// Other failures change nothing.
	l.acquire(ctx)
	l.release(outcomeOther, now)
	if got := l.current(); got != 3 {
		t.Fatalf("limit after a plain failure = %d, want 3", got)
	}
}

func TestLimiter_BlocksAndCancels(t *testing.T) {
	l := newLimiter(1, time.Millisecond)
	ctx := context.Background()
	l.acquire(ctx)
	got := make(chan error, 1)
	go func() { got <- l.acquire(ctx) }()
	select {
	case <-got:
		t.Fatal("second acquire did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	l.release(outcomeOK, time.Now())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { got <- l.acquire(cctx) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-got; err != context.Canceled {
		t.Fatalf("canceled acquire = %v", err)
	}
}
