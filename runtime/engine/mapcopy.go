package engine

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/policy"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// The mapped copy: a large load of a local file whose bytes are in the page
// cache is copied out of read-only mappings of the file by parallel
// goroutines, instead of one pread per task. Each goroutine maps one window
// of the file (mapWindow), copies the chunks' bytes in it and unmaps it, so
// the mapped file pages, which count in the process's RSS, stay bounded.
//
// Why: pread's copy runs in the kernel (copy_to_user, rep movsb), which on
// the 2-core machine measured moved about 5.5 GB/s per core, while Go's
// memmove moved about 10 GB/s per core out of the same page cache; the
// mapping's page faults and unmapping give part of that back, how much
// depending on the page cache's folio sizes (large folios, as a file just
// written has: one fault per folio). A 2 GiB checkpoint just written: 0.22 s
// of CPU against 0.34 s for pread, wall 0.18 s against 0.32 s
// (examples/python/bench_load_model.py); the same file read back into the
// page cache in small folios: 0.60 s against 0.53 s of CPU. Cold loads keep
// the planned path (direct I/O, readahead), and so do loads the DRAM cache
// may serve.
//
// Freshness is the same as the pread path's: the file is opened (and
// checked) through the descriptor table and must be the version the caller
// opened; the mapping is of that descriptor, so a file replaced by rename
// during the load is still the old file's bytes. A file truncated during
// the load makes the copy fault (SIGBUS); each copying goroutine runs with
// debug.SetPanicOnFault, so the fault becomes a panic recovered into the
// chunk's error, the EOF "file shrank while reading" of the pread path.

// mapCopyMinBytes: loads below this many bytes keep the pread path (the
// mapping, its faults and its munmap cost more than they save on a small
// load). A variable so tests can map small files.
var mapCopyMinBytes uint64 = 64 << 20

// mapCopyResident: the fraction (in eighths) of the range that must be in
// the page cache, by residencySamples samples, for a mapped copy: the rest
// faults in one page cluster at a time, slower than the planned cold path.
const mapCopyResident = 7

// hugeAlign: the mapping is placed so that file offsets and addresses agree
// modulo 2 MiB, letting the kernel map a 2 MiB page-cache folio with one PMD
// entry (one fault, one TLB entry) instead of 512 PTEs.
const hugeAlign = 2 << 20

// mapCopyHook, when set (tests only), runs after the mapping is made and
// before the copy starts: where a test truncates or replaces the file.
var mapCopyHook func()

// mapSeg is one copy of a mapped load: bytes [off, off+n) of the file into
// chunk i's destination at off-chunk.Off.
type mapSeg struct {
	i    int
	off  uint64
	n    uint64
	fail error // set by the copy
}

// loadMapped serves ch (target CPU, file version want) by a mapped copy when
// the load qualifies, and reports whether it did; false means nothing was
// done (not even counted) and the caller runs the planned path, which then
// also reports every error the checks here only detect (a missing file,
// a changed version, a range past the end).
func (c *Context) loadMapped(path string, ch []Chunk, want uint64) bool {
	if remote.HasScheme(path) || c.cache != nil && c.cache.Resident() > 0 {
		return false // the DRAM cache may hold some of it: the planned path copies from there
	}
	if m := c.pol.DirectMode; m == policy.DirectAlways || m == policy.DirectRequired {
		return false
	}
	lo, hi, total := ^uint64(0), uint64(0), uint64(0)
	for i := range ch {
		e := &ch[i]
		if e.Size == 0 {
			continue
		}
		if checkRange("load_chunks", path, e.Off, e.Size, len(e.Dst), 0) != nil {
			return false
		}
		lo, hi, total = min(lo, e.Off), max(hi, e.Off+e.Size), total+e.Size
	}
	if total < mapCopyMinBytes {
		return false
	}
	obj, err := c.openTrusting(path, c.trust)
	if err != nil {
		return false
	}
	defer obj.Release()
	f, local := obj.(*files.File)
	if !local || want != 0 && f.Version() != want || hi > f.Size() {
		return false
	}
	if n, known := c.src.Resident(f, lo, hi-lo, residencySamples); !known || n*8 < (hi-lo)*mapCopyResident {
		return false
	}
	c.st.Requests.Add(uint64(len(ch)))
	if mapCopyHook != nil {
		mapCopyHook()
	}
	segs, units := mapPlan(ch)
	runErr := c.rd.Run(len(units), c.opts.IOThreads, func(k int) error {
		c.st.CoalescedReads.Add(1)
		copyWindow(f, ch, segs, &units[k])
		return nil
	})
	failed := make([]error, len(ch))
	for k := range segs {
		if s := &segs[k]; s.fail != nil && failed[s.i] == nil {
			failed[s.i] = s.fail
		}
	}
	// A file cut inside a page reads zeros up to that page's end instead of
	// faulting: a chunk past the size the file has now fails as a short
	// pread would have.
	var st unix.Stat_t
	if err := unix.Fstat(f.FD, &st); err == nil && uint64(st.Size) < hi {
		for i := range ch {
			if e := &ch[i]; e.Size > 0 && failed[i] == nil && e.Off+e.Size > uint64(st.Size) {
				failed[i] = source.Shrunk(f, e.Off, e.Size)
			}
		}
	}
	for i := range ch {
		e := &ch[i]
		e.Result, e.Err = 0, nil
		switch {
		case failed[i] != nil:
			e.Result, e.Err = int64(errs.CodeOf(failed[i])), failed[i]
		case runErr != nil:
			e.Result, e.Err = int64(errs.CodeOf(runErr)), runErr
		default:
			c.account(served{buffered: e.Size})
			e.Result = int64(e.Size)
		}
	}
	return true
}

