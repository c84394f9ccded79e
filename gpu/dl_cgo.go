//go:build cgo

package gpu

// The one dlopen/dlsym loader behind cuda_cgo.go (libcuda) and gds_cgo.go
// (libcufile), so both load the same way and say the same things on failure.
// It is a plain C function rather than a static one because cgo compiles each
// file's preamble on its own; the callers declare its prototype (and the
// struct) in their preambles. It is hidden so libmemtier.so does not export
// it: that library's dynamic symbols are its C API only.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>

struct mt_dl_sym {
	void **slot;      // where the address goes (a function pointer field)
	const char *name; // the exported name
};

// Opens path (RTLD_NOW | RTLD_LOCAL) into *lib, then resolves every symbol of
// syms into its slot. Returns 0; -1 when dlopen failed (err: dlerror's text);
// -2 when a symbol is missing (err: "symbol NAME not found" then hint). On
// -2 *lib stays set and the library loaded: a library that loaded is never
// unloaded.
__attribute__((visibility("hidden"))) int mt_dl_load(const char *path, void **lib,
                                                     const struct mt_dl_sym *syms, size_t n,
                                                     const char *hint, char *err, size_t errlen) {
	dlerror();
	*lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!*lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		*syms[i].slot = dlsym(*lib, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(err, errlen, "symbol %s not found%s", syms[i].name, hint);
			return -2;
		}
	}
	return 0;
}
*/
import "C"
