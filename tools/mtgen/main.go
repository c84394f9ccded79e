// Command mtgen makes include/memtier.h the single source of the facts that
// other files need: it reads the header and writes the Go tables of capi,
// the header part of config.Options, memtier_strerror, the Python cdef and
// constants, the status imports of python/memtier/_errors.py, the examples'
// name lists and the README tables (see outputs).
//
// Usage, from the repository root:
//
//	go generate ./...          # runs go run ./tools/mtgen (doc.go)
//	go run ./tools/mtgen -check
//
// -check writes nothing; it exits 1 and lists every stale file and every
// function whose doc comment lacks a template part (lint.go). Exit status 2
// means the header does not have the shape mtgen reads; the message names
// the line.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// output is one generated file: its path from the repository root and a
// function of the header and the file's current content (README.md and
// python/memtier/_errors.py keep the text outside their generated blocks).
type output struct {
	path string
	gen  func(h *Header, old string) (string, error)
}

func plain(f func(*Header) string) func(*Header, string) (string, error) {
	return func(h *Header, _ string) (string, error) { return f(h), nil }
}

func noOld(f func(*Header) (string, error)) func(*Header, string) (string, error) {
	return func(h *Header, _ string) (string, error) { return f(h) }
}

// outputs lists every file mtgen writes.
var outputs = []output{
	{"capi/zz_status.c", plain(statusC)},
	{"capi/zz_status.go", plain(statusGo)},
	{"capi/zz_stats.go", noOld(statsGo)},
	{"capi/zz_config.go", noOld(configGo)},
	{"runtime/config/zz_options.go", noOld(optionsGo)},
	{"python/memtier/_cdef.py", plain(pyCdef)},
	{"python/memtier/_constants.py", noOld(pyConstants)},
	{"python/memtier/_stats.py", plain(pyStats)},
	{pyErrorsPath, pyErrors},
	{"examples/common/mt_generated.h", plain(examplesH)},
	{"README.md", func(h *Header, old string) (string, error) { return readme(old, readmeBlocks(h)) }},
}

// activeOutputs is outputs plus the ones switched on (gen_errs.go).
func activeOutputs() []output {
	out := append([]output(nil), outputs...)
	if generateErrs {
		out = append(out, output{"runtime/errs/zz_codes.go", plain(errsGo)})
	}
	return out
}

// Generate returns the content of every output for the repository at root,
// keyed by path.
func Generate(root string) (map[string][]byte, *Header, error) {
	text, err := os.ReadFile(filepath.Join(root, "include", "memtier.h"))
	if err != nil {
		return nil, nil, err
	}
	h, err := ParseHeader(string(text))
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]byte{}
	for _, o := range activeOutputs() {
		old, err := os.ReadFile(filepath.Join(root, o.path))
		if err != nil && !os.IsNotExist(err) {
			return nil, nil, err
		}
		s, err := o.gen(h, string(old))
		if err != nil {
			return nil, nil, err
		}
		data := []byte(s)
		if strings.HasSuffix(o.path, ".go") {
			// gofmt'd, so generated Go reads like the rest and gofmt -l stays quiet
			if data, err = format.Source(data); err != nil {
				return nil, nil, fmt.Errorf("%s: generated Go does not parse: %v", o.path, err)
			}
		}
		out[o.path] = data
	}
	return out, h, nil
}

// Stale lists the outputs whose file differs from what Generate makes, and
// the doc lint's findings.
func Stale(root string) ([]string, error) {
	files, h, err := Generate(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for path, want := range files {
		have, err := os.ReadFile(filepath.Join(root, path))
		if err != nil || !bytes.Equal(have, want) {
			out = append(out, path+": stale (run go generate ./...)")
		}
	}
	sort.Strings(out)
	return append(out, LintDocs(h)...), nil
}

func main() {
	check := flag.Bool("check", false, "write nothing; exit 1 listing stale files and doc lint findings")
	root := flag.String("root", ".", "repository root (holds include/memtier.h)")
	flag.Parse()
	if *check {
		stale, err := Stale(*root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mtgen:", err)
			os.Exit(2)
		}
		for _, s := range stale {
			fmt.Println(s)
		}
		if len(stale) > 0 {
			os.Exit(1)
		}
		return
	}
	files, h, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mtgen:", err)
		os.Exit(2)
	}
	for path, data := range files {
		full := filepath.Join(*root, path)
		if have, err := os.ReadFile(full); err == nil && bytes.Equal(have, data) {
			continue
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mtgen:", err)
			os.Exit(2)
		}
	}
	for _, s := range LintDocs(h) {
		fmt.Fprintln(os.Stderr, "mtgen: warning:", s)
	}
}
