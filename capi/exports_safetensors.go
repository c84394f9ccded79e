package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"sort"
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

// stHandle is an open safetensors file: the engine's parsed header plus the
// C copies of what memtier_tensor_info_t and memtier_safetensors_metadata
// point to, made once at open.
type stHandle struct {
	ctx     uint64
	f       *engine.SafetensorsFile
	mem     cblock
	tensors []stInfoC // offsets in mem, one per tensor
	meta    [][2]uintptr
	// metaPresent: the header has a "__metadata__" object (empty or not),
	// which the reference safetensors returns as {} where a missing or null
	// one is None; meta alone cannot tell them apart.
	metaPresent bool
}

type stInfoC struct{ name, dtype, shape uintptr }

func (h *stHandle) ctxID() uint64 { return h.ctx }
func (h *stHandle) free()         { h.mem.free() }

// newSTHandle lays out the C strings and shapes of f; metadata sorted by key.
func newSTHandle(ctx uint64, f *engine.SafetensorsFile) (*stHandle, error) {
	h := &stHandle{ctx: ctx, f: f, tensors: make([]stInfoC, len(f.Tensors)), metaPresent: f.Metadata != nil}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		h.tensors[i].shape = h.mem.addInt64s(t.Shape)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		h.tensors[i].name = h.mem.addString(t.Name)
		h.tensors[i].dtype = h.mem.addString(t.DType)
	}
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.meta = append(h.meta, [2]uintptr{h.mem.addString(k), h.mem.addString(f.Metadata[k])})
	}
	if !h.mem.seal() {
		return nil, errs.At(errs.NoMem, "memtier_safetensors_open", f.Path, -1, "malloc of the tensor info failed")
	}
	return h, nil
}

// callObject runs fn with the handle behind hid, as call does for contexts:
// an unknown or closed handle is CLOSED, a panic INTERNAL (a fault on a bad
// caller pointer IO), and fn's error is counted in the handle's context.
func callObject[T objHandle](hid C.uint64_t, what string, fn func(h T) error) (rc C.int) {
	var ctx *engine.Context
	defer catch(&rc, &ctx)
	defer guardFaults()()
	h, err := lookupObject[T](uint64(hid), what)
	if err != nil {
		return finish(nil, err)
	}
	ctx, _ = lookupContext(h.ctxID())
	return finish(ctx, fn(h))
}

// mtgo_safetensors_open opens and validates a safetensors file and registers its handle.
//
//export mtgo_safetensors_open
func mtgo_safetensors_open(id C.uint64_t, path *C.char, stOut *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		if path == nil {
			return badArg("memtier_safetensors_open", "path is NULL")
		}
		var f *engine.SafetensorsFile
		p := goPath(path)
		err := interruptible(uint64(id), anyURL(p), func() (err error) {
			f, err = ctx.OpenSafetensors(p)
			return err
		})
		if err != nil {
			return err
		}
		h, err := newSTHandle(uint64(id), f)
		if err != nil {
			return err
		}
		*stOut = C.uint64_t(addObject(h))
		return nil
	})
}

// mtgo_safetensors_close unregisters a safetensors handle and frees its C memory.
//
//export mtgo_safetensors_close
func mtgo_safetensors_close(sid C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	return finish(nil, removeObject[*stHandle](uint64(sid), "safetensors"))
}

// mtgo_safetensors_count is memtier_safetensors_count.
//
//export mtgo_safetensors_count
func mtgo_safetensors_count(sid C.uint64_t, out *C.size_t) C.int {
	return callObject(sid, "safetensors", func(h *stHandle) error {
		*out = C.size_t(len(h.tensors))
		return nil
	})
}

// tensorIndex checks a caller's index against h's tensors.
func (h *stHandle) tensorIndex(op string, index C.size_t) (int, error) {
	if uint64(index) >= uint64(len(h.tensors)) {
		return 0, errs.At(errs.InvalidArg, op, h.f.Path, -1, "tensor index %d out of range (%d tensors)", uint64(index), len(h.tensors))
	}
	return int(index), nil
}

// mtgo_safetensors_get points *info at the handle's C copies of tensor index.
//
//export mtgo_safetensors_get
func mtgo_safetensors_get(sid C.uint64_t, index C.size_t, info *C.memtier_tensor_info_t) C.int {
	return callObject(sid, "safetensors", func(h *stHandle) error {
		i, err := h.tensorIndex("memtier_safetensors_get", index)
		if err != nil {
			return err
		}
		t, c := &h.f.Tensors[i], &h.tensors[i]
		info.name = (*C.char)(h.mem.at(c.name))
		info.name_len = C.uint64_t(len(t.Name))
		info.dtype = (*C.char)(h.mem.at(c.dtype))
		info.dtype_bits = C.uint32_t(t.ElemBits)
		info.ndim = C.uint32_t(len(t.Shape))
		info.shape = (*C.int64_t)(h.mem.at(c.shape))
		info.offset = C.uint64_t(t.Begin)
		info.nbytes = C.uint64_t(t.End - t.Begin)
		return nil
	})
}

