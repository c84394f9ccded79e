package main

import (
	"fmt"
	"strings"
)

// pyCdef writes python/memtier/_cdef.py: CDEF, the header's declarations as
// cffi reads them (see Cdef).
func pyCdef(h *Header) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", genHeader)
	b.WriteString(`"""The cffi cdef of libmemtier.so: include/memtier.h without what cffi cannot parse.

tools/mtgen strips comments, preprocessor logic, MEMTIER_API, function-like
macros and #defines that are not integer literals; everything else is the
header's text, so the binding cannot drift from it.
"""

`)
	b.WriteString("CDEF = r\"\"\"\n")
	b.WriteString(Cdef(h))
	b.WriteString("\"\"\"\n")
	return b.String()
}

// pyConstants writes python/memtier/_constants.py.
func pyConstants(h *Header) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", genHeader)
	b.WriteString(`"""Constants of include/memtier.h: version, statuses, flags, paths, modes, fields.

Imports nothing of the package (the bottom of its import graph).
"""

import enum
from typing import Dict, Tuple

`)
	v := h.Version
	fmt.Fprintf(&b, "#: MEMTIER_VERSION_MAJOR / _MINOR / _PATCH.\nVERSION_MAJOR = %d\nVERSION_MINOR = %d\nVERSION_PATCH = %d\n", v.Major, v.Minor, v.Patch)
	fmt.Fprintf(&b, "#: MEMTIER_VERSION_STRING: the version of the package and of the header.\nVERSION = %q\n", v.String())
	fmt.Fprintf(&b, "#: MEMTIER_VERSION_NUMBER: major * 10000 + minor * 100 + patch.\nVERSION_NUMBER = %d\n\n", v.Number())

	b.WriteString("# memtier_status values (MEMTIER_ prefix dropped).\n")
	for _, s := range h.Statuses {
		fmt.Fprintf(&b, "%s = %d\n", strings.TrimPrefix(s.Name, "MEMTIER_"), s.Value)
	}
	b.WriteString("\n#: status value -> short name (the enumerator without ``MEMTIER_ERR_``).\nSTATUS_NAMES: Dict[int, str] = {\n")
	for _, s := range h.Statuses {
		fmt.Fprintf(&b, "    %d: %q,\n", s.Value, s.Short())
	}
	b.WriteString("}\n\n#: status value -> memtier_strerror text.\nSTATUS_TEXTS: Dict[int, str] = {\n")
	for _, s := range h.Statuses {
		fmt.Fprintf(&b, "    %d: %s,\n", s.Value, pyString(s.Text))
	}
	b.WriteString("}\n\n")

	b.WriteString("\nclass ReadFlag(enum.IntFlag):\n    \"\"\"Per-call hints (MEMTIER_READ_*; OR them).\"\"\"\n\n")
	for _, d := range h.Group("READ") {
		fmt.Fprintf(&b, "    %s = %d\n", d.Member, d.Value)
		if d.Comment != "" {
			fmt.Fprintf(&b, "    \"\"\"%s\"\"\"\n", pyDoc(d.Comment))
		}
	}
	b.WriteString("\n\n")
	for _, d := range h.Group("READ") {
		fmt.Fprintf(&b, "READ_%s = ReadFlag.%s\n", d.Member, d.Member)
	}
	b.WriteString("\n")
	for _, g := range []string{"TARGET", "FRESHNESS", "DIRECT", "PATH", "GDS", "PREFETCH", "DEBUG", "CAP"} {
		fmt.Fprintf(&b, "# MEMTIER_%s_*\n", g)
		for _, d := range h.Group(g) {
			fmt.Fprintf(&b, "%s_%s = %d\n", g, d.Member, d.Value)
		}
		b.WriteString("\n")
	}
	modes := func(name, group, what string) {
		fmt.Fprintf(&b, "#: %s by name (lower case, as the MEMTIER_* environment takes it) -> MEMTIER_%s_*.\n%s: Dict[str, int] = {", what, group, name)
		for i, d := range h.Group(group) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %d", strings.ToLower(d.Member), d.Value)
		}
		b.WriteString("}\n")
	}
	modes("DIRECT_MODES", "DIRECT", "O_DIRECT modes")
	modes("GDS_MODES", "GDS", "GPUDirect Storage modes")
	modes("FRESHNESS_MODES", "FRESHNESS", "Freshness settings")
	b.WriteString("#: MEMTIER_PATH_* value -> memtier_path_name text.\nPATH_NAMES: Dict[int, str] = {")
	for i, d := range h.Group("PATH") {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: %q", d.Value, strings.ToLower(d.Member))
	}
	b.WriteString("}\n\n")

	cfg, st := h.Struct("memtier_config_t"), h.Struct("memtier_stats_t")
	if cfg == nil || st == nil {
		return "", fmt.Errorf("include/memtier.h: memtier_config_t or memtier_stats_t missing")
	}
	b.WriteString("#: memtier_config_t fields that are settings (not struct_size or reserved*), in order.\n")
	b.WriteString("CONFIG_FIELDS: Tuple[str, ...] = (\n")
	for _, f := range cfg.Fields {
		if configRuleOf(f) != ruleSkip {
			fmt.Fprintf(&b, "    %q,\n", f.Name)
		}
	}
	b.WriteString(")\n\n#: memtier_stats_t fields, in order.\nSTATS_FIELDS: Tuple[str, ...] = (\n")
	for _, f := range st.Fields {
		fmt.Fprintf(&b, "    %q,\n", f.Name)
	}
	b.WriteString(")\n\n#: memtier_stats_t fields that describe state, not counters (memtier_stats_reset keeps them).\n")
	b.WriteString("STATS_STATE_FIELDS: Tuple[str, ...] = (")
	for i, n := range stateFields(h) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	b.WriteString(")\n")
	return b.String(), nil
}

