package engine

import (
	"bytes"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/policy"
)

// TestMapCopy_Read: a large warm memtier_read is a mapped copy with the
// stats of the page-cache path (one request, its bytes buffered, no cache
// hit), exact bytes at an odd offset; READ_DIRECT and a read the DRAM cache
// admits (READ_WILL_REUSE) keep the planned path, as does a read below the
// floor.
func TestMapCopy_Read(t *testing.T) {
	path, data, start := writeMapFile(t, t.TempDir(), 21)
	n := withMapCopy(t, nil)
	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheAdmitMaxBytes = 16<<20, 1<<20 })
	off, size := uint64(start)+3, uint64(len(data))-5
	dst := make([]byte, size)
	before := c.Stats()
	if err := c.Read(path, off, size, dst, policy.TargetCPU, 0); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if *n != 1 {
		t.Fatalf("mapped loads %d, want 1", *n)
	}
	if !bytes.Equal(dst, data[3:3+size]) {
		t.Fatal("wrong bytes")
	}
	if r, b, h := after.Requests-before.Requests, after.BufferedBytes-before.BufferedBytes,
		after.CacheHitBytes-before.CacheHitBytes; r != 1 || b != size || h != 0 {
		t.Fatalf("requests %d, buffered %d, cache hits %d; want 1, %d, 0", r, b, h, size)
	}
	for name, flags := range map[string]uint32{"direct": policy.ReadDirect, "will reuse": policy.ReadWillUse} {
		clear(dst)
		if err := c.Read(path, off, size, dst, policy.TargetCPU, flags); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if *n != 1 || !bytes.Equal(dst, data[3:3+size]) {
			t.Fatalf("%s: mapped loads %d (want 1), bytes equal %v", name, *n, bytes.Equal(dst, data[3:3+size]))
		}
	}
	mapCopyMinBytes = size + 1
	cc := newCtx(t, func(o *config.Options) { o.CacheEnabled = false })
	if err := cc.Read(path, off, size, dst, policy.TargetCPU, 0); err != nil || *n != 1 {
		t.Fatalf("below the floor: %v, mapped loads %d", err, *n)
	}
}
