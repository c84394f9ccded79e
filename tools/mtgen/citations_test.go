package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// reMissingDoc matches the names of the team documents that live outside the
// repository: a comment that cites one cannot be followed by a reader of a
// clone. Comments say the reason themselves, or cite a file of the repository
// or a public URL.
var reMissingDoc = regexp.MustCompile(`\b(DESIGN|SEED|STYLE|REVIEW|REMOTE|PEERS_CPU|GO_CSHARED|GPU_REVIEW|FIELD_CASES)\.md\b|\b(GO_CSHARED|FIELD_CASES|GPU_REVIEW|PEERS_CPU)\b|\.\./shared/`)

// reFieldCase is a field case id (B05, N06): each must be a row of
// tests/field_cases.md.
var reFieldCase = regexp.MustCompile(`\b[BN][0-9]{2}\b`)

// fieldCasesDoc lists what the field case ids mean.
const fieldCasesDoc = "tests/field_cases.md"

// textFile reports whether a tracked file is source, script or docs (what
// may carry a comment); data files (test inputs, lock files) are not read.
func textFile(path string) bool {
	if strings.Contains(path, "/testdata/") {
		return false
	}
	base := filepath.Base(path)
	switch base {
	case "CMakeLists.txt", "MANIFEST.in", "Makefile":
		return true
	}
	switch filepath.Ext(base) {
	case ".go", ".c", ".h", ".cpp", ".py", ".pyi", ".sh", ".cmake", ".txt", ".md", ".toml", ".cfg", ".map", ".in", ".yml", ".yaml":
		return true
	}
	return false
}

// trackedFiles lists the repository's tracked files (git ls-files), paths
// relative to root.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout (the check reads git's list of tracked files)")
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" && textFile(f) {
			files = append(files, f)
		}
	}
	return files
}

// TestNoCitationsOfMissingDocuments: no tracked source, script or doc file
// names a document the repository does not hold, and every field case id
// a file names is explained in tests/field_cases.md.
func TestNoCitationsOfMissingDocuments(t *testing.T) {
	root := filepath.Join("..", "..")
	self := "tools/mtgen/citations_test.go"
	doc, err := os.ReadFile(filepath.Join(root, fieldCasesDoc))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if f := strings.Split(line, "|"); len(f) > 2 && reFieldCase.MatchString(strings.TrimSpace(f[1])) {
			known[strings.TrimSpace(f[1])] = true
		}
	}
	unknown := map[string][]string{}
	for _, f := range trackedFiles(t, root) {
		if f == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := reMissingDoc.FindString(line); m != "" {
				t.Errorf("%s:%d: cites %q, which the repository does not contain: say the reason in the "+
					"comment, or cite a file of the repository or a public URL", f, i+1, m)
			}
			if f == fieldCasesDoc {
				continue
			}
			for _, id := range reFieldCase.FindAllString(line, -1) {
				if !known[id] {
					unknown[id] = append(unknown[id], f)
				}
			}
		}
	}
	ids := make([]string, 0, len(unknown))
	for id := range unknown {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t.Errorf("field case %s (named in %s) has no row in %s", id, strings.Join(unknown[id], ", "), fieldCasesDoc)
	}
}

func TestMissingDocumentPattern(t *testing.T) {
	for _, s := range []string{"see DESIGN.md", "(GO_CSHARED L2)", "FIELD_CASES B20", "../shared/x", "shared PEERS_CPU.md"} {
		if !reMissingDoc.MatchString(s) {
			t.Errorf("%q not matched", s)
		}
	}
	for _, s := range []string{"README.md", "X_REMOTE_PART_BYTES", "tests/field_cases.md", "shared files", "CAP_REMOTE"} {
		if reMissingDoc.MatchString(s) {
			t.Errorf("%q matched", s)
		}
	}
}
