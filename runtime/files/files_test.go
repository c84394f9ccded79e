//go:build linux

package files

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/stats"
)

func write(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func acquire(t testing.TB, tb *Table, path string) (*File, uint64) {
	t.Helper()
	f, stale, err := tb.Acquire(path)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", path, err)
	}
	return f, stale
}

func readAll(t testing.TB, fd int, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	got, err := unix.Pread(fd, b, 0)
	if err != nil {
		t.Fatalf("pread fd %d: %v", fd, err)
	}
	return b[:got]
}

func TestAcquireReusesOpenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	write(t, p, []byte("hello"))
	var st stats.Counters
	tb := NewTable(8, &st)
	defer tb.Close()

	f1, stale1 := acquire(t, tb, p)
	f2, stale2 := acquire(t, tb, p)
	if f1 != f2 || stale1 != 0 || stale2 != 0 {
		t.Fatalf("second Acquire: file %p vs %p, stale %d %d", f1, f2, stale1, stale2)
	}
	if f1.ID == 0 || f1.Ident.Size != 5 || f1.Path != p {
		t.Fatalf("bad File: %+v", f1)
	}
	if got := readAll(t, f1.FD, 16); string(got) != "hello" {
		t.Fatalf("FD reads %q", got)
	}
	f1.Release()
	f2.Release()
	if st.FilesOpened.Load() != 1 {
		t.Fatalf("FilesOpened = %d, want 1", st.FilesOpened.Load())
	}
	// An idle File stays open for the next Acquire.
	f3, _ := acquire(t, tb, p)
	defer f3.Release()
	if f3 != f1 || st.FilesOpened.Load() != 1 {
		t.Fatal("idle File was not reused")
	}
}

func TestRewriteInPlaceGetsNewID(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	write(t, p, []byte("version-1"))
	var st stats.Counters
	tb := NewTable(8, &st)
	defer tb.Close()

	f1, _ := acquire(t, tb, p)
	old := f1.ID
	f1.Release()

	// Kernels without multigrain timestamps stamp mtime/ctime from a clock
	// that ticks every few ms; sleeping past a tick makes the test about
	// detection, not about timestamp granularity.
	time.Sleep(20 * time.Millisecond)
	w, err := os.OpenFile(p, os.O_WRONLY, 0) // same inode, same size, new bytes
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("version-2"), 0); err != nil {
		t.Fatal(err)
	}
	w.Close()

	f2, stale := acquire(t, tb, p)
	defer f2.Release()
	if f2.Ident.Ino != f1.Ident.Ino || f2.Ident.Size != f1.Ident.Size {
		t.Fatalf("expected same inode and size, got %+v vs %+v", f2.Ident, f1.Ident)
	}
	if f2.ID == old || stale != old {
		t.Fatalf("after rewrite: ID %d (old %d), staleID %d", f2.ID, old, stale)
	}
	if st.StaleInvalidations.Load() != 1 || st.FilesOpened.Load() != 2 {
		t.Fatalf("StaleInvalidations %d FilesOpened %d, want 1 and 2",
			st.StaleInvalidations.Load(), st.FilesOpened.Load())
	}
	if !f1.closed.Load() {
		t.Fatal("idle stale File was not closed")
	}
	if got := readAll(t, f2.FD, 32); string(got) != "version-2" {
		t.Fatalf("new File reads %q", got)
	}
}

