package iopath

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI this file uses, from include/uapi/linux/io_uring.h
// (https://github.com/torvalds/linux/blob/master/include/uapi/linux/io_uring.h).
// golang.org/x/sys/unix has the syscall numbers but not these types, and the
// project uses no cgo and no liburing in runtime/.
const (
	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000

	uringSetupClamp       = 1 << 4 // clamp entries to the kernel's maximum
	uringSetupSubmitAll   = 1 << 7 // 5.18: a failing SQE does not stop the rest
	uringSetupCoopTaskrun = 1 << 8 // 5.19: no IPI for completions; we always enter to reap

	uringFeatSingleMmap = 1 << 0 // 5.4: SQ and CQ rings share one mapping

	uringEnterGetEvents = 1 << 0

	uringOpRead = 22 // IORING_OP_READ (5.6): pread into one buffer
)

type uringSQOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type uringCQOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  uringSQOffsets
	CQOff                                                                  uringCQOffsets
}

// uringSQE is struct io_uring_sqe (64 bytes) as a read uses it.
type uringSQE struct {
	Opcode      uint8
	Flags       uint8
	Ioprio      uint16
	FD          int32
	Off         uint64
	Addr        uint64
	Len         uint32
	RWFlags     uint32
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFDIn  int32
	Addr3       uint64
	_           uint64
}

// uringCQE is struct io_uring_cqe (16 bytes, no CQE32).
type uringCQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// ringEntries is the submission queue size of a pooled ring: a readv batch
// of more uncached elements is submitted in rounds of this many.
const ringEntries = 256

// ring is one io_uring instance with its mappings. A ring is used by one
// goroutine at a time (taken from and returned to ringPool), so the
// application-side indices need no locking; the shared head and tail words
// are accessed atomically because the kernel updates them.
type ring struct {
	fd        int
	mem       []byte // SQ ring (and CQ ring with uringFeatSingleMmap)
	cqMem     []byte // CQ ring when it is a separate mapping
	sqeMem    []byte
	submitAll bool // uringSetupSubmitAll accepted

	sqHead, sqTail *uint32
	sqMask         uint32
	sqes           []uringSQE
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []uringCQE
	entries        uint32

	pending []int32     // ReadBatch's queue of element indices; reused
	holding []BatchRead // the batch in flight (see ReadBatch)
}

// newRing sets up a ring of ringEntries entries. It asks for SUBMIT_ALL and
// COOP_TASKRUN and retries without them on kernels that refuse the flags
// (EINVAL). SINGLE_ISSUER is not used: a goroutine may run on a different
// OS thread at each batch, and that flag ties the ring to one thread.
func newRing() (*ring, error) {
	var p uringParams
	p.Flags = uringSetupSubmitAll | uringSetupCoopTaskrun | uringSetupClamp
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, ringEntries, uintptr(unsafe.Pointer(&p)), 0)
	if e == unix.EINVAL {
		p = uringParams{Flags: uringSetupClamp}
		fd, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, ringEntries, uintptr(unsafe.Pointer(&p)), 0)
	}
	if e != 0 {
		return nil, e
	}
	r := &ring{fd: int(fd), submitAll: p.Flags&uringSetupSubmitAll != 0, entries: p.SQEntries}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// mapRings maps the rings and the SQE array that setup described in p and
// fills the SQ index array with the identity (SQE k at slot k).
func (r *ring) mapRings(p *uringParams) error {
	sqSize := int(p.SQOff.Array) + int(p.SQEntries)*4
	cqSize := int(p.CQOff.CQEs) + int(p.CQEntries)*int(unsafe.Sizeof(uringCQE{}))
	single := p.Features&uringFeatSingleMmap != 0
	if single {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	prot, flags := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE
	if r.mem, err = unix.Mmap(r.fd, uringOffSQRing, sqSize, prot, flags); err != nil {
		return err
	}
	cq := r.mem
	if !single {
		if r.cqMem, err = unix.Mmap(r.fd, uringOffCQRing, cqSize, prot, flags); err != nil {
			return err
		}
		cq = r.cqMem
	}
	sqeSize := int(p.SQEntries) * int(unsafe.Sizeof(uringSQE{}))
	if r.sqeMem, err = unix.Mmap(r.fd, uringOffSQEs, sqeSize, prot, flags); err != nil {
		return err
	}
	u32 := func(b []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	r.sqHead, r.sqTail, r.sqMask = u32(r.mem, p.SQOff.Head), u32(r.mem, p.SQOff.Tail), *u32(r.mem, p.SQOff.RingMask)
	r.cqHead, r.cqTail, r.cqMask = u32(cq, p.CQOff.Head), u32(cq, p.CQOff.Tail), *u32(cq, p.CQOff.RingMask)
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&r.sqeMem[0])), p.SQEntries)
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Pointer(&cq[p.CQOff.CQEs])), p.CQEntries)
	arr := unsafe.Slice(u32(r.mem, p.SQOff.Array), p.SQEntries)
	for i := range arr {
		arr[i] = uint32(i)
	}
	return nil
}

// close unmaps the ring and closes its descriptor. Only for a ring with
// nothing in flight.
func (r *ring) close() {
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.mem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	unix.Close(r.fd)
}

// enter is io_uring_enter(2): submit toSubmit SQEs and, with wait, wait
// until minComplete completions are posted. It blocks (through the
// scheduler: a batch of cold reads can sleep on the disk).
func (r *ring) enter(toSubmit, minComplete uint32, wait bool) (int, unix.Errno) {
	var flags uintptr
	if wait {
		flags = uringEnterGetEvents
	}
	n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), flags, 0, 0)
	return int(n), e
}

// ringPool holds idle rings process-wide; a batch takes one, or sets up a
// new ring when all are busy, and returns it after its last completion.
var ringPool = make(chan *ring, 8)

// uringState: 0 not probed, 1 usable, 2 refused by the kernel (uringWhy).
var (
	uringState atomic.Int32
	uringMu    sync.Mutex
	uringWhy   string
)

// getRing returns an idle ring, or nil and why io_uring cannot be used.
func getRing() (*ring, string) {
	if uringState.Load() == 2 {
		return nil, UringUnavailable()
	}
	select {
	case r := <-ringPool:
		return r, ""
	default:
	}
	r, err := newRing()
	if err != nil {
		e, _ := err.(unix.Errno)
		switch e {
		case unix.ENOSYS, unix.EPERM, unix.EACCES, unix.EINVAL, unix.EOPNOTSUPP:
			// io_uring is compiled out, disabled (kernel.io_uring_disabled,
			// seccomp in containers) or too old: it will not come back.
			uringMu.Lock()
			uringWhy = "io_uring_setup: " + err.Error()
			uringMu.Unlock()
			uringState.Store(2)
		}
		return nil, "io_uring_setup: " + err.Error()
	}
	uringState.Store(1)
	return r, ""
}

// putRing returns an idle ring to the pool (or closes it when the pool is full).
func putRing(r *ring) {
	r.pending = r.pending[:0]
	select {
	case ringPool <- r:
	default:
		r.close()
	}
}

// UringUnavailable returns why the kernel refused io_uring ("" while it has
// not refused: never probed, or usable). Safe for concurrent use.
func UringUnavailable() string {
	if uringState.Load() != 2 {
		return ""
	}
	uringMu.Lock()
	defer uringMu.Unlock()
	return uringWhy
}
