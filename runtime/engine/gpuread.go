package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/source"
)

// Reads into CUDA device memory (MEMTIER_TARGET_CUDA).
//
// A device read is served tier by tier: blocks in the HBM cache (filled by
// prefetch TO_HBM) are copied device to device; blocks in the DRAM cache are
// copied host to device straight from cache memory (Stager.CopyToDevice);
// the rest is read from the file with GDS (cuFile straight into device
// memory) or staged (pread into pinned buffers, double-buffered against the
// host-to-device copies: Stager.ReadToDevice), as policy.DecideGPU says. A GDS
// read that fails with a fallback error (file system not supported, cuFile
// missing, a read error) is redone staged, counted in gds_fallbacks and
// remembered for that version of the file. Device reads never fill the DRAM
// cache.
//
// Nothing here runs for CPU targets: the Stager, the cuFile driver and the
// HBM cache are created on the first request that needs them, so a CPU-only
// program never initialises CUDA.

// gpuState is a context's GPU side.
type gpuState struct {
	mu      sync.Mutex // serialises creation of the members below
	stager  atomic.Pointer[gpu.Stager]
	hbm     atomic.Pointer[gpu.HBMCache]
	gds     atomic.Pointer[gpu.GDS]
	gdsErr  atomic.Pointer[gpu.Error] // the probe failed: GDS is unavailable for the process
	probing sync.Mutex                // one OpenGDS at a time
	st      gpu.Stats                 // counters of the stager, the GDS reader and the HBM cache

	fbMu      sync.Mutex
	fallbacks map[uint64]string   // file version -> why GDS fell back (not retried)
	hbmFiles  map[uint64]struct{} // file versions with blocks in the HBM cache
	last      string              // the latest fallback, for GPUInfo
	base      gpu.StatsSnapshot   // gpu counters at the last ResetStats
}

// maxRememberedFallbacks bounds the per-file fallback memory; when full it is
// cleared (a forgotten file is tried with GDS once more).
const maxRememberedFallbacks = 4096

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
// its device ordinal. A host pointer is errs.InvalidArg with a message that
// says what a CUDA target needs.
func inspectDst(op, path string, off uint64, dst uintptr, size uint64) (int, error) {
	info, err := gpu.InspectPointer(dst, size)
	if err == nil {
		return info.Device, nil
	}
	if gpu.KindOf(err) == gpu.KindInvalidPointer {
		return 0, errs.At(errs.InvalidArg, op, path, int64(off),
			"dst 0x%x is not CUDA device memory (MEMTIER_TARGET_CUDA needs a device pointer from cuMemAlloc or a CUDA tensor; use MEMTIER_TARGET_CPU for host memory): %v",
			dst, err)
	}
	return 0, gpuError(op, path, off, err)
}

// stager returns the context's Stager, creating it on first use.
func (c *Context) stager() (*gpu.Stager, error) {
	if s := c.gpu.stager.Load(); s != nil {
		return s, nil
	}
	c.gpu.mu.Lock()
	defer c.gpu.mu.Unlock()
	if s := c.gpu.stager.Load(); s != nil {
		return s, nil
	}
	lanes := min(max(c.opts.IOThreads, gpu.DefaultLanes), 16)
	s, err := gpu.NewStager(gpu.StagerOptions{Lanes: lanes, Stats: &c.gpu.st})
	if err != nil {
		return nil, err
	}
	c.gpu.stager.Store(s)
	return s, nil
}

// hbmCache returns the context's HBM cache, creating it (empty: it allocates
// device memory block by block as prefetches fill it) on first use.
func (c *Context) hbmCache() (*gpu.HBMCache, error) {
	if h := c.gpu.hbm.Load(); h != nil {
		return h, nil
	}
	c.gpu.mu.Lock()
	defer c.gpu.mu.Unlock()
	if h := c.gpu.hbm.Load(); h != nil {
		return h, nil
	}
	h, err := gpu.NewHBMCache(gpu.HBMOptions{Device: c.opts.HBMDevice, Budget: c.opts.HBMCacheBytes,
		BlockSize: config.HBMBlockBytes, Stats: &c.gpu.st})
	if err != nil {
		return nil, err
	}
	c.gpu.hbm.Store(h)
	return h, nil
}

