package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include <stdint.h>
#include <stdlib.h>
#include "bridge.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

// setLastError stores msg as the calling thread's memtier_last_error text. It
// runs on the caller's OS thread: an exported call's goroutine is locked to
// the C thread that made it.
func setLastError(msg string) {
	if msg == "" {
		msg = "(no detail)"
	}
	C.mt_set_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// finish maps err to a status, records its text and counts it in ctx's stats.
func finish(ctx *engine.Context, err error) C.int {
	if err == nil {
		return 0
	}
	setLastError(err.Error())
	if ctx != nil {
		ctx.NoteError()
	}
	return C.int(errs.CodeOf(err))
}

// catch turns a panic in an export into MEMTIER_ERR_INTERNAL; an unrecovered
// panic in a c-shared library aborts the host process.
func catch(rc *C.int, ctx **engine.Context) {
	if p := recover(); p != nil {
		var c *engine.Context
		if ctx != nil {
			c = *ctx
		}
		*rc = finish(c, errs.FromPanic("memtier", p))
	}
}

// guardFaults makes a memory fault in this export's goroutine (a bad caller
// pointer) a recoverable panic instead of a fatal error. The goroutine is the
// caller's C thread for the duration of the call; the previous setting is
// restored by the returned function.
func guardFaults() func() {
	old := debug.SetPanicOnFault(true)
	return func() { debug.SetPanicOnFault(old) }
}

// invalid reports a bad argument detected at the boundary.
func invalid(ctx *engine.Context, op, format string, args ...any) C.int {
	return finish(ctx, badArg(op, format, args...))
}

// badArg is the error of a bad argument detected at the boundary.
func badArg(op, format string, args ...any) error {
	return errs.New(errs.InvalidArg, op, "%s", fmt.Sprintf(format, args...))
}

// call runs fn with the context behind id: an unknown id is CLOSED, a panic is
// INTERNAL, and fn's error becomes the status (counted in the context's
// stats). The hot read export does the same inline to avoid the closure.
func call(id C.uint64_t, fn func(ctx *engine.Context) error) (rc C.int) {
	var ctx *engine.Context
	defer catch(&rc, &ctx)
	defer guardFaults()()
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	return finish(ctx, fn(ctx))
}

// cgetenv reads the live process environment through libc, so variables set
// after the library loaded (e.g. by Python's os.environ) are seen; Go's own
// os.Getenv only sees the environment as of exec in a c-shared library.
func cgetenv(name string) (string, bool) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.getenv(cs)
	if v == nil {
		return "", false
	}
	return C.GoString(v), true
}
