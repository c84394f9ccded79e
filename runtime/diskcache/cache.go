package diskcache

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
)

// Defaults and bounds of Options, in bytes.
const (
	// DefaultBlockBytes is the block size. 4 MiB: the engine's TaskBytes
	// (a hit read splits over workers like a local read); within the
	// remote client's part size (8 MiB), so a missing block is one ranged
	// GET and is written while the others are still in flight; at most
	// 4 MiB read to serve a small range (a block is checksummed whole); a
	// per-entry cost (open, fstat, close, a 4 KiB header) under 1% of
	// copying 4 MiB. 8 MiB measured no better on the hit path (bench_test.go).
	DefaultBlockBytes = 4 << 20
	MinBlockBytes     = 64 << 10
	MaxBlockBytes     = 64 << 20
	// DefaultBudgetBytes is the budget when none is set: 10 GiB, lowered
	// to half of what the file system has free plus what the cache already
	// holds, measured at Open.
	DefaultBudgetBytes = 10 << 30
	// DefaultQueueBytes bounds the payload bytes waiting in the
	// write-behind queue; a reader whose block does not fit waits for
	// room (at most QueueWait), so memory stays bounded and no block is
	// fetched twice.
	DefaultQueueBytes = 64 << 20
	// DefaultQueueWait is how long a reader waits for room in a full
	// queue before its block is dropped: a disk that writes 4 MiB blocks
	// at 100 MB/s frees room every 40 ms, so only a stalled disk reaches
	// it, and then the reads go on at the network's pace.
	DefaultQueueWait = 2 * time.Second
	// DefaultReadWorkers is the number of goroutines that read hit blocks
	// of one request in parallel (the engine's IOThreads default).
	DefaultReadWorkers = 4
)

const (
	entrySuffix = ".blk"
	tmpPrefix   = ".tmp-"
	// staleTmp is the age after which a temporary file is taken for the
	// leftover of a process that died while writing it (a live writer
	// writes one block in milliseconds).
	staleTmp = 10 * time.Minute
	// touchAfter: a hit refreshes an entry's mtime only when it is older
	// than this, so a hot entry costs no utimensat per read. 10 s, not
	// 1 s: the refresh moves the entry's ctime, after which this process
	// checks its pieces again before it trusts them (trust.go), and
	// eviction needs no finer order than that.
	touchAfter = 10 * time.Second
	// maxPruned bounds the keys a Cache remembers having pruned.
	maxPruned = 1 << 16
)

// Options configures a Cache.
type Options struct {
	Dir         string // directory of the entries; created (mode 0700) if missing
	BudgetBytes uint64 // bytes the directory may hold; 0: DefaultBudgetBytes, capped as it says
	BlockBytes  int    // block size in bytes; 0: DefaultBlockBytes; MinBlockBytes to MaxBlockBytes
	// QueueBytes bounds the write-behind queue in payload bytes; 0:
	// DefaultQueueBytes. Synchronous writes the blocks a read fetched
	// before the read returns instead.
	QueueBytes int64
	// QueueWait bounds a reader's wait for room in a full queue, after
	// which its block is dropped (Stats.QueueDrops); 0: DefaultQueueWait.
	QueueWait   time.Duration
	Synchronous bool
	// DirectWrites writes entries with O_DIRECT instead of through the
	// page cache (see writePayload). Off by default: direct writes halved
	// the first run's cost on the loaded build machine, but left the page
	// cache cold, and the next process then read the entries from the
	// device at 0.19x a warm local file (bench_remote.py), where buffered
	// entries are read from the page cache like the local file they
	// stand in for.
	DirectWrites bool
	ReadWorkers  int // parallel hit readers per request; 0: DefaultReadWorkers
	// NoTrust checks every piece on every read. By default a piece this
	// Cache read and checked is served again without its checksum while
	// the entry file is unchanged and its bytes are in the page cache
	// (the package doc's Trust paragraph; EnvTrust=0 sets NoTrust).
	NoTrust bool
}

// Cache is a directory of blocks of remote objects, shared by every Cache
// and process that opens it (see the package doc for the rules). Safe for
// concurrent use. Close it when done.
type Cache struct {
	dir    string
	budget uint64
	block  int
	opts   Options

	mu    sync.Mutex // excludes this process's goroutines around the flock
	lockF *os.File
	used  atomic.Uint64 // the usage recorded when this Cache last held the lock

	pruned  sync.Map // idHash+verHash of keys whose other versions were dropped
	prunedN atomic.Int64
	wb      *writer
	wt      slots     // write-through slots (through.go); nil: none
	fds     fdTable   // entry descriptors kept open (fds.go)
	bufs    sync.Pool // *[]byte of block bytes
	st      counters
	closed  atomic.Bool
	// trustOff: the file system refused RWF_NOWAIT, so reads are all
	// checked (trust.go).
	trustOff atomic.Bool
}

