package diskcache

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// writeLog is an io.WriterAt that keeps every write: its offset, its
// length, and the bytes at their place.
type writeLog struct {
	writes []string
	buf    []byte
}

func (w *writeLog) WriteAt(p []byte, off int64) (int, error) {
	w.writes = append(w.writes, fmt.Sprintf("%d+%d", off, len(p)))
	if end := int(off) + len(p); end > len(w.buf) {
		w.buf = append(w.buf, make([]byte, end-len(w.buf))...)
	}
	copy(w.buf[off:], p)
	return len(p), nil
}

// writeSummed's writes end on folioAlign (2 MiB) boundaries of the file
// but the last, which ends with the payload (a folio's size depends on its
// offset's alignment and the bytes left in the write, so the tail costs
// no larger folio), the bytes land where they belong, and its checksums
// are pieceCRCs'.
func TestWriteSummedFolioAligned(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		off  int64
		n    int
		want []string
	}{
		// a 4 MiB block after its 4 KiB header: up to 2 MiB, then the rest
		{headerAlign, 4 * M, []string{"4096+2093056", "2097152+2101248"}},
		// the last block of an object, shorter and not piece-aligned
		{headerAlign, 3*M + 12345, []string{"4096+2093056", "2097152+1065017"}},
		{2 * headerAlign, 2*M - 2*headerAlign, []string{"8192+2088960"}},
		{headerAlign, 1000, []string{"4096+1000"}},
		{0, 5 * M, []string{"0+2097152", "2097152+2097152", "4194304+1048576"}},
	} {
		data := pattern(tc.n, byte(tc.n))
		var w writeLog
		crcs, err := writeSummed(&w, data, tc.off)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w.writes, tc.want) {
			t.Errorf("off %d, %d bytes: writes %v, want %v", tc.off, tc.n, w.writes, tc.want)
		}
		if !bytes.Equal(w.buf[tc.off:], data) {
			t.Errorf("off %d, %d bytes: bytes differ", tc.off, tc.n)
		}
		if !slices.Equal(crcs, pieceCRCs(data)) {
			t.Errorf("off %d, %d bytes: checksums differ from pieceCRCs", tc.off, tc.n)
		}
	}
}
