package objects

// Tar shard member index.
//
// # File format
//
// A tar archive is a sequence of 512-byte blocks. Each entry is one header
// block followed by its data padded with zeros to a whole block; two zero
// blocks end the archive. The formats read here are those Go's archive/tar
// reads:
//
//   - V7 (Unix 7th Edition): name up to 99 bytes, no magic;
//   - POSIX ustar (POSIX.1-1988, IEEE Std 1003.1): magic "ustar\x0000", a
//     155-byte prefix field joined to the name with '/';
//   - GNU tar (magic "ustar  \x00"): names and link targets longer than 100
//     bytes go in a preceding 'L' / 'K' entry whose data is the name; sizes of
//     8 GiB and more are stored base-256;
//   - pax (POSIX.1-2001 extended headers): a preceding 'x' entry carries
//     "length key=value\n" records ("path", "size", ... override the ustar
//     fields, so names are unlimited and UTF-8 and sizes exceed 8 GiB); 'g'
//     entries hold global records and are not files.
//
// Decoding (checksums, octal and base-256 numbers, the long-name and pax
// entries, their 1 MiB limit) is left to archive/tar: it is the library the Go
// team maintains and fuzzes, and a second hand-written tar parser would only be
// a second place for bugs. This file adds what an index of byte ranges needs
// and archive/tar does not give: the absolute offset of each member's data,
// the check that the data lies inside the file, and refusals of what an
// (offset, size) pair cannot describe.
//
// # Reading cost
//
// The archive is read through an io.SectionReader. It implements io.Seeker, so
// tar.Reader skips a member's data with Seek instead of reading it: per entry
// it reads the header block(s), the last byte of the previous member's data
// (archive/tar reads it to detect truncation) and the padding, all within
// about 1 KiB. tarSource serves those small reads from one 8 KiB read, so
// indexing a multi-GB shard makes about one read system call per large member
// (fewer for runs of small ones) and reads at most 8 KiB next to each header,
// never the bulk of the data (the tests check this on a sparse 25 GiB file).
// What remains is archive/tar's header decoding, a few microseconds per
// entry.
//
// # Validation
//
// Failures are *errs.Error with code errs.Format, op "tar" and the byte offset
// of the entry's first header block (its pax or long-name entry when it has
// one). Each message starts with a stable phrase:
//
//   - "invalid header": a bad header checksum, a numeric field that is not
//     octal or base-256 (or overflows), a negative size, a zero block
//     followed by a non-zero one, a malformed pax record (NUL in "path"
//     included), a pax or long-name entry over 1 MiB, a malformed sparse map
//     (all as archive/tar reports them; it does not say which);
//   - "truncated archive": the file ends inside a header, a pax or long-name
//     entry, a member's data or its padding, or right after a pax or
//     long-name entry (the header it extends is missing); a skipped entry's
//     data must fit too;
//   - "unsupported member": a GNU sparse member (typeflag 'S', or pax
//     "GNU.sparse.*" records): its data is a packed list of non-hole pieces, so
//     no single (offset, size) range holds the file;
//   - "invalid name": a regular member whose name is empty or contains NUL
//     (archive/tar cuts names at NUL, so the NUL test is a safety net);
//   - "too many members": more than 10,000,000 regular members;
//   - "compressed archive": the first entry does not parse and the file
//     starts with the magic of gzip, zstd, bzip2, xz or lz4
//     (tar_compressed.go).
//
// A failing ReadAt gives its error mapped by errs.FromErrno instead.
//
// Accepted without error, as GNU tar and Python's tarfile accept them: an
// empty file, a single zero block, an archive without the end-of-archive
// marker (it ends after a whole entry, padding included), and anything after
// the end-of-archive marker (tar never reads it). Two cases where ParseTar
// (archive/tar) is stricter than GNU tar and tarfile, which stop silently at
// the first bad block: a lone zero block followed by more entries ("invalid
// header"), and a partial block after the last entry ("truncated archive").
// Silently dropping the rest of a shard would lose samples unnoticed.
//
// # Members
//
// Only regular files are listed: typeflag '0', the pre-POSIX '\x00' (which
// archive/tar turns into '0', or into a directory when the name ends in '/',
// as tar does) and '7' (contiguous file, which POSIX lets readers treat as a
// regular file; GNU tar and Python's TarInfo.isreg do). Skipped: directories,
// symbolic and hard links, character and block devices, FIFOs, pax global
// headers, and any other typeflag (GNU volume labels and multi-volume pieces,
// vendor extensions): WebDataset and tarfile's isreg skip them too; their
// data, if any, is stepped over. Names are kept byte for byte as stored (no
// cleaning: "./a.jpg" stays "./a.jpg", "../x" and "/x" are not refused since
// nothing is written to disk), and duplicate names are all listed, in archive
// order; grouping them into samples is the caller's business.

