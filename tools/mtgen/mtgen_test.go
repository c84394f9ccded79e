package main

import (
	"errors"
	"go/format"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// small is a header of the shape mtgen reads, with one of each part.
const small = `#define MEMTIER_VERSION_MAJOR 1
#define MEMTIER_VERSION_MINOR 2
#define MEMTIER_VERSION_PATCH 3
#define MEMTIER_VERSION_STRING "1.2.3"

/* ===================================================================== */
/* Status codes                                                           */
/* ===================================================================== */

typedef enum memtier_status {
    MEMTIER_OK = 0,             /* "success" */
    MEMTIER_ERR_NOT_FOUND = -2, /* "file not found": ENOENT, no such      */
                                /* file                                  */
    MEMTIER_ERR_IO = -5         /* "I/O error (a long     */
                                /* text)"                 */
} memtier_status;

/* memtier_strerror: text of a status.
 * Returns:
 *   static text, never NULL
 * Thread safety: safe.
 * Since: 0.1. */
MEMTIER_API const char* memtier_strerror(int status);

#define MEMTIER_READ_ONCE 1u  /* do not admit  */
                              /* into the cache */
#define MEMTIER_PATH_CACHE 0

typedef struct memtier_stats {
    uint64_t requests;         /* read requests */
    /* Added in 0.2: more. */
    uint64_t h2d_ns;           /* nanoseconds   */
                               /* of copies     */
    uint32_t reserved0;
} memtier_stats_t;

/* memtier_stats_reset: zeroes all but cache_resident_bytes, which describe state. */
MEMTIER_API int memtier_stats_reset(memtier_ctx_t* ctx,
                                    int flags);
`

func TestParseSmallHeader(t *testing.T) {
	h, err := ParseHeader(small)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != (Version{1, 2, 3}) || h.Version.Number() != 10203 {
		t.Errorf("version %+v", h.Version)
	}
	want := []Status{
		{"MEMTIER_OK", 0, "success", "", 11},
		{"MEMTIER_ERR_NOT_FOUND", -2, "file not found", "ENOENT, no such file", 12},
		{"MEMTIER_ERR_IO", -5, "I/O error (a long text)", "", 14},
	}
	if !reflect.DeepEqual(h.Statuses, want) {
		t.Errorf("statuses\n got %+v\nwant %+v", h.Statuses, want)
	}
	wantDefs := []Define{
		{Name: "MEMTIER_READ_ONCE", Group: "READ", Member: "ONCE", Value: 1, Comment: "do not admit into the cache", Line: 25},
		{Name: "MEMTIER_PATH_CACHE", Group: "PATH", Member: "CACHE", Value: 0, Line: 27},
	}
	if !reflect.DeepEqual(h.Defines, wantDefs) {
		t.Errorf("defines\n got %+v\nwant %+v", h.Defines, wantDefs)
	}
	st := h.Struct("memtier_stats_t")
	if st == nil || len(st.Fields) != 3 {
		t.Fatalf("stats struct %+v", st)
	}
	if f := st.Fields[1]; f.Name != "h2d_ns" || f.CType != "uint64_t" || f.Comment != "nanoseconds of copies" || f.Since != "0.2" {
		t.Errorf("field %+v", f)
	}
	if f := st.Fields[0]; f.Since != "0.1" || f.Comment != "read requests" {
		t.Errorf("field %+v", f)
	}
	if len(h.Funcs) != 2 || h.Funcs[1].Decl != "int memtier_stats_reset(memtier_ctx_t* ctx, int flags);" ||
		h.Funcs[0].Section != "Status codes" {
		t.Errorf("funcs %+v", h.Funcs)
	}
	if got := goName("memtier_stats", "h2d_ns"); got != "H2DNanos" {
		t.Errorf("goName exception: %s", got)
	}
	if got := goName("memtier_config", "small_io_depth"); got != "SmallIODepth" {
		t.Errorf("goName rule: %s", got)
	}
	if got := stateFields(&Header{Funcs: h.Funcs, Structs: []Struct{{Alias: "memtier_stats_t",
		Fields: []Field{{Name: "requests"}, {Name: "cache_resident_bytes"}}}}}); !reflect.DeepEqual(got, []string{"cache_resident_bytes"}) {
		t.Errorf("stateFields %v", got)
	}
}

func TestCdefStripsWhatCffiCannotRead(t *testing.T) {
	h, err := ParseHeader(small + "#define memtier_stats(ctx, st) memtier_stats_sized((ctx), (st), 8)\n" +
		"#ifdef MEMTIER_TESTING_API\n#define MEMTIER_DEBUG_PANIC_EXPORT 1 /* x */\n#endif /* MEMTIER_TESTING_API */\n")
	if err != nil {
		t.Fatal(err)
	}
	got := Cdef(h)
	for _, bad := range []string{"/*", "MEMTIER_API", "VERSION_STRING", "memtier_stats(ctx", "#ifdef", "#endif"} {
		if strings.Contains(got, bad) {
			t.Errorf("cdef holds %q:\n%s", bad, got)
		}
	}
	for _, good := range []string{
		"#define MEMTIER_VERSION_MAJOR 1\n",
		"    MEMTIER_ERR_NOT_FOUND = -2,\n    MEMTIER_ERR_IO = -5\n} memtier_status;\n",
		"const char* memtier_strerror(int status);\n",
		"#define MEMTIER_READ_ONCE 1u\n#define MEMTIER_PATH_CACHE 0\n",
		"int memtier_stats_reset(memtier_ctx_t* ctx,\n    int flags);\n",
		"#define MEMTIER_DEBUG_PANIC_EXPORT 1\n",
	} {
		if !strings.Contains(got, good) {
			t.Errorf("cdef lacks %q:\n%s", good, got)
		}
	}
}

func TestMalformedHeaderNamesTheLine(t *testing.T) {
	cases := []struct {
		name, from, to string
		line           int
		why            string
	}{
		{"enum without value", "MEMTIER_ERR_NOT_FOUND = -2,", "MEMTIER_ERR_NOT_FOUND,", 12, "memtier_status line"},
		{"enum text unquoted", `/* "file not found": ENOENT`, `/* file not found: ENOENT`, 12, "strerror text in double quotes"},
		{"duplicate value", "MEMTIER_ERR_IO = -5", "MEMTIER_ERR_IO = -2", 14, "already MEMTIER_ERR_NOT_FOUND"},
		{"struct line", "    uint32_t reserved0;", "    uint32_t reserved0", 34, "struct memtier_stats"},
		{"unknown define group", "#define MEMTIER_PATH_CACHE 0", "#define MEMTIER_COLOR_RED 0", 27, "MEMTIER_COLOR_"},
		{"define not an integer", "#define MEMTIER_PATH_CACHE 0", "#define MEMTIER_PATH_CACHE (1 << 2)", 27, "not 'MEMTIER_<GROUP>"},
		{"version string", `"1.2.3"`, `"1.2.4"`, 4, "not MAJOR.MINOR.PATCH (1.2.3)"},
	}
	for _, c := range cases {
		text := strings.Replace(small, c.from, c.to, 1)
		if text == small {
			t.Fatalf("%s: %q not in the header", c.name, c.from)
		}
		_, err := ParseHeader(text)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: err = %v, want a *ParseError", c.name, err)
			continue
		}
		if pe.Line != c.line || !strings.Contains(pe.Error(), c.why) ||
			!strings.HasPrefix(pe.Error(), "include/memtier.h:") {
			t.Errorf("%s: %v (line %d), want line %d and %q", c.name, pe, pe.Line, c.line, c.why)
		}
	}
}

