package engine

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/diskcache"
	"github.com/memtier/memtier/runtime/policy"
)

// A pass ends when a sample is read a second time; a nil pass (a local
// file, no disk cache) always admits; an index past the bits is ignored.
func TestSamplePassEndsOnARepeat(t *testing.T) {
	var none *samplePass
	none.mark(3)
	if !none.admitDisk() {
		t.Fatal("nil pass: admitDisk false, want true")
	}
	p := (&samplePass{}).sized(130)
	for i := range uint64(130) {
		p.mark(i)
	}
	p.mark(130) // out of range: not a repeat
	if p.admitDisk() {
		t.Fatal("first pass over 130 samples: admitDisk true, want false")
	}
	p.mark(129)
	if !p.admitDisk() {
		t.Fatal("sample 129 read twice: admitDisk false, want true")
	}
}

// With a DRAM cache too small for the dataset, a later pass copies into it
// only the windows it has room for without evicting: the first 8 MiB
// window fills the 8 MiB budget, the second is read from the disk tier in
// every epoch, and no window is cycled through DRAM.
func TestDiskCacheWindowsWithinRoom(t *testing.T) {
	const records, size, stride = 120, 100 << 10, 100<<10 + 512
	const W = 8 << 20
	data := pfile(5, records*stride)
	url, gets := rangeServer(t, data)
	var index bytes.Buffer
	for i := range records {
		fmt.Fprintf(&index, "%d %d\n", i*stride, size)
	}
	indexPath := t.TempDir() + "/d.idx"
	if err := os.WriteFile(indexPath, index.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	withDiskEnv(t, map[string]string{diskcache.EnvDir: t.TempDir() + "/disk", diskcache.EnvBytes: "64M",
		"MEMTIER_REMOTE_PART_BYTES": "5M"})
	c := newCtx(t, func(o *config.Options) { o.CacheBytes, o.CacheBlockBytes = W, 1<<20 })
	ds, err := c.OpenDataset(url, indexPath)
	if err != nil {
		t.Fatal(err)
	}
	// The sample bytes inside the first window: what its DRAM blocks serve.
	var inFirst uint64
	for i := range records {
		lo, hi := uint64(i*stride), uint64(i*stride+size)
		if lo < W {
			inFirst += min(hi, W) - lo
		}
	}
	epoch := func(what string, wantGets int64, inserted, hit uint64) {
		t.Helper()
		g := gets.Load()
		c.ResetStats()
		for lo := 0; lo < records; lo += 16 {
			n := min(16, records-lo)
			idx, dsts, res := make([]uint64, n), make([][]byte, n), make([]int64, n)
			for k := range idx {
				idx[k], dsts[k] = uint64(lo+k), make([]byte, size)
			}
			if err := ds.ReadBatch(idx, dsts, res, policy.TargetCPU); err != nil {
				t.Fatal(err)
			}
			for k := range idx {
				o := (lo + k) * stride
				if res[k] != size || !bytes.Equal(dsts[k], data[o:o+size]) {
					t.Fatalf("%s: record %d: result %d, bytes differ", what, lo+k, res[k])
				}
			}
		}
		s := c.Stats()
		if n := gets.Load() - g; n != wantGets || s.CacheInsertedBytes != inserted || s.CacheHitBytes != hit ||
			s.BufferedBytes != records*size-hit {
			t.Fatalf("%s: %d GETs, inserted %d, hit %d, buffered %d; want %d, %d, %d, %d", what, n,
				s.CacheInsertedBytes, s.CacheHitBytes, s.BufferedBytes, wantGets, inserted, hit, records*size-hit)
		}
	}
	epoch("first epoch", 3, 0, 0) // 3 disk blocks, no revalidation (remoteSamplesTrust)
	c.src.(*sources).disk.Cache().Flush()
	epoch("second epoch", 0, W, inFirst)
	epoch("third epoch", 0, 0, inFirst)
	if r := c.cache.Resident(); r != W {
		t.Fatalf("resident %d bytes, want %d", r, W)
	}
}
