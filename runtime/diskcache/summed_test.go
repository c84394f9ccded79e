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

// writeSummed writes summedChunk bytes at a time, each right after its
// checksums, the bytes land where they belong, and its checksums are
// pieceCRCs'.
func TestWriteSummedChunks(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		off int64
		n   int
	}{
		{headerAlign, 4 * M},          // a 4 MiB block after its 4 KiB header
		{headerAlign, 3*M + 12345},    // the last block of an object, not piece-aligned
		{2 * headerAlign, 2*M - 8192}, // shorter than two chunks
		{headerAlign, 1000},
		{0, 5 * M},
	} {
		data := pattern(tc.n, byte(tc.n))
		var want []string
		for lo := 0; lo < tc.n; lo += summedChunk {
			want = append(want, fmt.Sprintf("%d+%d", tc.off+int64(lo), min(summedChunk, tc.n-lo)))
		}
		var w writeLog
		crcs, err := writeSummed(&w, data, tc.off)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w.writes, want) {
			t.Errorf("off %d, %d bytes: writes %v, want %v", tc.off, tc.n, w.writes, want)
		}
		if !bytes.Equal(w.buf[tc.off:], data) {
			t.Errorf("off %d, %d bytes: bytes differ", tc.off, tc.n)
		}
		if !slices.Equal(crcs, pieceCRCs(data)) {
			t.Errorf("off %d, %d bytes: checksums differ from pieceCRCs", tc.off, tc.n)
		}
	}
}
