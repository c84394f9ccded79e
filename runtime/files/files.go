//go:build linux

// Package files maps paths to open descriptors and binds every cached byte to
// a file version.
//
// A Table keeps one File per path: a buffered descriptor, an O_DIRECT
// descriptor opened on first use, and the Identity (device, inode, size, mtime,
// ctime) the descriptor was opened at. Every Acquire stats the path again, so a
// file rewritten in place or atomically replaced by rename is noticed on the
// next read, and its new version gets a new ID: cache entries keyed by the old
// ID can never be served for it.
//
// Descriptors are reference counted. A File is closed only after the last
// Release, so a reader never preads a descriptor number that was closed (and
// perhaps reused for another file) under it.
//
// All Tables of a process share one descriptor budget, a share of the soft
// RLIMIT_NOFILE read at every open (budget.go): idle Files of any Table are
// closed, least recently used first, to stay within it, and an open that fails
// with EMFILE or ENFILE gives idle descriptors back and retries.
package files

import (
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/stats"
)

// retryEINTR runs call until it fails with something other than EINTR: since
// Go 1.14 preemption signals interrupt slow syscalls (NFS, FUSE), and
// x/sys/unix does not retry them.
func retryEINTR(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

func openEINTR(path string, flags int) (fd int, err error) {
	err = retryEINTR(func() error {
		fd, err = unix.Open(path, flags, 0)
		return err
	})
	return fd, err
}

// DefaultAlign is the O_DIRECT alignment, in bytes, used for both memory and
// file offsets when statx does not report STATX_DIOALIGN: every logical block
// size Linux supports divides it, so it is always accepted.
const DefaultAlign = 4096

// Identity is what a cached byte is bound to: a changed file (other inode,
// size, mtime or ctime) never matches. Times are nanoseconds since the epoch.
//
// ctime is included because it changes on every write and metadata change and
// cannot be set from user space, so a writer that restores mtime (cp -p, tar,
// rsync -t) is still noticed.
type Identity struct {
	Dev, Ino         uint64
	Size             int64
	MtimeNs, CtimeNs int64
}

// IdentityOf is the Identity of the file an fstat or stat described.
// Thread safe (it reads only st).
func IdentityOf(st *unix.Stat_t) Identity {
	return Identity{
		Dev:     uint64(st.Dev),
		Ino:     uint64(st.Ino),
		Size:    st.Size,
		MtimeNs: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		CtimeNs: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}
}

// idSeed is per process: IDs only have to agree within one process, and a
// random seed keeps an attacker-chosen file from colliding on purpose.
var idSeed = maphash.MakeSeed()

// versionID derives the ID from the Identity instead of counting, so a File
// evicted from the table and opened again at the same version keeps its ID and
// its cache blocks. Hard links to one inode share an ID, which is right: they
// hold the same bytes.
func versionID(id Identity) uint64 {
	h := maphash.Comparable(idSeed, id)
	if h == 0 {
		h = 1 // 0 means "no version" to callers
	}
	return h
}

// File is one open version of a path. The exported fields never change after
// Acquire returns the File. A File is safe for concurrent use by every holder
// of a reference; it must not be used after the holder's Release.
type File struct {
	Path  string   // as given to Acquire; the table's key
	ID    uint64   // version id: the same for the same Identity, another one when the file changed
	Ident Identity // taken with fstat on FD, so it describes the bytes FD reads
	FD    int      // O_RDONLY|O_CLOEXEC descriptor for buffered preads; valid until the holder's Release

	t        *Table
	refs     atomic.Int64  // holders; the table's own link is not counted
	lastUse  atomic.Uint64 // lruTick at the latest Acquire, for LRU
	detached atomic.Bool   // no longer in the table: the last Release closes it
	closed   atomic.Bool   // descriptors closed; guards against closing twice
	resolved atomic.Int64  // monotonic ns of the last stat of Path that matched this File
	checked  atomic.Int64  // monotonic ns of the last check (fstat or stat) that matched this File
	localFS  bool          // on a local file system whose fstat never blocks (see fstatQuick)
	fineTS   bool          // its file system stamps ctime fine-grained after a query (racy.go)
	settled  atomic.Bool   // CacheSafe answered true once

	dmu      sync.Mutex  // serialises the first Direct call
	dReady   atomic.Bool // dfd, memAlign, offAlign, alignSrc are set and final
	dRefused atomic.Bool // the file system refused O_DIRECT for this file
	dfd      int
	memAlign int
	offAlign int
	alignSrc string
}

// Direct returns the O_DIRECT descriptor, opened on first use with
// O_RDONLY|O_DIRECT|O_CLOEXEC, and the alignments in bytes that a direct pread
// must honour: memAlign for the destination address, offAlign for the file
// offset and the length. If the file system refuses O_DIRECT (EINVAL at open,
// as tmpfs did before Linux 6.6), it returns refused=true with no error, and
// remembers that for this File. Other open failures are returned as errors and
// not remembered, so a transient one (EMFILE) is retried on the next call.
//
// The descriptor is reopened through /proc/self/fd, so it is the same inode as
// FD even if the path was replaced since Acquire. Without /proc it opens the
// path and checks device and inode, failing with errs.IO on a mismatch.
//
// Safe for concurrent use; the first call does two or three syscalls, later
// calls none.
func (f *File) Direct() (fd int, memAlign, offAlign int, refused bool, err error) {
	if f.dReady.Load() {
		return f.dfd, f.memAlign, f.offAlign, f.dRefused.Load(), nil
	}
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if f.dReady.Load() {
		return f.dfd, f.memAlign, f.offAlign, f.dRefused.Load(), nil
	}
	if f.closed.Load() {
		return -1, 0, 0, false, errs.At(errs.Closed, "open", f.Path, -1, "file was released")
	}
	dfd, err := openReclaiming(f.Path, f.openDirect)
	if err == unix.EINVAL {
		f.dfd, f.memAlign, f.offAlign = -1, DefaultAlign, DefaultAlign
		f.dRefused.Store(true)
		f.dReady.Store(true)
		return -1, DefaultAlign, DefaultAlign, true, nil
	}
	if err != nil {
		return -1, 0, 0, false, errs.FromErrno("open", f.Path, -1, err)
	}
	procFiles.held.Add(1)
	f.dfd = dfd
	f.memAlign, f.offAlign, f.alignSrc = dioAlign(dfd)
	f.dReady.Store(true)
	keepBudget() // never closes f: the caller holds a reference
	return f.dfd, f.memAlign, f.offAlign, false, nil
}

func (f *File) openDirect() (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECT | unix.O_CLOEXEC
	fd, err := openEINTR("/proc/self/fd/"+strconv.Itoa(f.FD), flags)
	if err == nil || err == unix.EINVAL {
		return fd, err
	}
	// No usable /proc (some sandboxes): the path may name another file by now,
	// so accept it only if it is the same inode.
	fd, err = openEINTR(f.Path, flags)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if uint64(st.Dev) != f.Ident.Dev || st.Ino != f.Ident.Ino {
		unix.Close(fd)
		return -1, errs.At(errs.IO, "open", f.Path, -1, "replaced while opening its O_DIRECT descriptor")
	}
	return fd, nil
}

// dioAlign asks statx for the direct-I/O alignment. The read-specific offset
// alignment (Linux 6.14+) is used when reported, because it can be smaller
// than the general one (xfs on some devices) and only reads happen here.
func dioAlign(fd int) (memAlign, offAlign int, src string) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN|unix.STATX_DIO_READ_ALIGN, &stx)
	// Zero values with the bit set mean "this file does not support direct
	// I/O", yet open succeeded, so the safe default is the better answer.
	if err != nil || stx.Mask&unix.STATX_DIOALIGN == 0 || stx.Dio_mem_align == 0 || stx.Dio_offset_align == 0 {
		return DefaultAlign, DefaultAlign, "default"
	}
	off := int(stx.Dio_offset_align)
	if stx.Mask&unix.STATX_DIO_READ_ALIGN != 0 && stx.Dio_read_offset_align != 0 {
		off = int(stx.Dio_read_offset_align)
	}
	return int(stx.Dio_mem_align), off, "statx"
}

