package objects

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/memtier/memtier/runtime/errs"
)

// Record is one sample of a dataset: the byte range [Offset, Offset+Length)
// of the data file. Both fields are >= 0 and their sum fits in an int64.
type Record struct {
	Offset int64 // first byte of the sample in the data file
	Length int64 // sample size in bytes, may be 0
}

// npyMagic starts every .npy file; any other first bytes mean a text index.
const npyMagic = "\x93NUMPY"

// maxHeaderBytes caps the npy header so a bogus length cannot make the parser
// allocate gigabytes.
const maxHeaderBytes = 1 << 20

// ParseIndex reads the whole index held in r[0:size) (the format is in the
// package doc) and returns its records in file order. dataSize is the size of
// the data file in bytes; every range must end at or before it. A negative
// dataSize skips that one check. Any problem gives an *errs.Error with code
// errs.Format naming the line or row; a failing r.ReadAt gives its error
// mapped by errs.FromErrno. The returned slice is owned by the caller.
func ParseIndex(r io.ReaderAt, size int64, dataSize int64) ([]Record, error) {
	if size < 0 {
		return nil, errs.New(errs.InvalidArg, "index", "negative index size %d", size)
	}
	head := make([]byte, min(size, int64(len(npyMagic))))
	if err := readFull(r, head, 0); err != nil {
		return nil, err
	}
	if string(head) == npyMagic {
		return parseNpy(r, size, dataSize)
	}
	return parseText(io.NewSectionReader(r, 0, size), dataSize)
}

// ParseIndexFile opens path and parses it with ParseIndex. Errors carry the
// path: an open failure keeps its errno-derived code (NotFound, Permission,
// IsDir...), a bad index is errs.Format.
func ParseIndexFile(path string, dataSize int64) ([]Record, error) {
	return parseFile(path, "index", func(r io.ReaderAt, size int64) ([]Record, error) {
		return ParseIndex(r, size, dataSize)
	})
}

// parseFile opens path, checks it is not a directory and runs parse over it,
// stamping the path on a Format error that lacks one.
func parseFile[T any](path, op string, parse func(r io.ReaderAt, size int64) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, errs.FromErrno("open", path, -1, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return zero, errs.FromErrno("stat", path, -1, err)
	}
	if st.IsDir() {
		return zero, errs.At(errs.IsDir, op, path, -1, "is a directory")
	}
	v, err := parse(f, st.Size())
	if err != nil {
		var me *errs.Error
		if errors.As(err, &me) && me.Path == "" {
			me.Path = path
		}
		return zero, err
	}
	return v, nil
}

// readFull reads len(p) bytes at off; a short read is an IO error.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return errs.FromErrno("pread", "", off, err)
}

// formatErr builds the Format error every validation failure returns.
func formatErr(format string, args ...any) error {
	return errs.New(errs.Format, "index", format, args...)
}

// checkRecord applies the range checks shared by both encodings; where is
// "line N" or "row N". off and length are already known to be in [0, MaxInt64].
func checkRecord(where string, off, length, dataSize int64) error {
	if off > math.MaxInt64-length {
		return formatErr("%s: offset %d + length %d overflows int64", where, off, length)
	}
	if dataSize >= 0 && off+length > dataSize {
		return formatErr("%s: range [%d, %d) is past the end of the data file (%d bytes)",
			where, off, off+length, dataSize)
	}
	return nil
}

// quote renders b for an error message: at most 32 bytes, printable ASCII kept,
// '"' and '\' backslash-escaped, every other byte as \xNN, then "..." if cut.
// python/memtier/_index.py has the same function; keep them identical.
func quote(b []byte) string {
	var sb strings.Builder
	cut := len(b) > 32
	if cut {
		b = b[:32]
	}
	sb.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, "\\x%02x", c)
		}
	}
	sb.WriteByte('"')
	if cut {
		sb.WriteString("...")
	}
	return sb.String()
}
