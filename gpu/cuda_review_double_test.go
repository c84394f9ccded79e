//go:build cgo

package gpu

// Tests, on the double, of the fixes from reading gpu/ against the CUDA
// Driver API docs: blocking waits, no context created on the pointer-query
// error path, mapped-range checks for VMM / pool memory, the ordinal
// fallback and the fork hint.

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// Every event MemTier makes sleeps in cuEventSynchronize
// (CU_EVENT_BLOCKING_SYNC) and records no timing, and the pipeline's last
// wait is on such an event, not a spinning cuStreamSynchronize.
func TestWaitsBlock(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Depth: 2, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	d := allocDev(t, 0, 5*64<<10+17)
	cudaHookReset()
	if err := s.ReadToDevice(d.ptr, d.size, read, 3); err != nil {
		t.Fatal(err)
	}
	created := stat(t, "calls_cuEventCreate")
	if created < 3 { // 2 slot events (first use of the lane) + the final wait's
		t.Fatalf("calls_cuEventCreate = %d, want >= 3", created)
	}
	if b := stat(t, "events_blocking_sync"); b != created {
		t.Errorf("events_blocking_sync = %d of %d events created", b, created)
	}
	if n := stat(t, "events_timing"); n != 0 {
		t.Errorf("events_timing = %d, want 0 (CU_EVENT_DISABLE_TIMING)", n)
	}
	if n := stat(t, "calls_cuStreamSynchronize"); n != 0 {
		t.Errorf("calls_cuStreamSynchronize = %d during the read, want 0 (it spins)", n)
	}
	d.check(t, data[3:3+d.size])
}

// A pointer query that the driver answers only under a current context
// (CUDA_ERROR_INVALID_CONTEXT) is retried under a context that already
// exists, and never creates one: a host pointer passed as device memory
// leaves every device without a primary context.
func TestPointerQueryCreatesNoContext(t *testing.T) {
	needDouble(t)
	if DeviceCount() < 2 {
		t.Fatalf("the double has %d devices, want 2 (TestMain)", DeviceCount())
	}
	p1, err := MemAlloc(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := MemFree(p1); err != nil {
			t.Error(err)
		}
	})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := currentContextForTest()
	setContextForTest(0)
	defer setContextForTest(prev)
	dropPrimariesForTest()
	t.Setenv("FAKE_CUDA_POINTER_NEEDS_CONTEXT", "1")
	refs := func() [2]int64 { return [2]int64{stat(t, "primary_refs_0"), stat(t, "primary_refs_1")} }
	if got := refs(); got != [2]int64{0, 0} {
		t.Fatalf("primary context references %v after dropping them, want [0 0]", got)
	}

	host := make([]byte, 4096)
	_, err = InspectPointer(uintptr(unsafe.Pointer(&host[0])), 4096)
	runtime.KeepAlive(host)
	e := wantKind(t, err, KindInvalidPointer)
	if !strings.Contains(e.Error(), "is not CUDA memory") || !strings.Contains(e.Error(), "CUDA_ERROR_INVALID_CONTEXT") {
		t.Fatalf("host pointer: %v", e)
	}
	if got := refs(); got != [2]int64{0, 0} {
		t.Fatalf("primary context references %v after a failed query, want [0 0] (a context was created)", got)
	}
	if n := stat(t, "primary_ctx_created"); n != 0 {
		t.Fatalf("%d primary contexts created by a pointer query", n)
	}

	// Another library keeps device 1's context active: the query succeeds
	// under it, holds no reference afterwards and leaves device 0 alone.
	if !retainPrimaryForTest(1) {
		t.Fatal("retain device 1")
	}
	defer releasePrimaryForTest(1)
	info, err := InspectPointer(p1+8, 4096)
	if err != nil || info.Device != 1 {
		t.Fatalf("InspectPointer(device 1 memory) = %+v, %v", info, err)
	}
	if got := refs(); got != [2]int64{0, 1} {
		t.Fatalf("primary context references %v, want [0 1] (only the other library's)", got)
	}
}

