package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Header is what tools/mtgen reads from include/memtier.h.
type Header struct {
	Text     string     // the whole header
	Version  Version    // MEMTIER_VERSION_*
	Statuses []Status   // memtier_status, in header order
	Defines  []Define   // integer #defines (flags, paths, modes, targets, ...)
	Structs  []Struct   // typedef struct blocks, in header order
	Funcs    []Function // MEMTIER_API prototypes, in header order
}

// Version is MEMTIER_VERSION_MAJOR/MINOR/PATCH.
type Version struct{ Major, Minor, Patch int }

// String is "major.minor.patch".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Number is MEMTIER_VERSION_NUMBER's formula: major*10000 + minor*100 + patch.
func (v Version) Number() int { return v.Major*10000 + v.Minor*100 + v.Patch }

// Status is one memtier_status enumerator.
type Status struct {
	Name    string // MEMTIER_ERR_NOT_FOUND
	Value   int    // -2
	Text    string // memtier_strerror's text: the quoted start of the comment
	Meaning string // the rest of the comment; may be ""
	Line    int    // 1-based line in the header
}

// Short is the name without MEMTIER_ / MEMTIER_ERR_: "NOT_FOUND", "OK".
func (s Status) Short() string {
	return strings.TrimPrefix(strings.TrimPrefix(s.Name, "MEMTIER_"), "ERR_")
}

// Define is one integer #define: MEMTIER_<GROUP>_<MEMBER> <value>.
type Define struct {
	Name    string // MEMTIER_READ_ONCE
	Group   string // READ
	Member  string // ONCE
	Value   int64
	Comment string
	Testing bool // declared in the MEMTIER_TESTING_API part
	Line    int
}

// Struct is a typedef struct with a body.
type Struct struct {
	Tag    string // memtier_stats
	Alias  string // memtier_stats_t
	Fields []Field
	Line   int
}

// Field is one member of a struct.
type Field struct {
	CType   string // uint64_t
	Name    string // readv_uring_batches
	Array   string // "[256]" or ""
	Comment string
	Since   string // "0.1", or what the last "Added in/after X" comment said
	Line    int
}

// Function is one MEMTIER_API prototype and its doc comment.
type Function struct {
	Name    string
	Decl    string // the prototype without MEMTIER_API, on one line
	Doc     string // the comment block right above it, "" if none
	Section string // the banner title of the part of the header it is in
	Testing bool
	Line    int
}

// ParseError names the header line that does not have the shape mtgen reads.
type ParseError struct {
	Line int
	Text string
	Why  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("include/memtier.h:%d: %s (line: %q); tools/mtgen reads one enumerator, "+
		"#define or field per line with its comment after it", e.Line, e.Why, strings.TrimSpace(e.Text))
}

var (
	reVersion    = regexp.MustCompile(`^#define\s+MEMTIER_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)\s*$`)
	reVersionStr = regexp.MustCompile(`^#define\s+MEMTIER_VERSION_STRING\s+"([^"]*)"\s*$`)
	reEnumOpen   = regexp.MustCompile(`^typedef enum memtier_status \{\s*$`)
	reEnumClose  = regexp.MustCompile(`^\}\s*memtier_status;\s*$`)
	reEnumerator = regexp.MustCompile(`^\s+(MEMTIER_(?:OK|ERR_[A-Z0-9_]+))\s*=\s*(-?\d+)\s*,?\s*/\*(.*)\*/\s*$`)
	reContinued  = regexp.MustCompile(`^\s+/\*(.*)\*/\s*$`)
	reIntDefine  = regexp.MustCompile(`^#define\s+MEMTIER_([A-Z0-9]+)_([A-Z0-9_]+)\s+(-?\d+)u?\s*(?:/\*(.*)\*/)?\s*$`)
	reAnyDefine  = regexp.MustCompile(`^#define\s+(MEMTIER_[A-Z0-9_]+)\b`)
	reStructOpen = regexp.MustCompile(`^typedef struct (memtier_\w+) \{\s*$`)
	reStructEnd  = regexp.MustCompile(`^\}\s*(memtier_\w+_t);\s*$`)
	reField      = regexp.MustCompile(`^\s+((?:const\s+)?[a-z_0-9]+(?:\s*\*)?)\s*\b([a-z_][a-z_0-9]*)(\[\d+\])?;\s*(?:/\*(.*)\*/)?\s*$`)
	reFieldNote  = regexp.MustCompile(`^    /\*`)
	reAdded      = regexp.MustCompile(`Added (in|after) ([0-9]+(?:\.[0-9]+)*)`)
	reBanner     = regexp.MustCompile(`^/\* ={10,} \*/$`)
	reBannerText = regexp.MustCompile(`^/\* (.*?)\s*\*/$`)
	reAPI        = regexp.MustCompile(`^MEMTIER_API\s+(.*)$`)
	reTestingOn  = regexp.MustCompile(`^#ifdef\s+MEMTIER_TESTING_API\b`)
	reTestingOff = regexp.MustCompile(`^#endif\s*/\*\s*MEMTIER_TESTING_API\b`)
	reFuncName   = regexp.MustCompile(`\b(memtier_\w+)\s*\(`)
)

