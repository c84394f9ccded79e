package objects

// Internal test package: TestParseTar_TooManyMembers lowers the member cap
// through parseTar instead of writing a 5 GB archive. Every identifier here
// starts with "tar" so that it cannot clash with the package's own.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
)

// tarCorpusDir holds archives written by tests/data/tar_corpus/make_corpus.py
// (Python's tarfile, then patched for the broken ones) and expected.json.
var tarCorpusDir = filepath.Join("testdata", "tar")

// tarPhrases are the stable starts of every Format message ParseTar returns.
var tarPhrases = []string{"invalid header", "truncated archive", "unsupported member", "invalid name", "too many members", "compressed archive"}

// tarCorpusEntry is one file's line in expected.json: members as
// [name, offset, size, sha256 of the data], or an error phrase and offset.
type tarCorpusEntry struct {
	Members [][4]any `json:"members"`
	Error   string   `json:"error"`
	Offset  int64    `json:"offset"`
}

func tarLoadCorpus(t testing.TB) map[string]tarCorpusEntry {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(tarCorpusDir, "expected.json"))
	if err != nil {
		t.Fatalf("read expected.json: %v", err)
	}
	var doc map[string]tarCorpusEntry
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decode expected.json: %v", err)
	}
	if len(doc) < 40 {
		t.Fatalf("expected.json lists only %d files", len(doc))
	}
	return doc
}

func tarSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tarWantErr checks err is the Format error of ParseTar starting with phrase
// at offset off (off < 0: any offset).
func tarWantErr(t testing.TB, err error, phrase string, off int64) *errs.Error {
	t.Helper()
	var me *errs.Error
	if !errors.As(err, &me) {
		t.Fatalf("err = %v (%T), want a Format error %q", err, err, phrase)
	}
	if me.Code != errs.Format || me.Op != "tar" || !strings.HasPrefix(me.Msg, phrase+":") && me.Msg != phrase && !strings.HasPrefix(me.Msg, phrase+" ") {
		t.Fatalf("err = %v (code %v, op %q), want %q", err, me.Code, me.Op, phrase)
	}
	if off >= 0 && me.Offset != off {
		t.Fatalf("err = %v: offset %d, want %d", err, me.Offset, off)
	}
	return me
}

// tarCheckMembers checks members against data: each one's bytes equal want
// (name -> content, in order), and the invariants every result must hold.
func tarCheckMembers(t testing.TB, data []byte, got []TarMember, want []tarWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d members %v, want %d", len(got), tarNames(got), len(want))
	}
	for i, m := range got {
		if m.Name != want[i].name {
			t.Errorf("member %d: name %q, want %q", i, m.Name, want[i].name)
		}
		if m.Offset < 0 || m.Offset%512 != 0 || m.Size < 0 || m.Offset+m.Size > int64(len(data)) {
			t.Fatalf("member %d %q: bad range offset %d size %d (file %d bytes)", i, m.Name, m.Offset, m.Size, len(data))
		}
		if !bytes.Equal(data[m.Offset:m.Offset+m.Size], want[i].data) {
			t.Errorf("member %d %q: data at [%d, +%d) differs from what was written", i, m.Name, m.Offset, m.Size)
		}
	}
}

type tarWant struct {
	name string
	data []byte
}

