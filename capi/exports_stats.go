package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

// Debug hooks; values equal MEMTIER_DEBUG_*.
const (
	debugPanicExport = 1
	debugPanicWorker = 2
)

//export mtgo_stats
func mtgo_stats(id C.uint64_t, st *C.memtier_stats_t) (rc C.int) {
	defer catch(&rc, nil)
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	s := ctx.Stats()
	*st = C.memtier_stats_t{
		requests: C.uint64_t(s.Requests), bytes: C.uint64_t(s.Bytes),
		cache_hit_requests: C.uint64_t(s.CacheHitRequests), cache_hit_bytes: C.uint64_t(s.CacheHitBytes),
		buffered_requests: C.uint64_t(s.BufferedRequests), buffered_bytes: C.uint64_t(s.BufferedBytes),
		direct_requests: C.uint64_t(s.DirectRequests), direct_bytes: C.uint64_t(s.DirectBytes),
		gds_requests: C.uint64_t(s.GDSRequests), gds_bytes: C.uint64_t(s.GDSBytes),
		staged_requests: C.uint64_t(s.StagedRequests), staged_bytes: C.uint64_t(s.StagedBytes),
		cache_hits: C.uint64_t(s.CacheHits), cache_misses: C.uint64_t(s.CacheMisses),
		cache_evictions: C.uint64_t(s.CacheEvictions), cache_resident_bytes: C.uint64_t(s.CacheResidentBytes),
		cache_budget_bytes: C.uint64_t(s.CacheBudgetBytes), cache_inserted_bytes: C.uint64_t(s.CacheInsertedBytes),
		prefetch_requests: C.uint64_t(s.PrefetchRequests), prefetch_bytes: C.uint64_t(s.PrefetchBytes),
		readv_calls: C.uint64_t(s.ReadvCalls), coalesced_reads: C.uint64_t(s.CoalescedReads),
		storage_bytes: C.uint64_t(s.StorageBytes), direct_fallbacks: C.uint64_t(s.DirectFallbacks),
		bounce_bytes: C.uint64_t(s.BounceBytes), eintr_retries: C.uint64_t(s.EINTRRetries),
		short_read_retries: C.uint64_t(s.ShortReadRetries), async_requests: C.uint64_t(s.AsyncRequests),
		errors: C.uint64_t(s.Errors), files_opened: C.uint64_t(s.FilesOpened),
		files_evicted: C.uint64_t(s.FilesEvicted), stale_invalidations: C.uint64_t(s.StaleInvalidations),
		hbm_hit_requests: C.uint64_t(s.HBMHitRequests), hbm_hit_bytes: C.uint64_t(s.HBMHitBytes),
		hbm_inserted_bytes: C.uint64_t(s.HBMInsertedBytes), hbm_evictions: C.uint64_t(s.HBMEvictions),
		hbm_resident_bytes: C.uint64_t(s.HBMResidentBytes), hbm_budget_bytes: C.uint64_t(s.HBMBudgetBytes),
		gds_fallbacks: C.uint64_t(s.GDSFallbacks), h2d_bytes: C.uint64_t(s.H2DBytes),
		h2d_ns: C.uint64_t(s.H2DNanos), staged_read_ns: C.uint64_t(s.StagedReadNanos),
		revalidations: C.uint64_t(s.Revalidations), readv_inline_hits: C.uint64_t(s.ReadvInlineHits),
		readv_uring_batches: C.uint64_t(s.ReadvUringBatches), readv_uring_reads: C.uint64_t(s.ReadvUringReads),
		readv_uring_fallback_off:         C.uint64_t(s.ReadvUringFallbackOff),
		readv_uring_fallback_unavailable: C.uint64_t(s.ReadvUringFallbackUnavailable),
	}
	return 0
}

// mtgo_gpu_info writes ctx's GPU description into buf (n > 0 bytes, NUL
// terminated, truncated to fit).
//
//export mtgo_gpu_info
func mtgo_gpu_info(id C.uint64_t, buf *C.char, n C.size_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		text, err := ctx.GPUInfo()
		if err != nil {
			return err
		}
		out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		k := copy(out[:len(out)-1], text)
		out[k] = 0
		return nil
	})
}

//export mtgo_stats_reset
func mtgo_stats_reset(id C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		ctx.ResetStats()
		return nil
	})
}

//export mtgo_debug_hook
func mtgo_debug_hook(id C.uint64_t, hook C.int) C.int {
	return call(id, func(ctx *engine.Context) error {
		if !ctx.TestHooks() {
			return errs.New(errs.Unsupported, "memtier_debug_hook", "test hooks are off (start the process with MEMTIER_TEST_HOOKS=1)")
		}
		switch hook {
		case debugPanicExport:
			panic("memtier_debug_hook: injected panic in an exported call")
		case debugPanicWorker:
			ctx.DebugPanicWorker()
			return nil
		}
		return badArg("memtier_debug_hook", "unknown hook %d", int(hook))
	})
}

// mtgo_note_error counts an argument error that memtier.c found before
// entering Go, so stats.errors equals the failures callers saw.
//
//export mtgo_note_error
func mtgo_note_error(id C.uint64_t) {
	defer func() { recover() }()
	if ctx, err := lookupContext(uint64(id)); err == nil {
		ctx.NoteError()
	}
}
