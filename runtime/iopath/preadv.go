//go:build linux

package iopath

import (
	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
)

// MaxIOV is the most buffers one preadv(2) accepts (UIO_MAXIOV on Linux);
// callers that want one syscall per vectored read keep batches at or under it.
const MaxIOV = 1024

// PreadvFull reads the contiguous file range that starts at off and is as long
// as the buffers together, into bufs in order (bufs[0] gets the first bytes),
// with preadv(2). It returns how many bytes it read: fewer than the total only
// at end of file.
//
// It is PreadFull for several destinations: it retries EINTR (EINTRRetries++),
// continues after short counts from where the kernel stopped, inside a buffer
// if need be (ShortReadRetries++), passes at most MaxIOV buffers and 1 GiB per
// syscall, and honours the fault hook (an injected EINTR before every Nth
// call, every call clipped to ShortMax bytes). Empty buffers are skipped.
// Errors are errs.FromErrno("preadv", path, offset of the failing call, errno);
// a destination that is not writable memory gives EFAULT, an IO error.
// Buffered descriptors only: O_DIRECT would need every buffer aligned.
// Safe for concurrent use; blocks in preadv.
func (r *Reader) PreadvFull(fd int, bufs [][]byte, off int64, path string) (int, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if err := checkRange("preadv", path, off, total); err != nil {
		return 0, err
	}
	every := uint64(r.fault.EINTREvery)
	injected := false
	iov := make([][]byte, 0, min(len(bufs), MaxIOV))
	done := 0
	cur, skip := 0, 0 // bufs[cur][skip:] is the next byte to fill
	for done < total {
		// The batch for this call: buffers from the cursor, at most MaxIOV
		// of them and 1 GiB; the fault hook then clips it to ShortMax (a
		// clipped count is a short read, as in PreadFull).
		iov = batch(iov[:0], bufs, cur, skip, maxIO)
		asked := 0
		for _, b := range iov {
			asked += len(b)
		}
		if clip := r.fault.ShortMax; clip > 0 && asked > clip {
			iov = batch(iov[:0], bufs, cur, skip, clip)
		}
		if every > 0 && !injected && r.faultCalls.Add(1)%every == 0 {
			injected = true // the retry below must reach the real preadv
			r.st.EINTRRetries.Add(1)
			continue
		}
		injected = false
		n, err := unix.Preadv(fd, iov, off+int64(done))
		if err == unix.EINTR {
			r.st.EINTRRetries.Add(1)
			continue
		}
		if err != nil {
			return done, errs.FromErrno("preadv", path, off+int64(done), err)
		}
		if n == 0 {
			return done, nil
		}
		done += n
		cur, skip = advance(bufs, cur, skip, n)
		if n < asked && done < total {
			r.st.ShortReadRetries.Add(1)
		}
	}
	return done, nil
}

// batch appends to iov the non-empty buffers from the cursor (buffer cur,
// byte skip) on, at most MaxIOV of them and limit bytes in all.
func batch(iov [][]byte, bufs [][]byte, cur, skip, limit int) [][]byte {
	got := 0
	for i, s := cur, skip; i < len(bufs) && len(iov) < MaxIOV && got < limit; i, s = i+1, 0 {
		b := bufs[i][s:]
		if len(b) == 0 {
			continue
		}
		b = b[:min(len(b), limit-got)]
		iov = append(iov, b)
		got += len(b)
	}
	return iov
}

// advance moves the cursor (buffer cur, byte skip within it) n bytes on.
func advance(bufs [][]byte, cur, skip, n int) (int, int) {
	for n > 0 && cur < len(bufs) {
		left := len(bufs[cur]) - skip
		if n < left {
			return cur, skip + n
		}
		n -= left
		cur, skip = cur+1, 0
	}
	for cur < len(bufs) && skip == len(bufs[cur]) {
		cur, skip = cur+1, 0
	}
	return cur, skip
}

// ReadBufferedV reads the contiguous range of f that starts at off into bufs
// in order, through the page cache, with PreadvFull on f's buffered
// descriptor, and returns the bytes read (fewer only at end of file). It is
// the vectored ReadBuffered for a run of adjacent chunks: the bytes go
// straight into each caller buffer, with no staging buffer and one syscall
// for up to MaxIOV buffers. It does not split into parallel tasks: callers
// keep each run within one task. Counts StorageBytes. Safe for concurrent use.
func (r *Reader) ReadBufferedV(f *files.File, bufs [][]byte, off int64) (int, error) {
	n, err := r.PreadvFull(f.FD, bufs, off, f.Path)
	r.st.StorageBytes.Add(uint64(n))
	return n, err
}
