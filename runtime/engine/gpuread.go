package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/stats"
)

// Reads into CUDA device memory (MEMTIER_TARGET_CUDA).
//
// A device read is a device plan (gpuplan.go): blocks in the HBM cache
// (filled by prefetch TO_HBM) are copied device to device; DRAM-cache blocks
// and the file ranges policy.DecideGPU does not send to GDS go through the
// Stager's pinned, double-buffered pipeline (Stager.ReadToDevice); the rest
// is read with GDS (cuFile straight into device memory). A GDS
// read that fails with a fallback error (file system not supported, cuFile
// missing, a read error) is redone staged, counted in gds_fallbacks and
// remembered for that version of the file. Device reads never fill the DRAM
// cache.
//
// The GPU state (Stager, HBM cache, cuFile driver, fallback memory, GPU
// counters) is a gpu.Target: nothing in it runs for CPU targets, each part
// is created on the first request that needs it, so a CPU-only program never
// initialises CUDA.

// gpuServed counts one device request's bytes by the tier that delivered them.
type gpuServed struct {
	hbm, cache, staged, gds uint64
}

func (s *gpuServed) add(o gpuServed) {
	s.hbm += o.hbm
	s.cache += o.cache
	s.staged += o.staged
	s.gds += o.gds
}

// accountGPU records a successful device request.
func (c *Context) accountGPU(s gpuServed) {
	total := s.hbm + s.cache + s.staged + s.gds
	c.st.Bytes.Add(total)
	countHit(&c.st.HBMHitRequests, &c.st.HBMHitBytes, s.hbm, total)
	countHit(&c.st.CacheHitRequests, &c.st.CacheHitBytes, s.cache, total)
	countPath(&c.st.StagedRequests, &c.st.StagedBytes, s.staged)
	countPath(&c.st.GDSRequests, &c.st.GDSBytes, s.gds)
}

// devPtr is the device address a capi destination slice stands for. The
// slice only carries the address and length of device memory: Go never reads
// or writes through it.
func devPtr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// gpuUsable fails with errs.Unsupported (naming what is missing) when no CUDA
// backend can serve device reads. The first call loads libcuda.
func gpuUsable(op, path string, off int64) error {
	if !gpu.Available() {
		return errs.At(errs.Unsupported, op, path, off, "%s", gpu.Reason())
	}
	return nil
}

// gpuError maps an error of the gpu package to a status error naming the
// request; other errors (storage errors from a read callback) pass unchanged.
func gpuError(op, path string, off uint64, err error) error {
	var ge *gpu.Error
	if err == nil || !errors.As(err, &ge) {
		return err
	}
	code := errs.IO
	switch ge.Kind {
	case gpu.KindInvalidPointer, gpu.KindInvalidArg:
		code = errs.InvalidArg
	case gpu.KindNoMemory:
		code = errs.NoMem
	case gpu.KindUnavailable, gpu.KindUnsupported:
		code = errs.Unsupported
	case gpu.KindClosed:
		code = errs.Closed
	}
	return errs.At(code, op, path, int64(off), "%s", ge.Error())
}

// inspectDst checks that [dst, dst+size) is CUDA device memory and returns
// its device ordinal and what the plan needs to know of it (managed memory
// is filled staged: cuFile cannot read into it). A host pointer is errs.InvalidArg with a message that
// says what a CUDA target needs; device memory too short for the request is
// errs.InvalidArg naming the allocation.
func inspectDst(op, path string, off uint64, dst uintptr, size uint64) (int, devOpts, error) {
	info, err := gpu.InspectPointer(dst, size)
	if err == nil {
		return info.Device, devOpts{managed: info.Managed}, nil
	}
	if gpu.RangeError(err) { // device memory, too short for the request
		return 0, devOpts{}, errs.At(errs.InvalidArg, op, path, int64(off), "dst 0x%x + %d bytes: %v", dst, size, err)
	}
	if gpu.KindOf(err) == gpu.KindInvalidPointer {
		return 0, devOpts{}, errs.At(errs.InvalidArg, op, path, int64(off),
			"dst 0x%x is not CUDA device memory (MEMTIER_TARGET_CUDA needs a device pointer from cuMemAlloc or a CUDA tensor; use MEMTIER_TARGET_CPU for host memory): %v",
			dst, err)
	}
	return 0, devOpts{}, gpuError(op, path, off, err)
}

// forgetDirect is the file table's hook for an O_DIRECT descriptor about to
// be closed: its cuFile registration goes first.
func (c *Context) forgetDirect(fd int) { c.tgt.ForgetFD(fd) }

