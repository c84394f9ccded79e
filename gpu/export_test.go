//go:build cgo

package gpu

// Test-only access to the process-wide state and to the test doubles'
// counters (tests/gpu_double).

// resetInitForTest forgets the process's CUDA init answer and Config, so a
// test can load another library. Loaded libraries stay loaded.
func resetInitForTest() {
	cfgMu.Lock()
	cfg = Config{}
	cfgMu.Unlock()
	state.Store(new(initState))
	started.Store(false)
	cudaOK.Store(false)
}

// cudaHookStat reads a counter of the libcuda double; ok is false against a
// real driver.
func cudaHookStat(name string) (int64, bool) {
	return hookStat(cudaLibHandle(), "fake_cuda_stat", name)
}

// cudaHookReset zeroes the libcuda double's counters and fault counts.
func cudaHookReset() bool { return hookCall(cudaLibHandle(), "fake_cuda_reset") }

// currentContextForTest and setContextForTest reach the calling thread's
// current context (the caller locks its OS thread).
func currentContextForTest() uintptr {
	c, _ := cuCtxGetCurrent()
	return uintptr(c)
}

func setContextForTest(c uintptr) bool { return cuCtxSetCurrent(ctxHandle(c)) == cudaSuccess }

func primaryContextForTest(dev int) uintptr {
	c, err := primaryContext(dev)
	if err != nil {
		return 0
	}
	return uintptr(c)
}
