package diskcache

import (
	"bytes"
	"os"
	"testing"
)

// A meta blob is kept per object version: read back whole by another
// Cache over the directory, a miss for a new version (whose first block
// write removes it with the old version's entries), and a corrupt one is
// counted, deleted and a miss, never returned.
func TestMetaBlobPerVersion(t *testing.T) {
	want := pattern(3*pieceBlock, 41)
	srv := newObjServer(t, want, `"m1"`)
	dir := t.TempDir()
	o := Options{Dir: dir, Synchronous: true, BlockBytes: pieceBlock}
	blob := pattern(3*pieceBytes+17, 43) // four pieces, the last partial
	a := newStack(t, testOptions(), o)
	if _, ok := a.src.GetMeta(a.object(t, srv.url()), MetaTarIndex); ok {
		t.Fatal("empty directory: a blob found")
	}
	if !a.src.PutMeta(a.object(t, srv.url()), MetaTarIndex, blob) {
		t.Fatal("PutMeta: not kept")
	}
	if a.src.PutMeta(a.object(t, srv.url()), MetaTarIndex, nil) {
		t.Fatal("PutMeta of an empty blob: kept")
	}
	b := newStack(t, testOptions(), o)
	got, ok := b.src.GetMeta(b.object(t, srv.url()), MetaTarIndex)
	if !ok || !bytes.Equal(got, blob) {
		t.Fatalf("another Cache: ok %v, %d bytes; want the blob's %d", ok, len(got), len(blob))
	}
	if st := b.c.Stats(); st.HitBlocks != 0 || st.MissBlocks != 0 || st.CorruptEntries != 0 {
		t.Fatalf("stats %+v: a meta read counts no block", st)
	}
	// Corrupt: a flipped payload byte.
	k := b.keyOf(t, srv.url())
	p := b.c.path(k.fileName(metaBase + MetaTarIndex))
	if err := flipByte(p, headerAlign+2*pieceBytes+3); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.src.GetMeta(b.object(t, srv.url()), MetaTarIndex); ok {
		t.Fatal("corrupt blob returned")
	}
	if st := b.c.Stats(); st.CorruptEntries != 1 {
		t.Fatalf("stats %+v: want 1 corrupt entry", st)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("corrupt blob's file: %v, want it removed", err)
	}
	// A new version misses the old version's blob, and its first block
	// write prunes it.
	if !b.src.PutMeta(b.object(t, srv.url()), MetaTarIndex, blob) {
		t.Fatal("PutMeta again: not kept")
	}
	srv.set(pattern(3*pieceBlock, 47), `"m2"`)
	c := newStack(t, testOptions(), o)
	if _, ok := c.src.GetMeta(c.object(t, srv.url()), MetaTarIndex); ok {
		t.Fatal("new version: the old version's blob returned")
	}
	c.read(t, srv.url(), 0, 10)
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("old version's blob after a new version's write: %v, want it removed", err)
	}
}
