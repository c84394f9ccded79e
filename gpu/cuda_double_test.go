//go:build cgo

package gpu

// Tests of the CUDA backend against the test double in tests/gpu_double
// (fake libcuda.so.1 / libcufile.so.0 over host memory), whose directory
// MEMTIER_GPU_DOUBLE_DIR names (ctest gpu_double_go sets it). With
// MEMTIER_GPU_TEST_REAL=1 instead, the tests that do not need the double's
// switches and counters run against the real driver (a GPU machine).

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

var (
	doubleDir  = os.Getenv("MEMTIER_GPU_DOUBLE_DIR")
	realDriver = os.Getenv("MEMTIER_GPU_TEST_REAL") == "1"
)

func doubleConfig() Config {
	return Config{
		CUDALibrary:   filepath.Join(doubleDir, "libcuda.so.1"),
		CUFileLibrary: filepath.Join(doubleDir, "libcufile.so.0"),
	}
}

func TestMain(m *testing.M) {
	if doubleDir != "" {
		// Two fake devices (fixed at the double's first cuInit), unless the
		// caller asks for another number (FAKE_CUDA_DEVICES=1: a one-GPU host).
		if os.Getenv("FAKE_CUDA_DEVICES") == "" {
			os.Setenv("FAKE_CUDA_DEVICES", "2")
		}
		if err := Configure(doubleConfig()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if testDir != "" {
		os.RemoveAll(testDir)
	}
	os.Exit(code)
}

// needCUDA skips without the double (or a real driver) and fails when CUDA
// does not initialise.
func needCUDA(t *testing.T) {
	t.Helper()
	if doubleDir == "" && !realDriver {
		t.Skip("MEMTIER_GPU_DOUBLE_DIR is not set: these tests need the GPU test double " +
			"(tests/gpu_double, built by cmake; ctest -R gpu_double_go sets it), " +
			"or MEMTIER_GPU_TEST_REAL=1 on a GPU machine")
	}
	if err := Init(); err != nil {
		t.Fatalf("Init: %v", err)
	}
}

// needDouble is needCUDA for tests that use the double's switches or
// counters; it resets the counters and checks the bug counters at the end.
func needDouble(t *testing.T) {
	t.Helper()
	if doubleDir == "" {
		t.Skip("needs the GPU test double (MEMTIER_GPU_DOUBLE_DIR)")
	}
	needCUDA(t)
	if !cudaHookReset() {
		t.Fatal("the loaded libcuda is not the test double")
	}
	t.Cleanup(func() {
		for _, name := range []string{"bug_freed_while_inflight", "bug_unregistered_while_inflight",
			"bug_unregister_busy", "bug_unordered_write", "no_context_errors", "context_mismatch_errors"} {
			if v := stat(t, name); v != 0 {
				t.Errorf("double counter %s = %d, want 0", name, v)
			}
		}
		if v := stat(t, "inflight"); v != 0 {
			t.Errorf("%d copies still queued after the test", v)
		}
	})
}

// deferCopies runs the test with the double's deferred copies (a copy lands
// only when a sync covers it, as on a GPU); nothing against a real driver.
func deferCopies(t *testing.T) {
	t.Helper()
	if doubleDir != "" {
		t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	}
}

func stat(t *testing.T, name string) int64 {
	t.Helper()
	v, ok := cudaHookStat(name)
	if !ok {
		t.Fatalf("fake_cuda_stat(%q) unavailable", name)
	}
	return v
}

// ------------------------------------------------------------- test data

const testFileSize = 64<<20 + 3 + 16<<10

var (
	testDir      string
	testDataOnce sync.Once
	testPath     string
	testData     []byte
)

// testFile returns a file of testFileSize pseudo-random bytes and its
// contents, made once per process.
func testFile(t *testing.T) (string, []byte) {
	t.Helper()
	testDataOnce.Do(func() {
		dir, err := os.MkdirTemp("", "memtier-gpu-test-")
		if err != nil {
			t.Fatal(err)
		}
		testDir = dir
		testData = make([]byte, testFileSize)
		r := rand.NewChaCha8([32]byte{'m', 't'})
		r.Read(testData)
		testPath = filepath.Join(dir, "data.bin")
		if err := os.WriteFile(testPath, testData, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if testData == nil {
		t.Fatal("test file not made")
	}
	return testPath, testData
}

// devBuf is device memory with guard bytes on both sides.
type devBuf struct {
	base, ptr uintptr
	size      uint64
}

const guard = 4096

var guardByte = byte(0x5C)

func allocDev(t *testing.T, device int, size uint64) devBuf {
	t.Helper()
	total := size + 2*guard
	base, err := MemAlloc(device, total)
	if err != nil {
		t.Fatalf("MemAlloc(%d, %d): %v", device, total, err)
	}
	t.Cleanup(func() {
		if err := MemFree(base); err != nil {
			t.Errorf("MemFree: %v", err)
		}
	})
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CopyToDevice(base, bytes.Repeat([]byte{guardByte}, int(total))); err != nil {
		t.Fatalf("fill: %v", err)
	}
	return devBuf{base: base, ptr: base + guard, size: size}
}

// check compares the device range with want and the guards with guardByte.
func (d devBuf) check(t *testing.T, want []byte) {
	t.Helper()
	got := make([]byte, d.size+2*guard)
	if err := CopyFromDevice(got, d.base); err != nil {
		t.Fatalf("CopyFromDevice: %v", err)
	}
	for i := 0; i < guard; i++ {
		if got[i] != guardByte || got[len(got)-1-i] != guardByte {
			t.Fatalf("guard bytes overwritten (at %d or %d)", i, len(got)-1-i)
		}
	}
	body := got[guard : guard+len(want)]
	if !bytes.Equal(body, want) {
		i := 0
		for i < len(want) && body[i] == want[i] {
			i++
		}
		t.Fatalf("device bytes differ from the file at %d of %d", i, len(want))
	}
}

func fileReader(t *testing.T, path string) (ReadFunc, func()) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return func(buf []byte, off uint64) error {
		_, err := f.ReadAt(buf, int64(off))
		return err
	}, func() { f.Close() }
}

func wantKind(t *testing.T, err error, k Kind) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *gpu.Error of kind %v", err, err, k)
	}
	if e.Kind != k {
		t.Fatalf("error %q has kind %v, want %v", err, e.Kind, k)
	}
	return e
}

// ------------------------------------------------------------------ init

func TestInitWithDouble(t *testing.T) {
	needCUDA(t)
	if !Available() {
		t.Fatalf("Available false: %s", Reason())
	}
	if !strings.HasPrefix(Reason(), "CUDA available") {
		t.Fatalf("Reason %q", Reason())
	}
	if DeviceCount() < 1 || DriverVersion() <= 0 {
		t.Fatalf("DeviceCount %d DriverVersion %d", DeviceCount(), DriverVersion())
	}
	if err := Configure(Config{}); KindOf(err) != KindInvalidArg {
		t.Fatalf("Configure after Init: %v", err)
	}
	if got := BuildTags(); len(got) == 0 || got[0] != "cuda" {
		t.Fatalf("BuildTags %v", got)
	}
}

// reinit makes the next Init load per c (and env), and restores the double
// afterwards.
func reinit(t *testing.T, c Config) {
	t.Helper()
	resetInitForTest()
	if err := Configure(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		resetInitForTest()
		if err := Configure(doubleConfig()); err != nil {
			t.Error(err)
		}
		if err := Init(); err != nil {
			t.Errorf("re-Init with the double: %v", err)
		}
	})
}

// B20: libcuda missing, or a file that is not a library: Available is
// false with dlerror's text, nothing crashes, the API answers unavailable.
func TestLibraryAbsent(t *testing.T) {
	needDouble(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "libcuda.so.1")
	if err := os.WriteFile(text, []byte(strings.Repeat("this is a text file, not a library\n", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, lib string
		want      []string
	}{
		{"missing", filepath.Join(dir, "absent", "libcuda.so.1"), []string{"not loaded", "No such file"}},
		{"text", text, []string{"not loaded", "ELF"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reinit(t, Config{CUDALibrary: c.lib})
			if Available() {
				t.Fatal("Available with no library")
			}
			r := Reason()
			if !strings.HasPrefix(r, "GPU target unavailable: ") {
				t.Fatalf("Reason %q", r)
			}
			for _, w := range c.want {
				if !strings.Contains(r, w) {
					t.Fatalf("Reason %q lacks %q", r, w)
				}
			}
			e := wantKind(t, Init(), KindUnavailable)
			if !e.Fallback() || e.Reason() != "cuda_unavailable" {
				t.Fatalf("Fallback %v Reason %q", e.Fallback(), e.Reason())
			}
			if _, err := NewStager(StagerOptions{}); KindOf(err) != KindUnavailable {
				t.Fatalf("NewStager: %v", err)
			}
			if _, err := NewHBMCache(HBMOptions{Budget: 4 << 20}); KindOf(err) != KindUnavailable {
				t.Fatalf("NewHBMCache: %v", err)
			}
			if _, err := PointerDevice(0x1000); KindOf(err) != KindUnavailable {
				t.Fatalf("PointerDevice: %v", err)
			}
			if DeviceCount() != 0 {
				t.Fatal("devices without a driver")
			}
		})
	}
}

// MEMTIER_CUDA_LIBRARY is read (through C getenv) when no Config is set.
func TestLibraryFromEnvironment(t *testing.T) {
	needDouble(t)
	missing := filepath.Join(t.TempDir(), "from-env", "libcuda.so.1")
	reinit(t, Config{})
	t.Setenv(EnvCUDALibrary, missing)
	if Available() {
		t.Fatal("Available")
	}
	if !strings.Contains(Reason(), missing) {
		t.Fatalf("Reason %q does not name %s", Reason(), missing)
	}
}

func TestNoDevice(t *testing.T) {
	needDouble(t)
	reinit(t, doubleConfig())
	t.Setenv("FAKE_CUDA_NO_DEVICE", "1")
	if Available() {
		t.Fatal("Available with no device")
	}
	if r := Reason(); !strings.Contains(r, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)") {
		t.Fatalf("Reason %q", r)
	}
}

// -------------------------------------------------------------- pointers

func TestPointerDevice(t *testing.T) {
	needCUDA(t)
	for dev := 0; dev < DeviceCount() && dev < 2; dev++ {
		p, err := MemAlloc(dev, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []uintptr{p, p + 1, p + 1<<20 - 1} {
			got, err := PointerDevice(q)
			if err != nil || got != dev {
				t.Fatalf("PointerDevice(alloc on %d + %d) = %d, %v", dev, q-p, got, err)
			}
		}
		info, err := InspectPointer(p+16, 1<<20-16)
		if err != nil || info.Device != dev || info.Base != p || info.Size < 1<<20 {
			t.Fatalf("InspectPointer = %+v, %v", info, err)
		}
		// The driver reports the allocation's range (the double: exactly the
		// requested size); a range past it is refused.
		_, err = InspectPointer(p+16, info.Size-15)
		if e := wantKind(t, err, KindInvalidPointer); !strings.Contains(e.Error(), "runs past its allocation") || e.Fallback() {
			t.Fatalf("range past the allocation: %v", e)
		}
		if err := MemFree(p); err != nil {
			t.Fatal(err)
		}
	}
	host := make([]byte, 64)
	_, err := PointerDevice(uintptr(unsafe.Pointer(&host[0])))
	if e := wantKind(t, err, KindInvalidPointer); !strings.Contains(e.Error(), "is not CUDA memory") {
		t.Fatalf("host pointer: %v", e)
	}
	runtime.KeepAlive(host)
	_, err = PointerDevice(0)
	wantKind(t, err, KindInvalidPointer)
	_, err = InspectPointer(^uintptr(0)-2, 16)
	wantKind(t, err, KindInvalidPointer)
}

// A pinned staging buffer is host memory, not device memory.
func TestPointerDevicePinnedHost(t *testing.T) {
	needCUDA(t)
	path, _ := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := allocDev(t, 0, 4096)
	var pinned uintptr
	err = s.ReadToDevice(d.ptr, 4096, func(buf []byte, off uint64) error {
		pinned = uintptr(unsafe.Pointer(&buf[0]))
		return read(buf, off)
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = PointerDevice(pinned)
	if e := wantKind(t, err, KindInvalidPointer); !strings.Contains(e.Error(), "page-locked host memory") {
		t.Fatalf("pinned host pointer: %v", e)
	}
}

// ----------------------------------------------------------- staged path

type stagedCase struct {
	name          string
	size, fileOff uint64
}

func stagedCases(chunk uint64) []stagedCase {
	var out []stagedCase
	for _, off := range []uint64{0, 1, 4095, 4096 + 7} {
		for _, sz := range []struct {
			name string
			n    uint64
		}{
			{"0", 0}, {"1", 1}, {"4095", 4095}, {"chunk-1", chunk - 1}, {"chunk", chunk},
			{"chunk+1", chunk + 1}, {"3.5chunks", chunk * 7 / 2},
		} {
			out = append(out, stagedCase{fmt.Sprintf("size=%s/off=%d", sz.name, off), sz.n, off})
		}
	}
	return out
}

func runStaged(t *testing.T, s *Stager, dev int, c stagedCase) {
	t.Helper()
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	d := allocDev(t, dev, c.size)
	chunk := s.Options().ChunkSize
	calls := 0
	err := s.ReadToDevice(d.ptr, c.size, func(buf []byte, off uint64) error {
		// The ReadFunc contract: aligned buffer, room to round up, aligned
		// file offsets after the first chunk, at most ChunkSize.
		if uintptr(unsafe.Pointer(&buf[0]))%Alignment != 0 {
			return fmt.Errorf("buffer not aligned")
		}
		if uint64(cap(buf)) < (uint64(len(buf))+Alignment-1)/Alignment*Alignment || uint64(len(buf)) > chunk {
			return fmt.Errorf("len %d cap %d", len(buf), cap(buf))
		}
		if calls > 0 && off%Alignment != 0 {
			return fmt.Errorf("chunk %d starts at unaligned offset %d", calls, off)
		}
		calls++
		return read(buf, off)
	}, c.fileOff)
	if err != nil {
		t.Fatalf("ReadToDevice: %v", err)
	}
	d.check(t, data[c.fileOff:c.fileOff+c.size])
}

func TestStagedSizes(t *testing.T) {
	needCUDA(t)
	for _, mode := range []string{"immediate", "deferred"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "deferred" {
				if doubleDir == "" {
					t.Skip("the deferred-copy switch is the double's")
				}
				t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
			}
			st := new(Stats)
			s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Stats: st})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var total, n uint64
			for _, c := range stagedCases(64 << 10) {
				t.Run(c.name, func(t *testing.T) { runStaged(t, s, 0, c) })
				if c.size > 0 {
					total += c.size
					n++
				}
			}
			snap := st.Snapshot()
			if snap.StagedRequests != n || snap.StagedBytes != total || snap.H2DBytes != total {
				t.Fatalf("stats %+v, want %d requests, %d bytes", snap, n, total)
			}
		})
	}
}

// 64 MiB + 3 with the default 8 MiB chunks, on the second device.
func TestStagedLarge(t *testing.T) {
	needCUDA(t)
	dev := 0
	if DeviceCount() > 1 {
		dev = 1
	}
	if doubleDir != "" {
		t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	}
	s, err := NewStager(StagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, off := range []uint64{0, 4096 + 1} {
		runStaged(t, s, dev, stagedCase{size: 64<<20 + 3, fileOff: off})
	}
}

// The pipeline overlaps: with depth 2 two copies are queued at once, each
// buffer waits only for its own previous copy (one event sync per reuse),
// and the end of the call waits once on a blocking event (not a spinning
// cuStreamSynchronize); all copies come from pinned memory.
func TestStagedOverlap(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	for _, depth := range []int{2, 3} {
		t.Run(fmt.Sprint("depth=", depth), func(t *testing.T) {
			s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Depth: depth, Lanes: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			cudaHookReset()
			const chunks = 7
			runStaged(t, s, 0, stagedCase{size: chunks * 64 << 10})
			want := map[string]int64{
				"max_inflight":              int64(depth),
				"copies_pinned":             chunks,
				"copies_pageable":           1,                         // allocDev's guard fill (CopyToDevice)
				"calls_cuEventSynchronize":  chunks - int64(depth) + 2, // + the final wait and the guard fill's
				"calls_cuStreamSynchronize": 0,                         // every wait blocks on an event
				"inflight":                  0,
			}
			for name, w := range want {
				if got := stat(t, name); got != w {
					t.Errorf("%s = %d, want %d", name, got, w)
				}
			}
		})
	}
}

func TestStagedConcurrent(t *testing.T) {
	needCUDA(t)
	if doubleDir != "" {
		t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	}
	path, data := testFile(t)
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const workers = 6
	bufs := make([]devBuf, workers)
	for i := range bufs {
		bufs[i] = allocDev(t, i%DeviceCount(), 1<<20+uint64(i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f, err := os.Open(path)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for rep := 0; rep < 3; rep++ {
				err := s.ReadToDevice(bufs[i].ptr, bufs[i].size, func(buf []byte, off uint64) error {
					_, err := f.ReadAt(buf, int64(off))
					return err
				}, uint64(i*4096+rep))
				if err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, b := range bufs {
		off := uint64(i*4096 + 2)
		b.check(t, data[off:off+b.size])
	}
}

// The caller's current context on its thread is restored: none, the
// destination's own (device 0's primary context), and, where there is a
// second device, another device's. It runs on a one-GPU machine too, where
// torch's interop depends on it as much.
func TestContextRestored(t *testing.T) {
	needCUDA(t)
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := allocDev(t, 0, 300<<10)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mines := []uintptr{0, primaryContextForTest(0)}
	if DeviceCount() > 1 {
		mines = append(mines, primaryContextForTest(1))
	}
	for _, mine := range mines {
		if !setContextForTest(mine) {
			t.Fatal("cuCtxSetCurrent")
		}
		if err := s.ReadToDevice(d.ptr, d.size, read, 5); err != nil {
			t.Fatal(err)
		}
		if got := currentContextForTest(); got != mine {
			t.Fatalf("current context %#x after the call, want %#x", got, mine)
		}
	}
	setContextForTest(0)
	d.check(t, data[5:5+d.size])
}

func TestStagedReadError(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := allocDev(t, 0, 10*64<<10)
	boom := errors.New("boom")
	calls := 0
	err = s.ReadToDevice(d.ptr, d.size, func(buf []byte, off uint64) error {
		if calls++; calls == 4 {
			return boom
		}
		return read(buf, off)
	}, 0)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the callback's", err)
	}
	if v := stat(t, "inflight"); v != 0 {
		t.Fatalf("%d copies still queued after an error", v)
	}
	// A panic in the callback: copies are synchronised, the lane is
	// released, the thread is unlocked.
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		calls = 0
		_ = s.ReadToDevice(d.ptr, d.size, func(buf []byte, off uint64) error {
			if calls++; calls == 3 {
				panic("callback panic")
			}
			return read(buf, off)
		}, 0)
	}()
	if v := stat(t, "inflight"); v != 0 {
		t.Fatalf("%d copies still queued after a panic", v)
	}
	if err := s.ReadToDevice(d.ptr, d.size, read, 0); err != nil {
		t.Fatal(err)
	}
	d.check(t, data[:d.size])
	if err := s.ReadToDevice(d.ptr, 16, nil, 0); KindOf(err) != KindInvalidArg {
		t.Fatalf("nil read: %v", err)
	}
}

func TestStagedHostDestination(t *testing.T) {
	needCUDA(t)
	s, err := NewStager(StagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := make([]byte, 4096)
	err = s.ReadToDevice(uintptr(unsafe.Pointer(&host[0])), 4096, func([]byte, uint64) error { return nil }, 0)
	if e := wantKind(t, err, KindInvalidPointer); e.Fallback() {
		t.Fatal("an invalid pointer must not fall back")
	}
	runtime.KeepAlive(host)
}

func TestAllocFailure(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_FAIL_ALLOC_AFTER", "0")
	_, err := MemAlloc(0, 1<<20)
	if e := wantKind(t, err, KindNoMemory); e.CodeName != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("MemAlloc: %v", e)
	}
	c, err := NewHBMCache(HBMOptions{Budget: 2 << 20, BlockSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, err := c.Insert(BlockKey{1, 0}, []byte("x"))
	if ok || KindOf(err) != KindNoMemory {
		t.Fatalf("HBM insert without memory: %v, %v", ok, err)
	}
}

func TestPinFailure(t *testing.T) {
	needDouble(t)
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	d := allocDev(t, 0, 200<<10)
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pinned := stat(t, "host_registered_live")
	t.Setenv("FAKE_CUDA_FAIL_HOST_REGISTER_AFTER", "1") // the second buffer fails
	err = s.ReadToDevice(d.ptr, d.size, read, 0)
	if e := wantKind(t, err, KindNoMemory); e.Op != "cuMemHostRegister" {
		t.Fatalf("pin failure: %v", e)
	}
	if v := stat(t, "host_registered_live") - pinned; v != 0 {
		t.Fatalf("%d pinned buffers left after a failed lane setup", v)
	}
	os.Unsetenv("FAKE_CUDA_FAIL_HOST_REGISTER_AFTER")
	if err := s.ReadToDevice(d.ptr, d.size, read, 0); err != nil {
		t.Fatal(err)
	}
	d.check(t, data[:d.size])
}

func TestCopyFailure(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	d := allocDev(t, 0, 8*64<<10)
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cudaHookReset()
	t.Setenv("FAKE_CUDA_FAIL_COPY_AFTER", "3")
	err = s.ReadToDevice(d.ptr, d.size, read, 0)
	if e := wantKind(t, err, KindCUDA); e.CodeName != "CUDA_ERROR_ILLEGAL_ADDRESS" || e.Op != "cuMemcpyHtoDAsync" {
		t.Fatalf("copy failure: %v", e)
	}
	if v := stat(t, "inflight"); v != 0 {
		t.Fatalf("%d copies queued after a failed copy", v)
	}
	// CUDA_ERROR_ILLEGAL_ADDRESS is sticky: the context is dead, and every
	// later call says so instead of, say, "cannot pin a buffer".
	os.Unsetenv("FAKE_CUDA_FAIL_COPY_AFTER")
	wantSticky(t, s.CopyToDevice(d.ptr, []byte("abc")))
	wantSticky(t, s.ReadToDevice(d.ptr, d.size, read, 0))
	cudaHookReset() // the double's stand-in for a new process
	if err := s.ReadToDevice(d.ptr, d.size, read, 0); err != nil {
		t.Fatal(err)
	}
	d.check(t, data[:d.size])
}

// wantSticky checks that err is the sticky-error answer of a dead context.
func wantSticky(t *testing.T, err error) {
	t.Helper()
	e := wantKind(t, err, KindCUDA)
	if e.CodeName != "CUDA_ERROR_ILLEGAL_ADDRESS" || !strings.Contains(e.Error(), stickyHint) {
		t.Fatalf("after a sticky error: %v", e)
	}
}

// A failed synchronisation retires the lane (its buffers may still be in a
// DMA); the error is sticky, so the next call fails too, and once the
// context is usable again (a new process; here the double's reset) the
// Stager works with a fresh lane.
func TestSyncFailure(t *testing.T) {
	needDouble(t)
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	d := allocDev(t, 0, 5*64<<10)
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Setenv("FAKE_CUDA_FAIL_SYNC_AFTER", "0")
	cudaHookReset()
	wantKind(t, s.ReadToDevice(d.ptr, d.size, read, 0), KindCUDA)
	os.Unsetenv("FAKE_CUDA_FAIL_SYNC_AFTER")
	wantSticky(t, s.ReadToDevice(d.ptr, d.size, read, 0))
	cudaHookReset() // a new process, as far as the double goes
	if err := s.ReadToDevice(d.ptr, d.size, read, 0); err != nil {
		t.Fatal(err)
	}
	d.check(t, data[:d.size])
}

func TestCopyToDevice(t *testing.T) {
	needCUDA(t)
	_, data := testFile(t)
	st := new(Stats)
	s, err := NewStager(StagerOptions{Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	d := allocDev(t, DeviceCount()-1, 3<<20+1)
	src := data[100 : 100+d.size]
	if err := s.CopyToDevice(d.ptr, src); err != nil {
		t.Fatal(err)
	}
	d.check(t, src)
	if snap := st.Snapshot(); snap.CopyRequests != 1 || snap.CopyBytes != d.size || snap.H2DBytes != d.size {
		t.Fatalf("stats %+v", snap)
	}
	// A copy that runs past the allocation (as the driver reports it).
	info, err := InspectPointer(d.base, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToDevice(info.Base+uintptr(info.Size)-1, src[:2]); KindOf(err) != KindInvalidPointer {
		t.Fatalf("copy past the allocation: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToDevice(d.ptr, src); KindOf(err) != KindClosed {
		t.Fatalf("after Close: %v", err)
	}
	if err := s.ReadToDevice(d.ptr, 1, func([]byte, uint64) error { return nil }, 0); KindOf(err) != KindClosed {
		t.Fatalf("after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStagerOptions(t *testing.T) {
	needCUDA(t)
	for _, o := range []StagerOptions{{ChunkSize: 1000}, {Depth: 1}, {Lanes: -1}, {ChunkSize: 2 << 30}} {
		if _, err := NewStager(o); KindOf(err) != KindInvalidArg {
			t.Fatalf("NewStager(%+v): %v", o, err)
		}
	}
	s, err := NewStager(StagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if o := s.Options(); o.ChunkSize != DefaultChunkSize || o.Depth != DefaultDepth || o.Lanes != DefaultLanes {
		t.Fatalf("defaults %+v", o)
	}
}

// Close unpins and unmaps everything it allocated.
func TestStagerCloseFrees(t *testing.T) {
	needDouble(t)
	path, _ := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	d := allocDev(t, 0, 256<<10)
	before := stat(t, "host_registered_live")
	streams := stat(t, "streams_live")
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReadToDevice(d.ptr, d.size, read, 0); err != nil {
		t.Fatal(err)
	}
	if got := stat(t, "host_registered_live") - before; got != 2 {
		t.Fatalf("%d buffers pinned after one call, want 2 (one lane)", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := stat(t, "host_registered_live"); got != before {
		t.Fatalf("pinned buffers %d after Close, want %d", got, before)
	}
	if got := stat(t, "streams_live"); got != streams {
		t.Fatalf("streams %d after Close, want %d", got, streams)
	}
}

// ------------------------------------------------------------- HBM cache

func TestHBMCache(t *testing.T) {
	needCUDA(t)
	deferCopies(t)
	_, data := testFile(t)
	const bs = 64 << 10
	st := new(Stats)
	c, err := NewHBMCache(HBMOptions{Device: 0, Budget: 3*bs + 100, BlockSize: bs, Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var live0 int64
	if doubleDir != "" {
		live0 = stat(t, "device_bytes_live")
	}
	block := func(i uint64) []byte { return data[i*bs : (i+1)*bs] }
	for i := uint64(0); i < 3; i++ {
		ok, err := c.Insert(BlockKey{7, i}, block(i))
		if !ok || err != nil {
			t.Fatalf("Insert %d: %v %v", i, ok, err)
		}
	}
	if ok, err := c.Insert(BlockKey{7, 1}, block(1)); ok || err != nil {
		t.Fatalf("second Insert of a cached key: %v %v", ok, err)
	}
	d := allocDev(t, 0, bs)
	// A hit copies device to device; key 0 becomes the most recent.
	if ok, err := c.Lookup(BlockKey{7, 0}, 0, d.ptr, bs); !ok || err != nil {
		t.Fatalf("Lookup: %v %v", ok, err)
	}
	d.check(t, block(0))
	if ok, err := c.Lookup(BlockKey{7, 2}, 100, d.ptr, 1000); !ok || err != nil {
		t.Fatalf("Lookup part: %v %v", ok, err)
	}
	d.check(t, block(2)[100:1100])
	// Insert a fourth: the least recently used (key 1) goes.
	if ok, err := c.Insert(BlockKey{7, 3}, block(3)); !ok || err != nil {
		t.Fatalf("Insert 3: %v %v", ok, err)
	}
	if _, ok := c.Contains(BlockKey{7, 1}); ok {
		t.Fatal("key 1 not evicted")
	}
	for _, i := range []uint64{0, 2, 3} {
		if n, ok := c.Contains(BlockKey{7, i}); !ok || n != bs {
			t.Fatalf("key %d: %d %v", i, n, ok)
		}
	}
	if ok, _ := c.Lookup(BlockKey{7, 1}, 0, d.ptr, 1); ok {
		t.Fatal("hit on an evicted key")
	}
	if ok, _ := c.Lookup(BlockKey{7, 3}, bs-10, d.ptr, 11); ok {
		t.Fatal("hit past the block's data")
	}
	blocks, resident, allocated := c.Usage()
	if blocks != 3 || resident != 3*bs || allocated != 3*bs {
		t.Fatalf("Usage %d %d %d", blocks, resident, allocated)
	}
	if doubleDir != "" {
		if got := stat(t, "device_bytes_live") - live0; got != 3*bs+bs+2*guard {
			t.Fatalf("device memory %d, want the budget's 3 blocks + the test buffer", got)
		}
	}
	// A short tail block (evicts key 0, now the least recent), then removal
	// by file.
	if ok, err := c.Insert(BlockKey{8, 0}, data[:777]); !ok || err != nil {
		t.Fatalf("Insert tail: %v %v", ok, err)
	}
	if ok, err := c.Lookup(BlockKey{8, 0}, 0, d.ptr, 777); !ok || err != nil {
		t.Fatal("tail lookup", err)
	}
	d.check(t, data[:777])
	if n := c.RemoveFile(7); n != 2 {
		t.Fatalf("RemoveFile removed %d, want 2", n)
	}
	if !c.Remove(BlockKey{8, 0}) || c.Remove(BlockKey{8, 0}) {
		t.Fatal("Remove")
	}
	if blocks, _, _ := c.Usage(); blocks != 0 {
		t.Fatalf("%d blocks after removing all", blocks)
	}
	if _, err := c.Insert(BlockKey{9, 0}, make([]byte, bs+1)); KindOf(err) != KindInvalidArg {
		t.Fatalf("oversized block: %v", err)
	}
	snap := st.Snapshot()
	if snap.HBMInserts != 5 || snap.HBMEvictions != 2 || snap.HBMHits != 3 || snap.HBMMisses != 2 ||
		snap.HBMHitBytes != bs+1000+777 {
		t.Fatalf("stats %+v", snap)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if doubleDir != "" {
		if got := stat(t, "device_bytes_live") - live0; got != bs+2*guard {
			t.Fatalf("device memory %d after Close", got)
		}
	}
	if _, err := c.Insert(BlockKey{1, 1}, []byte("x")); KindOf(err) != KindClosed {
		t.Fatalf("Insert after Close: %v", err)
	}
	if ok, _ := c.Lookup(BlockKey{8, 0}, 0, d.ptr, 1); ok {
		t.Fatal("hit after Close")
	}
}

// Fill through the staged path (prefetch to HBM), a failing fill, and an
// allocation failure answered by eviction.
func TestHBMFill(t *testing.T) {
	needCUDA(t)
	deferCopies(t)
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	const bs = 256 << 10
	c, err := NewHBMCache(HBMOptions{Budget: 3 * bs, BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill := func(i uint64) func(uintptr) error {
		return func(dst uintptr) error { return s.ReadToDevice(dst, bs, read, i*bs) }
	}
	if ok, err := c.Fill(BlockKey{1, 5}, bs, fill(5)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	boom := errors.New("boom")
	if ok, err := c.Fill(BlockKey{1, 6}, bs, func(uintptr) error { return boom }); ok || !errors.Is(err, boom) {
		t.Fatal(ok, err)
	}
	if _, ok := c.Contains(BlockKey{1, 6}); ok {
		t.Fatal("a failed fill is cached")
	}
	// The failed fill's block is reused.
	if ok, err := c.Fill(BlockKey{1, 8}, bs, fill(8)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, _, allocated := c.Usage(); allocated != 2*bs {
		t.Fatalf("allocated %d, want 2 blocks", allocated)
	}
	if doubleDir != "" {
		// The device is full: the third block must come from eviction.
		t.Setenv("FAKE_CUDA_FAIL_ALLOC_AFTER", "0")
		cudaHookReset()
		if ok, err := c.Fill(BlockKey{1, 7}, bs, fill(7)); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, ok := c.Contains(BlockKey{1, 5}); ok {
			t.Fatal("the least recent block was not evicted")
		}
	} else if ok, err := c.Fill(BlockKey{1, 7}, bs, fill(7)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	d := allocDevNoFail(t, bs)
	for _, i := range []uint64{7, 8} {
		if ok, err := c.Lookup(BlockKey{1, i}, 0, d.ptr, bs); !ok || err != nil {
			t.Fatal(ok, err)
		}
		d.check(t, data[i*bs:(i+1)*bs])
	}
}

// allocDevNoFail is allocDev with the double's allocation failure off.
func allocDevNoFail(t *testing.T, size uint64) devBuf {
	if v, ok := os.LookupEnv("FAKE_CUDA_FAIL_ALLOC_AFTER"); ok {
		os.Unsetenv("FAKE_CUDA_FAIL_ALLOC_AFTER")
		defer os.Setenv("FAKE_CUDA_FAIL_ALLOC_AFTER", v)
	}
	return allocDev(t, 0, size)
}

// Concurrent inserts, lookups and removals; every hit has the right bytes.
func TestHBMConcurrent(t *testing.T) {
	needCUDA(t)
	deferCopies(t)
	_, data := testFile(t)
	const bs = 16 << 10
	c, err := NewHBMCache(HBMOptions{Budget: 8 * bs, BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			base, err := MemAlloc(0, bs)
			if err != nil {
				errs <- err
				return
			}
			defer MemFree(base)
			r := rand.New(rand.NewPCG(uint64(g), 1))
			got := make([]byte, bs)
			for it := 0; it < 200; it++ {
				i := r.Uint64N(20)
				key := BlockKey{3, i}
				switch r.IntN(4) {
				case 0, 1:
					if _, err := c.Insert(key, data[i*bs:(i+1)*bs]); err != nil {
						errs <- err
						return
					}
				case 2:
					ok, err := c.Lookup(key, 0, base, bs)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						if err := CopyFromDevice(got, base); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(got, data[i*bs:(i+1)*bs]) {
							errs <- fmt.Errorf("block %d: wrong bytes", i)
							return
						}
					}
				case 3:
					c.Remove(key)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if _, _, allocated := c.Usage(); allocated > 8*bs {
		t.Fatalf("allocated %d over the budget", allocated)
	}
}
