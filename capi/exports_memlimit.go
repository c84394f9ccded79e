package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
)

// mtgo_memory_limit writes the memory limit that bounded ctx's DRAM cache
// budget at init (engine.Context.MemLimit): its bytes into *bytes (when not
// NULL) and its source into src (when not NULL: n > 0 bytes, NUL
// terminated, cut to fit). memtier.c checks the arguments and the fork
// guard first.
//
//export mtgo_memory_limit
func mtgo_memory_limit(id C.uint64_t, bytes *C.uint64_t, src *C.char, n C.size_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		lim := ctx.MemLimit()
		if bytes != nil {
			*bytes = C.uint64_t(lim.Bytes)
		}
		if src != nil && n > 0 {
			out := unsafe.Slice((*byte)(unsafe.Pointer(src)), int(n))
			k := copy(out[:len(out)-1], lim.Source)
			out[k] = 0
		}
		return nil
	})
}
