//go:build !memtier_cuda || !memtier_gds || !cgo

package gpu

import "slices"

// This build has no GDS backend: OpenGDS reports why.

func gdsStubError() *Error {
	var why string
	switch {
	case !slices.Contains(buildTags, "gds"):
		why = "this build has no GDS backend (configure with -DMEMTIER_ENABLE_GDS=ON)"
	case !slices.Contains(buildTags, "cuda"):
		why = "the GDS backend needs the CUDA backend too (memtier_cuda)"
	default:
		why = "this build has the memtier_gds tag but was built without cgo (CGO_ENABLED=0)"
	}
	return &Error{Kind: KindUnavailable, Detail: "GDS unavailable: " + why, reason: "gds_not_built"}
}

// GDS reads files straight into device memory with cuFile (see the GDS
// build).
type GDS struct{}

// OpenGDS fails with KindUnavailable (Reason "gds_not_built") in this build.
func OpenGDS(st *Stats) (*GDS, error) { return nil, gdsStubError() }

// GDSReason says why GDS is unavailable in this build.
func GDSReason() string { return gdsStubError().Detail }

// Read fails with KindUnavailable in this build.
func (g *GDS) Read(fd int, dst uintptr, size uint64, fileOff int64) (int64, error) {
	return 0, gdsStubError()
}

// Forget does nothing in this build.
func (g *GDS) Forget(fd int) {}