func TestAtomicReplaceGetsNewIDAndKeepsHolder(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a")
	write(t, p, []byte("old-bytes"))
	var st stats.Counters
	tb := NewTable(8, &st)
	defer tb.Close()

	held, _ := acquire(t, tb, p)
	tmp := filepath.Join(dir, "a.tmp")
	write(t, tmp, []byte("new-bytes"))
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}

	f2, stale := acquire(t, tb, p)
	if f2.ID == held.ID || stale != held.ID || f2.Ident.Ino == held.Ident.Ino {
		t.Fatalf("after rename: ID %d old %d stale %d, ino %d vs %d",
			f2.ID, held.ID, stale, f2.Ident.Ino, held.Ident.Ino)
	}
	if st.StaleInvalidations.Load() != 1 {
		t.Fatalf("StaleInvalidations = %d, want 1", st.StaleInvalidations.Load())
	}
	// The reader that still holds the old version keeps a working descriptor.
	if held.closed.Load() {
		t.Fatal("stale File closed under its holder")
	}
	if got := readAll(t, held.FD, 32); string(got) != "old-bytes" {
		t.Fatalf("held File reads %q", got)
	}
	if got := readAll(t, f2.FD, 32); string(got) != "new-bytes" {
		t.Fatalf("new File reads %q", got)
	}
	held.Release()
	if !held.closed.Load() {
		t.Fatal("stale File not closed by its last Release")
	}
	f2.Release()

	// The same version keeps its ID even after its descriptor was dropped.
	tb.Drop(p)
	f3, stale3 := acquire(t, tb, p)
	defer f3.Release()
	if f3 == f2 || f3.ID != f2.ID || stale3 != 0 {
		t.Fatalf("reopened same version: ID %d want %d, stale %d", f3.ID, f2.ID, stale3)
	}
}

func TestAcquireErrors(t *testing.T) {
	dir := t.TempDir()
	tb := NewTable(8, nil)
	defer tb.Close()

	code := func(path string) errs.Code {
		f, _, err := tb.Acquire(path)
		if err == nil {
			f.Release()
			return errs.OK
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Op != "open" || e.Path != path {
			t.Errorf("Acquire(%s) error %v lacks op/path", path, err)
		}
		return errs.CodeOf(err)
	}
	if c := code(dir); c != errs.IsDir {
		t.Errorf("directory: %v, want IS_DIR", c)
	}
	if c := code(filepath.Join(dir, "missing")); c != errs.NotFound {
		t.Errorf("missing: %v, want NOT_FOUND", c)
	}
	if c := code(filepath.Join(dir, "missing", "below")); c != errs.NotFound {
		t.Errorf("missing parent: %v, want NOT_FOUND", c)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := code(fifo); c != errs.NotRegular { // and it must not hang waiting for a writer
		t.Errorf("fifo: %v, want NOT_REGULAR", c)
	}
	for _, pseudo := range []string{"/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"} {
		if _, err := os.Stat(pseudo); err != nil {
			continue
		}
		if c := code(pseudo); c != errs.NotRegular {
			t.Errorf("%s: %v, want NOT_REGULAR (its size is not real)", pseudo, c)
		}
	}
	if c := code("bad\x00path"); c == errs.OK {
		t.Error("path with NUL accepted")
	}

	if os.Geteuid() == 0 {
		t.Log("permission case skipped: running as root, which bypasses file modes")
		return
	}
	locked := filepath.Join(dir, "locked")
	write(t, locked, []byte("x"))
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	if c := code(locked); c != errs.Permission {
		t.Errorf("mode 000: %v, want PERMISSION", c)
	}
}

func TestLRUBound(t *testing.T) {
	dir := t.TempDir()
	var st stats.Counters
	tb := NewTable(3, &st)
	defer tb.Close()
	path := func(i int) string { return filepath.Join(dir, fmt.Sprint(i)) }
	for i := 0; i < 7; i++ {
		write(t, path(i), []byte{byte(i)})
	}
	files := map[int]*File{}
	use := func(i int) {
		f, _ := acquire(t, tb, path(i))
		files[i] = f
		f.Release()
	}
	for i := 0; i < 5; i++ {
		use(i)
	}
	if st.FilesEvicted.Load() != 2 || tb.Len() != 3 {
		t.Fatalf("after 5 files with bound 3: evicted %d, len %d", st.FilesEvicted.Load(), tb.Len())
	}
	if !files[0].closed.Load() || !files[1].closed.Load() || files[2].closed.Load() {
		t.Fatal("evicted files are not the two least recently used")
	}
	use(2) // now 3 is the least recently used
	use(5)
	if !files[3].closed.Load() || files[2].closed.Load() || files[4].closed.Load() {
		t.Fatal("LRU order ignored the re-acquire of file 2")
	}
	if st.FilesEvicted.Load() != 3 || st.FilesOpened.Load() != 6 {
		t.Fatalf("evicted %d opened %d, want 3 and 6", st.FilesEvicted.Load(), st.FilesOpened.Load())
	}
}

func TestBusyFilesAreNotEvicted(t *testing.T) {
	dir := t.TempDir()
	var st stats.Counters
	tb := NewTable(1, &st)
	defer tb.Close()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, []byte("aaaa"))
	write(t, b, []byte("bbbb"))

	fa, _ := acquire(t, tb, a)
	fb, _ := acquire(t, tb, b)
	if tb.Len() != 2 || st.FilesEvicted.Load() != 0 {
		t.Fatalf("busy files evicted: len %d evicted %d", tb.Len(), st.FilesEvicted.Load())
	}
	if string(readAll(t, fa.FD, 8)) != "aaaa" || string(readAll(t, fb.FD, 8)) != "bbbb" {
		t.Fatal("busy descriptors read wrong bytes")
	}
	fb.Release() // the table is over its bound: the idle File goes now
	if tb.Len() != 1 || st.FilesEvicted.Load() != 1 || !fb.closed.Load() || fa.closed.Load() {
		t.Fatalf("after release: len %d evicted %d", tb.Len(), st.FilesEvicted.Load())
	}
	fa.Release()
	if fa.closed.Load() || tb.Len() != 1 {
		t.Fatal("File within the bound was closed")
	}
}

func TestDropAndClose(t *testing.T) {
	dir := t.TempDir()
	tb := NewTable(8, nil)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, []byte("a"))
	write(t, b, []byte("b"))
	fa, _ := acquire(t, tb, a)
	fb, _ := acquire(t, tb, b)
	fb.Release()

	ids := tb.Drop(b)
	if len(ids) != 1 || ids[0] != fb.ID || !fb.closed.Load() {
		t.Fatalf("Drop(b) = %v, closed %v", ids, fb.closed.Load())
	}
	if ids := tb.Drop(b); len(ids) != 0 {
		t.Fatalf("second Drop(b) = %v", ids)
	}
	tb.Close()
	if fa.closed.Load() {
		t.Fatal("Close closed a File still held")
	}
	if string(readAll(t, fa.FD, 4)) != "a" {
		t.Fatal("held File unreadable after Close")
	}
	fa.Release()
	if !fa.closed.Load() {
		t.Fatal("held File not closed by its Release after Close")
	}
	if _, _, err := tb.Acquire(a); errs.CodeOf(err) != errs.Closed {
		t.Fatalf("Acquire after Close: %v", err)
	}
}

