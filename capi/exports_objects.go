package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"math"
	"time"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
)

// mtgo_load_tensor is memtier_load_tensor past memtier.c's NULL-context check.
//
//export mtgo_load_tensor
func mtgo_load_tensor(id C.uint64_t, path *C.char, off, size C.uint64_t, dst unsafe.Pointer, target C.int) C.int {
	return call(id, func(ctx *engine.Context) error {
		switch {
		case path == nil:
			return badArg("memtier_load_tensor", "path is NULL")
		case dst == nil && size > 0:
			return badArg("memtier_load_tensor", "dst is NULL for a %d-byte tensor", uint64(size))
		case uint64(size) > math.MaxInt64:
			return badArg("memtier_load_tensor", "nbytes %d too large", uint64(size))
		}
		p := goPath(path)
		return interruptible(uint64(id), anyURL(p), func() error {
			return ctx.LoadTensor(p, uint64(off), uint64(size), hostSlice(dst, uint64(size)), int(target))
		})
	})
}

// goChunks copies the caller's chunk array into engine chunks whose Dst view
// the caller's buffers. A bad array pointer faults here, inside the export's
// fault guard, before any I/O.
func goChunks(cv []C.memtier_chunk_t) []engine.Chunk {
	v := make([]engine.Chunk, len(cv))
	for i := range cv {
		e := &cv[i]
		v[i] = engine.Chunk{Off: uint64(e.offset), Size: uint64(e.size), Dst: hostSlice(e.dst, uint64(e.size))}
	}
	return v
}

// mtgo_load_chunks copies the caller's chunk array, loads it and writes each result back.
//
//export mtgo_load_chunks
func mtgo_load_chunks(id C.uint64_t, path *C.char, chunks *C.memtier_chunk_t, n C.size_t, target C.int) C.int {
	return call(id, func(ctx *engine.Context) error {
		switch {
		case path == nil:
			return badArg("memtier_load_chunks", "path is NULL")
		case n > maxReadvElements:
			return badArg("memtier_load_chunks", "n = %d chunks; at most %d per call", uint64(n), maxReadvElements)
		case n == 0:
			return nil
		}
		cv := unsafe.Slice(chunks, int(n))
		v := goChunks(cv)
		p := goPath(path)
		err := interruptible(uint64(id), anyURL(p), func() error { return ctx.LoadChunks(p, v, int(target)) })
		for i := range cv {
			cv[i].result = C.int64_t(v[i].Result)
		}
		return err
	})
}

// mtgo_load_chunks_async starts a chunk load whose results are written into the caller's array as each chunk finishes.
//
//export mtgo_load_chunks_async
func mtgo_load_chunks_async(id C.uint64_t, path *C.char, chunks *C.memtier_chunk_t, n C.size_t, target C.int, reqOut *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		switch {
		case path == nil:
			return badArg("memtier_load_chunks_async", "path is NULL")
		case n > maxReadvElements:
			return badArg("memtier_load_chunks_async", "n = %d chunks; at most %d per call", uint64(n), maxReadvElements)
		}
		var cv []C.memtier_chunk_t
		if n > 0 {
			cv = unsafe.Slice(chunks, int(n))
		}
		v := goChunks(cv)
		// The worker writes each chunk's result into the caller's array (C
		// memory, kept valid by the caller until the request completes)
		// before request_next can return its index.
		publish := func(i int) { cv[i].result = C.int64_t(v[i].Result) }
		r, err := ctx.LoadChunksAsync(goPath(path), v, int(target), publish)
		if err == nil {
			*reqOut = C.uint64_t(addRequest(uint64(id), r))
		}
		return err
	})
}

// mtgo_request_next returns the next finished chunk of a chunk request.
//
//export mtgo_request_next
func mtgo_request_next(rid C.uint64_t, timeoutNs C.int64_t, indexOut *C.size_t) (rc C.int) {
	defer catch(&rc, nil)
	defer guardFaults()()
	r, err := lookupRequest(uint64(rid))
	if err != nil {
		return finish(nil, err)
	}
	timeout := time.Duration(timeoutNs)
	if timeoutNs < 0 {
		timeout = -1
	}
	i, err := r.r.Next(timeout)
	if err != nil {
		// Not counted in stats.errors (as request_wait): EOF ends every
		// loop, TIMEOUT is a poll.
		return finish(nil, err)
	}
	*indexOut = C.size_t(i)
	return 0
}
