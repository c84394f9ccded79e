package main

import (
	"fmt"
	"strings"
)

// docSections are the parts every function's doc comment carries, after its
// one-line summary: "Returns:" with one status per line, "Thread safety:"
// and "Since:" (STYLE.md section 2.6).
var docSections = []string{"Returns:", "Thread safety:", "Since:"}

// lintedSections are the header parts (banner titles) whose functions
// already follow the template; the lint covers them, so a function added
// there without a section fails the check. The rest of the header is
// listed here as it is converted.
var lintedSections = map[string]bool{
	"Status codes":                  true,
	"Cache control and path policy": true,
	"safetensors files":             true,
	"Statistics":                    true,
	"End of the stable API. Testing hooks (not for production use)": true,
}

// LintDocs returns one message per function of a linted section whose doc
// comment lacks a template part, or whose summary does not start with the
// function's name.
func LintDocs(h *Header) []string {
	var out []string
	for _, f := range h.Funcs {
		if !lintedSections[f.Section] {
			continue
		}
		var missing []string
		if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(f.Doc, "/*")), f.Name+":") {
			missing = append(missing, "a summary starting \""+f.Name+":\"")
		}
		for _, s := range docSections {
			if !strings.Contains(f.Doc, s) {
				missing = append(missing, s)
			}
		}
		if i := strings.Index(f.Doc, "Returns:"); i >= 0 && !strings.Contains(f.Doc[i:], "\n *   ") {
			missing = append(missing, "one status per line under Returns: (\" *   MEMTIER_...\")")
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("include/memtier.h:%d: %s: doc comment lacks %s",
				f.Line, f.Name, strings.Join(missing, ", ")))
		}
	}
	return out
}
