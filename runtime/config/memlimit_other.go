//go:build !linux

package config

// ReadMemLimit knows no limit outside Linux (no cgroups, no sysinfo): it
// returns the zero MemLimit, which bounds nothing. Safe for concurrent use.
func ReadMemLimit() MemLimit { return MemLimit{} }

// HostRAM is 0 (unknown) outside Linux.
func HostRAM() uint64 { return 0 }
