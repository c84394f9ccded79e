//go:build linux

package config

import (
	"os"

	"golang.org/x/sys/unix"
)

// ReadMemLimit is ReadMemLimitAt("/", host RAM from sysinfo(2)); the test-only
// MEMTIER_CGROUP_ROOT=dir reads the tree under dir instead of "/" (host RAM
// stays the real one). Reads files under /proc and /sys on every call (a
// cgroup limit can change while the process runs); safe for concurrent use.
func ReadMemLimit() MemLimit {
	root := "/"
	if r := os.Getenv(CgroupRootVar); r != "" {
		root = r
	}
	return ReadMemLimitAt(root, HostRAM())
}

// HostRAM is the machine's RAM in bytes from sysinfo(2), 0 if unknown. Safe
// for concurrent use.
func HostRAM() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
