//go:build cgo

package gpu

// cuFile's compatibility mode (no nvidia-fs.ko, no P2PDMA) is detected when
// the driver opens, from /proc/driver/nvidia-fs/version and
// cuFileDriverGetProperties, and reported as its own path.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGDSPathDetection(t *testing.T) {
	needDouble(t)
	dir := t.TempDir()
	withNVFS := filepath.Join(dir, "version")
	if err := os.WriteFile(withNVFS, []byte("version: 2.17\nmod : nvidia_fs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, nvfsFile, compatEnv string
		compat                    bool
		path, reason              string
	}{
		{"nvidia-fs loaded", withNVFS, "1", false, "gpudirect", "GPUDirect (nvidia-fs loaded: version: 2.17 mod : nvidia_fs)"},
		{"driver properties", filepath.Join(dir, "none"), "", false, "gpudirect", "GPUDirect (driver properties: nvidia-fs 2.17)"},
		{"compat", filepath.Join(dir, "none"), "1", true, "compat",
			"compatibility mode (no nvidia-fs, no NVMe P2PDMA in the driver properties: cuFile reads through host memory)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			reinitGDS(t, doubleConfig())
			old := nvfsVersionFile
			nvfsVersionFile = c.nvfsFile
			t.Cleanup(func() { nvfsVersionFile = old })
			t.Setenv("FAKE_CUFILE_COMPAT_MODE", c.compatEnv)
			if p := GDSPath(); p != "not probed" {
				t.Fatalf("GDSPath before the probe: %q", p)
			}
			g, err := OpenGDS(nil)
			if err != nil {
				t.Fatal(err)
			}
			if g.Compat() != c.compat || GDSPath() != c.path {
				t.Fatalf("Compat %v, GDSPath %q; want %v, %q", g.Compat(), GDSPath(), c.compat, c.path)
			}
			if r := GDSReason(); r != "GDS available: "+doubleConfig().CUFileLibrary+", "+c.reason {
				t.Fatalf("GDSReason %q", r)
			}
		})
	}
}

// Reads in compatibility mode still deliver the file's bytes (REQUIRED
// uses them); the engine keeps AUTO off them.
func TestGDSCompatReads(t *testing.T) {
	needDouble(t)
	reinitGDS(t, doubleConfig())
	t.Setenv("FAKE_CUFILE_COMPAT_MODE", "1")
	g := needGDSDouble(t)
	if !g.Compat() {
		t.Fatalf("not compat: %s", GDSReason())
	}
	path, data := testFile(t)
	fd := openDirect(t, path)
	defer closeFd(g, fd)
	d := allocDev(t, 0, 1<<20)
	if n, err := g.Read(fd, d.ptr, d.size, 4096); err != nil || n != int64(d.size) {
		t.Fatalf("Read: %d, %v", n, err)
	}
	d.check(t, data[4096:4096+d.size])
	if n := cufileStat(t, "compat_reads"); n != 1 {
		t.Fatalf("compat_reads %d, want 1", n)
	}
	if !strings.HasPrefix(GDSReason(), "GDS available: ") {
		t.Fatal(GDSReason())
	}
}
