package engine

// Tests of target CUDA and the HBM tier. They need a CUDA backend: the GPU
// test double (MEMTIER_GPU_DOUBLE_DIR names <build>/gpu_double; ctest
// gpu_double_go sets it) or a real GPU (MEMTIER_GPU_TEST_REAL=1, as
// scripts/gpu_check.sh runs the engine test binary). Without either they
// skip, saying why; a CGO_ENABLED=0 build checks the UNSUPPORTED answers
// instead.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/memtier/memtier/gpu"
	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

var (
	gpuDoubleDir = os.Getenv("MEMTIER_GPU_DOUBLE_DIR")
	gpuReal      = os.Getenv("MEMTIER_GPU_TEST_REAL") == "1"
	gpuRequired  = os.Getenv("MEMTIER_REQUIRE_GPU") == "1"
)

func TestMain(m *testing.M) {
	if gpuDoubleDir != "" {
		// Deferred copies by default: an async copy lands only when a sync
		// covers it, as on a GPU, so a missing wait gives wrong bytes here
		// (FAKE_CUDA_DEFER_COPIES=0 runs them immediately instead).
		if os.Getenv("FAKE_CUDA_DEFER_COPIES") == "" {
			os.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
		}
		if err := gpu.Configure(gpu.Config{
			CUDALibrary:   filepath.Join(gpuDoubleDir, "libcuda.so.1"),
			CUFileLibrary: filepath.Join(gpuDoubleDir, "libcufile.so.0"),
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// needGPU skips unless a CUDA backend is configured and usable. With
// MEMTIER_REQUIRE_GPU=1 (scripts/gpu_check.sh run on a GPU machine) it fails
// instead of skipping, so a device check cannot pass on tests that never ran.
func needGPU(t *testing.T) {
	t.Helper()
	if gpuDoubleDir == "" && !gpuReal {
		if gpuRequired {
			t.Fatal("MEMTIER_REQUIRE_GPU=1 but neither MEMTIER_GPU_TEST_REAL=1 nor MEMTIER_GPU_DOUBLE_DIR is set")
		}
		t.Skip("needs MEMTIER_GPU_DOUBLE_DIR (the GPU test double; ctest gpu_double_go) or MEMTIER_GPU_TEST_REAL=1")
	}
	if !gpu.Available() {
		if !gpuRequired && (gpuReal || strings.Contains(gpu.Reason(), "without cgo")) {
			t.Skip(gpu.Reason())
		}
		t.Fatal(gpu.Reason())
	}
}

// devMem is device memory freed at the end of the test.
func devMem(t *testing.T, n uint64) uintptr {
	t.Helper()
	p, err := gpu.MemAlloc(0, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gpu.MemFree(p) })
	return p
}

// devSlice is the destination slice capi would make for device memory (the
// address is reinterpreted through memory, as capi receives it from C, so
// vet's uintptr check does not apply: Go never dereferences it).
func devSlice(p uintptr, n uint64) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}

func devBytes(t *testing.T, p uintptr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := gpu.CopyFromDevice(b, p); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGPU_UnsupportedWithoutBackend(t *testing.T) {
	if gpu.Available() {
		t.Skip("a CUDA backend is usable here")
	}
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	dst := make([]byte, 4096)
	if err := c.Read(path, 0, 4096, dst, policy.TargetCUDA, 0); code(err) != errs.Unsupported {
		t.Fatalf("read: %v", err)
	}
	if _, err := c.Prefetch(path, 0, 0, PrefetchToHBM); code(err) != errs.Unsupported {
		t.Fatalf("prefetch TO_HBM: %v", err)
	}
	ch := []Chunk{{Off: 0, Size: 4096, Dst: dst}}
	if err := c.LoadChunks(path, ch, policy.TargetCUDA); code(err) != errs.Unsupported {
		t.Fatalf("load_chunks: %v", err)
	}
	v := []IOVec{{Path: path, Off: 0, Size: 4096, Dst: dst}}
	if err := c.ReadV(v, policy.TargetCUDA, 0); code(err) != errs.Unsupported {
		t.Fatalf("readv: %v", err)
	}
	if _, err := c.Explain(path, 0, 4096, true, policy.TargetCUDA, 0); code(err) != errs.Unsupported {
		t.Fatalf("explain: %v", err)
	}
	o := config.Defaults()
	o.GDSMode = config.GDSRequired
	if _, err := New(o); code(err) != errs.Unsupported {
		t.Fatalf("New with gds_mode REQUIRED: %v", err)
	}
}

func TestGPU_ReadsMatchTheFile(t *testing.T) {
	needGPU(t)
	const n = 24<<20 + 5
	path := writeP(t, n)
	want := pfile(0, n)
	for _, mode := range []int{config.GDSOff, config.GDSAuto} {
		t.Run(fmt.Sprintf("gds_mode=%d", mode), func(t *testing.T) {
			c := newCtx(t, func(o *config.Options) { o.GDSMode = mode })
			dev := devMem(t, n)
			for _, r := range [][2]uint64{{0, 1}, {0, 8 << 20}, {4096, 16 << 20}, {7, n - 7}, {n - 3, 3}} {
				if err := c.Read(path, r[0], r[1], devSlice(dev, r[1]), policy.TargetCUDA, 0); err != nil {
					t.Fatalf("read %v: %v", r, err)
				}
				if got := devBytes(t, dev, int(r[1])); !bytes.Equal(got, want[r[0]:r[0]+r[1]]) {
					t.Fatalf("read %v: bytes differ", r)
				}
			}
			s := c.Stats()
			if s.StagedBytes+s.GDSBytes != s.Bytes || s.BufferedBytes+s.DirectBytes != 0 {
				t.Fatalf("stats: %+v", s)
			}
			if mode == config.GDSOff && s.GDSBytes != 0 {
				t.Fatalf("gds_mode OFF used GDS: %+v", s)
			}
			// A host pointer is refused.
			if err := c.Read(path, 0, 4096, make([]byte, 4096), policy.TargetCUDA, 0); code(err) != errs.InvalidArg {
				t.Fatalf("host dst: %v", err)
			}
		})
	}
}

// Many goroutines read to device at once (the Stager's lanes, the race
// detector); each checks its own bytes.
func TestGPU_ConcurrentReads(t *testing.T) {
	needGPU(t)
	const n, per = 12 << 20, 3<<20 + 11
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) { o.IOThreads = 3 })
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := gpu.MemAlloc(0, per)
			if err != nil {
				errc <- err
				return
			}
			defer gpu.MemFree(p)
			off := uint64(g) * 1_000_003 % (n - per)
			for range 3 {
				if err := c.Read(path, off, per, devSlice(p, per), policy.TargetCUDA, 0); err != nil {
					errc <- err
					return
				}
				got := make([]byte, per)
				if err := gpu.CopyFromDevice(got, p); err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(got, want[off:off+per]) {
					errc <- fmt.Errorf("goroutine %d: bytes differ", g)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func TestGPU_HBMPrefetchThenHits(t *testing.T) {
	needGPU(t)
	const n = 10<<20 + 100
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, func(o *config.Options) { o.HBMCacheBytes = 8 << 20; o.GDSMode = config.GDSOff })
	got, err := c.Prefetch(path, 0, 0, PrefetchToHBM)
	if err != nil {
		t.Fatal(err)
	}
	// The last budget's worth, starting at a block boundary: [4 MiB, end).
	if got != n-4<<20 {
		t.Fatalf("prefetch of a 10 MiB file into 8 MiB brought %d bytes, want %d", got, n-4<<20)
	}
	dev := devMem(t, n)
	c.ResetStats()
	if err := c.Read(path, 5<<20, 4<<20, devSlice(dev, 4<<20), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, dev, 4<<20), want[5<<20:9<<20]) {
		t.Fatal("HBM hit bytes differ")
	}
	s := c.Stats()
	if s.HBMHitBytes != 4<<20 || s.HBMHitRequests != 1 || s.StagedBytes != 0 {
		t.Fatalf("stats after an HBM hit: %+v", s)
	}
	// The whole file: the head comes from the file, the rest from HBM.
	if err := c.Read(path, 0, n, devSlice(dev, n), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, dev, n), want) {
		t.Fatal("mixed read bytes differ")
	}
	if s := c.Stats(); s.StagedBytes != 4<<20 || s.HBMHitBytes != 4<<20+n-4<<20 {
		t.Fatalf("mixed read stats: staged %d hbm %d", s.StagedBytes, s.HBMHitBytes)
	}
	ex, err := c.Explain(path, 4<<20, 1<<20, true, policy.TargetCUDA, 0)
	if err != nil || ex.Path != policy.PathHBM {
		t.Fatalf("explain: %+v %v", ex, err)
	}
	// Rewrite: fresh bytes, the old blocks are gone.
	alt := bytes.Repeat([]byte{0x3C}, n)
	if err := os.WriteFile(path, alt, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Read(path, 4<<20, 1<<20, devSlice(dev, 1<<20), policy.TargetCUDA, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(devBytes(t, dev, 1<<20), alt[:1<<20]) {
		t.Fatal("stale bytes after a rewrite")
	}
	if s := c.Stats(); s.HBMResidentBytes != 0 {
		t.Fatalf("%d bytes of the old version still in HBM", s.HBMResidentBytes)
	}
}

func TestGPU_ChunksAndReadV(t *testing.T) {
	needGPU(t)
	const n = 6 << 20
	path := writeP(t, n)
	want := pfile(0, n)
	c := newCtx(t, nil)
	dev := devMem(t, 4<<20)
	ch := []Chunk{
		{Off: 100, Size: 1000, Dst: devSlice(dev, 1000)},
		{Off: 1100, Size: 3 << 20, Dst: devSlice(dev+4096, 3<<20)},
		{Off: n - 10, Size: 20, Dst: devSlice(dev+(3<<20)+8192, 20)},
		{Off: 0, Size: 0},
	}
	if err := c.LoadChunks(path, ch, policy.TargetCUDA); code(err) != errs.EOF {
		t.Fatalf("load_chunks: %v", err)
	}
	if ch[0].Result != 1000 || ch[1].Result != 3<<20 || ch[2].Result != int64(errs.EOF) || ch[3].Result != 0 {
		t.Fatalf("results %d %d %d %d", ch[0].Result, ch[1].Result, ch[2].Result, ch[3].Result)
	}
	if !bytes.Equal(devBytes(t, dev, 1000), want[100:1100]) || !bytes.Equal(devBytes(t, dev+4096, 3<<20), want[1100:1100+3<<20]) {
		t.Fatal("chunk bytes differ")
	}
	v := []IOVec{
		{Path: path, Off: 5, Size: 4096, Dst: devSlice(dev, 4096)},
		{Path: path, Off: 1 << 20, Size: 2 << 20, Dst: devSlice(dev+8192, 2<<20)},
		{Path: path, Off: 0, Size: 10, Dst: make([]byte, 10)},
	}
	if err := c.ReadV(v, policy.TargetCUDA, 0); code(err) != errs.InvalidArg {
		t.Fatalf("readv: %v", err)
	}
	if v[0].Result != 4096 || v[1].Result != 2<<20 || v[2].Result != int64(errs.InvalidArg) {
		t.Fatalf("readv results %d %d %d", v[0].Result, v[1].Result, v[2].Result)
	}
	if !bytes.Equal(devBytes(t, dev, 4096), want[5:4101]) || !bytes.Equal(devBytes(t, dev+8192, 2<<20), want[1<<20:3<<20]) {
		t.Fatal("readv bytes differ")
	}
}

func TestGPU_InfoAndExplainStayOffCPUPaths(t *testing.T) {
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	// CPU explain and reads never need CUDA; they work whatever the backend.
	if ex, err := c.Explain(path, 0, 0, true, policy.TargetCPU, 0); err != nil || ex.Path != policy.PathNone {
		t.Fatalf("cpu explain size 0: %+v %v", ex, err)
	}
	info, err := c.GPUInfo()
	if err != nil || !strings.Contains(info, "cuda: ") || !strings.Contains(info, "gds_mode: auto") {
		t.Fatalf("GPUInfo: %q %v", info, err)
	}
}
