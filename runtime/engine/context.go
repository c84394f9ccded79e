package engine

import (
	"runtime"
	"sync"
	"time"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/cache"
	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/hitidx"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/mem"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
	"github.com/memtier/memtier/runtime/stats"
)

// Context is one MemTier instance. Create it with New, release it with Close.
type Context struct {
	opts  config.Options
	pol   policy.Config
	st    stats.Counters
	files *files.Table
	rd    *iopath.Reader
	src   source.Source // bottom of the tier stack: local files and remote objects (sources.go)
	cache *cache.Cache  // nil when the cache is disabled
	arena *mem.Arena    // block memory of the cache, off the Go heap

	mu      sync.RWMutex // read: a call in progress; write: Close
	closed  bool
	closing chan struct{} // closed when Close starts: queued async work gives up
	asyncWG sync.WaitGroup
	asyncQ  chan struct{} // bounds async requests running at once

	tars tarCache // member lists of recently opened tar shards

	// trust is how long an open File is trusted without a check, from the
	// freshness setting (files.TrustNone: strict; TrustForever: at open only).
	trust time.Duration

	tgt *gpu.Target // target CUDA and the HBM tier (gpuread.go); nothing created until first used

	hit *hitidx.Index // what capi/hit.c reads to serve hits in C (hitindex.go); nil: none

	memLim config.MemLimit // the memory limit that bounded the cache budget at New
}

// New validates o and builds a Context. GOMAXPROCS > 0 is applied to the
// process (the Go runtime is process-wide). Errors: errs.InvalidArg for a bad
// option or a cache budget above what the memory limit allows
// (checkCacheBudget; the limit is read here, config.ReadMemLimit), errs.Format
// for a bad fault spec, errs.NoMem.
func New(o config.Options) (*Context, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	lim := config.ReadMemLimit()
	if err := checkCacheBudget(o, lim); err != nil {
		return nil, err
	}
	if err := checkGDSRequired(o); err != nil {
		return nil, err
	}
	if o.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(o.GOMAXPROCS)
	}
	c := &Context{
		opts:    o,
		memLim:  lim,
		closing: make(chan struct{}),
		asyncQ:  make(chan struct{}, 4*o.IOThreads),
		pol: policy.Config{CacheEnabled: o.CacheEnabled, AdmitMax: o.CacheAdmitMaxBytes,
			DirectThreshold: o.DirectThreshold, DirectMode: o.DirectMode},
	}
	switch o.Freshness {
	case config.FreshOpen:
		c.trust = files.TrustForever
	case config.FreshInterval:
		c.trust = time.Duration(o.FreshnessIntervalMs) * time.Millisecond
	}
	rd, err := iopath.New(o, &c.st)
	if err != nil {
		return nil, err
	}
	c.rd = rd
	c.files = files.NewTable(o.MaxOpenFiles, &c.st)
	c.tgt = gpu.NewTarget(gpu.TargetOptions{Lanes: min(max(o.IOThreads, gpu.DefaultLanes), 16),
		HBMDevice: o.HBMDevice, HBMBudget: o.HBMCacheBytes, HBMBlock: config.HBMBlockBytes})
	c.files.SetDirectCloseHook(c.forgetDirect)
	c.src = &sources{local: &source.Local{Files: c.files, RD: rd, DirectRequired: o.DirectMode == policy.DirectRequired}}
	if o.PathRecheckMs > 0 {
		c.files.SetPathRecheck(time.Duration(o.PathRecheckMs) * time.Millisecond)
	}
	if o.CacheEnabled {
		nblocks := int(o.CacheBytes / o.CacheBlockBytes)
		c.arena = mem.NewArena(int(o.CacheBlockBytes), nblocks)
		c.cache = cache.New(o.CacheBytes, o.CacheBlockBytes, c.arena, &c.st)
	}
	c.newHitIndex()
	return c, nil
}

// Options returns the effective options.
func (c *Context) Options() config.Options { return c.opts }

// MemLimit returns the memory limit that New checked the DRAM cache budget
// against: its bytes (0 = none known) and source, e.g. "cgroup v2 memory.max
// at /sys/fs/cgroup/x" or "host RAM", read once at New. Safe for concurrent
// use, also after Close.
func (c *Context) MemLimit() config.MemLimit { return c.memLim }

// enter marks a call in progress; it fails with errs.Closed after Close.
func (c *Context) enter() error {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errs.New(errs.Closed, "call", "context is finalized")
	}
	return nil
}

func (c *Context) exit() { c.mu.RUnlock() }

// Close cancels queued async requests (they complete with errs.Closed),
// interrupts remote requests in flight (their calls fail with
// errs.Interrupted), waits
// for calls and requests in progress, then frees descriptors, cache memory and
// bounce buffers. A second Close returns errs.Closed.
func (c *Context) Close() error {
	// Calls in flight hold c.mu (enter) until they return, and one that
	// waits on a stalled server would hold Close for up to the remote
	// timeouts: its remote requests fail with errs.Interrupted instead.
	c.Interrupt()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errs.New(errs.Closed, "finalize", "context is already finalized")
	}
	c.closed = true
	close(c.closing)
	c.mu.Unlock()
	c.asyncWG.Wait()
	c.tgt.Close()
	if c.cache != nil {
		c.cache.Close()
	}
	if s, ok := c.src.(*sources); ok {
		s.closeDisk() // the queued disk-cache writes land before finalize returns
	}
	c.files.Close()
	c.rd.Close()
	if c.arena != nil {
		c.arena.Close()
	}
	c.closeHitIndex()
	return nil
}