// gdsReader returns the context's GDS reader, probing the cuFile driver on
// first use (seconds on some machines; only a GPU request that chose GDS
// gets here). A failed probe is remembered: nil and that error from then on.
func (c *Context) gdsReader() (*gpu.GDS, *gpu.Error) {
	if g := c.gpu.gds.Load(); g != nil {
		return g, nil
	}
	if e := c.gpu.gdsErr.Load(); e != nil {
		return nil, e
	}
	c.gpu.probing.Lock()
	defer c.gpu.probing.Unlock()
	if g := c.gpu.gds.Load(); g != nil {
		return g, nil
	}
	if e := c.gpu.gdsErr.Load(); e != nil {
		return nil, e
	}
	g, err := gpu.OpenGDS(&c.gpu.st)
	if err != nil {
		var ge *gpu.Error
		if !errors.As(err, &ge) {
			ge = &gpu.Error{Kind: gpu.KindUnavailable, Detail: err.Error()}
		}
		c.gpu.gdsErr.Store(ge)
		return nil, ge
	}
	c.gpu.gds.Store(g)
	return g, nil
}

// forgetDirect is the file table's hook for an O_DIRECT descriptor about to
// be closed: its cuFile registration goes first.
func (c *Context) forgetDirect(fd int) {
	if g := c.gpu.gds.Load(); g != nil {
		g.Forget(fd)
	}
}

// noteFallback counts one GDS attempt that failed and was served staged
// instead; perFile remembers it for the file version (not tried again).
func (c *Context) noteFallback(f *files.File, reason string, err error, perFile bool) {
	c.st.GDSFallbacks.Add(1)
	c.gpu.st.Fallback(reason)
	c.gpu.fbMu.Lock()
	defer c.gpu.fbMu.Unlock()
	if perFile {
		if c.gpu.fallbacks == nil || len(c.gpu.fallbacks) >= maxRememberedFallbacks {
			c.gpu.fallbacks = map[uint64]string{}
		}
		c.gpu.fallbacks[f.ID] = reason
	}
	c.gpu.last = fmt.Sprintf("%s: %s: %v", f.Path, reason, err)
}

// fileFallback is why GDS fell back for this version of f before ("" if it
// did not).
func (c *Context) fileFallback(f *files.File) string {
	c.gpu.fbMu.Lock()
	defer c.gpu.fbMu.Unlock()
	return c.gpu.fallbacks[f.ID]
}

// gdsUnavailable is why GDS cannot run ("" when it can or was not probed).
func (c *Context) gdsUnavailable() string {
	if e := c.gpu.gdsErr.Load(); e != nil {
		return gdsUnavailableText(e)
	}
	return ""
}

// gdsUnavailableText: "GDS unavailable (<reason key>): <why>".
func gdsUnavailableText(e *gpu.Error) string {
	return "GDS unavailable (" + e.Reason() + "): " + strings.TrimPrefix(e.Error(), "GDS unavailable: ")
}

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
	dev, err := inspectDst(op, path, off, dst, size)
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
	s, err := c.serveGPU(f, off, size, dst, dev, flags)
	if err != nil {
		return gpuError(op, path, off, err)
	}
	c.accountGPU(s)
	return nil
}

// serveGPU fills device memory [dst, dst+size) (on device dev) with the
// bytes of f at off; the range is inside the file. HBM cache blocks are
// copied device to device when the cache lives on dev; the rest goes
// through serveGPUSegment.
func (c *Context) serveGPU(f *files.File, off, size uint64, dst uintptr, dev int, flags uint32) (gpuServed, error) {
	h := c.gpu.hbm.Load()
	if h == nil || h.Device() != dev {
		return c.serveGPUSegment(f, off, size, dst, flags)
	}
	if _, resident, _ := h.Usage(); resident == 0 {
		return c.serveGPUSegment(f, off, size, dst, flags)
	}
	var total gpuServed
	segStart := off // start of the pending range not in the HBM cache
	flush := func(end uint64) error {
		if end <= segStart {
			return nil
		}
		s, err := c.serveGPUSegment(f, segStart, end-segStart, dst+uintptr(segStart-off), flags)
		total.add(s)
		return err
	}
	bs := h.BlockSize()
	for blo := off / bs * bs; blo < off+size; blo += bs {
		lo, hi := max(off, blo), min(off+size, blo+bs)
		ok, err := h.Lookup(gpu.BlockKey{File: f.ID, Index: blo / bs}, lo-blo, dst+uintptr(lo-off), hi-lo)
		if err != nil {
			return total, err
		}
		if !ok {
			continue
		}
		if err := flush(lo); err != nil {
			return total, err
		}
		total.hbm += hi - lo
		segStart = hi
	}
	err := flush(off + size)
	return total, err
}