// VMM memory (PyTorch expandable segments) and pool memory report the
// reserved VA as their range; a request past the mapped part is refused
// before any copy.
func TestPointerMappedRange(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_VMM_RESERVE_BYTES", "8388608")
	const mapped = 1 << 20
	p, err := MemAlloc(0, mapped)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := MemFree(p); err != nil {
			t.Error(err)
		}
	})
	info, err := InspectPointer(p, mapped)
	if err != nil {
		t.Fatalf("the whole mapped part: %v", err)
	}
	if info.Size != mapped+8<<20 {
		t.Fatalf("reported size %d, want the reservation %d (the double models VMM)", info.Size, mapped+8<<20)
	}
	for _, c := range []struct {
		name      string
		ptr, size uint64
		want      string
	}{
		{"one byte past", 0, mapped + 1, "runs past the mapped memory"},
		{"tail of a chunk and past", mapped - 4096, 2 * 4096, "runs past the mapped memory"},
		{"starts unmapped", mapped, 16, "reserved but not mapped"},
		{"starts unmapped, size 0", mapped + 4096, 0, ""},
	} {
		_, err := InspectPointer(p+uintptr(c.ptr), c.size)
		if c.want == "" {
			// size 0 checks the pointer alone, as before: no span query.
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if e := wantKind(t, err, KindInvalidPointer); !strings.Contains(e.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, e, c.want)
		}
	}
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cudaHookReset()
	err = s.ReadToDevice(p, 2*mapped, func(buf []byte, off uint64) error { return nil }, 0)
	wantKind(t, err, KindInvalidPointer)
	if n := stat(t, "bytes_htod"); n != 0 {
		t.Fatalf("%d bytes copied into a range past the mapped memory", n)
	}
}

// A driver that does not answer DEVICE_ORDINAL: the device is that of the
// allocation's context.
func TestPointerOrdinalFallback(t *testing.T) {
	needDouble(t)
	p, err := MemAlloc(1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t.Setenv("FAKE_CUDA_NO_ORDINAL_ATTR", "")
		if err := MemFree(p); err != nil {
			t.Error(err)
		}
	})
	t.Setenv("FAKE_CUDA_NO_ORDINAL_ATTR", "1")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mine := primaryContextForTest(0)
	setContextForTest(mine)
	defer setContextForTest(0)
	if got, err := PointerDevice(p + 5); err != nil || got != 1 {
		t.Fatalf("PointerDevice = %d, %v; want 1", got, err)
	}
	if got := currentContextForTest(); got != mine {
		t.Fatalf("current context %#x after the query, want %#x", got, mine)
	}
}

// cuInit's CUDA_ERROR_NOT_INITIALIZED names fork, its usual cause.
func TestInitAfterForkHint(t *testing.T) {
	needDouble(t)
	reinit(t, doubleConfig())
	t.Setenv("FAKE_CUDA_INIT_FAIL", "3")
	if Available() {
		t.Fatal("Available")
	}
	r := Reason()
	for _, w := range []string{"CUDA_ERROR_NOT_INITIALIZED (3)", "before fork()", "spawn"} {
		if !strings.Contains(r, w) {
			t.Fatalf("Reason %q lacks %q", r, w)
		}
	}
}

// Memory of a context the caller made and destroys itself (cuCtxCreate)
// is filled through the device's retained primary context: the pinned
// buffers and the streams never belong to the caller's context, so after it
// is destroyed the Stager still copies from pinned memory and closes
// cleanly.
func TestStagerUsesPrimaryContext(t *testing.T) {
	needDouble(t)
	t.Setenv("FAKE_CUDA_DEFER_COPIES", "1")
	path, data := testFile(t)
	read, done := fileReader(t, path)
	defer done()
	s, err := NewStager(StagerOptions{ChunkSize: 64 << 10, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := currentContextForTest()
	defer setContextForTest(prev)
	user, r := hookCtxCreate(0)
	if r != cudaSuccess {
		t.Fatalf("cuCtxCreate: %d", r)
	}
	const n = 300 << 10
	p, r := cuMemAlloc(n) // in the user's context, current now
	if r != cudaSuccess {
		t.Fatalf("cuMemAlloc: %d", r)
	}
	if err := s.ReadToDevice(uintptr(p), n, read, 3); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := CopyFromDevice(got, uintptr(p)); err != nil || !bytes.Equal(got, data[3:3+n]) {
		t.Fatalf("bytes into the user context's memory differ (%v)", err)
	}
	if c := currentContextForTest(); c != uintptr(user) {
		t.Fatalf("current context %#x after the read, want the user's %#x", c, user)
	}
	for _, name := range []string{"streams_in_user_contexts", "host_registers_in_user_contexts"} {
		if v := stat(t, name); v != 0 {
			t.Errorf("%s = %d, want 0 (staging state belongs to the primary context)", name, v)
		}
	}
	if r := hookCtxDestroy(user); r != cudaSuccess {
		t.Fatalf("cuCtxDestroy: %d", r)
	}
	setContextForTest(prev)
	d := allocDev(t, 0, n)
	cudaHookReset()
	if err := s.ReadToDevice(d.ptr, d.size, read, 11); err != nil {
		t.Fatal(err)
	}
	d.check(t, data[11:11+n])
	if v := stat(t, "copies_pageable"); v != 0 {
		t.Errorf("copies_pageable = %d after the user context died, want 0 (buffers still pinned)", v)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the user context died: %v", err)
	}
}
