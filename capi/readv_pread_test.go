package main

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// The pread plan of a cache-off readv (engine.PreadPlan, readv_pread.c)
// against its contracts: exact bytes and results, the stats of one buffered
// request per element, and what the preads cannot serve given to Go, which
// reports it as its own path does.

// mmapProtNone is a page mapped PROT_NONE until the test ends: a destination
// that faults, and that no later mapping can take over (as an unmapped hole
// can, with the next thread stack).
func mmapProtNone(t *testing.T) unsafe.Pointer {
	t.Helper()
	m, err := unix.Mmap(-1, 0, 4096, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return unsafe.Pointer(&m[0])
}

func noCache(o *config.Options) { o.CacheEnabled = false }

// spreadSpans is n 4 KiB ranges of a file of size bytes, in no order, with
// duplicates and adjacent pairs (which the Go path would coalesce).
func spreadSpans(n int, size uint64) []span {
	s := make([]span, n)
	x := uint64(7)
	for k := range s {
		x = x*6364136223846793005 + 1442695040888963407
		s[k] = span{(x >> 33) % (size / 4096) * 4096, 4096}
	}
	if n > 4 {
		s[1], s[2] = span{8192, 4096}, span{12288, 4096} // adjacent
		s[3] = s[0]                                      // repeated
	}
	return s
}

func TestReadvPreadServesAndCounts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	const size = 1 << 20
	data := pattern(size, 5)
	writeFile(t, path, data)
	// 16: the caller alone; 64 and 256: with the worker (readv_pread.c MT_RP_PAR_MIN).
	for _, n := range []int{16, 64, 256} {
		for _, fresh := range []int{config.FreshStrict, config.FreshOpen} {
			id, c := newHitCtx(t, fresh, noCache)
			for round := range 3 { // the first opens the file; later calls reuse it
				sp := spreadSpans(n, size)
				iov := make([]hitIOVec, n)
				for k, s := range sp {
					iov[k] = cIOVec(s.off, s.size, "")
				}
				c.ResetStats()
				if rc := readvC(id, path, iov, 0); rc != 0 {
					t.Fatalf("n %d fresh %d: status %d", n, fresh, rc)
				}
				for k, s := range sp {
					if r := cIOVecResult(iov[k]); r != 4096 {
						t.Fatalf("n %d element %d: result %d", n, k, r)
					}
					if !bytes.Equal(cIOVecBytes(iov[k]), data[s.off:s.off+s.size]) {
						t.Fatalf("n %d element %d: wrong bytes", n, k)
					}
					cIOVecFree(iov[k])
				}
				st, b := c.Stats(), uint64(n)*4096
				if st.ReadvCalls != 1 || st.Requests != uint64(n) || st.BufferedRequests != uint64(n) ||
					st.BufferedBytes != b || st.Bytes != b || st.StorageBytes != b || st.CoalescedReads != uint64(n) ||
					st.ReadvUringReads != 0 || st.ReadvUringBatches != 0 || st.CacheHitRequests != 0 {
					t.Fatalf("n %d fresh %d round %d: stats %+v", n, fresh, round, st)
				}
				wantReval := uint64(0)
				if fresh == config.FreshStrict && round > 0 {
					wantReval = 1 // one check of the open file per call, as Go's ReadV
				}
				if st.Revalidations != wantReval {
					t.Fatalf("n %d fresh %d round %d: revalidations %d, want %d", n, fresh, round, st.Revalidations, wantReval)
				}
			}
		}
	}
}

// TestReadvPreadGivesBackToGo: a planned call with an element past the end
// of the file and one with an unmapped destination serves the others in C;
// Go serves and reports those two (EOF, IO), the call's status is the lowest
// failed element's, and the stats add up to one call of n requests.
func TestReadvPreadGivesBackToGo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	const size = 256 << 10
	data := pattern(size, 1)
	writeFile(t, path, data)
	id, c := newHitCtx(t, config.FreshStrict, noCache)
	const n = 128
	sp := spreadSpans(n, size)
	sp[5] = span{size - 2048, 4096} // past the end
	iov := make([]hitIOVec, n)
	for k, s := range sp {
		iov[k] = cIOVec(s.off, s.size, "")
	}
	cIOVecFree(iov[9])
	iov[9].dst = mmapProtNone(t)
	c.ResetStats()
	if rc := readvC(id, path, iov, 0); rc != int(errs.EOF) {
		t.Fatalf("status %d, want %d (element 5's EOF)", rc, errs.EOF)
	}
	for k, s := range sp {
		r := cIOVecResult(iov[k])
		switch k {
		case 5:
			if r != int64(errs.EOF) {
				t.Fatalf("element 5: result %d, want EOF", r)
			}
		case 9:
			if r != int64(errs.IO) {
				t.Fatalf("element 9: result %d, want IO", r)
			}
			continue
		default:
			if r != 4096 || !bytes.Equal(cIOVecBytes(iov[k]), data[s.off:s.off+s.size]) {
				t.Fatalf("element %d: result %d or wrong bytes", k, r)
			}
		}
		cIOVecFree(iov[k])
	}
	b := uint64(n-2) * 4096
	if st := c.Stats(); st.ReadvCalls != 1 || st.Requests != n || st.BufferedRequests != n-2 || st.BufferedBytes != b ||
		st.Bytes != b || st.CacheHitRequests != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestReadvPreadNotPlanned: the calls the plan does not cover go to Go whole
