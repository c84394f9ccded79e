package main

import "strings"

// Naming rule from a C snake_case name to the Go CamelCase name capi uses:
// each word is capitalised, words in goInitialisms are written in capitals
// (Go's initialism convention: IOThreads, GDSBytes, H2DBytes), and the few
// names that follow neither are listed in goNameExceptions.
var goInitialisms = map[string]string{
	"io": "IO", "gds": "GDS", "hbm": "HBM", "h2d": "H2D", "eintr": "EINTR",
	"eof": "EOF", "mib": "MiB", "gomaxprocs": "GOMAXPROCS",
}

// goNameExceptions: C name -> Go name where the Go name is not the rule's.
// Keys are "<struct or enum>.<name>" so one C word can differ per table.
var goNameExceptions = map[string]string{
	"memtier_stats.h2d_ns":                  "H2DNanos",
	"memtier_stats.staged_read_ns":          "StagedReadNanos",
	"memtier_config.direct_threshold_bytes": "DirectThreshold",
	"memtier_config.gds_threshold_bytes":    "GDSThreshold",
	"memtier_status.NOMEM":                  "NoMem",
	"memtier_status.OK":                     "OK",
}

// goName is the Go name of C name in scope (a struct tag or "memtier_status").
func goName(scope, name string) string {
	if n, ok := goNameExceptions[scope+"."+name]; ok {
		return n
	}
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(name), "_") {
		if w == "" {
			continue
		}
		if up, ok := goInitialisms[w]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}
