package engine

// Device plans (gpuplan.go) on the GPU test double: which tier serves each
// byte, and that DRAM-cache hits reach the device through the pinned
// pipeline in merged runs, not one copy per cache block.

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/policy"
)

func TestGPU_DRAMHitsGoThroughThePipeline(t *testing.T) {
	needGPU(t)
	const n = 6 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) {
		o.CacheBytes, o.CacheBlockBytes = 64<<20, 64<<10
		o.GDSMode = config.GDSOff
	})
	if _, err := c.Prefetch(path, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	dev := devMem(t, n)
	c.ResetStats()
	if err := c.Read(path, 0, n, devSlice(dev, n), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, dev, n), want) {
		t.Fatal("bytes from the DRAM cache differ")
	}
	s := c.Stats()
	if s.CacheHitBytes != n || s.CacheHitRequests != 1 || s.StagedBytes != 0 || s.StagedRequests != 0 || s.H2DBytes != n {
		t.Fatalf("stats of a DRAM-cache read to the device: %+v", s)
	}
	// 96 cache blocks of 64 KiB: one pipeline call per Stager part (6 MiB
	// is below two chunks, so one), and no pageable per-block copy.
	g := c.tgt.Stats()
	if g.StagedRequests != 1 || g.CopyRequests != 0 || g.StagedBytes != n {
		t.Fatalf("gpu counters: %d pipeline calls, %d pageable copies, %d bytes; want 1, 0, %d",
			g.StagedRequests, g.CopyRequests, g.StagedBytes, n)
	}
}

func TestGPU_PlanSplitsHBMDRAMAndFile(t *testing.T) {
	needGPU(t)
	const n = 8 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) {
		o.CacheBytes, o.CacheBlockBytes = 64<<20, 64<<10
		o.HBMCacheBytes = 2 << 20 // one HBM block
		o.GDSMode = config.GDSOff
	})
	// HBM holds [0, 2 MiB), the DRAM cache [4 MiB, 5 MiB); the rest is cold.
	if got, err := c.Prefetch(path, 0, 2<<20, PrefetchToHBM); err != nil || got != 2<<20 {
		t.Fatalf("HBM prefetch: %d %v", got, err)
	}
	if _, err := c.Prefetch(path, 4<<20, 1<<20, 0); err != nil {
		t.Fatal(err)
	}
	ex, err := c.Explain(path, 0, n, true, policy.TargetCUDA, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"; hbm cache: 2097152 bytes in 1 spans",
		"; staged (dram cache and source via pinned buffers): 6291456 bytes in 1 spans"} {
		if !strings.Contains(ex.Reason, part) {
			t.Fatalf("explain %q lacks %q", ex.Reason, part)
		}
	}
	if ex.CachedBytes != 1<<20 {
		t.Fatalf("explain cached bytes %d, want %d", ex.CachedBytes, 1<<20)
	}
	dev := devMem(t, n)
	c.ResetStats()
	if err := c.Read(path, 0, n, devSlice(dev, n), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, dev, n), want) {
		t.Fatal("mixed-tier bytes differ")
	}
	s := c.Stats()
	if s.HBMHitBytes != 2<<20 || s.CacheHitBytes != 1<<20 || s.StagedBytes != 5<<20 || s.Bytes != n {
		t.Fatalf("mixed-tier stats: hbm %d dram %d staged %d total %d", s.HBMHitBytes, s.CacheHitBytes, s.StagedBytes, s.Bytes)
	}
	if s.CacheResidentBytes != 1<<20 {
		t.Fatalf("a device read filled the DRAM cache: %d resident, want %d", s.CacheResidentBytes, 1<<20)
	}
}

func TestGPU_HBMEvictedAfterPlanningIsServedStaged(t *testing.T) {
	needGPU(t)
	const n = 2 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) { o.HBMCacheBytes = 2 << 20; o.GDSMode = config.GDSOff })
	if _, err := c.Prefetch(path, 0, 0, PrefetchToHBM); err != nil {
		t.Fatal(err)
	}
	f, err := c.acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	var p plan
	if err := c.planDevice(&p, f, 0, n, c.opts.HBMDevice, 0, devOpts{}); err != nil {
		t.Fatal(err)
	}
	if ss := p.list(); len(ss) != 1 || ss[0].tier != tierHBM {
		t.Fatalf("plan of an HBM-resident file: %+v", ss)
	}
	c.tgt.DropHBM(nil, true) // evicted between planning and execution
	dev := devMem(t, n)
	got, err := c.execDevice(&p, dev, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.hbm != 0 || got.staged != n {
		t.Fatalf("served %+v, want all %d bytes staged", got, n)
	}
	if !bytes.Equal(devBytes(t, dev, n), want) {
		t.Fatal("bytes differ after the HBM block was evicted")
	}
}

// A cuFile error about the destination buffer (5013, CU_FILE_CUDA_MEMORY_TYPE_INVALID:
// managed memory, say) is served staged without marking the file
// staged-only; one about the file side (5030, internal error) marks it.
func TestGPU_BufferFaultsAreNotRememberedPerFile(t *testing.T) {
	needGPU(t)
	if gpuDoubleDir == "" { // a real cuFile would read fine (or, in compatibility mode, not be tried)
		t.Skip("needs the double's cuFile failure switches (MEMTIER_GPU_DOUBLE_DIR)")
	}
	const n = 4 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	for _, tc := range []struct {
		code    string
		perFile bool
	}{{"5013", false}, {"5030", true}} {
		t.Run(tc.code, func(t *testing.T) {
			c := newCtx(t, func(o *config.Options) { o.GDSMode = config.GDSAuto })
			dev := devMem(t, n)
			t.Setenv("FAKE_CUFILE_FAIL_READ_AFTER", "0")
			t.Setenv("FAKE_CUFILE_FAIL_READ_CODE", tc.code)
			if err := c.Read(path, 0, n, devSlice(dev, n), policy.TargetCUDA, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(devBytes(t, dev, n), want) {
				t.Fatal("bytes of the fallback read differ")
			}
			s := c.Stats()
			if s.GDSFallbacks != 1 || s.StagedBytes != n || s.GDSBytes != 0 {
				t.Fatalf("after a failed GDS read: fallbacks %d staged %d gds %d", s.GDSFallbacks, s.StagedBytes, s.GDSBytes)
			}
			f, err := c.acquire(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Release()
			if got := c.tgt.FileFallback(f.ID) != ""; got != tc.perFile {
				t.Fatalf("code %s remembered for the file: %v, want %v", tc.code, got, tc.perFile)
			}
		})
	}
}