// serveGPUSegment fills [dst, dst+size) with f's bytes at off, without the
// HBM cache: DRAM-cache blocks are copied host to device from cache memory,
// the rest is read from the file (gpuStorage).
func (c *Context) serveGPUSegment(f *files.File, off, size uint64, dst uintptr, flags uint32) (gpuServed, error) {
	if c.cache == nil || c.cache.Resident() == 0 {
		return c.gpuStorage(f, off, size, dst, flags)
	}
	var total gpuServed
	segStart := off
	flush := func(end uint64) error {
		if end <= segStart {
			return nil
		}
		s, err := c.gpuStorage(f, segStart, end-segStart, dst+uintptr(segStart-off), flags)
		total.add(s)
		return err
	}
	bs := c.cache.BlockSize()
	for blo := off / bs * bs; blo < off+size; blo += bs {
		lo, hi := max(off, blo), min(off+size, blo+bs)
		blk := c.cache.Touch(f.ID, blo/bs)
		if blk == nil {
			continue
		}
		if !blk.Covers(int(lo-blo), int(hi-blo)) {
			blk.Release()
			continue
		}
		err := flush(lo)
		if err == nil {
			err = c.copyToDevice(dst+uintptr(lo-off), blk.Data()[lo-blo:hi-blo])
		}
		blk.Release()
		if err != nil {
			return total, err
		}
		c.st.CacheHits.Add(1)
		total.cache += hi - lo
		segStart = hi
	}
	err := flush(off + size)
	return total, err
}

// copyToDevice copies host memory (a DRAM-cache block) to dst.
func (c *Context) copyToDevice(dst uintptr, src []byte) error {
	s, err := c.stager()
	if err != nil {
		return err
	}
	t := time.Now()
	if err := s.CopyToDevice(dst, src); err != nil {
		return err
	}
	c.st.H2DBytes.Add(uint64(len(src)))
	c.st.H2DNanos.Add(uint64(time.Since(t)))
	return nil
}

// gpuStorage reads [off, off+size) of f from the file into device memory:
// GDS when the policy says so and it works, else staged. With gds_mode
// REQUIRED, anything that keeps GDS from serving the range is an error.
func (c *Context) gpuStorage(f *files.File, off, size uint64, dst uintptr, flags uint32) (gpuServed, error) {
	d := policy.DecideGPU(c.gpuPolicy(), policy.GPUInput{Size: size, Off: off, FileSize: uint64(f.Ident.Size),
		GPUAvailable: true, GDSUnavailable: c.gdsUnavailable(), FileFallback: c.fileFallback(f)})
	required := c.opts.GDSMode == policy.GDSRequired
	if d.Path == policy.PathGDS {
		s, fellBack, err := c.gdsRead(f, off, size, dst)
		if err != nil || !fellBack {
			return s, err
		}
	} else if required {
		return gpuServed{}, errs.At(errs.Unsupported, "read", f.Path, int64(off),
			"gds_mode REQUIRED but GDS cannot serve this read: %s", d.Reason)
	}
	return c.stagedRead(f, off, size, dst, flags)
}