// defineGroups are the #define prefixes that name constants (MEMTIER_<G>_*).
// Anything else of the form MEMTIER_X_Y <int> is an error, so a new family of
// constants is added here on purpose.
var defineGroups = map[string]bool{
	"TARGET": true, "READ": true, "FRESHNESS": true, "DIRECT": true, "PATH": true,
	"GDS": true, "PREFETCH": true, "DEBUG": true, "CAP": true,
}

// nonConstantDefines are the #defines that are not integer constants.
var nonConstantDefines = map[string]bool{
	"MEMTIER_H": true, "MEMTIER_API": true, "MEMTIER_VERSION_NUMBER": true,
	"MEMTIER_VERSION_STRING": true,
}

// ParseHeader reads the header text. It fails with a *ParseError naming the
// first line inside the status enum, a struct or a #define that does not
// have the expected shape.
func ParseHeader(text string) (*Header, error) {
	h := &Header{Text: text}
	lines := strings.Split(text, "\n")
	seenVersion := map[string]bool{}
	versionString, versionLine := "", 0
	section := ""
	testing := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		n := i + 1
		fail := func(why string) error { return &ParseError{Line: n, Text: line, Why: why} }
		switch {
		case reBanner.MatchString(line) && i+2 < len(lines) && reBanner.MatchString(lines[i+2]):
			if m := reBannerText.FindStringSubmatch(lines[i+1]); m != nil {
				section = m[1]
			}
			i += 2
		case reTestingOn.MatchString(line):
			testing = true
		case reTestingOff.MatchString(line):
			testing = false
		case reVersion.MatchString(line):
			m := reVersion.FindStringSubmatch(line)
			v, _ := strconv.Atoi(m[2])
			switch m[1] {
			case "MAJOR":
				h.Version.Major = v
			case "MINOR":
				h.Version.Minor = v
			case "PATCH":
				h.Version.Patch = v
			}
			seenVersion[m[1]] = true
		case reVersionStr.MatchString(line):
			versionString, versionLine = reVersionStr.FindStringSubmatch(line)[1], n
		case reEnumOpen.MatchString(line):
			next, err := parseEnum(h, lines, i+1)
			if err != nil {
				return nil, err
			}
			i = next
		case strings.HasPrefix(line, "typedef enum"):
			return nil, fail("an enum other than 'typedef enum memtier_status {'")
		case reStructOpen.MatchString(line):
			next, err := parseStruct(h, lines, i)
			if err != nil {
				return nil, err
			}
			i = next
		case strings.HasPrefix(line, "#define MEMTIER_"):
			name := reAnyDefine.FindStringSubmatch(line)[1]
			if nonConstantDefines[name] || strings.HasPrefix(name, "MEMTIER_VERSION_") {
				continue
			}
			m := reIntDefine.FindStringSubmatch(line)
			if m == nil {
				return nil, fail("a MEMTIER_* #define that is not 'MEMTIER_<GROUP>_<NAME> <integer> /* comment */'")
			}
			if !defineGroups[m[1]] {
				return nil, fail(fmt.Sprintf("#define group MEMTIER_%s_ is not one tools/mtgen knows (add it to defineGroups)", m[1]))
			}
			v, _ := strconv.ParseInt(m[3], 10, 64)
			comment := strings.TrimSpace(m[4])
			for i+1 < len(lines) && reContinued.MatchString(lines[i+1]) && !strings.HasPrefix(lines[i+1], "/*") {
				i++
				comment = joinText(comment, reContinued.FindStringSubmatch(lines[i])[1])
			}
			h.Defines = append(h.Defines, Define{Name: "MEMTIER_" + m[1] + "_" + m[2], Group: m[1],
				Member: m[2], Value: v, Comment: comment, Testing: testing, Line: n})
		case reAPI.MatchString(line):
			decl := reAPI.FindStringSubmatch(line)[1]
			for !strings.Contains(decl, ";") {
				i++
				if i >= len(lines) {
					return nil, fail("a MEMTIER_API prototype without ';'")
				}
				decl += " " + strings.TrimSpace(lines[i])
			}
			m := reFuncName.FindStringSubmatch(decl)
			if m == nil {
				return nil, fail("a MEMTIER_API line without a memtier_* function name")
			}
			h.Funcs = append(h.Funcs, Function{Name: m[1], Decl: collapse(decl), Doc: docAbove(lines, n-1),
				Section: section, Testing: testing, Line: n})
		}
	}
	for _, k := range []string{"MAJOR", "MINOR", "PATCH"} {
		if !seenVersion[k] {
			return nil, &ParseError{Line: 1, Text: "", Why: "no '#define MEMTIER_VERSION_" + k + " <integer>'"}
		}
	}
	if versionString != h.Version.String() {
		return nil, &ParseError{Line: versionLine, Text: lines[max(versionLine-1, 0)],
			Why: fmt.Sprintf("MEMTIER_VERSION_STRING %q is not MAJOR.MINOR.PATCH (%s)", versionString, h.Version)}
	}
	if len(h.Statuses) == 0 {
		return nil, &ParseError{Line: 1, Why: "no 'typedef enum memtier_status {' block"}
	}
	return h, nil
}

