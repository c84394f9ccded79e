package engine

import (
	"bytes"
	"github.com/memtier/memtier/gpu"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// pfile returns the P-file content: byte i = (i*131+7) & 0xFF.
func pfile(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((uint64(off+i)*131 + 7) & 0xFF)
	}
	return b
}

func writeP(t testing.TB, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "p.bin")
	if err := os.WriteFile(p, pfile(0, n), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func newCtx(t testing.TB, mod func(*config.Options)) *Context {
	t.Helper()
	o := config.Defaults()
	o.CacheBytes = 64 << 20
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func code(err error) errs.Code { return errs.CodeOf(err) }

func TestRead_AllPathsExactBytes(t *testing.T) {
	const size = 9<<20 + 3*4096 + 5
	path := writeP(t, size)
	modes := map[string]func(*config.Options){
		"default":  nil,
		"nocache":  func(o *config.Options) { o.CacheEnabled = false },
		"direct":   func(o *config.Options) { o.DirectMode = config.DirectAlways },
		"directnc": func(o *config.Options) { o.DirectMode = config.DirectAlways; o.CacheEnabled = false },
	}
	sizes := []int{0, 1, 4095, 4096, 4097, 1<<20 + 1, 9<<20 + 3}
	for name, mod := range modes {
		t.Run(name, func(t *testing.T) {
			c := newCtx(t, mod)
			for _, flags := range []uint32{0, policy.ReadWillUse, policy.ReadOnce} {
				for _, off := range []int{0, 1, 4095, 4096, 4097} {
					for _, n := range sizes {
						if off+n > size {
							continue
						}
						for _, mis := range []int{0, 1} {
							buf := make([]byte, n+mis+16)
							for i := range buf {
								buf[i] = 0xAA
							}
							dst := buf[mis : mis+n]
							if err := c.Read(path, uint64(off), uint64(n), dst, 0, flags); err != nil {
								t.Fatalf("read off=%d n=%d: %v", off, n, err)
							}
							if !bytes.Equal(dst, pfile(off, n)) {
								t.Fatalf("bytes differ off=%d n=%d flags=%d mis=%d", off, n, flags, mis)
							}
							for _, b := range buf[mis+n:] {
								if b != 0xAA {
									t.Fatalf("canary overwritten off=%d n=%d", off, n)
								}
							}
						}
					}
				}
			}
		})
	}
}

func TestRead_EOFAndErrors(t *testing.T) {
	path := writeP(t, 100)
	c := newCtx(t, nil)
	dst := bytes.Repeat([]byte{0xAA}, 32)
	if err := c.Read(path, 90, 20, dst, 0, 0); code(err) != errs.EOF {
		t.Fatalf("read past EOF: %v", err)
	}
	if !bytes.Equal(dst, bytes.Repeat([]byte{0xAA}, 32)) {
		t.Fatal("EOF read wrote into dst")
	}
	if err := c.Read(path, 100, 0, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path      string
		off, size uint64
		want      errs.Code
	}{
		{path, 100, 1, errs.EOF}, {path, 200, 4, errs.EOF},
		{path, 1 << 63, 1 << 63, errs.InvalidArg},
		{filepath.Join(t.TempDir(), "missing"), 0, 1, errs.NotFound},
		{t.TempDir(), 0, 1, errs.IsDir},
		{"", 0, 1, errs.InvalidArg},
	} {
		if err := c.Read(tc.path, tc.off, tc.size, make([]byte, 4), 0, 0); code(err) != tc.want {
			t.Errorf("read(%q,%d,%d) = %v, want %v", tc.path, tc.off, tc.size, err, tc.want)
		}
	}
	// A host buffer with target CUDA: UNSUPPORTED without a CUDA backend,
	// INVALID_ARG (not device memory) with one.
	if err := c.Read(path, 0, 4, make([]byte, 4), policy.TargetCUDA, 0); code(err) != errs.Unsupported &&
		!(gpu.Available() && code(err) == errs.InvalidArg) {
		t.Fatalf("cuda: %v", err)
	}
	if err := c.Read(path, 0, 4, make([]byte, 4), 0, 1<<9); code(err) != errs.InvalidArg {
		t.Fatalf("flags: %v", err)
	}
	// prefetched, then EOF read: same contract from the cache path
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 90, 20, dst, 0, 0); code(err) != errs.EOF {
		t.Fatalf("cached read past EOF: %v", err)
	}
}

func TestReuse_SecondPassFromCache(t *testing.T) {
	path := writeP(t, 8<<20)
	c := newCtx(t, nil)
	buf := make([]byte, 1<<20)
	for pass := 0; pass < 2; pass++ {
		for off := 0; off < 8<<20; off += 1 << 20 {
			if err := c.Read(path, uint64(off), 1<<20, buf, 0, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, pfile(off, 1<<20)) {
				t.Fatal("bytes differ")
			}
		}
		if pass == 0 {
			c.ResetStats()
		}
	}
	s := c.Stats()
	if s.CacheHitRequests != 8 || s.CacheHitBytes != 8<<20 || s.StorageBytes != 0 {
		t.Fatalf("second pass not from cache: %+v", s)
	}
}

func TestStale_RewriteReturnsNewBytes(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	buf := make([]byte, 4096)
	if err := c.Read(path, 4096, 4096, buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	nb := bytes.Repeat([]byte{7}, 1<<20)
	if err := os.WriteFile(path, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 4096, 4096, buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, nb[:4096]) {
		t.Fatal("stale bytes served after rewrite")
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 512<<10, 4096, buf, 0, 0); code(err) != errs.EOF {
		t.Fatalf("after truncate: %v", err)
	}
}

func TestReadV_B19(t *testing.T) {
	const size = 64 << 20
	path := writeP(t, size)
	c := newCtx(t, func(o *config.Options) { o.CacheEnabled = false })
	v := []IOVec{
		{Path: path, Off: 0, Size: 4}, {Path: path, Off: 4, Size: 4}, {Path: path, Off: 4, Size: 4},
		{Path: path, Off: 100, Size: 0, Dst: []byte{0xAA}}, {Path: path, Off: size - 6, Size: 16},
	}
	for k := 0; k < 30; k++ {
		v = append(v, IOVec{Path: path, Off: uint64(k)*2<<20 + 17, Size: 100})
	}
	v = append(v, IOVec{Path: path + ".missing", Off: 0, Size: 8})
	for i := range v {
		if v[i].Size > 0 {
			v[i].Dst = make([]byte, v[i].Size)
		}
	}
	err := c.ReadV(v, 0, 0)
	if code(err) != errs.EOF {
		t.Fatalf("readv returned %v, want the EOF of element 4", err)
	}
	for i, e := range v {
		switch {
		case i == 3:
			if e.Result != 0 || e.Dst[0] != 0xAA {
				t.Fatalf("zero-size element touched: %+v", e.Result)
			}
		case i == 4:
			if e.Result != int64(errs.EOF) {
				t.Fatalf("element 4 result %d", e.Result)
			}
		case i == len(v)-1:
			if e.Result != int64(errs.NotFound) {
				t.Fatalf("missing-file element result %d", e.Result)
			}
		default:
			if e.Result != int64(e.Size) || !bytes.Equal(e.Dst, pfile(int(e.Off), int(e.Size))) {
				t.Fatalf("element %d wrong (%d)", i, e.Result)
			}
		}
	}
	s := c.Stats()
	if s.StorageBytes > 30*(1<<20) || s.ReadvCalls != 1 || s.CoalescedReads != 31 {
		t.Fatalf("stats: storage=%d readv=%d coalesced=%d", s.StorageBytes, s.ReadvCalls, s.CoalescedReads)
	}
}

func TestCache_NeverOverBudgetUnderConcurrency(t *testing.T) {
	const size = 32 << 20
	path := writeP(t, size)
	c := newCtx(t, func(o *config.Options) { o.CacheBytes = 4 << 20 })
	ref := pfile(0, size)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			for i := 0; i < 200; i++ {
				n := 1 + r.Intn(256<<10)
				off := r.Intn(size - n)
				dst := make([]byte, n)
				flags := uint32(0)
				if i%3 == 0 {
					flags = policy.ReadWillUse
				}
				if err := c.Read(path, uint64(off), uint64(n), dst, 0, flags); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(dst, ref[off:off+n]) {
					t.Errorf("bytes differ at %d+%d", off, n)
					return
				}
				if s := c.Stats(); s.CacheResidentBytes > s.CacheBudgetBytes {
					t.Errorf("over budget: %d > %d", s.CacheResidentBytes, s.CacheBudgetBytes)
					return
				}
			}
		}(int64(g))
	}
	wg.Wait()
}

