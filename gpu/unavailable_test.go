package gpu

import "testing"

// checkConstructorsUnavailable: with no usable CUDA (no cgo, or no driver
// to load), Init and every constructor answer KindUnavailable, and bad
// options are still KindInvalidArg (checked before anything is loaded).
// Shared by TestNoCgoUnavailable and TestNoDriverAnswersUnavailable.
func checkConstructorsUnavailable(t *testing.T) {
	t.Helper()
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
	if DeviceCount() != 0 || DriverVersion() != 0 {
		t.Fatalf("DeviceCount %d DriverVersion %d with no usable CUDA", DeviceCount(), DriverVersion())
	}
}