// parseEnum reads the enumerators from lines[start] to the closing line and
// returns that line's index.
func parseEnum(h *Header, lines []string, start int) (int, error) {
	values := map[int]string{}
	for i := start; i < len(lines); i++ {
		line := lines[i]
		if reEnumClose.MatchString(line) {
			return i, nil
		}
		m := reEnumerator.FindStringSubmatch(line)
		if m == nil {
			return 0, &ParseError{Line: i + 1, Text: line,
				Why: `a memtier_status line that is not 'MEMTIER_ERR_NAME = -N, /* "strerror text": meaning */'`}
		}
		n := i + 1 // the enumerator's line, for messages
		comment := strings.TrimSpace(m[3])
		for i+1 < len(lines) && reContinued.MatchString(lines[i+1]) {
			i++
			comment = joinText(comment, reContinued.FindStringSubmatch(lines[i])[1])
		}
		text, meaning, ok := splitStatusComment(comment)
		if !ok {
			return 0, &ParseError{Line: n, Text: line,
				Why: `the comment of a status must start with its strerror text in double quotes`}
		}
		v, _ := strconv.Atoi(m[2])
		if prev, dup := values[v]; dup {
			return 0, &ParseError{Line: n, Text: line, Why: fmt.Sprintf("value %d is already %s", v, prev)}
		}
		values[v] = m[1]
		h.Statuses = append(h.Statuses, Status{Name: m[1], Value: v, Text: text, Meaning: meaning, Line: n})
	}
	return 0, &ParseError{Line: start, Text: lines[start-1], Why: "memtier_status has no closing '} memtier_status;'"}
}