// AlignSource says where Direct's alignments came from: "statx" (the kernel
// reported STATX_DIOALIGN), "default" (4096 for both), or "" when Direct has
// not succeeded yet or O_DIRECT was refused. Safe for concurrent use.
func (f *File) AlignSource() string {
	if !f.dReady.Load() {
		return ""
	}
	return f.alignSrc
}

// Name returns the path the File was acquired by (source.Object).
func (f *File) Name() string { return f.Path }

// Version returns the File's version ID (source.Object).
func (f *File) Version() uint64 { return f.ID }

// Size returns the file's size in bytes at this version (source.Object).
func (f *File) Size() uint64 { return uint64(f.Ident.Size) }

// DirectRefused reports whether O_DIRECT is known not to work for this File
// (refused at open, or marked by MarkDirectRefused). It opens nothing: false
// also means "not tried yet". Safe for concurrent use; no syscall.
func (f *File) DirectRefused() bool { return f.dRefused.Load() }

// MarkDirectRefused records that O_DIRECT does not work for this File although
// the open succeeded (EINVAL on the first pread): later Direct calls return
// refused=true. The direct descriptor stays open until the File is closed,
// because other holders may have a pread in flight on it. Safe for concurrent
// use.
func (f *File) MarkDirectRefused() {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	if !f.dReady.Load() {
		f.dfd, f.memAlign, f.offAlign = -1, DefaultAlign, DefaultAlign
	}
	f.dRefused.Store(true)
	f.dReady.Store(true)
}