import (
	"archive/tar"
	"errors"
	"io"
	"strings"

	"github.com/memtier/memtier/runtime/errs"
)

// maxTarMembers caps the regular members of one archive: 10,000,000 members
// already hold at least 5 GB of headers and cost about 1 GB of index memory;
// a larger count means a corrupt or hostile file rather than a shard.
const maxTarMembers = 10_000_000

// tarBlock is the tar block size; data starts and ends on block boundaries.
const tarBlock = 512

// TarMember is one regular-file member of a tar archive.
type TarMember struct {
	Name   string // path in the archive (long names resolved: GNU 'L' records, pax "path")
	Offset int64  // absolute byte offset of the member's data in the archive file
	Size   int64  // bytes of data
}

// ParseTar lists the regular-file members of the tar archive held in r[0:size),
// in archive order.
//
// Formats: V7, POSIX ustar, GNU (long names in 'L' entries) and pax (POSIX.1-2001
// extended headers: "path" and "size" records), decoded by archive/tar. Every
// member satisfies 0 <= Offset, Offset%512 == 0 and Offset+Size <= size, and
// has a non-empty name without NUL. The file format, what is listed and what
// is refused are in the comment at the top of tar.go. A bad archive gives an
// *errs.Error with code errs.Format whose message starts with one of
// "invalid header", "truncated archive", "unsupported member", "invalid name",
// "too many members" or "compressed archive" and whose Offset is the failing entry's first header
// block; a negative size is errs.InvalidArg; a failing r.ReadAt gives its
// error mapped by errs.FromErrno. Member data is skipped, not read (a few KiB
// around each header at most). The returned slice is owned by the caller.
func ParseTar(r io.ReaderAt, size int64) ([]TarMember, error) {
	return parseTar(r, size, maxTarMembers)
}

// ParseTarFile opens path and lists its members with ParseTar. Errors carry
// the path: an open failure keeps its errno-derived code (NotFound,
// Permission, IsDir...), a bad archive is errs.Format.
func ParseTarFile(path string) ([]TarMember, error) {
	return parseFile(path, "tar", ParseTar)
}

