//go:build cgo

package gpu

import (
	"sync"
	"time"
	"unsafe"
)

// Stager moves file bytes to device memory through pinned host buffers.
//
// It owns Lanes lanes; a lane is Depth page-aligned buffers of ChunkSize
// bytes (anonymous mappings registered with cuMemHostRegister, portable to
// every context) plus, per device it has served, one non-blocking stream and
// one event per buffer. The registration, streams and events belong to the
// device's primary context, which this package retains for the life of the
// process, never to the context that owns a destination (under unified
// addressing a copy issued in the primary context reaches memory of any
// context on the device): a caller that destroys a context it made with
// cuCtxCreate leaves the Stager's state intact. A ReadToDevice call takes a lane for its
// whole duration; calls beyond Lanes wait for one. Lanes allocate their
// buffers on first use, so an idle Stager pins nothing.
//
// Create one per engine context with NewStager; all methods are safe for
// concurrent use.
type Stager struct {
	opts      StagerOptions
	lanes     chan *lane
	done      chan struct{}
	closeOnce sync.Once
}

type lane struct {
	bufs    []unsafe.Pointer    // Depth buffers of ChunkSize bytes; nil until first use
	regCtx  ctxHandle           // primary context that registered bufs (for unregistering)
	streams map[int]*laneStream // by device, in its primary context
	// broken: a synchronisation failed, so a copy may still read the
	// buffers; the lane is dropped (its memory is leaked, never reused).
	broken bool
}

type laneStream struct {
	s  streamHandle
	ev []eventHandle
}

// NewStager makes a Stager. It fails with KindUnavailable when CUDA is not
// usable and KindInvalidArg for bad options; it allocates nothing.
func NewStager(opts StagerOptions) (*Stager, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := Init(); err != nil {
		return nil, err
	}
	s := &Stager{opts: o, lanes: make(chan *lane, o.Lanes), done: make(chan struct{})}
	for i := 0; i < o.Lanes; i++ {
		s.lanes <- newLane()
	}
	return s, nil
}

func newLane() *lane { return &lane{streams: map[int]*laneStream{}} }

// Options returns the Stager's options with defaults filled in.
func (s *Stager) Options() StagerOptions { return s.opts }

func (s *Stager) acquire() (*lane, error) {
	select {
	case <-s.done:
		return nil, &Error{Kind: KindClosed, Op: "Stager", Detail: "closed"}
	default:
	}
	select {
	case l := <-s.lanes:
		return l, nil
	case <-s.done:
		return nil, &Error{Kind: KindClosed, Op: "Stager", Detail: "closed"}
	}
}

func (s *Stager) release(l *lane) {
	if l.broken {
		l = newLane()
	}
	s.lanes <- l
}

