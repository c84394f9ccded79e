package diskcache

import (
	"hash/crc32"
	"os"
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
