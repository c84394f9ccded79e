package main

import (
	"fmt"
	"regexp"
	"strings"
)

// docSections are the parts every function's doc comment carries, in this
// order after its summary: "Returns:" with one status per line, "Thread
// safety:" and "Since:". One shape for every function lets a reader (and
// this lint) find the statuses and the threading rule of any call at the
// same place, as zstd.h does for its functions.
var docSections = []string{"Returns:", "Thread safety:", "Since:"}

// reReturnLine is the first entry under a "Returns:" line of its own: a line
// " *   X" that is not a continuation (continuations are indented two more
// spaces, " *     ").
var reReturnLine = regexp.MustCompile(`^ \*   \S`)

// reSince is the "Since:" line: a version, or "after <version>" for calls
// added after that release.
var reSince = regexp.MustCompile(`Since: (after )?[0-9]+\.[0-9]+\b`)

// LintDocs returns one message per MEMTIER_API function whose doc comment
// lacks a template part: a summary starting with the function's name, then
// "Returns:" followed by at least one entry line, "Thread safety:" and
// "Since: <version>", in that order. Every function of the header is linted,
// the testing hooks too: there is no allow-list. It also names every
// memtier_stats_t field without a comment.
func LintDocs(h *Header) []string {
	var out []string
	for _, f := range h.Funcs {
		if missing := lintDoc(f); len(missing) > 0 {
			out = append(out, fmt.Sprintf("include/memtier.h:%d: %s: doc comment lacks %s",
				f.Line, f.Name, strings.Join(missing, ", ")))
		}
	}
	// memtier.Stats documents each field with its header comment (pyStats).
	st := h.Struct("memtier_stats_t")
	if st == nil {
		return out
	}
	for _, f := range st.Fields {
		if f.Comment == "" {
			out = append(out, fmt.Sprintf("include/memtier.h:%d: memtier_stats_t.%s: field has no comment "+
				"(memtier.Stats and the README's stats table document every field from it)", f.Line, f.Name))
		}
	}
	return out
}

// lintDoc lists what f's doc comment lacks.
func lintDoc(f Function) []string {
	var missing []string
	if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(f.Doc, "/*")), f.Name+":") {
		missing = append(missing, "a summary starting \""+f.Name+":\"")
	}
	last := -1
	for _, s := range docSections {
		i := strings.Index(f.Doc, "\n * "+s)
		switch {
		case i < 0:
			missing = append(missing, s)
		case i < last:
			missing = append(missing, s+" after the part before it (order: "+strings.Join(docSections, ", ")+")")
		default:
			last = i
		}
	}
	if i := strings.Index(f.Doc, "\n * Returns:"); i >= 0 {
		rest := strings.SplitN(f.Doc[i+1:], "\n", 3)
		if strings.TrimSpace(rest[0]) != "* Returns:" || len(rest) < 2 || !reReturnLine.MatchString(rest[1]) {
			missing = append(missing, "one status per line under Returns: (\" *   MEMTIER_...\")")
		}
	}
	if strings.Contains(f.Doc, "\n * Since:") && !reSince.MatchString(f.Doc) {
		missing = append(missing, "a version after Since: (\"Since: 0.3.\" or \"Since: after 0.3.\")")
	}
	return missing
}