// ReadToDevice fills device memory [dst, dst+size) with the file bytes at
// [fileOff, fileOff+size), calling read to fill one pinned buffer at a time
// and copying each buffer to the device asynchronously, so that reading
// chunk i+1 overlaps the copy of chunk i. Before a buffer is refilled, only
// the copy that last used it is waited for (its event); the stream is
// synchronised once, at the end. When ReadToDevice returns, every byte is on
// the device, or an error says why; on an error the device range holds an
// unspecified mix of old and new bytes, and no copy is still running.
//
// Chunks: each read call gets at most ChunkSize bytes, and every chunk after
// the first starts at a file offset that is a multiple of Alignment (the
// first is shortened by fileOff % Alignment), so an O_DIRECT reader can fill
// all of them directly when fileOff is aligned (see ReadFunc).
//
// Errors: read's error, unchanged; KindInvalidPointer when dst is not device
// memory or [dst, dst+size) runs past its allocation; KindNoMemory when the
// staging buffers cannot be pinned; KindCUDA when a copy or a sync fails;
// KindClosed after Close. size 0 returns nil at once. The call runs on one
// locked OS thread with the primary context of dst's device current (the
// thread's own context is restored afterwards); read runs on that thread.
func (s *Stager) ReadToDevice(dst uintptr, size uint64, read ReadFunc, fileOff uint64) error {
	if size == 0 {
		return nil
	}
	if read == nil {
		return &Error{Kind: KindInvalidArg, Op: "ReadToDevice", Detail: "nil read function"}
	}
	if fileOff+size < fileOff {
		return &Error{Kind: KindInvalidArg, Op: "ReadToDevice", Detail: "file range overflows"}
	}
	info, err := InspectPointer(dst, size)
	if err != nil {
		return err
	}
	ctx, err := primaryContext(info.Device)
	if err != nil {
		return err
	}
	l, err := s.acquire()
	if err != nil {
		return err
	}
	defer s.release(l)
	start := time.Now()
	var readNs, waitNs time.Duration
	err = withContext(ctx, func() error {
		return s.pipeline(l, info.Device, ctx, dst, size, read, fileOff, &readNs, &waitNs)
	})
	if st := s.opts.Stats; st != nil {
		st.stagedReadNanos.Add(uint64(readNs))
		st.stagedWaitNanos.Add(uint64(waitNs))
		if err == nil {
			st.stagedRequests.Add(1)
			st.stagedBytes.Add(size)
			st.h2dBytes.Add(size)
			st.h2dNanos.Add(uint64(time.Since(start)))
		}
	}
	return err
}

// pipeline runs with ctx, the primary context of device dev, current on a
// locked thread.
func (s *Stager) pipeline(l *lane, dev int, ctx ctxHandle, dst uintptr, size uint64, read ReadFunc, fileOff uint64,
	readNs, waitNs *time.Duration) (err error) {
	ls, err := s.prepare(l, dev, ctx)
	if err != nil {
		return err
	}
	chunk := s.opts.ChunkSize
	depth := len(l.bufs)
	var pending uint64 // bit k: a copy from buffer k may still be running
	defer func() {
		if pending == 0 {
			return
		}
		// Also on an error or a panic in read: no copy may outlive the call.
		t := time.Now()
		r := streamSync(ls.s)
		*waitNs += time.Since(t)
		if r != cudaSuccess {
			l.broken = true
			if err == nil {
				err = cudaError(KindCUDA, "cuStreamSynchronize", r)
			}
		}
	}()
	for i, off := 0, uint64(0); off < size; i++ {
		k := i % depth
		if pending&(1<<k) != 0 {
			t := time.Now()
			r := eventSync(ls.ev[k])
			*waitNs += time.Since(t)
			if r != cudaSuccess {
				l.broken = true
				return cudaError(KindCUDA, "cuEventSynchronize", r)
			}
			pending &^= 1 << k
		}
		n := min(size-off, chunk-(fileOff+off)%Alignment)
		buf := unsafe.Slice((*byte)(l.bufs[k]), chunk)[:n]
		t := time.Now()
		err := read(buf, fileOff+off)
		*readNs += time.Since(t)
		if err != nil {
			return err
		}
		if r := htodAsync(dst+uintptr(off), l.bufs[k], n, ls.s); r != cudaSuccess {
			return cudaError(KindCUDA, "cuMemcpyHtoDAsync", r)
		}
		pending |= 1 << k
		if r := eventRecord(ls.ev[k], ls.s); r != cudaSuccess {
			return cudaError(KindCUDA, "cuEventRecord", r)
		}
		off += n
	}
	return nil
}

