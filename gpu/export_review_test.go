//go:build cgo

package gpu

// Test-only control of the primary-context references this process holds,
// for the tests that count contexts on the double (cuda_review_double_test.go).

// dropPrimariesForTest releases every primary context primaryContext
// retained and forgets them, as if this process had never used a device
// (they are retained again on next use). The double keeps released contexts
// usable, so handles cached elsewhere still work there.
func dropPrimariesForTest() {
	primaryMu.Lock()
	defer primaryMu.Unlock()
	for dev := range primaries {
		if d, r := cuDeviceGet(dev); r == cudaSuccess {
			_ = cuDevicePrimaryCtxRelease(d)
		}
		delete(primaries, dev)
	}
}

// retainPrimaryForTest and releasePrimaryForTest stand in for another
// library (torch) that keeps device dev's primary context active.
func retainPrimaryForTest(dev int) bool {
	d, r := cuDeviceGet(dev)
	if r != cudaSuccess {
		return false
	}
	_, r = cuDevicePrimaryCtxRetain(d)
	return r == cudaSuccess
}

func releasePrimaryForTest(dev int) bool {
	d, r := cuDeviceGet(dev)
	return r == cudaSuccess && cuDevicePrimaryCtxRelease(d) == cudaSuccess
}
