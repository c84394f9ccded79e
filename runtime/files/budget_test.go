//go:build linux

package files

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/stats"
)

// withSoftLimit makes Budget see soft as the soft RLIMIT_NOFILE for the
// duration of the test, without touching the test process's real limit.
func withSoftLimit(t *testing.T, soft uint64) {
	t.Helper()
	old := softLimit
	softLimit = func() uint64 { return soft }
	t.Cleanup(func() { softLimit = old })
}

func TestBudgetIsShareOfSoftLimit(t *testing.T) {
	for _, c := range []struct {
		soft uint64
		want int
	}{{40, 10}, {33, 8}, {4, 8}, {0, 8}, {1024, 256}, {1 << 62, 1 << 30}, {^uint64(0), 1 << 30}} {
		withSoftLimit(t, c.soft)
		got, soft := Budget()
		if got != c.want || soft != c.soft {
			t.Errorf("soft %d: Budget() = %d, %d; want %d, %d", c.soft, got, soft, c.want, c.soft)
		}
	}
}

// makeFiles writes n files of 4 KiB; file i is filled with byte i%251.
func makeFiles(t testing.TB, dir string, n int) []string {
	t.Helper()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("f%03d", i))
		write(t, paths[i], bytes.Repeat([]byte{byte(i % 251)}, 4096))
	}
	return paths
}

// readOne acquires path, checks 16 bytes at offset 100 are want, releases.
func readOne(tb *Table, path string, want byte) error {
	f, _, err := tb.Acquire(path)
	if err != nil {
		return err
	}
	defer f.Release()
	b := make([]byte, 16)
	if n, err := unix.Pread(f.FD, b, 100); err != nil || n != 16 {
		return fmt.Errorf("pread %s: %d, %v", path, n, err)
	}
	if !bytes.Equal(b, bytes.Repeat([]byte{want}, 16)) {
		return fmt.Errorf("%s: read %x, want 16 x %02x", path, b, want)
	}
	return nil
}

// TestProcessBudgetSharedByTables: three tables, each allowed 16 Files, share
// one budget of 10 descriptors (soft limit 40): 30 distinct files opened in
// turn leave exactly 10 open, the 20 least recently used closed.
func TestProcessBudgetSharedByTables(t *testing.T) {
	if n := Held(); n != 0 {
		t.Fatalf("another test left %d descriptors in unclosed tables", n)
	}
	withSoftLimit(t, 40)
	paths := makeFiles(t, t.TempDir(), 30)
	var st [3]stats.Counters
	var tabs [3]*Table
	for i := range tabs {
		tabs[i] = NewTable(16, &st[i])
		defer tabs[i].Close()
	}
	for i, p := range paths {
		if err := readOne(tabs[i%3], p, byte(i)); err != nil {
			t.Fatal(err)
		}
		if h := Held(); h > 10 {
			t.Fatalf("after file %d the process holds %d descriptors, budget 10", i, h)
		}
	}
	var opened, evicted uint64
	lens := 0
	for i := range tabs {
		opened += st[i].FilesOpened.Load()
		evicted += st[i].FilesEvicted.Load()
		lens += tabs[i].Len()
	}
	if Held() != 10 || opened != 30 || evicted != 20 || lens != 10 {
		t.Fatalf("held %d, opened %d, evicted %d, table entries %d; want 10, 30, 20, 10",
			Held(), opened, evicted, lens)
	}
	// The survivors are the 10 most recently used: files 20..29.
	for i := 20; i < 30; i++ {
		tabs[i%3].mu.RLock()
		_, ok := tabs[i%3].byPath[paths[i]]
		tabs[i%3].mu.RUnlock()
		if !ok {
			t.Errorf("file %d (recently used) was evicted", i)
		}
	}
	for i := range tabs {
		tabs[i].Close()
	}
	if Held() != 0 {
		t.Fatalf("closed tables still hold %d descriptors", Held())
	}
}

// TestBusyFilesOverBudgetTrimOnRelease: Files in use are never closed; the
// process goes over its budget and trims back on the idle Release.
func TestBusyFilesOverBudgetTrimOnRelease(t *testing.T) {
	withSoftLimit(t, 0) // budget MinBudget = 8
	paths := makeFiles(t, t.TempDir(), 12)
	tb := NewTable(64, nil)
	defer tb.Close()
	var held []*File
	for _, p := range paths {
		f, _ := acquire(t, tb, p)
		held = append(held, f)
	}
	if Held() != 12 {
		t.Fatalf("12 busy Files hold %d descriptors", Held())
	}
	for i, f := range held {
		if got := readAll(t, f.FD, 1); got[0] != byte(i) {
			t.Fatalf("busy file %d reads %x", i, got)
		}
		f.Release()
	}
	if Held() != 8 || tb.Len() != 8 {
		t.Fatalf("after release: held %d, table %d; want 8, 8", Held(), tb.Len())
	}
}

// The low-limit tests run in a child process (this test binary again), which
// lowers its own soft RLIMIT_NOFILE for real.
const childEnv = "MEMTIER_FILES_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode, os.Getenv("MEMTIER_FILES_TEST_DIR")))
	}
	os.Exit(m.Run())
}

