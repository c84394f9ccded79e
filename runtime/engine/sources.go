package engine

import (
	"os"
	"sync"
	"time"

	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/remote"
	"github.com/memtier/memtier/runtime/source"
)

// sources is the bottom of a context's tier stack: local files, and remote
// objects (s3://, http://, https://) through runtime/remote, whose client is
// made on the first URL (a program that reads only local files never loads
// credentials or opens a connection). Objects say which source they came
// from by their type, so every read goes back to the source that opened it.
//
// When MEMTIER_DISK_CACHE_DIR names a directory, remote reads go through
// the disk cache tier (runtime/diskcache): disk cache, then remote GET;
// Objects are still the remote Source's, so the DRAM cache above keys
// their blocks by the same Object.Version.
type sources struct {
	local *source.Local

	mu        sync.Mutex
	remote    *remote.Source    // nil until the first URL
	disk      *diskcache.Source // nil without a disk cache directory
	remoteErr error             // the client could not be made (bad AWS_* settings)
	diskErr   error             // the disk cache could not be opened (reads go to the remote source)
}

// getenv reads the remote client's settings (AWS_*, MEMTIER_REMOTE_*) and
// the disk cache's (MEMTIER_DISK_CACHE_*) when the first URL is opened.
// os.Getenv until SetGetenv replaces it: in a c-shared library os.Getenv
// sees the environment as of exec, so the C library (capi) installs libc's
// getenv, which sees what Python's os.environ set after import.
var getenv = os.Getenv

// SetGetenv makes f the reader of the remote and disk cache settings of
// every context made afterwards (nil restores os.Getenv). Call it before
// the first context, as capi does when the library loads.
func SetGetenv(f func(string) string) {
	if f == nil {
		f = os.Getenv
	}
	getenv = f
}

var (
	_ source.Source      = (*sources)(nil)
	_ source.BatchReader = (*sources)(nil)
)

// remoteSource returns the remote source, making its client from the
// environment as it is now (getenv: AWS_* and MEMTIER_REMOTE_* variables,
// shared files; runtime/remote.Options) on first use. A failure is remembered: every URL gets the same error.
func (s *sources) remoteSource() (*remote.Source, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remote == nil && s.remoteErr == nil {
		cl, err := remote.NewClient(remote.Options{Getenv: getenv})
		if err != nil {
			s.remoteErr = err
		} else {
			s.remote = remote.NewSource(cl)
			s.disk, s.diskErr = openDiskCache(s.remote)
		}
	}
	return s.remote, s.remoteErr
}

// openDiskCache wraps r in the disk cache when MEMTIER_DISK_CACHE_DIR is
// set. A directory that cannot be used (read-only, not a directory, a bad
// MEMTIER_DISK_CACHE_BYTES) disables the tier with one warning on stderr,
// the library's only warning channel (capi/envcheck.go), and reads go to
// the remote source: a cache must not fail reads the source can serve.
func openDiskCache(r *remote.Source) (*diskcache.Source, error) {
	o, on, err := diskcache.OptionsFromEnv(getenv)
	if err == nil && on {
		var c *diskcache.Cache
		if c, err = diskcache.Open(o); err == nil {
			return diskcache.NewSource(r, c), nil
		}
	}
	if err != nil {
		os.Stderr.WriteString("memtier: warning: disk cache disabled: " + err.Error() + "\n")
	}
	return nil, err
}

// diskStats returns the disk cache's counters; ok is false when no disk
// cache is open (no URL read yet, the tier off or disabled).
func (s *sources) diskStats() (st diskcache.Stats, ok bool) {
	s.mu.Lock()
	d := s.disk
	s.mu.Unlock()
	if d == nil {
		return st, false
	}
	return d.Cache().Stats(), true
}

// closeDisk flushes the disk cache's write-behind queue and releases its
// lock file (the entries stay for the next run).
func (s *sources) closeDisk() {
	s.mu.Lock()
	d := s.disk
	s.disk = nil
	s.mu.Unlock()
	if d != nil {
		d.Cache().Close()
	}
}

// dropRemote forgets name ("" = every name) in the remote source, when it
// exists, and returns the versions it forgot.
func (s *sources) dropRemote(name string) []uint64 {
	s.mu.Lock()
	r := s.remote
	s.mu.Unlock()
	if r == nil || (name != "" && !remote.IsURL(name)) {
		return nil
	}
	return r.Drop(name)
}

