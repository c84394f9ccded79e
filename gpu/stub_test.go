//go:build !memtier_cuda || !cgo

package gpu

import (
	"strings"
	"testing"
)

// Without the CUDA backend every entry point says so, with the reason.
func TestStubUnavailable(t *testing.T) {
	if Available() {
		t.Fatal("Available in a build without CUDA")
	}
	if r := Reason(); !strings.HasPrefix(r, "GPU target unavailable: ") {
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
		t.Fatal("devices in a build without CUDA")
	}
}
