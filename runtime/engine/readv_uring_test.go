package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/iopath"
	"github.com/memtier/memtier/runtime/source"
)

// uringCase is a readv of 700 elements over three files with the DRAM cache
// off: random ranges, duplicates (coalesced), zero-size elements, ranges
// past end of file, a missing file, and a file that shrinks after the
// context opened it (freshness open keeps its old size, so its ranges pass
// the size check and the read itself comes up short). want[i] is element
// i's expected Result; the file contents are pfile bytes.
type uringCase struct {
	v      []IOVec
	want   []int64
	groups uint64 // coalesced reads the batch serves
}

func newUringCase(t *testing.T, c *Context) *uringCase {
	dir := t.TempDir()
	const sizeA, sizeB, sizeS = 8<<20 + 5, 300_001, 1 << 20
	paths := [3]string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "shrinks")}
	for k, n := range []int{sizeA, sizeB, sizeS} {
		if err := os.WriteFile(paths[k], pfile(0, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Open the shrinking file at its full size, then cut it to 512 KiB.
	if err := c.Read(paths[2], 0, 4096, make([]byte, 4096), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(paths[2], sizeS/2); err != nil {
		t.Fatal(err)
	}
	uc := &uringCase{}
	add := func(path string, off, size uint64, want int64) {
		uc.v = append(uc.v, IOVec{Path: path, Off: off, Size: size, Dst: make([]byte, size+1)})
		uc.want = append(uc.want, want)
	}
	seed := uint64(3)
	for i := 0; i < 700; i++ {
		seed = seed*6364136223846793005 + 1442695040888963407
		r := seed >> 20
		switch i % 10 {
		case 0, 1, 2, 3: // 4 KiB pages of a, 4 KiB apart (not coalesced)
			off := uint64(i/10*4+i%10) * 8192
			add(paths[0], off, 4096, 4096)
			uc.groups++
		case 4: // odd sizes in b, at offsets no other element touches
			off := uint64(i/10) * 4000
			n := 1 + r%999
			add(paths[1], off, n, int64(n))
			uc.groups++
		case 5: // one range of a between two pages, again and again: one coalesced read
			add(paths[0], 4101, 100, 100)
			if i == 5 {
				uc.groups++
			}
		case 6:
			add(paths[0], 77, 0, 0) // zero size: no read
		case 7:
			add(paths[1], sizeB-10, 20, int64(errs.EOF)) // past end of file
		case 8: // in the part of the shrunk file that remains
			add(paths[2], uint64(i/10)*7000, 4096, 4096)
			uc.groups++
		case 9: // in the part that is gone
			add(paths[2], sizeS/2+uint64(i/10)*7000, 4096, int64(errs.EOF))
		}
	}
	add(filepath.Join(dir, "missing"), 0, 8, int64(errs.NotFound))
	return uc
}

// check verifies every element's Result and bytes (and that nothing was
// written past Size).
func (uc *uringCase) check(t *testing.T) {
	t.Helper()
	for i, e := range uc.v {
		if e.Result != uc.want[i] {
			t.Fatalf("element %d (%s, off %d, size %d): result %d, want %d (err %v)",
				i, filepath.Base(e.Path), e.Off, e.Size, e.Result, uc.want[i], e.Err)
		}
		if e.Dst[e.Size] != 0 {
			t.Fatalf("element %d: byte past its size written", i)
		}
		if e.Result > 0 && !bytes.Equal(e.Dst[:e.Size], pfile(int(e.Off), int(e.Size))) {
			t.Fatalf("element %d: wrong bytes", i)
		}
	}
}

func uringCtx(t *testing.T, off bool) *Context {
	return newCtx(t, func(o *config.Options) {
		o.CacheEnabled = false
		o.Freshness = config.FreshOpen
		o.NoIOUring = off
	})
}

// TestReadV_UringBatchExact: the io_uring batch gives every element its
// exact bytes and status, reads each coalesced group once, and counts
// exactly: ceil(groups/256) submissions, no fallback.
func TestReadV_UringBatchExact(t *testing.T) {
	c := uringCtx(t, false)
	if ok, why := c.src.(source.BatchReader).CanBatch(); !ok {
		t.Skipf("io_uring unavailable here: %s", why)
	}
	uc := newUringCase(t, c)
	c.ResetStats()
	if err := c.ReadV(uc.v, 0, 0); code(err) != errs.EOF {
		t.Fatalf("readv: %v, want the EOF of the first past-end element", err)
	}
	uc.check(t)
	s := c.Stats()
	if why := iopath.UringUnavailable(); why != "" {
		t.Skipf("io_uring refused: %s", why)
	}
	// The shrunk file's 70 cut ranges fail in the batch (short read) and
	// again in the second pass, which reports their EOF; every other group
	// is read by the batch.
	if uc.groups != 421 {
		t.Fatalf("the case has %d groups, want 421", uc.groups)
	}
	if want := wantSubmits(491); s.ReadvUringReads != 421 || s.ReadvUringBatches != want {
		t.Fatalf("readv_uring_reads %d batches %d, want 421 and %d", s.ReadvUringReads, s.ReadvUringBatches, want)
	}
	if s.ReadvUringFallbackOff != 0 || s.ReadvUringFallbackUnavailable != 0 {
		t.Fatalf("fallbacks off %d unavailable %d, want 0", s.ReadvUringFallbackOff, s.ReadvUringFallbackUnavailable)
	}
	if s.CoalescedReads != uc.groups+70 || s.BufferedBytes != sumPositive(uc.want) {
		t.Fatalf("coalesced_reads %d buffered_bytes %d, want %d and %d",
			s.CoalescedReads, s.BufferedBytes, uc.groups+70, sumPositive(uc.want))
	}
}

// TestReadV_UringOff: MEMTIER_IO_URING=0 reads the same batch one preadv2
// per group, with the same results, and counts the fallback once per call.
func TestReadV_UringOff(t *testing.T) {
	var o config.Options
	if err := o.FromEnv(func(k string) (string, bool) { return "0", k == "MEMTIER_IO_URING" }); err != nil || !o.NoIOUring {
		t.Fatalf("MEMTIER_IO_URING=0: NoIOUring %v, err %v", o.NoIOUring, err)
	}
	if err := o.FromEnv(func(k string) (string, bool) { return "maybe", k == "MEMTIER_IO_URING" }); code(err) != errs.Format {
		t.Fatalf("MEMTIER_IO_URING=maybe: %v, want a FORMAT error", err)
	}
	c := uringCtx(t, true)
	uc := newUringCase(t, c)
	c.ResetStats()
	for round := 0; round < 2; round++ {
		if err := c.ReadV(uc.v, 0, 0); code(err) != errs.EOF {
			t.Fatalf("readv: %v", err)
		}
		uc.check(t)
	}
	s := c.Stats()
	if s.ReadvUringFallbackOff != 2 || s.ReadvUringBatches != 0 || s.ReadvUringReads != 0 || s.ReadvUringFallbackUnavailable != 0 {
		t.Fatalf("fallback_off %d batches %d reads %d unavailable %d, want 2, 0, 0, 0",
			s.ReadvUringFallbackOff, s.ReadvUringBatches, s.ReadvUringReads, s.ReadvUringFallbackUnavailable)
	}
}

// refusingSource is the local source on a kernel that refuses io_uring.
type refusingSource struct{ *source.Local }

func (refusingSource) CanBatch() (bool, string) {
	return false, "io_uring_setup: operation not permitted"
}

// TestReadV_UringUnavailable: when the source cannot batch, readv reads one
// preadv2 per group, with the same results, and counts why.
func TestReadV_UringUnavailable(t *testing.T) {
	c := uringCtx(t, false)
	c.src = refusingSource{c.src.(*sources).local}
	uc := newUringCase(t, c)
	c.ResetStats()
	if err := c.ReadV(uc.v, 0, 0); code(err) != errs.EOF {
		t.Fatalf("readv: %v", err)
	}
	uc.check(t)
	s := c.Stats()
	if s.ReadvUringFallbackUnavailable != 1 || s.ReadvUringFallbackOff != 0 || s.ReadvUringBatches != 0 {
		t.Fatalf("unavailable %d off %d batches %d, want 1, 0, 0",
			s.ReadvUringFallbackUnavailable, s.ReadvUringFallbackOff, s.ReadvUringBatches)
	}
}

// TestReadV_UringCacheOnCountsNothing: with the DRAM cache on, uncached
// elements are admitted (fill spans), so no group is batchable: no batch and
// no fallback is counted, and cached elements are still copied inline.
func TestReadV_UringCacheOnCountsNothing(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, func(o *config.Options) { o.NoIOUring = true })
	v := make([]IOVec, 8)
	for i := range v {
		v[i] = IOVec{Path: path, Off: uint64(i) * 100_000, Size: 4096, Dst: make([]byte, 4096)}
	}
	for round := 0; round < 2; round++ {
		if err := c.ReadV(v, 0, 0); err != nil {
			t.Fatal(err)
		}
		for i, e := range v {
			if !bytes.Equal(e.Dst, pfile(int(e.Off), 4096)) {
				t.Fatalf("round %d element %d: wrong bytes", round, i)
			}
		}
	}
	s := c.Stats()
	if s.ReadvUringFallbackOff != 0 || s.ReadvUringBatches != 0 || s.ReadvInlineHits != 8 {
		t.Fatalf("fallback_off %d batches %d inline hits %d, want 0, 0, 8",
			s.ReadvUringFallbackOff, s.ReadvUringBatches, s.ReadvInlineHits)
	}
}

// TestReadV_UringColdElements: elements whose pages are not in the page
// cache are not waited for in the batch (RWF_NOWAIT); the second pass reads
// them, and every element gets its bytes. The resident element is read by
// the batch.
func TestReadV_UringColdElements(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cold")
	if err := os.WriteFile(path, pfile(0, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Pread(fd, make([]byte, 4096), 6<<20); err != nil { // the one warm page
		t.Fatal(err)
	}
	if n, _ := iopath.Resident(fd, 0, 8<<20); n != 4096 {
		t.Skipf("%d bytes resident after FADV_DONTNEED and one read, want 4096", n)
	}
	c := uringCtx(t, false)
	if ok, why := c.src.(source.BatchReader).CanBatch(); !ok {
		t.Skipf("io_uring unavailable here: %s", why)
	}
	v := []IOVec{{Path: path, Off: 6 << 20, Size: 4096}}
	for k := 0; k < 5; k++ {
		v = append(v, IOVec{Path: path, Off: uint64(k) << 20, Size: 4096})
	}
	for i := range v {
		v[i].Dst = make([]byte, 4096)
	}
	if err := c.ReadV(v, 0, 0); err != nil {
		t.Fatal(err)
	}
	for i, e := range v {
		if e.Result != 4096 || !bytes.Equal(e.Dst, pfile(int(e.Off), 4096)) {
			t.Fatalf("element %d: result %d or wrong bytes", i, e.Result)
		}
	}
	if s := c.Stats(); s.ReadvUringReads != 1 || s.ReadvUringBatches != 1 || s.CoalescedReads != 6 {
		t.Fatalf("readv_uring_reads %d batches %d coalesced %d, want 1, 1, 6",
			s.ReadvUringReads, s.ReadvUringBatches, s.CoalescedReads)
	}
}

// wantSubmits is how many io_uring submissions a first pass of n batchable
// groups makes: chunks of batchChunk when it runs on several workers, 256
// reads per submission.
func wantSubmits(n int) uint64 {
	per := n
	if phase1Par(n) > 1 {
		per = batchChunk
	}
	var s uint64
	for lo := 0; lo < n; lo += per {
		s += uint64((min(per, n-lo) + 255) / 256)
	}
	return s
}

func sumPositive(xs []int64) uint64 {
	var n uint64
	for _, x := range xs {
		if x > 0 {
			n += uint64(x)
		}
	}
	return n
}
