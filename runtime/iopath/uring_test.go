//go:build linux

package iopath

import (
	"bytes"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/stats"
)

// batchOrSkip runs ReadBatch and skips the test where the kernel refuses
// io_uring (the engine falls back; its tests cover that).
func batchOrSkip(t *testing.T, r *Reader, b []BatchRead, nowait bool) int {
	t.Helper()
	n, err := r.ReadBatch(b, nowait)
	if err != nil {
		if UringUnavailable() == "" {
			t.Fatalf("ReadBatch: %v, but UringUnavailable is empty", err)
		}
		t.Skipf("io_uring unavailable: %v", err)
	}
	return n
}

// TestReadBatch_ExactBytes: 600 elements (three rounds of the 256-entry
// ring) of two files, with duplicates, zero-length elements, ranges past end
// of file and a bad descriptor; every element gets exactly its bytes and
// its own result, and nothing outside a destination is written.
func TestReadBatch_ExactBytes(t *testing.T) {
	dir := t.TempDir()
	const sizeA, sizeB = 1<<20 + 123, 70_001
	writePFile(t, filepath.Join(dir, "a"), sizeA)
	writePFile(t, filepath.Join(dir, "b"), sizeB)
	fa, fb := openFile(t, filepath.Join(dir, "a")), openFile(t, filepath.Join(dir, "b"))
	st := new(stats.Counters)
	r := newReader(t, config.Defaults(), st)
	type want struct {
		n     int
		errno unix.Errno
		size  int64 // of the file, for the expected bytes
	}
	var b []BatchRead
	var w []want
	var gs []*guarded
	add := func(fd int, off int64, n int, size int64) {
		g := newGuarded(n, int(off%7))
		gs = append(gs, g)
		b = append(b, BatchRead{FD: fd, Dst: g.dst(), Off: off})
		got := int(max(0, min(int64(n), size-off)))
		w = append(w, want{n: got, size: size})
	}
	seed := uint64(7)
	for i := 0; i < 600; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		switch i % 6 {
		case 0, 1:
			add(fa.FD, int64(seed>>40)%sizeA, 1+int(seed>>20)%9000, sizeA)
		case 2:
			add(fb.FD, int64(seed>>40)%sizeB, 4096, sizeB)
		case 3:
			add(fa.FD, 4096, 4096, sizeA) // duplicates of one range
		case 4:
			add(fb.FD, sizeB-100, 300, sizeB) // runs past end of file: 100 bytes
		case 5:
			add(fa.FD, sizeA+5000, 64, sizeA) // starts past end of file: 0 bytes
		}
	}
	add(fa.FD, 0, 0, sizeA) // zero length
	b = append(b, BatchRead{FD: 1 << 20, Dst: make([]byte, 10), Off: 0})
	w = append(w, want{errno: unix.EBADF})
	gs = append(gs, nil)
	if n := batchOrSkip(t, r, b, false); n < 3 {
		t.Fatalf("%d submissions for 602 elements, want at least 3 (256 per ring)", n)
	}
	var total uint64
	for i := range b {
		if b[i].N != w[i].n || b[i].Errno != w[i].errno {
			t.Fatalf("element %d (off %d, len %d): N %d errno %v, want %d, %v",
				i, b[i].Off, len(b[i].Dst), b[i].N, b[i].Errno, w[i].n, w[i].errno)
		}
		if gs[i] != nil {
			gs[i].check(t, "element", b[i].N, pattern(b[i].Off, w[i].n))
			total += uint64(w[i].n)
		}
	}
	if got := st.StorageBytes.Load(); got != total {
		t.Fatalf("StorageBytes %d, want %d", got, total)
	}
}

