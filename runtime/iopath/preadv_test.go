//go:build linux

package iopath

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/stats"
)

// splitBufs cuts n bytes into random buffers (some empty), backed by one
// canary-filled slice so a write outside them shows.
func splitBufs(rng *rand.Rand, n, maxPart int) (bufs [][]byte, backing []byte) {
	backing = bytes.Repeat([]byte{canary}, n+64)
	pos := 32
	for left := n; left > 0; {
		k := min(left, rng.IntN(maxPart+1))
		bufs = append(bufs, backing[pos:pos+k:pos+k])
		pos += k
		left -= k
	}
	return bufs, backing
}

func checkBufs(t *testing.T, what string, backing []byte, off int64, got, n int) {
	t.Helper()
	if !bytes.Equal(backing[32:32+got], pattern(off, got)) {
		t.Fatalf("%s: bytes differ from the P-file", what)
	}
	for i := 32 + got; i < len(backing); i++ {
		if backing[i] != canary {
			t.Fatalf("%s: byte %d past the %d bytes read was written", what, i-32, got)
		}
	}
	for i := 0; i < 32; i++ {
		if backing[i] != canary {
			t.Fatalf("%s: byte before the buffers was written", what)
		}
	}
	_ = n
}

func TestPreadvFull_BytesFaultsAndEOF(t *testing.T) {
	const size = 4<<20 + 123
	path := filepath.Join(t.TempDir(), "v.bin")
	writePFile(t, path, size)
	for _, spec := range []string{"", "eintr_every=3", "short_max=4095", "eintr_every=2,short_max=1000"} {
		t.Run(fmt.Sprintf("fault=%q", spec), func(t *testing.T) {
			f := openFile(t, path)
			var st stats.Counters
			o := config.Defaults()
			o.Fault = spec
			r := newReader(t, o, &st)
			rng := rand.New(rand.NewPCG(7, uint64(len(spec))))
			for i := 0; i < 200; i++ {
				n := rng.IntN(256 << 10)
				off := rng.Int64N(size - int64(n) + 1)
				bufs, backing := splitBufs(rng, n, 1+rng.IntN(8<<10))
				got, err := r.ReadBufferedV(f, bufs, off)
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if got != n {
					t.Fatalf("read %d: got %d bytes, want %d", i, got, n)
				}
				checkBufs(t, fmt.Sprintf("read %d", i), backing, off, got, n)
			}
			// Past end of file: a short count, never bytes beyond the file.
			bufs, backing := splitBufs(rng, 10000, 700)
			got, err := r.PreadvFull(f.FD, bufs, size-4000, path)
			if err != nil || got != 4000 {
				t.Fatalf("tail read: got %d, %v; want 4000, nil", got, err)
			}
			checkBufs(t, "tail", backing, size-4000, got, 10000)
			if strings.Contains(spec, "eintr") && st.EINTRRetries.Load() == 0 {
				t.Error("EINTRRetries = 0 with an EINTR fault")
			}
			if strings.Contains(spec, "short") && st.ShortReadRetries.Load() == 0 {
				t.Error("ShortReadRetries = 0 with a short-read fault")
			}
		})
	}
}

// More buffers than one preadv takes: the loop issues several calls.
func TestPreadvFull_ManyBuffers(t *testing.T) {
	const n = 3*MaxIOV + 17
	path := filepath.Join(t.TempDir(), "v.bin")
	writePFile(t, path, 4*n+100)
	f := openFile(t, path)
	var st stats.Counters
	r := newReader(t, config.Defaults(), &st)
	backing := bytes.Repeat([]byte{canary}, 4*n+64)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = backing[32+4*i : 36+4*i : 36+4*i]
	}
	got, err := r.ReadBufferedV(f, bufs, 5)
	if err != nil || got != 4*n {
		t.Fatalf("got %d, %v; want %d", got, err, 4*n)
	}
	checkBufs(t, "many", backing, 5, got, 4*n)
	if st.StorageBytes.Load() != 4*n {
		t.Errorf("StorageBytes = %d, want %d", st.StorageBytes.Load(), 4*n)
	}
	if got, err := r.PreadvFull(f.FD, nil, 0, path); got != 0 || err != nil {
		t.Errorf("no buffers: %d, %v", got, err)
	}
	if _, err := r.PreadvFull(f.FD, bufs[:1], -1, path); err == nil {
		t.Error("negative offset accepted")
	}
}

func TestAdvance(t *testing.T) {
	bufs := [][]byte{make([]byte, 3), nil, make([]byte, 2), make([]byte, 4)}
	for _, c := range []struct{ cur, skip, n, wc, ws int }{
		{0, 0, 0, 0, 0}, {0, 0, 2, 0, 2}, {0, 0, 3, 2, 0}, {0, 1, 3, 2, 1},
		{0, 0, 5, 3, 0}, {0, 0, 9, 4, 0}, {2, 1, 1, 3, 0},
	} {
		if c2, s2 := advance(bufs, c.cur, c.skip, c.n); c2 != c.wc || s2 != c.ws {
			t.Errorf("advance(%d, %d, %d) = (%d, %d), want (%d, %d)", c.cur, c.skip, c.n, c2, s2, c.wc, c.ws)
		}
	}
}
