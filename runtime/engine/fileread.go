package engine

import (
	"errors"
	"io"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/source"
)

// metaWindow is how much of a remote object one metadata read fetches when
// the parser asks for less: tar headers sit a member apart and the parser
// reads a few KiB around each, so one ranged GET of 1 MiB answers the headers
// of every member under it instead of one round trip per header (a member
// larger than the window costs one GET for its header). The first
// remote.DefaultOpenBytes of an object are already held by its Object, so a
// small safetensors header costs no GET at all.
const metaWindow = 1 << 20

// objectReader reads an open object as an io.ReaderAt for the format parsers
// (safetensors headers, tar members, index files): the bytes parsed are those
// of the version whose ID a handle then remembers, even if the name is
// replaced meanwhile. Metadata reads are not counted as read requests. Not
// safe for concurrent use (one parser at a time): it keeps the last window
// of a remote object.
type objectReader struct {
	c      *Context
	o      source.Object
	win    []byte // remote objects: the last window read, at winOff
	winOff uint64
}

// metaReader returns the reader of o's metadata (objectReader).
func (c *Context) metaReader(o source.Object) *objectReader {
	return &objectReader{c: c, o: o}
}

// readSpan clamps a ReadAt of n bytes at off to an object of size bytes:
// the range [start, start+want) to read, or want 0 with the answer's error
// (nil for an empty read at or before the end, io.EOF at or past it).
func readSpan(size uint64, off int64, n int) (start, want uint64, err error) {
	if off < 0 || uint64(off) >= size {
		if n == 0 && off >= 0 {
			return 0, 0, nil
		}
		return 0, 0, io.EOF
	}
	return uint64(off), min(uint64(n), size-uint64(off)), nil
}

// ReadAt reads len(p) bytes at off; fewer only at the object's end, with
// io.EOF. A local file is read with pread on its descriptor; a remote object
// through the source, in windows of metaWindow.
func (r *objectReader) ReadAt(p []byte, off int64) (int, error) {
	if f, ok := r.o.(*files.File); ok {
		n, err := r.c.rd.PreadFull(f.FD, p, off, f.Path, false, 0)
		if err != nil {
			return n, err
		}
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	size := r.o.Size()
	start, want, err := readSpan(size, off, len(p))
	if want == 0 {
		return 0, err
	}
	if start < r.winOff || start+want > r.winOff+uint64(len(r.win)) {
		if want >= metaWindow {
			if _, err := r.c.src.ReadAt(r.o, p[:want], start, source.PathBuffered); err != nil {
				return 0, err
			}
			return r.done(int(want), len(p))
		}
		win := make([]byte, min(metaWindow, size-start))
		if _, err := r.c.src.ReadAt(r.o, win, start, source.PathBuffered); err != nil {
			return 0, err
		}
		r.win, r.winOff = win, start
	}
	n := copy(p[:want], r.win[start-r.winOff:])
	return r.done(n, len(p))
}

// done is ReadAt's answer for n bytes read of the asked for.
func (r *objectReader) done(n, asked int) (int, error) {
	if n < asked {
		return n, io.EOF
	}
	return n, nil
}

// stampPath names path in a parser's error that names no file.
func stampPath(err error, path string) error {
	var me *errs.Error
	if errors.As(err, &me) && me.Path == "" {
		me.Path = path
	}
	return err
}