// unmap releases a mapping of mapFile; a failure leaves only address space
// behind, which nothing can do better about.
func unmap(raw []byte) { _ = unix.Munmap(raw) }

// mapFileFn is mapFile; tests replace it to take the pread fallback.
var mapFileFn = mapFile

// pageSize: the mapping's offset must be a multiple of it.
var pageSize = uint64(unix.Getpagesize())

// mapFile maps [off, off+n) of fd read-only at an address congruent to off
// modulo hugeAlign. raw is the whole reservation to unmap; src is the file's
// bytes from off. ok is false when the kernel refused either mapping.
func mapFile(fd int, off, n uint64) (raw, src []byte, ok bool) {
	res, err := unix.Mmap(-1, 0, int(n+hugeAlign), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, false
	}
	start := unsafe.Pointer(unsafe.SliceData(res))
	addr := unsafe.Add(start, (uintptr(off)-uintptr(start))%hugeAlign)
	p, err := unix.MmapPtr(fd, int64(off), addr, uintptr(n), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil || p != addr {
		_ = unix.Munmap(res)
		return nil, nil, false
	}
	return res, unsafe.Slice((*byte)(p), n), true
}

// mapWindow: each unit maps, copies and unmaps one window of the file of at
// most this many bytes, so the file pages mapped at once (which count in the
// process's RSS, as the reference's mmap does) stay below IOThreads windows,
// whatever the checkpoint size. A multiple of hugeAlign; a variable so tests
// can cut small files into many windows.
var mapWindow uint64 = 32 << 20

// mapUnit is one window: file range [lo, hi) to map and the segments in it.
type mapUnit struct {
	lo, hi uint64
	segs   []int // indices into the plan's segments
}

// mapPlan splits the non-empty chunks at window boundaries into segments and
// groups the segments by window, in file order.
func mapPlan(ch []Chunk) ([]mapSeg, []mapUnit) {
	var segs []mapSeg
	var units []mapUnit
	byWin := map[uint64]int{}
	for i := range ch {
		e := &ch[i]
		for off, end := e.Off, e.Off+e.Size; off < end; {
			w := off / mapWindow
			n := min(end, (w+1)*mapWindow) - off
			k, ok := byWin[w]
			if !ok {
				k = len(units)
				byWin[w] = k
				units = append(units, mapUnit{lo: off, hi: off + n})
			}
			u := &units[k]
			u.lo, u.hi = min(u.lo, off), max(u.hi, off+n)
			u.segs = append(u.segs, len(segs))
			segs = append(segs, mapSeg{i: i, off: off, n: n})
			off += n
		}
	}
	slices.SortFunc(units, func(a, b mapUnit) int { return cmp.Compare(a.lo, b.lo) })
	return segs, units
}

// copyWindow maps unit u's window, copies its segments and unmaps it. When
// the kernel refuses the mapping (an address-space limit), the segments are
// read with pread instead.
func copyWindow(f *files.File, ch []Chunk, segs []mapSeg, u *mapUnit) {
	base := u.lo &^ (pageSize - 1)
	raw, src, ok := mapFileFn(f.FD, base, u.hi-base)
	if !ok {
		for _, k := range u.segs {
			s := &segs[k]
			e := &ch[s.i]
			s.fail = preadFull(f, e, e.Dst[s.off-e.Off:s.off-e.Off+s.n], s.off)
		}
		return
	}
	defer unmap(raw)
	copySegs(f, ch, segs, u.segs, src, base)
}

// preadFull reads dst at off of f (chunk e's bytes): a short read is the
// file shrinking (source.Shrunk of the chunk), a failed one its errno.
func preadFull(f *files.File, e *Chunk, dst []byte, off uint64) error {
	for len(dst) > 0 {
		n, err := unix.Pread(f.FD, dst, int64(off))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return errs.FromErrno("read", f.Path, int64(off), err)
		case n == 0:
			return source.Shrunk(f, e.Off, e.Size)
		}
		dst, off = dst[n:], off+uint64(n)
	}
	return nil
}

// copySegs copies segs[which] out of the mapping src (file offset base at src[0]).
// A fault on the mapping (the file shrank under the load, or the kernel
// could not read a page) retries the segment with pread, which then reports
// what the pread path would (source.Shrunk of the whole chunk, or the
// errno); a fault on a destination is a bad caller address (errs.FromPanic's
// IO "bad destination address"). The other segments are still copied.
func copySegs(f *files.File, ch []Chunk, segs []mapSeg, which []int, src []byte, base uint64) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	for _, k := range which {
		s := &segs[k]
		e := &ch[s.i]
		dst := e.Dst[s.off-e.Off : s.off-e.Off+s.n]
		s.fail = copySeg(dst, src[s.off-base:s.off-base+s.n], func(p any) error {
			if onMapping(p, src) {
				// SIGBUS: past the file's end, or a read error of the page
				// the fault needed; pread tells which (EOF or its errno).
				return preadFull(f, e, dst, s.off)
			}
			return errs.FromPanic("load_chunks", p)
		})
	}
}

// copySeg copies src into dst; a panic (a fault, with SetPanicOnFault) is
// recovered into fault's error.
func copySeg(dst, src []byte, fault func(any) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fault(p)
		}
	}()
	copy(dst, src)
	return nil
}

// onMapping reports whether the fault p is at an address of the mapping src.
func onMapping(p any, src []byte) bool {
	re, ok := p.(runtime.Error)
	if !ok {
		return false
	}
	a, ok := re.(interface{ Addr() uintptr })
	if !ok {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	return a.Addr() >= lo && a.Addr() < lo+uintptr(len(src))
}
