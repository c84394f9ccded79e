package engine

import (
	"errors"
	"io"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
)

// fileReader reads an acquired File's descriptor as an io.ReaderAt for the
// format parsers (safetensors headers, tar members): the bytes parsed are
// those of the version whose ID a handle then remembers, even if the path is
// replaced meanwhile. Metadata reads are not counted as read requests.
type fileReader struct {
	c *Context
	f *files.File
}

// ReadAt reads len(p) bytes at off; fewer only at end of file, with io.EOF.
func (r fileReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.c.rd.PreadFull(r.f.FD, p, off, r.f.Path, false, 0)
	if err != nil {
		return n, err
	}
	if n < len(p) {
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
