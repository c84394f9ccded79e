package gpu

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Stats collects the counters of the objects it is given to (a Stager, the
// GDS handle from OpenGDS, an HBMCache). The engine keeps one per context
// and passes it to each; a nil *Stats counts nothing. All methods are safe
// for concurrent use. The zero value is ready to use.
type Stats struct {
	gdsRequests, gdsBytes                    atomic.Uint64
	stagedRequests, stagedBytes              atomic.Uint64
	stagedReadNanos, stagedWaitNanos         atomic.Uint64
	copyRequests, copyBytes                  atomic.Uint64
	h2dBytes, h2dNanos                       atomic.Uint64
	hbmHits, hbmHitBytes, hbmMisses          atomic.Uint64
	hbmInserts, hbmInsertBytes, hbmEvictions atomic.Uint64
	hbmWaits                                 atomic.Uint64

	mu        sync.Mutex
	fallbacks map[string]uint64
}

// StatsSnapshot is a copy of the counters at one moment. Byte counts are
// bytes, times are nanoseconds of wall clock, counts are calls.
type StatsSnapshot struct {
	// GDSRequests and GDSBytes count successful GDS.Read calls and the bytes
	// they delivered.
	GDSRequests, GDSBytes uint64
	// StagedRequests and StagedBytes count successful Stager.ReadToDevice
	// calls and their bytes.
	StagedRequests, StagedBytes uint64
	// StagedReadNanos is the time ReadToDevice spent in its read callbacks
	// (the file side); StagedWaitNanos the time it waited for copies to
	// finish before reusing a buffer or returning (the PCIe side). Whichever
	// dominates is the bottleneck.
	StagedReadNanos, StagedWaitNanos uint64
	// CopyRequests and CopyBytes count successful Stager.CopyToDevice calls
	// (DRAM-cache hits copied straight from host memory).
	CopyRequests, CopyBytes uint64
	// H2DBytes are all bytes moved host to device (ReadToDevice,
	// CopyToDevice, HBMCache.Insert); H2DNanos the wall time of those calls,
	// so H2DBytes / H2DNanos is the delivered host-to-device bandwidth
	// (bytes per nanosecond = GB/s), file reads included for ReadToDevice.
	H2DBytes, H2DNanos uint64
	// HBM cache: lookups that hit (and the bytes copied device to device),
	// lookups that missed, blocks inserted (and their bytes), blocks evicted.
	HBMHits, HBMHitBytes, HBMMisses uint64
	HBMInserts, HBMInsertBytes      uint64
	HBMEvictions                    uint64
	// HBMWaits counts the waits for HBM-hit copies: one per request
	// however many blocks it copies (HBMCache.LookupAll).
	HBMWaits uint64
	// Fallbacks counts requests that left a GPU path for another, by reason
	// key ((*Error).Reason or the engine's own); FallbackTotal is their sum.
	Fallbacks     map[string]uint64
	FallbackTotal uint64
}

// Fallback counts one request that fell back from a GPU path, under reason
// (use (*Error).Reason for errors from this package). The engine calls it
// where it decides to fall back; this package never counts a fallback itself.
func (s *Stats) Fallback(reason string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.fallbacks == nil {
		s.fallbacks = make(map[string]uint64)
	}
	s.fallbacks[reason]++
	s.mu.Unlock()
}

// Snapshot returns a copy of the counters (a zero snapshot for a nil Stats).
func (s *Stats) Snapshot() StatsSnapshot {
	if s == nil {
		return StatsSnapshot{Fallbacks: map[string]uint64{}}
	}
	out := StatsSnapshot{
		GDSRequests: s.gdsRequests.Load(), GDSBytes: s.gdsBytes.Load(),
		StagedRequests: s.stagedRequests.Load(), StagedBytes: s.stagedBytes.Load(),
		StagedReadNanos: s.stagedReadNanos.Load(), StagedWaitNanos: s.stagedWaitNanos.Load(),
		CopyRequests: s.copyRequests.Load(), CopyBytes: s.copyBytes.Load(),
		H2DBytes: s.h2dBytes.Load(), H2DNanos: s.h2dNanos.Load(),
		HBMHits: s.hbmHits.Load(), HBMHitBytes: s.hbmHitBytes.Load(), HBMMisses: s.hbmMisses.Load(),
		HBMInserts: s.hbmInserts.Load(), HBMInsertBytes: s.hbmInsertBytes.Load(),
		HBMEvictions: s.hbmEvictions.Load(), HBMWaits: s.hbmWaits.Load(),
		Fallbacks: map[string]uint64{},
	}
	s.mu.Lock()
	for k, v := range s.fallbacks {
		out.Fallbacks[k] = v
		out.FallbackTotal += v
	}
	s.mu.Unlock()
	return out
}

// FallbackReasons lists the snapshot's fallback keys, most frequent first
// (ties by name), for one-line summaries.
func (s StatsSnapshot) FallbackReasons() []string {
	keys := make([]string, 0, len(s.Fallbacks))
	for k := range s.Fallbacks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := s.Fallbacks[keys[i]], s.Fallbacks[keys[j]]
		if a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	return keys
}

// Sub returns the counters of s that came after b (an earlier snapshot of
// the same Stats): every count minus b's, per fallback reason too.
func (s StatsSnapshot) Sub(b StatsSnapshot) StatsSnapshot {
	out := StatsSnapshot{
		GDSRequests: s.GDSRequests - b.GDSRequests, GDSBytes: s.GDSBytes - b.GDSBytes,
		StagedRequests: s.StagedRequests - b.StagedRequests, StagedBytes: s.StagedBytes - b.StagedBytes,
		StagedReadNanos: s.StagedReadNanos - b.StagedReadNanos, StagedWaitNanos: s.StagedWaitNanos - b.StagedWaitNanos,
		CopyRequests: s.CopyRequests - b.CopyRequests, CopyBytes: s.CopyBytes - b.CopyBytes,
		H2DBytes: s.H2DBytes - b.H2DBytes, H2DNanos: s.H2DNanos - b.H2DNanos,
		HBMHits: s.HBMHits - b.HBMHits, HBMHitBytes: s.HBMHitBytes - b.HBMHitBytes, HBMMisses: s.HBMMisses - b.HBMMisses,
		HBMInserts: s.HBMInserts - b.HBMInserts, HBMInsertBytes: s.HBMInsertBytes - b.HBMInsertBytes,
		HBMEvictions: s.HBMEvictions - b.HBMEvictions, HBMWaits: s.HBMWaits - b.HBMWaits,
		FallbackTotal: s.FallbackTotal - b.FallbackTotal,
		Fallbacks:     map[string]uint64{},
	}
	for k, v := range s.Fallbacks {
		if d := v - b.Fallbacks[k]; d > 0 {
			out.Fallbacks[k] = d
		}
	}
	return out
}
