package engine

// Engine-level tests, on the GPU test double, of the fixes from reading the
// GPU paths against the CUDA and cuFile documentation (issue 14).

import (
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/policy"
)

// A device pointer whose allocation is too short for the request is
// refused as a range error, not as "not CUDA device memory".
func TestGPU_RangeErrorText(t *testing.T) {
	needGPU(t)
	const n = 64 << 10
	path := writeP(t, 1<<20)
	c := newCtx(t, nil)
	dev := devMem(t, n)
	err := c.Read(path, 0, n+1, devSlice(dev, n+1), policy.TargetCUDA, 0)
	if code(err) != errs.InvalidArg {
		t.Fatalf("read one byte past the allocation: %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "is not CUDA device memory") || !strings.Contains(msg, "runs past its allocation") {
		t.Fatalf("range error text: %s", msg)
	}
	// A host pointer keeps the "not device memory" wording.
	err = c.Read(path, 0, 4096, make([]byte, 4096), policy.TargetCUDA, 0)
	if code(err) != errs.InvalidArg || !strings.Contains(err.Error(), "is not CUDA device memory") {
		t.Fatalf("host pointer: %v", err)
	}
}