// (its io_uring batch counts them): elements of two sizes, one with its own
// path, a context with the DRAM cache on, and fewer than 16 elements.
func TestReadvPreadNotPlanned(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	const size = 1 << 20
	data := pattern(size, 2)
	writeFile(t, path, data)
	for _, tc := range []struct {
		name  string
		n     int
		edit  func(*config.Options)
		tweak func([]span, []string)
	}{
		{"two sizes", 64, noCache, func(s []span, _ []string) { s[7].size = 8192 }},
		{"own path", 64, noCache, func(_ []span, p []string) { p[3] = path }},
		{"cache on", 64, nil, nil},
		{"15 elements", 15, noCache, nil},
	} {
		id, c := newHitCtx(t, config.FreshStrict, tc.edit)
		sp, paths := spreadSpans(tc.n, size), make([]string, tc.n)
		if tc.tweak != nil {
			tc.tweak(sp, paths)
		}
		iov := make([]hitIOVec, tc.n)
		for k, s := range sp {
			iov[k] = cIOVec(s.off, s.size, paths[k])
		}
		c.ResetStats()
		if rc := readvC(id, path, iov, 0); rc != 0 {
			t.Fatalf("%s: status %d", tc.name, rc)
		}
		for k, s := range sp {
			if r := cIOVecResult(iov[k]); r != int64(s.size) || !bytes.Equal(cIOVecBytes(iov[k]), data[s.off:s.off+s.size]) {
				t.Fatalf("%s element %d: result %d or wrong bytes", tc.name, k, r)
			}
			cIOVecFree(iov[k])
		}
		// Go's path: its io_uring batch, or (cache on) its cache fills.
		if st := c.Stats(); st.ReadvCalls != 1 || st.Requests != uint64(tc.n) ||
			st.ReadvUringReads == 0 && st.CacheInsertedBytes == 0 {
			t.Fatalf("%s: not served by Go's ReadV: %+v", tc.name, st)
		}
	}
}

// TestPlanReadVPreadRefuses: the engine gives no plan where its own plan is
// not one buffered pread per element.
func TestPlanReadVPreadRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	writeFile(t, path, pattern(64<<10, 0))
	_, off := newHitCtx(t, config.FreshStrict, noCache)
	_, on := newHitCtx(t, config.FreshStrict, nil)
	_, direct := newHitCtx(t, config.FreshStrict, func(o *config.Options) {
		noCache(o)
		o.DirectMode = policy.DirectAlways
	})
	for _, tc := range []struct {
		name string
		c    *engine.Context
		path string
		n    int
	}{
		{"cache on", on, path, 64},
		{"O_DIRECT always", direct, path, 64},
		{"missing file", off, filepath.Join(dir, "none"), 64},
		{"URL", off, "s3://bucket/key", 64},
		{"few elements", off, path, 8},
	} {
		if p := tc.c.PlanReadVPread(tc.path, tc.n, 4096, 0); p != nil {
			p.Done(0, 0, false)
			t.Errorf("%s: planned", tc.name)
		}
	}
	p := off.PlanReadVPread(path, 64, 4096, 0)
	if p == nil {
		t.Fatal("cache off: no plan")
	}
	p.Done(0, 0, false)
}

// TestReadvPreadConcurrent: calls from several threads at once (one uses the
// worker, the others read alone) each get their own exact bytes, and the
// stats add up to every call.
func TestReadvPreadConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.bin")
	const size = 1 << 20
	data := pattern(size, 8)
	writeFile(t, path, data)
	id, c := newHitCtx(t, config.FreshOpen, noCache)
	const threads, calls, n = 4, 25, 128
	errc := make(chan string, threads)
	for g := range threads {
		go func() {
			for call := range calls {
				sp := make([]span, n)
				for k := range sp {
					sp[k] = span{uint64((g*7919+call*104729+k*4099)%(size/4096)) * 4096, 4096}
				}
				iov := make([]hitIOVec, n)
				for k, s := range sp {
					iov[k] = cIOVec(s.off, s.size, "")
				}
				rc := readvC(id, path, iov, 0)
				bad := ""
				for k, s := range sp {
					if bad == "" && (rc != 0 || cIOVecResult(iov[k]) != 4096 ||
						!bytes.Equal(cIOVecBytes(iov[k]), data[s.off:s.off+s.size])) {
						bad = "thread wrong bytes or status"
					}
					cIOVecFree(iov[k])
				}
				if bad != "" {
					errc <- bad
					return
				}
			}
			errc <- ""
		}()
	}
	for range threads {
		if e := <-errc; e != "" {
			t.Fatal(e)
		}
	}
	total := uint64(threads * calls * n)
	if st := c.Stats(); st.ReadvCalls != threads*calls || st.Requests != total || st.BufferedRequests != total ||
		st.Bytes != total*4096 || st.ReadvUringReads != 0 {
		t.Fatalf("stats %+v", st)
	}
}
