//go:build linux

// Package iopath moves file bytes into caller memory: pread loops that survive
// EINTR and short counts, O_DIRECT with aligned bounce buffers, and a bounded
// task runner that splits large reads across goroutines.
//
// Everything here reads into memory the caller owns (often C, numpy or torch
// memory) and writes only the bytes that were asked for and that the file
// holds. All writes have finished when a call returns.
package iopath

import (
	"errors"
	"math"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/logx"
	"github.com/memtier/memtier/runtime/mem"
	"github.com/memtier/memtier/runtime/stats"
)

// maxIO caps one pread. Linux moves at most 0x7ffff000 bytes per read call
// and returns a short count beyond that; 1 GiB keeps every syscall well under
// the limit and aligned to any O_DIRECT block size.
const maxIO = 1 << 30

// bounceSlack is what a bounce buffer holds beyond TaskBytes: an unaligned
// task can start up to one block before and end up to one block after its
// range, and 4096 covers every common offset alignment.
const bounceSlack = 2 * 4096

// Reader runs reads for one engine context: its options, counters, fault hook
// and bounce-buffer pool. All methods are safe for concurrent use.
type Reader struct {
	st        *stats.Counters
	fault     config.Fault
	taskBytes int64
	par       int // IOThreads: goroutines per large read, the caller included

	faultCalls atomic.Uint64 // preads seen by the fault hook

	bounce *mem.Arena
	sem    chan struct{} // one token per bounce buffer: Get waits instead of failing

	panicNext atomic.Bool
}

// New returns a Reader configured from o: IOThreads (parallel tasks per read,
// < 1 counts as 1), TaskBytes (task size in bytes; 0 means 4 MiB, capped at
// 1 GiB), MaxInflightMiB (bounce memory in MiB; 0 means 64, at least one
// buffer) and Fault (the MEMTIER_FAULT hook). Counters go to st (nil: a
// private set). A Fault spec that does not parse is an errs.Format error.
// Bounce memory is mapped on first use, not here.
func New(o config.Options, st *stats.Counters) (*Reader, error) {
	f, err := config.ParseFault(o.Fault)
	if err != nil {
		return nil, errs.New(errs.Format, "config", "MEMTIER_FAULT=%q: %v", o.Fault, err)
	}
	if st == nil {
		st = new(stats.Counters)
	}
	task := int64(4 << 20)
	if o.TaskBytes > 0 {
		task = int64(min(o.TaskBytes, maxIO))
	}
	inflight := int64(64)
	if o.MaxInflightMiB > 0 {
		inflight = int64(o.MaxInflightMiB)
	}
	bufSize := task + bounceSlack
	nbufs := max(1, int(inflight<<20/bufSize))
	raiseTokenLimit(o.IOThreads)
	return &Reader{
		st:        st,
		fault:     f,
		taskBytes: task,
		par:       max(1, o.IOThreads),
		bounce:    mem.NewArena(int(bufSize), nbufs),
		sem:       make(chan struct{}, nbufs),
	}, nil
}

// Close unmaps the bounce buffers. Callers must have finished every read on
// this Reader; later direct reads that need a bounce buffer fail with
// errs.Closed.
func (r *Reader) Close() { r.bounce.Close() }

// PanicNextTask is a test hook: the next task that a helper goroutine of Run
// executes panics, to exercise the recovery path. Safe for concurrent use.
func (r *Reader) PanicNextTask() { r.panicNext.Store(true) }

func checkRange(op, path string, off int64, n int) error {
	if off < 0 || off > math.MaxInt64-int64(n)-maxIO {
		return errs.At(errs.InvalidArg, op, path, off, "bad range of %d bytes", n)
	}
	return nil
}

