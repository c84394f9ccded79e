package engine

import (
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// served counts the bytes of one request by the path that delivered them.
type served struct {
	cache, buffered, direct uint64
	fetched                 uint64 // bytes read from storage into cache blocks
}

// account records the bytes of one successful request by the paths that
// served it (requests themselves are counted on entry, failed ones too).
func (c *Context) account(s served) {
	total := s.cache + s.buffered + s.direct
	c.st.Bytes.Add(total)
	countHit(&c.st.CacheHitRequests, &c.st.CacheHitBytes, s.cache, total)
	countPath(&c.st.BufferedRequests, &c.st.BufferedBytes, s.buffered)
	countPath(&c.st.DirectRequests, &c.st.DirectBytes, s.direct)
}

// countPath counts one request and its n bytes on a storage path that moved
// n > 0 bytes of it (a request served by two paths counts under both).
func countPath(reqs, bytes *atomic.Uint64, n uint64) {
	if n > 0 {
		reqs.Add(1)
		bytes.Add(n)
	}
}

// countHit counts n bytes copied from a cache tier, and a hit request only
// when the tier served the whole request (total bytes).
func countHit(reqs, bytes *atomic.Uint64, n, total uint64) {
	if n > 0 {
		bytes.Add(n)
		if n == total {
			reqs.Add(1)
		}
	}
}

// checkRange validates the arguments every read shares.
func checkRange(op, path string, off, size uint64, dstLen int, flags uint32) error {
	if flags&^policy.AllFlags != 0 {
		return errs.At(errs.InvalidArg, op, path, -1, "unknown flag bits 0x%x", flags&^policy.AllFlags)
	}
	if path == "" {
		return errs.New(errs.InvalidArg, op, "empty path")
	}
	if off+size < off || off > math.MaxInt64 || size > math.MaxInt64-off {
		return errs.At(errs.InvalidArg, op, path, -1, "offset %d + size %d is beyond the largest file offset (2^63 - 1)", off, size)
	}
	if uint64(dstLen) < size {
		return errs.At(errs.InvalidArg, op, path, int64(off), "destination holds %d bytes, %d requested", dstLen, size)
	}
	return nil
}

// Read reads exactly size bytes of path at off into dst[:size] (path is not
// retained after Read returns: it may be a view of C memory): a host
// buffer for policy.TargetCPU; for policy.TargetCUDA dst only carries the
// address and length of CUDA device memory, never read or written by Go
// (readGPU; errs.Unsupported without a usable CUDA backend, errs.InvalidArg
// for a destination that is not device memory). A range past end of file is
// errs.EOF and nothing beyond the file is written.
func (c *Context) Read(path string, off, size uint64, dst []byte, target int, flags uint32) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return c.read(path, off, size, dst, target, flags)
}

func (c *Context) read(path string, off, size uint64, dst []byte, target int, flags uint32) error {
	c.st.Requests.Add(1)
	if target != policy.TargetCPU {
		// The GPU path may remember the path (per-file GDS fallbacks); the
		// caller's string may be a view of C memory (capi viewPath).
		path = strings.Clone(path)
		if target == policy.TargetCUDA {
			return c.readGPU("read", path, off, size, devPtr(dst), len(dst), flags, 0)
		}
		return errs.At(errs.InvalidArg, "read", path, -1, "unknown target %d", target)
	}
	if size == 0 {
		if flags&^policy.AllFlags != 0 {
			return errs.At(errs.InvalidArg, "read", path, -1, "unknown flag bits 0x%x", flags&^policy.AllFlags)
		}
		c.account(served{})
		return nil
	}
	if err := checkRange("read", path, off, size, len(dst), flags); err != nil {
		return err
	}
	f, err := c.openFlags(path, flags)
	if err != nil {
		return err
	}
	defer f.Release()
	if err := checkEOF(f, off, size); err != nil {
		return err
	}
	s, err := c.serve(f, off, size, dst[:size], flags, false)
	if err != nil {
		return err
	}
	c.account(s)
	return nil
}

// acquire opens path through the descriptor table, trusting an open File as
// the context's freshness setting allows, and drops the cache blocks of a
// version of the file that changed since it was cached.
func (c *Context) acquire(path string) (*files.File, error) {
	return c.acquireTrusting(path, c.trust)
}

// trustFor is how long a read with flags trusts an open version without a
// check: READ_IMMUTABLE trusts it as last checked, else the context's
// freshness setting decides.
func (c *Context) trustFor(flags uint32) time.Duration {
	if flags&policy.ReadImmutable != 0 {
		return files.TrustForever
	}
	return c.trust
}

// acquireTrusting opens a local file for the calls that need its
// descriptor (the GPU target's reads); a URL is errs.Unsupported there so
// far. Every other call opens through openTrusting and takes URLs.
func (c *Context) acquireTrusting(path string, trust time.Duration) (*files.File, error) {
	if remote.IsURL(path) {
		return nil, errRemoteHere(path)
	}
	obj, err := c.openTrusting(path, trust)
	if err != nil {
		return nil, err
	}
	return source.File(obj), nil
}

