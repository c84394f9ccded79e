// Package stats holds a context's counters: lock-free atomics updated on the I/O
// path and a Snapshot whose field order equals memtier_stats_t in
// include/memtier.h (capi copies it field by field).
package stats

import (
	"sync"
	"sync/atomic"
)

// Counters are the live counters of one context. All methods are safe for
// concurrent use.
type Counters struct {
	Requests, Bytes                 atomic.Uint64
	CacheHitRequests, CacheHitBytes atomic.Uint64
	BufferedRequests, BufferedBytes atomic.Uint64
	DirectRequests, DirectBytes     atomic.Uint64
	GDSRequests, GDSBytes           atomic.Uint64
	StagedRequests, StagedBytes     atomic.Uint64
	CacheHits, CacheMisses          atomic.Uint64
	CacheEvictions                  atomic.Uint64
	CacheInsertedBytes              atomic.Uint64
	PrefetchRequests, PrefetchBytes atomic.Uint64
	ReadvCalls, CoalescedReads      atomic.Uint64
	StorageBytes                    atomic.Uint64
	DirectFallbacks, BounceBytes    atomic.Uint64
	EINTRRetries, ShortReadRetries  atomic.Uint64
	AsyncRequests, Errors           atomic.Uint64
	FilesOpened, FilesEvicted       atomic.Uint64
	StaleInvalidations              atomic.Uint64
	// GPU tier (memtier_stats_t fields added in 0.2).
	// gds_fallbacks and staged_read_ns are counted by the gpu package only
	// (gpu.Target), and the engine copies them into Snapshot.
	HBMHitRequests, HBMHitBytes atomic.Uint64
	H2DBytes, H2DNanos          atomic.Uint64
	// Added in 0.3.
	Revalidations   atomic.Uint64 // freshness checks of files already open
	ReadvInlineHits atomic.Uint64 // readv elements copied from the DRAM cache inline
	// readv's io_uring batches: submissions, ranges read through them, and
	// readv calls that read one preadv2 per range instead, by reason
	// (MEMTIER_IO_URING=0; the kernel refused io_uring).
	ReadvUringBatches, ReadvUringReads                   atomic.Uint64
	ReadvUringFallbackOff, ReadvUringFallbackUnavailable atomic.Uint64

	// tierBase holds the remote and disk cache totals at the last Reset
	// (SetTierBaseline): those tiers keep their own counters, which are
	// not reset, so a Snapshot reports their growth since then (TierSince).
	tierMu   sync.Mutex
	tierBase Tiers
}

// Snapshot is a copy of the counters plus two state gauges (resident and budget
// bytes, filled by the caller from the cache). Field order = memtier_stats_t.
type Snapshot struct {
	Requests, Bytes                 uint64
	CacheHitRequests, CacheHitBytes uint64
	BufferedRequests, BufferedBytes uint64
	DirectRequests, DirectBytes     uint64
	GDSRequests, GDSBytes           uint64
	StagedRequests, StagedBytes     uint64
	CacheHits, CacheMisses          uint64
	CacheEvictions                  uint64
	CacheResidentBytes              uint64
	CacheBudgetBytes                uint64
	CacheInsertedBytes              uint64
	PrefetchRequests, PrefetchBytes uint64
	ReadvCalls, CoalescedReads      uint64
	StorageBytes                    uint64
	DirectFallbacks, BounceBytes    uint64
	EINTRRetries, ShortReadRetries  uint64
	AsyncRequests, Errors           uint64
	FilesOpened, FilesEvicted       uint64
	StaleInvalidations              uint64
	// GPU tier, added in 0.2. HBMInsertedBytes and HBMEvictions come from the
	// gpu package's counters; HBMResidentBytes and HBMBudgetBytes are gauges
	// the caller fills, like the cache's.
	HBMHitRequests, HBMHitBytes      uint64
	HBMInsertedBytes, HBMEvictions   uint64
	HBMResidentBytes, HBMBudgetBytes uint64
	GDSFallbacks                     uint64
	H2DBytes, H2DNanos               uint64
	StagedReadNanos                  uint64
	// Added in 0.3.
	Revalidations, ReadvInlineHits uint64
	// Added after 0.3: readv's io_uring batches.
	ReadvUringBatches, ReadvUringReads                   uint64
	ReadvUringFallbackOff, ReadvUringFallbackUnavailable uint64
	// Added after 0.3: remote objects and the disk cache tier (Tiers, filled
	// by the engine from the context's remote client and disk cache).
	Tiers
}

