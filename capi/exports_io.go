package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include <string.h>
#include "memtier.h"
*/
import "C"

import (
	"math"
	"slices"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/remote"
)

// hostSlice views caller memory as a byte slice. The GC never scans or moves
// C memory, so writing bytes through it is allowed by the cgo pointer rules.
//
// A size above maxHostSlice, or one that would run past the end of the
// address space, gets no slice (nil): unsafe.Slice panics there, which
// catch would report as INTERNAL. The exports that take a size check it
// with hostSizeOK first and refuse it as INVALID_ARG; the others let the
// engine report the empty destination as too small for the range.
func hostSlice(p unsafe.Pointer, n uint64) []byte {
	if p == nil || n == 0 || !hostSizeOK(p, n) {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// maxHostSlice is the largest caller buffer viewed as a Go slice (128 TiB,
// x86-64's and arm64's user address space with 4-level page tables); no
// real destination or file range is larger.
const maxHostSlice = 1 << 47

// hostSizeOK reports whether n bytes at p can be real caller memory.
func hostSizeOK(p unsafe.Pointer, n uint64) bool {
	return n <= maxHostSlice && uint64(uintptr(p)) <= math.MaxUint64-n
}

// lowDst returns the IO error of a host destination pointer below 4096 for
// a read of size bytes (nil otherwise): no process maps the first page, and
// a copy into it would fault as a nil dereference, which Go cannot tell
// from a MemTier bug (errs.FromPanic), so such a pointer is refused here,
// with the "bad destination address" a fault on other unmapped memory gets.
func lowDst(op string, dst unsafe.Pointer, size uint64) error {
	if a := uintptr(dst); a != 0 && a < 4096 && size > 0 {
		return errs.New(errs.IO, op, "bad destination address 0x%x (no memory is mapped below 4096)", a)
	}
	return nil
}

// maxReadvElements bounds one memtier_readv batch (it is also far beyond
// what one batch should hold: the Go copy of the array is 88 bytes per element).
const maxReadvElements = 1 << 24

// goPath copies a C path; NULL gives "".
func goPath(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// viewPath is the C path as a Go string without copying it: valid only
// during the call, for calls that retain no path (a synchronous read: the
// descriptor table copies the paths it keeps, and error texts are copied to
// C before the call returns). NULL gives "".
func viewPath(p *C.char) string {
	if p == nil {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Pointer(p)), int(C.strlen(p)))
}

//export mtgo_read
func mtgo_read(id C.uint64_t, path *C.char, off, size C.uint64_t, dst unsafe.Pointer, target C.int, flags C.uint32_t) (rc C.int) {
	var ctx *engine.Context
	defer catch(&rc, &ctx)
	defer guardFaults()()
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	switch {
	case path == nil:
		return invalid(ctx, "memtier_read", "path is NULL")
	case dst == nil && size > 0:
		return invalid(ctx, "memtier_read", "dst is NULL for a %d-byte read", uint64(size))
	case !hostSizeOK(dst, uint64(size)):
		return invalid(ctx, "memtier_read", "size %d too large", uint64(size))
	}
	if target == C.MEMTIER_TARGET_CPU {
		if err := lowDst("read", dst, uint64(size)); err != nil {
			return finish(ctx, err)
		}
	}
	p := viewPath(path)
	err = interruptible(uint64(id), anyURL(p), func() error {
		return ctx.Read(p, uint64(off), uint64(size), hostSlice(dst, uint64(size)), int(target), uint32(flags))
	})
	return finish(ctx, err)
}

//export mtgo_readv
func mtgo_readv(id C.uint64_t, path *C.char, iov *C.memtier_iovec_t, n C.size_t, target C.int, flags C.uint32_t) (rc C.int) {
	var ctx *engine.Context
	defer catch(&rc, &ctx)
	defer guardFaults()()
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	if n == 0 {
		return 0
	}
	if n > maxReadvElements {
		return invalid(ctx, "memtier_readv", "n = %d elements; at most %d per call", uint64(n), maxReadvElements)
	}
	cv := unsafe.Slice(iov, int(n))
	def := goPath(path)
	v := make([]engine.IOVec, len(cv))
	var low map[int]error // elements whose dst is in the first page (lowDst), refused here
	for i := range cv {
		e := &cv[i]
		p := def
		if e.path != nil {
			p = C.GoString(e.path)
		}
		v[i] = engine.IOVec{Path: p, Off: uint64(e.offset), Size: uint64(e.size), Dst: hostSlice(e.dst, uint64(e.size))}
		if e.dst == nil && e.size > 0 || !hostSizeOK(e.dst, uint64(e.size)) {
			v[i].Dst, v[i].Size = nil, uint64(e.size) // engine reports the bad element
		}
		if target == C.MEMTIER_TARGET_CPU {
			if err := lowDst("memtier_readv", e.dst, uint64(e.size)); err != nil {
				if low == nil {
					low = map[int]error{}
				}
				low[i] = err
				v[i].Dst, v[i].Size = nil, 0 // the engine reads nothing for it
			}
		}
	}
	// Each element's Path is its own or def: a scan only while some
	// context has an interrupt check.
	rem := anyChecks() && slices.ContainsFunc(v, func(e engine.IOVec) bool { return remote.IsURL(e.Path) })
	err = interruptible(uint64(id), rem, func() error { return ctx.ReadV(v, int(target), uint32(flags)) })
	if low != nil {
		// The call's status is still its lowest failed element's.
		var first error
		for i := range v {
			if e, ok := low[i]; ok {
				v[i].Err, v[i].Result = e, int64(errs.CodeOf(e))
			}
			if first == nil && v[i].Err != nil {
				first = v[i].Err
			}
		}
		if first != nil {
			err = first
		}
	}
	for i := range cv {
		cv[i].result = C.int64_t(v[i].Result)
	}
	return finish(ctx, err)
}

//export mtgo_prefetch
func mtgo_prefetch(id C.uint64_t, path *C.char, off, size C.uint64_t, flags C.uint32_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		if path == nil {
			return badArg("memtier_prefetch", "path is NULL")
		}
		p := goPath(path)
		return interruptible(uint64(id), anyURL(p), func() error {
			_, err := ctx.Prefetch(p, uint64(off), uint64(size), uint32(flags))
			return err
		})
	})
}