// gdsRead reads with cuFile through f's O_DIRECT descriptor. fellBack: GDS
// could not serve the range (counted, and remembered per file where it is
// about the file); the caller reads it staged. With gds_mode REQUIRED those
// cases are errors instead.
func (c *Context) gdsRead(f *files.File, off, size uint64, dst uintptr) (s gpuServed, fellBack bool, err error) {
	required := c.opts.GDSMode == policy.GDSRequired
	g, gerr := c.gdsReader()
	if gerr != nil {
		if required {
			return s, false, errs.At(errs.Unsupported, "read", f.Path, int64(off),
				"gds_mode REQUIRED but %s", gdsUnavailableText(gerr))
		}
		c.noteFallback(f, gerr.Reason(), gerr, false)
		return s, true, nil
	}
	dfd, _, _, refused, err := f.Direct()
	if err != nil {
		return s, false, err
	}
	if refused {
		if required {
			return s, false, errs.At(errs.DirectIO, "read", f.Path, int64(off),
				"gds_mode REQUIRED but the file system refuses O_DIRECT, which GDS needs")
		}
		c.noteFallback(f, "odirect_refused", errors.New("the file system refuses O_DIRECT"), true)
		return s, true, nil
	}
	n, err := g.Read(dfd, dst, size, int64(off))
	if err != nil {
		reason, ok := gpu.FallbackReason(err)
		if !ok || required {
			return s, false, err
		}
		c.noteFallback(f, reason, err, true)
		return s, true, nil
	}
	if uint64(n) < size {
		return s, false, source.Shrunk(f, off, size)
	}
	s.gds = size
	return s, false, nil
}

// stagedPartMin: a staged read of at least two of these is split into parts
// (at most one per Stager lane) run at once, so several pinned pipelines
// read the file and feed the device in parallel; a smaller one runs on one
// lane (its reads are still split into tasks by the CPU path).
const stagedPartMin = 2 * gpu.DefaultChunkSize

