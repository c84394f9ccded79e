package iopath

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// PreadNowait reads dst at off from the page cache only: one preadv2 with
// RWF_NOWAIT, which never waits for the disk. It reports ok when every byte of
// dst was resident and copied. On a miss the kernel has already started the
// readahead of the missing pages without waiting for it, so a blocking pread
// issued later mostly waits for I/O that is in flight: calling this over a
// whole batch first turns a queue of blocking reads into one deep queue, even
// though Go runs few blocking syscalls at once. Bytes it moved count as
// StorageBytes only when ok. It uses a raw syscall (no scheduler hand-off):
// RWF_NOWAIT never sleeps on I/O, so the hand-off would be pure overhead.
// Safe for concurrent use.
func (r *Reader) PreadNowait(fd int, dst []byte, off int64) (ok bool) {
	if len(dst) == 0 {
		return true
	}
	iov := unix.Iovec{Base: &dst[0]}
	iov.SetLen(len(dst))
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1,
			uintptr(off), uintptr(uint64(off)>>(8*unsafe.Sizeof(uintptr(0))-1)>>1), unix.RWF_NOWAIT)
		if e == unix.EINTR {
			continue
		}
		if e != 0 || int(n) != len(dst) {
			return false
		}
		r.st.StorageBytes.Add(uint64(n))
		return true
	}
}