// openFlags opens path, a local file or a URL, as a read with flags does
// (READ_IMMUTABLE trusts what was last checked).
func (c *Context) openFlags(path string, flags uint32) (source.Object, error) {
	return c.openTrusting(path, c.trustFor(flags))
}

// openTrusting opens path through the context's sources and drops the cache
// blocks of a version that changed since it was cached. A URL is copied
// first: the remote source keeps the name it opened (its table of versions,
// the Object's name), and the caller's string may be a view of C memory
// (capi viewPath); the descriptor table copies local paths itself.
func (c *Context) openTrusting(path string, trust time.Duration) (source.Object, error) {
	if remote.HasScheme(path) {
		path = strings.Clone(path)
	}
	obj, stale, err := c.src.Open(path, trust)
	if err != nil {
		return nil, err
	}
	if stale != 0 {
		if c.cache != nil {
			c.cache.DropFile(stale)
		}
		c.dropHBM([]uint64{stale}, false)
	}
	return obj, nil
}

func checkEOF(f source.Object, off, size uint64) error {
	fsize := f.Size()
	if off+size > fsize {
		return errs.At(errs.EOF, "read", displayName(f), int64(off),
			"range [%d, %d) runs past end of file (size %d)", off, off+size, fsize)
	}
	return nil
}

// residencySamples: pages sampled to tell a warm range from a cold one.
const residencySamples = 64

// decide runs the policy for [off, off+size) of o, probing page-cache
// residency and the device's speeds only when the answer depends on them (a
// large AUTO READ_ONCE read; coldProbe runs the device probe on the first
// cold one of a device).
func (c *Context) decide(o source.Object, off uint64, size uint64, flags uint32, cached uint64) policy.Decision {
	_, d := c.decideFor(o, off, size, flags, cached, decideRead)
	c.logDecision(o, off, size, flags, d)
	return d
}

// How decideFor gathers what the policy looks at.
const (
	decideRead    = iota // sample residency when it matters; run the device probe when it could change the path
	decideQuiet          // the same, but only the probe's remembered result: explain does no I/O of its own
	decideExplain        // decideQuiet with every page's residency measured, for explain's figures
)

// decideFor builds the policy's input for [off, off+size) of o (cached bytes
// already in the DRAM cache) as mode says, and returns it with the decision.
func (c *Context) decideFor(o source.Object, off, size uint64, flags uint32, cached uint64, mode int) (policy.Input, policy.Decision) {
	in := policy.Input{Target: policy.TargetCPU, Size: size, Flags: flags, CachedBytes: cached,
		DirectRefused: c.src.DirectRefused(o)}
	switch {
	case mode == decideExplain:
		in.ResidentBytes, in.ResidentKnown = c.src.Resident(o, off, size, 0)
		in.Probe = c.objProbe(o)
	case !policy.NeedsResidency(c.pol, in):
	case mode == decideRead:
		in.ResidentBytes, in.ResidentKnown = c.src.Resident(o, off, size, residencySamples)
		c.coldProbe(o, off, size, &in)
	default:
		in.ResidentBytes, in.ResidentKnown = c.src.Resident(o, off, size, residencySamples)
		in.Probe = c.objProbe(o)
	}
	return in, policy.Decide(c.pol, in)
}

// serve fills dst (len size) with the bytes of f at off; the range is inside
// the file. prefetch forces admission, and dst is nil then (fill the cache
// only). It plans the request and executes the plan.
func (c *Context) serve(f source.Object, off, size uint64, dst []byte, flags uint32, prefetch bool) (served, error) {
	var p plan
	c.makePlan(&p, f, off, size, flags, planOpts{prefetch: prefetch})
	return c.exec(&p, dst, false)
}

// serveDecided is serve with the path and admission already decided (a piece
// of a chunk decided as a whole).
func (c *Context) serveDecided(f source.Object, off uint64, dst []byte, path int, admit bool) (served, error) {
	var p plan
	d := policy.Decision{Path: path, Admit: admit}
	c.makePlan(&p, f, off, uint64(len(dst)), 0, planOpts{decided: &d})
	return c.exec(&p, dst, false)
}

// fetch reads dst from source object o at off by path, counting the bytes by
// the path that moved them.
func (c *Context) fetch(o source.Object, dst []byte, off uint64, path int) (served, error) {
	used, err := c.src.ReadAt(o, dst, off, path)
	if err != nil {
		return served{}, err
	}
	if used == source.PathDirect {
		return served{direct: uint64(len(dst))}, nil
	}
	return served{buffered: uint64(len(dst))}, nil
}

func (s *served) add(o served) {
	s.cache += o.cache
	s.buffered += o.buffered
	s.direct += o.direct
	s.fetched += o.fetched
}
