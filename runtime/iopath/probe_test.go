//go:build linux

package iopath

import (
	"path/filepath"
	"testing"

	"github.com/memtier/memtier/runtime/stats"
)

func TestProbeDevice(t *testing.T) {
	forgetDevices()
	t.Cleanup(forgetDevices)
	const size = ProbeMinBytes + 5<<20
	path := filepath.Join(t.TempDir(), "probe.bin")
	writePFile(t, path, size)
	f := openFile(t, path)
	var st stats.Counters
	r := newReader(t, testOptions(), &st)
	if _, ok := r.ProbeDevice(f, 0, ProbeMinBytes-1); ok {
		t.Fatal("probed a range below ProbeMinBytes")
	}
	if _, ok := DeviceProbe(f.Ident.Dev); ok {
		t.Fatal("a refused probe left a result")
	}
	// Warm: the probe waits for a cold read.
	if _, err := r.ReadBuffered(f, make([]byte, size), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.ProbeDevice(f, 0, size); ok {
		t.Fatal("probed a warm range")
	}
	if err := DropPageCache(f.FD, 0, 0); err != nil {
		t.Fatal(err)
	}
	if res, _ := Resident(f.FD, 0, size); res > 0 {
		t.Skipf("this file system keeps %d bytes in the page cache after DONTNEED", res)
	}
	_, _, _, refused, _ := f.Direct()
	st.Reset()
	s, ok := r.ProbeDevice(f, 3, size-3)
	if refused {
		if ok {
			t.Fatal("measured O_DIRECT on a file system that refuses it")
		}
		return
	}
	if !ok || s.DirectBps <= 0 || s.BufferedBps <= 0 {
		t.Fatalf("probe: %+v ok %v", s, ok)
	}
	if st.StorageBytes.Load() != 0 {
		t.Fatalf("probe counted %d StorageBytes", st.StorageBytes.Load())
	}
	t.Logf("O_DIRECT %.0f MB/s, buffered streams %.0f MB/s", s.DirectBps/1e6, s.BufferedBps/1e6)
	// Remembered for the device, for every Reader, without measuring again.
	r2 := newReader(t, testOptions(), nil)
	if s2, ok := r2.ProbeDevice(f, 0, size); !ok || s2 != s {
		t.Fatalf("second probe %+v, want the remembered %+v", s2, s)
	}
	if s2, ok := DeviceProbe(f.Ident.Dev); !ok || s2 != s {
		t.Fatalf("DeviceProbe %+v", s2)
	}
}
