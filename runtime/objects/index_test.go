package objects_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/objects"
)

// corpusDir is the index corpus shared with the Python tests.
var corpusDir = filepath.Join("..", "..", "tests", "data", "index_corpus")

type corpusCase struct {
	DataSize int64      `json:"data_size"`
	Valid    bool       `json:"valid"`
	Records  [][2]int64 `json:"records"`
	Kind     string     `json:"kind"`
	Message  string     `json:"message"`
	Line     *int       `json:"line"`
	Row      *int       `json:"row"`
}

func loadCorpus(t testing.TB) map[string]corpusCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(corpusDir, "expected.json"))
	if err != nil {
		t.Fatalf("read expected.json: %v", err)
	}
	var doc struct {
		Files map[string]corpusCase `json:"files"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decode expected.json: %v", err)
	}
	if len(doc.Files) < 50 {
		t.Fatalf("expected.json lists only %d files", len(doc.Files))
	}
	return doc.Files
}

// TestParseIndex_Corpus runs every corpus file through ParseIndexFile and
// ParseIndex and checks records or the exact error against expected.json.
func TestParseIndex_Corpus(t *testing.T) {
	cases := loadCorpus(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(corpusDir, name)
			recs, err := objects.ParseIndexFile(path, c.DataSize)
			content, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			recs2, err2 := objects.ParseIndex(bytes.NewReader(content), int64(len(content)), c.DataSize)
			if c.Valid {
				if err != nil || err2 != nil {
					t.Fatalf("want valid, got %v / %v", err, err2)
				}
				want := make([]objects.Record, len(c.Records))
				for i, r := range c.Records {
					want[i] = objects.Record{Offset: r[0], Length: r[1]}
				}
				if fmt.Sprint(recs) != fmt.Sprint(want) || fmt.Sprint(recs2) != fmt.Sprint(want) {
					t.Fatalf("records %v / %v, want %v", recs, recs2, want)
				}
				return
			}
			for _, e := range []error{err, err2} {
				var me *errs.Error
				if !errors.As(e, &me) {
					t.Fatalf("want *errs.Error (%s), got %T %v", c.Kind, e, e)
				}
				if me.Code != errs.Format || me.Msg != c.Message {
					t.Fatalf("got %v %q\nwant FORMAT %q", me.Code, me.Msg, c.Message)
				}
				if c.Line != nil && !strings.HasPrefix(me.Msg, fmt.Sprintf("line %d: ", *c.Line)) {
					t.Fatalf("message %q does not name line %d", me.Msg, *c.Line)
				}
				if c.Row != nil && !strings.Contains(me.Msg, fmt.Sprintf("row %d", *c.Row)) {
					t.Fatalf("message %q does not name row %d", me.Msg, *c.Row)
				}
			}
			if want := "index " + path + ": " + c.Message; err.Error() != want {
				t.Fatalf("Error() = %q, want %q", err.Error(), want)
			}
			if want := "index: " + c.Message; err2.Error() != want {
				t.Fatalf("Error() = %q, want %q", err2.Error(), want)
			}
		})
	}
}

// npyFile builds a version 1.0 .npy of an (n, 2) little-endian array.
func npyFile(descr string, rows [][2]int64) []byte {
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, 2), }", descr, len(rows))
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(h)))
	b.WriteString(h)
	for _, r := range rows {
		for _, v := range r {
			switch descr {
			case "<i8", "<u8":
				binary.Write(&b, binary.LittleEndian, v)
			default:
				binary.Write(&b, binary.LittleEndian, int32(v))
			}
		}
	}
	return b.Bytes()
}

// TestParseIndex_LargeNpy crosses the 1 MiB decode chunk and checks the error
// row is absolute, not relative to the chunk.
func TestParseIndex_LargeNpy(t *testing.T) {
	const n = 200_000
	rows := make([][2]int64, n)
	for i := range rows {
		rows[i] = [2]int64{int64(i) * 10, 10}
	}
	data := npyFile("<i8", rows)
	recs, err := objects.ParseIndex(bytes.NewReader(data), int64(len(data)), n*10)
	if err != nil || len(recs) != n || recs[n-1] != (objects.Record{Offset: (n - 1) * 10, Length: 10}) {
		t.Fatalf("got %d records, err %v", len(recs), err)
	}
	rows[150_001][1] = -1
	data = npyFile("<i8", rows)
	_, err = objects.ParseIndex(bytes.NewReader(data), int64(len(data)), -1)
	if err == nil || !strings.Contains(err.Error(), "row 150001: length -1 is negative") {
		t.Fatalf("err = %v", err)
	}
}

// TestParseIndex_NoDataSize: a negative dataSize disables the past-end check only.
func TestParseIndex_NoDataSize(t *testing.T) {
	src := []byte("5 1000000\n")
	recs, err := objects.ParseIndex(bytes.NewReader(src), int64(len(src)), -1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("recs %v err %v", recs, err)
	}
	src = []byte("-5 1\n")
	if _, err := objects.ParseIndex(bytes.NewReader(src), int64(len(src)), -1); errs.CodeOf(err) != errs.Format {
		t.Fatalf("err = %v", err)
	}
}

// failingReader fails every ReadAt past a limit with EIO.
type failingReader struct {
	data  []byte
	limit int64
}

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.limit {
		return 0, syscall.EIO
	}
	return copy(p, f.data[off:]), nil
}

// TestParseIndex_ReadError: an IO failure is reported as IO, not as a format problem.
func TestParseIndex_ReadError(t *testing.T) {
	data := npyFile("<i8", [][2]int64{{0, 1}, {1, 1}})
	_, err := objects.ParseIndex(failingReader{data, 100}, int64(len(data)), 10)
	if errs.CodeOf(err) != errs.IO || !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v (code %v)", err, errs.CodeOf(err))
	}
}

// TestParseIndexFile_OpenErrors: missing file and directory keep their codes and the path.
func TestParseIndexFile_OpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := objects.ParseIndexFile(filepath.Join(dir, "nope.txt"), 10)
	if errs.CodeOf(err) != errs.NotFound || !strings.Contains(err.Error(), "nope.txt") {
		t.Fatalf("missing: %v", err)
	}
	_, err = objects.ParseIndexFile(dir, 10)
	if errs.CodeOf(err) != errs.IsDir {
		t.Fatalf("dir: %v", err)
	}
}

// TestParseIndex_DTypes decodes the same rows from all four dtypes.
func TestParseIndex_DTypes(t *testing.T) {
	rows := [][2]int64{{0, 4}, {4, 0}, {2147483647, 1}}
	for _, d := range []string{"<i8", "<u8", "<i4", "<u4"} {
		data := npyFile(d, rows)
		recs, err := objects.ParseIndex(bytes.NewReader(data), int64(len(data)), 1<<31)
		if err != nil || len(recs) != 3 || recs[2] != (objects.Record{Offset: 2147483647, Length: 1}) {
			t.Fatalf("%s: %v %v", d, recs, err)
		}
	}
}