//export mtgo_drop_cache
func mtgo_drop_cache(id C.uint64_t, path *C.char) C.int {
	return call(id, func(ctx *engine.Context) error { return ctx.DropCache(goPath(path)) })
}

//export mtgo_explain
func mtgo_explain(id C.uint64_t, path *C.char, off, size C.uint64_t, dstAligned C.int, target C.int, flags C.uint32_t, out *C.memtier_decision_t) (rc C.int) {
	var ctx *engine.Context
	defer catch(&rc, &ctx)
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	if path == nil {
		return invalid(ctx, "memtier_explain", "path is NULL")
	}
	p := goPath(path)
	var ex engine.Explanation
	err = interruptible(uint64(id), anyURL(p), func() (err error) {
		ex, err = ctx.Explain(p, uint64(off), uint64(size), dstAligned != 0, int(target), uint32(flags))
		return err
	})
	if err != nil && ex.Reason == "" {
		return finish(ctx, err)
	}
	out.path = C.int32_t(ex.Path) // PathNone for a refused target
	out.admit = 0
	if ex.Admit {
		out.admit = 1
	}
	out.cached_bytes = C.uint64_t(ex.CachedBytes)
	out.resident_bytes = C.uint64_t(ex.ResidentBytes)
	out.tasks = C.uint64_t(ex.Tasks)
	reason := unsafe.Slice((*byte)(unsafe.Pointer(&out.reason[0])), len(out.reason))
	n := copy(reason[:len(reason)-1], ex.Reason)
	reason[n] = 0
	return finish(ctx, err) // a refused target still shows its decision
}
