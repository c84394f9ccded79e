package config

import (
	"sort"
	"strings"
)

// OtherVar is a MEMTIER_* environment variable read outside Options: by the
// GPU loader, the Python package, the build, or the project's scripts and
// tests. Listing them here keeps every MEMTIER_* name the project reads in one
// place (Vars and OtherVars), so a misspelled one can be told apart from a
// real one; env_test.go fails when a source reads a name missing here.
type OtherVar struct {
	Name   string // e.g. "MEMTIER_CUDA_LIBRARY"
	ReadBy string // who reads it, for the reader of this list
}

// OtherVars lists the MEMTIER_* variables that are not Options.
var OtherVars = []OtherVar{
	{"MEMTIER_CUDA_LIBRARY", "gpu: libcuda to dlopen"},
	{"MEMTIER_CUFILE_LIBRARY", "gpu: libcufile to dlopen"},
	{"MEMTIER_LIBRARY", "python/memtier/_ffi.py: libmemtier.so to load"},
	{"MEMTIER_PY_FORCE_NO_TORCH", "python/memtier/_dtypes.py: act as if torch were not installed"},
	{"MEMTIER_PYTHON_FAST", "python/memtier/_fastpath.py: 0 turns the compiled fast path (memtier._fast) off: cffi ABI mode only"},
	{"MEMTIER_GO", "setup.py: the go command"},
	{"MEMTIER_PREBUILT_LIBRARY", "setup.py: package this libmemtier.so instead of building"},
	{"MEMTIER_EXPERIMENT_DIR", "scripts/run_main.sh, examples: experiment file directory"},
	{"MEMTIER_MAIN_FILE", "scripts/run_main.sh: experiment file name"},
	{"MEMTIER_MAIN_SIZE", "scripts/run_main.sh: experiment file size"},
	{"MEMTIER_PYTHON", "scripts/python_env.sh: interpreter that makes the venv"},
	{"MEMTIER_VENV", "scripts/python_env.sh: the test venv"},
	{"MEMTIER_CACHE_DIR", "scripts: download cache directory"},
	{"MEMTIER_BUILD_DIR", "tests/python: the CMake build (ctest sets it)"},
	{"MEMTIER_GPU_DOUBLE_DIR", "Go tests: the GPU test double"},
	{"MEMTIER_GPU_TEST_REAL", "Go tests: run GPU tests on a real GPU"},
	{"MEMTIER_REQUIRE_GPU", "Go tests: fail instead of skipping GPU tests"},
	{"MEMTIER_SLOW_TESTS", "Go tests: run the slow ones"},
	{"MEMTIER_UPDATE_SAFETENSORS_CORPUS", "Go tests: rewrite the safetensors corpus"},
	{"MEMTIER_FILES_TEST_CHILD", "runtime/files tests: child process mode"},
	{"MEMTIER_FILES_TEST_DIR", "runtime/files tests: child process input directory"},
	{"MEMTIER_RAMFS_CHILD", "runtime/engine tests: child process on a private ramfs (racy_test.go)"},
	{"MEMTIER_LOG", "runtime/logx and python/memtier/_log.py: off (default), warn, info or debug: policy decisions and fallbacks on stderr"},
	{"MEMTIER_PATCH_SAFETENSORS", "python/memtier/integrations/_patch.py: 1 routes safetensors' load_file/safe_open/load_model through MemTier from import memtier on"},
	{"MEMTIER_CGROUP_ROOT", "runtime/config (tests): a fake tree read instead of / for the memory limit (memlimit.go)"},
	{"MEMTIER_VERSITYGW", "runtime/remote tests: the S3 gateway binary (scripts/versitygw.sh)"},
	{"MEMTIER_DISK_CACHE_DIR", "runtime/diskcache: directory of the disk cache tier for remote objects (created 0700); unset: off"},
	{"MEMTIER_DISK_CACHE_BYTES", "runtime/diskcache: disk cache budget in bytes; default 10 GiB, at most half the free space"},
	{"MEMTIER_DISK_CACHE_TRUST", "runtime/diskcache: 0 checksums every piece on every read; default 1: pieces this process checked are served again unchecked while the entry is unchanged and in the page cache"},
	{"MEMTIER_REMOTE_PART_BYTES", "runtime/remote: bytes per ranged GET of a remote read (K, M, G suffixes); default 8M, 5M to 1G"},
	{"MEMTIER_REMOTE_CONCURRENCY", "runtime/remote: ranged GETs in flight per context (and idle connections kept per host); default 64, 1 to 1024"},
}

// Known reports whether name is a MEMTIER_* variable the project reads (in
// Vars or OtherVars). Exact, case-sensitive match.
func Known(name string) bool {
	for _, v := range Vars {
		if v.Name == name {
			return true
		}
	}
	for _, v := range OtherVars {
		if v.Name == name {
			return true
		}
	}
	return false
}

// Closest returns the known name with the smallest edit distance
// (Levenshtein, on the upper-cased name) to name; ties go to the earlier one
// in Vars, then OtherVars.
func Closest(name string) string {
	up := strings.ToUpper(name)
	best, bestD := "", -1
	try := func(k string) {
		if d := editDistance(up, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	for _, v := range Vars {
		try(v.Name)
	}
	for _, v := range OtherVars {
		try(v.Name)
	}
	return best
}

// editDistance is the Levenshtein distance of a and b in bytes (names are
// ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// UnknownNames returns, sorted and without duplicates, the names of the
// "NAME=value" entries of environ that start with MEMTIER_ and are not Known.
func UnknownNames(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MEMTIER_") && !Known(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	j := 0
	for i, n := range out {
		if i == 0 || n != out[j-1] {
			out[j] = n
			j++
		}
	}
	return out[:j]
}

// UnknownWarning is the warning text for an unknown MEMTIER_* name:
// "unknown environment variable NAME (did you mean CLOSEST?); it is ignored".
func UnknownWarning(name string) string {
	return "unknown environment variable " + name + " (did you mean " + Closest(name) + "?); it is ignored"
}
