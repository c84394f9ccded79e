package main

import (
	"fmt"
	"strings"
)

// optionsGo writes runtime/config/zz_options.go: HeaderOptions, one Go field
// per setting of memtier_config_t (every field configRuleOf does not skip),
// named by goName, typed by optionsType and documented by the header
// field's comment. config.Options embeds it, so a new header field is a new
// Options field with no hand edit, and capi/zz_config.go's copies of it
// compile. The Go-only settings stay hand-written in runtime/config/config.go.
func optionsGo(h *Header) (string, error) {
	cs := h.Struct("memtier_config_t")
	if cs == nil {
		return "", fmt.Errorf("include/memtier.h: no memtier_config_t")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// %s\n\npackage config\n\n", genHeader)
	b.WriteString("// HeaderOptions holds the settings of include/memtier.h's memtier_config_t:\n")
	b.WriteString("// one field per C field but struct_size and reserved ones, in header order\n")
	b.WriteString("// (the C field x_y is the Go field XY, tools/mtgen/names.go), each documented\n")
	b.WriteString("// by the header's comment. Options embeds it; capi/zz_config.go copies it to\n")
	b.WriteString("// and from C. Sizes are bytes. A field that a C caller leaves 0 keeps its\n")
	b.WriteString("// default where the header says so (capi's configFromC); Defaults sets the\n")
	b.WriteString("// defaults, and a field missing there defaults to Go's zero value.\n")
	b.WriteString("type HeaderOptions struct {\n")
	since := ""
	for _, f := range cs.Fields {
		if configRuleOf(f) == ruleSkip {
			continue
		}
		t, err := optionsType(f)
		if err != nil {
			return "", err
		}
		if since != "" && f.Since != since {
			// the header's "Added in X" notes, as a C reader sees them
			if v, ok := strings.CutPrefix(f.Since, "after "); ok {
				fmt.Fprintf(&b, "\n\t// Added after %s.\n", v)
			} else {
				fmt.Fprintf(&b, "\n\t// Added in %s.\n", f.Since)
			}
		}
		comment := f.Comment
		if comment == "" {
			comment = "(no comment in include/memtier.h)"
		}
		if since != "" {
			b.WriteString("\n") // a blank line between documented fields, as gofmt'd structs have
		}
		b.WriteString(pyWrap("\t// "+f.Name+": ", "\t// ", comment, 80))
		fmt.Fprintf(&b, "\t%s %s\n", goName(cs.Tag, f.Name), t)
		since = f.Since
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// optionsType is the Go type of a memtier_config_t setting in HeaderOptions:
// bool for a ruleBool field, int for the 32-bit counts and modes (Go code
// compares and indexes with them), uint64 for sizes, int64 for int64_t.
func optionsType(f Field) (string, error) {
	if configRuleOf(f) == ruleBool {
		return "bool", nil
	}
	switch f.CType {
	case "uint32_t", "int32_t":
		return "int", nil
	case "uint64_t":
		return "uint64", nil
	case "int64_t":
		return "int64", nil
	}
	_, err := cgoType(f)
	return "", err
}