func tarNames(ms []TarMember) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// TestParseTar_Corpus checks every corpus file, through ParseTarFile and
// through ParseTar over a bytes.Reader, against expected.json: the exact
// members (name, offset, size) and the sha256 of their data, or the error
// phrase, code, offset and path.
func TestParseTar_Corpus(t *testing.T) {
	cases := tarLoadCorpus(t)
	ents, err := os.ReadDir(tarCorpusDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range ents {
		if e.Name() == "expected.json" {
			continue
		}
		if _, ok := cases[e.Name()]; !ok {
			t.Errorf("%s is not in expected.json", e.Name())
		}
		seen++
	}
	if seen != len(cases) {
		t.Errorf("expected.json lists %d files, the directory holds %d", len(cases), seen)
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(tarCorpusDir, name)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fromFile, errFile := ParseTarFile(path)
			fromMem, errMem := ParseTar(bytes.NewReader(data), int64(len(data)))
			if c.Error != "" {
				if !slices.Contains(tarPhrases, c.Error) {
					t.Fatalf("expected.json: unknown phrase %q", c.Error)
				}
				me := tarWantErr(t, errFile, c.Error, c.Offset)
				if me.Path != path {
					t.Errorf("ParseTarFile error path %q, want %q", me.Path, path)
				}
				tarWantErr(t, errMem, c.Error, c.Offset)
				t.Logf("%v", errMem)
				return
			}
			if errFile != nil || errMem != nil {
				t.Fatalf("want %d members, got %v / %v", len(c.Members), errFile, errMem)
			}
			if len(fromFile) != len(c.Members) || len(fromMem) != len(c.Members) {
				t.Fatalf("got %d / %d members, want %d: %q", len(fromFile), len(fromMem), len(c.Members), tarNames(fromMem))
			}
			for i, w := range c.Members {
				want := TarMember{Name: w[0].(string), Offset: int64(w[1].(float64)), Size: int64(w[2].(float64))}
				if fromFile[i] != want || fromMem[i] != want {
					t.Errorf("member %d: got %+v / %+v, want %+v", i, fromFile[i], fromMem[i], want)
					continue
				}
				if got := tarSHA(data[want.Offset : want.Offset+want.Size]); got != w[3].(string) {
					t.Errorf("member %d %q: sha256 %s, want %s", i, want.Name, got, w[3])
				}
			}
		})
	}
}

// tarEnt is one entry for tarBuild: a header and, for regular files, data.
type tarEnt struct {
	hdr  tar.Header
	data []byte
}

func tarReg(name string, data []byte) tarEnt {
	return tarEnt{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data: data}
}

func tarOther(name string, flag byte, link string) tarEnt {
	return tarEnt{hdr: tar.Header{Name: name, Typeflag: flag, Mode: 0o755, Linkname: link}}
}

// tarContent is n deterministic bytes that differ for every tag.
func tarContent(tag string, n int) []byte {
	out := make([]byte, 0, n+32)
	for i := 0; len(out) < n; i++ {
		s := sha256.Sum256([]byte(fmt.Sprintf("%s:%d", tag, i)))
		out = append(out, s[:]...)
	}
	return out[:n]
}

// tarBuild writes ents with archive/tar's Writer in format (FormatUnknown:
// the Writer's choice) and returns the archive and the regular members.
func tarBuild(t testing.TB, format tar.Format, ents ...tarEnt) ([]byte, []tarWant) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var want []tarWant
	for _, e := range ents {
		h := e.hdr
		h.Format = format
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("WriteHeader %q: %v", h.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				t.Fatal(err)
			}
			want = append(want, tarWant{h.Name, e.data})
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), want
}

