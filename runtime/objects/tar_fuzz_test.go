package objects

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
)

// tarAllocPerByte and tarAllocSlack bound what one ParseTar call may allocate
// in all (garbage included): tarAllocPerByte times the input plus
// tarAllocSlack. archive/tar reads a pax or long-name entry with io.ReadAll,
// which grows its buffer as bytes arrive (and stops at 1 MiB), so allocation
// follows the input, not the sizes headers claim; the worst case per byte is
// a pax entry of tiny records (a map entry and two strings each). Measured
// ratios are in TestParseTar_AllocBound.
const (
	tarAllocPerByte = 48
	tarAllocSlack   = 64 << 10
)

// FuzzParseTar feeds arbitrary files (seeded with every corpus file and a few
// archives written by archive/tar) to ParseTar and checks: no panic;
// allocation within tarAllocPerByte x input + tarAllocSlack; a failure is a
// Format error starting with one of tarPhrases at a block-aligned offset
// inside the file; every member has 0 <= Offset, Offset%512 == 0,
// Offset+Size <= size and a non-empty name without NUL, and members are in
// file order without overlap; the result is deterministic; and an accepted
// archive lists the same members with the same bytes when archive/tar reads
// it as a plain stream (no Seek, every byte read).
func FuzzParseTar(f *testing.F) {
	ents, err := os.ReadDir(tarCorpusDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tar") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(tarCorpusDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatGNU, tar.FormatPAX} {
		data, _ := tarBuild(f, format,
			tarReg(strings.Repeat("x", 60)+"/"+strings.Repeat("y", 60), []byte("long")),
			tarOther("d/", tar.TypeDir, ""),
			tarReg("a", []byte("b")),
		)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		size := int64(len(data))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ms, err := ParseTar(bytes.NewReader(data), size)
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > uint64(tarAllocPerByte*len(data)+tarAllocSlack) {
			t.Fatalf("allocated %d bytes for a %d-byte input", d, len(data))
		}
		ms2, err2 := ParseTar(bytes.NewReader(data), size)
		if fmt.Sprint(ms, err) != fmt.Sprint(ms2, err2) {
			t.Fatalf("not deterministic: %v %v / %v %v", ms, err, ms2, err2)
		}
		if err != nil {
			var me *errs.Error
			if !errors.As(err, &me) || me.Code != errs.Format || me.Op != "tar" {
				t.Fatalf("not a tar Format error: %v", err)
			}
			if !slices.ContainsFunc(tarPhrases, func(p string) bool { return strings.HasPrefix(me.Msg, p) }) {
				t.Fatalf("message without a known phrase: %v", err)
			}
			if me.Offset < 0 || me.Offset%512 != 0 || me.Offset > size {
				t.Fatalf("bad error offset: %v", err)
			}
			return
		}
		end := int64(0) // members are in order and do not overlap
		for i, m := range ms {
			if m.Offset < end || m.Offset%512 != 0 || m.Size < 0 || m.Size > size-m.Offset {
				t.Fatalf("member %d %+v: bad range (file %d bytes, previous end %d)", i, m, size, end)
			}
			if m.Name == "" || strings.IndexByte(m.Name, 0) >= 0 {
				t.Fatalf("member %d: bad name %q", i, m.Name)
			}
			end = m.Offset + m.Size
		}
		// The oracle: archive/tar on a stream that cannot seek.
		tr := tar.NewReader(struct{ io.Reader }{bytes.NewReader(data)})
		i := 0
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("ParseTar accepted what a streaming read refuses: %v", err)
			}
			if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != tar.TypeCont {
				continue
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("streaming read of %q: %v", hdr.Name, err)
			}
			if i >= len(ms) || ms[i].Name != hdr.Name || !bytes.Equal(data[ms[i].Offset:ms[i].Offset+ms[i].Size], body) {
				t.Fatalf("member %d: ParseTar %v, stream %q with %d bytes", i, ms, hdr.Name, len(body))
			}
			i++
		}
		if i != len(ms) {
			t.Fatalf("ParseTar lists %d members, the stream %d", len(ms), i)
		}
	})
}

// TestParseTar_AllocBound measures the allocation per input byte on the
// worst shapes (tiny pax records, tiny members, GNU long names, a header that
// claims a huge pax entry) and checks the fuzz bound holds with room to spare.
func TestParseTar_AllocBound(t *testing.T) {
	var recs strings.Builder
	for i := range 80000 { // about 900 KB, under archive/tar's 1 MiB
		rec := fmt.Sprintf(" k%d=v\n", i)
		n := len(rec) + 1
		for len(fmt.Sprint(n))+len(rec) != n {
			n++
		}
		fmt.Fprintf(&recs, "%d%s", n, rec)
	}
	paxRecs := func() []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: "PaxHeaders/r", Typeflag: tar.TypeReg, Size: int64(recs.Len())})
		tw.Write([]byte(recs.String()))
		b := buf.Bytes() // header and records, not padded: the Writer is not closed
		b = append(b, make([]byte, (512-len(b)%512)%512)...)
		b[156] = 'x'
		tarFixChecksum(b, 0)
		rest, _ := tarBuild(t, tar.FormatUSTAR, tarReg("r", []byte("r")))
		return append(b, rest...)
	}()
	var tiny, long []tarEnt
	for i := range 5000 {
		tiny = append(tiny, tarReg(fmt.Sprint(i), nil))
		long = append(long, tarReg(strings.Repeat("n", 101)+fmt.Sprint(i), nil))
	}
	tinyData, _ := tarBuild(t, tar.FormatUSTAR, tiny...)
	longData, _ := tarBuild(t, tar.FormatGNU, long...)
	huge := bytes.Clone(paxRecs[:1024])
	copy(huge[124:], "77777777777\x00") // claims 8 GiB of pax records
	tarFixChecksum(huge, 0)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"pax_tiny_records", paxRecs}, {"tiny_members", tinyData}, {"gnu_long_names", longData}, {"huge_pax_claim", huge}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := ParseTar(bytes.NewReader(tc.data), int64(len(tc.data)))
		runtime.ReadMemStats(&after)
		d := after.TotalAlloc - before.TotalAlloc
		ratio := float64(d) / float64(len(tc.data))
		t.Logf("%s: %d bytes in, %d allocated (%.2f per byte), err %v", tc.name, len(tc.data), d, ratio, err)
		if d > uint64(tarAllocPerByte*len(tc.data)/2+tarAllocSlack) {
			t.Errorf("%s: %.2f bytes allocated per input byte, over half the fuzz bound %d", tc.name, ratio, tarAllocPerByte)
		}
	}
}
