//go:build linux

package iopath

import (
	"math"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
)

// residentVecPages is how many pages one mincore call covers; its result
// vector lives on the stack (16 MiB of file per call with 4 KiB pages).
const residentVecPages = 4096

// Resident returns how many bytes of [off, off+n) of fd are in the page cache.
//
// It maps the range PROT_READ and asks mincore. Nothing touches the mapping,
// so there is no page fault and no SIGBUS even if the file shrinks meanwhile;
// pages past end of file count as not resident. n == 0 gives 0. Any failure
// returns (0, err) and the caller should treat the range as not resident. The
// answer is a snapshot: pages may be evicted or read in right after.
// Safe for concurrent use; costs mmap + one mincore per 16 MiB + munmap.
func Resident(fd int, off, n int64) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	ps := int64(unix.Getpagesize())
	base, start, length, err := mapRange(fd, off, n)
	if err != nil {
		return 0, err
	}
	defer unix.MunmapPtr(base, uintptr(length))

	var vec [residentVecPages]byte
	var resident int64
	for pos := int64(0); pos < length; {
		chunk := min(length-pos, residentVecPages*ps)
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(base)+uintptr(pos), uintptr(chunk),
			uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 {
			return 0, errs.FromErrno("mincore", "", off, e)
		}
		pages := (chunk + ps - 1) / ps
		for k := int64(0); k < pages; k++ {
			if vec[k]&1 == 0 {
				continue
			}
			pg := start + pos + k*ps
			resident += min(pg+ps, off+n) - max(pg, off)
		}
		pos += chunk
	}
	return resident, nil
}

// DropPageCache asks the kernel to evict the clean cached pages of
// [off, off+n) of fd (n == 0: to end of file) with
// posix_fadvise(POSIX_FADV_DONTNEED). No privilege is needed; it is what
// fio's invalidate option does. Dirty pages stay until written back, so
// callers that just wrote the file fsync it first. For cold-cache benchmarks
// and tests. Safe for concurrent use.
func DropPageCache(fd int, off, n int64) error {
	if err := unix.Fadvise(fd, off, n, unix.FADV_DONTNEED); err != nil {
		return errs.FromErrno("fadvise", "", off, err)
	}
	return nil
}

// ResidentEstimate estimates how many bytes of [off, off+n) of fd are in the
// page cache by asking mincore about at most samples pages spread evenly over
// the range. A full Resident scan walks every page (about 15 ms per GiB here),
// which is a sixth of reading that GiB from the page cache; the policy only
// needs "mostly warm or mostly cold", and 64 samples cost tens of microseconds.
// Failures return (0, err) like Resident. Safe for concurrent use.
func ResidentEstimate(fd int, off, n int64, samples int) (int64, error) {
	ps := int64(unix.Getpagesize())
	if samples < 1 || n <= int64(samples)*ps {
		return Resident(fd, off, n)
	}
	base, _, length, err := mapRange(fd, off, n)
	if err != nil {
		return 0, err
	}
	defer unix.MunmapPtr(base, uintptr(length))
	var vec [1]byte
	hits := 0
	step := alignDown(length/int64(samples), ps)
	for k := 0; k < samples; k++ {
		_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(base)+uintptr(int64(k)*step), uintptr(ps),
			uintptr(unsafe.Pointer(&vec[0])))
		if e != 0 {
			return 0, errs.FromErrno("mincore", "", off, e)
		}
		if vec[0]&1 != 0 {
			hits++
		}
	}
	return n * int64(hits) / int64(samples), nil
}

// mapRange maps the pages covering [off, off+n) of fd PROT_READ for mincore,
// without touching them. MmapPtr, not Mmap: Mmap records every mapping in a
// global map under a mutex, which these short-lived probes do not need. The
// caller unmaps base/length.
func mapRange(fd int, off, n int64) (base unsafe.Pointer, start, length int64, err error) {
	ps := int64(unix.Getpagesize())
	if off < 0 || n < 0 || off > math.MaxInt64-n-ps {
		return nil, 0, 0, errs.At(errs.InvalidArg, "mincore", "", off, "bad range of %d bytes", n)
	}
	start = alignDown(off, ps)
	length = off + n - start
	base, err = unix.MmapPtr(fd, start, nil, uintptr(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, 0, 0, errs.FromErrno("mmap", "", off, err)
	}
	return base, start, length, nil
}