func TestReleaseWithoutAcquirePanics(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	write(t, p, []byte("a"))
	tb := NewTable(8, nil)
	defer tb.Close()
	f, _ := acquire(t, tb, p)
	f.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("double Release did not panic")
		}
	}()
	f.Release()
}

// TestConcurrentReadersNeverSeeClosedFD hammers a small table from many
// goroutines while another one keeps replacing the files: every pread on a
// held File must succeed and return one complete version of the contents.
func TestConcurrentReadersNeverSeeClosedFD(t *testing.T) {
	dir := t.TempDir()
	var st stats.Counters
	tb := NewTable(2, &st)
	defer tb.Close()
	const nfiles = 5
	content := func(i, v int) []byte { return bytes.Repeat([]byte{byte(i*16 + v%16)}, 4096) }
	for i := 0; i < nfiles; i++ {
		write(t, filepath.Join(dir, fmt.Sprint(i)), content(i, 0))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			buf := make([]byte, 4096)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (g + k) % nfiles
				f, _, err := tb.Acquire(filepath.Join(dir, fmt.Sprint(i)))
				if err != nil {
					continue // the replacer's rename window; not what is tested here
				}
				n, err := unix.Pread(f.FD, buf, 0)
				if err != nil || n != 4096 {
					t.Errorf("pread on held File %s: n=%d err=%v", f.Path, n, err)
				} else if v := buf[0]; v>>4 != byte(i) || !bytes.Equal(buf, bytes.Repeat([]byte{v}, 4096)) {
					t.Errorf("file %d returned mixed or foreign bytes (first %#x)", i, v)
				}
				reads.Add(1)
				f.Release()
			}
		}(g)
	}
	for v := 1; v <= 60; v++ {
		i := v % nfiles
		tmp := filepath.Join(dir, fmt.Sprintf("tmp%d", v))
		write(t, tmp, content(i, v))
		if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if reads.Load() == 0 {
		t.Fatal("no reads happened")
	}
	if tb.Len() > 2 {
		t.Fatalf("table holds %d idle Files, bound 2", tb.Len())
	}
	t.Logf("%d reads, opened %d, evicted %d, stale %d", reads.Load(),
		st.FilesOpened.Load(), st.FilesEvicted.Load(), st.StaleInvalidations.Load())
}

