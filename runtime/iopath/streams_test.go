//go:build linux

package iopath

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/stats"
)

func TestStreamPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for k := 0; k < 20000; k++ {
		task := int64(4096) << rng.IntN(16)
		par := 1 + rng.IntN(16)
		off := rng.Int64N(1 << 40)
		n := 1 + rng.Int64N(4<<30)
		p := streamPlan(off, n, task, par)
		seg := p.size
		if seg < task || seg%task != 0 || (seg > streamSegMax && seg != task) {
			t.Fatalf("off %d n %d task %d par %d: segment %d", off, n, task, par, seg)
		}
		if p.count < 1 || int64(p.count) > n/seg+2 {
			t.Fatalf("off %d n %d: %d segments of %d", off, n, p.count, seg)
		}
		pos := off
		for i := 0; i < p.count; i++ {
			s, e := p.task(i)
			if s != pos || e <= s || e-s > seg || (i > 0 && s%seg != 0) {
				t.Fatalf("off %d n %d seg %d: segment %d is [%d, %d), want start %d", off, n, seg, i, s, e, pos)
			}
			pos = e
		}
		if pos != off+n {
			t.Fatalf("off %d n %d: segments end at %d", off, n, pos)
		}
	}
	// A 1 GiB read with 4 workers and 4 MiB tasks: eight 128 MiB segments.
	if p := streamPlan(0, 1<<30, 4<<20, 4); p.size != 128<<20 || p.count != 8 {
		t.Fatalf("1 GiB: %d segments of %d", p.count, p.size)
	}
	// The smallest stream read: one task-size segment per worker.
	if p := streamPlan(0, StreamMinBytes, 4<<20, 4); p.size != 4<<20 || p.count != 4 {
		t.Fatalf("16 MiB: %d segments of %d", p.count, p.size)
	}
}

// TestReadStreams reads large ranges through the stream path, with and
// without injected faults, up to and past end of file.
func TestReadStreams(t *testing.T) {
	const size = 40<<20 + 12345
	path := filepath.Join(t.TempDir(), "streams.bin")
	writePFile(t, path, size)
	for _, spec := range []string{"", "eintr_every=7", "short_max=100000", "eintr_every=5,short_max=65537"} {
		t.Run(fmt.Sprintf("fault=%q", spec), func(t *testing.T) {
			f := openFile(t, path)
			var st stats.Counters
			o := testOptions()
			o.Fault = spec
			r := newReader(t, o, &st)
			if !r.streams(StreamMinBytes) || r.streams(StreamMinBytes-1) {
				t.Fatal("stream threshold")
			}
			cases := [][2]int64{{0, size}, {1, size - 1}, {12345, StreamMinBytes}, {size - StreamMinBytes, StreamMinBytes},
				{3<<20 + 5, 30<<20 + 7}, {0, size + 99999}, {size - (20 << 20), 24 << 20}}
			for _, c := range cases {
				off, n := c[0], c[1]
				st.Reset()
				g := newGuarded(int(n), int(off%3))
				got, err := r.ReadBuffered(f, g.dst(), off)
				if err != nil {
					t.Fatalf("[%d, +%d): %v", off, n, err)
				}
				want := min(n, size-off)
				g.check(t, fmt.Sprintf("[%d, +%d)", off, n), got, pattern(off, int(want)))
				if st.StorageBytes.Load() != uint64(want) {
					t.Fatalf("StorageBytes %d, want %d", st.StorageBytes.Load(), want)
				}
				if spec != "" && st.EINTRRetries.Load()+st.ShortReadRetries.Load() == 0 {
					t.Fatalf("%s: no fault was injected", spec)
				}
			}
		})
	}
}

// TestReadStreams_OneWorker: with IOThreads 1 a large read stays on the
// File's descriptor (no stream to run in parallel).
func TestReadStreams_OneWorker(t *testing.T) {
	const size = 20 << 20
	path := filepath.Join(t.TempDir(), "one.bin")
	writePFile(t, path, size)
	o := testOptions()
	o.IOThreads = 1
	r := newReader(t, o, nil)
	if r.streams(size) {
		t.Fatal("streams with one worker")
	}
	g := newGuarded(size, 0)
	got, err := r.ReadBuffered(openFile(t, path), g.dst(), 0)
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, "one worker", got, pattern(0, size))
}

// TestStreamFD_Fallback: when no new descriptor can be opened, the stream
// reads the File's own.
func TestStreamFD_Fallback(t *testing.T) {
	f := &files.File{Path: "none", FD: 1 << 30}
	if fd := streamFD(f); fd != f.FD {
		t.Fatalf("streamFD of a descriptor that is not open = %d, want the File's %d", fd, f.FD)
	}
	path := filepath.Join(t.TempDir(), "fd.bin")
	writePFile(t, path, 4096)
	g := openFile(t, path)
	fd := streamFD(g)
	if fd == g.FD {
		t.Fatal("no descriptor of its own")
	}
	defer closeFD(fd)
	buf := make([]byte, 4096)
	r := newReader(t, testOptions(), nil)
	if n, err := r.PreadFull(fd, buf, 0, path, false, 0); err != nil || n != 4096 || string(buf) != string(pattern(0, 4096)) {
		t.Fatalf("read through the stream descriptor: %d %v", n, err)
	}
}

func closeFD(fd int) { unix.Close(fd) }