func TestLintNamesFunctionsMissingSections(t *testing.T) {
	// Every function is linted, whatever section it is in: the small header's
	// memtier_stats_reset sits under "Status codes" and has a summary only.
	h, err := ParseHeader(small)
	if err != nil {
		t.Fatal(err)
	}
	got := LintDocs(h)
	want := []string{"include/memtier.h:38: memtier_stats_reset: doc comment lacks Returns:, Thread safety:, Since:",
		"include/memtier.h:34: memtier_stats_t.reserved0: field has no comment (memtier.Stats and the README's " +
			"stats table document every field from it)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lint\n got %q\nwant %q", got, want)
	}
}

// TestPyStatsDocumentsEveryField: each memtier_stats_t field's header
// comment (continuation lines joined) reaches memtier.Stats three ways: the
// class docstring's Fields list that help() shows, Stats.FIELDS and the
// attribute docstring.
func TestPyStatsDocumentsEveryField(t *testing.T) {
	h, err := ParseHeader(small)
	if err != nil {
		t.Fatal(err)
	}
	got := pyStats(h)
	for _, want := range []string{
		"    Fields:\n        requests: read requests\n        h2d_ns: nanoseconds of copies\n" +
			"        reserved0: (no comment in include/memtier.h)\n    \"\"\"\n",
		"    FIELDS: ClassVar[Dict[str, str]] = {\n        \"requests\": \"read requests\",\n" +
			"        \"h2d_ns\": \"nanoseconds of copies\",\n",
		"    requests: int\n    \"\"\"read requests\"\"\"\n    h2d_ns: int\n    \"\"\"nanoseconds of copies\"\"\"\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("pyStats lacks\n%s\ngot\n%s", want, got)
		}
	}
	if w := pyWrap("    a: ", "      ", "one two three four", 16); w != "    a: one two\n      three four\n" {
		t.Errorf("pyWrap = %q", w)
	}
}

