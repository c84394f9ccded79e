// Package source defines the bottom of MemTier's tier stack: where bytes come
// from when no cache tier holds them. The engine plans every request over
// tiers (HBM cache, DRAM cache) and a Source; a Source only knows how to open
// a name at its current version, tell its size and read ranges of it.
//
// Local (local.go) is the first Source: files through the descriptor table,
// buffered pread or O_DIRECT. A remote object store is a second one and
// touches no tier: the cache tiers key blocks by Object.Version, so whatever
// the Source calls a version (an inode identity, an ETag) binds the bytes
// cached from it.
package source

import "time"

// Read paths a Source reports; values equal policy.PathBuffered and
// policy.PathDirect (MEMTIER_PATH_*).
const (
	PathBuffered = 1
	PathDirect   = 2
)

// Object is one open version of a name. Its methods never do I/O. The holder
// must call Release exactly once; an Object is safe for concurrent use by
// every holder until then.
type Object interface {
	Name() string    // as given to Open
	Version() uint64 // nonzero; another value when the bytes changed
	Size() uint64    // bytes, at this version
	Release()
}

// Source opens and reads Objects. All methods are safe for concurrent use.
type Source interface {
	// Open returns name's current version with one reference taken. trust
	// bounds how old the Source's last check of an already open version may
	// be (files.TrustNone: check now; files.TrustForever: never recheck).
	// staleVersion is nonzero when Open found that an older version it had
	// open changed: the caller drops what it cached of that version.
	Open(name string, trust time.Duration) (obj Object, staleVersion uint64, err error)

	// ReadAt fills dst with the bytes of o at off (inside o's size) by path
	// (PathBuffered or PathDirect; a Source without that distinction ignores
	// it), and reports the path that moved the bytes (a refused O_DIRECT
	// falls back to PathBuffered). A range o no longer holds (the file shrank)
	// is errs.EOF.
	ReadAt(o Object, dst []byte, off uint64, path int) (usedPath int, err error)

	// ReadNoWait fills dst like ReadAt on the buffered path if it can do so
	// without waiting for a device or a network, and reports whether it did;
	// when not, it may start bringing the bytes closer (readahead).
	ReadNoWait(o Object, dst []byte, off uint64) bool

	// Resident estimates how many bytes of [off, off+size) of o a read would
	// find close (the page cache), from samples points; known is false when
	// the Source cannot tell.
	Resident(o Object, off, size uint64, samples int) (bytes uint64, known bool)

	// DirectRefused reports whether O_DIRECT is known not to work for o.
	DirectRefused(o Object) bool
}

// cacheSafer is implemented by Objects whose bytes may not be cached yet
// (files.File.CacheSafe: a file changed within its file system's
// timestamp tick).
type cacheSafer interface{ CacheSafe() bool }

// CacheSafe reports whether bytes of o read now may be kept by a cache
// tier: Objects without the notion (remote objects, bound to an ETag) always
// may. Thread-safe.
func CacheSafe(o Object) bool {
	s, ok := o.(cacheSafer)
	return !ok || s.CacheSafe()
}
