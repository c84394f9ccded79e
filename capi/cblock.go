package main

/*
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"encoding/binary"
	"unsafe"
)

// cblock lays out the strings and int64 arrays a handle gives to C callers
// (tensor names, dtypes, shapes, metadata, member names) in one C allocation
// made at open and freed at close. C memory, not Go memory: callers keep the
// pointers until close, and the cgo rules forbid C holding Go pointers.
// Build it with the add methods, then seal it; offsets name the pieces.
type cblock struct {
	buf  []byte         // staging while building
	base unsafe.Pointer // the C copy after seal; nil before
}

// addString appends s plus a terminating NUL and returns its offset. A name
// may itself hold NUL bytes (a JSON "\u0000"); its length is kept separately.
func (b *cblock) addString(s string) uintptr {
	off := uintptr(len(b.buf))
	b.buf = append(b.buf, s...)
	b.buf = append(b.buf, 0)
	return off
}

// addInt64s appends v (8-byte aligned, native byte order) and returns its offset.
func (b *cblock) addInt64s(v []int64) uintptr {
	for len(b.buf)%8 != 0 {
		b.buf = append(b.buf, 0)
	}
	off := uintptr(len(b.buf))
	for _, x := range v {
		b.buf = binary.NativeEndian.AppendUint64(b.buf, uint64(x))
	}
	return off
}

// seal copies the staged bytes into one C allocation (malloc returns memory
// aligned for any type, so the int64 arrays stay aligned). It returns false
// when malloc fails.
func (b *cblock) seal() bool {
	n := max(len(b.buf), 8)
	p := C.malloc(C.size_t(n))
	if p == nil {
		return false
	}
	if len(b.buf) > 0 {
		C.memcpy(p, unsafe.Pointer(unsafe.SliceData(b.buf)), C.size_t(len(b.buf)))
	}
	b.base, b.buf = p, nil
	return true
}

// at is the C address of the piece at off.
func (b *cblock) at(off uintptr) unsafe.Pointer { return unsafe.Add(b.base, off) }

// free releases the C allocation; later calls do nothing.
func (b *cblock) free() {
	if b.base != nil {
		C.free(b.base)
		b.base = nil
	}
}
