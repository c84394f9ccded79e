package engine

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/files"
)

// A file changed within its file system's timestamp tick is read but not
// cached until its ctime is older than the tick (files.File.CacheSafe), so a
// second write in the same tick, which leaves the Identity unchanged, cannot
// be hidden by the cache. ForceCoarseTimestamps makes this machine's
// fine-grained file system count as coarse.
func TestRacyFileIsNotCachedUntilSettled(t *testing.T) {
	defer files.ForceCoarseTimestamps(true)()
	path := filepath.Join(t.TempDir(), "racy.bin")
	rewrite(t, path, 1<<16, 'A')
	c := newCtx(t, nil)
	dst := make([]byte, 4096)
	if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.CacheInsertedBytes != 0 || s.BufferedBytes != 4096 {
		t.Fatalf("racy read: cache_inserted_bytes %d buffered_bytes %d, want 0 and 4096", s.CacheInsertedBytes, s.BufferedBytes)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Past the window: the next read fills the cache, the one after hits.
	time.Sleep(time.Until(st.ModTime().Add(30 * time.Millisecond)))
	for i := 0; i < 2; i++ {
		if err := c.Read(path, 0, 4096, dst, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{'A'}, 4096)) {
		t.Fatal("wrong bytes")
	}
	if s := c.Stats(); s.CacheInsertedBytes != 4096 || s.CacheHitRequests != 1 {
		t.Fatalf("settled: cache_inserted_bytes %d cache_hit_requests %d, want 4096 (the page read) and 1", s.CacheInsertedBytes, s.CacheHitRequests)
	}
}

// The new user's case, on a real coarse-timestamp file system: ramfs (no
// multigrain timestamps), in a private mount namespace of a child process.
// Same-size rewrites read back at once must never come back stale.
func TestRacyRewritesOnRamfs(t *testing.T) {
	if os.Getenv("MEMTIER_RAMFS_CHILD") != "" {
		racyRewriteLoop(t, os.Getenv("MEMTIER_RAMFS_CHILD"))
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to mount a private ramfs")
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-m", "sh", "-c",
		`mount -t ramfs none "$0" && exec "$1" -test.run='^TestRacyRewritesOnRamfs$' -test.v`, dir, os.Args[0])
	cmd.Env = append(os.Environ(), "MEMTIER_RAMFS_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("mount: ")) && bytes.Contains(out, []byte("permission denied")) {
		t.Skipf("cannot mount ramfs here: %s", out)
	}
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestRacyRewritesOnRamfs")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func racyRewriteLoop(t *testing.T, dir string) {
	path := filepath.Join(dir, "k")
	c := newCtx(t, nil)
	dst := make([]byte, 4)
	stale := 0
	for i := 0; i < 500; i++ {
		want := []byte{byte('A' + i%26), byte(i), byte(i >> 8), 1}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(want, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := c.Read(path, 0, 4, dst, 0, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, want) {
			stale++
		}
	}
	if stale != 0 {
		t.Fatalf("%d of 500 same-size rewrites read back stale", stale)
	}
}
