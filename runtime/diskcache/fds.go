package diskcache

import (
	"os"
	"sync"
	"time"

	"github.com/memtier/memtier/runtime/files"
)

// fdShare: the entry descriptors a Cache keeps open are at most
// files.Budget()/fdShare (a share of the soft RLIMIT_NOFILE, read at each
// insert, since the host may lower it at any time), and at most maxOpen:
// 1 GiB of 4 MiB entries. At 64 (256 MiB) a 512 MB checkpoint read in
// file order cycled through the table, so every load of it in a process
// reopened each of its 128 entries (open, fstat, header read and check,
// an mtime refresh) instead of only the first.
const (
	fdShare = 4
	maxOpen = 256
)

// openEntry is an entry file kept open with its header, read and checked
// when it was opened: an entry's inode never changes once renamed into
// place (writers rename a new file over it), so a hit is one pread of the
// pieces it needs and their CRC check, not open, fstat, a header read and
// close (32 us per 64 KiB hit before).
type openEntry struct {
	f       *os.File
	ino     uint64
	size    int64
	h       header
	touched time.Time // last mtime refresh (guarded by fdTable.mu)
	refs    int       // readers using f now
	gone    bool      // out of the table: closed by the last release
	tick    uint64    // LRU clock at the last acquire
	tr      trust     // pieces this process checked (trust.go)
}

// fdTable is a Cache's open entries by file name, LRU-bounded. An entry
// another process removes (evicted, replaced) stays readable through its
// descriptor: its bytes are still those of its key (the key names the
// object's version), and its checksums are still checked; it holds its
// disk space until it leaves the table, at most maxOpen entries. Entries
// this Cache removes leave the table first (forget).
type fdTable struct {
	mu   sync.Mutex
	m    map[string]*openEntry
	tick uint64
}

// acquire returns the open entry name with a reference, or nil.
func (t *fdTable) acquire(name string) *openEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.m[name]
	if e == nil {
		return nil
	}
	t.tick++
	e.tick = t.tick
	e.refs++
	return e
}

// insert adds e (with one reference, the caller's) as name, closing the
// least recently used idle entries beyond the limit, and returns the
// entry the caller reads. When another reader opened the same file (same
// inode) meanwhile, that one is returned with a reference and e is
// closed: one openEntry per file, so the pieces each reader checks add to
// one trust (two, and the checks recorded in the loser were lost:
// TestTrustConcurrentReaders saw it in CI). A different inode under name
// (another process replaced the file) keeps e out of the table, closed by
// its release.
func (t *fdTable) insert(name string, e *openEntry) *openEntry {
	limit, _ := files.Budget()
	limit = max(1, min(maxOpen, limit/fdShare))
	t.mu.Lock()
	defer t.mu.Unlock()
	e.refs = 1
	if t.m == nil {
		t.m = make(map[string]*openEntry)
	}
	if old, ok := t.m[name]; ok {
		if old.ino == e.ino {
			e.f.Close()
			t.tick++
			old.tick = t.tick
			old.refs++
			return old
		}
		e.gone = true
		return e
	}
	for len(t.m) >= limit {
		var old string
		var oe *openEntry
		for n, x := range t.m {
			if oe == nil || x.tick < oe.tick {
				old, oe = n, x
			}
		}
		t.removeLocked(old, oe)
	}
	t.tick++
	e.tick = t.tick
	t.m[name] = e
	return e
}

// release drops the caller's reference to e.
func (t *fdTable) release(e *openEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.refs--; e.refs == 0 && e.gone {
		e.f.Close()
	}
}

// forget takes name out of the table (its file is being removed or was
// found bad); its descriptor closes when its last reader releases it.
func (t *fdTable) forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.m[name]; e != nil {
		t.removeLocked(name, e)
	}
}

// closeAll empties the table (Cache.Close).
func (t *fdTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for n, e := range t.m {
		t.removeLocked(n, e)
	}
}

func (t *fdTable) removeLocked(name string, e *openEntry) {
	delete(t.m, name)
	e.gone = true
	if e.refs == 0 {
		e.f.Close()
	}
}

// held returns how many entries are open (tests).
func (t *fdTable) held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// touch reports whether e's mtime is due a refresh (older than
// touchAfter), and marks it refreshed now.
func (t *fdTable) touch(e *openEntry, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(e.touched) <= touchAfter {
		return false
	}
	e.touched = now
	return true
}
