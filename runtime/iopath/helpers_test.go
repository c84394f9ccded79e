//go:build linux

package iopath

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/stats"
)

// The P-file: byte i is (i*131+7) & 0xFF. 131 is odd, so the pattern has
// period 256 and every offset mix-up shows as wrong bytes.
func pByte(i int64) byte { return byte(i*131 + 7) }

var (
	pOnce sync.Once
	pBuf  []byte // pBuf[i] == pByte(i); long enough for every expected slice
)

const pBufLen = 64<<20 + 64<<10

// pattern returns the P-file's bytes [off, off+n) (shared; do not modify).
func pattern(off int64, n int) []byte {
	pOnce.Do(func() {
		pBuf = make([]byte, pBufLen)
		for i := 0; i < 256; i++ {
			pBuf[i] = pByte(int64(i))
		}
		for k := 256; k < len(pBuf); k *= 2 {
			copy(pBuf[k:], pBuf[:k])
		}
	})
	s := int(off % 256)
	return pBuf[s : s+n]
}

// writePFile writes a P-file of size bytes and fsyncs it, so that page-cache
// and O_DIRECT tests start from clean pages.
func writePFile(t testing.TB, path string, size int64) {
	t.Helper()
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < size; {
		n := min(size-off, 16<<20)
		if _, err := w.Write(pattern(off, int(n))); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// openFile acquires path from a fresh table that the test cleans up.
func openFile(t testing.TB, path string) *files.File {
	t.Helper()
	tb := files.NewTable(16, nil)
	f, _, err := tb.Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Release(); tb.Close() })
	return f
}

func newReader(t testing.TB, o config.Options, st *stats.Counters) *Reader {
	t.Helper()
	r, err := New(o, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := r.bounce.InUse(); n != 0 {
			t.Errorf("%d bounce buffers still in use at the end", n)
		}
		r.Close()
	})
	return r
}

func testOptions() config.Options {
	o := config.Defaults()
	o.TaskBytes = 1 << 20 // small tasks: reads of 1 MiB + 1 already take the parallel path
	o.MaxInflightMiB = 8
	return o
}

const canary = 0xAA

// guarded is a destination buffer with canary pages on both sides.
type guarded struct {
	raw    []byte
	lo, hi int
}

// newGuarded returns n bytes whose address is 4096-aligned plus misalign,
// surrounded by canary bytes.
func newGuarded(n, misalign int) *guarded {
	raw := make([]byte, n+3*4096+misalign)
	pad := int((4096 - uintptr(unsafe.Pointer(&raw[0]))%4096) % 4096)
	lo := pad + 4096 + misalign
	raw[0] = canary
	for k := 1; k < len(raw); k *= 2 { // copy doubling: a byte loop over 64 MiB is slow under -race
		copy(raw[k:], raw[:k])
	}
	return &guarded{raw: raw, lo: lo, hi: lo + n}
}

func (g *guarded) dst() []byte { return g.raw[g.lo:g.hi:g.hi] }

// check verifies dst[:got] equals want and that no other byte changed.
func (g *guarded) check(t testing.TB, what string, got int, want []byte) {
	t.Helper()
	d := g.dst()
	if got != len(want) {
		t.Fatalf("%s: read %d bytes, want %d", what, got, len(want))
	}
	if !bytes.Equal(d[:got], want) {
		i := 0
		for i < got && d[i] == want[i] {
			i++
		}
		t.Fatalf("%s: byte %d is %#x, want %#x", what, i, d[i], want[i])
	}
	for _, r := range [][2]int{{0, g.lo}, {g.lo + got, len(g.raw)}} {
		for i := r[0]; i < r[1]; i++ {
			if g.raw[i] != canary {
				t.Fatalf("%s: byte %d outside the read (dst %d..%d) was overwritten", what, i, g.lo, g.lo+got)
			}
		}
	}
}

// directOK skips the test when dir's file system refuses O_DIRECT.
func directOK(t *testing.T, f *files.File) (memAlign, offAlign int) {
	t.Helper()
	_, memAlign, offAlign, refused, err := f.Direct()
	if err != nil {
		t.Fatal(err)
	}
	if refused {
		t.Skipf("%s refuses O_DIRECT (B09 covers that)", filepath.Dir(f.Path))
	}
	return memAlign, offAlign
}