// splitStatusComment splits `"text": meaning` (or `"text"`) into its parts.
func splitStatusComment(c string) (text, meaning string, ok bool) {
	if !strings.HasPrefix(c, `"`) {
		return "", "", false
	}
	end := strings.Index(c[1:], `"`)
	if end < 0 {
		return "", "", false
	}
	text = c[1 : 1+end]
	rest := strings.TrimSpace(c[2+end:])
	if rest != "" && !strings.HasPrefix(rest, ":") {
		return "", "", false
	}
	return text, strings.TrimSpace(strings.TrimPrefix(rest, ":")), text != ""
}

// parseStruct reads a typedef struct block starting at lines[start] and
// returns the index of its closing line. A comment line indented by four
// spaces inside the body is a note about the fields after it (its "Added in
// X" sets their Since); a comment line indented further continues the field
// above.
func parseStruct(h *Header, lines []string, start int) (int, error) {
	s := Struct{Tag: reStructOpen.FindStringSubmatch(lines[start])[1], Line: start + 1}
	since := "0.1"
	for i := start + 1; i < len(lines); i++ {
		line := lines[i]
		if m := reStructEnd.FindStringSubmatch(line); m != nil {
			s.Alias = m[1]
			if s.Alias != s.Tag+"_t" {
				return 0, &ParseError{Line: i + 1, Text: line, Why: "struct " + s.Tag + " must be typedef'd as " + s.Tag + "_t"}
			}
			h.Structs = append(h.Structs, s)
			return i, nil
		}
		if reFieldNote.MatchString(line) {
			note := line
			for !strings.Contains(lines[i], "*/") {
				i++
				if i >= len(lines) {
					return 0, &ParseError{Line: start + 1, Text: lines[start], Why: "an unterminated comment in struct " + s.Tag}
				}
				note += " " + lines[i]
			}
			if m := reAdded.FindStringSubmatch(note); m != nil {
				since = m[2]
				if m[1] == "after" {
					since = "after " + m[2]
				}
			}
			continue
		}
		if reContinued.MatchString(line) && len(s.Fields) > 0 {
			f := &s.Fields[len(s.Fields)-1]
			f.Comment = joinText(f.Comment, reContinued.FindStringSubmatch(line)[1])
			continue
		}
		m := reField.FindStringSubmatch(line)
		if m == nil {
			return 0, &ParseError{Line: i + 1, Text: line,
				Why: "a line in struct " + s.Tag + " that is not 'type name; /* comment */'"}
		}
		s.Fields = append(s.Fields, Field{CType: collapse(m[1]), Name: m[2], Array: m[3],
			Comment: strings.TrimSpace(m[4]), Since: since, Line: i + 1})
	}
	return 0, &ParseError{Line: start + 1, Text: lines[start], Why: "struct " + s.Tag + " has no closing line"}
}

// docAbove returns the /* ... */ block that ends on the line just above
// lines[idx], or "" if that line is not the end of a comment.
func docAbove(lines []string, idx int) string {
	end := idx - 1
	if end < 0 || !strings.HasSuffix(strings.TrimSpace(lines[end]), "*/") {
		return ""
	}
	begin := end
	for begin >= 0 && !strings.HasPrefix(strings.TrimSpace(lines[begin]), "/*") {
		begin--
	}
	if begin < 0 {
		return ""
	}
	return strings.Join(lines[begin:end+1], "\n")
}

// joinText appends a continued comment to a, one space between.
func joinText(a, b string) string {
	b = strings.TrimSpace(b)
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + " " + b
}

// collapse squeezes runs of white space into one space.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// Struct returns the struct of that alias, or nil.
func (h *Header) Struct(alias string) *Struct {
	for i := range h.Structs {
		if h.Structs[i].Alias == alias {
			return &h.Structs[i]
		}
	}
	return nil
}

// Group returns the #defines of one group (READ, PATH, ...) in header order.
func (h *Header) Group(g string) []Define {
	var out []Define
	for _, d := range h.Defines {
		if d.Group == g {
			out = append(out, d)
		}
	}
	return out
}