// Release drops the reference taken by Acquire. The File must not be used
// afterwards. Safe for concurrent use; it never blocks on I/O except to close
// the descriptors of a File that left the table, or to trim a table that grew
// beyond its bound while every File was in use.
func (f *File) Release() {
	n := f.refs.Add(-1)
	if n < 0 {
		panic("files: Release without a matching Acquire on " + f.Path)
	}
	if n > 0 {
		return
	}
	if f.detached.Load() {
		f.close()
		return
	}
	if t := f.t; t.over.Load() {
		t.mu.Lock()
		t.evictLocked()
		t.mu.Unlock()
	}
	if procFiles.over.Load() {
		keepBudget()
	}
}

// close closes both descriptors once. Callers guarantee no holder is left.
func (f *File) close() {
	if !f.closed.CompareAndSwap(false, true) {
		return
	}
	unix.Close(f.FD)
	procFiles.held.Add(-1)
	f.dmu.Lock()
	if f.dReady.Load() && f.dfd >= 0 {
		if h := f.t.directClosed; h != nil {
			h(f.dfd)
		}
		unix.Close(f.dfd)
		procFiles.held.Add(-1)
	}
	f.dmu.Unlock()
}

// Table maps paths to open Files. It holds at most maxOpen of them, and the
// process's Tables together hold at most Budget() descriptors; either bound
// is exceeded only while the extra Files are all in use, and trimmed back as
// they are released. All methods are safe for concurrent use.
type Table struct {
	maxOpen int
	st      *stats.Counters

	mu     sync.RWMutex
	byPath map[string]*File
	closed bool

	// recheck is how long a File's path resolution is trusted before Acquire
	// stats the path again; in between, Acquire only fstats the open
	// descriptor. 0: stat the path on every call.
	recheck time.Duration
	over    atomic.Bool // the table holds more than maxOpen Files and all extra ones were busy

	// directClosed, if set, is called with a File's O_DIRECT descriptor just
	// before it is closed (no holder is left), so a registration of that
	// descriptor elsewhere (cuFile) can be dropped first.
	directClosed func(fd int)

	mirror Mirror // SetMirror; nil: none
}

// SetDirectCloseHook makes the table call h(fd) with each O_DIRECT descriptor
// just before closing it, when no holder of its File is left. Set it before
// the first Acquire; it is not synchronised with Files being closed.
func (t *Table) SetDirectCloseHook(h func(fd int)) { t.directClosed = h }

// NewTable returns an empty Table that keeps at most maxOpen Files (values < 1
// count as 1) while they are idle, and counts FilesOpened, FilesEvicted and
// StaleInvalidations in st (nil: not counted). The Table shares the process's
// descriptor budget (Budget) with every other Table until Close; its idle
// Files may be closed to make room for another Table's (FilesEvicted).
func NewTable(maxOpen int, st *stats.Counters) *Table {
	if maxOpen < 1 {
		maxOpen = 1
	}
	if st == nil {
		st = new(stats.Counters)
	}
	t := &Table{maxOpen: maxOpen, st: st, byPath: make(map[string]*File)}
	register(t)
	return t
}

