package source

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/files"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/stats"
)

func newLocal(t *testing.T) *Local {
	t.Helper()
	var st stats.Counters
	rd, err := iopath.New(config.Defaults(), &st)
	if err != nil {
		t.Fatal(err)
	}
	tab := files.NewTable(8, &st)
	t.Cleanup(func() { tab.Close(); rd.Close() })
	return &Local{Files: tab, RD: rd}
}

func TestLocal_OpenReadVersions(t *testing.T) {
	l := newLocal(t)
	p := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<12) // 64 KiB
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var src Source = l
	o, stale, err := src.Open(p, files.TrustNone)
	if err != nil || stale != 0 {
		t.Fatalf("open: %v stale %d", err, stale)
	}
	if o.Name() != p || o.Size() != uint64(len(data)) || o.Version() == 0 {
		t.Fatalf("object: name %q size %d version %d", o.Name(), o.Size(), o.Version())
	}
	dst := make([]byte, 1000)
	for _, path := range []int{PathBuffered, PathDirect} {
		used, err := src.ReadAt(o, dst, 777, path)
		if err != nil || !bytes.Equal(dst, data[777:1777]) {
			t.Fatalf("path %d: %v", path, err)
		}
		if path == PathBuffered && used != PathBuffered {
			t.Fatalf("buffered read reported path %d", used)
		}
	}
	if !src.ReadNoWait(o, dst, 4096) || !bytes.Equal(dst, data[4096:5096]) {
		t.Fatal("ReadNoWait of a page-cache resident range must succeed with the file's bytes")
	}
	if n, known := src.Resident(o, 0, uint64(len(data)), 0); !known || n != uint64(len(data)) {
		t.Fatalf("resident %d known %v, want all %d", n, known, len(data))
	}
	// A rewrite gives a new version, and Open names the old one as stale.
	v1 := o.Version()
	o.Release()
	if err := os.WriteFile(p, data[:4096], 0o644); err != nil {
		t.Fatal(err)
	}
	o2, stale, err := src.Open(p, files.TrustNone)
	if err != nil || stale != v1 || o2.Version() == v1 || o2.Size() != 4096 {
		t.Fatalf("reopen after rewrite: err %v stale %d (want %d) version %d size %d", err, stale, v1, o2.Version(), o2.Size())
	}
	defer o2.Release()
	// The file shrinks under an open version: EOF, never a short read.
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ReadAt(o2, dst, 0, PathBuffered); errs.CodeOf(err) != errs.EOF {
		t.Fatalf("read of a shrunk file: %v, want EOF", err)
	}
}