func (c *Context) gpuPolicy() policy.GPUConfig {
	return policy.GPUConfig{GDSMode: c.opts.GDSMode, GDSThreshold: c.opts.GDSThreshold}
}

// readGPU serves Read for target CUDA: exactly size bytes of path at off into
// device memory at dst. dstLen is the length capi gave the destination (the
// caller's size). want != 0: the file's version must be want (handles).
func (c *Context) readGPU(op, path string, off, size uint64, dst uintptr, dstLen int, flags uint32, want uint64) error {
	if err := gpuUsable(op, path, int64(off)); err != nil {
		return err
	}
	if flags&^policy.AllFlags != 0 {
		return errs.At(errs.InvalidArg, op, path, -1, "unknown flag bits 0x%x", flags&^policy.AllFlags)
	}
	if size == 0 {
		c.accountGPU(gpuServed{})
		return nil
	}
	if err := checkRange(op, path, off, size, dstLen, flags); err != nil {
		return err
	}
	dev, do, err := inspectDst(op, path, off, dst, size)
	if err != nil {
		return err
	}
	f, err := c.acquire(path)
	if err != nil {
		return err
	}
	defer f.Release()
	if want != 0 && f.ID != want {
		return errChanged(path)
	}
	if err := checkEOF(f, off, size); err != nil {
		return err
	}
	s, err := c.serveDevice(f, off, size, dst, dev, flags, do)
	if err != nil {
		return gpuError(op, path, off, err)
	}
	c.accountGPU(s)
	return nil
}

// readvGPU serves the valid elements idx of a CUDA-target ReadV, each on its
// own (device destinations are not coalesced), IOThreads at a time.
func (c *Context) readvGPU(v []IOVec, idx []int) {
	err := c.rd.Run(len(idx), c.opts.IOThreads, func(k int) error {
		e := &v[idx[k]]
		if err := c.readGPU("readv", e.Path, e.Off, e.Size, devPtr(e.Dst), len(e.Dst), 0, 0); err != nil {
			e.Err, e.Result = err, int64(errs.CodeOf(err))
			return nil
		}
		e.Result = int64(e.Size)
		return nil
	})
	if err != nil { // a recovered panic: what did not finish fails with it
		for _, i := range idx {
			if v[i].Result == 0 && v[i].Err == nil && v[i].Size > 0 {
				v[i].Err, v[i].Result = err, int64(errs.CodeOf(err))
			}
		}
	}
}

// runGPU serves the valid chunks of a CUDA-target LoadChunks: the file
// is opened once, each chunk is read on its own (the Stager pipelines large
// ones), IOThreads at a time.
func (l *chunkLoad) runGPU(path string, valid []int, want uint64) {
	c := l.c
	f := l.open(path, valid, want)
	if f == nil {
		return
	}
	defer f.Release()
	runErr := c.rd.Run(len(valid), c.opts.IOThreads, func(k int) error {
		i := valid[k]
		e := &l.ch[i]
		if err := checkEOF(f, e.Off, e.Size); err != nil {
			l.fail(i, err)
			return nil
		}
		dst := devPtr(e.Dst)
		dev, do, err := inspectDst("load_chunks", path, e.Off, dst, e.Size)
		if err != nil {
			l.fail(i, err)
			return nil
		}
		s, err := c.serveDevice(f, e.Off, e.Size, dst, dev, 0, do)
		if err != nil {
			l.fail(i, gpuError("load_chunks", path, e.Off, err))
			return nil
		}
		c.accountGPU(s)
		l.done(i)
		return nil
	})
	if runErr != nil {
		for _, i := range valid {
			l.fail(i, runErr)
		}
	}
}

