package objects_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/objects"
)

// FuzzParseIndex feeds arbitrary bytes (seeded with every corpus file) to
// ParseIndex and checks: no panic; failures are Format errors naming a line,
// a row or the npy header/body; successes hold only in-range records; the
// result is deterministic; and a successful parse survives a round trip
// through both encodings.
func FuzzParseIndex(f *testing.F) {
	for name, c := range loadCorpus(f) {
		data, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			f.Fatal(err)
		}
		if len(data) <= 4096 {
			f.Add(data, c.DataSize)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, dataSize int64) {
		recs, err := objects.ParseIndex(bytes.NewReader(data), int64(len(data)), dataSize)
		recs2, err2 := objects.ParseIndex(bytes.NewReader(data), int64(len(data)), dataSize)
		if fmt.Sprint(recs, err) != fmt.Sprint(recs2, err2) {
			t.Fatalf("not deterministic: %v %v / %v %v", recs, err, recs2, err2)
		}
		if err != nil {
			if errs.CodeOf(err) != errs.Format {
				t.Fatalf("code %v: %v", errs.CodeOf(err), err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "index: line ") && !strings.HasPrefix(msg, "index: row ") &&
				!strings.HasPrefix(msg, "index: npy ") {
				t.Fatalf("message names no line, row or npy part: %q", msg)
			}
			return
		}
		for i, r := range recs {
			if r.Offset < 0 || r.Length < 0 || r.Offset > math.MaxInt64-r.Length ||
				(dataSize >= 0 && r.Offset+r.Length > dataSize) {
				t.Fatalf("record %d out of range: %+v (data %d)", i, r, dataSize)
			}
		}
		var text bytes.Buffer
		for _, r := range recs {
			fmt.Fprintf(&text, "%d\t%d\n", r.Offset, r.Length)
		}
		back, err := objects.ParseIndex(bytes.NewReader(text.Bytes()), int64(text.Len()), dataSize)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(recs) {
			t.Fatalf("text round trip: %v %v, want %v", back, err, recs)
		}
		rows := make([][2]int64, len(recs))
		for i, r := range recs {
			rows[i] = [2]int64{r.Offset, r.Length}
		}
		npy := npyFile("<i8", rows)
		back, err = objects.ParseIndex(bytes.NewReader(npy), int64(len(npy)), dataSize)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(recs) {
			t.Fatalf("npy round trip: %v %v, want %v", back, err, recs)
		}
	})
}
