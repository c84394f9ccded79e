//go:build cgo

package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

func needGDS(t *testing.T) *GDS {
	t.Helper()
	needCUDA(t)
	g, err := OpenGDS(nil)
	if err != nil && doubleDir == "" {
		t.Skipf("no GDS on this machine: %v", err)
	}
	if err != nil {
		t.Fatalf("OpenGDS: %v", err)
	}
	return g
}

func needGDSDouble(t *testing.T) *GDS {
	t.Helper()
	needDouble(t)
	g := needGDS(t)
	if !cufileHookReset() {
		t.Fatal("the loaded libcufile is not the test double")
	}
	t.Cleanup(func() {
		if v := cufileStat(t, "bug_read_unregistered"); v != 0 {
			t.Errorf("cuFileRead on an unregistered handle %d times", v)
		}
		if v := cufileStat(t, "no_context_errors"); v != 0 {
			t.Errorf("cuFileRead without a current context %d times", v)
		}
	})
	return g
}

func cufileStat(t *testing.T, name string) int64 {
	t.Helper()
	v, ok := cufileHookStat(name)
	if !ok {
		t.Fatalf("fake_cufile_stat(%q) unavailable", name)
	}
	return v
}

// openDirect opens path with O_DIRECT where the file system allows it.
func openDirect(t *testing.T, path string) int {
	t.Helper()
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECT|syscall.O_CLOEXEC, 0)
	if err == syscall.EINVAL {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func closeFd(g *GDS, fd int) {
	g.Forget(fd)
	syscall.Close(fd)
}

func TestGDSRead(t *testing.T) {
	needGDS(t)
	st := new(Stats)
	g, err := OpenGDS(st)
	if err != nil {
		t.Fatalf("OpenGDS: %v", err)
	}
	if r := GDSReason(); !strings.HasPrefix(r, "GDS available") {
		t.Fatalf("GDSReason %q", r)
	}
	path, data := testFile(t)
	fd := openDirect(t, path)
	defer closeFd(g, fd)
	var total uint64
	for _, c := range []struct{ size, off uint64 }{
		{1, 0}, {4095, 7}, {1<<20 + 5, 4096}, {64<<20 + 3, 0},
	} {
		d := allocDev(t, DeviceCount()-1, c.size)
		n, err := g.Read(fd, d.ptr, c.size, int64(c.off))
		if err != nil || uint64(n) != c.size {
			t.Fatalf("Read(%d at %d) = %d, %v", c.size, c.off, n, err)
		}
		d.check(t, data[c.off:c.off+c.size])
		total += c.size
	}
	if snap := st.Snapshot(); snap.GDSRequests != 4 || snap.GDSBytes != total {
		t.Fatalf("stats %+v", snap)
	}
	// The end of the file: fewer bytes, no error.
	d := allocDev(t, 0, 8192)
	n, err := g.Read(fd, d.ptr, 8192, int64(len(data)-100))
	if err != nil || n != 100 {
		t.Fatalf("read at the end = %d, %v; want 100, nil", n, err)
	}
	if n, err := g.Read(fd, d.ptr, 0, 0); n != 0 || err != nil {
		t.Fatalf("empty read = %d, %v", n, err)
	}
	host := make([]byte, 4096)
	_, err = g.Read(fd, uintptr(unsafe.Pointer(&host[0])), 4096, 0)
	if e := wantKind(t, err, KindInvalidPointer); e.Fallback() {
		t.Fatal("host pointer must not fall back")
	}
	runtime.KeepAlive(host)
	if _, err := g.Read(fd, d.ptr, 16, -1); KindOf(err) != KindInvalidArg {
		t.Fatalf("negative offset: %v", err)
	}
}

// cuFileRead may return fewer bytes than asked: the reads are assembled.
func TestGDSPartialReads(t *testing.T) {
	g := needGDSDouble(t)
	t.Setenv("FAKE_CUFILE_PARTIAL", "4097")
	path, data := testFile(t)
	fd := openDirect(t, path)
	defer closeFd(g, fd)
	const size = 1<<20 + 5
	d := allocDev(t, 0, size)
	n, err := g.Read(fd, d.ptr, size, 3)
	if err != nil || n != size {
		t.Fatalf("Read = %d, %v", n, err)
	}
	d.check(t, data[3:3+size])
	if got, want := cufileStat(t, "calls_cuFileRead"), int64((size+4096)/4097); got != want {
		t.Fatalf("%d cuFileRead calls, want %d", got, want)
	}
	if got := cufileStat(t, "calls_cuFileHandleRegister"); got != 1 {
		t.Fatalf("%d registrations, want 1", got)
	}
}

func TestGDSUnsupportedFS(t *testing.T) {
	g := needGDSDouble(t)
	path, _ := testFile(t)
	fd := openDirect(t, path)
	defer closeFd(g, fd)
	d := allocDev(t, 0, 4096)
	t.Setenv("FAKE_CUFILE_UNSUPPORTED_FS", "1")
	for i := 0; i < 2; i++ {
		n, err := g.Read(fd, d.ptr, 4096, 0)
		e := wantKind(t, err, KindUnsupported)
		reason, ok := FallbackReason(err)
		if n != 0 || !ok || reason != "fs_unsupported" || e.CodeName != "CU_FILE_IO_NOT_SUPPORTED" ||
			!strings.Contains(e.Error(), "file system not supported") {
			t.Fatalf("n %d, err %v, reason %q", n, err, reason)
		}
	}
	// The failure is remembered per file: one registration attempt.
	if got := cufileStat(t, "calls_cuFileHandleRegister"); got != 1 {
		t.Fatalf("%d registration attempts, want 1", got)
	}
	os.Unsetenv("FAKE_CUFILE_UNSUPPORTED_FS")
	g.Forget(fd)
	if n, err := g.Read(fd, d.ptr, 4096, 0); err != nil || n != 4096 {
		t.Fatalf("after Forget: %d, %v", n, err)
	}
}

func TestGDSReadErrors(t *testing.T) {
	g := needGDSDouble(t)
	path, data := testFile(t)
	fd := openDirect(t, path)
	defer closeFd(g, fd)
	d := allocDev(t, 0, 64<<10)

	t.Setenv("FAKE_CUFILE_PARTIAL", "4096")
	t.Setenv("FAKE_CUFILE_FAIL_READ_AFTER", "2")
	n, err := g.Read(fd, d.ptr, 64<<10, 0)
	e := wantKind(t, err, KindIO)
	if n != 8192 || !errors.Is(err, syscall.EIO) || e.Reason() != "gds_read" || !e.Fallback() {
		t.Fatalf("errno failure: n %d, err %v", n, err)
	}
	d.check(t, data[:8192])

	cufileHookReset()
	t.Setenv("FAKE_CUFILE_FAIL_READ_AFTER", "0")
	t.Setenv("FAKE_CUFILE_FAIL_READ_CODE", "5030")
	n, err = g.Read(fd, d.ptr, 4096, 0)
	e = wantKind(t, err, KindIO)
	if n != 0 || e.Code != 5030 || e.CodeName != "CU_FILE_INTERNAL_ERROR" ||
		!strings.Contains(err.Error(), "cuFileRead error 5030") {
		t.Fatalf("cuFile error code: n %d, err %v", n, err)
	}
	if r, ok := FallbackReason(err); !ok || r != "gds_read" {
		t.Fatalf("FallbackReason %q %v", r, ok)
	}
	// The codes past 5034 (cufile.h) have names too.
	for code, name := range map[string]string{"5036": "CU_FILE_GPU_MEMORY_PINNING_FAILED",
		"5043": "CU_FILE_NOMEM_ERROR", "5047": "CU_FILE_INVALID_CONTEXT_ERROR", "5050": "CU_FILE_IO_MAX_ERROR"} {
		cufileHookReset()
		t.Setenv("FAKE_CUFILE_FAIL_READ_CODE", code)
		_, err = g.Read(fd, d.ptr, 4096, 0)
		if e := wantKind(t, err, KindIO); e.CodeName != name {
			t.Fatalf("code %s: %v, want name %s", code, err, name)
		}
	}
}

// A descriptor closed without Forget and reused for another file is
// registered again.
func TestGDSDescriptorReuse(t *testing.T) {
	g := needGDSDouble(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte(strings.Repeat("A", 8192)), 0o600)
	os.WriteFile(b, []byte(strings.Repeat("B", 8192)), 0o600)
	d := allocDev(t, 0, 8192)
	fd := openDirect(t, a)
	if n, err := g.Read(fd, d.ptr, 8192, 0); err != nil || n != 8192 {
		t.Fatal(n, err)
	}
	d.check(t, []byte(strings.Repeat("A", 8192)))
	syscall.Close(fd) // no Forget
	fd2 := openDirect(t, b)
	defer closeFd(g, fd2)
	if fd2 != fd {
		t.Skipf("the kernel gave descriptor %d, not %d", fd2, fd)
	}
	if n, err := g.Read(fd2, d.ptr, 8192, 0); err != nil || n != 8192 {
		t.Fatal(n, err)
	}
	d.check(t, []byte(strings.Repeat("B", 8192)))
	if got := cufileStat(t, "calls_cuFileHandleRegister"); got != 2 {
		t.Fatalf("%d registrations, want 2", got)
	}
	if got := cufileStat(t, "calls_cuFileHandleDeregister"); got != 1 {
		t.Fatalf("%d deregistrations, want 1", got)
	}
}

func TestGDSConcurrent(t *testing.T) {
	g := needGDSDouble(t)
	path, data := testFile(t)
	fd := openDirect(t, path)
	defer closeFd(g, fd)
	const workers, size = 6, 300 << 10
	bufs := make([]devBuf, workers)
	for i := range bufs {
		bufs[i] = allocDev(t, i%DeviceCount(), size)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for rep := 0; rep < 5; rep++ {
				if _, err := g.Read(fd, bufs[i].ptr, size, int64(i*size)); err != nil {
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
		b.check(t, data[i*size:(i+1)*size])
	}
	if got := cufileStat(t, "calls_cuFileHandleRegister"); got != 1 {
		t.Fatalf("%d registrations, want 1", got)
	}
}

// reinitGDS makes the next OpenGDS probe again (with c for the CUDA side),
// and restores the double afterwards.
func reinitGDS(t *testing.T, c Config) {
	t.Helper()
	reinit(t, c)
	resetGDSForTest()
	t.Cleanup(resetGDSForTest)
}

// B20 for cuFile: missing, not a library, driver open failing, no CUDA.
func TestGDSUnavailable(t *testing.T) {
	needDouble(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "libcufile.so.0")
	os.WriteFile(text, []byte(strings.Repeat("not a library, just text\n", 8)), 0o644)
	dc := doubleConfig()
	for _, c := range []struct {
		name   string
		cfg    Config
		env    [2]string
		reason string
		want   string
	}{
		{"missing", Config{CUDALibrary: dc.CUDALibrary, CUFileLibrary: filepath.Join(dir, "no", "libcufile.so.0")},
			[2]string{}, "cufile_unavailable", "cufile not found"},
		{"text", Config{CUDALibrary: dc.CUDALibrary, CUFileLibrary: text}, [2]string{}, "cufile_unavailable", "ELF"},
		{"driver", dc, [2]string{"FAKE_CUFILE_DRIVER_OPEN_FAIL", "5010"}, "gds_driver_open", "CU_FILE_NVFS_DRIVER_ERROR"},
		{"nocuda", Config{CUDALibrary: filepath.Join(dir, "no", "libcuda.so.1")}, [2]string{}, "cuda_unavailable", "not loaded"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reinitGDS(t, c.cfg)
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			if r := GDSReason(); r != "GDS not probed yet" {
				t.Fatalf("GDSReason before the probe: %q", r)
			}
			_, err := OpenGDS(nil)
			e := wantKind(t, err, KindUnavailable)
			if r, ok := FallbackReason(err); !ok || r != c.reason || !strings.Contains(e.Error(), c.want) {
				t.Fatalf("err %v, reason %q (want %q, %q)", err, r, c.reason, c.want)
			}
			if r := GDSReason(); !strings.HasPrefix(r, "GDS unavailable: ") {
				t.Fatalf("GDSReason %q", r)
			}
			// Remembered: a second call answers the same without probing.
			if _, err2 := OpenGDS(nil); err2 != err {
				t.Fatalf("second OpenGDS: %v", err2)
			}
		})
	}
}
