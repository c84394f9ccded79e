package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"unsafe"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

// minConfigSize: a config must at least carry struct_size and io_threads.
const minConfigSize = 8

// optionsToC writes o into a C config (struct_size = the library's size).
func optionsToC(o config.Options, c *C.memtier_config_t) {
	c.struct_size = C.uint32_t(unsafe.Sizeof(*c))
	c.io_threads = C.uint32_t(o.IOThreads)
	c.cache_bytes = C.uint64_t(o.CacheBytes)
	c.cache_block_bytes = C.uint64_t(o.CacheBlockBytes)
	c.cache_admit_max_bytes = C.uint64_t(o.CacheAdmitMaxBytes)
	c.task_bytes = C.uint64_t(o.TaskBytes)
	c.direct_threshold_bytes = C.uint64_t(o.DirectThreshold)
	c.direct_mode = C.int32_t(o.DirectMode)
	c.cache_enabled = 0
	if o.CacheEnabled {
		c.cache_enabled = 1
	}
	c.max_open_files = C.uint32_t(o.MaxOpenFiles)
	c.gomaxprocs = C.uint32_t(o.GOMAXPROCS)
	c.gds_threshold_bytes = C.uint64_t(o.GDSThreshold)
	c.max_inflight_mib = C.uint32_t(o.MaxInflightMiB)
	c.small_io_depth = C.uint32_t(o.SmallIODepth)
	c.path_recheck_ms = C.int32_t(o.PathRecheckMs)
	c.hbm_cache_bytes = C.uint64_t(o.HBMCacheBytes)
	c.gds_mode = C.int32_t(o.GDSMode)
	c.hbm_device = C.int32_t(o.HBMDevice)
	c.freshness = C.int32_t(o.Freshness)
	c.freshness_interval_ms = C.int32_t(o.FreshnessIntervalMs)
}

// has reports whether a caller's config of size bytes contains the field at
// off of n bytes (older callers pass shorter structs).
func has(size uintptr, off, n uintptr) bool { return off+n <= size }

// optionsFromC applies the fields of c that its struct_size covers; 0 in a
// size or count field keeps the default.
func optionsFromC(c *C.memtier_config_t, o *config.Options) error {
	size := uintptr(c.struct_size)
	if size < minConfigSize || size > 1<<16 {
		return errs.New(errs.InvalidArg, "memtier_init",
			"cfg->struct_size %d is not a config size (fill cfg with memtier_config_default)", size)
	}
	u32 := func(f *C.uint32_t, dst *int) {
		if has(size, uintptr(unsafe.Pointer(f))-uintptr(unsafe.Pointer(c)), 4) && *f != 0 {
			*dst = int(*f)
		}
	}
	u64 := func(f *C.uint64_t, dst *uint64) {
		if has(size, uintptr(unsafe.Pointer(f))-uintptr(unsafe.Pointer(c)), 8) && *f != 0 {
			*dst = uint64(*f)
		}
	}
	u32(&c.io_threads, &o.IOThreads)
	u64(&c.cache_bytes, &o.CacheBytes)
	u64(&c.cache_block_bytes, &o.CacheBlockBytes)
	u64(&c.cache_admit_max_bytes, &o.CacheAdmitMaxBytes)
	u64(&c.task_bytes, &o.TaskBytes)
	u64(&c.direct_threshold_bytes, &o.DirectThreshold)
	if has(size, unsafe.Offsetof(c.direct_mode), 4) {
		o.DirectMode = int(c.direct_mode)
	}
	if has(size, unsafe.Offsetof(c.cache_enabled), 4) {
		o.CacheEnabled = c.cache_enabled != 0
	}
	u32(&c.max_open_files, &o.MaxOpenFiles)
	if has(size, unsafe.Offsetof(c.gomaxprocs), 4) {
		o.GOMAXPROCS = int(c.gomaxprocs)
	}
	u64(&c.gds_threshold_bytes, &o.GDSThreshold)
	u32(&c.max_inflight_mib, &o.MaxInflightMiB)
	u32(&c.small_io_depth, &o.SmallIODepth)
	if has(size, unsafe.Offsetof(c.path_recheck_ms), 4) && c.path_recheck_ms != 0 {
		o.PathRecheckMs = int(c.path_recheck_ms)
	}
	// Added in 0.2. hbm_cache_bytes 0 keeps the default (the environment's
	// MEMTIER_HBM_CACHE_BYTES=0 is what turns the tier off); gds_mode and
	// hbm_device are read as given (0 is AUTO and device 0, their defaults).
	u64(&c.hbm_cache_bytes, &o.HBMCacheBytes)
	if has(size, unsafe.Offsetof(c.gds_mode), 4) {
		o.GDSMode = int(c.gds_mode)
	}
	if has(size, unsafe.Offsetof(c.hbm_device), 4) {
		o.HBMDevice = int(c.hbm_device)
	}
	// Added in 0.3: freshness 0 is STRICT, the default; an interval of 0
	// keeps the default.
	if has(size, unsafe.Offsetof(c.freshness), 4) {
		o.Freshness = int(c.freshness)
	}
	if has(size, unsafe.Offsetof(c.freshness_interval_ms), 4) && c.freshness_interval_ms != 0 {
		o.FreshnessIntervalMs = int(c.freshness_interval_ms)
	}
	return nil
}

// envOptions returns the defaults with the MEMTIER_* environment applied.
func envOptions() (config.Options, error) {
	o := config.Defaults()
	err := o.FromEnv(cgetenv)
	if err != nil {
		return config.Defaults(), err
	}
	return o, nil
}

//export mtgo_config_default
func mtgo_config_default(cfg *C.memtier_config_t) (rc C.int) {
	defer catch(&rc, nil)
	o, err := envOptions()
	optionsToC(o, cfg)
	return finish(nil, err)
}

//export mtgo_init
func mtgo_init(cfg *C.memtier_config_t, idOut *C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	warnUnknownEnv()
	o, err := envOptions()
	if err != nil {
		return finish(nil, err)
	}
	if cfg != nil {
		if err := optionsFromC(cfg, &o); err != nil {
			return finish(nil, err)
		}
	}
	ctx, err := engine.New(o)
	if err != nil {
		return finish(nil, err)
	}
	*idOut = C.uint64_t(addContext(ctx))
	return 0
}

//export mtgo_finalize
func mtgo_finalize(id C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	ctx, err := removeContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	return finish(nil, ctx.Close())
}

//export mtgo_get_config
func mtgo_get_config(id C.uint64_t, cfg *C.memtier_config_t) (rc C.int) {
	defer catch(&rc, nil)
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	optionsToC(ctx.Options(), cfg)
	return 0
}
