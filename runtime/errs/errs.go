// Package errs holds MemTier's status codes and the Error type every layer
// returns, so that capi/ can map any failure to one C status and a detail
// message (path, offset, errno text) without string matching.
package errs

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall"
)

// Code is a MemTier status; the values equal include/memtier.h's memtier_status.
type Code int

// Status codes, pinned: append only, never renumber.
// The status codes (OK, InvalidArg, ... NotRegular), minCode and their names
// are generated from include/memtier.h into zz_codes.go (tools/mtgen).

// All lists every status code, for table tests that keep Go, C and Python in step.
func All() []Code {
	out := make([]Code, 0, -int(minCode)+1)
	for c := OK; c >= minCode; c-- {
		out = append(out, c)
	}
	return out
}

// String returns the code's name without the MEMTIER_ERR_ prefix.
func (c Code) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is a failure with its status code and the context a user needs to act:
// the operation, the path, the byte offset and the errno, when known.
type Error struct {
	Code   Code
	Op     string        // "open", "pread", "read", ...
	Path   string        // file path, "" if none
	Offset int64         // byte offset, -1 if none
	Errno  syscall.Errno // 0 if none
	Msg    string        // extra explanation, may be ""
}

// Error formats "op path at offset N: msg: errno text".
func (e *Error) Error() string {
	s := e.Op
	if e.Path != "" {
		s += " " + e.Path
	}
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Errno != 0 {
		s += ": " + e.Errno.Error()
	}
	return s
}

// Unwrap exposes the errno so errors.Is(err, syscall.ENOENT) works.
func (e *Error) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

// New returns an Error with code, op and a formatted message (no path, offset).
func New(code Code, op, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Offset: -1, Msg: fmt.Sprintf(format, args...)}
}

// At returns an Error about path at offset (offset < 0: none).
func At(code Code, op, path string, offset int64, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Path: path, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// FromErrno maps a syscall error to the matching status: ENOENT/ENOTDIR ->
// NotFound, EACCES/EPERM -> Permission, EISDIR -> IsDir, ENOMEM -> NoMem,
// anything else -> IO. err that is not an errno becomes IO with its text.
func FromErrno(op, path string, offset int64, err error) *Error {
	var me *Error
	if errors.As(err, &me) {
		return me
	}
	var en syscall.Errno
	if !errors.As(err, &en) {
		return &Error{Code: IO, Op: op, Path: path, Offset: offset, Msg: err.Error()}
	}
	code := IO
	switch en {
	case syscall.ENOENT, syscall.ENOTDIR:
		code = NotFound
	case syscall.EACCES, syscall.EPERM:
		code = Permission
	case syscall.EISDIR:
		code = IsDir
	case syscall.ENOMEM:
		code = NoMem
	}
	return &Error{Code: code, Op: op, Path: path, Offset: offset, Errno: en}
}

// CodeOf returns the status of err: OK for nil, the Error's code, or IO for any
// other error.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var me *Error
	if errors.As(err, &me) {
		return me.Code
	}
	return IO
}

// FromPanic turns a recovered panic into an error. A memory fault while
// copying into caller memory (a bad destination pointer; the goroutine runs
// with debug.SetPanicOnFault) is IO "bad address", like the EFAULT a pread
// into the same pointer returns; anything else is Internal, a MemTier bug.
func FromPanic(op string, p any) *Error {
	if re, ok := p.(runtime.Error); ok {
		// A fault at a real address carries it (SetPanicOnFault); a nil
		// dereference does not, and is more likely a MemTier bug, unless the
		// caller passed a pointer into the first page.
		if a, ok := re.(interface{ Addr() uintptr }); ok {
			return &Error{Code: IO, Op: op, Offset: -1, Errno: syscall.EFAULT,
				Msg: fmt.Sprintf("bad destination address 0x%x (memory fault while copying)", a.Addr())}
		}
		if strings.Contains(re.Error(), "nil pointer") {
			return New(Internal, op, "panic: %v (a MemTier bug, or a destination pointer below 4096)", p)
		}
	}
	return New(Internal, op, "panic: %v", p)
}