// mtgo_safetensors_find looks a tensor up by its name bytes.
//
//export mtgo_safetensors_find
func mtgo_safetensors_find(sid C.uint64_t, name *C.char, nameLen C.size_t, indexOut *C.size_t) C.int {
	return callObject(sid, "safetensors", func(h *stHandle) error {
		if name == nil && nameLen > 0 {
			return badArg("memtier_safetensors_find", "name is NULL with name_len %d", uint64(nameLen))
		}
		// No name is longer than the header (at most 100,000,000 bytes), so a
		// longer name_len is not found without reading the caller's memory.
		i := -1
		if uint64(nameLen) <= uint64(h.f.HeaderLen) {
			i = h.f.Index(string(hostSlice(unsafe.Pointer(name), uint64(nameLen))))
		}
		if i < 0 {
			return errs.At(errs.NotFound, "memtier_safetensors_find", h.f.Path, -1, "no tensor named %q", cut(name, nameLen))
		}
		*indexOut = C.size_t(i)
		return nil
	})
}

// cut is at most 200 bytes of a caller's name, for a message.
func cut(name *C.char, n C.size_t) string {
	return string(hostSlice(unsafe.Pointer(name), min(uint64(n), 200)))
}

// mtgo_safetensors_metadata returns the index-th metadata entry (sorted by key); past the end is EOF, not counted as an error.
//
//export mtgo_safetensors_metadata
func mtgo_safetensors_metadata(sid C.uint64_t, index C.size_t, keyOut, valueOut **C.char) (rc C.int) {
	var ctx *engine.Context
	defer catch(&rc, &ctx)
	defer guardFaults()()
	h, err := lookupObject[*stHandle](uint64(sid), "safetensors")
	if err != nil {
		return finish(nil, err)
	}
	ctx, _ = lookupContext(h.ctx)
	if uint64(index) >= uint64(len(h.meta)) {
		// The end of an iteration, not counted in stats.errors.
		return finish(nil, errs.At(errs.EOF, "memtier_safetensors_metadata", h.f.Path, -1,
			"metadata index %d: the file has %d entries", uint64(index), len(h.meta)))
	}
	m := h.meta[index]
	*keyOut = (*C.char)(h.mem.at(m[0]))
	*valueOut = (*C.char)(h.mem.at(m[1]))
	return 0
}

// mtgo_safetensors_metadata_count stores the number of metadata entries and
// whether the header has a "__metadata__" object; presentOut may be NULL.
//
//export mtgo_safetensors_metadata_count
func mtgo_safetensors_metadata_count(sid C.uint64_t, countOut *C.size_t, presentOut *C.int) C.int {
	return callObject(sid, "safetensors", func(h *stHandle) error {
		*countOut = C.size_t(len(h.meta))
		if presentOut != nil {
			*presentOut = 0
			if h.metaPresent {
				*presentOut = 1
			}
		}
		return nil
	})
}

// mtgo_safetensors_load reads one tensor after checking the caller's destination size.
//
//export mtgo_safetensors_load
func mtgo_safetensors_load(sid C.uint64_t, index C.size_t, dst unsafe.Pointer, dstSize C.uint64_t, target C.int) C.int {
	return callObject(sid, "safetensors", func(h *stHandle) error {
		i, err := h.tensorIndex("memtier_safetensors_load", index)
		if err != nil {
			return err
		}
		t := &h.f.Tensors[i]
		n := uint64(t.End - t.Begin)
		switch {
		case dst == nil && n > 0:
			return errs.At(errs.InvalidArg, "memtier_safetensors_load", h.f.Path, -1, "dst is NULL for tensor %q of %d bytes", t.Name, n)
		case uint64(dstSize) < n:
			return errs.At(errs.InvalidArg, "memtier_safetensors_load", h.f.Path, -1,
				"dst_size %d is smaller than tensor %q (%d bytes)", uint64(dstSize), t.Name, n)
		}
		return interruptible(h.ctx, anyURL(h.f.Path), func() error { return h.f.Load(i, hostSlice(dst, n), int(target)) })
	})
}

// mtgo_safetensors_load_all reads every tensor with a destination in one chunk load.
//
//export mtgo_safetensors_load_all
func mtgo_safetensors_load_all(sid C.uint64_t, dsts *unsafe.Pointer, results *C.int64_t, target C.int) C.int {
	return callObject(sid, "safetensors", func(h *stHandle) error {
		n := len(h.tensors)
		if n == 0 {
			return nil
		}
		if dsts == nil {
			return badArg("memtier_safetensors_load_all", "dsts is NULL for %d tensors", n)
		}
		cd := unsafe.Slice(dsts, n)
		gd := make([][]byte, n)
		for i, p := range cd {
			t := &h.f.Tensors[i]
			if p != nil {
				// A zero-element tensor's slice is empty, not nil: it is loaded (result 0).
				gd[i] = hostSlice(p, uint64(t.End-t.Begin))
				if gd[i] == nil {
					gd[i] = []byte{}
				}
			}
		}
		res := make([]int64, n)
		err := interruptible(h.ctx, anyURL(h.f.Path), func() error { return h.f.LoadAll(gd, res, int(target)) })
		if results != nil {
			cr := unsafe.Slice(results, n)
			for i := range cr {
				cr[i] = C.int64_t(res[i])
			}
		}
		return err
	})
}