func TestLintChecksEachTemplatePart(t *testing.T) {
	good := "/* memtier_x: does x.\n * Returns:\n *   MEMTIER_OK\n *   MEMTIER_ERR_CLOSED (closed ctx)\n" +
		" * Thread safety: safe.\n * Since: after 0.3. */"
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"complete", good, nil},
		{"wrong summary", strings.Replace(good, "memtier_x:", "memtier_y:", 1),
			[]string{`a summary starting "memtier_x:"`}},
		{"statuses on the Returns line", strings.Replace(good, "Returns:\n *   MEMTIER_OK", "Returns: MEMTIER_OK", 1),
			[]string{`one status per line under Returns: (" *   MEMTIER_...")`}},
		{"continuation only", strings.Replace(good, "Returns:\n *   MEMTIER_OK", "Returns:\n *     MEMTIER_OK", 1),
			[]string{`one status per line under Returns: (" *   MEMTIER_...")`}},
		{"no version", strings.Replace(good, "Since: after 0.3.", "Since: soon.", 1),
			[]string{`a version after Since: ("Since: 0.3." or "Since: after 0.3.")`}},
		{"order", strings.Replace(strings.Replace(good, " * Thread safety: safe.\n", "", 1),
			" * Since: after 0.3. */", " * Since: 0.1.\n * Thread safety: safe. */", 1),
			[]string{"Since: after the part before it (order: Returns:, Thread safety:, Since:)"}},
	}
	for _, c := range cases {
		got := lintDoc(Function{Name: "memtier_x", Doc: c.doc})
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReadmeKeepsTextOutsideTheMarkers(t *testing.T) {
	old := "intro\n" + beginMarker("statuses") + "\nold table\n" + endMarker("statuses") + "\nmiddle\n" +
		beginMarker("config") + "\n" + endMarker("config") + "\n" + beginMarker("stats") + "\n" + endMarker("stats") + "\nend\n"
	got, err := readme(old, map[string]string{"statuses": "S\n", "config": "C\n", "stats": "T\n"})
	if err != nil {
		t.Fatal(err)
	}
	want := "intro\n" + beginMarker("statuses") + "\n<!-- " + genHeader + " -->\n\nS\n\n" + endMarker("statuses") +
		"\nmiddle\n" + beginMarker("config") + "\n<!-- " + genHeader + " -->\n\nC\n\n" + endMarker("config") + "\n" +
		beginMarker("stats") + "\n<!-- " + genHeader + " -->\n\nT\n\n" + endMarker("stats") + "\nend\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := readme("no markers", nil); err == nil || !strings.Contains(err.Error(), "BEGIN GENERATED by tools/mtgen: statuses") {
		t.Errorf("missing markers: %v", err)
	}
}

// TestGeneratedFilesUpToDate is the check `go test ./...` runs: every file
// tools/mtgen writes must equal what the header gives now, and the linted
// header sections must follow the doc template.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "include", "memtier.h")); err != nil {
		t.Skip("not in a MemTier checkout")
	}
	stale, err := Stale(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Error(s)
	}
	if len(stale) > 0 {
		t.Log("run `go generate ./...` from the repository root")
	}
}

// configHeader is small plus a memtier_config_t with one field of each
// kind HeaderOptions maps: skipped (struct_size, reserved), a count, a bool
// by configRules, a size with a continued comment, a goName exception, an
// "Added in" note, a mode and an int64_t.
const configHeader = small + `
typedef struct memtier_config {
    uint32_t struct_size;            /* sizeof(memtier_config_t)      */
    uint32_t io_threads;             /* I/O worker goroutines         */
    int32_t cache_enabled;           /* 1 (default) or 0              */
    uint64_t cache_bytes;            /* DRAM cache budget; a comment  */
                                     /* long enough to be wrapped at  */
                                     /* eighty columns by the writer  */
    uint64_t direct_threshold_bytes; /* O_DIRECT from this size       */
    uint32_t reserved0;
    /* Added in 0.2. */
    int32_t gds_mode;                /* MEMTIER_GDS_*                 */
    int64_t deadline_ns;
} memtier_config_t;
`

