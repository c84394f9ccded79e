//go:build linux

package iopath

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/stats"
)

// readFn is one of the three read paths under test.
type readFn func(t *testing.T, dst []byte, off int64) int

func modes(r *Reader, f *files.File, directRefused bool) map[string]readFn {
	return map[string]readFn{
		"pread": func(t *testing.T, dst []byte, off int64) int {
			n, err := r.PreadFull(f.FD, dst, off, f.Path, false, 0)
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
		"buffered": func(t *testing.T, dst []byte, off int64) int {
			n, err := r.ReadBuffered(f, dst, off)
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
		"direct": func(t *testing.T, dst []byte, off int64) int {
			n, fellBack, err := r.ReadDirect(f, dst, off, !directRefused)
			if err != nil {
				t.Fatal(err)
			}
			if fellBack != directRefused {
				t.Fatalf("fellBack = %v on a file system that refuses O_DIRECT: %v", fellBack, directRefused)
			}
			return n
		},
	}
}

// TestReadMatrix reads every offset and size of interest through all three
// paths into aligned and misaligned destinations.
func TestReadMatrix(t *testing.T) {
	const size = 64<<20 + 8<<10 + 5 // not a multiple of 4096
	path := filepath.Join(t.TempDir(), "p.bin")
	writePFile(t, path, size)
	f := openFile(t, path)
	_, _, _, refused, err := f.Direct()
	if err != nil {
		t.Fatal(err)
	}
	var st stats.Counters
	r := newReader(t, testOptions(), &st)

	want := func(off int64, n int) []byte {
		n = int(max(0, min(int64(n), size-off)))
		return pattern(off, n)
	}
	small := []int64{0, 1, 4095, 4096, 4097, 1<<20 + 1}
	for name, read := range modes(r, f, refused) {
		t.Run(name, func(t *testing.T) {
			for _, off := range small {
				for _, n := range small {
					for _, mis := range []int{0, 1} {
						g := newGuarded(int(n), mis)
						got := read(t, g.dst(), off)
						g.check(t, fmt.Sprintf("off %d size %d misalign %d", off, n, mis), got, want(off, int(n)))
					}
				}
			}
			// The 64 MiB cases, once each rather than in the cross product.
			const big = 64<<20 + 3
			for _, c := range []struct {
				off  int64
				n    int
				mis  int
				name string
			}{
				{0, big, 0, "whole 64 MiB + 3 aligned"},
				{1, big, 1, "64 MiB + 3 at offset 1, misaligned dst"},
				{big, 4097, 1, "4097 at 64 MiB + 3"},
				{big, 1<<20 + 1, 0, "1 MiB + 1 at 64 MiB + 3, crosses EOF"},
				{size - 1, 4096, 0, "last byte"},
				{size, 16, 0, "at EOF"},
				{size + 4096, 16, 0, "past EOF"},
			} {
				g := newGuarded(c.n, c.mis)
				got := read(t, g.dst(), c.off)
				g.check(t, c.name, got, want(c.off, c.n))
			}
		})
	}
	if refused {
		t.Logf("O_DIRECT refused in %s; the direct mode fell back", filepath.Dir(path))
	} else if st.BounceBytes.Load() == 0 {
		t.Error("no read went through a bounce buffer")
	}
	if st.StorageBytes.Load() == 0 {
		t.Error("StorageBytes not counted")
	}
}

// TestB08DirectTailAndUnaligned is field case B08 (tests/field_cases.md): O_DIRECT on ext4 with
// the last partial block and unaligned requests, no EINVAL escaping.
func TestB08DirectTailAndUnaligned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b08.bin")
	writePFile(t, path, 10000)
	f := openFile(t, path)
	memAlign, offAlign := directOK(t, f)
	t.Logf("%s: O_DIRECT alignment memory %d, offset %d, from %s", dir, memAlign, offAlign, f.AlignSource())

	var st stats.Counters
	o := config.Defaults()
	r := newReader(t, o, &st)
	for _, c := range []struct {
		off       int64
		n, mis    int
		wantBytes int
	}{
		{0, 10000, 0, 10000},
		{8190, 1810, 0, 1810},
		{4097, 3, 0, 3},
		{9999, 1, 0, 1},
		{4096, 4096, 0, 4096},
		{0, 4096, 1, 4096},    // misaligned destination
		{9000, 1000, 0, 1000}, // up to the edge
		{9000, 2000, 0, 1000}, // across EOF: short count, dst[1000:] untouched
	} {
		g := newGuarded(c.n, c.mis)
		got, fellBack, err := r.ReadDirect(f, g.dst(), c.off, true)
		what := fmt.Sprintf("ReadDirect(%d, %d) misalign %d", c.off, c.n, c.mis)
		if err != nil || fellBack {
			t.Fatalf("%s: err %v fellBack %v", what, err, fellBack)
		}
		g.check(t, what, got, pattern(c.off, c.wantBytes))
	}

	// The kernel does enforce the alignment on this file system, which is why
	// unaligned requests must go through the bounce buffer.
	dfd, _, _, _, _ := f.Direct()
	if _, err := r.PreadFull(dfd, newGuarded(100, 1).dst(), 1, path, true, offAlign); !errors.Is(err, unix.EINVAL) {
		t.Logf("unaligned O_DIRECT pread was accepted (err %v); the bounce path is then only a precaution", err)
	}

	// A file of exactly two blocks: the aligned read of the second one goes
	// straight into dst, no bounce.
	path2 := filepath.Join(dir, "b08-8192.bin")
	writePFile(t, path2, 8192)
	f2 := openFile(t, path2)
	before := st.BounceBytes.Load()
	g := newGuarded(4096, 0)
	got, _, err := r.ReadDirect(f2, g.dst(), 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, "8192-byte file (4096, 4096)", got, pattern(4096, 4096))
	if st.BounceBytes.Load() != before {
		t.Errorf("aligned read bounced %d bytes", st.BounceBytes.Load()-before)
	}
	if st.DirectFallbacks.Load() != 0 {
		t.Errorf("DirectFallbacks = %d on ext4", st.DirectFallbacks.Load())
	}
}

// TestB07PastEOF is field case B07 (tests/field_cases.md) at this layer: a read that runs past
// end of file returns the bytes that exist and writes nothing else, on every
// path; reads at or past EOF and of empty files return 0 and no error.
func TestB07PastEOF(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p100.bin")
	writePFile(t, path, 100)
	empty := filepath.Join(dir, "empty.bin")
	writePFile(t, empty, 0)
	r := newReader(t, config.Defaults(), nil)
	for _, c := range []struct {
		path    string
		off     int64
		n, want int
		dstLen  int
		what    string
	}{
		{path, 90, 20, 10, 32, "(a) 90+20 of 100"},
		{path, 100, 0, 0, 32, "(b) 100+0"},
		{path, 100, 1, 0, 32, "(c) 100+1"},
		{path, 200, 4, 0, 32, "(d) 200+4"},
		{empty, 0, 16, 0, 32, "(f) empty file 0+16"},
	} {
		f := openFile(t, c.path)
		_, _, _, refused, err := f.Direct()
		if err != nil {
			t.Fatal(err)
		}
		for name, read := range modes(r, f, refused) {
			g := newGuarded(c.dstLen, 0)
			got := read(t, g.dst()[:c.n], c.off)
			g.check(t, name+" "+c.what, got, pattern(c.off, c.want))
		}
	}
}

// TestDirectBypassesPageCache shows that the direct path really is O_DIRECT:
// after a dropped page cache, reading with it leaves the file uncached.
func TestDirectBypassesPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cold.bin")
	const size = 4 << 20
	writePFile(t, path, size)
	f := openFile(t, path)
	directOK(t, f)
	if err := DropPageCache(f.FD, 0, 0); err != nil {
		t.Fatal(err)
	}
	r := newReader(t, testOptions(), nil)
	g := newGuarded(size, 0)
	got, _, err := r.ReadDirect(f, g.dst(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, "cold direct read", got, pattern(0, size))
	res, err := Resident(f.FD, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	if res > size/4 {
		t.Fatalf("%d of %d bytes resident after an O_DIRECT read", res, size)
	}
}

// TestB09RefusedDirect is field case B09 (tests/field_cases.md) on /dev/shm. Kernels since 6.6
// let tmpfs accept O_DIRECT, so the refusal is also forced with
// MarkDirectRefused to cover the fallback everywhere.
func TestB09RefusedDirect(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	path := fmt.Sprintf("/dev/shm/mt_odirect_%d.bin", os.Getpid())
	writePFile(t, path, 10000)
	t.Cleanup(func() { os.Remove(path) })

	var st stats.Counters
	r := newReader(t, config.Defaults(), &st)
	read := func(f *files.File, off int64, n int, required bool) (int, bool, error, *guarded) {
		g := newGuarded(n, 0)
		got, fellBack, err := r.ReadDirect(f, g.dst(), off, required)
		return got, fellBack, err, g
	}

	f := openFile(t, path)
	got, fellBack, err, g := read(f, 0, 10000, false)
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, "tmpfs (0, 10000)", got, pattern(0, 10000))
	if fellBack {
		if st.DirectFallbacks.Load() != 1 {
			t.Fatalf("DirectFallbacks = %d, want 1", st.DirectFallbacks.Load())
		}
		checkDirectIOError(t, r, f, path)
	} else {
		t.Logf("this kernel's tmpfs accepts O_DIRECT (alignment source %q); bytes checked, fallback forced below", f.AlignSource())
		got, _, err, g = read(f, 4097, 3, true)
		if err != nil {
			t.Fatal(err)
		}
		g.check(t, "tmpfs (4097, 3) required", got, pattern(4097, 3))
	}

	// Forced refusal: what a file system without O_DIRECT does.
	st.Reset()
	f2 := openFile(t, path)
	f2.MarkDirectRefused()
	got, fellBack, err, g = read(f2, 4097, 3, false)
	if err != nil || !fellBack {
		t.Fatalf("refused: err %v fellBack %v", err, fellBack)
	}
	g.check(t, "refused (4097, 3)", got, pattern(4097, 3))
	if st.DirectFallbacks.Load() != 1 {
		t.Fatalf("DirectFallbacks = %d, want exactly 1", st.DirectFallbacks.Load())
	}
	checkDirectIOError(t, r, f2, path)
	if st.DirectFallbacks.Load() != 1 {
		t.Fatalf("required read counted a fallback")
	}
}

func checkDirectIOError(t *testing.T, r *Reader, f *files.File, path string) {
	t.Helper()
	g := newGuarded(100, 0)
	n, fellBack, err := r.ReadDirect(f, g.dst(), 0, true)
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.DirectIO || e.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("required O_DIRECT on a refusing file system: n %d fellBack %v err %v", n, fellBack, err)
	}
	g.check(t, "failed required read", 0, nil)
}

