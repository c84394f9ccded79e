package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/memtier/memtier/runtime/errs"
)

func TestClosestKnownName(t *testing.T) {
	for in, want := range map[string]string{
		"MEMTIER_CACHE_BYTE":      "MEMTIER_CACHE_BYTES",
		"MEMTIER_IOTHREADS":       "MEMTIER_IO_THREADS",
		"MEMTIER_FRESHNES":        "MEMTIER_FRESHNESS",
		"MEMTIER_MAX_OPEN_FILE":   "MEMTIER_MAX_OPEN_FILES",
		"memtier_direct":          "MEMTIER_DIRECT",
		"MEMTIER_IOURING":         "MEMTIER_IO_URING",
		"MEMTIER_CUDA_LIB":        "MEMTIER_CUDA_LIBRARY",
		"MEMTIER_HBM_CACHE_BYTE":  "MEMTIER_HBM_CACHE_BYTES",
		"MEMTIER_PREFETCH_TO_HMB": "MEMTIER_PREFETCH_TO_HBM",
	} {
		if got := Closest(in); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ABC", "ABC", 0}, {"AB", "BA", 2}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestUnknownNames(t *testing.T) {
	env := []string{
		"PATH=/bin", "MEMTIER_CACHE_BYTES=8M", "MEMTIER_CACHE_BYTE=1G", "MEMTIER_IOTHREADS=2",
		"MEMTIER_CACHE_BYTE=2G", "MEMTIER_LIBRARY=x.so", "MEMTIER_IO_URING=0", "MEMTIER_=1",
		"XMEMTIER_FOO=1", "MEMTIER_NOVALUE",
	}
	got := UnknownNames(env)
	want := []string{"MEMTIER_", "MEMTIER_CACHE_BYTE", "MEMTIER_IOTHREADS", "MEMTIER_NOVALUE"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("UnknownNames = %q, want %q", got, want)
	}
	if w := UnknownWarning("MEMTIER_CACHE_BYTE"); w !=
		"unknown environment variable MEMTIER_CACHE_BYTE (did you mean MEMTIER_CACHE_BYTES?); it is ignored" {
		t.Fatalf("UnknownWarning = %q", w)
	}
	if UnknownNames(nil) != nil {
		t.Fatal("UnknownNames(nil) is not empty")
	}
}

func TestKnownNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Vars {
		if seen[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		seen[v.Name] = true
	}
	for _, v := range OtherVars {
		if seen[v.Name] || !strings.HasPrefix(v.Name, "MEMTIER_") || v.ReadBy == "" {
			t.Errorf("OtherVars entry %+v: duplicate, bad name or no reader", v)
		}
		seen[v.Name] = true
	}
}

// notEnvironment are MEMTIER_* names that look like variable assignments in
// the sources but are CMake options and compile definitions, never read from
// the environment.
var notEnvironment = map[string]bool{
	"MEMTIER_ENABLE_CUDA": true, "MEMTIER_ENABLE_GDS": true, "MEMTIER_BUILD_TESTS": true,
	"MEMTIER_BUILD_EXAMPLES": true, "MEMTIER_PYTHON_TESTS": true,
	"MEMTIER_TEST_CUDA_BUILD": true, "MEMTIER_TEST_GDS_BUILD": true, "MEMTIER_H_SHA256_16": true,
	"MEMTIER_H":           true, // include guard, listed in python/memtier/_ffi.py's header check
	"MEMTIER_TESTING_API": true, // compile definition: the header's testing hooks
}

// envRead matches the ways the project's sources read or set a MEMTIER_*
// environment variable: Go and C getenv calls, Python os.environ and
// monkeypatch, string constants naming one ("MEMTIER_X" and "MEMTIER_X=..."
// in Go and Python), shell ${MEMTIER_X} and MEMTIER_X=value. In CMake files
// ${MEMTIER_X} is a CMake variable, so only MEMTIER_X=value (ENVIRONMENT
// entries) counts there: cmakeEnv.
var (
	envRead  = regexp.MustCompile(`(?:getenv\(|Getenv\(|LookupEnv\(|environ\.get\(|environ\[|setenv\(|delenv\(|\$\{?|["'\s(,]|^)(MEMTIER_[A-Z0-9_]+)(?:["']|=[^=]|\}|:-)`)
	cmakeEnv = regexp.MustCompile(`(?:["'\s]|^)(MEMTIER_[A-Z0-9_]+)=`)
)

// TestEverySourceReadsKnownNames: each MEMTIER_* variable the sources read
// (Go, C, Python, shell, CMake) must be Known, so that setting it never draws
// the unknown-variable warning, and a new variable cannot be added without a
// line in Vars or OtherVars.
func TestEverySourceReadsKnownNames(t *testing.T) {
	root := "../.."
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("repository root not found")
	}
	unknown := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "build") ||
				name == "bench_report" || name == "memtier_experiments" || name == "_lib" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".go", ".c", ".h", ".py", ".sh", ".cmake", ".txt":
		default:
			return nil
		}
		if name == "env_test.go" && filepath.Base(filepath.Dir(p)) == "config" {
			return nil // this file spells names wrong on purpose
		}
		re := envRead
		if name == "CMakeLists.txt" || filepath.Ext(name) == ".cmake" {
			re = cmakeEnv
		} else if filepath.Ext(name) == ".txt" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "#define MEMTIER_") || strings.Contains(line, "#ifndef MEMTIER_") ||
				strings.Contains(line, "misspelled on purpose") { // tests of the unknown-name warning
				continue
			}
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				n := m[1]
				if !Known(n) && !notEnvironment[n] && !isHeaderConstant(n) {
					unknown[n] = append(unknown[n], p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range unknown {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("%s is read or set in %v but is in neither Vars nor OtherVars (runtime/config)", n, unknown[n])
	}
}

// isHeaderConstant reports whether n is a constant of include/memtier.h
// (status codes, flags, targets), which tests pass around as strings.
func isHeaderConstant(n string) bool {
	for _, p := range []string{"MEMTIER_ERR_", "MEMTIER_READ_", "MEMTIER_TARGET_", "MEMTIER_PATH_",
		"MEMTIER_DIRECT_", "MEMTIER_GDS_AUTO", "MEMTIER_GDS_OFF", "MEMTIER_GDS_REQUIRED", "MEMTIER_FRESHNESS_STRICT",
		"MEMTIER_FRESHNESS_OPEN", "MEMTIER_FRESHNESS_INTERVAL", "MEMTIER_PREFETCH_TO_DRAM", "MEMTIER_DEBUG_",
		"MEMTIER_VERSION", "MEMTIER_OK", "MEMTIER_API"} {
		if strings.HasPrefix(n, p) && !Known(n) {
			return true
		}
	}
	return false
}

func TestSizeAndBoolErrorsSayWhatIsAccepted(t *testing.T) {
	if _, err := ParseSize("2GB"); err == nil || !strings.Contains(err.Error(), "KB/MB/GB are refused") ||
		!strings.Contains(err.Error(), "GiB") {
		t.Fatalf("ParseSize(2GB): %v", err)
	}
	if n, err := ParseSize("2GiB"); err != nil || n != 2<<30 {
		t.Fatalf("ParseSize(2GiB) = %d, %v", n, err)
	}
	if _, err := parseBool("maybe"); err == nil || err.Error() != "not a boolean (1/0, true/false, yes/no, on/off)" {
		t.Fatalf("parseBool(maybe): %v", err)
	}
}

// Out-of-range sizes in the environment are FORMAT naming the variable, as
// every other bad MEMTIER_* value is (a fresh user got INVALID_ARG naming
// the config field for these two).
func TestEnvSizeOutOfRangeIsFormat(t *testing.T) {
	for _, tc := range []struct{ name, val, want string }{
		{"MEMTIER_CACHE_BLOCK_BYTES", "3K", `MEMTIER_CACHE_BLOCK_BYTES="3K": not a power of two from 4K to 64M`},
		{"MEMTIER_CACHE_BLOCK_BYTES", "128M", `MEMTIER_CACHE_BLOCK_BYTES="128M": not a power of two from 4K to 64M`},
		{"MEMTIER_TASK_BYTES", "1K", `MEMTIER_TASK_BYTES="1K": not a byte size from 64K to 1G`},
	} {
		o := Defaults()
		err := o.FromEnv(func(k string) (string, bool) { return tc.val, k == tc.name })
		if errs.CodeOf(err) != errs.Format || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want Format with %q", tc.name, tc.val, err, tc.want)
		}
	}
	o := Defaults()
	if err := o.FromEnv(func(k string) (string, bool) { return "8M", k == "MEMTIER_CACHE_BLOCK_BYTES" }); err != nil || o.CacheBlockBytes != 8*MiB {
		t.Errorf("8M: %v, block %d", err, o.CacheBlockBytes)
	}
}
