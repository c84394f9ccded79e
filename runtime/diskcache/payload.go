package diskcache

import (
	"hash/crc32"
	"os"
	"syscall"
	"unsafe"
)

// readPayload copies len(dst) bytes of f at off into dst and returns their
// CRC-32C; ok is false when the file holds fewer bytes. It reads by pread
// in pieces of readChunk, each checksummed right after it lands, while it
// is still in the CPU cache, so memory is read once. (Mapping the file
// instead, to checksum the page cache in place, measured 3x slower: the
// populate and munmap of every 4 MiB entry cost more than the copy.)
func readPayload(f *os.File, off int64, dst []byte) (crc uint32, ok bool) {
	for lo := 0; lo < len(dst); lo += readChunk {
		hi := min(lo+readChunk, len(dst))
		if n, _ := f.ReadAt(dst[lo:hi], off+int64(lo)); n != hi-lo {
			return 0, false
		}
		crc = crc32.Update(crc, castagnoli, dst[lo:hi])
	}
	return crc, true
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
