//go:build linux && !(amd64 || arm64 || riscv64)

package files

import "golang.org/x/sys/unix"

// statPath is unix.Stat; architectures without newfstatat (32-bit, loong64)
// take x/sys's own path, which allocates one copy of the path.
func statPath(path string, st *unix.Stat_t) error { return unix.Stat(path, st) }

// fstatQuick is unix.Fstat on these architectures.
func fstatQuick(fd int, st *unix.Stat_t) error { return unix.Fstat(fd, st) }
