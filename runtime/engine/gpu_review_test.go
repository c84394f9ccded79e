package engine

// Engine-level tests, on the GPU test double, of the fixes from reading the
// GPU paths against the CUDA and cuFile documentation (issue 14).

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// A device pointer whose allocation is too short for the request is
// refused as a range error, not as "not CUDA device memory".
func TestGPU_RangeErrorText(t *testing.T) {
	needGPU(t)
	const n = 64 << 10
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	dev := devMem(t, n)
	err := c.Read(path, 0, n+1, devSlice(dev, n+1), policy.TargetCUDA, 0)
	if code(err) != errs.InvalidArg {
		t.Fatalf("read one byte past the allocation: %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "is not CUDA device memory") || !strings.Contains(msg, "runs past its allocation") {
		t.Fatalf("range error text: %s", msg)
	}
	// A host pointer keeps the "not device memory" wording.
	err = c.Read(path, 0, 4096, make([]byte, 4096), policy.TargetCUDA, 0)
	if code(err) != errs.InvalidArg || !strings.Contains(err.Error(), "is not CUDA device memory") {
		t.Fatalf("host pointer: %v", err)
	}
}

// cuFile in compatibility mode (no nvidia-fs: the double's
// FAKE_CUFILE_COMPAT_MODE) is kept off AUTO's fast path: the first read,
// which probes the driver, and every later one go staged, with no fallback
// counted; gpu_info names the path; REQUIRED still reads with cuFile. The
// cuFile driver is opened once per process, so the test runs in a child
// test process with the switch set from its start.
func TestGPU_CompatModeKeepsAutoStaged(t *testing.T) {
	needGPU(t)
	if gpuDoubleDir == "" {
		t.Skip("needs the double's compatibility-mode switch (MEMTIER_GPU_DOUBLE_DIR)")
	}
	if os.Getenv("MT_TEST_COMPAT_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPU_CompatModeKeepsAutoStaged$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "MT_TEST_COMPAT_CHILD=1", "FAKE_CUFILE_COMPAT_MODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestGPU_CompatModeKeepsAutoStaged") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	const n = 8 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	auto := newCtx(t, func(o *config.Options) { o.GDSMode = config.GDSAuto })
	dev := devMem(t, n)
	for i := 0; i < 2; i++ {
		if err := auto.Read(path, 0, n, devSlice(dev, n), policy.TargetCUDA, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(devBytes(t, dev, n), want) {
			t.Fatalf("read %d: bytes differ", i)
		}
	}
	s := auto.Stats()
	if s.GDSBytes != 0 || s.StagedBytes != 2*n || s.GDSFallbacks != 0 {
		t.Fatalf("AUTO in compatibility mode: gds %d staged %d fallbacks %d; want 0, %d, 0", s.GDSBytes, s.StagedBytes, s.GDSFallbacks, 2*n)
	}
	ex, err := auto.Explain(path, 0, n, true, policy.TargetCUDA, 0)
	if err != nil || ex.Path != policy.PathStaged || ex.Row != 11 || !strings.Contains(ex.Reason, "compatibility mode") {
		t.Fatalf("explain: %+v, %v", ex.Decision, err)
	}
	info, err := auto.GPUInfo()
	if err != nil || !strings.Contains(info, "\ngds_path: compat\n") || !strings.Contains(info, "gds: GDS available: ") {
		t.Fatalf("gpu_info:\n%s(%v)", info, err)
	}
	req := newCtx(t, func(o *config.Options) { o.GDSMode = config.GDSRequired })
	clear := devMem(t, n)
	if err := req.Read(path, 0, n, devSlice(clear, n), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, clear, n), want) {
		t.Fatal("REQUIRED read: bytes differ")
	}
	if s := req.Stats(); s.GDSBytes != n || s.StagedBytes != 0 {
		t.Fatalf("REQUIRED in compatibility mode: gds %d staged %d; want %d, 0", s.GDSBytes, s.StagedBytes, n)
	}
}

// The HBM hits of one request are queued on one stream and waited for once
// (not a copy and a sync per 2 MiB block), with the bytes right under
// deferred copies.
func TestGPU_HBMHitsWaitOnce(t *testing.T) {
	needGPU(t)
	const n = 8 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) { o.HBMCacheBytes = 8 << 20; o.GDSMode = config.GDSOff })
	if got, err := c.Prefetch(path, 0, 0, PrefetchToHBM); err != nil || got != n {
		t.Fatalf("prefetch: %d, %v", got, err)
	}
	dev := devMem(t, n)
	c.ResetStats()
	// 1 MiB + 5 into the first block to 1 MiB before the end: 4 blocks.
	lo, hi := uint64(1<<20+5), uint64(n-1<<20)
	if err := c.Read(path, lo, hi-lo, devSlice(dev, hi-lo), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, dev, int(hi-lo)), want[lo:hi]) {
		t.Fatal("HBM hit bytes differ")
	}
	g := c.tgt.Stats()
	if g.HBMHits != 4 || g.HBMHitBytes != hi-lo || g.HBMWaits != 1 {
		t.Fatalf("HBM hits %d (%d bytes) in %d waits; want 4 (%d bytes) in 1", g.HBMHits, g.HBMHitBytes, g.HBMWaits, hi-lo)
	}
}

// Managed memory (cuMemAllocManaged: CU_POINTER_ATTRIBUTE_IS_MANAGED) is
// filled staged in gds_mode AUTO: cuFile refuses it
// (CU_FILE_CUDA_MEMORY_TYPE_INVALID), so trying it would only add a
// fallback per read.
func TestGPU_ManagedMemoryIsStaged(t *testing.T) {
	needGPU(t)
	if gpuDoubleDir == "" {
		t.Skip("needs the double's managed-memory switch (MEMTIER_GPU_DOUBLE_DIR)")
	}
	const n = 8 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) { o.GDSMode = config.GDSAuto })
	t.Setenv("FAKE_CUDA_MANAGED", "1")
	dev := devMem(t, n)
	os.Unsetenv("FAKE_CUDA_MANAGED")
	for i := 0; i < 2; i++ {
		if err := c.Read(path, 0, n, devSlice(dev, n), policy.TargetCUDA, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(devBytes(t, dev, n), want) {
			t.Fatal("bytes differ")
		}
	}
	if s := c.Stats(); s.GDSBytes != 0 || s.StagedBytes != 2*n || s.GDSFallbacks != 0 {
		t.Fatalf("managed destination: gds %d staged %d fallbacks %d; want 0, %d, 0", s.GDSBytes, s.StagedBytes, s.GDSFallbacks, 2*n)
	}
	// Device memory in the same context still goes to GDS.
	plain := devMem(t, n)
	c.ResetStats()
	if err := c.Read(path, 0, n, devSlice(plain, n), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.GDSBytes != n {
		t.Fatalf("device memory after managed: gds %d, want %d", s.GDSBytes, n)
	}
}
