package source

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
)

// batchPool recycles ReadBatch's element arrays (a readv batch is one call).
var batchPool = sync.Pool{New: func() any { return new([]iopath.BatchRead) }}

// CanBatch is false once the kernel has refused io_uring
// (iopath.UringUnavailable).
func (l *Local) CanBatch() (bool, string) {
	why := iopath.UringUnavailable()
	return why == "", why
}

// ReadBatch reads b with iopath.Reader.ReadBatch (one io_uring submission
// per 256 ranges) on each file's buffered descriptor. A range the file no
// longer holds whole is errs.EOF (Shrunk); a failed read is
// errs.FromErrno("read", path, offset of the failing read, errno). The
// error is errs.Unsupported when the kernel refuses io_uring
// (iopath.UringUnavailable says why). Safe for concurrent use.
func (l *Local) ReadBatch(b []BatchRead, nowait bool) (int, error) {
	rp := batchPool.Get().(*[]iopath.BatchRead)
	defer batchPool.Put(rp)
	if cap(*rp) < len(b) {
		*rp = make([]iopath.BatchRead, len(b))
	}
	rb := (*rp)[:len(b)]
	defer clear(rb) // drop the references to the destinations
	for i := range b {
		rb[i] = iopath.BatchRead{FD: b[i].Obj.(*files.File).FD, Dst: b[i].Dst, Off: int64(b[i].Off)}
	}
	submits, err := l.RD.ReadBatch(rb, nowait)
	if err != nil {
		return 0, err
	}
	for i := range b {
		e, r := &b[i], &rb[i]
		e.Err, e.WouldBlock = nil, false
		f := e.Obj.(*files.File)
		switch {
		case r.Errno == unix.EAGAIN && nowait:
			e.WouldBlock = true
		case r.Errno != 0:
			e.Err = errs.FromErrno("read", f.Path, int64(e.Off)+int64(r.N), r.Errno)
		case r.N < len(e.Dst):
			e.Err = Shrunk(f, e.Off, uint64(len(e.Dst)))
		}
	}
	return submits, nil
}
