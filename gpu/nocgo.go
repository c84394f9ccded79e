//go:build !cgo

package gpu

// A build without cgo (CGO_ENABLED=0, as runtime/ is tested) cannot dlopen
// libcuda or libcufile, so every entry point reports why. cgo builds always
// have both backends (backends_cgo.go); the documentation of each function is
// with the cgo code (cuda.go, stager.go, hbm.go, gds_cgo.go).

const nocgoReason = "this build was built without cgo (CGO_ENABLED=0)"

func stubReason() string { return "GPU target unavailable: " + nocgoReason }

func unavailable() *Error { return &Error{Kind: KindUnavailable, Detail: stubReason()} }

// Configure records nothing in a build without cgo.
func Configure(c Config) error { return nil }

// Init fails with KindUnavailable: without cgo nothing can be loaded.
func Init() error { return unavailable() }

// Available reports whether device reads can be served: never without cgo.
func Available() bool { return false }

// Reason explains Available's answer in one line, naming what is missing.
func Reason() string { return stubReason() }

// DeviceCount is 0 without cgo.
func DeviceCount() int { return 0 }

// DriverVersion is 0 without cgo.
func DriverVersion() int { return 0 }

// PointerInfo describes a CUDA device pointer (see the cgo build).
type PointerInfo struct {
	Device  int
	Base    uintptr
	Size    uint64
	Managed bool
}

// InspectPointer fails with KindUnavailable without cgo.
func InspectPointer(ptr uintptr, size uint64) (PointerInfo, error) {
	return PointerInfo{}, unavailable()
}

// PointerDevice fails with KindUnavailable without cgo.
func PointerDevice(ptr uintptr) (int, error) { return 0, unavailable() }

// MemAlloc fails with KindUnavailable without cgo.
func MemAlloc(device int, size uint64) (uintptr, error) { return 0, unavailable() }

// MemFree fails with KindUnavailable without cgo.
func MemFree(ptr uintptr) error { return unavailable() }

// CopyFromDevice fails with KindUnavailable without cgo.
func CopyFromDevice(dst []byte, src uintptr) error { return unavailable() }

// Stager moves file bytes to device memory (see the cgo build).
type Stager struct{ opts StagerOptions }

// NewStager fails with KindUnavailable (or KindInvalidArg) without cgo.
func NewStager(opts StagerOptions) (*Stager, error) {
	if _, err := opts.withDefaults(); err != nil {
		return nil, err
	}
	return nil, unavailable()
}

// Options returns the Stager's options.
func (s *Stager) Options() StagerOptions { return s.opts }

// ReadToDevice fails with KindUnavailable without cgo.
func (s *Stager) ReadToDevice(dst uintptr, size uint64, read ReadFunc, fileOff uint64) error {
	return unavailable()
}

// CopyToDevice fails with KindUnavailable without cgo.
func (s *Stager) CopyToDevice(dst uintptr, src []byte) error { return unavailable() }

// Close does nothing without cgo.
func (s *Stager) Close() error { return nil }

// HBMCache keeps file blocks in device memory (see the cgo build).
type HBMCache struct{ opts HBMOptions }

// NewHBMCache fails with KindUnavailable (or KindInvalidArg) without cgo.
func NewHBMCache(opts HBMOptions) (*HBMCache, error) {
	if _, err := opts.withDefaults(); err != nil {
		return nil, err
	}
	return nil, unavailable()
}

// BlockSize is the cache's block size in bytes.
func (c *HBMCache) BlockSize() uint64 { return c.opts.BlockSize }

// Device is the device ordinal that holds the cache.
func (c *HBMCache) Device() int { return c.opts.Device }

// Usage is all zero without cgo.
func (c *HBMCache) Usage() (blocks int, bytes uint64, allocated uint64) { return 0, 0, 0 }

// Fill fails with KindUnavailable without cgo.
func (c *HBMCache) Fill(key BlockKey, n uint64, fill func(dst uintptr) error) (bool, error) {
	return false, unavailable()
}

// Insert fails with KindUnavailable without cgo.
func (c *HBMCache) Insert(key BlockKey, src []byte) (bool, error) { return false, unavailable() }

// LookupAll always misses without cgo.
func (c *HBMCache) LookupAll(cps []HBMCopy) ([]bool, error) { return make([]bool, len(cps)), nil }

// Lookup always misses without cgo.
func (c *HBMCache) Lookup(key BlockKey, blockOff uint64, dst uintptr, n uint64) (bool, error) {
	return false, nil
}

// Contains is always false without cgo.
func (c *HBMCache) Contains(key BlockKey) (uint64, bool) { return 0, false }

// Remove does nothing without cgo.
func (c *HBMCache) Remove(key BlockKey) bool { return false }

// RemoveFile does nothing without cgo.
func (c *HBMCache) RemoveFile(file uint64) int { return 0 }

// Close does nothing without cgo.
func (c *HBMCache) Close() error { return nil }

func gdsStubError() *Error {
	return &Error{Kind: KindUnavailable, Detail: "GDS unavailable: " + nocgoReason, reason: "gds_not_built"}
}

// GDS reads files straight into device memory with cuFile (see the cgo
// build).
type GDS struct{}

// OpenGDS fails with KindUnavailable (Reason "gds_not_built") without cgo.
func OpenGDS(st *Stats) (*GDS, error) { return nil, gdsStubError() }

// GDSReason says why GDS is unavailable without cgo.
func GDSReason() string { return gdsStubError().Detail }

// GDSPath is "unavailable" without cgo.
func GDSPath() string { return "unavailable" }

// Compat is false without cgo (there is no cuFile).
func (g *GDS) Compat() bool { return false }

// Read fails with KindUnavailable without cgo.
func (g *GDS) Read(fd int, dst uintptr, size uint64, fileOff int64) (int64, error) {
	return 0, gdsStubError()
}

// Forget does nothing without cgo.
func (g *GDS) Forget(fd int) {}