// Tiers are the counters of the tiers below the engine that keep their own
// totals: the context's remote client (runtime/remote.Client.Stats) and its
// disk cache (runtime/diskcache.Cache.Stats). Field order = memtier_stats_t
// (remote_requests onwards); counts are requests, blocks or entries, and
// *Bytes fields are bytes.
type Tiers struct {
	RemoteRequests  uint64 // GETs sent (open, revalidations, parts), each retry attempt counted
	RemoteBytes     uint64 // body bytes received from remote servers
	RemoteRetries   uint64 // GET attempts after a failed one
	RemoteThrottles uint64 // 503 (SlowDown) and 429 answers

	DiskCacheHitBlocks      uint64 // blocks served from the disk cache
	DiskCacheHitBytes       uint64 // requested bytes served from those blocks
	DiskCacheMissBlocks     uint64 // blocks not on disk (or corrupt), fetched whole
	DiskCacheMissBytes      uint64 // bytes fetched for missed blocks (whole blocks)
	DiskCacheWrittenBytes   uint64 // bytes of entries written, headers included
	DiskCacheEvictedBytes   uint64 // bytes of entries removed to keep the budget
	DiskCacheCorruptEntries uint64 // torn or corrupt entries found on read (deleted, refetched)
	DiskCacheInlineWrites   uint64 // blocks written by their reader (larger than the whole write-behind queue)
	DiskCacheQueueWaits     uint64 // blocks whose reader waited for room in the write-behind queue
	DiskCacheQueueDrops     uint64 // of those, blocks left uncached (no room within the wait)
	DiskCacheTrustedPieces  uint64 // pieces served without their checksum (checked earlier, unchanged, in the page cache)
	DiskCacheTrustFallbacks uint64 // reads of trusted pieces checked instead (entry changed, page not cached)
}

// sub returns t - base field by field, 0 where a total is below its base
// (a tier replaced since the reset starts again from 0).
func (t Tiers) sub(base Tiers) Tiers {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Tiers{
		RemoteRequests: d(t.RemoteRequests, base.RemoteRequests), RemoteBytes: d(t.RemoteBytes, base.RemoteBytes),
		RemoteRetries: d(t.RemoteRetries, base.RemoteRetries), RemoteThrottles: d(t.RemoteThrottles, base.RemoteThrottles),
		DiskCacheHitBlocks:      d(t.DiskCacheHitBlocks, base.DiskCacheHitBlocks),
		DiskCacheHitBytes:       d(t.DiskCacheHitBytes, base.DiskCacheHitBytes),
		DiskCacheMissBlocks:     d(t.DiskCacheMissBlocks, base.DiskCacheMissBlocks),
		DiskCacheMissBytes:      d(t.DiskCacheMissBytes, base.DiskCacheMissBytes),
		DiskCacheWrittenBytes:   d(t.DiskCacheWrittenBytes, base.DiskCacheWrittenBytes),
		DiskCacheEvictedBytes:   d(t.DiskCacheEvictedBytes, base.DiskCacheEvictedBytes),
		DiskCacheCorruptEntries: d(t.DiskCacheCorruptEntries, base.DiskCacheCorruptEntries),
		DiskCacheInlineWrites:   d(t.DiskCacheInlineWrites, base.DiskCacheInlineWrites),
		DiskCacheQueueWaits:     d(t.DiskCacheQueueWaits, base.DiskCacheQueueWaits),
		DiskCacheQueueDrops:     d(t.DiskCacheQueueDrops, base.DiskCacheQueueDrops),
		DiskCacheTrustedPieces:  d(t.DiskCacheTrustedPieces, base.DiskCacheTrustedPieces),
		DiskCacheTrustFallbacks: d(t.DiskCacheTrustFallbacks, base.DiskCacheTrustFallbacks),
	}
}

// TierSince returns the tiers' totals now minus those recorded by the last
// SetTierBaseline (all of now before any). Safe for concurrent use.
func (c *Counters) TierSince(now Tiers) Tiers {
	c.tierMu.Lock()
	base := c.tierBase
	c.tierMu.Unlock()
	return now.sub(base)
}

