package source

// BatchRead is one range of a batched read: fill Dst from Obj at byte offset
// Off (the range inside Obj's size). ReadBatch sets Err and WouldBlock.
type BatchRead struct {
	Obj Object
	Dst []byte
	Off uint64

	// Err is nil when Dst was filled; errs.EOF when Obj no longer holds the
	// range (the file shrank), else the read's error.
	Err error
	// WouldBlock (nowait batches only, Err nil) means the bytes were not
	// close (the page cache) and were not waited for; the Source may have
	// started bringing them closer. Dst holds no defined bytes then.
	WouldBlock bool
}

// BatchReader is an optional interface of a Source that reads many ranges
// with one submission (Local: io_uring), so that a batch costs fewer
// syscalls than one read per range. The engine's readv uses it for the
// ranges that come straight from the source on the buffered path.
type BatchReader interface {
	// ReadBatch fills every element of b, each independently (its own Err
	// and WouldBlock). nowait: read only what is close, as ReadNoWait does.
	// It returns how many submissions it made, and a non-nil error, with
	// nothing read, when the Source cannot batch here (the caller reads the
	// ranges one by one). Every read has finished when it returns. Safe for
	// concurrent use.
	ReadBatch(b []BatchRead, nowait bool) (submits int, err error)

	// CanBatch reports false, and why, once the Source knows it cannot
	// batch here (ReadBatch would fail); true while it can or has not
	// tried yet. It does no I/O. Safe for concurrent use.
	CanBatch() (ok bool, why string)
}