// parseTar is ParseTar with the member cap as a parameter, so that tests can
// reach the cap without writing gigabytes.
func parseTar(r io.ReaderAt, size int64, maxMembers int) ([]TarMember, error) {
	if size < 0 {
		return nil, errs.New(errs.InvalidArg, "tar", "negative archive size %d", size)
	}
	src := &tarSource{r: r, size: size}
	sr := io.NewSectionReader(src, 0, size)
	tr := tar.NewReader(sr)
	var members []TarMember
	entry := int64(0) // offset of the next entry's first header block
	for {
		hdr, err := tr.Next()
		if errors.Is(err, tar.ErrInsecurePath) {
			// Only returned under GODEBUG=tarinsecurepath=0, with a good
			// header; names are listed as stored, nothing is extracted.
			err = nil
		}
		if src.err != nil {
			// An IO error reaches tar.Reader as a read error; report the
			// ReaderAt's own error, not what archive/tar made of it.
			return nil, errs.FromErrno("pread", "", src.errOff, src.err)
		}
		if err == io.EOF {
			if err := tarCheckEnd(src, sr, entry, size); err != nil {
				return nil, err
			}
			return members, nil
		}
		if err != nil {
			if entry == 0 {
				if cerr := tarCompressed(r, size); cerr != nil {
					return nil, cerr
				}
			}
			return nil, tarReadErr(err, entry, size)
		}
		// tar.Reader does not buffer: after Next the section reader stands on
		// the first byte of this entry's data.
		pos, err := sr.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, errs.At(errs.Internal, "tar", "", entry, "seek: %v", err)
		}
		if kind := tarSparseKind(hdr); kind != "" {
			return nil, tarErr(entry, "unsupported member %s: GNU sparse file (%s); its data is not one contiguous range",
				quote([]byte(hdr.Name)), kind)
		}
		// Bytes of data that follow this header in the archive. archive/tar
		// ignores the size field of header-only types, as tar does; a pax
		// global header's data was consumed inside Next and its Size is 0.
		nb := hdr.Size
		if tarHeaderOnly(hdr.Typeflag) {
			nb = 0
		}
		if nb < 0 || nb > size-pos {
			return nil, tarErr(entry, "truncated archive: the data of %s (%d bytes at offset %d) runs past the end of the file (%d bytes)",
				quote([]byte(hdr.Name)), nb, pos, size)
		}
		// The padding must be there too: tar writers always write it, and GNU
		// tar and Python's tarfile refuse a file that ends inside it
		// (archive/tar would take it for the end of the archive).
		end := pos + nb
		if r := end % tarBlock; r != 0 {
			if tarBlock-r > size-end {
				return nil, tarErr(entry, "truncated archive: the file (%d bytes) ends inside the padding after the data of %s",
					size, quote([]byte(hdr.Name)))
			}
			end += tarBlock - r
		}
		if hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeCont {
			if hdr.Name == "" || strings.IndexByte(hdr.Name, 0) >= 0 {
				return nil, tarErr(entry, "invalid name %s: a member name must be non-empty and without NUL",
					quote([]byte(hdr.Name)))
			}
			if len(members) >= maxMembers {
				return nil, tarErr(entry, "too many members: more than %d regular files", maxMembers)
			}
			members = append(members, TarMember{Name: hdr.Name, Offset: pos, Size: nb})
		}
		entry = end
	}
}

// tarCheckEnd runs when tar.Reader.Next reports the end of the archive, with
// entry the offset where the next entry would start. archive/tar also reports
// the end when the file stops right after a pax or GNU long-name entry (the
// header it describes is missing), so unless Next read nothing, the block at
// entry must be the zero block of an end-of-archive marker.
func tarCheckEnd(src *tarSource, sr *io.SectionReader, entry, size int64) error {
	pos, err := sr.Seek(0, io.SeekCurrent)
	if err != nil {
		return errs.At(errs.Internal, "tar", "", entry, "seek: %v", err)
	}
	if pos == entry {
		return nil // the file ends between two entries, without a marker
	}
	var blk [tarBlock]byte
	if n, err := src.ReadAt(blk[:], entry); n != tarBlock {
		if err != nil && err != io.EOF {
			return errs.FromErrno("pread", "", entry, err)
		}
		// r holds less than size bytes: archive/tar took the short read of
		// the padding for the end.
		return tarErr(entry, "truncated archive: the data ends before this entry, short of the %d bytes given as the archive size", size)
	}
	if blk != [tarBlock]byte{} {
		return tarErr(entry, "truncated archive: the file ends after a pax or GNU long-name entry, before the header it extends")
	}
	return nil
}