// SetTierBaseline records the tiers' totals at a reset: later TierSince
// calls subtract them. Safe for concurrent use.
func (c *Counters) SetTierBaseline(now Tiers) {
	c.tierMu.Lock()
	c.tierBase = now
	c.tierMu.Unlock()
}

func (c *Counters) all() []*atomic.Uint64 {
	return []*atomic.Uint64{
		&c.Requests, &c.Bytes, &c.CacheHitRequests, &c.CacheHitBytes,
		&c.BufferedRequests, &c.BufferedBytes, &c.DirectRequests, &c.DirectBytes,
		&c.GDSRequests, &c.GDSBytes, &c.StagedRequests, &c.StagedBytes,
		&c.CacheHits, &c.CacheMisses, &c.CacheEvictions, &c.CacheInsertedBytes,
		&c.PrefetchRequests, &c.PrefetchBytes, &c.ReadvCalls, &c.CoalescedReads,
		&c.StorageBytes, &c.DirectFallbacks, &c.BounceBytes, &c.EINTRRetries,
		&c.ShortReadRetries, &c.AsyncRequests, &c.Errors, &c.FilesOpened,
		&c.FilesEvicted, &c.StaleInvalidations,
		&c.HBMHitRequests, &c.HBMHitBytes, &c.H2DBytes, &c.H2DNanos,
		&c.Revalidations, &c.ReadvInlineHits,
		&c.ReadvUringBatches, &c.ReadvUringReads, &c.ReadvUringFallbackOff, &c.ReadvUringFallbackUnavailable,
	}
}

// Snapshot copies the counters. Each field is read atomically; the set is not
// a single atomic cut (I/O keeps running).
func (c *Counters) Snapshot() Snapshot {
	return Snapshot{
		Requests: c.Requests.Load(), Bytes: c.Bytes.Load(),
		CacheHitRequests: c.CacheHitRequests.Load(), CacheHitBytes: c.CacheHitBytes.Load(),
		BufferedRequests: c.BufferedRequests.Load(), BufferedBytes: c.BufferedBytes.Load(),
		DirectRequests: c.DirectRequests.Load(), DirectBytes: c.DirectBytes.Load(),
		GDSRequests: c.GDSRequests.Load(), GDSBytes: c.GDSBytes.Load(),
		StagedRequests: c.StagedRequests.Load(), StagedBytes: c.StagedBytes.Load(),
		CacheHits: c.CacheHits.Load(), CacheMisses: c.CacheMisses.Load(),
		CacheEvictions: c.CacheEvictions.Load(), CacheInsertedBytes: c.CacheInsertedBytes.Load(),
		PrefetchRequests: c.PrefetchRequests.Load(), PrefetchBytes: c.PrefetchBytes.Load(),
		ReadvCalls: c.ReadvCalls.Load(), CoalescedReads: c.CoalescedReads.Load(),
		StorageBytes: c.StorageBytes.Load(), DirectFallbacks: c.DirectFallbacks.Load(),
		BounceBytes: c.BounceBytes.Load(), EINTRRetries: c.EINTRRetries.Load(),
		ShortReadRetries: c.ShortReadRetries.Load(), AsyncRequests: c.AsyncRequests.Load(),
		Errors: c.Errors.Load(), FilesOpened: c.FilesOpened.Load(),
		FilesEvicted: c.FilesEvicted.Load(), StaleInvalidations: c.StaleInvalidations.Load(),
		HBMHitRequests: c.HBMHitRequests.Load(), HBMHitBytes: c.HBMHitBytes.Load(),
		H2DBytes: c.H2DBytes.Load(), H2DNanos: c.H2DNanos.Load(),
		Revalidations: c.Revalidations.Load(), ReadvInlineHits: c.ReadvInlineHits.Load(),
		ReadvUringBatches: c.ReadvUringBatches.Load(), ReadvUringReads: c.ReadvUringReads.Load(),
		ReadvUringFallbackOff:         c.ReadvUringFallbackOff.Load(),
		ReadvUringFallbackUnavailable: c.ReadvUringFallbackUnavailable.Load(),
	}
}

// Reset sets every counter to zero.
func (c *Counters) Reset() {
	for _, a := range c.all() {
		a.Store(0)
	}
}