// tarFixChecksum recomputes the checksum of the header block at off.
func tarFixChecksum(b []byte, off int) {
	blk := b[off : off+512]
	copy(blk[148:156], "        ")
	sum := 0
	for _, c := range blk {
		sum += int(c)
	}
	copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// TestParseTar_Formats writes the size classes and the skipped types with
// archive/tar's Writer in every format it writes, and checks each member's
// bytes. The Writer picks GNU 'L' records or pax "path" records for long
// names by format, and pax for non-ASCII names.
func TestParseTar_Formats(t *testing.T) {
	long := strings.Repeat("l", 150) + "/" + strings.Repeat("m", 140) + ".bin"
	var ents []tarEnt
	for _, n := range []int{0, 1, 511, 512, 513, 1024, 4097} {
		ents = append(ents, tarReg(fmt.Sprintf("s%d.bin", n), tarContent(fmt.Sprint(n), n)))
	}
	ents = append(ents,
		tarOther("dir/", tar.TypeDir, ""),
		tarOther("dir/sym", tar.TypeSymlink, "../s1.bin"),
		tarOther("dir/hard", tar.TypeLink, "s1.bin"),
		tarOther("fifo", tar.TypeFifo, ""),
		tarOther("chr", tar.TypeChar, ""),
		tarOther("blk", tar.TypeBlock, ""),
		tarReg("./a.jpg", []byte("jpeg")),
		tarReg("./a.jpg", []byte("again")), // duplicate: both listed
		tarReg("after.bin", tarContent("after", 700)),
	)
	longEnts := append(slices.Clip(ents), tarReg(long, tarContent("long", 513)), tarOther(long+"d/", tar.TypeDir, ""))
	utf8Ents := append(slices.Clip(longEnts), tarReg("données/日本.bin", tarContent("utf8", 3)))
	for _, tc := range []struct {
		name   string
		format tar.Format
		ents   []tarEnt
	}{
		{"ustar", tar.FormatUSTAR, ents},
		{"gnu", tar.FormatGNU, longEnts},
		{"pax", tar.FormatPAX, utf8Ents},
		{"writer_choice", tar.FormatUnknown, utf8Ents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, want := tarBuild(t, tc.format, tc.ents...)
			got, err := ParseTar(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			tarCheckMembers(t, data, got, want)
			if got[0].Offset != 512 || got[1].Offset != 1024 || got[2].Offset != 2048 {
				t.Errorf("first offsets %d %d %d, want 512 1024 2048", got[0].Offset, got[1].Offset, got[2].Offset)
			}
		})
	}
}

// TestParseTar_Cases covers the decisions made in tar.go on hand-patched
// archives: old-style typeflags, names kept byte for byte, what is refused.
func TestParseTar_Cases(t *testing.T) {
	ustar := func(ents ...tarEnt) []byte {
		b, _ := tarBuild(t, tar.FormatUSTAR, ents...)
		return b
	}
	patch := func(b []byte, hdr int, field int, val string) []byte {
		b = bytes.Clone(b)
		copy(b[hdr+field:], val)
		tarFixChecksum(b, hdr)
		return b
	}
	two := ustar(tarReg("a.bin", []byte("AAAA")), tarReg("b.bin", []byte("BB")))
	// bigPax is a pax entry whose "comment" record holds n bytes, then p.bin.
	// Written by hand: archive/tar's Writer refuses records over 1 MiB.
	bigPax := func(n int) []byte {
		rec := fmt.Sprintf(" comment=%s\n", strings.Repeat("c", n))
		l := len(rec) + 1
		for len(fmt.Sprint(l))+len(rec) != l {
			l++
		}
		rec = fmt.Sprint(l) + rec
		x := ustar(tarReg("PaxHeaders/p.bin", []byte(rec)))
		x = patch(x[:len(x)-1024], 0, 156, "x") // drop the end marker
		return append(x, ustar(tarReg("p.bin", []byte{1}))...)
	}
	longName := func(n int) []byte {
		b, _ := tarBuild(t, tar.FormatGNU, tarReg(strings.Repeat("n", n), []byte{7}))
		return b
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		want   []TarMember // nil with phrase == "": no members
		phrase string
		off    int64
	}{
		// '\0' is a regular file; with a trailing slash a directory (pre-POSIX).
		{name: "typeflag_nul", data: patch(two, 0, 156, "\x00"),
			want: []TarMember{{"a.bin", 512, 4}, {"b.bin", 1536, 2}}},
		{name: "typeflag_nul_dir", data: patch(patch(ustar(tarReg("dir", nil), tarReg("b.bin", []byte("BB"))), 0, 156, "\x00"), 0, 0, "dir/"),
			want: []TarMember{{"b.bin", 1024, 2}}},
		{name: "typeflag_contiguous", data: patch(two, 1024, 156, "7"),
			want: []TarMember{{"a.bin", 512, 4}, {"b.bin", 1536, 2}}},
		{name: "typeflag_unknown_skipped", data: patch(two, 0, 156, "Q"),
			want: []TarMember{{"b.bin", 1536, 2}}},
		{name: "typeflag_volume_label_skipped", data: patch(two, 0, 156, "V"),
			want: []TarMember{{"b.bin", 1536, 2}}},
		// A directory's size field is ignored, as by tar: no data follows.
		{name: "dir_with_size", data: append(patch(ustar(tarOther("d/", tar.TypeDir, "")), 0, 124, "00000001000\x00")[:512],
			ustar(tarReg("x", []byte("x")))...),
			want: []TarMember{{"x", 1024, 1}}},
		// Names: bytes as stored (Latin-1 here), "./" and ".." kept.
		{name: "latin1_name", data: patch(two, 0, 0, "caf\xe9.bin\x00"),
			want: []TarMember{{"caf\xe9.bin", 512, 4}, {"b.bin", 1536, 2}}},
		{name: "dot_names", data: ustar(tarReg("./a.jpg", nil), tarReg("../up", nil), tarReg("/abs", nil), tarReg("a//b/./c", nil)),
			want: []TarMember{{"./a.jpg", 512, 0}, {"../up", 1024, 0}, {"/abs", 1536, 0}, {"a//b/./c", 2048, 0}}},
		{name: "long_name_1000", data: longName(1000),
			want: []TarMember{{strings.Repeat("n", 1000), 2048, 1}}},
		{name: "empty_name", data: patch(two, 1024, 0, "\x00\x00\x00\x00\x00"),
			phrase: "invalid name", off: 1024},
		// A pax entry just under archive/tar's 1 MiB limit is read; one over
		// it is refused before it is all read.
		{name: "pax_record_below_limit", data: bigPax(1<<20 - 100),
			want: []TarMember{{"p.bin", 1<<20 + 1024, 1}}},
		{name: "pax_record_over_limit", data: bigPax(1 << 20), phrase: "invalid header", off: 0},
		{name: "gnu_long_name_over_limit", data: longName(1<<20 + 1), phrase: "invalid header", off: 0},
		// A header says a 1 GiB pax entry follows; the file is small.
		{name: "pax_size_huge", data: patch(bigPax(10)[:1024], 0, 124, "10000000000\x00"),
			phrase: "truncated archive", off: 0},
		{name: "size_max_int64", data: patch(two, 0, 124, "\x80\x00\x00\x00\x7f\xff\xff\xff\xff\xff\xff\xff"),
			phrase: "truncated archive", off: 0},
		{name: "size_overflow", data: patch(two, 0, 124, "\x80\x00\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00"),
			phrase: "invalid header", off: 0},
		{name: "after_end_marker", data: append(bytes.Clone(two), "junk that is not a header"...),
			want: []TarMember{{"a.bin", 512, 4}, {"b.bin", 1536, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTar(bytes.NewReader(tc.data), int64(len(tc.data)))
			if tc.phrase != "" {
				me := tarWantErr(t, err, tc.phrase, tc.off)
				t.Logf("%v", me)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseTar_InsecurePath: with GODEBUG=tarinsecurepath=0 archive/tar
// returns ErrInsecurePath next to a good header; names are still listed.
func TestParseTar_InsecurePath(t *testing.T) {
	t.Setenv("GODEBUG", "tarinsecurepath=0")
	data, want := tarBuild(t, tar.FormatUSTAR, tarReg("../evil", []byte("e")), tarReg("/abs", []byte("a")), tarReg("ok", nil))
	got, err := ParseTar(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	tarCheckMembers(t, data, got, want)
}

// TestParseTar_TooManyMembers reaches the member cap with a lowered limit;
// skipped entries do not count.
func TestParseTar_TooManyMembers(t *testing.T) {
	data, _ := tarBuild(t, tar.FormatUSTAR, tarReg("a", nil), tarOther("d/", tar.TypeDir, ""), tarReg("b", nil), tarReg("c", []byte("c")))
	if got, err := parseTar(bytes.NewReader(data), int64(len(data)), 3); err != nil || len(got) != 3 {
		t.Fatalf("at the cap: %v %v", got, err)
	}
	_, err := parseTar(bytes.NewReader(data), int64(len(data)), 2)
	me := tarWantErr(t, err, "too many members", 1536)
	if !strings.Contains(me.Msg, "more than 2 ") {
		t.Fatalf("message %q does not state the cap", me.Msg)
	}
	if maxTarMembers != 10_000_000 {
		t.Fatalf("maxTarMembers = %d", maxTarMembers)
	}
}

// tarFailReader fails every ReadAt that reaches past limit with EIO.
type tarFailReader struct {
	data  []byte
	limit int64
}

func (f tarFailReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.limit {
		return 0, syscall.EIO
	}
	return copy(p, f.data[off:]), nil
}

// TestParseTar_Errors: bad arguments, IO failures and open failures keep
// their own codes.
func TestParseTar_Errors(t *testing.T) {
	data, _ := tarBuild(t, tar.FormatUSTAR, tarReg("a", tarContent("a", 20000)), tarReg("b", []byte("xyz")), tarReg("c", tarContent("c", 30000)))
	if _, err := ParseTar(bytes.NewReader(data), -1); errs.CodeOf(err) != errs.InvalidArg {
		t.Fatalf("negative size: %v", err)
	}
	// Failures in the first header, in the last byte of a's data, in b's
	// header, in c's data and in the end-of-archive marker.
	for _, limit := range []int64{0, 100, 20000, 20990, 21600, 40000, int64(len(data)) - 1} {
		_, err := ParseTar(tarFailReader{data, limit}, int64(len(data)))
		if errs.CodeOf(err) != errs.IO || !errors.Is(err, syscall.EIO) {
			t.Fatalf("EIO past %d: %v (code %v)", limit, err, errs.CodeOf(err))
		}
	}
	// A failure past the end-of-archive marker is never seen: tarSource's
	// read-ahead falls back to the exact read tar.Reader asked for.
	padded := append(bytes.Clone(data), make([]byte, 4096)...)
	if got, err := ParseTar(tarFailReader{padded, int64(len(data)) + 10}, int64(len(padded))); err != nil || len(got) != 3 {
		t.Fatalf("EIO after the marker: %v %v", got, err)
	}
	// A ReaderAt shorter than the size it is said to have: truncated.
	_, err := ParseTar(bytes.NewReader(data[:20600]), int64(len(data)))
	tarWantErr(t, err, "truncated archive", 20992)
	_, err = ParseTar(bytes.NewReader(data[:300]), int64(len(data)))
	tarWantErr(t, err, "truncated archive", 0)

	dir := t.TempDir()
	if _, err := ParseTarFile(filepath.Join(dir, "nope.tar")); errs.CodeOf(err) != errs.NotFound || !strings.Contains(err.Error(), "nope.tar") {
		t.Fatalf("missing: %v", err)
	}
	if _, err := ParseTarFile(dir); errs.CodeOf(err) != errs.IsDir {
		t.Fatalf("dir: %v", err)
	}
}

// tarCountingReader records every ReadAt range.
type tarCountingReader struct {
	r     io.ReaderAt
	mu    sync.Mutex
	reads [][2]int64 // [off, off+n)
}

func (c *tarCountingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.mu.Lock()
	c.reads = append(c.reads, [2]int64{off, off + int64(len(p))})
	c.mu.Unlock()
	return n, err
}

// TestParseTar_SparseLarge indexes a 25 GiB archive made of headers and holes
// (a sparse file: a few KB on disk) and checks that reads start only at
// headers, padding and the last byte of each member (then read one 8 KiB
// cache granule at most): the data is skipped by Seek. Sizes
// of 8 GiB and more are stored in pax "size" records (Writer's choice) or
// base-256 (GNU).
func TestParseTar_SparseLarge(t *testing.T) {
	const gib = int64(1) << 30
	type big struct {
		name   string
		size   int64
		format tar.Format
	}
	members := []big{
		{"small.bin", 1000, tar.FormatUnknown},
		{"three_gib.bin", 3 * gib, tar.FormatUnknown},
		{strings.Repeat("long/", 30) + "five_gib.bin", 5*gib + 7, tar.FormatUnknown},
		{"nine_gib_pax.bin", 9*gib + 1, tar.FormatPAX},
		{"tiny.bin", 1, tar.FormatUnknown},
		{strings.Repeat("g", 120) + "_gnu_base256.bin", 8*gib + 513, tar.FormatGNU},
		{"last.bin", 0, tar.FormatUnknown},
	}
	path := filepath.Join(t.TempDir(), "big.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var off int64
	var want []TarMember
	type span struct{ from, to int64 }
	var allowed []span // byte ranges ParseTar may read
	for i, m := range members {
		var hb bytes.Buffer
		tw := tar.NewWriter(&hb) // not closed: only the header is wanted
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Typeflag: tar.TypeReg, Size: m.size, Mode: 0o644, Format: m.format}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(hb.Bytes(), off); err != nil {
			t.Fatal(err)
		}
		data := off + int64(hb.Len())
		// Marks at both ends of the data, to check the offsets.
		mark := []byte(fmt.Sprintf("<%d>", i))
		if m.size >= int64(2*len(mark)) {
			f.WriteAt(mark, data)
			f.WriteAt(mark, data+m.size-int64(len(mark)))
		}
		want = append(want, TarMember{Name: m.name, Offset: data, Size: m.size})
		next := (data + m.size + 511) &^ 511
		allowed = append(allowed, span{off, data}, span{max(data, data+m.size-1), next})
		off = next
	}
	allowed = append(allowed, span{off, off + 1024})
	if err := f.Truncate(off + 1024); err != nil {
		t.Skipf("cannot make a %d-byte sparse file: %v", off+1024, err)
	}
	if blocks, ok := tarStatBlocks(mustStat(t, f)); ok && blocks*512 > 64<<20 {
		t.Skipf("the file system does not keep holes (%d bytes allocated)", blocks*512)
	}
	if off < 25*gib {
		t.Fatalf("archive is only %d bytes", off)
	}

	cr := &tarCountingReader{r: f}
	got, err := ParseTar(cr, off+1024)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Every read starts where archive/tar needs bytes (a header, the last
	// byte of data, padding) and is one cache granule at most.
	var total int64
	for _, r := range cr.reads {
		total += r[1] - r[0]
		inside := false
		for _, a := range allowed {
			if r[0] >= a.from && r[0] < a.to {
				inside = true
				break
			}
		}
		if !inside || r[1]-r[0] > tarCacheSize {
			t.Errorf("read [%d, %d) starts inside member data or is too long", r[0], r[1])
		}
	}
	t.Logf("%d members in a %.1f GiB archive: %d reads, %d bytes read", len(got), float64(off)/float64(gib), len(cr.reads), total)
	if total > int64(2*len(members)+1)*tarCacheSize {
		t.Errorf("read %d bytes for %d members", total, len(members))
	}
	for i, m := range got {
		mark := []byte(fmt.Sprintf("<%d>", i))
		if m.Size < int64(2*len(mark)) {
			continue
		}
		head, tail := make([]byte, len(mark)), make([]byte, len(mark))
		f.ReadAt(head, m.Offset)
		f.ReadAt(tail, m.Offset+m.Size-int64(len(mark)))
		if !bytes.Equal(head, mark) || !bytes.Equal(tail, mark) {
			t.Errorf("member %d: marks %q %q, want %q", i, head, tail, mark)
		}
	}
	// Through the file API too.
	got2, err := ParseTarFile(path)
	if err != nil || !slices.Equal(got2, want) {
		t.Fatalf("ParseTarFile: %v %v", got2, err)
	}
	// Truncating the last big member: refused, the offset names its entry.
	_, err = ParseTar(f, want[5].Offset+100)
	tarWantErr(t, err, "truncated archive", -1)
}

// tarStatBlocks returns st_blocks (512-byte units) where the platform's stat
// has it; reflection keeps this file free of OS-specific types.
func tarStatBlocks(fi os.FileInfo) (int64, bool) {
	v := reflect.ValueOf(fi.Sys())
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	b := v.Elem().FieldByName("Blocks")
	if !b.IsValid() || !b.CanInt() {
		return 0, false
	}
	return b.Int(), true
}

func mustStat(t *testing.T, f *os.File) os.FileInfo {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestParseTar_GNUTar archives real files with the system's GNU tar in each
// of its formats and checks every member's bytes against the file.
func TestParseTar_GNUTar(t *testing.T) {
	bin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar on PATH")
	}
	if v, err := exec.Command(bin, "--version").Output(); err != nil || !bytes.Contains(v, []byte("GNU tar")) {
		t.Skip("tar is not GNU tar")
	}
	src := t.TempDir()
	put := func(name string, data []byte) {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var short []string
	content := map[string][]byte{}
	for _, n := range []int{0, 1, 511, 512, 513} {
		name := fmt.Sprintf("s%d.bin", n)
		content[name] = tarContent(name, n)
		short = append(short, name)
	}
	utf := "données_été.jpg"
	content[utf] = []byte("jpeg data")
	short = append(short, utf)
	long100 := strings.Repeat("L", 60) + "/" + strings.Repeat("M", 60) + "/long.bin" // ustar prefix split
	long255 := strings.Repeat("N", 120) + "/" + strings.Repeat("O", 150) + ".bin"    // GNU 'L' or pax path
	content[long100] = tarContent("long100", 513)
	content[long255] = tarContent("long255", 1025)
	for name, data := range content {
		put(name, data)
	}
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../s1.bin", filepath.Join(src, "d", "ln")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "s513.bin"), filepath.Join(src, "d", "hard")); err != nil {
		t.Fatal(err)
	}
	fifo := exec.Command("mkfifo", filepath.Join(src, "fifo")).Run() == nil
	others := []string{"d", "d/ln", "d/hard"} // a directory, a symlink, a hard link to s513.bin
	if fifo {
		others = append(others, "fifo")
	}
	out := t.TempDir()
	for _, tc := range []struct {
		format string
		regs   []string
		others []string
	}{
		{"v7", short, others[:3]}, // V7 has no FIFOs and no long names
		{"ustar", append(slices.Clip(short), long100), others},
		{"oldgnu", append(slices.Clip(short), long100, long255), others},
		{"gnu", append(slices.Clip(short), long100, long255), others},
		{"posix", append(slices.Clip(short), long100, long255), others},
	} {
		t.Run(tc.format, func(t *testing.T) {
			// Regular files first, then the rest: the hard link then points
			// back at s513.bin, and the list order is the archive order.
			args := append([]string{"--format=" + tc.format, "--no-recursion", "-C", src, "-cf", filepath.Join(out, tc.format+".tar")}, tc.regs...)
			args = append(args, tc.others...)
			args = append(args, "s1.bin") // again, after the others: a second member
			if msg, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("tar %s: %v\n%s", strings.Join(args, " "), err, msg)
			}
			data, err := os.ReadFile(filepath.Join(out, tc.format+".tar"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseTarFile(filepath.Join(out, tc.format+".tar"))
			if err != nil {
				t.Fatal(err)
			}
			var want []tarWant
			for _, n := range append(slices.Clip(tc.regs), "s1.bin") {
				want = append(want, tarWant{n, content[n]})
			}
			// GNU tar stores a file archived twice as a hard link to the first copy.
			if len(got) == len(want)-1 {
				want = want[:len(want)-1]
			}
			tarCheckMembers(t, data, got, want)
		})
	}
	t.Run("directory_walk", func(t *testing.T) {
		// "tar -C src ." names members "./x": kept as stored.
		arch := filepath.Join(out, "walk.tar")
		if msg, err := exec.Command(bin, "--format=posix", "--sort=name", "-C", src, "-cf", arch, ".").CombinedOutput(); err != nil {
			t.Skipf("tar --sort: %v %s", err, msg)
		}
		data, _ := os.ReadFile(arch)
		got, err := ParseTarFile(arch)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(content) {
			t.Fatalf("got %d members %q, want %d", len(got), tarNames(got), len(content))
		}
		for _, m := range got {
			name, ok := strings.CutPrefix(m.Name, "./")
			if name == "d/hard" {
				name = "s513.bin" // --sort=name puts the hard link first
			}
			if !ok || !bytes.Equal(data[m.Offset:m.Offset+m.Size], content[name]) {
				t.Errorf("member %q at %d: wrong name or data", m.Name, m.Offset)
			}
		}
	})
	t.Run("sparse", func(t *testing.T) {
		holes := filepath.Join(out, "holes.bin")
		hf, err := os.Create(holes)
		if err != nil {
			t.Fatal(err)
		}
		hf.Truncate(4 << 20)
		hf.WriteAt(tarContent("holes", 8192), 2<<20)
		hf.Close()
		for _, opts := range [][]string{
			{"--format=gnu"}, {"--format=oldgnu"},
			{"--format=posix", "--sparse-version=0.0"}, {"--format=posix", "--sparse-version=0.1"}, {"--format=posix", "--sparse-version=1.0"},
		} {
			arch := filepath.Join(out, "sparse.tar")
			args := append(slices.Clip(opts), "--sparse", "-C", filepath.Dir(holes), "-cf", arch, "holes.bin")
			if msg, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("tar %v: %v %s", args, err, msg)
			}
			got, err := ParseTarFile(arch)
			if err == nil && len(got) == 1 && got[0].Size == 4<<20 {
				t.Skipf("%v: GNU tar stored holes.bin whole (no holes on this file system)", opts)
			}
			me := tarWantErr(t, err, "unsupported member", 0)
			if !strings.Contains(me.Msg, "holes.bin") {
				t.Errorf("%v: message %q does not name the member", opts, me.Msg)
			}
		}
	})
}

// BenchmarkParseTar indexes an in-memory WebDataset-like shard: 10,000
// samples of three members (image, class, JSON).
func BenchmarkParseTar(b *testing.B) {
	var ents []tarEnt
	img := tarContent("img", 20000)
	for i := range 10000 {
		key := fmt.Sprintf("sample%06d", i)
		ents = append(ents, tarReg(key+".jpg", img), tarReg(key+".cls", []byte("7")), tarReg(key+".json", []byte(`{"w":1}`)))
	}
	data, _ := tarBuild(b, tar.FormatUSTAR, ents...)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		ms, err := ParseTar(bytes.NewReader(data), int64(len(data)))
		if err != nil || len(ms) != 30000 {
			b.Fatal(len(ms), err)
		}
	}
}