// PreadFull reads len(dst) bytes of fd at off into dst and returns how many it
// read: fewer than len(dst) only at end of file.
//
// It retries EINTR (EINTRRetries++), keeps going after short counts
// (ShortReadRetries++ when a non-zero short count is followed by another
// pread), and caps each syscall at 1 GiB. For a direct descriptor (direct =
// true, offAlign = its offset alignment in bytes) a count that is not a
// multiple of offAlign can only be the end of the file, so it stops there
// instead of issuing an unaligned pread that would fail with EINVAL. Errors
// are errs.FromErrno("pread", path, offset of the failing call, errno).
//
// The fault hook (config.Fault) injects one EINTR before every Nth pread and
// clips every pread to ShortMax bytes, rounded down to offAlign (at least
// offAlign) for direct descriptors, whose continuations must stay aligned.
// Safe for concurrent use; blocks in pread.
func (r *Reader) PreadFull(fd int, dst []byte, off int64, path string, direct bool, offAlign int) (int, error) {
	if err := checkRange("pread", path, off, len(dst)); err != nil {
		return 0, err
	}
	if direct && offAlign < 1 {
		offAlign = 1
	}
	clip := r.fault.ShortMax
	if direct && clip > 0 {
		clip = max(clip/offAlign*offAlign, offAlign)
	}
	every := uint64(r.fault.EINTREvery)
	injected := false
	done := 0
	for done < len(dst) {
		asked := min(len(dst)-done, maxIO)
		want := asked
		if clip > 0 && want > clip {
			want = clip
		}
		if every > 0 && !injected && r.faultCalls.Add(1)%every == 0 {
			injected = true // the retry below must reach the real pread
			r.st.EINTRRetries.Add(1)
			continue
		}
		injected = false
		n, err := unix.Pread(fd, dst[done:done+want], off+int64(done))
		if err == unix.EINTR {
			r.st.EINTRRetries.Add(1)
			continue
		}
		if err != nil {
			return done, errs.FromErrno("pread", path, off+int64(done), err)
		}
		if n == 0 {
			return done, nil
		}
		done += n
		if n < asked && done < len(dst) {
			if direct && n%offAlign != 0 {
				return done, nil
			}
			r.st.ShortReadRetries.Add(1)
		}
	}
	return done, nil
}

// ReadBuffered reads len(dst) bytes of f at off through the page cache and
// returns how many it read: fewer only at end of file (a range past EOF gives
// 0 and no error). Reads longer than one task are split at multiples of
// TaskBytes in file offsets and run in parallel by Run with IOThreads workers;
// reads of at least StreamMinBytes (and two tasks) run as readahead streams
// instead, one descriptor per worker (streams.go). Counts StorageBytes; the
// request-level BufferedBytes is the engine's. Safe for concurrent use;
// blocks in pread.
func (r *Reader) ReadBuffered(f *files.File, dst []byte, off int64) (int, error) {
	if err := checkRange("read", f.Path, off, len(dst)); err != nil {
		return 0, err
	}
	if r.streams(int64(len(dst))) {
		n, err := r.readStreams(f, dst, off)
		r.st.StorageBytes.Add(uint64(n))
		return n, err
	}
	p := splitTasks(off, int64(len(dst)), r.taskBytes)
	var n int
	var err error
	if p.count <= 1 {
		// The common small read: no closure, no per-task bookkeeping.
		n, err = r.PreadFull(f.FD, dst, off, f.Path, false, 0)
	} else {
		n, err = r.runTasks(p, dst, func(d []byte, o int64) (int, error) {
			return r.PreadFull(f.FD, d, o, f.Path, false, 0)
		})
	}
	r.st.StorageBytes.Add(uint64(n))
	return n, err
}

// runTasks runs read over every task of p in parallel and returns the bytes
// read as one contiguous prefix of dst: a task short at EOF ends the count,
// even if a later task found bytes of a file that grew meanwhile.
func (r *Reader) runTasks(p taskPlan, dst []byte, read func(d []byte, o int64) (int, error)) (int, error) {
	got := make([]int, p.count)
	err := r.Run(p.count, r.par, func(i int) error {
		s, e := p.task(i)
		n, err := read(dst[s-p.off:e-p.off], s)
		got[i] = n
		return err
	})
	total := 0
	for i, n := range got {
		total += n
		if s, e := p.task(i); int64(n) < e-s {
			break
		}
	}
	return total, err
}

// ReadDirect reads len(dst) bytes of f at off with O_DIRECT and returns the
// bytes read (fewer only at end of file) and whether it fell back to the page
// cache.
//
// The caller never sees alignment rules. Each task (split as in ReadBuffered)
// whose file offset, length and destination address are aligned (offAlign and
// memAlign from File.Direct), and which ends before the file's last partial
// block, is read straight into dst. Any other task reads the aligned window
// that covers it into a pooled, page-aligned bounce buffer and copies out
// only the wanted bytes the file holds (BounceBytes += copied); bytes of dst
// past end of file are never written. Bounce buffers are bounded by
// MaxInflightMiB: a task waits for one rather than failing.
//
// If the file system refuses O_DIRECT (File.Direct says refused, or a pread
// fails with EINVAL, which is then remembered with File.MarkDirectRefused),
// the read is redone with ReadBuffered and DirectFallbacks is counted once for
// the call; with required = true it fails with errs.DirectIO naming the path
// instead. Counts StorageBytes. Safe for concurrent use; blocks in pread.
func (r *Reader) ReadDirect(f *files.File, dst []byte, off int64, required bool) (int, bool, error) {
	if err := checkRange("read", f.Path, off, len(dst)); err != nil {
		return 0, false, err
	}
	if len(dst) == 0 {
		return 0, false, nil
	}
	fd, memAlign, offAlign, refused, err := f.Direct()
	if err != nil {
		return 0, false, err
	}
	if refused {
		return r.fallback(f, dst, off, required, "refused at open")
	}
	a := int64(offAlign)
	// Straight reads stop at the last whole block: the kernel transfers whole
	// blocks, so a direct read of the tail could write dst past end of file.
	straightEnd := alignDown(f.Ident.Size, a)
	read := func(d []byte, o int64) (int, error) {
		return r.directSplit(fd, d, o, f.Path, memAlign, offAlign, straightEnd)
	}
	p := splitTasks(off, int64(len(dst)), r.taskBytes)
	var n int
	if p.count <= 1 {
		n, err = read(dst, off)
	} else {
		n, err = r.runTasks(p, dst, read)
	}
	if errors.Is(err, unix.EINVAL) {
		f.MarkDirectRefused()
		return r.fallback(f, dst, off, required, "EINVAL from an aligned pread")
	}
	r.st.StorageBytes.Add(uint64(n))
	return n, false, err
}

