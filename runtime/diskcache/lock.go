package diskcache

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The lock file serializes, across processes, every change to the set of
// entries and to the usage it records: flock(2) LOCK_EX on it while
// reserving room (and evicting), committing, and dropping entries. Readers
// take no lock: an entry appears whole by rename(2) and an unlinked entry
// stays readable through a descriptor already open.
//
// Its first 16 bytes record the bytes the directory holds: "MTDCUSE1" and
// a little-endian uint64. Anything else there (a new or damaged file)
// makes the next holder rescan the directory.
const (
	lockName   = "memtier-diskcache.lock"
	usageMagic = "MTDCUSE1"
)

// lock takes the process mutex, then the file lock. flock locks belong to
// an open file description, which every goroutine of this Cache shares, so
// the mutex is what excludes goroutines from each other.
func (c *Cache) lock() error {
	c.mu.Lock()
	for {
		err := unix.Flock(int(c.lockF.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			if err != nil {
				c.mu.Unlock()
			}
			return err
		}
	}
}

func (c *Cache) unlock() {
	_ = unix.Flock(int(c.lockF.Fd()), unix.LOCK_UN)
	c.mu.Unlock()
}

// readUsage returns the recorded usage in bytes; ok is false when the
// record is missing or damaged. Call with the lock held.
func (c *Cache) readUsage() (uint64, bool) {
	var b [16]byte
	if n, err := c.lockF.ReadAt(b[:], 0); n != len(b) || err != nil || string(b[:8]) != usageMagic {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

// writeUsage records u bytes. Call with the lock held. A failed write
// leaves a record the next holder may find damaged, and rescans for.
func (c *Cache) writeUsage(u uint64) {
	var b [16]byte
	copy(b[:], usageMagic)
	binary.LittleEndian.PutUint64(b[8:], u)
	_, _ = c.lockF.WriteAt(b[:], 0)
	c.used.Store(u)
}
