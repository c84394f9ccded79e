package objects_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/memtier/memtier/runtime/objects"
)

// stAllocPerByte and stAllocSlack bound what one parse may allocate in all
// (garbage included): stAllocPerByte times the input plus stAllocSlack. The
// header is read once (at most the input), and JSON tokens allocate a few
// times their text; measured ratios are in TestParseSafetensors_AllocBound.
const (
	stAllocPerByte = 64
	stAllocSlack   = 64 << 10
)

// FuzzParseSafetensors feeds arbitrary files (seeded with every hand-built
// case and every file of testdata/safetensors) to ParseSafetensors and checks:
// no panic; total allocation within stAllocPerByte x input + stAllocSlack; a
// failure is a Format error naming its kind; an accepted file satisfies the
// invariants (tensors tile [DataStart, FileSize) exactly, sizes match shapes);
// the result is deterministic.
func FuzzParseSafetensors(f *testing.F) {
	for _, c := range stCases() {
		f.Add(c.data)
	}
	ents, err := os.ReadDir(stCorpusDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(stCorpusDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := objects.ParseSafetensors(bytes.NewReader(data), int64(len(data)), objects.SafetensorsLimits{})
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > uint64(stAllocPerByte*len(data)+stAllocSlack) {
			t.Fatalf("allocated %d bytes for a %d-byte input", d, len(data))
		}
		s2, err2 := objects.ParseSafetensors(bytes.NewReader(data), int64(len(data)), objects.SafetensorsLimits{})
		if fmt.Sprint(s, err) != fmt.Sprint(s2, err2) {
			t.Fatalf("not deterministic: %v %v / %v %v", s, err, s2, err2)
		}
		if err != nil {
			stCheckError(t, err)
			return
		}
		stCheckInvariants(t, s, int64(len(data)))
	})
}

// TestParseSafetensors_AllocBound measures the allocation ratio on large
// headers of small tokens (the worst case per byte) and checks the fuzz bound
// holds with room to spare.
func TestParseSafetensors_AllocBound(t *testing.T) {
	var tensors, shapes bytes.Buffer
	tensors.WriteByte('{')
	for i := range 5000 {
		if i > 0 {
			tensors.WriteByte(',')
		}
		fmt.Fprintf(&tensors, `"%d":{"dtype":"U8","shape":[],"data_offsets":[%d,%d]}`, i, i, i+1)
	}
	tensors.WriteByte('}')
	shapes.WriteString(`{"a":{"dtype":"U8","data_offsets":[0,1],"shape":[1`)
	for range 20000 {
		shapes.WriteString(",1")
	}
	shapes.WriteString("]}}")
	var meta bytes.Buffer
	meta.WriteString(`{"__metadata__":{`)
	for i := range 5000 {
		if i > 0 {
			meta.WriteByte(',')
		}
		fmt.Fprintf(&meta, `"%d":""`, i)
	}
	meta.WriteString("}}")
	var skip bytes.Buffer
	skip.WriteString(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":[`)
	for range 20000 {
		skip.WriteString("[],")
	}
	skip.WriteString("0]}}")
	var fields bytes.Buffer
	fields.WriteString(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]`)
	for i := range 5000 {
		fmt.Fprintf(&fields, `,"%d":0`, i)
	}
	fields.WriteString("}}")
	for _, c := range []struct {
		name   string
		header []byte
		data   int
	}{{"5000 tensors", tensors.Bytes(), 5000}, {"20000 dims", shapes.Bytes(), 1}, {"5000 metadata", meta.Bytes(), 0}, {"skipped arrays", skip.Bytes(), 1}, {"5000 unknown fields", fields.Bytes(), 1}} {
		file := stFile(string(c.header), make([]byte, c.data))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := objects.ParseSafetensors(bytes.NewReader(file), int64(len(file)), objects.SafetensorsLimits{})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d := after.TotalAlloc - before.TotalAlloc
		ratio := float64(d) / float64(len(file))
		t.Logf("%s: %d-byte file, %d bytes allocated (%.1fx)", c.name, len(file), d, ratio)
		if d > uint64(stAllocPerByte*len(file)*3/4) {
			t.Fatalf("%s: %.1fx is too close to the fuzz bound %dx", c.name, ratio, stAllocPerByte)
		}
	}
}
