package engine

import (
	"container/list"
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
