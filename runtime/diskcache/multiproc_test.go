package diskcache

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The child of TestTwoProcessesShareOneDirectory is this test binary run
// again with these variables set (not MEMTIER_* names: nothing but this
// file reads them).
const (
	childEnv    = "DISKCACHE_TEST_CHILD"
	childDir    = "DISKCACHE_TEST_DIR"
	childURL    = "DISKCACHE_TEST_URL"
	childBudget = "DISKCACHE_TEST_BUDGET"
	childSeed   = "DISKCACHE_TEST_SEED"
)

const (
	mpSize  = 48*testBlock + 999
	mpSeed  = 21
	mpReads = 150
)

// TestChildProcess is the child's body; it skips unless run as a child.
func TestChildProcess(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("runs only as the child of TestTwoProcessesShareOneDirectory")
	}
	budget, _ := strconv.ParseUint(os.Getenv(childBudget), 10, 64)
	seed, _ := strconv.ParseInt(os.Getenv(childSeed), 10, 64)
	want := pattern(mpSize, mpSeed)
	s := newStack(t, testOptions(), Options{Dir: os.Getenv(childDir), BudgetBytes: budget})
	r := rand.New(rand.NewSource(seed))
	for range mpReads {
		off := uint64(r.Int63n(mpSize))
		n := 1 + uint64(r.Int63n(int64(min(mpSize-off, 6*testBlock))))
		if got := s.read(t, os.Getenv(childURL), off, n); !bytes.Equal(got, want[off:off+n]) {
			t.Fatalf("child %d: range [%d, +%d) differs", seed, off, n)
		}
	}
	s.c.Flush()
	st := s.c.Stats()
	fmt.Printf("child %d: %+v\n", seed, st)
	if st.CorruptEntries != 0 || st.WriteErrors != 0 {
		t.Fatalf("child %d: %d corrupt entries, %d write errors", seed, st.CorruptEntries, st.WriteErrors)
	}
}

func TestTwoProcessesShareOneDirectory(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		t.Skip("the child runs TestChildProcess only")
	}
	want := pattern(mpSize, mpSeed)
	srv := newObjServer(t, want, `"mp"`)
	dir := t.TempDir()
	budget := uint64(12*(testBlock+headerAlign) + 1)
	// Open once so the lock file exists for the sampling below.
	c0, err := Open(Options{Dir: dir, BudgetBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	c0.Close()

	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", childDir+"="+dir, childURL+"="+srv.url(),
			childBudget+"="+strconv.FormatUint(budget, 10), childSeed+"="+strconv.Itoa(100+i))
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	done := make(chan error, len(cmds))
	for _, cmd := range cmds {
		go func() { done <- cmd.Wait() }()
	}
	// Sample the directory under the lock while the children run: the
	// budget holds at every instant, temporary files included.
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	samples, maxSeen := 0, int64(0)
	var errsSeen []error
	for finished := 0; finished < len(cmds); {
		select {
		case err := <-done:
			finished++
			if err != nil {
				errsSeen = append(errsSeen, err)
			}
		case <-time.After(2 * time.Millisecond):
			if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			_, total := entries(t, dir)
			unix.Flock(int(lf.Fd()), unix.LOCK_UN)
			samples++
			maxSeen = max(maxSeen, total)
			if uint64(total) > budget {
				t.Errorf("directory holds %d bytes with both processes running, budget %d", total, budget)
			}
		}
	}
	for i, out := range outs {
		t.Logf("child %d output:\n%s", i, out.String())
	}
	if len(errsSeen) > 0 {
		t.Fatalf("children failed: %v", errsSeen)
	}
	t.Logf("%d samples, at most %d bytes (budget %d)", samples, maxSeen, budget)
	names, total := entries(t, dir)
	if uint64(total) > budget {
		t.Fatalf("directory holds %d bytes, budget %d", total, budget)
	}
	for _, p := range names {
		if err := checkEntryFile(p, want); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

// checkEntryFile checks that the entry at p is whole and holds the bytes
// of want at the offset its header names.
func checkEntryFile(p string, want []byte) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	hl, err := decodeFixed(b)
	if err != nil {
		return err
	}
	h, err := decodeHeader(b[:hl])
	if err != nil {
		return err
	}
	pay := b[hl:]
	if len(pay) != int(h.payloadLen) || !slices.Equal(pieceCRCs(pay), h.crcs) {
		return fmt.Errorf("payload %d bytes, header says %d, or a piece checksum differs", len(pay), h.payloadLen)
	}
	if !bytes.Equal(pay, want[h.off:h.off+uint64(len(pay))]) {
		return fmt.Errorf("payload is not the object's bytes at %d", h.off)
	}
	return nil
}
