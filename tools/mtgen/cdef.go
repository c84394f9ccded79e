package main

import (
	"regexp"
	"strings"
)

var (
	reComment     = regexp.MustCompile(`(?s)/\*.*?\*/`)
	reLineComment = regexp.MustCompile(`//[^\n]*`)
	reIntLiteral  = regexp.MustCompile(`^-?\d+u?$`)
	reDefineLine  = regexp.MustCompile(`^#define\s+(\w+)(\(|\s+|$)(.*)$`)
)

// Cdef is the text cffi parses: the header's declarations as they are, minus
// what cffi's C parser cannot read or does not need: comments, the include
// guard and #include lines, #if/#ifdef/#endif (the testing part is kept:
// its symbols are exported and the Python tests call them), extern "C",
// MEMTIER_API, function-like macros (memtier_stats is a real function
// too) and #defines whose value is not an integer literal (cffi accepts
// only those; the version string and number are in _constants.py).
func Cdef(h *Header) string {
	// Comments become blank text with their newlines kept, so that line i of
	// text is line i of the header: a line that only a comment filled is
	// then dropped instead of leaving a blank line in the cdef.
	text := reComment.ReplaceAllStringFunc(h.Text, func(c string) string {
		return " " + strings.Repeat("\n", strings.Count(c, "\n"))
	})
	text = reLineComment.ReplaceAllString(text, "")
	orig := strings.Split(h.Text, "\n")
	var out []string
	depth := 0         // inside #ifdef __cplusplus blocks, which hold only extern "C" { / }
	continued := false // the line before ended with a backslash
	for n, line := range strings.Split(text, "\n") {
		if continued {
			continued = strings.HasSuffix(strings.TrimSpace(line), "\\")
			continue
		}
		continued = strings.HasSuffix(strings.TrimSpace(line), "\\")
		if strings.TrimSpace(line) == "" && strings.TrimSpace(orig[n]) != "" {
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "#ifdef __cplusplus") || strings.HasPrefix(t, "#if defined(__GNUC__)"):
			depth++
			continue
		case depth > 0:
			if strings.HasPrefix(t, "#endif") {
				depth--
			}
			continue
		case strings.HasPrefix(t, "#define"):
			m := reDefineLine.FindStringSubmatch(t)
			if m == nil || m[2] == "(" || !reIntLiteral.MatchString(strings.TrimSpace(m[3])) {
				continue
			}
			t = "#define " + m[1] + " " + strings.TrimSpace(m[3])
		case strings.HasPrefix(t, "#"):
			continue
		}
		t = strings.TrimPrefix(t, "MEMTIER_API ")
		if strings.HasPrefix(line, "    ") && t != "" && !strings.HasPrefix(t, "#") {
			t = "    " + collapse(t) // struct and enum members keep their indent
		} else if !strings.HasPrefix(t, "#") {
			t = collapse(t)
		}
		if t == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, t)
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n") + "\n"
}
