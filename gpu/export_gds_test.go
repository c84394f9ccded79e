//go:build cgo

package gpu

// resetGDSForTest forgets the process's cuFile answer (and its registered
// files, which the double then still counts as live).
func resetGDSForTest() {
	gdsState.Store(&gdsDriver{files: map[int]*gdsFile{}})
	gdsProbed.Store(false)
}

func cufileHookStat(name string) (int64, bool) {
	return hookStat(cufileLibHandle(), "fake_cufile_stat", name)
}

func cufileHookReset() bool { return hookCall(cufileLibHandle(), "fake_cufile_reset") }
