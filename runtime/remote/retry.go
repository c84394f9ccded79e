package remote

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/logx"
)

// fetch runs sp with retries: jittered exponential backoff after a
// retryable failure (see retryableStatus; also timeouts, resets and short
// bodies), at most Options.MaxAttempts attempts and no retry that would
// wait past Options.RetryBudget. A short or broken body resumes: the next
// attempt asks only for the bytes still missing, pinned to the same version
// (an Open learns its version from the first attempt that sent headers, so
// its resumed attempts are pinned too). Every attempt holds a limiter slot.
// It returns the result, or an error built by c.fail.
func (c *Client) fetch(ctx context.Context, op string, sp getSpec) (getResult, error) {
	if sp.loc.Kind == KindS3 && !c.res.anonymous && c.res.err != nil {
		return getResult{}, errs.At(errs.Permission, op, sp.loc.String(), -1, "%s", c.res.err.(*errs.Error).Msg)
	}
	start := time.Now()
	origFirst, origLast := sp.first, sp.last
	done := 0 // bytes of dst already filled by earlier attempts
	var first getResult
	var learnt bool
	for attempt := 1; ; attempt++ {
		if err := c.lim.acquire(ctx); err != nil {
			return getResult{}, c.fail(op, sp.loc, origFirst, origLast, &attemptError{reason: "interrupted", canceled: true}, attempt-1, time.Since(start))
		}
		res, ae := c.getOnce(ctx, &sp)
		switch {
		case ae == nil:
			c.lim.release(outcomeOK, time.Now())
		case ae.throttle:
			c.st.throttles.Add(1)
			c.lim.release(outcomeThrottled, time.Now())
			logx.Warnf("remote.throttle", "%s: throttled (HTTP %d): ranged GETs in flight now at most %d", sp.loc, ae.status, c.lim.current())
		default:
			c.lim.release(outcomeOther, time.Now())
		}
		if ae == nil {
			if learnt {
				// A resumed Open: report the whole window it filled.
				res.val, res.n = first.val, done+res.n
			}
			return res, nil
		}
		if sp.open && ae.n > 0 && !learnt {
			// Open's first bytes came with headers: pin the rest to them.
			first, learnt = res, true
		}
		if ae.n > 0 {
			done += ae.n
			sp.first += uint64(ae.n)
			sp.dst = sp.dst[ae.n:]
			if sp.open {
				// Ask exactly for what is left of the object's window.
				sp.last = min(sp.last, first.val.size-1)
				sp.open, sp.pin = false, &first.val
				sp.ifNoneMatch, sp.ifModifiedSince = "", ""
			}
		}
		wait := backoff(c.opts.BackoffBase, c.opts.BackoffMax, attempt)
		wait = max(wait, ae.retryAfter)
		if !ae.retry || attempt >= c.opts.MaxAttempts || time.Since(start)+wait > c.opts.RetryBudget {
			c.st.failures.Add(1)
			return getResult{}, c.fail(op, sp.loc, origFirst, origLast, ae, attempt, time.Since(start))
		}
		c.st.retries.Add(1)
		logx.Infof("remote.retry", "%s bytes=%d-%d: attempt %d failed (%s); retrying", sp.loc, sp.first, sp.last, attempt, ae.brief())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return getResult{}, c.fail(op, sp.loc, origFirst, origLast, &attemptError{reason: "interrupted", canceled: true}, attempt, time.Since(start))
		case <-t.C:
		}
	}
}

// backoff returns the wait before retry number attempt (1 after the first
// failure): uniform in [0, min(maxWait, base*2^(attempt-1))), AWS's "full
// jitter", which spreads retries of parts that failed together
// (https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/).
func backoff(base, maxWait time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	ceil := base
	for i := 1; i < attempt && ceil < maxWait; i++ {
		ceil *= 2
	}
	ceil = min(ceil, maxWait)
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}