// Acquire returns an open File for path's current version with one reference
// taken; the caller must Release it.
//
// It stats path on every call (one syscall, no allocation for paths under 512
// bytes), so a file rewritten in place or atomically replaced is noticed at
// once. If the table's File still has the same Identity it is reused under a
// read lock. Otherwise a new descriptor is opened (FilesOpened++); if an older
// version of the path was open, it leaves the table (StaleInvalidations++;
// closed once its holders release it) and staleID is its ID, so the caller can
// drop cache blocks of that version. staleID is 0 otherwise.
//
// Errors (errs.Error, op "open"): a directory gives errs.IsDir, a missing path
// errs.NotFound, EACCES errs.Permission, anything but a regular file
// errs.Unsupported, and a closed Table errs.Closed.
//
// When the table holds more than maxOpen Files, the least recently acquired
// idle ones are closed (FilesEvicted++), which scans the table once per
// eviction. Safe for concurrent use.
func (t *Table) Acquire(path string) (f *File, staleID uint64, err error) {
	return t.AcquireTrusting(path, 0)
}

// Trust values of AcquireTrusting.
const (
	TrustNone    time.Duration = 0  // check the file now (strict freshness)
	TrustForever time.Duration = -1 // never re-check an open File (validate at open)
)

// AcquireTrusting is Acquire that trusts an open File checked less than trust
// ago (TrustForever: checked when it was opened, never since; TrustNone: as
// Acquire). A trusted File is returned with no syscall, so a file changed in
// the meantime is served as the version last checked: callers use it only for
// data the user declared immutable or tolerant of that bound. Every check of a
// File already in the table counts one Revalidations. Safe for concurrent use.
func (t *Table) AcquireTrusting(path string, trust time.Duration) (f *File, staleID uint64, err error) {
	if f := t.acquireFast(path, trust); f != nil {
		return f, 0, nil
	}
	var st unix.Stat_t
	if err := retryEINTR(func() error { return statPath(path, &st) }); err != nil {
		return nil, 0, errs.FromErrno("open", path, -1, err)
	}
	if err := checkType(path, st.Mode); err != nil {
		return nil, 0, err
	}
	id := IdentityOf(&st)

	t.mu.RLock()
	if f := t.byPath[path]; f != nil && f.Ident == id && !t.closed {
		f.refs.Add(1)
		f.lastUse.Store(lruTick.Add(1))
		now := nanotime()
		f.resolved.Store(now)
		f.checked.Store(now)
		t.mirrorChecked(f)
		t.mu.RUnlock()
		t.st.Revalidations.Add(1)
		return f, 0, nil
	}
	closed := t.closed
	t.mu.RUnlock()
	if closed {
		return nil, 0, errs.At(errs.Closed, "open", path, -1, "file table is closed")
	}
	return t.open(path)
}

func checkType(path string, mode uint32) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return errs.FromErrno("open", path, -1, unix.EISDIR)
	}
	return errs.At(errs.NotRegular, "open", path, -1, "not a regular file (device, FIFO, socket)")
}

// fsKind reports whether fd is on a pseudo-file system whose regular files
// have no real size (procfs, sysfs, ...: stat says 0 or 4096 whatever they
// hold, so ranged reads cannot be checked against end of file), and whether it
// is on a local disk or memory file system, whose fstat answers from the inode
// in memory and never waits on a device or a server (NFS and FUSE may).
// fineTS: it stamps ctime fine-grained after a query (fineCtime, racy.go).
func fsKind(fd int) (pseudo, local, fineTS bool) {
	var sf unix.Statfs_t
	if unix.Fstatfs(fd, &sf) != nil {
		return false, false, false
	}
	fineTS = fineCtime(uint32(sf.Type))
	switch uint32(sf.Type) {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC, unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC,
		unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC, unix.SECURITYFS_MAGIC,
		unix.BPF_FS_MAGIC, unix.PSTOREFS_MAGIC, unix.EFIVARFS_MAGIC:
		return true, false, fineTS
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC,
		unix.TMPFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC:
		return false, true, fineTS
	}
	return false, false, fineTS
}

