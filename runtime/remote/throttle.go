package remote

import (
	"context"
	"sync"
	"time"
)

// limiter caps the GETs in flight for a Client. Its limit starts at max
// and follows AIMD, as TCP does with its window: a throttled answer (503
// SlowDown, 429) halves it, at most once per cutGap so that a burst of
// throttled answers to requests sent together counts as one signal; then
// every limit successes in a row raise it by one, back up to max. Safe for
// concurrent use.
type limiter struct {
	mu       sync.Mutex
	cond     *sync.Cond
	max      int
	limit    int
	inflight int
	streak   int // successes since the last change
	lastCut  time.Time
	cutGap   time.Duration
}

func newLimiter(max int, cutGap time.Duration) *limiter {
	l := &limiter{max: max, limit: max, cutGap: cutGap}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// acquire waits for a slot; it fails only with ctx's error.
func (l *limiter) acquire(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight < l.limit {
		l.inflight++
		return nil
	}
	// Wake the waiters when ctx ends; they recheck it below.
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.cond.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	for l.inflight >= l.limit {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.cond.Wait()
	}
	l.inflight++
	return nil
}

// outcome of a request, for release.
const (
	outcomeOther     = iota // failed, not a throttle: the limit is unchanged
	outcomeOK               // succeeded
	outcomeThrottled        // 503 SlowDown or 429
)

// release returns a slot and adjusts the limit by the request's outcome.
func (l *limiter) release(outcome int, now time.Time) {
	l.mu.Lock()
	l.inflight--
	switch outcome {
	case outcomeThrottled:
		if l.lastCut.IsZero() || now.Sub(l.lastCut) >= l.cutGap {
			l.limit = max(1, l.limit/2)
			l.lastCut = now
		}
		l.streak = 0
	case outcomeOK:
		if l.limit < l.max {
			l.streak++
			if l.streak >= l.limit {
				l.limit++
				l.streak = 0
			}
		}
	}
	l.cond.Broadcast()
	l.mu.Unlock()
}

// current returns the limit now.
func (l *limiter) current() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}