func runInChild(t *testing.T, mode string) string {
	t.Helper()
	dir := t.TempDir()
	makeFiles(t, dir, 200)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "MEMTIER_FILES_TEST_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, out)
	}
	return string(out)
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory's own descriptor
}

// runChild lowers the soft limit to 64 and runs mode; it prints a summary line
// and returns the exit status.
func runChild(mode, dir string) int {
	var rl unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
	rl.Cur = 64
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	var paths []string
	for i := 0; i < 200; i++ {
		paths = append(paths, filepath.Join(dir, fmt.Sprintf("f%03d", i)))
	}
	fail := func(f string, a ...any) int { fmt.Printf(f+"\n", a...); return 1 }
	switch mode {
	case "reads":
		// 1,200 reads of 200 files through one table allowed 128 Files.
		var st stats.Counters
		tb := NewTable(128, &st)
		maxHeld := 0
		for pass := 0; pass < 6; pass++ {
			for i, p := range paths {
				if err := readOne(tb, p, byte(i%251)); err != nil {
					return fail("pass %d file %d: %v", pass, i, err)
				}
				maxHeld = max(maxHeld, Held())
			}
		}
		f, err := os.Open(paths[0])
		if err != nil {
			return fail("host open after the reads: %v", err)
		}
		f.Close()
		fmt.Printf("reads=1200 maxheld=%d opened=%d fds_ok=%v\n", maxHeld, st.FilesOpened.Load(), openFDs() <= 64-8)
	case "host_full":
		// The host takes every free descriptor: each open then fails with
		// EMFILE, MemTier gives back half of its idle ones (least recently
		// used first) and retries, so every read still succeeds.
		tb := NewTable(128, nil)
		for i := 0; i < 16; i++ {
			if err := readOne(tb, paths[i], byte(i)); err != nil {
				return fail("warm-up %d: %v", i, err)
			}
		}
		var hog []int
		for {
			fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				break
			}
			hog = append(hog, fd)
		}
		for i := 16; i < 200; i++ {
			if err := readOne(tb, paths[i], byte(i)); err != nil {
				return fail("read %d with the host holding every free descriptor: %v", i, err)
			}
		}
		heldAfterReads := Held()
		// Now the host takes the last ones too, and MemTier's only File is
		// busy: the error names the limit and what MemTier holds.
		busy, _, err := tb.Acquire(paths[199])
		if err != nil {
			return fail("acquire busy: %v", err)
		}
		trimProcess(0) // every idle descriptor back to the host
		for {
			fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				break
			}
			hog = append(hog, fd)
		}
		_, _, err = tb.Acquire(paths[0])
		busy.Release()
		for _, fd := range hog {
			unix.Close(fd)
		}
		fmt.Printf("held_after_reads=%d code=%v err=%q\n", heldAfterReads, errs.CodeOf(err), errText(err))
	default:
		return fail("unknown child mode %q", mode)
	}
	return 0
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestLowLimitReads is field case N03 (tests/field_cases.md) at the table: under a soft limit of
// 64, 1,200 reads of 200 files all succeed, MemTier holds at most 16
// descriptors (64/4), and the host can still open files.
func TestLowLimitReads(t *testing.T) {
	out := runInChild(t, "reads")
	if want := "reads=1200 maxheld=16 opened=1200 fds_ok=true\n"; out != want {
		t.Fatalf("child printed %q, want %q", out, want)
	}
}

// TestEMFILEGivesDescriptorsBack: with the host holding every free
// descriptor, opens that fail with EMFILE close MemTier's idle descriptors
// and retry; when nothing idle is left the error names the limit.
func TestEMFILEGivesDescriptorsBack(t *testing.T) {
	out := runInChild(t, "host_full")
	want := `held_after_reads=16 code=IO err="open ` // the temp path, then the text
	if !strings.HasPrefix(out, want) ||
		!strings.HasSuffix(out, `/f000: too many open files (limit 64, MemTier holds 1)"`+"\n") {
		t.Fatalf("child printed %q", out)
	}
}

// TestLoweredLimitIsSeenAtTheNextOpen: the limit is read at every open, so a
// host that lowers it finds MemTier's descriptors trimmed at the next open.
func TestLoweredLimitIsSeenAtTheNextOpen(t *testing.T) {
	withSoftLimit(t, 400) // budget 100
	paths := makeFiles(t, t.TempDir(), 41)
	var st stats.Counters
	tb := NewTable(128, &st)
	defer tb.Close()
	for i, p := range paths[:40] {
		if err := readOne(tb, p, byte(i)); err != nil {
			t.Fatal(err)
		}
	}
	if Held() != 40 || st.FilesEvicted.Load() != 0 {
		t.Fatalf("under budget 100: held %d, evicted %d; want 40, 0", Held(), st.FilesEvicted.Load())
	}
	softLimit = func() uint64 { return 40 } // budget 10; withSoftLimit's cleanup restores
	if err := readOne(tb, paths[40], 40); err != nil {
		t.Fatal(err)
	}
	if Held() != 10 || tb.Len() != 10 || st.FilesEvicted.Load() != 31 {
		t.Fatalf("after the limit fell to 40: held %d, table %d, evicted %d; want 10, 10, 31",
			Held(), tb.Len(), st.FilesEvicted.Load())
	}
}
