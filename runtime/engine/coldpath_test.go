package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/policy"
)

// coldFile writes an n-byte P-file, syncs it and drops it from the page
// cache; it skips the test when the file system keeps the pages anyway.
func coldFile(t *testing.T, n int) (string, *os.File) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cold.bin")
	w, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for off := 0; off < n; off += 8 << 20 {
		if _, err := w.Write(pfile(off, min(8<<20, n-off))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	drop(t, w, n)
	return p, w
}

func drop(t *testing.T, w *os.File, n int) {
	t.Helper()
	if err := iopath.DropPageCache(int(w.Fd()), 0, 0); err != nil {
		t.Fatal(err)
	}
	if res := resident(t, w, n); res > 0 {
		t.Skipf("the file system keeps %d bytes in the page cache after DONTNEED", res)
	}
}

func resident(t *testing.T, w *os.File, n int) int64 {
	t.Helper()
	res, err := iopath.Resident(int(w.Fd()), 0, int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCold_DefaultLeavesPageCacheWarm: a cold large read without READ_ONCE
// goes buffered (row 17) and leaves its bytes in the page cache, so the next
// reader (another process) finds them there; memtier_load_tensor of a tensor
// above the admission limit does the same without filling the DRAM cache.
func TestCold_DefaultLeavesPageCacheWarm(t *testing.T) {
	const size = 48<<20 + 4097
	path, w := coldFile(t, size)
	c := newCtx(t, nil)
	ex, err := c.Explain(path, 0, size, true, policy.TargetCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Row != 17 || ex.Path != policy.PathBuffered || !strings.HasPrefix(ex.Reason, "row 17: ") {
		t.Fatalf("explain of a cold large read: row %d path %d %q", ex.Row, ex.Path, ex.Reason)
	}
	dst := make([]byte, size)
	if err := c.Read(path, 0, size, dst, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, pfile(0, size)) {
		t.Fatal("wrong bytes")
	}
	s := c.Stats()
	if s.DirectBytes != 0 || s.BufferedBytes != size {
		t.Fatalf("cold default read: direct %d buffered %d", s.DirectBytes, s.BufferedBytes)
	}
	if res := resident(t, w, size); res < size*9/10 {
		t.Fatalf("page cache holds %d of %d bytes after a default read", res, size)
	}

	drop(t, w, size)
	c.ResetStats()
	clear(dst)
	if err := c.LoadTensor(path, 4097, size-4097, dst, policy.TargetCPU); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst[:size-4097], pfile(4097, size-4097)) {
		t.Fatal("wrong tensor bytes")
	}
	s = c.Stats()
	if s.DirectBytes != 0 || s.CacheInsertedBytes != 0 {
		t.Fatalf("tensor load: direct %d, cache inserted %d", s.DirectBytes, s.CacheInsertedBytes)
	}
	if res := resident(t, w, size); res < size*9/10 {
		t.Fatalf("page cache holds %d of %d bytes after a tensor load", res, size)
	}
}

// TestCold_ReadOnceSkipsPageCache: READ_ONCE on a cold large range too small
// for the device probe goes O_DIRECT (row 7) as before, and the page cache
// stays cold; hints and direct modes are unchanged.
func TestCold_ReadOnceSkipsPageCache(t *testing.T) {
	const size = 24 << 20
	path, w := coldFile(t, size)
	c := newCtx(t, nil)
	f, err := c.acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, refused, _ := f.Direct()
	d := c.decide(f, 0, size, policy.ReadOnce, 0)
	f.Release()
	if refused {
		t.Skip("the file system refuses O_DIRECT")
	}
	if _, measured := iopath.DeviceProbe(f.Ident.Dev); !measured && (d.Row != 7 || d.Path != policy.PathDirect) {
		t.Fatalf("READ_ONCE cold, unprobed: row %d path %d", d.Row, d.Path)
	}
	if d.Row != 7 && d.Row != 16 {
		t.Fatalf("READ_ONCE cold: row %d", d.Row)
	}
	dst := make([]byte, size)
	if err := c.Read(path, 0, size, dst, policy.TargetCPU, policy.ReadOnce); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, pfile(0, size)) {
		t.Fatal("wrong bytes")
	}
	if d.Row == 7 {
		if s := c.Stats(); s.DirectBytes != size {
			t.Fatalf("READ_ONCE row 7: direct %d", s.DirectBytes)
		}
		if res := resident(t, w, size); res > size/10 {
			t.Fatalf("READ_ONCE O_DIRECT left %d bytes in the page cache", res)
		}
	}
	for name, tc := range map[string]struct {
		mod   func(*config.Options)
		flags uint32
		path  int
	}{
		"hint buffered": {nil, policy.ReadBuffered | policy.ReadOnce, policy.PathBuffered},
		"hint direct":   {nil, policy.ReadDirect, policy.PathDirect},
		"always":        {func(o *config.Options) { o.DirectMode = config.DirectAlways }, 0, policy.PathDirect},
		"off":           {func(o *config.Options) { o.DirectMode = config.DirectOff }, policy.ReadOnce, policy.PathBuffered},
	} {
		c := newCtx(t, tc.mod)
		f, err := c.acquire(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := c.decide(f, 0, size, tc.flags, 0); d.Path != tc.path {
			t.Errorf("%s: path %d row %d, want path %d", name, d.Path, d.Row, tc.path)
		}
		f.Release()
	}
}

// TestCold_ProbeOnce: the first cold READ_ONCE read of at least
// iopath.ProbeMinBytes measures the device, and the read takes the path the
// probe's result picks.
func TestCold_ProbeOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 136 MiB file")
	}
	const size = iopath.ProbeMinBytes + 8<<20
	path, _ := coldFile(t, size)
	c := newCtx(t, nil)
	dst := make([]byte, size)
	if err := c.Read(path, 0, size, dst, policy.TargetCPU, policy.ReadOnce); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, pfile(0, size)) {
		t.Fatal("wrong bytes")
	}
	f, err := c.acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if f.DirectRefused() {
		t.Skip("the file system refuses O_DIRECT")
	}
	sp, ok := iopath.DeviceProbe(f.Ident.Dev)
	if !ok {
		t.Fatal("no probe result after a cold READ_ONCE read of ProbeMinBytes")
	}
	p := c.deviceProbe(f)
	t.Logf("probe: %+v -> %+v", sp, p)
	s := c.Stats()
	if p.BufferedFaster() != (s.BufferedBytes == size) || s.BufferedBytes+s.DirectBytes != size {
		t.Fatalf("probe %+v but the read moved direct %d buffered %d", p, s.DirectBytes, s.BufferedBytes)
	}
}
