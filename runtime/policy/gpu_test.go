package policy

import (
	"strings"
	"testing"
)

func TestDecideGPU_Table(t *testing.T) {
	auto := GPUConfig{GDSMode: GDSAuto, GDSThreshold: 1 << 20}
	cases := []struct {
		name string
		cfg  GPUConfig
		in   GPUInput
		path int
		row  int
		why  string
	}{
		{"no gpu", auto, GPUInput{Size: 8 << 20}, PathNone, 1, "no usable GPU"},
		{"empty", auto, GPUInput{GPUAvailable: true}, PathNone, 2, "empty"},
		{"all in hbm", auto, GPUInput{GPUAvailable: true, Size: 4096, HBMBytes: 4096}, PathHBM, 9, "HBM"},
		{"hbm and dram", auto, GPUInput{GPUAvailable: true, Size: 8192, HBMBytes: 4096, CachedBytes: 4096}, PathCache, 10, "DRAM"},
		{"gds off", GPUConfig{GDSMode: GDSOff, GDSThreshold: 1 << 20}, GPUInput{GPUAvailable: true, Size: 64 << 20, FileSize: 64 << 20}, PathStaged, 11, "OFF"},
		{"gds unavailable", auto, GPUInput{GPUAvailable: true, Size: 64 << 20, FileSize: 64 << 20, GDSUnavailable: "GDS unavailable: x"}, PathStaged, 11, "unavailable"},
		{"fell back", auto, GPUInput{GPUAvailable: true, Size: 64 << 20, FileSize: 64 << 20, FileFallback: "fs_unsupported"}, PathStaged, 12, "fs_unsupported"},
		{"small", auto, GPUInput{GPUAvailable: true, Size: 4096, FileSize: 64 << 20}, PathStaged, 13, "threshold"},
		{"small after cache", auto, GPUInput{GPUAvailable: true, Size: 2 << 20, CachedBytes: 1<<20 + 1, FileSize: 64 << 20}, PathStaged, 13, "threshold"},
		{"unaligned offset", auto, GPUInput{GPUAvailable: true, Off: 1, Size: 8 << 20, FileSize: 64 << 20}, PathStaged, 14, "4096"},
		{"unaligned size", auto, GPUInput{GPUAvailable: true, Size: 8<<20 + 1, FileSize: 64 << 20}, PathStaged, 14, "4096"},
		{"tail at eof", auto, GPUInput{GPUAvailable: true, Off: 4096, Size: 8<<20 + 1, FileSize: 4096 + 8<<20 + 1}, PathGDS, 15, "aligned"},
		{"large aligned", auto, GPUInput{GPUAvailable: true, Size: 8 << 20, FileSize: 64 << 20}, PathGDS, 15, "aligned"},
		{"required small unaligned", GPUConfig{GDSMode: GDSRequired}, GPUInput{GPUAvailable: true, Off: 3, Size: 5, FileSize: 64 << 20}, PathGDS, 15, "REQUIRED"},
		{"compat mode", auto, GPUInput{GPUAvailable: true, Size: 8 << 20, FileSize: 64 << 20, GDSCompat: true}, PathStaged, 11, "compatibility mode"},
		{"required compat mode", GPUConfig{GDSMode: GDSRequired}, GPUInput{GPUAvailable: true, Size: 8 << 20, FileSize: 64 << 20, GDSCompat: true}, PathGDS, 15, "REQUIRED"},
		{"required unavailable", GPUConfig{GDSMode: GDSRequired}, GPUInput{GPUAvailable: true, Size: 5, GDSUnavailable: "no"}, PathStaged, 11, "no"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideGPU(tc.cfg, tc.in)
			if d.Path != tc.path || d.Row != tc.row || d.Admit || !strings.Contains(d.Reason, tc.why) {
				t.Fatalf("got path=%d row=%d admit=%v %q, want path=%d row=%d reason with %q",
					d.Path, d.Row, d.Admit, d.Reason, tc.path, tc.row, tc.why)
			}
		})
	}
}

// FuzzDecideGPU: every answer is a GPU path (or none), GDS never with mode
// OFF or when unavailable, and AUTO GDS only for large aligned ranges.
func FuzzDecideGPU(f *testing.F) {
	f.Add(uint64(8<<20), uint64(0), uint64(64<<20), uint64(0), uint64(0), 0, true, false, false)
	f.Add(uint64(5), uint64(3), uint64(9), uint64(1), uint64(2), 2, true, true, true)
	f.Fuzz(func(t *testing.T, size, off, fsize, hbm, cached uint64, mode int, avail, unavail, fell bool) {
		c := GPUConfig{GDSMode: ((mode % 3) + 3) % 3, GDSThreshold: 1 << 20}
		in := GPUInput{Size: size, Off: off, FileSize: fsize, HBMBytes: min(hbm, size),
			CachedBytes: min(cached, size-min(hbm, size)), GPUAvailable: avail}
		if unavail {
			in.GDSUnavailable = "x"
		}
		if fell {
			in.FileFallback = "y"
		}
		d := DecideGPU(c, in)
		switch d.Path {
		case PathNone, PathHBM, PathCache, PathStaged, PathGDS:
		default:
			t.Fatalf("bad path %+v", d)
		}
		if d.Path == PathGDS && (c.GDSMode == GDSOff || unavail || fell || !avail) {
			t.Fatalf("GDS chosen against mode/availability: %+v %+v", c, in)
		}
		if d.Path == PathGDS && c.GDSMode == GDSAuto && (!GDSAligned(off, size, fsize) || size-in.HBMBytes-in.CachedBytes < c.GDSThreshold) {
			t.Fatalf("AUTO GDS for a small or unaligned range: %+v", in)
		}
		if d.Admit {
			t.Fatal("a GPU read admitted into the DRAM cache")
		}
	})
}
