package files

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Racily clean files (git's term: https://git-scm.com/docs/racy-git).
//
// A cached byte is bound to its file's Identity, and every write changes the
// file's ctime, except when the write lands in the same timestamp tick as
// the ctime already recorded: file systems stamp inodes with a coarse clock
// (one jiffy, 1-10 ms; whole seconds on some). Bytes read while the ctime's
// tick may still be current can therefore change without the Identity
// changing, and a cache holding them would serve them stale forever. A new
// user found exactly that on ramfs: 1989 of 2000 same-size rewrites, each
// read back at once, came back stale through the DRAM cache.
//
// So the caches admit bytes of a File only once its ctime is older than the
// clock's tick (CacheSafe): a write after that gets a later ctime, which the
// freshness check sees. ctime, not mtime: user space can set mtime (touch -d,
// cp -p), never ctime. Linux 6.13 and later stamp a file whose timestamps
// were queried since its last change with a fine-grained time (multigrain
// timestamps, https://docs.kernel.org/filesystems/multigrain-ts.html), on the
// file systems that opt in; there any write after the fstat that made the
// Identity changes the ctime, and no wait is needed.

// racyWindow is how old a ctime with a sub-second part must be before the
// File's bytes may be cached: one tick of the coarse clock is at most 10 ms
// (CONFIG_HZ=100), doubled for the realtime clock's slew.
const racyWindow = 20 * time.Millisecond

// racyWindowSeconds applies to a ctime of whole seconds, the stamp of file
// systems with second (FAT: two-second) granularity.
const racyWindowSeconds = 2500 * time.Millisecond

// coarseForTest makes every File wait the racy window, as on a file system
// with coarse timestamps (ForceCoarseTimestamps).
var coarseForTest atomic.Bool

// ForceCoarseTimestamps is a test hook: while on, Files opened afterwards
// are treated as on a file system with coarse timestamps, whatever the
// kernel. It returns the function that restores the previous setting.
func ForceCoarseTimestamps(on bool) (restore func()) {
	old := coarseForTest.Swap(on)
	return func() { coarseForTest.Store(old) }
}

// fineCtime reports whether fsType (statfs f_type) stamps ctime
// fine-grained after a query: a multigrain file system on Linux 6.13 or
// later (ext4, xfs, btrfs and tmpfs opted in with 6.13).
func fineCtime(fsType uint32) bool {
	if coarseForTest.Load() || !multigrainKernel() {
		return false
	}
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// multigrainKernel reports whether the running kernel is 6.13 or later
// (read once).
var multigrainKernel = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 13)
})

// kernelAtLeast reports whether release (uname -r: "6.18.2-foo",
// "6.13-rc1") is at least major.minor; false when it does not parse.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, ok1 := leadingInt(parts[0])
	mi, ok2 := leadingInt(parts[1])
	return ok1 && ok2 && (ma > major || ma == major && mi >= minor)
}

// leadingInt parses the decimal digits that s starts with.
func leadingInt(s string) (int, bool) {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	v, err := strconv.Atoi(s[:n])
	return v, err == nil
}

// CacheSafe reports whether bytes read from f now may be kept by a cache:
// true on a file system with fine-grained ctimes, or once f's ctime is older
// than the coarse clock's tick (see above); then it stays true for f. A
// read of a File that is not yet safe is served but not cached. Thread-safe.
func (f *File) CacheSafe() bool {
	if f.fineTS || f.settled.Load() {
		return true
	}
	w := racyWindow
	if f.Ident.CtimeNs%1e9 == 0 {
		w = racyWindowSeconds
	}
	if time.Now().UnixNano()-f.Ident.CtimeNs <= int64(w) {
		return false
	}
	f.settled.Store(true)
	return true
}
