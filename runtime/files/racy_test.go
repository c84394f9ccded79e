package files

import "testing"

func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{
		"6.13.0": true, "6.18.2-cloud": true, "7.0": true, "6.13-rc1": true, "6.12.9": false,
		"5.15.0-91-generic": false, "6": false, "": false, "x.y": false, "6.x": false,
	} {
		if got := kernelAtLeast(rel, 6, 13); got != want {
			t.Errorf("kernelAtLeast(%q, 6, 13) = %v, want %v", rel, got, want)
		}
	}
}