// TestB04Faults is field case B04 (tests/field_cases.md): injected EINTR and short counts never
// reach the caller and never change the bytes.
func TestB04Faults(t *testing.T) {
	const size = 16 << 20
	dir := t.TempDir()
	path := filepath.Join(dir, "b04.bin")
	writePFile(t, path, size)
	reads := 1000
	if testing.Short() {
		reads = 200
	}
	for _, spec := range []string{"eintr_every=3", "short_max=4095", "eintr_every=3,short_max=4095"} {
		for _, direct := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/direct=%v", spec, direct), func(t *testing.T) {
				f := openFile(t, path)
				if direct {
					directOK(t, f)
				}
				var st stats.Counters
				o := config.Defaults()
				o.TaskBytes = 64 << 10 // reads straddle tasks, so the faults hit Run's helpers too
				o.Fault = spec
				r := newReader(t, o, &st)
				rng := rand.New(rand.NewPCG(4, uint64(len(spec))))
				for i := 0; i < reads; i++ {
					n := 1 + rng.IntN(64<<10)
					off := rng.Int64N(size - int64(n) + 1)
					mis := rng.IntN(2)
					if i%4 == 0 { // some fully aligned reads take the straight direct path
						n, off, mis = (n+4095)&^4095, off&^4095, 0
						off = min(off, size-int64(n))
					}
					g := newGuarded(n, mis)
					var got int
					var err error
					if direct {
						var fellBack bool
						got, fellBack, err = r.ReadDirect(f, g.dst(), off, true)
						if fellBack {
							t.Fatal("fell back")
						}
					} else {
						got, err = r.ReadBuffered(f, g.dst(), off)
					}
					if err != nil {
						t.Fatalf("read %d (%d, %d): %v", i, off, n, err)
					}
					g.check(t, fmt.Sprintf("read %d (%d, %d)", i, off, n), got, pattern(off, n))
				}
				if strings.Contains(spec, "eintr") && st.EINTRRetries.Load() == 0 {
					t.Error("EINTRRetries = 0")
				}
				if strings.Contains(spec, "short") && st.ShortReadRetries.Load() == 0 {
					t.Error("ShortReadRetries = 0")
				}
				t.Logf("EINTRRetries %d ShortReadRetries %d", st.EINTRRetries.Load(), st.ShortReadRetries.Load())
			})
		}
	}
}

