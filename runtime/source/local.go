package source

import (
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
)

// Local is the Source of local files: paths through a files.Table (one open
// descriptor per path, file identity as the version), read by an
// iopath.Reader (parallel buffered pread, O_DIRECT with bounce buffers).
// Its Objects are *files.File.
type Local struct {
	Files *files.Table
	RD    *iopath.Reader
	// DirectRequired makes a refused O_DIRECT an error (errs.DirectIO)
	// instead of a buffered fallback.
	DirectRequired bool
}

// File returns the *files.File behind an Object of a Local source, for the
// paths that still need its descriptors (GPU reads, chunk loads).
func File(o Object) *files.File { return o.(*files.File) }

// Open opens path through the descriptor table (files.Table.AcquireTrusting).
func (l *Local) Open(path string, trust time.Duration) (Object, uint64, error) {
	f, stale, err := l.Files.AcquireTrusting(path, trust)
	if err != nil {
		return nil, 0, err
	}
	return f, stale, nil
}

// ReadAt reads dst from the file by path.
func (l *Local) ReadAt(o Object, dst []byte, off uint64, path int) (int, error) {
	f := o.(*files.File)
	n := uint64(len(dst))
	if path == PathDirect {
		got, fellBack, err := l.RD.ReadDirect(f, dst, int64(off), l.DirectRequired)
		if err != nil {
			return 0, err
		}
		if uint64(got) < n {
			return 0, Shrunk(f, off, n)
		}
		if fellBack {
			return PathBuffered, nil
		}
		return PathDirect, nil
	}
	got, err := l.RD.ReadBuffered(f, dst, int64(off))
	if err != nil {
		return 0, err
	}
	if uint64(got) < n {
		return 0, Shrunk(f, off, n)
	}
	return PathBuffered, nil
}

// ReadNoWait is one RWF_NOWAIT pread: it succeeds only from the page cache,
// and a miss starts the kernel's readahead for the range.
func (l *Local) ReadNoWait(o Object, dst []byte, off uint64) bool {
	return l.RD.PreadNowait(o.(*files.File).FD, dst, int64(off))
}

// Resident samples page-cache residency with mincore (iopath.ResidentEstimate);
// samples <= 0 counts every page (iopath.Resident).
func (l *Local) Resident(o Object, off, size uint64, samples int) (uint64, bool) {
	fd := o.(*files.File).FD
	var n int64
	var err error
	if samples <= 0 {
		n, err = iopath.Resident(fd, int64(off), int64(size))
	} else {
		n, err = iopath.ResidentEstimate(fd, int64(off), int64(size), samples)
	}
	if err != nil {
		return 0, false
	}
	return uint64(n), true
}

// DirectRefused is files.File.DirectRefused.
func (l *Local) DirectRefused(o Object) bool { return o.(*files.File).DirectRefused() }

// Shrunk is the errs.EOF of a file that got shorter between its check and
// a read of [off, off+n).
func Shrunk(f *files.File, off, n uint64) error {
	return errs.At(errs.EOF, "read", f.Path, int64(off), "file shrank while reading [%d, %d)", off, off+n)
}
