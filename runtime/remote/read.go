package remote

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/interrupt"
)

// open sends Open's GET for loc (see Source.Open): a fresh one when old is
// nil, else a revalidation against old, which returns (nil, nil) when old
// is still current.
func (c *Client) open(ctx context.Context, name string, loc Location, old *Object) (*Object, error) {
	window := c.opts.OpenBytes
	if window < 0 {
		window = 1
	}
	buf := make([]byte, window)
	sp := getSpec{loc: loc, first: 0, last: uint64(window) - 1, dst: buf, open: true}
	if old != nil {
		if old.val.etag != "" {
			sp.ifNoneMatch = old.val.etag
		} else if old.val.lastModified != "" {
			sp.ifModifiedSince = old.val.lastModified
		}
	}
	res, err := c.fetch(ctx, "remote open", sp)
	if err != nil {
		return nil, err
	}
	if res.notModified {
		return nil, nil
	}
	if old != nil && res.val == old.val {
		// A server without conditional GETs: same validator, same version.
		return nil, nil
	}
	o := &Object{name: name, loc: loc, val: res.val}
	o.version = versionOf(c.versionAddr(loc), res.val)
	if !res.empty && res.n > 0 {
		h := buf[:res.n]
		if cap(h) > 2*len(h) {
			h = append([]byte(nil), h...) // a small object: do not keep the whole window
		}
		o.head.Store(&h)
	}
	return o, nil
}

// ReadObject fills dst with the bytes of o at off: what Open's head window
// holds is copied, the rest is split into parts of Options.PartBytes, run
// as ranged GETs pinned to o's version by up to Options.MaxConcurrency
// workers (the Client's limiter caps them across all callers). Each part
// writes straight into its slice of dst; on failure dst holds a mix of
// filled and untouched parts and must not be used. ctx cancels it.
// Errors: errs.EOF for a range past o's size, else the first part's error
// (see fail). Safe for concurrent use.
func (c *Client) ReadObject(ctx context.Context, o *Object, dst []byte, off uint64) error {
	n := uint64(len(dst))
	if n == 0 {
		return nil
	}
	if off > o.val.size || n > o.val.size-off {
		return errs.At(errs.EOF, "remote read", o.loc.String(), int64(off),
			"range [%d, %d) is past the end of the object (%d bytes)", off, off+n, o.val.size)
	}
	if head := o.headBytes(); off < uint64(len(head)) {
		k := copy(dst, head[off:])
		dst, off = dst[k:], off+uint64(k)
		if len(dst) == 0 {
			return nil
		}
	}
	part := uint64(c.opts.PartBytes)
	parts := (uint64(len(dst)) + part - 1) / part
	one := func(ctx context.Context, i uint64) error {
		lo := i * part
		hi := min(lo+part, uint64(len(dst)))
		_, err := c.fetch(ctx, "remote read", getSpec{
			loc: o.loc, first: off + lo, last: off + hi - 1, dst: dst[lo:hi], pin: &o.val,
		})
		return err
	}
	if parts == 1 {
		var err error
		interrupt.Do(func() { err = one(ctx, 0) })
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Uint64
		once     sync.Once
		firstErr error
	)
	workers := min(parts, uint64(c.opts.MaxConcurrency))
	done := make(chan struct{}, workers)
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				i := next.Add(1) - 1
				if i >= parts || ctx.Err() != nil {
					return
				}
				if err := one(ctx, i); err != nil {
					// The first failure wins; the cancel makes the others
					// stop (their "canceled" errors are dropped).
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	interrupt.Collect(done, int(workers)) // the caller's interrupt check runs meanwhile
	if firstErr == nil && ctx.Err() != nil {
		// The caller's ctx ended (ours is canceled only after a failure):
		// Client.Interrupt.
		return errs.At(errs.Interrupted, "remote read", o.loc.String(), int64(off), "interrupted before every part was read")
	}
	return firstErr
}
