package main

/*
#include <stdint.h>
int mt_nofile_at_load_get(uint64_t* cur, uint64_t* max);
*/
import "C"

import "syscall"

// Package main's init runs after every imported package's init, so by now
// syscall's init has raised the soft RLIMIT_NOFILE (see nofile.c), and no
// exported function has run yet: the runtime makes every export wait for it.
func init() { restoreNofile() }

// restoreNofile puts the host's soft open-file limit back when Go's init is
// what changed it: the hard limit is the one at load and the soft one is
// exactly hard-1 (the value syscall's init sets). A limit the host changed
// itself in between is left alone. MemTier needs no raised limit: its
// descriptor table keeps within a share of the soft limit (runtime/files).
// Go's own os/exec children are unaffected either way: syscall.Setrlimit
// clears the value Go would restore in them.
func restoreNofile() {
	var cur, max C.uint64_t
	if C.mt_nofile_at_load_get(&cur, &max) == 0 {
		return
	}
	var now syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now) != nil {
		return
	}
	if now.Max != uint64(max) || now.Max == 0 || now.Cur != now.Max-1 || uint64(cur) >= now.Cur {
		return
	}
	lim := syscall.Rlimit{Cur: uint64(cur), Max: uint64(max)}
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) // nothing to do on failure: Go's limit stays
}
