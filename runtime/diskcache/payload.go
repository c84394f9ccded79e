package diskcache

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// readPieces copies bytes [from, from+len(dst)) of the payload of h
// (which starts at base in f) into dst, reading and checking only the
// pieces that overlap them, and returns why it could not ("" when it
// did): a piece the file lacks bytes of, or one whose checksum is not its
// header's. Runs of whole pieces inside the range are read straight into
// dst by pread, up to readChunk bytes each, and checksummed right after
// they land, while they are still in the CPU cache, so memory is read
// once; a piece the range covers only in part (at most the first and the
// last) is read whole into a scratch buffer, checked, and its part copied.
// (Mapping the file instead, to checksum the page cache in place,
// measured 3x slower: the populate and munmap of every 4 MiB entry cost
// more than the copy.) read counts the bytes read.
func readPieces(f *os.File, base int64, h *header, from int, dst []byte, read *atomic.Uint64) string {
	const P = pieceBytes
	plen, end := int(h.payloadLen), from+len(dst)
	for p := from / P; p*P < end; {
		ps, pe := p*P, min((p+1)*P, plen)
		if ps >= from && pe <= end {
			q, qe := p+1, pe
			for qe < end && qe-ps < readChunk {
				ne := min(qe+P, plen)
				if ne > end {
					break
				}
				q, qe = q+1, ne
			}
			buf := dst[ps-from : qe-from]
			n, _ := f.ReadAt(buf, base+int64(ps))
			read.Add(uint64(n))
			if n != len(buf) {
				return "truncated payload"
			}
			for i := p; i < q; i++ {
				if sumOf(h.sum, buf[i*P-ps:min((i+1)*P, qe)-ps]) != h.crcs[i] {
					return fmt.Sprintf("payload piece %d checksum mismatch", i)
				}
			}
			p = q
			continue
		}
		sp := scratchPool.Get().(*[]byte)
		buf := (*sp)[:pe-ps]
		n, _ := f.ReadAt(buf, base+int64(ps))
		read.Add(uint64(n))
		why := ""
		if n != len(buf) {
			why = "truncated payload"
		} else if sumOf(h.sum, buf) != h.crcs[p] {
			why = fmt.Sprintf("payload piece %d checksum mismatch", p)
		} else {
			a, z := max(ps, from), min(pe, end)
			copy(dst[a-from:z-from], buf[a-ps:z-ps])
		}
		scratchPool.Put(sp)
		if why != "" {
			return why
		}
		p++
	}
	return ""
}

// scratchPool holds pieceBytes buffers for the pieces a read covers in part.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, pieceBytes); return &b }}

// summedChunk is how much of a payload writeSummed checksums before it
// writes it: half of a core's L2 cache on the build machine (1 MiB), so the
// write reads what the checksum has just brought into the cache.
const summedChunk = 8 * pieceBytes

// writeSummed writes data at off of f through the page cache and returns
// its piece checksums (pieceCRCs), summedChunk bytes at a time: each chunk
// is checksummed, then written while it is still in the CPU cache, so
// memory is read once instead of once for the checksums and again for the
// write (a block fetched a moment ago is no longer in the cache: the other
// GETs in flight have written over it since).
//
// Writes ending on 2 MiB file boundaries (so an entry sits in fewer, larger
// page-cache folios) were tried and dropped: on the quiet 2-core build
// machine (BenchmarkFirstLoadVersitygw, 1 GiB at 16 GETs in flight, 2
// alternated rounds of 3, no pretouch) first loads fell from 1492/1306 to
// 599/794 MB/s and their CPU rose from 0.62-0.76 to 1.7-2.2 s/GB, for
// second reads at 13.3-16.0 against 11.6-14.2 GB/s.
func writeSummed(f io.WriterAt, data []byte, off int64) ([]uint32, error) {
	crcs, k := make([]uint32, numPieces(len(data))), writeSum()
	for lo := 0; lo < len(data); lo += summedChunk {
		hi := min(lo+summedChunk, len(data))
		for p := lo; p < hi; p += pieceBytes {
			crcs[p/pieceBytes] = sumOf(k, data[p:min(p+pieceBytes, hi)])
		}
		if _, err := f.WriteAt(data[lo:hi], off+int64(lo)); err != nil {
			return nil, err
		}
	}
	return crcs, nil
}

// directAlign is the alignment O_DIRECT wants of file offsets, lengths and
// memory addresses: the page size covers every logical block size in use.
const directAlign = 4096

// writePayload writes data at off (a multiple of headerAlign) of the file
// f. Unless buffered, the whole directAlign-sized prefix goes through a
// second descriptor opened with O_DIRECT (when data's address is aligned,
// as the block pool's buffers are): the device reads it from data by DMA,
// while a buffered write costs a copy into the page cache and, with memory
// full of page cache, reclaim, both on the CPU the network reads need
// (measured: BenchmarkDiskCacheVersitygw). The tail, and everything where
// O_DIRECT is refused (tmpfs, an unaligned buffer), is written buffered.
func writePayload(f *os.File, data []byte, off int64, buffered bool) error {
	if n := len(data) / directAlign * directAlign; !buffered && n > 0 &&
		uintptr(unsafe.Pointer(unsafe.SliceData(data)))%directAlign == 0 {
		if d, err := os.OpenFile(f.Name(), os.O_WRONLY|syscall.O_DIRECT, 0); err == nil {
			_, err = d.WriteAt(data[:n], off)
			if cerr := d.Close(); err == nil && cerr == nil {
				data, off = data[n:], off+int64(n)
			}
		}
	}
	if len(data) == 0 {
		return nil
	}
	_, err := f.WriteAt(data, off)
	return err
}