// Open opens (creating it if needed, mode 0700) the cache directory of o,
// checks that it can write there, and brings it within budget. Errors name
// the directory: errs.InvalidArg for bad options or a path that is not a
// directory, errs.Permission for a directory it cannot write, errs.IO
// otherwise. Nothing is left behind on error except the directory.
func Open(o Options) (*Cache, error) {
	if o.Dir == "" {
		return nil, errs.New(errs.InvalidArg, "disk cache", "no directory")
	}
	if o.BlockBytes == 0 {
		o.BlockBytes = DefaultBlockBytes
	}
	if o.BlockBytes < MinBlockBytes || o.BlockBytes > MaxBlockBytes {
		return nil, errs.New(errs.InvalidArg, "disk cache", "block size %d bytes: want %d to %d", o.BlockBytes, MinBlockBytes, MaxBlockBytes)
	}
	if o.QueueBytes == 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.QueueBytes < 0 {
		return nil, errs.New(errs.InvalidArg, "disk cache", "queue bytes %d: want > 0", o.QueueBytes)
	}
	if o.QueueWait < 0 {
		return nil, errs.New(errs.InvalidArg, "disk cache", "queue wait %v: want >= 0", o.QueueWait)
	}
	if o.QueueWait == 0 {
		o.QueueWait = DefaultQueueWait
	}
	if o.ReadWorkers <= 0 {
		o.ReadWorkers = DefaultReadWorkers
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, errs.FromErrno("disk cache", o.Dir, -1, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errs.FromErrno("disk cache: create directory", dir, -1, err)
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, errs.FromErrno("disk cache", dir, -1, err)
	} else if !st.IsDir() {
		return nil, errs.At(errs.InvalidArg, "disk cache", dir, -1, "not a directory")
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return nil, errs.FromErrno("disk cache: directory is not writable", dir, -1, err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.FromErrno("disk cache: open lock file", dir, -1, err)
	}
	o.NoTrust = o.NoTrust || testNoTrust
	c := &Cache{dir: dir, block: o.BlockBytes, opts: o, lockF: lf}
	c.budget = o.BudgetBytes
	c.wb = newWriter(c, o.QueueBytes, o.QueueWait)
	c.wt = newSlots(writeThroughSlots)
	// A probe entry: a directory that lets access(2) pass but refuses
	// files (a read-only mount) fails here, not on the first miss.
	probe, err := os.CreateTemp(dir, tmpPrefix+"probe-")
	if err != nil {
		lf.Close()
		return nil, errs.FromErrno("disk cache: create a file", dir, -1, err)
	}
	probe.Close()
	os.Remove(probe.Name())

	if err := c.lock(); err != nil {
		lf.Close()
		return nil, errs.FromErrno("disk cache: lock", dir, -1, err)
	}
	// A scan on open brings the record in step with the directory (another
	// process may have died mid-write) and the directory within budget.
	if c.budget == 0 {
		c.budget = ^uint64(0) // measure first: the default depends on what the cache holds
		c.budget = defaultBudget(dir, c.scanLocked(0, false))
	}
	used := c.scanLocked(0, true)
	c.writeUsage(used)
	c.unlock()
	return c, nil
}

// defaultBudget is DefaultBudgetBytes capped at half of the file system's
// free bytes plus used (what the cache holds already).
func defaultBudget(dir string, used uint64) uint64 {
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return DefaultBudgetBytes
	}
	return min(DefaultBudgetBytes, (fs.Bavail*uint64(fs.Bsize)+used)/2)
}

// Dir returns the absolute cache directory.
func (c *Cache) Dir() string { return c.dir }

// BudgetBytes returns the budget in bytes this Cache enforces.
func (c *Cache) BudgetBytes() uint64 { return c.budget }

// BlockBytes returns the block size in bytes.
func (c *Cache) BlockBytes() int { return c.block }

// Flush waits until every write queued so far is done (or dropped).
func (c *Cache) Flush() { c.wb.flush() }

// Close flushes the write-behind queue and releases the lock file. The
// directory and its entries stay for the next Cache. Calls after Close
// read nothing from disk and write nothing. Idempotent.
func (c *Cache) Close() error {
	if c.closed.Load() {
		return nil
	}
	// Flush before closing: a write queued when closed is skipped (put),
	// so closing first dropped every block still queued.
	c.wb.flush()
	if c.closed.Swap(true) {
		return nil
	}
	c.fds.closeAll()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lockF.Close()
}

func (c *Cache) path(name string) string { return filepath.Join(c.dir, name) }

// getBuf returns a buffer of n bytes (n <= block) from the pool.
func (c *Cache) getBuf(n int) []byte {
	if p, ok := c.bufs.Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, c.block)
}

func (c *Cache) putBuf(b []byte) {
	if cap(b) == c.block {
		b = b[:c.block]
		c.bufs.Put(&b)
	}
}

// errNoRoom: the entry does not fit the budget even after eviction.
var errNoRoom = fmt.Errorf("diskcache: entry larger than the budget")