// open is Acquire's slow path: a new descriptor, installed under the write
// lock. The syscalls run outside the lock so readers of other files never wait
// for an open.
func (t *Table) open(path string) (*File, uint64, error) {
	// O_NONBLOCK: if path became a FIFO since the stat, open must not hang
	// waiting for a writer. It is cleared again below for regular files.
	fd, err := openReclaiming(path, func() (int, error) {
		return openEINTR(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK)
	})
	if err != nil {
		return nil, 0, errs.FromErrno("open", path, -1, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, errs.FromErrno("open", path, -1, err)
	}
	if err := checkType(path, st.Mode); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	pseudo, local, fineTS := fsKind(fd)
	if pseudo {
		unix.Close(fd)
		return nil, 0, errs.At(errs.NotRegular, "open", path, -1,
			"a pseudo-file system file (procfs, sysfs, ...): its size is not known, read it with read(2)")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return nil, 0, errs.FromErrno("open", path, -1, err)
	}
	id := IdentityOf(&st)
	// The path may be a view of caller memory (capi passes C strings without
	// copying them): the table keeps its own copy.
	path = strings.Clone(path)
	procFiles.held.Add(1) // f.close gives it back
	f := &File{Path: path, ID: versionID(id), Ident: id, FD: fd, t: t, dfd: -1, localFS: local, fineTS: fineTS}
	f.refs.Store(1)
	now := nanotime()
	f.resolved.Store(now)
	f.checked.Store(now)
	f, staleID, err := t.install(f)
	keepBudget() // after t.mu is released: the process trim takes every Table's lock
	return f, staleID, err
}

// install puts the freshly opened f into the table under the write lock, or
// shares the File another goroutine installed for the same version.
func (t *Table) install(f *File) (*File, uint64, error) {
	path, id := f.Path, f.Ident
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		f.close()
		return nil, 0, errs.At(errs.Closed, "open", path, -1, "file table is closed")
	}
	f.lastUse.Store(lruTick.Add(1))
	cur := t.byPath[path]
	if cur != nil && cur.Ident == id {
		// Another goroutine opened the same version first: share its File.
		f.close()
		cur.refs.Add(1)
		cur.lastUse.Store(f.lastUse.Load())
		cur.resolved.Store(nanotime())
		t.mirrorChecked(cur)
		return cur, 0, nil
	}
	t.st.FilesOpened.Add(1)
	if cur != nil && cur.Ident.CtimeNs > id.CtimeNs {
		// We opened before a concurrent replacement that another goroutine has
		// already installed. Our version was current when we looked, so the
		// read may use it, but it must not push the newer one out.
		f.detached.Store(true)
		return f, 0, nil
	}
	var staleID uint64
	if cur != nil {
		staleID = cur.ID
		t.st.StaleInvalidations.Add(1)
		t.detachLocked(cur)
	}
	t.byPath[path] = f
	if t.mirror != nil {
		t.mirror.Installed(f)
	}
	if len(t.byPath) > t.maxOpen {
		t.evictLocked()
	}
	return f, staleID, nil
}

// detachLocked removes f from the table; it is closed now if idle, otherwise
// by its last Release. Caller holds t.mu for writing, which keeps Acquire from
// taking a new reference in between.
func (t *Table) detachLocked(f *File) {
	if t.byPath[f.Path] == f {
		delete(t.byPath, f.Path)
		if t.mirror != nil {
			t.mirror.Detached(f)
		}
	}
	f.detached.Store(true)
	if f.refs.Load() == 0 {
		f.close()
	}
}

// evictLocked closes least recently acquired idle Files until the table is
// within its bound. Caller holds t.mu for writing.
func (t *Table) evictLocked() {
	for len(t.byPath) > t.maxOpen {
		var victim *File
		for _, f := range t.byPath {
			if f.refs.Load() != 0 {
				continue
			}
			if u := t.lastUseOf(f); victim == nil || u < victim.lastUse.Load() {
				victim = f
			}
		}
		if victim == nil {
			t.over.Store(true) // every File is busy; the next idle Release trims
			return
		}
		t.detachLocked(victim)
		t.st.FilesEvicted.Add(1)
	}
	t.over.Store(false)
}

