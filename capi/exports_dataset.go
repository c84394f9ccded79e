package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
static const char mt_empty_name[1] = "";
static const char* mt_empty(void) { return mt_empty_name; }
*/
import "C"

import (
	"unsafe"

	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
)

// dsHandle is an open dataset: the engine's sample list plus, for a tar
// shard, the C copies of the member names memtier_dataset_sample returns.
type dsHandle struct {
	ctx   uint64
	d     *engine.Dataset
	mem   cblock
	names []uintptr // offsets in mem, one per member; nil for a packed dataset
}

func (h *dsHandle) ctxID() uint64 { return h.ctx }
func (h *dsHandle) free()         { h.mem.free() }

func newDSHandle(ctx uint64, d *engine.Dataset) (*dsHandle, error) {
	h := &dsHandle{ctx: ctx, d: d}
	if d.Members != nil {
		h.names = make([]uintptr, len(d.Members))
		for i := range d.Members {
			h.names[i] = h.mem.addString(d.Members[i].Name)
		}
	}
	if !h.mem.seal() {
		return nil, errs.At(errs.NoMem, "memtier_dataset_open", d.Path, -1, "malloc of the member names failed")
	}
	return h, nil
}

func addDataset(id C.uint64_t, d *engine.Dataset, dsOut *C.uint64_t) error {
	h, err := newDSHandle(uint64(id), d)
	if err != nil {
		return err
	}
	*dsOut = C.uint64_t(addObject(h))
	return nil
}

// mtgo_dataset_open opens a packed dataset (data file + index file).
//
//export mtgo_dataset_open
func mtgo_dataset_open(id C.uint64_t, dataPath, indexPath *C.char, dsOut *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		if dataPath == nil || indexPath == nil {
			return badArg("memtier_dataset_open", "data_path or index_path is NULL")
		}
		var d *engine.Dataset
		dp, ip := goPath(dataPath), goPath(indexPath)
		err := interruptible(uint64(id), anyURL(dp, ip), func() (err error) {
			d, err = ctx.OpenDataset(dp, ip)
			return err
		})
		if err != nil {
			return err
		}
		return addDataset(id, d, dsOut)
	})
}

// mtgo_dataset_open_tar opens a tar shard as a dataset.
//
//export mtgo_dataset_open_tar
func mtgo_dataset_open_tar(id C.uint64_t, path *C.char, dsOut *C.uint64_t) C.int {
	return call(id, func(ctx *engine.Context) error {
		if path == nil {
			return badArg("memtier_dataset_open_tar", "tar_path is NULL")
		}
		var d *engine.Dataset
		p := goPath(path)
		err := interruptible(uint64(id), anyURL(p), func() (err error) {
			d, err = ctx.OpenTarDataset(p)
			return err
		})
		if err != nil {
			return err
		}
		return addDataset(id, d, dsOut)
	})
}

// mtgo_dataset_close unregisters a dataset handle and frees its C memory.
//
//export mtgo_dataset_close
func mtgo_dataset_close(dsid C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	return finish(nil, removeObject[*dsHandle](uint64(dsid), "dataset"))
}

// mtgo_dataset_count is memtier_dataset_count.
//
//export mtgo_dataset_count
func mtgo_dataset_count(dsid C.uint64_t, out *C.uint64_t) C.int {
	return callObject(dsid, "dataset", func(h *dsHandle) error {
		*out = C.uint64_t(h.d.Len())
		return nil
	})
}

// mtgo_dataset_sample returns a sample's byte range and, for a tar shard, its member name.
//
//export mtgo_dataset_sample
func mtgo_dataset_sample(dsid C.uint64_t, index C.uint64_t, offOut, sizeOut *C.uint64_t, nameOut **C.char) C.int {
	return callObject(dsid, "dataset", func(h *dsHandle) error {
		off, size, _, ok := h.d.Sample(uint64(index))
		if !ok {
			return errs.At(errs.InvalidArg, "memtier_dataset_sample", h.d.Path, -1, "sample index %d out of range (%d samples)", uint64(index), h.d.Len())
		}
		if offOut != nil {
			*offOut = C.uint64_t(off)
		}
		if sizeOut != nil {
			*sizeOut = C.uint64_t(size)
		}
		if nameOut != nil {
			*nameOut = C.mt_empty()
			if h.names != nil {
				*nameOut = (*C.char)(h.mem.at(h.names[index]))
			}
		}
		return nil
	})
}

// mtgo_dataset_read reads one sample after checking the caller's destination size.
//
//export mtgo_dataset_read
func mtgo_dataset_read(dsid C.uint64_t, index C.uint64_t, dst unsafe.Pointer, dstSize C.uint64_t, target C.int) C.int {
	return callObject(dsid, "dataset", func(h *dsHandle) error {
		_, size, _, ok := h.d.Sample(uint64(index))
		switch {
		case !ok:
			return errs.At(errs.InvalidArg, "memtier_dataset_read", h.d.Path, -1, "sample index %d out of range (%d samples)", uint64(index), h.d.Len())
		case dst == nil && size > 0:
			return errs.At(errs.InvalidArg, "memtier_dataset_read", h.d.Path, -1, "dst is NULL for sample %d of %d bytes", uint64(index), size)
		case uint64(dstSize) < size:
			return errs.At(errs.InvalidArg, "memtier_dataset_read", h.d.Path, -1,
				"dst_size %d is smaller than sample %d (%d bytes)", uint64(dstSize), uint64(index), size)
		}
		return interruptible(h.ctx, anyURL(h.d.Path), func() error { return h.d.Read(uint64(index), hostSlice(dst, size), int(target)) })
	})
}

// mtgo_dataset_read_batch reads a batch of samples in one chunk load; each destination is taken to hold its sample.
//
//export mtgo_dataset_read_batch
func mtgo_dataset_read_batch(dsid C.uint64_t, indices *C.uint64_t, n C.size_t, dsts *unsafe.Pointer, results *C.int64_t, target C.int) C.int {
	return callObject(dsid, "dataset", func(h *dsHandle) error {
		switch {
		case n == 0:
			return nil
		case n > maxReadvElements:
			return badArg("memtier_dataset_read_batch", "n = %d samples; at most %d per call", uint64(n), maxReadvElements)
		case indices == nil || dsts == nil || results == nil:
			return badArg("memtier_dataset_read_batch", "indices, dsts or results is NULL with n = %d", uint64(n))
		}
		ci, cd, cr := unsafe.Slice(indices, int(n)), unsafe.Slice(dsts, int(n)), unsafe.Slice(results, int(n))
		idx := make([]uint64, n)
		gd := make([][]byte, n)
		for k := range ci {
			idx[k] = uint64(ci[k])
			// The caller promises each dst holds its sample: view that many bytes.
			if _, size, _, ok := h.d.Sample(idx[k]); ok {
				gd[k] = hostSlice(cd[k], size)
			}
		}
		res := make([]int64, n)
		err := interruptible(h.ctx, anyURL(h.d.Path), func() error { return h.d.ReadBatch(idx, gd, res, int(target)) })
		for k := range cr {
			cr[k] = C.int64_t(res[k])
		}
		return err
	})
}