// NoteError counts a failed call in stats.errors; capi calls it once per
// failing call so the counter equals the number of errors callers saw.
func (c *Context) NoteError() { c.st.Errors.Add(1) }

// Stats returns the counters plus the cache gauges.
func (c *Context) Stats() stats.Snapshot {
	s := c.st.Snapshot()
	c.addHitStats(&s)
	if c.cache != nil {
		s.CacheResidentBytes = c.cache.Resident()
		s.CacheBudgetBytes = c.cache.Budget()
	}
	c.gpuStats(&s)
	s.Tiers = c.st.TierSince(c.tierTotals())
	return s
}

// ResetStats zeroes every counter (the cache gauges describe state and stay).
// The remote client and the disk cache keep their own totals, which are not
// reset: their values now become the baseline that Stats subtracts.
func (c *Context) ResetStats() {
	c.st.Reset()
	c.st.SetTierBaseline(c.tierTotals())
	if c.hit != nil {
		c.hit.ResetCounters()
	}
	c.tgt.ResetStats()
}

// tierTotals returns the totals of the context's remote client and disk
// cache since they were made (zero for a tier not made yet: no URL read, or
// no disk cache directory). Both belong to this context (sources), so the
// counts are per context even where the directory is shared.
func (c *Context) tierTotals() stats.Tiers {
	var t stats.Tiers
	s, ok := c.src.(*sources)
	if !ok {
		return t
	}
	s.mu.Lock()
	r := s.remote
	s.mu.Unlock()
	if r != nil {
		rs := r.Client().Stats()
		t.RemoteRequests, t.RemoteBytes = rs.Requests, rs.Bytes
		t.RemoteRetries, t.RemoteThrottles = rs.Retries, rs.Throttles
	}
	if d, ok := s.diskStats(); ok {
		t.DiskCacheHitBlocks, t.DiskCacheHitBytes = d.HitBlocks, d.HitBytes
		t.DiskCacheMissBlocks, t.DiskCacheMissBytes = d.MissBlocks, d.MissBytes
		t.DiskCacheWrittenBytes, t.DiskCacheEvictedBytes = d.WrittenBytes, d.EvictedBytes
		t.DiskCacheCorruptEntries, t.DiskCacheInlineWrites = d.CorruptEntries, d.InlineWrites
		t.DiskCacheQueueWaits, t.DiskCacheQueueDrops = d.QueueWaits, d.QueueDrops
		t.DiskCacheTrustedPieces, t.DiskCacheTrustFallbacks = d.TrustedPieces, d.TrustFallbacks
	}
	return t
}

// DropCache removes path's blocks ("" = every block) and closes its idle
// descriptors.
func (c *Context) DropCache(path string) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	ids := c.files.Drop(path)
	if src, ok := c.src.(*sources); ok {
		// A URL's next read asks the server again (freshness "open" trusts
		// the version it holds until then).
		ids = append(ids, src.dropRemote(path)...)
	}
	// Blocks outlive descriptors (a file's ID comes from its identity), so
	// also drop the current version's blocks by a stat, without opening it.
	if path != "" && !remote.IsURL(path) {
		if id, err := files.VersionOf(path); err == nil {
			ids = append(ids, id)
		}
	}
	c.dropHBM(ids, path == "")
	if c.cache == nil {
		return nil
	}
	if path == "" {
		c.cache.DropAll()
		return nil
	}
	for _, id := range ids {
		c.cache.DropFile(id)
	}
	return nil
}

// DebugPanicWorker makes the next task run by a helper goroutine panic (the
// MEMTIER_DEBUG_PANIC_WORKER test hook).
func (c *Context) DebugPanicWorker() { c.rd.PanicNextTask() }

// TestHooks reports whether memtier_debug_hook is enabled.
func (c *Context) TestHooks() bool { return c.opts.TestHooks }

// checkCacheBudget refuses a DRAM cache budget above what lim allows
// (config.MemLimit.CacheCap): more than the host's RAM, as before cgroups
// were read, or more than 25% of a cgroup memory limit. Refused rather than
// clamped: the default is already bounded where it is made
// (config.LimitedDefaults), so an oversized budget here is one the caller
// chose, and a silent smaller cache would change the hit rate they planned
// for (field case N06, tests/field_cases.md, allows either). Errors: errs.InvalidArg naming the
// limit and its source.
func checkCacheBudget(o config.Options, lim config.MemLimit) error {
	maxBytes := lim.CacheCap()
	if !o.CacheEnabled || maxBytes == 0 || o.CacheBytes <= maxBytes {
		return nil
	}
	if !lim.Cgroup {
		return errs.New(errs.InvalidArg, "memtier_init",
			"cache_bytes %d exceeds the machine's physical memory (%d bytes)", o.CacheBytes, lim.Bytes)
	}
	return errs.New(errs.InvalidArg, "memtier_init",
		"cache_bytes %d exceeds %d bytes, %d%% of the memory limit of %s: the cache counts against "+
			"that limit and the kernel cannot reclaim it; set cache_bytes to at most %d",
		o.CacheBytes, maxBytes, 100/config.CacheLimitShareDivisor, lim, maxBytes)
}
