package diskcache

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/remote"
)

// Seg is one destination of Source.ReadSegs: len(Dst) bytes of the object
// at Off land in Dst.
type Seg struct {
	Off uint64
	Dst []byte
}

// ReadSegs fills every seg's Dst with the bytes of o at its Off from the
// directory alone and reports whether it did. segs must be sorted by Off,
// non-empty and non-overlapping, inside o. Per entry, the pieces that
// overlap any seg are read with one preadv per run of up to readChunk
// bytes, straight into the segs' destinations (the bytes between segs in
// a piece, a tar header, into a scratch buffer: the checksum covers them),
// and checked right after, while they are in the CPU cache. A dataset
// batch of neighbouring samples so costs one read and one checksum pass
// per byte, where a read per sample reads the pieces it shares with its
// neighbours whole for each of them and copies its part out.
//
// It is false, with Dst partly written, when a block is not on disk (or
// still in the write-behind queue), when an entry is bad (counted, deleted:
// a read of those bytes through ReadAt fetches them again, never serving
// them), when o cannot be cached and when segs break the rules above; the
// caller then reads the segs through ReadAt. Blocks served before the one
// that failed stay counted in Stats. Counted like ReadAt: a hit block per
// entry, the segs' bytes as hit bytes. Safe for concurrent use.
func (s *Source) ReadSegs(o *remote.Object, segs []Seg) bool {
	if len(segs) == 0 || s.c.closed.Load() {
		return len(segs) == 0
	}
	k, ok := s.KeyOf(o)
	if !ok {
		return false
	}
	size := o.Size()
	var prev uint64
	for i, sg := range segs {
		n := uint64(len(sg.Dst))
		if n == 0 || sg.Off > size || n > size-sg.Off || (i > 0 && sg.Off < prev) {
			return false
		}
		prev = sg.Off + n
	}
	B := uint64(s.c.block)
	var parts []part
	j := 0 // first seg that may reach block b
	for b := segs[0].Off / B; b <= (prev-1)/B; b++ {
		lo, hi := s.span(b, size)
		parts = parts[:0]
		var bytes uint64
		for i := j; i < len(segs) && segs[i].Off < hi; i++ {
			sg := segs[i]
			end := sg.Off + uint64(len(sg.Dst))
			if end <= lo {
				j = i + 1
				continue
			}
			a, z := max(sg.Off, lo), min(end, hi)
			parts = append(parts, part{from: int(a - lo), dst: sg.Dst[a-sg.Off : z-sg.Off]})
			bytes += z - a
		}
		if len(parts) == 0 {
			continue // a gap between segs longer than a block
		}
		if !s.c.getParts(&k, b, int(hi-lo), parts) {
			return false
		}
		s.c.st.hitBlocks.Add(1)
		s.c.st.hitBytes.Add(bytes)
	}
	return true
}

// part is one destination inside an entry's payload: payload bytes
// [from, from+len(dst)).
type part struct {
	from int
	dst  []byte
}

// getParts is get for several sorted, non-overlapping ranges of one
// entry's payload (readParts), with get's handling of a missing, bad or
// old entry; an entry still in the write-behind queue is a miss here.
func (c *Cache) getParts(k *Key, idx uint64, blockLen int, parts []part) bool {
	name := k.fileName(idx)
	e, ok := c.acquireEntry(name, k, idx, blockLen)
	if !ok {
		return false
	}
	defer c.fds.release(e)
	why := e.h.mismatch(k, idx*uint64(c.block), blockLen)
	if last := parts[len(parts)-1]; why == "" && (parts[0].from < 0 || last.from+len(last.dst) > blockLen) {
		why = fmt.Sprintf("range [%d, %d) outside the %d-byte payload", parts[0].from, last.from+len(last.dst), blockLen)
	}
	if why == "" {
		why = c.readPartsTrust(e, parts)
	}
	return c.endRead(name, e, why)
}

// maxIOV bounds the buffers of one preadv (the kernel's IOV_MAX is 1024).
const maxIOV = 1024

