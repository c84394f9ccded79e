package diskcache

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// readChunk is the most of a payload read per pread (whole pieces) and
// checksummed right after, while it is still in the CPU cache (one pass
// over memory, not two).
const readChunk = 512 << 10

// get fills dst with bytes [from, from+len(dst)) of the payload of block
// idx of k (blockLen bytes long) from the entry on disk and reports
// whether it did. Only the pieces that overlap the range are read and
// checked (readPieces), through the entry's descriptor kept open with its
// checked header (fds.go; the first hit opens it and reads the header). A
// missing entry is a miss; a torn, truncated or corrupt one (in the header
// or a piece read) is counted, deleted and a miss, so the caller fetches
// the block again; so is an entry of an older format version (counted as
// stale). dst may be partly written on a miss.
func (c *Cache) get(k *Key, idx uint64, blockLen int, dst []byte, from int) bool {
	if c.closed.Load() {
		return false
	}
	name := k.fileName(idx)
	if c.wb.copyPending(name, k, idx, blockLen, dst, from) {
		return true // fetched by an earlier read, not written yet
	}
	e, ok := c.acquireEntry(name, k, idx, blockLen)
	if !ok {
		return false
	}
	defer c.fds.release(e)
	why := e.h.mismatch(k, idx*uint64(c.block), blockLen)
	if why == "" && (from < 0 || from+len(dst) > blockLen) {
		why = fmt.Sprintf("range [%d, +%d) outside the %d-byte payload", from, len(dst), blockLen)
	}
	if why == "" {
		why = c.readRange(e, from, dst)
	}
	return c.endRead(name, e, why)
}

// acquireEntry is the open entry name of block idx of k with a reference
// for the caller (fds.release gives it back): the one kept open, else
// opened now (openEntry); ok is false for a missing or bad entry.
func (c *Cache) acquireEntry(name string, k *Key, idx uint64, blockLen int) (*openEntry, bool) {
	if e := c.fds.acquire(name); e != nil {
		return e, true
	}
	return c.openEntry(name, k, idx, blockLen)
}

// dropBad counts the entry name (inode ino, size bytes) that failed a
// check for why, as stale when it is of an older format version, else as
// corrupt, and deletes it.
func (c *Cache) dropBad(name, why string, ino, size uint64) {
	if why == errOldFormat.Error() {
		c.st.staleEntries.Add(1)
	} else {
		c.st.corruptEntries.Add(1)
	}
	c.dropEntry(name, ino, size)
}

// endRead ends a read of open entry e (name): why is "" when it served
// the read, which marks the entry used, else why it was bad, which counts
// and deletes it. It reports whether the read was served.
func (c *Cache) endRead(name string, e *openEntry, why string) bool {
	if why != "" {
		c.fds.forget(name)
		c.st.corruptEntries.Add(1)
		c.dropEntry(name, e.ino, uint64(e.size))
		return false
	}
	if now := time.Now(); c.fds.touch(e, now) {
		// "Used" is the mtime: eviction removes the oldest first. atime
		// is not used, since relatime and noatime mounts do not keep it.
		_ = os.Chtimes(c.path(name), now, now)
	}
	return true
}

// openEntry opens the entry name of block idx of k, reads and checks its
// header, and adds it to the open entries with a reference for the
// caller; ok is false for a missing entry and for a bad one (counted and
// deleted).
func (c *Cache) openEntry(name string, k *Key, idx uint64, blockLen int) (e *openEntry, ok bool) {
	f, err := os.Open(c.path(name))
	if err != nil {
		return nil, false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, false
	}
	h, why := c.readHeader(f, k, idx, blockLen, st.Size)
	if why != "" {
		f.Close()
		c.dropBad(name, why, st.Ino, uint64(st.Size))
		return nil, false
	}
	e = &openEntry{f: f, ino: st.Ino, size: st.Size, h: h, touched: time.Unix(st.Mtim.Unix())}
	return c.fds.insert(name, e), true
}

// readHeader reads and checks the header of the entry of block idx of k
// (blockLen bytes) from f (size bytes), returning it, or why it is not
// that entry.
func (c *Cache) readHeader(f *os.File, k *Key, idx uint64, blockLen int, size int64) (header, string) {
	var hb [headerAlign]byte
	n, _ := f.ReadAt(hb[:], 0)
	c.st.readBytes.Add(uint64(n))
	if n < fixedHeader {
		return header{}, "truncated header"
	}
	hl, err := decodeFixed(hb[:])
	if err != nil {
		return header{}, err.Error()
	}
	hdr := hb[:]
	if hl > headerAlign {
		hdr = make([]byte, hl)
		n, _ := f.ReadAt(hdr, 0)
		c.st.readBytes.Add(uint64(n))
		if n != int(hl) {
			return header{}, "truncated header"
		}
	}
	h, err := decodeHeader(hdr[:hl])
	if err != nil {
		return header{}, err.Error()
	}
	if why := h.mismatch(k, idx*uint64(c.block), blockLen); why != "" {
		return header{}, why
	}
	if size != int64(h.hdrLen)+int64(h.payloadLen) {
		return header{}, "torn: file size does not match its header"
	}
	return h, ""
}

// put writes data as the entry of block idx of k: into a temporary file in
// the cache directory, then renamed into place (readers see the whole
// entry or none). There is no fsync: after a power loss an entry may be
// renamed but short or stale, which its size check and checksums catch on
// read, so it costs a refetch, never wrong bytes; an fsync per entry would
// cost milliseconds per block. Failures are counted, not returned: the
// bytes were delivered, only their caching failed.
func (c *Cache) put(k *Key, idx uint64, data []byte) {
	if c.closed.Load() {
		return
	}
	name := k.fileName(idx)
	if _, err := os.Lstat(c.path(name)); err == nil {
		return // another reader (or process) wrote it
	}
	hl := headerLen(k, len(data))
	n := uint64(hl + len(data))
	f, err := c.reserve(n)
	if err != nil {
		if err == errNoRoom {
			c.st.writeDrops.Add(1)
		} else {
			c.st.writeErrors.Add(1)
		}
		return
	}
	tmp := f.Name()
	var crcs []uint32
	var err2 error
	if c.opts.DirectWrites {
		crcs = pieceCRCs(data)
		err2 = writePayload(f, data, int64(hl), false)
	} else {
		crcs, err2 = writeSummed(f, data, int64(hl))
	}
	_, err1 := f.WriteAt(encodeHeader(k, idx*uint64(c.block), len(data), crcs), 0)
	err3 := f.Close()
	if err1 != nil || err2 != nil || err3 != nil {
		c.st.writeErrors.Add(1)
		c.abort(tmp, n)
		return
	}
	ok, err := c.commit(tmp, name, n)
	if err != nil {
		c.st.writeErrors.Add(1)
		return
	}
	if ok {
		c.st.writtenEntries.Add(1)
		c.st.writtenBytes.Add(n)
		c.pruneVersions(k)
	}
}

// inodeOf returns the inode number of path.
func inodeOf(path string) (uint64, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return 0, false
	}
	return st.Ino, true
}

// has reports whether the entry of block idx of k is in the directory.
func (c *Cache) has(k *Key, idx uint64) bool {
	_, err := os.Lstat(c.path(k.fileName(idx)))
	return err == nil
}