// tarSource is the io.ReaderAt tar.Reader reads through (via an
// io.SectionReader). It does two things:
//
//   - it records the first error of r other than io.EOF, so that an IO
//     failure is reported as one even after archive/tar has wrapped or
//     replaced it;
//   - it keeps the last tarCacheSize bytes read. archive/tar makes three small
//     reads per entry (the last byte of the previous member's data, its
//     padding, the next header block), all within 1 KiB; one cached read
//     serves them, and the headers of the small members that follow, in one
//     system call instead of three or more per member.
type tarSource struct {
	r      io.ReaderAt
	size   int64  // reads never go past it
	buf    []byte // the bytes [bufOff, bufOff+len(buf)) of r
	bufOff int64
	store  []byte // backing array of buf, allocated on first use
	err    error
	errOff int64
}

// tarCacheSize is the read granule of tarSource: large enough to hold the
// end of one member and the next header whatever their alignment, small
// enough that indexing reads next to nothing but headers.
const tarCacheSize = 8 << 10

func (s *tarSource) ReadAt(p []byte, off int64) (int, error) {
	if rel := off - s.bufOff; rel >= 0 && rel <= int64(len(s.buf)) && int64(len(p)) <= int64(len(s.buf))-rel {
		return copy(p, s.buf[rel:]), nil
	}
	if len(p) > tarCacheSize/2 || off < 0 || off >= s.size {
		return s.read(p, off)
	}
	if s.store == nil {
		s.store = make([]byte, tarCacheSize)
	}
	n, err := s.r.ReadAt(s.store[:min(int64(tarCacheSize), s.size-off)], off)
	s.buf, s.bufOff = s.store[:n], off
	if n >= len(p) {
		return copy(p, s.buf), nil
	}
	if err != nil && err != io.EOF {
		// The failure may lie in the read-ahead only: ask for p alone, so
		// that the cache never turns a readable archive into an IO error.
		s.buf = nil
		return s.read(p, off)
	}
	if err == nil {
		err = io.EOF // a ReaderAt must explain a short read; be safe
	}
	return copy(p, s.buf), err
}

// read reads from r, remembering the first real error.
func (s *tarSource) read(p []byte, off int64) (int, error) {
	n, err := s.r.ReadAt(p, off)
	if err != nil && err != io.EOF && s.err == nil {
		s.err, s.errOff = err, off
	}
	return n, err
}

// tarReadErr turns an error of tar.Reader.Next into a Format error about the
// entry starting at entry.
func tarReadErr(err error, entry, size int64) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return tarErr(entry, "truncated archive: the file (%d bytes) ends inside this entry", size)
	case errors.Is(err, tar.ErrFieldTooLong):
		return tarErr(entry, "invalid header: a pax or GNU long-name entry is over 1 MiB (%v)", err)
	default:
		// tar.ErrHeader, and archive/tar's unexported errors about malformed
		// sparse maps. archive/tar does not say which check failed.
		return tarErr(entry, "invalid header: a bad checksum, magic, numeric field or pax record, or a zero block followed by data, in this entry (%v)", err)
	}
}

// tarErr builds the Format error every refusal returns.
func tarErr(off int64, format string, args ...any) error {
	return errs.At(errs.Format, "tar", "", off, format, args...)
}

// tarSparseKind describes a GNU sparse member, or returns "": the old GNU
// format (typeflag 'S') or the pax formats 0.0, 0.1 and 1.0 (records
// "GNU.sparse.*", which archive/tar keeps in PAXRecords). Any "GNU.sparse."
// record counts, including versions archive/tar does not know, whose data
// layout is unknown too.
func tarSparseKind(hdr *tar.Header) string {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return "typeflag 'S'"
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return "pax GNU.sparse records"
		}
	}
	return ""
}

// tarHeaderOnly lists the typeflags whose size field archive/tar (like GNU
// tar and Python's tarfile) ignores: no data follows their header.
func tarHeaderOnly(flag byte) bool {
	switch flag {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo:
		return true
	}
	return false
}
