package gpu

import (
	"errors"
	"fmt"
	"syscall"
)

// Kind classifies an *Error for the caller's status mapping and fallback
// decision.
type Kind int

const (
	// KindUnavailable: the backend cannot run in this process (library
	// missing or not loadable, no device, driver init failed, build without
	// the backend). Permanent for the process. Status: unsupported; GDS:
	// fall back to the staged path.
	KindUnavailable Kind = iota + 1
	// KindInvalidPointer: the destination is not CUDA device memory (a host
	// pointer, an unknown address, NULL) or the range runs past its
	// allocation. Status: invalid argument. Never retried on another path.
	KindInvalidPointer
	// KindNoMemory: a device allocation (cuMemAlloc) or the pinning of a
	// host staging buffer (cuMemHostRegister) failed. Status: out of memory.
	KindNoMemory
	// KindUnsupported: GDS cannot serve this file (its file system, its
	// open flags, the platform). Per file: fall back to the staged path.
	KindUnsupported
	// KindIO: a GDS read failed (cuFileRead returned -1 with errno, or a
	// cuFile error code). The staged path may still work.
	KindIO
	// KindCUDA: another CUDA driver call failed (copy, synchronisation,
	// stream or event creation, context switch). Status: I/O error; a
	// sticky device error will fail every later call too.
	KindCUDA
	// KindClosed: the Stager or HBMCache was closed.
	KindClosed
	// KindInvalidArg: a bad argument other than a pointer (overflowing
	// range, block larger than the cache's block size, bad options).
	KindInvalidArg
)

func (k Kind) String() string {
	switch k {
	case KindUnavailable:
		return "unavailable"
	case KindInvalidPointer:
		return "invalid_pointer"
	case KindNoMemory:
		return "no_memory"
	case KindUnsupported:
		return "unsupported"
	case KindIO:
		return "io"
	case KindCUDA:
		return "cuda"
	case KindClosed:
		return "closed"
	case KindInvalidArg:
		return "invalid_arg"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is the error type of every failure in this package.
type Error struct {
	Kind Kind
	// Op is the call that failed: a CUDA or cuFile function name, "dlopen",
	// or a package function.
	Op string
	// Code is the CUresult (CUDA calls) or CUfileOpError (cuFile calls) the
	// call returned; 0 when there is none.
	Code int
	// CodeName is Code's symbolic name (CUDA_ERROR_NO_DEVICE,
	// CU_FILE_IO_NOT_SUPPORTED) when known.
	CodeName string
	// Errno is set when cuFileRead returned -1 (errno from the read).
	Errno syscall.Errno
	// Detail is the human part of the message.
	Detail string
	// reason is the fallback key; derived from Kind when empty.
	reason string
}

func (e *Error) Error() string {
	var msg string
	switch {
	case e.Op != "" && e.Detail != "":
		msg = e.Op + ": " + e.Detail
	case e.Op != "":
		msg = e.Op + " failed"
	default:
		msg = e.Detail
	}
	switch {
	case e.CodeName != "":
		msg += fmt.Sprintf(": %s (%d)", e.CodeName, e.Code)
	case e.Code != 0:
		msg += fmt.Sprintf(": error %d", e.Code)
	}
	if e.Errno != 0 {
		msg += ": " + e.Errno.Error()
	}
	return msg
}

// Unwrap gives the errno of a failed cuFileRead, so errors.Is(err,
// syscall.EIO) works.
func (e *Error) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

// Fallback reports whether another path (the staged host-to-device copy, or
// a CPU read for a caller that allows it) is worth trying after this error:
// true for KindUnavailable, KindUnsupported and KindIO.
func (e *Error) Fallback() bool {
	return e.Kind == KindUnavailable || e.Kind == KindUnsupported || e.Kind == KindIO
}

// Reason is a short, stable key for counting fallbacks (Stats.Fallback):
// "cuda_unavailable", "cufile_unavailable", "gds_driver_open", "gds_compat",
// "fs_unsupported", "gds_register", "gds_read", "no_memory", "cuda_error",
// "invalid_pointer", "invalid_range" (device memory, but the range runs past
// its allocation or its mapped part), "closed", "invalid_arg".
func (e *Error) Reason() string {
	if e.reason != "" {
		return e.reason
	}
	switch e.Kind {
	case KindUnavailable:
		return "cuda_unavailable"
	case KindInvalidPointer:
		return "invalid_pointer"
	case KindNoMemory:
		return "no_memory"
	case KindUnsupported:
		return "gds_unsupported"
	case KindIO:
		return "gds_read"
	case KindClosed:
		return "closed"
	case KindInvalidArg:
		return "invalid_arg"
	}
	return "cuda_error"
}

// KindOf returns err's Kind when it is (or wraps) an *Error, else 0.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// FallbackReason returns the fallback key of err and whether err allows a
// fallback at all (see (*Error).Fallback); ("", false) for other errors.
func FallbackReason(err error) (string, bool) {
	var e *Error
	if errors.As(err, &e) && e.Fallback() {
		return e.Reason(), true
	}
	return "", false
}

// reasonRange marks a KindInvalidPointer error about the length of a
// request into device memory, not about the pointer itself.
const reasonRange = "invalid_range"

// RangeError reports whether err says that a device pointer is valid but
// the requested range runs past its allocation (or past its mapped memory,
// for VMM and pool allocations), so messages need not call it "not device
// memory".
func RangeError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindInvalidPointer && e.reason == reasonRange
}

// bufferCodes are the CUfileOpError values (cufile.h) that are about the
// destination buffer or the calling thread's CUDA context, not the file:
// CU_FILE_CUDA_POINTER_INVALID, _MEMORY_TYPE_INVALID (managed memory, for
// one), _POINTER_RANGE_ERROR, _CONTEXT_MISMATCH, CU_FILE_GPU_MEMORY_PINNING_FAILED,
// CU_FILE_NOMEM_ERROR and CU_FILE_INVALID_CONTEXT_ERROR.
var bufferCodes = map[int]bool{5012: true, 5013: true, 5014: true, 5015: true, 5036: true, 5043: true, 5047: true}

// AboutBuffer reports whether err is a cuFile error caused by the
// destination buffer or the calling context rather than by the file. The
// engine serves such a read staged but does not mark the file staged-only:
// the next read, into another buffer, may use GDS.
func AboutBuffer(err error) bool {
	var e *Error
	return errors.As(err, &e) && bufferCodes[e.Code] // CUresult values stay below 1000
}