// readParts copies the payload bytes of every part of h (payload at base
// in f) into its dst, reading and checking only the pieces that overlap
// the parts, and returns why it could not ("" when it did), as readPieces.
// Consecutive needed pieces are read together, up to readChunk bytes per
// chunk (preadv, maxIOV buffers per call), the parts' bytes straight into their dst and
// the rest of each piece into scratch (so a piece two parts share is read
// once), then each piece's checksum is computed over its buffers while they
// are still in the CPU cache.
func readParts(f *os.File, base int64, h *header, parts []part, read interface{ Add(uint64) uint64 }) string {
	const P = pieceBytes
	plen := int(h.payloadLen)
	fd := int(f.Fd())
	sp := partScratch.Get().(*partBufs)
	defer func() {
		clear(sp.iov[:cap(sp.iov)]) // the pool must not keep the caller's buffers alive
		partScratch.Put(sp)
	}()
	k, done := 0, 0 // parts[k]: the first part not wholly read; done: the end of the last chunk read
	for k < len(parts) {
		// The chunk starts at the piece of parts[k]'s first byte not read
		// yet and runs over consecutive needed pieces.
		cs := max(done, parts[k].from/P*P)
		ce, iov, scratch := cs, sp.iov[:0], sp.scratch[:0]
		at := k // parts[at] is the next one to place in the chunk
		for ce < plen && ce-cs < readChunk {
			pe := min(ce+P, plen)
			if at == len(parts) || parts[at].from >= pe {
				break // the piece [ce, pe) is not needed
			}
			// Buffers for [ce, pe): parts' bytes and scratch between them.
			pos := ce
			for at < len(parts) && parts[at].from < pe {
				p := parts[at]
				a, z := max(p.from, pos), min(p.from+len(p.dst), pe)
				if a > pos {
					iov, scratch = appendScratch(iov, scratch, a-pos)
				}
				if z > a {
					iov = append(iov, p.dst[a-p.from:z-p.from])
				}
				pos = max(pos, z)
				if p.from+len(p.dst) > pe {
					break // continues in the next piece
				}
				at++
			}
			if pos < pe {
				iov, scratch = appendScratch(iov, scratch, pe-pos)
			}
			ce = pe
		}
		if ce == cs {
			return "no piece to read" // not reached: parts[k] needs its piece
		}
		n, err := preadvAll(fd, iov, base+int64(cs))
		read.Add(uint64(n))
		if err != nil || n != ce-cs {
			return "truncated payload"
		}
		if why := checkPieces(h, iov, cs, ce); why != "" {
			return why
		}
		sp.iov, done = iov[:0], ce
		for k < len(parts) && parts[k].from+len(parts[k].dst) <= ce {
			k++
		}
	}
	return ""
}

// appendScratch adds a buffer of n bytes from scratch (which has room:
// a chunk's scratch bytes are fewer than its readChunk bytes) to iov.
func appendScratch(iov [][]byte, scratch []byte, n int) ([][]byte, []byte) {
	l := len(scratch)
	scratch = scratch[:l+n]
	return append(iov, scratch[l:l+n:l+n]), scratch
}

// checkPieces checks the checksum of each piece of [cs, ce) (whole pieces,
// read into iov in order) against h.
func checkPieces(h *header, iov [][]byte, cs, ce int) string {
	const P = pieceBytes
	p, pos, d := cs/P, cs, pieceDigest{kind: h.sum}
	for _, b := range iov {
		for len(b) > 0 {
			n := min(len(b), (p+1)*P-pos)
			d.write(b[:n])
			b, pos = b[n:], pos+n
			if pos == (p+1)*P || pos == ce {
				if d.sum() != h.crcs[p] {
					return fmt.Sprintf("payload piece %d checksum mismatch", p)
				}
				p++
			}
		}
	}
	return ""
}

// preadvAll reads the buffers of iov at off of fd, continuing after a
// short read (and after every maxIOV buffers) and retrying EINTR; a read
// of 0 bytes (end of file) stops it.
// iov itself is left as it was (a short read trims a copy).
func preadvAll(fd int, iov [][]byte, off int64) (int, error) {
	total, want, copied := 0, 0, false
	for _, b := range iov {
		want += len(b)
	}
	for len(iov) > 0 {
		n, err := unix.Preadv(fd, iov[:min(len(iov), maxIOV)], off)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total, off = total+n, off+int64(n)
		if total == want {
			return total, nil
		}
		if !copied {
			iov, copied = append([][]byte(nil), iov...), true
		}
		for n > 0 {
			if n >= len(iov[0]) {
				n -= len(iov[0])
				iov = iov[1:]
			} else {
				iov[0] = iov[0][n:]
				n = 0
			}
		}
	}
	return total, nil
}

// partBufs is readParts' scratch: the gaps between parts (at most a
// chunk's bytes) and the preadv buffer list.
type partBufs struct {
	scratch []byte
	iov     [][]byte
}

var partScratch = sync.Pool{New: func() any {
	return &partBufs{scratch: make([]byte, readChunk+pieceBytes), iov: make([][]byte, 0, 64)}
}}
