package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

//export mtgo_read_async
func mtgo_read_async(id C.uint64_t, path *C.char, off, size C.uint64_t, dst unsafe.Pointer, target C.int, flags C.uint32_t, reqOut *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		switch {
		case path == nil:
			return badArg("memtier_read_async", "path is NULL")
		case dst == nil && size > 0:
			return badArg("memtier_read_async", "dst is NULL for a %d-byte read", uint64(size))
		case !hostSizeOK(dst, uint64(size)):
			return badArg("memtier_read_async", "size %d too large", uint64(size))
		}
		r, err := ctx.ReadAsync(goPath(path), uint64(off), uint64(size), hostSlice(dst, uint64(size)), int(target), uint32(flags))
		if err == nil {
			*reqOut = C.uint64_t(addRequest(uint64(id), r))
		}
		return err
	})
}

//export mtgo_prefetch_async
func mtgo_prefetch_async(id C.uint64_t, path *C.char, off, size C.uint64_t, flags C.uint32_t, reqOut *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		if path == nil {
			return badArg("memtier_prefetch_async", "path is NULL")
		}
		r, err := ctx.PrefetchAsync(goPath(path), uint64(off), uint64(size), uint32(flags))
		if err == nil {
			*reqOut = C.uint64_t(addRequest(uint64(id), r))
		}
		return err
	})
}

// mtgo_request_wait serves both wait and test (test != 0: a running request
// is MEMTIER_ERR_BUSY instead of TIMEOUT).
//
//export mtgo_request_wait
func mtgo_request_wait(rid C.uint64_t, timeoutNs C.int64_t, nbytes *C.uint64_t, test C.int) (rc C.int) {
	defer catch(&rc, nil)
	r, err := lookupRequest(uint64(rid))
	if err != nil {
		return finish(nil, err)
	}
	timeout := time.Duration(timeoutNs)
	if timeoutNs < 0 {
		timeout = -1
	}
	n, rerr, done := r.r.Wait(timeout)
	if !done {
		if test != 0 {
			return C.int(errs.Busy)
		}
		return finish(nil, errs.New(errs.Timeout, "memtier_request_wait", "request still running after %d ns", int64(timeoutNs)))
	}
	if nbytes != nil {
		*nbytes = C.uint64_t(n)
	}
	return finish(nil, rerr)
}

//export mtgo_request_release
func mtgo_request_release(rid C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	r, err := removeRequest(uint64(rid))
	if err != nil {
		return finish(nil, err)
	}
	r.r.Wait(-1) // it may still write to its dst; never return before it stops
	return 0
}
