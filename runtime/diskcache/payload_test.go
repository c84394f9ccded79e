package diskcache

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteSummed: writeSummed writes the payload at its offset and
// returns the same piece checksums as pieceCRCs, for payloads shorter than
// a piece, of whole chunks, and ending inside a piece of the last chunk.
func TestWriteSummed(t *testing.T) {
	for _, n := range []int{1, pieceBytes, summedChunk, 2*summedChunk + 3*pieceBytes + 100} {
		data := pattern(n, byte(n))
		p := filepath.Join(t.TempDir(), "e")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		crcs, err := writeSummed(f, data, headerAlign)
		f.Close()
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if want := pieceCRCs(data); !slices.Equal(crcs, want) {
			t.Fatalf("%d bytes: checksums %x, want %x", n, crcs, want)
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != headerAlign+n || !bytes.Equal(got[headerAlign:], data) {
			t.Fatalf("%d bytes: file of %d bytes does not hold the payload at %d", n, len(got), headerAlign)
		}
	}
}