// stagedRead reads [off, off+size) of f through the context's Stager: each
// pinned buffer is filled by the CPU path the policy picks for the file side
// (buffered pread, or O_DIRECT straight into the page-aligned buffer) while
// the previous one is copied to the device. Large reads run as several
// parts on several lanes at once, cut at multiples of the chunk size in file
// offsets (so every part but the first starts aligned for O_DIRECT).
func (c *Context) stagedRead(f *files.File, off, size uint64, dst uintptr, flags uint32) (gpuServed, error) {
	stg, err := c.stager()
	if err != nil {
		return gpuServed{}, err
	}
	path := c.decide(f, off, size, flags|policy.ReadOnce, 0).Path
	chunk := stg.Options().ChunkSize
	parts := int(min(uint64(stg.Options().Lanes), size/stagedPartMin))
	var readNs atomic.Int64
	part := func(lo, hi uint64) error {
		var ns time.Duration
		err := stg.ReadToDevice(dst+uintptr(lo-off), hi-lo, func(buf []byte, fo uint64) error {
			t := time.Now()
			_, err := c.fetch(f, buf, fo, path)
			ns += time.Since(t) // the callbacks of one call run one after another
			return err
		}, lo)
		readNs.Add(int64(ns))
		return err
	}
	start := time.Now()
	if parts <= 1 {
		err = part(off, off+size)
	} else {
		// Cut points: multiples of chunk, about size/parts apart.
		per := (size/uint64(parts) + chunk - 1) / chunk * chunk
		var cuts []uint64
		for lo := off; lo < off+size; {
			hi := min(off+size, (lo+per)/chunk*chunk)
			if hi <= lo {
				hi = min(off+size, lo+per)
			}
			cuts = append(cuts, lo)
			lo = hi
		}
		cuts = append(cuts, off+size)
		err = c.rd.Run(len(cuts)-1, len(cuts)-1, func(i int) error { return part(cuts[i], cuts[i+1]) })
	}
	c.st.StagedReadNanos.Add(uint64(readNs.Load()))
	if err != nil {
		return gpuServed{}, err
	}
	c.st.H2DBytes.Add(size)
	c.st.H2DNanos.Add(uint64(time.Since(start)))
	return gpuServed{staged: size}, nil
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
		dev, err := inspectDst("load_chunks", path, e.Off, dst, e.Size)
		if err != nil {
			l.fail(i, err)
			return nil
		}
		s, err := c.serveGPU(f, e.Off, e.Size, dst, dev, 0)
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
	h, err := c.hbmCache()
	if err != nil {
		return 0, gpuError("prefetch", path, off, err)
	}
	f, err := c.acquire(path)
	if err != nil {
		return 0, err
	}
	defer f.Release()
	bs := h.BlockSize()
	off, end := prefetchRange(f, off, size, c.opts.HBMCacheBytes/bs*bs, bs)
	if off >= end {
		return 0, nil
	}
	c.gpu.fbMu.Lock()
	if c.gpu.hbmFiles == nil {
		c.gpu.hbmFiles = map[uint64]struct{}{}
	}
	c.gpu.hbmFiles[f.ID] = struct{}{}
	c.gpu.fbMu.Unlock()
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
			_, err := c.serveGPUSegment(f, blo, n, p, 0)
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
func (c *Context) dropHBM(ids []uint64, all bool) {
	h := c.gpu.hbm.Load()
	if h == nil {
		return
	}
	c.gpu.fbMu.Lock()
	defer c.gpu.fbMu.Unlock()
	if all {
		for id := range c.gpu.hbmFiles {
			h.RemoveFile(id)
		}
		c.gpu.hbmFiles = nil
		return
	}
	for _, id := range ids {
		if id != 0 {
			h.RemoveFile(id)
			delete(c.gpu.hbmFiles, id)
		}
	}
}

// closeGPU frees the Stager's pinned buffers and the HBM cache's device
// memory (finalize; never on a process-exit path).
func (c *Context) closeGPU() {
	if s := c.gpu.stager.Load(); s != nil {
		_ = s.Close()
	}
	if h := c.gpu.hbm.Load(); h != nil {
		_ = h.Close()
	}
}

// gpuStats fills the GPU fields of a stats snapshot that are not engine
// counters: HBM inserts and evictions (since the last reset) and the HBM
// gauges.
func (c *Context) gpuStats(out *statsGPU) {
	snap := c.gpu.st.Snapshot()
	c.gpu.fbMu.Lock()
	base := c.gpu.base
	c.gpu.fbMu.Unlock()
	out.inserted = snap.HBMInsertBytes - base.HBMInsertBytes
	out.evictions = snap.HBMEvictions - base.HBMEvictions
	if h := c.gpu.hbm.Load(); h != nil {
		_, out.resident, _ = h.Usage()
	}
	out.budget = c.opts.HBMCacheBytes / config.HBMBlockBytes * config.HBMBlockBytes
}

type statsGPU struct{ inserted, evictions, resident, budget uint64 }

// resetGPUStats starts the gpu package's counters from zero for Stats.
func (c *Context) resetGPUStats() {
	snap := c.gpu.st.Snapshot()
	c.gpu.fbMu.Lock()
	c.gpu.base = snap
	c.gpu.fbMu.Unlock()
}

// GPUInfo describes the GPU side in a few lines (memtier_gpu_info): whether
// CUDA is usable and why, the GDS state (without probing it), the mode, the
// HBM tier and the latest GDS fallback. It loads libcuda (once per process)
// to answer.
func (c *Context) GPUInfo() (string, error) {
	if err := c.enter(); err != nil {
		return "", err
	}
	defer c.exit()
	modes := map[int]string{policy.GDSAuto: "auto", policy.GDSOff: "off", policy.GDSRequired: "required"}
	gds := gpu.GDSReason()
	if e := c.gpu.gdsErr.Load(); e != nil {
		gds = gdsUnavailableText(e)
	}
	hbm := "off (hbm_cache_bytes is 0)"
	if c.opts.HBMCacheBytes > 0 {
		var resident uint64
		if h := c.gpu.hbm.Load(); h != nil {
			_, resident, _ = h.Usage()
		}
		hbm = fmt.Sprintf("budget %d bytes on device %d, %d bytes resident", c.opts.HBMCacheBytes, c.opts.HBMDevice, resident)
	}
	c.gpu.fbMu.Lock()
	last := c.gpu.last
	c.gpu.fbMu.Unlock()
	if last == "" {
		last = "none"
	}
	return fmt.Sprintf("cuda: %s\ngds: %s\ngds_mode: %s (gds_threshold_bytes %d)\nhbm: %s\nlast_gds_fallback: %s\nbuild_tags: %v\n",
		gpu.Reason(), gds, modes[c.opts.GDSMode], c.opts.GDSThreshold, hbm, last, gpu.BuildTags()), nil
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
			return errs.New(errs.Unsupported, "memtier_init", "gds_mode REQUIRED but %s", gdsUnavailableText(ge))
		}
		return errs.New(errs.Unsupported, "memtier_init", "gds_mode REQUIRED but GDS is unavailable: %v", err)
	}
	return nil
}
