package engine

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"sync"

	"github.com/memtier/memtier/runtime/objects"
)

// maxTarIndexes bounds the member lists a context keeps: a DataLoader cycles
// over far fewer shards per worker than this, and each list costs about 50
// bytes per member.
const maxTarIndexes = 64

// tarKey names one version of one tar file: a rewritten shard (other size,
// mtime, ctime or inode, hence another files ID) is parsed again.
type tarKey struct {
	path    string
	version uint64
}

// tarCache keeps the member lists of recently opened tar shards, least
// recently used out first, so reopening a shard (every epoch, every worker)
// does not read its headers again. The zero value is ready to use; safe for
// concurrent use.
type tarCache struct {
	mu    sync.Mutex
	lru   list.List // of *tarEntry, most recent at the front
	byKey map[tarKey]*list.Element
}

type tarEntry struct {
	key     tarKey
	members []objects.TarMember // shared, never modified
}

// get returns the cached members of key, or nil.
func (t *tarCache) get(key tarKey) []objects.TarMember {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byKey[key]
	if e == nil {
		return nil
	}
	t.lru.MoveToFront(e)
	return e.Value.(*tarEntry).members
}

// put remembers members for key, dropping the least recently used list when
// the cache is full. Older versions of the same path are dropped at once:
// they can never be asked for again.
func (t *tarCache) put(key tarKey, members []objects.TarMember) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byKey == nil {
		t.byKey = map[tarKey]*list.Element{}
	}
	if e := t.byKey[key]; e != nil {
		t.lru.MoveToFront(e)
		return
	}
	for e := t.lru.Front(); e != nil; {
		next := e.Next()
		if k := e.Value.(*tarEntry).key; k.path == key.path {
			t.lru.Remove(e)
			delete(t.byKey, k)
		}
		e = next
	}
	t.byKey[key] = t.lru.PushFront(&tarEntry{key: key, members: members})
	for t.lru.Len() > maxTarIndexes {
		old := t.lru.Back()
		t.lru.Remove(old)
		delete(t.byKey, old.Value.(*tarEntry).key)
	}
}

// len is the number of lists held (for tests).
func (t *tarCache) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

// tarIndexMagic starts a member list kept in the disk tier (diskcache
// MetaTarIndex). Its last byte is the format version: bump it when
// objects.ParseTar lists other members for the same bytes, so that no
// process reads a list an older parser made.
const tarIndexMagic = "MTTI\x01"

// encodeTarIndex returns members as a tar index blob: tarIndexMagic, the
// member count, then per member its offset, size and name length (uvarints)
// and its name.
func encodeTarIndex(members []objects.TarMember) []byte {
	b := make([]byte, 0, len(tarIndexMagic)+binary.MaxVarintLen64+len(members)*24)
	b = append(b, tarIndexMagic...)
	b = binary.AppendUvarint(b, uint64(len(members)))
	for _, m := range members {
		b = binary.AppendUvarint(b, uint64(m.Offset))
		b = binary.AppendUvarint(b, uint64(m.Size))
		b = binary.AppendUvarint(b, uint64(len(m.Name)))
		b = append(b, m.Name...)
	}
	return b
}

// decodeTarIndex returns the members of a tar index blob of an archive of
// size bytes, or nil when b is not one: members must satisfy what
// objects.ParseTar promises (data at a multiple of 512 bytes, in archive
// order, inside the archive; a non-empty name without NUL). The blob's
// checksums were checked by the disk tier; this catches a blob of another
// format or a bug, never serving a member list the archive does not have
// by these rules.
func decodeTarIndex(b []byte, size uint64) []objects.TarMember {
	if !bytes.HasPrefix(b, []byte(tarIndexMagic)) {
		return nil
	}
	b = b[len(tarIndexMagic):]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > uint64(len(b))/4 { // a member takes at least 4 bytes
		return nil
	}
	members := make([]objects.TarMember, 0, count)
	var prev uint64
	for range count {
		off, ok1 := next()
		n, ok2 := next()
		nl, ok3 := next()
		if !ok1 || !ok2 || !ok3 || off%512 != 0 || off < prev || off > size || n > size-off ||
			nl == 0 || nl > uint64(len(b)) || bytes.IndexByte(b[:nl], 0) >= 0 {
			return nil
		}
		members = append(members, objects.TarMember{Name: string(b[:nl]), Offset: int64(off), Size: int64(n)})
		b, prev = b[nl:], off
	}
	if len(b) != 0 {
		return nil
	}
	return members
}
