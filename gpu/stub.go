//go:build !memtier_cuda || !cgo

package gpu

import "slices"

// This build has no CUDA backend: every entry point reports why. The
// documentation of each function is in the CUDA build (cuda.go, stager.go,
// hbm.go; build tag memtier_cuda).

func stubReason() string {
	if slices.Contains(buildTags, "cuda") {
		return "GPU target unavailable: this build has the memtier_cuda tag but was built without cgo (CGO_ENABLED=0)"
	}
	return "GPU target unavailable: this build has no CUDA backend (configure with -DMEMTIER_ENABLE_CUDA=ON)"
}

func unavailable() *Error { return &Error{Kind: KindUnavailable, Detail: stubReason()} }

// Configure records nothing in a build without the CUDA backend.
func Configure(c Config) error { return nil }

// Init reports that this build has no CUDA backend (KindUnavailable).
func Init() error { return unavailable() }

// Available reports whether device reads can be served: never in this build.
func Available() bool { return false }

// Reason explains Available's answer in one line, naming what is missing.
func Reason() string { return stubReason() }

// DeviceCount is 0 in this build.
func DeviceCount() int { return 0 }

// DriverVersion is 0 in this build.
func DriverVersion() int { return 0 }

// PointerInfo describes a CUDA device pointer (see the CUDA build).
type PointerInfo struct {
	Device int
	Base   uintptr
	Size   uint64
}

// InspectPointer fails with KindUnavailable in this build.
func InspectPointer(ptr uintptr, size uint64) (PointerInfo, error) {
	return PointerInfo{}, unavailable()
}

// PointerDevice fails with KindUnavailable in this build.
func PointerDevice(ptr uintptr) (int, error) { return 0, unavailable() }

// MemAlloc fails with KindUnavailable in this build.
func MemAlloc(device int, size uint64) (uintptr, error) { return 0, unavailable() }

// MemFree fails with KindUnavailable in this build.
func MemFree(ptr uintptr) error { return unavailable() }

// CopyFromDevice fails with KindUnavailable in this build.
func CopyFromDevice(dst []byte, src uintptr) error { return unavailable() }

// Stager moves file bytes to device memory (see the CUDA build).
type Stager struct{ opts StagerOptions }

// NewStager fails with KindUnavailable (or KindInvalidArg) in this build.
func NewStager(opts StagerOptions) (*Stager, error) {
	if _, err := opts.withDefaults(); err != nil {
		return nil, err
	}
	return nil, unavailable()
}

// Options returns the Stager's options.
func (s *Stager) Options() StagerOptions { return s.opts }

// ReadToDevice fails with KindUnavailable in this build.
func (s *Stager) ReadToDevice(dst uintptr, size uint64, read ReadFunc, fileOff uint64) error {
	return unavailable()
}

// CopyToDevice fails with KindUnavailable in this build.
func (s *Stager) CopyToDevice(dst uintptr, src []byte) error { return unavailable() }

// Close does nothing in this build.
func (s *Stager) Close() error { return nil }

// HBMCache keeps file blocks in device memory (see the CUDA build).
type HBMCache struct{ opts HBMOptions }

// NewHBMCache fails with KindUnavailable (or KindInvalidArg) in this build.
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

// Usage is all zero in this build.
func (c *HBMCache) Usage() (blocks int, bytes uint64, allocated uint64) { return 0, 0, 0 }

// Fill fails with KindUnavailable in this build.
func (c *HBMCache) Fill(key BlockKey, n uint64, fill func(dst uintptr) error) (bool, error) {
	return false, unavailable()
}

// Insert fails with KindUnavailable in this build.
func (c *HBMCache) Insert(key BlockKey, src []byte) (bool, error) { return false, unavailable() }

// Lookup always misses in this build.
func (c *HBMCache) Lookup(key BlockKey, blockOff uint64, dst uintptr, n uint64) (bool, error) {
	return false, nil
}

// Contains is always false in this build.
func (c *HBMCache) Contains(key BlockKey) (uint64, bool) { return 0, false }

// Remove does nothing in this build.
func (c *HBMCache) Remove(key BlockKey) bool { return false }

// RemoveFile does nothing in this build.
func (c *HBMCache) RemoveFile(file uint64) int { return 0 }

// Close does nothing in this build.
func (c *HBMCache) Close() error { return nil }
