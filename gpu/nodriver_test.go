//go:build cgo

package gpu

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// One library for every machine: with no libcuda to load (a path that does
// not exist stands in for a machine without a driver), the compiled-in
// backends answer KindUnavailable with the reason, as a build without them
// used to. Runs in a plain `go test ./gpu/...`; with the double or a real
// driver configured, TestLibraryAbsent covers the same answers.
func TestNoDriverAnswersUnavailable(t *testing.T) {
	if doubleDir != "" || realDriver {
		t.Skip("a CUDA backend is usable here: the double or a real driver is configured (TestLibraryAbsent checks this case there)")
	}
	absent := filepath.Join(t.TempDir(), "absent")
	resetInitForTest()
	resetGDSForTest()
	t.Cleanup(func() { resetInitForTest(); resetGDSForTest() })
	if err := Configure(Config{
		CUDALibrary:   filepath.Join(absent, "libcuda.so.1"),
		CUFileLibrary: filepath.Join(absent, "libcufile.so.0"),
	}); err != nil {
		t.Fatal(err)
	}
	if got := BuildTags(); !slices.Equal(got, []string{"cuda", "gds"}) {
		t.Fatalf("BuildTags %v, want [cuda gds]", got)
	}
	if Available() {
		t.Fatal("Available with no libcuda")
	}
	if r := Reason(); !strings.HasPrefix(r, "GPU target unavailable: ") || !strings.Contains(r, absent) {
		t.Fatalf("Reason %q does not say unavailable and name %s", r, absent)
	}
	checkConstructorsUnavailable(t)
	if got := GDSReason(); got != "GDS not probed yet" {
		t.Fatalf("GDSReason before OpenGDS %q", got)
	}
	_, err := OpenGDS(nil)
	e, ok := err.(*Error)
	if !ok || e.Kind != KindUnavailable || e.Reason() != "cuda_unavailable" {
		t.Fatalf("OpenGDS: %v, want KindUnavailable with Reason cuda_unavailable", err)
	}
	if got := GDSReason(); !strings.HasPrefix(got, "GDS unavailable: ") {
		t.Fatalf("GDSReason %q", got)
	}
}