func TestClose_WithAsyncInFlight(t *testing.T) {
	path := writeP(t, 16<<20)
	o := config.Defaults()
	o.CacheBytes = 64 << 20
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*Request
	for i := 0; i < 64; i++ {
		r, err := c.ReadAsync(path, uint64(i%4)<<22, 4<<20, make([]byte, 4<<20), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	done := make(chan error)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close hung with async reads in flight")
	}
	for _, r := range reqs {
		_, err, ok := r.Wait(0)
		if !ok || (err != nil && code(err) != errs.Closed) {
			t.Fatalf("request after close: done=%v err=%v", ok, err)
		}
	}
	if err := c.Close(); code(err) != errs.Closed {
		t.Fatalf("double close: %v", err)
	}
	if err := c.Read(path, 0, 1, make([]byte, 1), 0, 0); code(err) != errs.Closed {
		t.Fatalf("read after close: %v", err)
	}
}

func TestPrefetch_ThenAllHits(t *testing.T) {
	path := writeP(t, 4<<20)
	c := newCtx(t, nil)
	r, err := c.PrefetchAsync(path, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err, ok := r.Wait(-1); !ok || err != nil || n != 4<<20 {
		t.Fatalf("prefetch: n=%d err=%v", n, err)
	}
	c.ResetStats()
	buf := make([]byte, 4096)
	for off := 0; off < 4<<20; off += 64 << 10 {
		if err := c.Read(path, uint64(off)+5, 4096, buf, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.CacheHitRequests != 64 || s.StorageBytes != 0 {
		t.Fatalf("not all hits: %+v", s)
	}
	if !gpu.Available() { // gpu_test.go covers TO_HBM with a CUDA backend
		if _, err := c.Prefetch(path, 0, 0, PrefetchToHBM); code(err) != errs.Unsupported {
			t.Fatalf("TO_HBM: %v", err)
		}
	}
}

func TestStale_RenameOverIsSeenThroughFstat(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil) // default: path re-resolved every 1000 ms, fstat per call
	buf := make([]byte, 4096)
	if err := c.Read(path, 0, 4096, buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, bytes.Repeat([]byte{9}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 0, 4096, buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	if buf[0] != 9 || buf[4095] != 9 {
		t.Fatal("stale bytes after an atomic rename over the file")
	}
	if s := c.Stats(); s.StaleInvalidations != 1 {
		t.Fatalf("stale_invalidations = %d, want 1", s.StaleInvalidations)
	}
}

func TestStale_SymlinkSwapWithPathRecheckEveryCall(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, bytes.Repeat([]byte{1}, 8192), 0o644)
	os.WriteFile(b, bytes.Repeat([]byte{2}, 8192), 0o644)
	link := filepath.Join(dir, "current")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	c := newCtx(t, func(o *config.Options) { o.PathRecheckMs = -1 })
	buf := make([]byte, 4096)
	if err := c.Read(link, 0, 4096, buf, 0, 0); err != nil || buf[0] != 1 {
		t.Fatalf("first read: %v %d", err, buf[0])
	}
	os.Remove(link)
	os.Symlink(b, link)
	if err := c.Read(link, 0, 4096, buf, 0, 0); err != nil || buf[0] != 2 {
		t.Fatalf("after symlink swap: %v %d", err, buf[0])
	}
}

func TestStats_PartlyCachedReadCountsEachPath(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	buf := make([]byte, 65536)
	if err := c.Read(path, 0, 4096, buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 0, 65536, buf, 0, 0); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if s.BufferedBytes != 4096+61440 || s.CacheHitBytes != 4096 || s.StorageBytes != 65536 || s.Requests != 2 {
		t.Fatalf("buffered=%d cache_hit=%d storage=%d requests=%d", s.BufferedBytes, s.CacheHitBytes, s.StorageBytes, s.Requests)
	}
	n, err := c.Prefetch(path, 0, 0, 0)
	if err != nil || n != 1<<20-65536 {
		t.Fatalf("prefetch brought in %d bytes (%v), want %d", n, err, 1<<20-65536)
	}
	if s := c.Stats(); s.PrefetchBytes != 1<<20-65536 {
		t.Fatalf("prefetch_bytes = %d", s.PrefetchBytes)
	}
	if err := c.DropCache(path); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.CacheResidentBytes != 0 {
		t.Fatalf("resident after drop = %d", s.CacheResidentBytes)
	}
}
