package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include "memtier.h"
*/
import "C"

import (
	"unsafe"

	"github.com/memtier/memtier/runtime/config"
	"github.com/memtier/memtier/runtime/engine"
	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/logx"
)

// The remote client and the disk cache read their settings (AWS_*,
// MEMTIER_REMOTE_*, MEMTIER_DISK_CACHE_*) through libc, as envOptions does
// the MEMTIER_* options, so what Python sets in os.environ before the first
// URL is seen (see cgetenv).
func init() {
	engine.SetGetenv(func(name string) string {
		v, _ := cgetenv(name)
		return v
	})
	logx.SetGetenv(func(name string) string { v, _ := cgetenv(name); return v })
}

// minConfigSize: a config must at least carry struct_size and io_threads.
const minConfigSize = 8

// optionsToC writes o into a C config (struct_size = the library's size).
func optionsToC(o config.Options, c *C.memtier_config_t) {
	c.struct_size = C.uint32_t(unsafe.Sizeof(*c))
	configToC(&o, c) // zz_config.go, generated from the header
}

// has reports whether a caller's config of size bytes contains the field at
// off of n bytes (older callers pass shorter structs).
func has(size uintptr, off, n uintptr) bool { return off+n <= size }

// optionsFromC applies the fields of c that its struct_size covers; 0 in a
// size or count field keeps the default.
func optionsFromC(c *C.memtier_config_t, o *config.Options) error {
	size := uintptr(c.struct_size)
	if size < minConfigSize || size > 1<<16 {
		return errs.New(errs.InvalidArg, "memtier_init",
			"cfg->struct_size %d is not a config size (fill cfg with memtier_config_default)", size)
	}
	configFromC(c, size, o) // zz_config.go, generated from the header
	return nil
}

// envOptions returns the defaults with the MEMTIER_* environment applied.
func envOptions() (config.Options, error) {
	o := config.LimitedDefaults() // the default cache budget bounded by a cgroup memory limit (N06)
	err := o.FromEnv(cgetenv)
	if err != nil {
		return config.LimitedDefaults(), err
	}
	return o, nil
}

//export mtgo_config_default
func mtgo_config_default(cfg *C.memtier_config_t) (rc C.int) {
	defer catch(&rc, nil)
	o, err := envOptions()
	optionsToC(o, cfg)
	return finish(nil, err)
}

//export mtgo_init
func mtgo_init(cfg *C.memtier_config_t, idOut *C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	warnUnknownEnv()
	o, err := envOptions()
	if err != nil {
		return finish(nil, err)
	}
	if cfg != nil {
		if err := optionsFromC(cfg, &o); err != nil {
			return finish(nil, err)
		}
	}
	ctx, err := engine.New(o)
	if err != nil {
		return finish(nil, err)
	}
	*idOut = C.uint64_t(addContext(ctx))
	return 0
}

//export mtgo_finalize
func mtgo_finalize(id C.uint64_t) (rc C.int) {
	defer catch(&rc, nil)
	ctx, err := removeContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	forgetCheck(uint64(id))
	return finish(nil, ctx.Close())
}

//export mtgo_get_config
func mtgo_get_config(id C.uint64_t, cfg *C.memtier_config_t) (rc C.int) {
	defer catch(&rc, nil)
	ctx, err := lookupContext(uint64(id))
	if err != nil {
		return finish(nil, err)
	}
	optionsToC(ctx.Options(), cfg)
	return 0
}