// TestReadBatch_FaultHook: with every read clipped to 1000 bytes and an
// EINTR injected before every 3rd, elements still get all their bytes, and
// the retries are counted exactly.
func TestReadBatch_FaultHook(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writePFile(t, path, 1<<20)
	f := openFile(t, path)
	o := config.Defaults()
	o.Fault = "eintr_every=3,short_max=1000"
	st := new(stats.Counters)
	r := newReader(t, o, st)
	b := make([]BatchRead, 300)
	for i := range b {
		b[i] = BatchRead{FD: f.FD, Dst: make([]byte, 2500), Off: int64(i) * 3001}
	}
	batchOrSkip(t, r, b, false)
	for i := range b {
		if b[i].N != 2500 || b[i].Errno != 0 || !bytes.Equal(b[i].Dst, pattern(b[i].Off, 2500)) {
			t.Fatalf("element %d: N %d errno %v, or wrong bytes", i, b[i].N, b[i].Errno)
		}
	}
	// Each element is read in pieces of 1000, 1000 and 500 bytes: two short
	// counts each. The hook counts every attempt except the real read that
	// follows an injection, and injects at every 3rd count: 900 real reads
	// make 900 counts, so 300 injections.
	if got := st.ShortReadRetries.Load(); got != 600 {
		t.Fatalf("ShortReadRetries %d, want 600", got)
	}
	if got := st.EINTRRetries.Load(); got != 300 {
		t.Fatalf("EINTRRetries %d, want 300", got)
	}
	if got := st.StorageBytes.Load(); got != 300*2500 {
		t.Fatalf("StorageBytes %d, want %d", got, 300*2500)
	}
}

// TestReadBatch_NowaitCold: nowait reads of pages evicted from the page
// cache end with EAGAIN (after any resident bytes) and count no storage
// bytes; resident ranges are read whole.
func TestReadBatch_NowaitCold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writePFile(t, path, 8<<20) // fsynced: clean pages can be dropped
	f := openFile(t, path)
	if err := unix.Fadvise(f.FD, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if n, _ := Resident(f.FD, 0, 8<<20); n != 0 {
		t.Skipf("%d bytes still resident after FADV_DONTNEED", n)
	}
	warm := make([]byte, 4096)
	if _, err := unix.Pread(f.FD, warm, 4<<20); err != nil {
		t.Fatal(err)
	}
	if n, _ := Resident(f.FD, 4<<20, 4096); n != 4096 {
		t.Skipf("the warmed page is not resident (%d)", n)
	}
	st := new(stats.Counters)
	r := newReader(t, config.Defaults(), st)
	b := []BatchRead{
		{FD: f.FD, Dst: make([]byte, 4096), Off: 4 << 20}, // resident
		{FD: f.FD, Dst: make([]byte, 4096), Off: 1 << 20}, // cold
	}
	batchOrSkip(t, r, b, true)
	if b[0].N != 4096 || b[0].Errno != 0 || !bytes.Equal(b[0].Dst, pattern(4<<20, 4096)) {
		t.Fatalf("resident element: N %d errno %v", b[0].N, b[0].Errno)
	}
	if b[1].Errno != unix.EAGAIN || b[1].N != 0 {
		t.Fatalf("cold element: N %d errno %v, want 0, EAGAIN", b[1].N, b[1].Errno)
	}
	if got := st.StorageBytes.Load(); got != 4096 {
		t.Fatalf("StorageBytes %d, want 4096", got)
	}
	// Without nowait the same batch waits for the disk and reads both.
	batchOrSkip(t, r, b, false)
	for i := range b {
		if b[i].N != 4096 || b[i].Errno != 0 || !bytes.Equal(b[i].Dst, pattern(b[i].Off, 4096)) {
			t.Fatalf("blocking element %d: N %d errno %v", i, b[i].N, b[i].Errno)
		}
	}
}

// TestReadBatch_ConcurrentRings: batches on several goroutines at once each
// get their own ring and their own bytes (run with -race).
func TestReadBatch_ConcurrentRings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writePFile(t, path, 4<<20)
	f := openFile(t, path)
	r := newReader(t, config.Defaults(), nil)
	if _, err := r.ReadBatch(nil, false); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	errc := make(chan string, 4)
	for w := 0; w < 4; w++ {
		go func(w int) {
			for round := 0; round < 20; round++ {
				b := make([]BatchRead, 40)
				for i := range b {
					b[i] = BatchRead{FD: f.FD, Dst: make([]byte, 4096), Off: int64((w*40+i)*4096+round) % (4<<20 - 4096)}
				}
				if _, err := r.ReadBatch(b, false); err != nil {
					errc <- err.Error()
					return
				}
				for i := range b {
					if b[i].N != 4096 || !bytes.Equal(b[i].Dst, pattern(b[i].Off, 4096)) {
						errc <- "wrong bytes"
						return
					}
				}
			}
			errc <- ""
		}(w)
	}
	for w := 0; w < 4; w++ {
		if e := <-errc; e != "" {
			t.Fatal(e)
		}
	}
}