// interrupt stops the remote requests in flight (remote.Client.Interrupt);
// a no-op before the first URL.
func (s *sources) interrupt() {
	s.mu.Lock()
	r := s.remote
	s.mu.Unlock()
	if r != nil {
		r.Client().Interrupt()
	}
}

// Interrupt stops every remote request of the context in flight when it is
// called, whichever call or thread started it: each such call returns
// errs.Interrupted soon after (at the next read of the response body, or
// at once while it waits for headers, a retry or a connection slot).
// Calls started afterwards run normally; local reads are not affected.
// Safe for concurrent use.
func (c *Context) Interrupt() {
	if s, ok := c.src.(*sources); ok {
		s.interrupt()
	}
}

// remoteRunBytes is the longest run of cache blocks one remote fill reads
// (plan.go planGap): the remote client's part size x parts in flight,
// shared by IOThreads runs, and at least two cache blocks.
func (c *Context) remoteRunBytes() uint64 {
	part, conc := uint64(remote.DefaultPartBytes), uint64(remote.DefaultMaxConcurrency)
	if s, ok := c.src.(*sources); ok {
		s.mu.Lock()
		if s.remote != nil {
			o := s.remote.Client().Options()
			part, conc = uint64(o.PartBytes), uint64(o.MaxConcurrency)
		}
		s.mu.Unlock()
	}
	bs := c.cache.BlockSize()
	run := part * conc / uint64(max(c.opts.IOThreads, 1))
	return max(2*bs, run/bs*bs)
}

// of is the source that opened o.
func (s *sources) of(o source.Object) source.Source {
	if _, ok := o.(*remote.Object); ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.disk != nil {
			return s.disk
		}
		return s.remote
	}
	return s.local
}

// fetchTiered is fetch that also reports fresh: the bytes of disk-cache
// blocks under dst that the disk cache tier fetched from the remote source
// now (0 when the disk served them all, and for objects below no disk
// cache).
func (c *Context) fetchTiered(o source.Object, dst []byte, off uint64, path int) (r served, fresh uint64, err error) {
	if s, ok := c.src.(*sources); ok {
		if d, ok := s.of(o).(*diskcache.Source); ok {
			if fresh, err = d.ReadAtTiers(o, dst, off); err != nil {
				return served{}, 0, err
			}
			return served{buffered: uint64(len(dst))}, fresh, nil
		}
	}
	r, err = c.fetch(o, dst, off, path)
	return r, 0, err
}

// Open opens a URL remotely and anything else as a local path.
func (s *sources) Open(name string, trust time.Duration) (source.Object, uint64, error) {
	if !remote.HasScheme(name) {
		return s.local.Open(name, trust)
	}
	if !remote.IsURL(name) { // ftp://, gs://...: refused by name, not looked for on disk
		_, err := remote.ParseURL(name)
		return nil, 0, err
	}
	r, err := s.remoteSource()
	if err != nil {
		return nil, 0, err
	}
	return r.Open(name, trust)
}

func (s *sources) ReadAt(o source.Object, dst []byte, off uint64, path int) (int, error) {
	return s.of(o).ReadAt(o, dst, off, path)
}

func (s *sources) ReadNoWait(o source.Object, dst []byte, off uint64) bool {
	return s.of(o).ReadNoWait(o, dst, off)
}

func (s *sources) Resident(o source.Object, off, size uint64, samples int) (uint64, bool) {
	return s.of(o).Resident(o, off, size, samples)
}

func (s *sources) DirectRefused(o source.Object) bool { return s.of(o).DirectRefused(o) }

// ReadBatch batches local files only: readv sends only its local groups to
// the batch; URL elements go through readvRemote.
func (s *sources) ReadBatch(b []source.BatchRead, nowait bool) (int, error) {
	return s.local.ReadBatch(b, nowait)
}

func (s *sources) CanBatch() (bool, string) { return s.local.CanBatch() }

// errRemoteHere is the error of a call on the CUDA target given a URL.
func errRemoteHere(name string) error {
	return errs.At(errs.Unsupported, "open", remote.Redact(name), -1,
		"the CUDA target reads local files only so far; s3:// and http(s):// objects are read on the CPU target")
}

// displayName is o's name for messages: a URL with its query (a presigned
// signature) redacted.
func displayName(o source.Object) string { return remote.Redact(o.Name()) }
