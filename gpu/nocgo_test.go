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
	checkConstructorsUnavailable(t)
	if _, err := OpenGDS(nil); KindOf(err) != KindUnavailable {
		t.Fatalf("OpenGDS: %v", err)
	}
	if !strings.HasPrefix(GDSReason(), "GDS unavailable: ") {
		t.Fatalf("GDSReason %q", GDSReason())
	}
}