// prefetchHBM reads [off, off+size) of path (size 0: to end of file; clipped
// to the file) into the HBM cache, in whole cache blocks, and returns the
// bytes it brought in. A range larger than the budget keeps its last
// budget's worth, as for the DRAM cache.
func (c *Context) prefetchHBM(path string, off, size uint64) (uint64, error) {
	if c.opts.HBMCacheBytes == 0 {
		return 0, errs.At(errs.Unsupported, "prefetch", path, int64(off),
			"MEMTIER_PREFETCH_TO_HBM: the HBM tier is off (hbm_cache_bytes is 0)")
	}
	if err := gpuUsable("prefetch", path, int64(off)); err != nil {
		return 0, err
	}
	c.st.PrefetchRequests.Add(1)
	h, err := c.tgt.HBM()
	if err != nil {
		return 0, gpuError("prefetch", path, off, err)
	}
	f, err := c.acquire(path)
	if err != nil {
		return 0, err
	}
	defer f.Release()
	if !cacheSafe(f) {
		// HBM blocks are bound to the Identity as DRAM blocks are, so none
		// is made until the file settles; the prefetch moves nothing.
		return 0, nil
	}
	bs := h.BlockSize()
	off, end := prefetchRange(f, off, size, c.opts.HBMCacheBytes/bs*bs, bs)
	if off >= end {
		return 0, nil
	}
	c.tgt.NoteHBMFile(f.ID)
	var todo []uint64
	for idx := off / bs; idx*bs < end; idx++ {
		if _, ok := h.Contains(gpu.BlockKey{File: f.ID, Index: idx}); !ok {
			todo = append(todo, idx)
		}
	}
	var fetched atomic.Uint64
	err = c.rd.Run(len(todo), min(c.opts.IOThreads, gpu.DefaultLanes), func(k int) error {
		blo := todo[k] * bs
		n := min(bs, uint64(f.Ident.Size)-blo)
		ok, err := h.Fill(gpu.BlockKey{File: f.ID, Index: todo[k]}, n, func(p uintptr) error {
			_, err := c.serveDevice(f, blo, n, p, h.Device(), 0, devOpts{noHBM: true})
			return err
		})
		if ok {
			fetched.Add(n)
		}
		return gpuError("prefetch", path, blo, err)
	})
	c.st.PrefetchBytes.Add(fetched.Load())
	return fetched.Load(), err
}

// dropHBM removes the HBM blocks of the file versions ids (all blocks when
// all is set).
func (c *Context) dropHBM(ids []uint64, all bool) { c.tgt.DropHBM(ids, all) }

// gpuStats fills the GPU fields of a stats snapshot that the gpu package
// counts (one set of counters: the engine does not count them again): HBM
// inserts and evictions, GDS fallbacks and the staged path's file-read time
// since the last reset, and the HBM gauges.
func (c *Context) gpuStats(s *stats.Snapshot) {
	g := c.tgt.Stats()
	s.HBMInsertedBytes, s.HBMEvictions = g.HBMInsertBytes, g.HBMEvictions
	s.GDSFallbacks, s.StagedReadNanos = g.FallbackTotal, g.StagedReadNanos
	s.HBMResidentBytes = c.tgt.HBMResident()
	s.HBMBudgetBytes = c.opts.HBMCacheBytes / config.HBMBlockBytes * config.HBMBlockBytes
}

// GPUInfo describes the GPU side in a few lines (memtier_gpu_info): whether
// CUDA is usable and why, the GDS state (without probing it), the mode, the
// HBM tier, the latest GDS fallback and the path cuFile reads take
// (gds_path: gpudirect, compat, unavailable or not probed). It loads libcuda (once per process)
// to answer.
func (c *Context) GPUInfo() (string, error) {
	if err := c.enter(); err != nil {
		return "", err
	}
	defer c.exit()
	modes := map[int]string{policy.GDSAuto: "auto", policy.GDSOff: "off", policy.GDSRequired: "required"}
	gds := gpu.GDSReason()
	if e := c.tgt.GDSUnavailable(); e != "" {
		gds = e
	}
	hbm := "off (hbm_cache_bytes is 0)"
	if c.opts.HBMCacheBytes > 0 {
		hbm = fmt.Sprintf("budget %d bytes on device %d, %d bytes resident", c.opts.HBMCacheBytes, c.opts.HBMDevice, c.tgt.HBMResident())
	}
	last := c.tgt.LastFallback()
	if last == "" {
		last = "none"
	}
	path := gpu.GDSPath()
	if c.tgt.GDSUnavailable() != "" {
		path = "unavailable"
	}
	return fmt.Sprintf("cuda: %s\ngds: %s\ngds_mode: %s (gds_threshold_bytes %d)\nhbm: %s\nlast_gds_fallback: %s\nbuild_tags: %v\ngds_path: %s\n",
		gpu.Reason(), gds, modes[c.opts.GDSMode], c.opts.GDSThreshold, hbm, last, gpu.BuildTags(), path), nil
}

// checkGDSRequired is New's check for gds_mode REQUIRED: GDS must work in
// this process (the cuFile driver is opened now, not at the first read).
func checkGDSRequired(o config.Options) error {
	if o.GDSMode != config.GDSRequired {
		return nil
	}
	if _, err := gpu.OpenGDS(nil); err != nil {
		var ge *gpu.Error
		if errors.As(err, &ge) {
			return errs.New(errs.Unsupported, "memtier_init", "gds_mode REQUIRED but %s", gpu.UnavailableText(ge))
		}
		return errs.New(errs.Unsupported, "memtier_init", "gds_mode REQUIRED but GDS is unavailable: %v", err)
	}
	return nil
}