// pyStats writes python/memtier/_stats.py: the Stats dataclass, one int field
// per memtier_stats_t field, each documented by its header comment three
// ways: in the class docstring's "Fields" list (what help(memtier.Stats)
// shows), in Stats.FIELDS (name -> text, for code and tables) and as an
// attribute docstring (what Sphinx and IDEs show).
func pyStats(h *Header) string {
	st := h.Struct("memtier_stats_t")
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", genHeader)
	// § stands for a backquote, which a Go raw string cannot hold.
	b.WriteString(strings.ReplaceAll(`"""memtier.Stats: the counters of memtier_stats_t, one field each."""

from dataclasses import asdict, dataclass
from typing import ClassVar, Dict


@dataclass(frozen=True)
class Stats:
    """Counters of a context since it was created or :meth:§Context.reset_stats§.

    Every field of §§memtier_stats_t§§ with the same name and meaning
    (include/memtier.h; the README's stats table): §§*_bytes§§ are bytes,
    §§*_ns§§ nanoseconds, the others counts. A read larger than
    :data:§memtier.CHUNK_BYTES§ counts as one request per piece.
    :attr:§FIELDS§ maps each field name to the text below.

    Fields:
`, "§", "`"))
	for _, f := range st.Fields {
		b.WriteString(pyWrap("        "+f.Name+": ", "            ", pyDoc(fieldDoc(f)), 79))
	}
	b.WriteString("    \"\"\"\n\n")
	b.WriteString("    #: Each field's meaning, from its comment in include/memtier.h, in field order.\n")
	b.WriteString("    FIELDS: ClassVar[Dict[str, str]] = {\n")
	for _, f := range st.Fields {
		fmt.Fprintf(&b, "        %s: %s,\n", pyString(f.Name), pyString(fieldDoc(f)))
	}
	b.WriteString("    }\n\n")
	for _, f := range st.Fields {
		fmt.Fprintf(&b, "    %s: int\n", f.Name)
		fmt.Fprintf(&b, "    \"\"\"%s\"\"\"\n", pyDoc(fieldDoc(f)))
	}
	b.WriteString(`
    def as_dict(self) -> Dict[str, int]:
        """The counters as a plain dict."""
        return asdict(self)
`)
	return b.String()
}

// fieldDoc is a stats field's header comment; "(no comment)" only for a
// header the lint already refuses (LintDocs names such a field).
func fieldDoc(f Field) string {
	if f.Comment == "" {
		return "(no comment in include/memtier.h)"
	}
	return f.Comment
}

// pyWrap writes first+text wrapped at width columns, later lines starting
// with indent, one trailing newline.
func pyWrap(first, indent, text string, width int) string {
	var b strings.Builder
	line := first
	n := 0
	for _, w := range strings.Fields(text) {
		if n > 0 && len(line)+1+len(w) > width {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line, n = indent, 0
		}
		if n > 0 {
			line += " "
		}
		line += w
		n++
	}
	b.WriteString(strings.TrimRight(line, " ") + "\n")
	return b.String()
}

// stateFields are the stats fields memtier_stats_reset's doc names as kept
// (state, not counters).
func stateFields(h *Header) []string {
	var doc string
	for _, f := range h.Funcs {
		if f.Name == "memtier_stats_reset" {
			doc = f.Doc
		}
	}
	// The names listed between "except" and "which describe state".
	if i := strings.Index(doc, "except"); i >= 0 {
		doc = doc[i:]
	}
	if i := strings.Index(doc, "which"); i >= 0 {
		doc = doc[:i]
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(doc, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		words[w] = true
	}
	var out []string
	for _, f := range h.Struct("memtier_stats_t").Fields {
		if words[f.Name] {
			out = append(out, f.Name)
		}
	}
	return out
}

// pyString quotes s for Python (the texts are ASCII).
func pyString(s string) string { return fmt.Sprintf("%q", s) }

// pyDoc makes a header comment safe inside a """docstring""".
func pyDoc(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"""`, `\"\"\"`).Replace(s)
}
