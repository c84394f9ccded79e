package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#define MEMTIER_TESTING_API // MEMTIER_DEBUG_* below
#include "memtier.h"
*/
import "C"

import (
	"unsafe"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/iopath"
)

//export mtgo_stats
func mtgo_stats(id C.uint64_t, st *C.memtier_stats_t) (rc C.int) {
	defer catch(&rc, nil)
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	s := ctx.Stats()
	statsToC(&s, st) // zz_stats.go, generated from the header
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

// mtgo_capabilities stores the MEMTIER_CAP_* bits of ctx in *out (see
// memtier_capabilities in memtier.h for what each bit means and probes).
//
//export mtgo_capabilities
func mtgo_capabilities(id C.uint64_t, out *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		o := ctx.Options()
		caps := uint64(C.MEMTIER_CAP_CPU | C.MEMTIER_CAP_REMOTE)
		if gpu.Available() {
			caps |= C.MEMTIER_CAP_CUDA
			if o.GDSMode != config.GDSOff {
				if g, err := gpu.OpenGDS(nil); err == nil {
					caps |= C.MEMTIER_CAP_GDS
					if g.Compat() {
						caps |= C.MEMTIER_CAP_GDS_COMPAT
					}
				}
			}
		}
		// An empty batch is readv's own probe: it sets up (or reuses) a
		// ring and fails with Unsupported once the kernel refused one.
		if !o.NoIOUring {
			if _, err := new(iopath.Reader).ReadBatch(nil, false); err == nil {
				caps |= C.MEMTIER_CAP_IO_URING
			}
		}
		if _, on, err := diskcache.OptionsFromEnv(func(name string) string {
			v, _ := cgetenv(name)
			return v
		}); on && err == nil {
			caps |= C.MEMTIER_CAP_DISK_CACHE
		}
		*out = C.uint64_t(caps)
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
		case C.MEMTIER_DEBUG_PANIC_EXPORT:
			panic("memtier_debug_hook: injected panic in an exported call")
		case C.MEMTIER_DEBUG_PANIC_WORKER:
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