// TestOptionsGoMirrorsTheConfigStruct: runtime/config/zz_options.go has one
// field per setting of memtier_config_t, named by goName, typed from the C
// type and configRules, documented by the header comment (wrapped), with the
// header's "Added in" notes, gofmt'd as Generate writes it.
func TestOptionsGoMirrorsTheConfigStruct(t *testing.T) {
	h, err := ParseHeader(configHeader)
	if err != nil {
		t.Fatal(err)
	}
	src, err := optionsGo(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := format.Source([]byte(src))
	if err != nil {
		t.Fatalf("generated Go does not parse: %v\n%s", err, src)
	}
	if string(got) != src {
		t.Errorf("optionsGo output is not gofmt'd:\n%s", src)
	}
	want := "type HeaderOptions struct {\n" +
		"\t// io_threads: I/O worker goroutines\n\tIOThreads int\n\n" +
		"\t// cache_enabled: 1 (default) or 0\n\tCacheEnabled bool\n\n" +
		"\t// cache_bytes: DRAM cache budget; a comment long enough to be wrapped at\n" +
		"\t// eighty columns by the writer\n\tCacheBytes uint64\n\n" +
		"\t// direct_threshold_bytes: O_DIRECT from this size\n\tDirectThreshold uint64\n\n" +
		"\t// Added in 0.2.\n\n" +
		"\t// gds_mode: MEMTIER_GDS_*\n\tGDSMode int\n\n" +
		"\t// deadline_ns: (no comment in include/memtier.h)\n\tDeadlineNs int64\n}\n"
	if !strings.HasPrefix(src, "// "+genHeader+"\n\npackage config\n\n") || !strings.HasSuffix(src, want) {
		t.Errorf("optionsGo\n got %s\nwant suffix\n%s", src, want)
	}
	bad, err := ParseHeader(strings.Replace(configHeader, "int64_t deadline_ns;", "double ratio;", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := optionsGo(bad); err == nil || !strings.Contains(err.Error(), "field ratio has type double") {
		t.Errorf("a double field: err = %v, want the cgoType error naming it", err)
	}
	if _, err := optionsGo(&Header{}); err == nil || err.Error() != "include/memtier.h: no memtier_config_t" {
		t.Errorf("no config struct: err = %v", err)
	}
}

// TestPyErrorsReexportsEveryStatus: the generated block of _errors.py
// imports OK, every status and the two tables from _constants by name
// (mypy --strict sees each), sorted; the hand-written text around the block
// is kept; a file without the markers is an error naming them.
func TestPyErrorsReexportsEveryStatus(t *testing.T) {
	h, err := ParseHeader(small)
	if err != nil {
		t.Fatal(err)
	}
	old := "\"\"\"doc\"\"\"\nimport x\n" + pyBegin("statuses") + "\nfrom ._constants import OLD\n" +
		pyEnd("statuses") + "\n\nclass A: ...\n"
	got, err := pyErrors(h, old)
	if err != nil {
		t.Fatal(err)
	}
	want := "\"\"\"doc\"\"\"\nimport x\n" + pyBegin("statuses") + "\n" + pyBlockNote + "\n" +
		"from ._constants import (  # noqa: F401  (re-exported: other modules use _errors.ERR_*)\n" +
		"    ERR_IO as ERR_IO,\n    ERR_NOT_FOUND as ERR_NOT_FOUND,\n    OK as OK,\n" +
		"    STATUS_NAMES as STATUS_NAMES,\n    STATUS_TEXTS as STATUS_TEXTS,\n)\n" +
		pyEnd("statuses") + "\n\nclass A: ...\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if again, _ := pyErrors(h, got); again != got {
		t.Errorf("a second run changed the file:\n%s", again)
	}
	if _, err := pyErrors(h, "no markers\n"); err == nil || err.Error() != "python/memtier/_errors.py: need one "+
		"\"# BEGIN GENERATED by tools/mtgen: statuses\" line and, after it, one \"# END GENERATED by tools/mtgen: statuses\" line" {
		t.Errorf("missing markers: %v", err)
	}
}