// prepare gives the lane its pinned buffers (first use) and a stream and
// events for device dev (first use on dev). ctx, dev's primary context, is
// current.
func (s *Stager) prepare(l *lane, dev int, ctx ctxHandle) (*laneStream, error) {
	if l.bufs == nil {
		bufs := make([]unsafe.Pointer, 0, s.opts.Depth)
		for k := 0; k < s.opts.Depth; k++ {
			p, r := pinnedAlloc(s.opts.ChunkSize)
			if r != cudaSuccess {
				for _, b := range bufs {
					_ = pinnedFree(b, s.opts.ChunkSize)
				}
				if r == -1 {
					return nil, &Error{Kind: KindNoMemory, Op: "mmap", Detail: "cannot map a staging buffer"}
				}
				return nil, cudaError(KindNoMemory, "cuMemHostRegister", r)
			}
			bufs = append(bufs, p)
		}
		l.bufs, l.regCtx = bufs, ctx
	}
	if ls := l.streams[dev]; ls != nil {
		return ls, nil
	}
	st, r := streamCreate()
	if r != cudaSuccess {
		return nil, cudaError(KindCUDA, "cuStreamCreate", r)
	}
	ls := &laneStream{s: st}
	for k := 0; k < s.opts.Depth; k++ {
		e, r := eventCreate()
		if r != cudaSuccess {
			for _, e := range ls.ev {
				_ = eventDestroy(e)
			}
			_ = streamDestroy(st)
			return nil, cudaError(KindCUDA, "cuEventCreate", r)
		}
		ls.ev = append(ls.ev, e)
	}
	l.streams[dev] = ls
	return ls, nil
}

// CopyToDevice copies src (host memory of any kind: a DRAM-cache block, Go
// memory) to device memory at dst: one asynchronous copy on a non-blocking
// stream of the primary context of dst's device and that stream's sync,
// with no extra host copy
// (the driver stages pageable memory itself). When it returns the bytes are
// on the device. Errors: KindInvalidPointer, KindCUDA, KindClosed. An empty
// src returns nil. Counted as CopyRequests/CopyBytes and in H2DBytes.
func (s *Stager) CopyToDevice(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	select {
	case <-s.done:
		return &Error{Kind: KindClosed, Op: "Stager", Detail: "closed"}
	default:
	}
	info, err := InspectPointer(dst, uint64(len(src)))
	if err != nil {
		return err
	}
	ctx, err := primaryContext(info.Device)
	if err != nil {
		return err
	}
	start := time.Now()
	err = withContext(ctx, func() error { return copyHostToDevice(info.Device, dst, src) })
	if st := s.opts.Stats; st != nil && err == nil {
		st.copyRequests.Add(1)
		st.copyBytes.Add(uint64(len(src)))
		st.h2dBytes.Add(uint64(len(src)))
		st.h2dNanos.Add(uint64(time.Since(start)))
	}
	return err
}

// Close waits for running calls to finish, then destroys the streams and
// events and unpins and unmaps the buffers. Later calls fail with
// KindClosed; a second Close returns nil. Not for process-exit paths: at
// exit, simply do not call it.
func (s *Stager) Close() error {
	var first error
	s.closeOnce.Do(func() {
		close(s.done)
		for i := 0; i < s.opts.Lanes; i++ {
			l := <-s.lanes
			if err := s.free(l); err != nil && first == nil {
				first = err
			}
		}
	})
	return first
}

func (s *Stager) free(l *lane) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for dev, ls := range l.streams {
		ctx, err := primaryContext(dev)
		if err != nil {
			keep(err)
			continue
		}
		keep(withContext(ctx, func() error {
			var err error
			for _, e := range ls.ev {
				if r := eventDestroy(e); r != cudaSuccess && err == nil {
					err = cudaError(KindCUDA, "cuEventDestroy", r)
				}
			}
			if r := streamDestroy(ls.s); r != cudaSuccess && err == nil {
				err = cudaError(KindCUDA, "cuStreamDestroy", r)
			}
			return err
		}))
	}
	if l.bufs != nil {
		keep(withContext(l.regCtx, func() error {
			var err error
			for _, b := range l.bufs {
				if r := pinnedFree(b, s.opts.ChunkSize); r != cudaSuccess && err == nil {
					err = cudaError(KindCUDA, "cuMemHostUnregister", r)
				}
			}
			return err
		}))
	}
	l.bufs, l.streams = nil, nil
	return first
}