func TestAcquireOpenFileDoesNotAllocate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a")
	write(t, p, []byte("a"))
	tb := NewTable(8, nil)
	defer tb.Close()
	f, _ := acquire(t, tb, p)
	f.Release()
	allocs := testing.AllocsPerRun(200, func() {
		f, _, err := tb.Acquire(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
	})
	if allocs != 0 {
		t.Fatalf("Acquire+Release of an open file allocates %.1f times", allocs)
	}
}

func TestDirectAlignment(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/dev/shm"} {
		if _, err := os.Stat(dir); err != nil {
			t.Logf("%s: not present", dir)
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("memtier-files-%d", os.Getpid()))
		write(t, p, make([]byte, 10000))
		defer os.Remove(p)
		tb := NewTable(8, nil)
		defer tb.Close()
		f, _ := acquire(t, tb, p)
		if f.AlignSource() != "" || f.DirectRefused() {
			t.Fatal("direct state set before Direct was called")
		}
		fd, memA, offA, refused, err := f.Direct()
		if err != nil {
			t.Fatalf("%s: Direct: %v", dir, err)
		}
		if refused {
			t.Logf("%s: O_DIRECT refused at open", dir)
			if !f.DirectRefused() {
				t.Fatal("refusal not remembered")
			}
			f.Release()
			continue
		}
		t.Logf("%s: O_DIRECT ok, mem align %d, offset align %d, source %s", dir, memA, offA, f.AlignSource())
		if fd < 0 || fd == f.FD || memA <= 0 || offA <= 0 || memA&(memA-1) != 0 || offA&(offA-1) != 0 {
			t.Fatalf("bad direct fd/alignment: fd %d mem %d off %d", fd, memA, offA)
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_DIRECT == 0 {
			t.Fatalf("direct fd flags %#x, err %v", fl, err)
		}
		if fd2, _, _, _, _ := f.Direct(); fd2 != fd {
			t.Fatal("second Direct opened another descriptor")
		}
		f.MarkDirectRefused()
		if _, _, _, refused, _ := f.Direct(); !refused || !f.DirectRefused() {
			t.Fatal("MarkDirectRefused not remembered")
		}
		f.Release()
		tb.Drop("")
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			t.Fatalf("direct fd still open after the File was dropped (err %v)", err)
		}
	}
}

// TestFastPathKeepsLRU: a File reused through the fstat fast path, or
// trusted without any check, counts as recently used, so the table evicts
// the idle file nobody read instead.
func TestFastPathKeepsLRU(t *testing.T) {
	for _, trust := range []time.Duration{TrustNone, TrustForever} {
		dir := t.TempDir()
		var p [3]string
		for i := range p {
			p[i] = filepath.Join(dir, fmt.Sprintf("f%d", i))
			write(t, p[i], []byte("data"))
		}
		tab := NewTable(2, nil)
		tab.SetPathRecheck(time.Hour)
		acq := func(path string) *File {
			f, _, err := tab.AcquireTrusting(path, trust)
			if err != nil {
				t.Fatal(err)
			}
			f.Release()
			return f
		}
		a := acq(p[0])
		acq(p[1])
		acq(p[0]) // fast path (or trusted): a is now the most recent
		acq(p[2]) // evicts the least recently used: p[1]
		if tab.byPath[p[0]] != a || tab.byPath[p[1]] != nil || tab.Len() != 2 {
			t.Fatalf("trust %v: the table kept %v, want %s and %s", trust, tab.byPath, p[0], p[2])
		}
		tab.Close()
	}
}
