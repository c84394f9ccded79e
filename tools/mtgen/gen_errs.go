package main

import (
	"fmt"
	"strings"
)

// generateErrs turns on runtime/errs/zz_codes.go, the Go status codes of
// package errs (on: errs.go holds no copy of them).
var generateErrs = true

// errsGo writes runtime/errs/zz_codes.go: one Code constant per status (Go
// name by goName), minCode, and the names String uses.
func errsGo(h *Header) string {
	var b strings.Builder
	fmt.Fprintf(&b, "// %s\n\npackage errs\n\n", genHeader)
	b.WriteString("// Status codes: the values of include/memtier.h's memtier_status, pinned\n")
	b.WriteString("// there (append only, never renumber).\nconst (\n")
	low := 0
	for _, s := range h.Statuses {
		fmt.Fprintf(&b, "\t%s Code = %d // %s\n", goName("memtier_status", s.Short()), s.Value, s.Text)
		low = min(low, s.Value)
	}
	fmt.Fprintf(&b, "\tminCode Code = %d\n)\n\n", low)
	b.WriteString("// names holds each code's name without the MEMTIER_ERR_ prefix.\nvar names = map[Code]string{\n")
	for _, s := range h.Statuses {
		fmt.Fprintf(&b, "\t%s: %q,\n", goName("memtier_status", s.Short()), s.Short())
	}
	b.WriteString("}\n")
	return b.String()
}
