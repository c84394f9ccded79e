package diskcache

import (
	"encoding/binary"
	"os"
	"syscall"
	"time"

	"github.com/memtier/memtier/runtime/remote"
)

// Meta entries hold a small blob derived from one object version, kept
// beside its blocks so that another process need not read the object to
// derive it again: a tar shard's member list, whose header scan reads
// every piece of a shard of small samples (a header every 16-112 KiB,
// and a piece is read and checked whole). A meta entry is an entry like a
// block's, at a block index no object reaches (metaBase + kind): the same
// format and checks (a torn or corrupt one is counted, deleted and a
// miss), budget, eviction by mtime, and removal with its version.
const (
	metaBase = 1<<32 - 1<<16 // block indices from here are meta kinds
	// MaxMetaBytes is the largest meta blob kept (bytes).
	MaxMetaBytes = 64 << 20
)

// Meta kinds (PutMeta, GetMeta); a kind's blob format is its user's.
const (
	MetaTarIndex = 1 // engine: a tar shard's member list
)

// PutMeta keeps data as the meta blob kind of o's version (written now,
// through a temporary file as every entry is) and reports whether it did:
// false when o cannot be cached, data is empty or over MaxMetaBytes, the
// Cache is closed, or the write failed (counted as put counts it). An
// existing blob is kept. Safe for concurrent use.
func (s *Source) PutMeta(o *remote.Object, kind uint32, data []byte) bool {
	k, ok := s.KeyOf(o)
	if !ok || len(data) == 0 || len(data) > MaxMetaBytes || kind >= 1<<16 || s.c.closed.Load() {
		return false
	}
	w0 := s.c.st.writtenEntries.Load()
	s.c.put(&k, metaBase+uint64(kind), data)
	return s.c.st.writtenEntries.Load() > w0 || s.c.has(&k, metaBase+uint64(kind))
}

// GetMeta returns the meta blob kind of o's version, read and checked
// (every piece's checksum), or ok false: none, o cannot be cached, or a
// torn, corrupt or old entry (counted and deleted, as a block's). A hit
// refreshes the entry's mtime as a block's hit does. It counts no hit or
// miss block (Stats counts blocks of objects). Safe for concurrent use.
func (s *Source) GetMeta(o *remote.Object, kind uint32) (data []byte, ok bool) {
	k, ok := s.KeyOf(o)
	if !ok || kind >= 1<<16 || s.c.closed.Load() {
		return nil, false
	}
	c, idx := s.c, metaBase+uint64(kind)
	name := k.fileName(idx)
	f, err := os.Open(c.path(name))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil {
		return nil, false
	}
	// The payload length is the entry's own (readHeader checks the rest).
	var fixed [fixedHeader]byte
	n := 0
	if st.Size >= fixedHeader {
		n, _ = f.ReadAt(fixed[:], 0)
	}
	plen := int64(binary.LittleEndian.Uint32(fixed[12:]))
	why := ""
	var h header
	if n != fixedHeader || plen == 0 || plen > MaxMetaBytes {
		why = "bad meta header"
	} else {
		h, why = c.readHeader(f, &k, idx, int(plen), st.Size)
	}
	if why == "" {
		data = make([]byte, plen)
		why = readPieces(f, int64(h.hdrLen), &h, 0, data, &c.st.readBytes)
	}
	if why != "" {
		c.dropBad(name, why, st.Ino, uint64(st.Size))
		return nil, false
	}
	if now := time.Now(); now.Sub(time.Unix(st.Mtim.Unix())) > touchAfter {
		_ = os.Chtimes(c.path(name), now, now) // "used" is the mtime (see get)
	}
	return data, true
}
