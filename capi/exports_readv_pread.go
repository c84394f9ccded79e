package main

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"

	"github.com/memtier/memtier/runtime/engine"
)

// mtgo_readv_plan asks context id for the pread plan of a memtier_readv_ex
// of n elements of size bytes each, all of path, with flags
// (engine.PlanReadVPread). When the engine plans the call so, it sets *fd
// and *fsize and returns a handle that mtgo_readv_plan_done must be given;
// else 0 (also on any doubt: a closed context, a panic), and the caller
// serves the call with mtgo_readv. Thread safe.
//
//export mtgo_readv_plan
func mtgo_readv_plan(id C.uint64_t, path *C.char, n C.uint64_t, size C.uint64_t, flags C.uint32_t,
	fd *C.int, fsize *C.uint64_t) (h C.uint64_t) {
	defer func() {
		if recover() != nil {
			h = 0
		}
	}()
	ctx, err := lookupContext(uint64(id))
	if err != nil || path == nil {
		return 0
	}
	p := ctx.PlanReadVPread(viewPath(path), int(n), uint64(size), uint32(flags))
	if p == nil {
		return 0
	}
	*fd, *fsize = C.int(p.FD), C.uint64_t(p.Size)
	return C.uint64_t(cgo.NewHandle(p))
}

// mtgo_readv_plan_done records that the plan h served served elements of
// bytes bytes in all (whole: every element of the call) and ends the plan
// (engine.PreadPlan.Done). Thread safe; h must not be used again.
//
//export mtgo_readv_plan_done
func mtgo_readv_plan_done(h C.uint64_t, served, bytes C.uint64_t, whole C.int) {
	hd := cgo.Handle(h)
	p := hd.Value().(*engine.PreadPlan)
	hd.Delete()
	p.Done(uint64(served), uint64(bytes), whole != 0)
}
