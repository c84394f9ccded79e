package main

/*
#include <stddef.h>
#include <string.h>
extern char** environ;
// mt_environ_memtier returns the i-th entry of the live C environment if it
// starts with MEMTIER_, "" if it does not, and NULL past the end (environ
// itself is NULL after clearenv).
static const char* mt_environ_memtier(size_t i) {
    if (environ == NULL || environ[i] == NULL) return NULL;
    return strncmp(environ[i], "MEMTIER_", 8) == 0 ? environ[i] : "";
}
*/
import "C"

import (
	"os"
	"strings"
	"sync"

	"github.com/memtier/memtier/runtime/config"
)

// warnedEnv holds the unknown MEMTIER_* names already warned about: each one
// is reported once per process, however many contexts are created.
var warnedEnv sync.Map

// memtierEnviron returns the MEMTIER_* entries of the live C environment,
// which sees variables set after the library loaded (os.Environ does not in a
// c-shared library; see cgetenv).
func memtierEnviron() []string {
	var out []string
	for i := 0; ; i++ {
		p := C.mt_environ_memtier(C.size_t(i))
		if p == nil {
			return out
		}
		if *p != 0 {
			out = append(out, C.GoString(p))
		}
	}
}

// warnUnknownEnv writes one line to stderr for each MEMTIER_* variable in the
// environment that no part of MemTier reads, naming the closest known name
// (runtime/config keeps the list). A misspelled variable would otherwise be
// ignored without a word. The library has no other warning channel; stderr is
// what a C host and a Python host both show.
func warnUnknownEnv() {
	var b strings.Builder
	for _, name := range config.UnknownNames(memtierEnviron()) {
		if _, seen := warnedEnv.LoadOrStore(name, true); !seen {
			b.WriteString("memtier: warning: " + config.UnknownWarning(name) + "\n")
		}
	}
	if b.Len() > 0 {
		os.Stderr.WriteString(b.String())
	}
}