// TestB05ShortMaxManySyscalls is the cheap B05: a large read made of
// thousands of short preads, with the exact retry count.
func TestB05ShortMaxManySyscalls(t *testing.T) {
	const size = 16 << 20
	path := filepath.Join(t.TempDir(), "b05.bin")
	writePFile(t, path, size)
	f := openFile(t, path)

	var st stats.Counters
	o := config.Defaults() // 4 MiB tasks: 4 of them
	o.Fault = "short_max=4095"
	r := newReader(t, o, &st)

	g := newGuarded(size, 0)
	got, err := r.ReadBuffered(f, g.dst(), 0)
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, "buffered 16 MiB in 4095-byte preads", got, pattern(0, size))
	perTask := (4<<20 + 4094) / 4095 // preads per 4 MiB task
	if want := uint64(4 * (perTask - 1)); st.ShortReadRetries.Load() != want {
		t.Fatalf("ShortReadRetries = %d, want %d", st.ShortReadRetries.Load(), want)
	}

	_, _, offAlign, refused, _ := f.Direct()
	if refused {
		return
	}
	st.Reset()
	g = newGuarded(size, 0)
	got, _, err = r.ReadDirect(f, g.dst(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	g.check(t, "direct 16 MiB in short preads", got, pattern(0, size))
	clip := max(4095/offAlign*offAlign, offAlign)
	perTask = (4<<20 + clip - 1) / clip
	if want := uint64(4 * (perTask - 1)); st.ShortReadRetries.Load() != want {
		t.Fatalf("direct ShortReadRetries = %d, want %d (clip %d)", st.ShortReadRetries.Load(), want, clip)
	}
}

// TestB05Over2GiB is the real B05 (MEMTIER_SLOW_TESTS=1): a 2,300,000,000
// byte sparse file read whole, so one request exceeds what Linux moves in a
// single pread.
func TestB05Over2GiB(t *testing.T) {
	if os.Getenv("MEMTIER_SLOW_TESTS") != "1" {
		t.Skip("set MEMTIER_SLOW_TESTS=1 (needs about 2.5 GB of memory)")
	}
	const size = 2_300_000_000
	path := filepath.Join(t.TempDir(), "b05-big.bin")
	marks := map[int64]string{0: "HEAD0000", 2147479548: "EDGE1234", size - 8: "TAIL9999"}
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for off, m := range marks {
		if _, err := w.WriteAt([]byte(m), off); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	f := openFile(t, path)

	// Off the Go heap, like the caller's numpy or C buffer would be.
	dst, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		t.Skipf("cannot map %d bytes: %v", size, err)
	}
	defer unix.Munmap(dst)
	verify := func(what string, got int) {
		t.Helper()
		if got != size {
			t.Fatalf("%s: read %d, want %d", what, got, size)
		}
		for mo, m := range marks {
			if string(dst[mo:mo+8]) != m {
				t.Fatalf("%s: marker at %d is %q, want %q", what, mo, dst[mo:mo+8], m)
			}
			clear(dst[mo : mo+8])
		}
		zero := make([]byte, 1<<20)
		for off := 0; off < size; off += len(zero) {
			chunk := dst[off:min(off+len(zero), size)]
			if !bytes.Equal(chunk, zero[:len(chunk)]) {
				t.Fatalf("%s: non-zero byte in the hole at [%d, %d)", what, off, off+len(chunk))
			}
		}
		clear(dst)
	}
	r := newReader(t, config.Defaults(), nil)
	n, err := r.PreadFull(f.FD, dst, 0, path, false, 0) // one loop, 1 GiB syscalls
	if err != nil {
		t.Fatal(err)
	}
	verify("PreadFull", n)
	n, err = r.ReadBuffered(f, dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	verify("ReadBuffered", n)
	n, _, err = r.ReadDirect(f, dst, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	verify("ReadDirect", n)
}

func TestBadRangesAndFaultSpec(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.bin")
	writePFile(t, path, 100)
	f := openFile(t, path)
	r := newReader(t, config.Defaults(), nil)
	dst := make([]byte, 10)
	if _, err := r.PreadFull(f.FD, dst, -1, path, false, 0); errs.CodeOf(err) != errs.InvalidArg {
		t.Errorf("negative offset: %v", err)
	}
	if _, err := r.ReadBuffered(f, dst, 1<<63-5); errs.CodeOf(err) != errs.InvalidArg {
		t.Errorf("overflowing range: %v", err)
	}
	if _, _, err := r.ReadDirect(f, dst, -4096, false); errs.CodeOf(err) != errs.InvalidArg {
		t.Errorf("negative direct offset: %v", err)
	}
	if _, err := r.PreadFull(-1, dst, 0, path, false, 0); err == nil {
		t.Error("bad descriptor: no error")
	} else if e := (*errs.Error)(nil); !errors.As(err, &e) || e.Op != "pread" || e.Path != path || e.Errno != unix.EBADF {
		t.Errorf("bad descriptor: %#v", err)
	}
	o := config.Defaults()
	o.Fault = "eintr_every=x"
	if _, err := New(o, nil); errs.CodeOf(err) != errs.Format {
		t.Errorf("bad fault spec: %v", err)
	}
}

func TestResident(t *testing.T) {
	const size = 8 << 20
	path := filepath.Join(t.TempDir(), "res.bin")
	writePFile(t, path, size)
	f := openFile(t, path)
	r := newReader(t, testOptions(), nil)

	if n, err := Resident(f.FD, 0, 0); n != 0 || err != nil {
		t.Fatalf("empty range: %d %v", n, err)
	}
	if _, err := r.ReadBuffered(f, make([]byte, size), 0); err != nil {
		t.Fatal(err)
	}
	if n, err := Resident(f.FD, 0, size); err != nil || n != size {
		t.Fatalf("after reading: %d of %d resident (%v)", n, size, err)
	}
	if n, err := Resident(f.FD, 100, 5000); err != nil || n != 5000 {
		t.Fatalf("unaligned sub-range: %d of 5000 resident (%v)", n, err)
	}
	if n, err := Resident(f.FD, size-10, 1<<20); err != nil || n != 10 {
		t.Fatalf("range past EOF: %d resident, want 10 (%v)", n, err)
	}
	if err := DropPageCache(f.FD, 0, 0); err != nil {
		t.Fatal(err)
	}
	n, err := Resident(f.FD, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	if n >= size/2 {
		t.Fatalf("after DropPageCache: %d of %d resident", n, size)
	}
	t.Logf("after DropPageCache: %d of %d bytes resident", n, size)
	if _, err := Resident(-1, 0, 4096); err == nil {
		t.Error("bad descriptor: no error")
	}
}

func TestResidentEstimate_WarmAndCold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "est.bin")
	if err := os.WriteFile(path, make([]byte, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < 64<<20; off += 1 << 20 {
		unix.Pread(fd, buf, off)
	}
	if n, err := ResidentEstimate(fd, 0, 64<<20, 64); err != nil || n != 64<<20 {
		t.Fatalf("warm estimate = %d, %v; want all", n, err)
	}
	unix.Fsync(fd)
	if err := DropPageCache(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := ResidentEstimate(fd, 0, 64<<20, 64); err != nil || n > 32<<20 {
		t.Fatalf("cold estimate = %d, %v; want under half", n, err)
	}
}

// TestDirectCoAlignedNoBounce: a destination placed at the file offset's
// alignment (address = offset modulo 4096, as the Python safetensors loader
// places its buffer) gets the aligned middle straight from O_DIRECT; only the
// unaligned head and tail bounce. Bytes are checked with canaries around.
func TestDirectCoAlignedNoBounce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "coaligned.bin")
	const size = 3<<20 + 777
	writePFile(t, path, size)
	f := openFile(t, path)
	_, offAlign := directOK(t, f)
	a := int64(offAlign)
	// head and tail: the bytes outside the largest aligned middle
	edges := func(off int64, n int) uint64 {
		end := off + int64(n)
		hs, he := alignUp(off, a), min(alignDown(end, a), alignDown(size, a))
		return uint64(hs-off) + uint64(end-he)
	}
	var st stats.Counters
	r := newReader(t, testOptions(), &st)
	for _, c := range []struct {
		off int64
		n   int
	}{
		{4096 + 100, 2 << 20},
		{100, 3 << 20},
		{5, size - 5}, // to end of file: the partial last block bounces
		{4096, 1 << 20},
	} {
		g := newGuarded(c.n, int(c.off%4096))
		before := st.BounceBytes.Load()
		got, fellBack, err := r.ReadDirect(f, g.dst(), c.off, true)
		what := fmt.Sprintf("ReadDirect(%d, %d) co-aligned", c.off, c.n)
		if err != nil || fellBack {
			t.Fatalf("%s: err %v fellBack %v", what, err, fellBack)
		}
		g.check(t, what, got, pattern(c.off, c.n))
		if b, want := st.BounceBytes.Load()-before, edges(c.off, c.n); b != want || b >= uint64(2*a) {
			t.Errorf("%s: bounced %d bytes, want %d (head and tail only, alignment %d)", what, b, want, a)
		}
	}
}
