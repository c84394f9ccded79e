package diskcache

import "sync/atomic"

// counters are a Cache's statistics (atomic).
type counters struct {
	hitBlocks, hitBytes, missBlocks, missBytes atomic.Uint64
	writtenEntries, writtenBytes               atomic.Uint64
	evictedEntries, evictedBytes               atomic.Uint64
	staleEntries, corruptEntries               atomic.Uint64
	writeDrops, writeErrors, inlineWrites      atomic.Uint64
	queueWaits, queueDrops, throughWrites      atomic.Uint64
	trustedPieces, trustFallbacks              atomic.Uint64
	readBytes                                  atomic.Uint64 // bytes read from entries, headers included (tests)
}

// Stats are a Cache's counters since Open (this process, this Cache), and
// two gauges. Blocks are counted once per request that needed them.
type Stats struct {
	HitBlocks      uint64 // blocks served from an entry on disk, or from the write-behind queue before it is written
	HitBytes       uint64 // bytes of requests served from disk (the requested part of each hit block)
	MissBlocks     uint64 // blocks not on disk (or corrupt), fetched from the remote source
	MissBytes      uint64 // bytes fetched from the remote source for missed blocks (whole blocks)
	WrittenEntries uint64 // entries written (renamed into place)
	WrittenBytes   uint64 // bytes of those entries, headers included
	EvictedEntries uint64 // entries removed to keep the budget
	EvictedBytes   uint64 // bytes of those entries
	StaleEntries   uint64 // entries of an older version of an object removed when a newer one was written, or of an older entry format found on read (deleted and refetched)
	CorruptEntries uint64 // torn, truncated or corrupt entries detected on read (a corrupt piece only by a read that needs it), deleted and refetched
	WriteDrops     uint64 // blocks not written: the entry exceeds the budget
	InlineWrites   uint64 // blocks the reader wrote itself: larger than the whole write-behind queue
	QueueWaits     uint64 // blocks whose reader waited for room in the write-behind queue or for a write-through slot (back-pressure)
	QueueDrops     uint64 // of those, blocks left uncached: no room or slot within Options.QueueWait
	ThroughWrites  uint64 // blocks written from the caller's buffer before the read returned (through.go)
	WriteErrors    uint64 // blocks not written because of a file system error (disk full, I/O error)
	TrustedPieces  uint64 // pieces served without their checksum: checked earlier by this Cache, the entry unchanged since and in the page cache (trust.go)
	TrustFallbacks uint64 // reads whose pieces were all trusted but were read and checked again: the entry changed, or a byte was not in the page cache
	UsedBytes      uint64 // gauge: bytes the directory held when this Cache last held its lock
	BudgetBytes    uint64 // gauge: the budget this Cache enforces
}

// Stats returns a snapshot of the counters. Safe for concurrent use; each
// field is read atomically, not the whole set at one instant.
func (c *Cache) Stats() Stats {
	s := &c.st
	return Stats{
		HitBlocks: s.hitBlocks.Load(), HitBytes: s.hitBytes.Load(),
		MissBlocks: s.missBlocks.Load(), MissBytes: s.missBytes.Load(),
		WrittenEntries: s.writtenEntries.Load(), WrittenBytes: s.writtenBytes.Load(),
		EvictedEntries: s.evictedEntries.Load(), EvictedBytes: s.evictedBytes.Load(),
		StaleEntries: s.staleEntries.Load(), CorruptEntries: s.corruptEntries.Load(),
		WriteDrops: s.writeDrops.Load(), WriteErrors: s.writeErrors.Load(), InlineWrites: s.inlineWrites.Load(),
		QueueWaits: s.queueWaits.Load(), QueueDrops: s.queueDrops.Load(), ThroughWrites: s.throughWrites.Load(),
		TrustedPieces: s.trustedPieces.Load(), TrustFallbacks: s.trustFallbacks.Load(),
		UsedBytes: c.used.Load(), BudgetBytes: c.budget,
	}
}
