//go:build !cgo

package gpu

import (
	"strings"
	"testing"
)

// Without cgo nothing can be loaded: every entry point says so, with the
// reason (runtime/ is tested this way, CGO_ENABLED=0).
func TestNoCgoUnavailable(t *testing.T) {
	if got := BuildTags(); len(got) != 0 {
		t.Fatalf("BuildTags %v without cgo, want none", got)
	}
	if Available() {
		t.Fatal("Available without cgo")
	}
	if r := Reason(); r != "GPU target unavailable: this build was built without cgo (CGO_ENABLED=0)" {
		t.Fatalf("Reason %q", r)
	}
	if err := Init(); KindOf(err) != KindUnavailable {
		t.Fatalf("Init: %v", err)
	}
	if _, err := NewStager(StagerOptions{}); KindOf(err) != KindUnavailable {
		t.Fatalf("NewStager: %v", err)
	}
	if _, err := NewStager(StagerOptions{ChunkSize: 100}); KindOf(err) != KindInvalidArg {
		t.Fatalf("NewStager with bad options: %v", err)
	}
	if _, err := NewHBMCache(HBMOptions{Budget: 1 << 30}); KindOf(err) != KindUnavailable {
		t.Fatalf("NewHBMCache: %v", err)
	}
	if _, err := PointerDevice(0x1000); KindOf(err) != KindUnavailable {
		t.Fatalf("PointerDevice: %v", err)
	}
	if _, err := OpenGDS(nil); KindOf(err) != KindUnavailable {
		t.Fatalf("OpenGDS: %v", err)
	}
	if !strings.HasPrefix(GDSReason(), "GDS unavailable: ") {
		t.Fatalf("GDSReason %q", GDSReason())
	}
	if DeviceCount() != 0 || DriverVersion() != 0 {
		t.Fatal("devices without cgo")
	}
}