// directSplit reads [o, o+len(d)) of a direct descriptor. The aligned middle
// goes straight into d when d sits at the file's alignment (its address and
// the file offset agree modulo the memory alignment: a caller that places its
// buffer like that, as the Python safetensors loader does, gets no bounce
// copy for any but the unaligned head and tail); the rest, or everything when
// d is placed otherwise, goes through a bounce buffer.
func (r *Reader) directSplit(fd int, d []byte, o int64, path string, memAlign, offAlign int, straightEnd int64) (int, error) {
	a := int64(offAlign)
	e := o + int64(len(d))
	hs, he := alignUp(o, a), min(alignDown(e, a), straightEnd)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	if he <= hs || (addr+uintptr(hs-o))%uintptr(memAlign) != 0 {
		return r.viaBounce(fd, d, o, path, memAlign, offAlign)
	}
	done := 0
	for _, part := range [3][2]int64{{o, hs}, {hs, he}, {he, e}} {
		if part[1] == part[0] {
			continue
		}
		seg := d[part[0]-o : part[1]-o]
		var n int
		var err error
		if part[0] == hs {
			n, err = r.PreadFull(fd, seg, part[0], path, true, offAlign)
		} else {
			n, err = r.viaBounce(fd, seg, part[0], path, memAlign, offAlign)
		}
		done += n
		if err != nil || n < len(seg) {
			return done, err
		}
	}
	return done, nil
}

func (r *Reader) fallback(f *files.File, dst []byte, off int64, required bool, why string) (int, bool, error) {
	if required {
		return 0, false, errs.At(errs.DirectIO, "read", f.Path, off,
			"O_DIRECT is required but the file system does not support it (%s)", why)
	}
	r.st.DirectFallbacks.Add(1)
	logx.Warnf("direct.fallback", "%s: the file system refused O_DIRECT (%s): reading it buffered", f.Path, why)
	n, err := r.ReadBuffered(f, dst, off)
	return n, true, err
}

// viaBounce reads [o, o+len(d)) of a direct descriptor through a bounce
// buffer: aligned windows in, wanted bytes out. A window larger than the
// buffer (offset alignment above 4 KiB) is read in several pieces.
func (r *Reader) viaBounce(fd int, d []byte, o int64, path string, memAlign, offAlign int) (int, error) {
	r.sem <- struct{}{}
	defer func() { <-r.sem }()
	buf := r.bounce.Get()
	if buf == nil {
		return 0, errs.At(errs.Closed, "read", path, o, "no bounce buffer: reader closed or mmap failed")
	}
	defer r.bounce.Put(buf)
	a := int64(offAlign)
	room := alignDown(int64(len(buf)), a)
	if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%uintptr(memAlign) != 0 || room < 2*a {
		return 0, errs.At(errs.Unsupported, "read", path, o,
			"direct I/O alignment (memory %d, offset %d) exceeds the bounce buffer's", memAlign, offAlign)
	}
	end := o + int64(len(d))
	pos := o
	for pos < end {
		ws, we := alignWindow(pos, end-pos, a)
		we = min(we, ws+room)
		n, err := r.PreadFull(fd, buf[:we-ws], ws, path, true, offAlign)
		if err != nil {
			return int(pos - o), err
		}
		stop := min(end, we, ws+int64(n)) // ws+n < we: the file ends inside the window
		if stop <= pos {
			break
		}
		copy(d[pos-o:stop-o], buf[pos-ws:stop-ws])
		r.st.BounceBytes.Add(uint64(stop - pos))
		pos = stop
		if ws+int64(n) < we {
			break
		}
	}
	return int(pos - o), nil
}