// Drop removes path's File from the table ("" = every File) and returns the
// IDs removed. Idle Files are closed now; busy ones are closed by their last
// Release, and their current holders keep reading them undisturbed. The next
// Acquire opens a fresh descriptor. Safe for concurrent use.
func (t *Table) Drop(path string) []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropLocked(path)
}

func (t *Table) dropLocked(path string) []uint64 {
	var ids []uint64
	if path != "" {
		if f := t.byPath[path]; f != nil {
			ids = append(ids, f.ID)
			t.detachLocked(f)
		}
		return ids
	}
	for _, f := range t.byPath {
		ids = append(ids, f.ID)
		t.detachLocked(f)
	}
	t.over.Store(false)
	return ids
}

// Len returns how many Files the table holds, busy or idle. Safe for
// concurrent use.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byPath)
}

// Close drops every File (as Drop("")) and makes later Acquire calls fail with
// errs.Closed. Files still held stay usable until released. Safe to call more
// than once and concurrently with other methods.
func (t *Table) Close() {
	t.mu.Lock()
	t.closed = true
	t.dropLocked("")
	t.mu.Unlock()
	unregister(t) // after t.mu: procFiles.mu is never taken under a Table's lock
}

// epoch anchors nanotime: time.Since on it reads the monotonic clock.
var epoch = time.Now()

func nanotime() int64 { return int64(time.Since(epoch)) }

// SetPathRecheck sets how long a resolved path is trusted (see Table.recheck).
// Call it before the table is used.
func (t *Table) SetPathRecheck(d time.Duration) { t.recheck = d }

// acquireFast reuses the open File of path without opening anything. A File
// checked less than trust ago (any time for TrustForever) is returned with no
// syscall. Otherwise, when its path was resolved less than recheck ago, an
// fstat of its descriptor must show the same Identity and a link count above
// zero. fstat costs about a third of a path stat here, and it still catches
// every change to the file itself: a write or truncate changes
// size/mtime/ctime, and a rename over it or an unlink changes its ctime and
// link count. Only a swap of a parent directory or symlink leaves the old file
// untouched; the periodic path stat bounds that to recheck.
// Returns nil when the slow path must decide.
func (t *Table) acquireFast(path string, trust time.Duration) *File {
	if len(path) == 0 || (trust == TrustNone && (t.recheck <= 0 || path[0] != '/')) {
		// A relative path names another file after a chdir; only a stat of
		// the path itself can tell, so strict reads of relative paths take
		// the slow path.
		return nil
	}
	t.mu.RLock()
	f := t.byPath[path]
	if f == nil || t.closed {
		t.mu.RUnlock()
		return nil
	}
	f.refs.Add(1)
	t.mu.RUnlock()
	f.lastUse.Store(lruTick.Add(1))
	if trust == TrustForever {
		return f
	}
	now := nanotime()
	if trust > 0 && now-f.checked.Load() < int64(trust) {
		return f
	}
	if t.recheck <= 0 || path[0] != '/' || now-f.resolved.Load() > int64(t.recheck) {
		f.Release()
		return nil
	}
	var st unix.Stat_t
	if err := f.fstat(&st); err != nil || st.Nlink == 0 || IdentityOf(&st) != f.Ident {
		f.Release()
		return nil
	}
	t.st.Revalidations.Add(1)
	f.checked.Store(now)
	t.mirrorChecked(f)
	return f
}

// fstat stats f's descriptor, retrying EINTR.
func (f *File) fstat(st *unix.Stat_t) error {
	if f.localFS {
		return fstatQuick(f.FD, st)
	}
	return retryEINTR(func() error { return unix.Fstat(f.FD, st) })
}

// VersionOf returns the ID that path's current version has (or would have)
// in any Table, from one stat and without opening the file, so a caller can
// drop cache blocks of a file whose descriptor is no longer open.
func VersionOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := retryEINTR(func() error { return statPath(path, &st) }); err != nil {
		return 0, errs.FromErrno("stat", path, -1, err)
	}
	return versionID(IdentityOf(&st)), nil
}
