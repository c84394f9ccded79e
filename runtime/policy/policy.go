// Package policy decides, per request, which path serves the bytes that are
// not already in the DRAM cache and whether the read fills the cache. It is a
// pure function of the request, the cache and page-cache state and the
// configured thresholds: no I/O, so every row of the table is unit-tested and
// fuzzed, and memtier_explain can show the decision without reading.
//
// The decision table (first matching row wins):
//
//	#  condition                                         path      admit
//	1  target is CUDA and no GPU backend                 none      no   (UNSUPPORTED)
//	2  size == 0                                         none      no
//	3  every byte already in the DRAM cache              cache     -
//	admission (rows 4-7 pick the path; admit is decided alongside):
//	   admit = cache on AND not READ_ONCE AND (size <= admit_max OR WILL_REUSE)
//	4  hint BUFFERED, or direct_mode OFF                 buffered
//	5  file system refused O_DIRECT, mode not REQUIRED   buffered  (fallback, counted)
//	6  direct_mode ALWAYS/REQUIRED, or hint DIRECT       direct
//	7  AUTO: uncached bytes >= direct_threshold AND
//	   less than half of them in the page cache          direct    (cold and large)
//	8  otherwise                                         buffered  (warm or small)
//
// Why row 7: buffered pread from the page cache is a memcpy (about 5 GB/s per
// thread here) and beats O_DIRECT when the data is warm, while on a cold file
// O_DIRECT skips the page-cache copy and the readahead heuristics; small reads
// stay buffered because O_DIRECT latency per request is higher.
package policy

import "fmt"

// Targets and paths; values equal MEMTIER_TARGET_* and MEMTIER_PATH_*.
const (
	TargetCPU  = 0
	TargetCUDA = 1

	PathCache    = 0
	PathBuffered = 1
	PathDirect   = 2
	PathGDS      = 3
	PathStaged   = 4
	PathNone     = 5
)

// Hint flags; values equal MEMTIER_READ_*.
const (
	ReadOnce      uint32 = 1
	ReadWillUse   uint32 = 2
	ReadDirect    uint32 = 4
	ReadBuffered  uint32 = 8
	ReadImmutable uint32 = 16 // trust the file as last checked (no freshness syscall)
	AllFlags             = ReadOnce | ReadWillUse | ReadDirect | ReadBuffered | ReadImmutable
)

// Direct modes; values equal config.Direct*.
const (
	DirectAuto     = 0
	DirectOff      = 1
	DirectAlways   = 2
	DirectRequired = 3
)

// Input describes one request as the policy sees it. Sizes are bytes.
type Input struct {
	Target        int
	Size          uint64
	Flags         uint32
	CachedBytes   uint64 // bytes of the range already valid in the DRAM cache
	ResidentBytes uint64 // bytes of the uncached part in the page cache
	ResidentKnown bool   // false: residency not measured (treated as cold)
	DirectRefused bool   // the file system refused O_DIRECT for this file before
	GPUAvailable  bool
}

// Config holds the thresholds the table uses (from config.Options).
type Config struct {
	CacheEnabled    bool
	AdmitMax        uint64
	DirectThreshold uint64
	DirectMode      int
}

// Decision is the policy's answer.
type Decision struct {
	Path   int    // Path* for the uncached bytes
	Admit  bool   // the read fills the DRAM cache
	Row    int    // the table row that decided Path (1-8), for tests and explain
	Reason string // one line, for memtier_explain and logs
}

// Admit reports whether a request of size bytes with flags fills the cache.
func Admit(c Config, size uint64, flags uint32) bool {
	return c.CacheEnabled && flags&ReadOnce == 0 && (size <= c.AdmitMax || flags&ReadWillUse != 0)
}

// NeedsResidency reports whether Decide's answer depends on ResidentBytes, so
// callers can skip the mincore probe when it cannot change the outcome.
func NeedsResidency(c Config, in Input) bool {
	return in.Target == TargetCPU && c.DirectMode == DirectAuto &&
		in.Flags&(ReadBuffered|ReadDirect) == 0 && !in.DirectRefused &&
		in.Size > in.CachedBytes && in.Size-in.CachedBytes >= c.DirectThreshold
}

// Decide applies the table above. It never fails; a CUDA target without a GPU
// comes back as PathNone row 1 and the engine turns that into UNSUPPORTED.
func Decide(c Config, in Input) Decision {
	if in.Target == TargetCUDA && !in.GPUAvailable {
		return Decision{PathNone, false, 1, "CUDA target: no GPU backend in this build"}
	}
	if in.Size == 0 {
		return Decision{PathNone, false, 2, "empty request"}
	}
	if in.CachedBytes >= in.Size {
		return Decision{PathCache, false, 3, "every byte is in the DRAM cache"}
	}
	admit := Admit(c, in.Size, in.Flags)
	d := func(path, row int, why string) Decision {
		return Decision{path, admit, row, why}
	}
	uncached := in.Size - in.CachedBytes
	switch {
	case in.Flags&ReadBuffered != 0:
		return d(PathBuffered, 4, "hint BUFFERED")
	case c.DirectMode == DirectOff:
		return d(PathBuffered, 4, "direct_mode OFF")
	case in.DirectRefused && c.DirectMode != DirectRequired:
		return d(PathBuffered, 5, "file system refused O_DIRECT: buffered fallback")
	case c.DirectMode == DirectAlways || c.DirectMode == DirectRequired:
		return d(PathDirect, 6, "direct_mode ALWAYS/REQUIRED")
	case in.Flags&ReadDirect != 0:
		return d(PathDirect, 6, "hint DIRECT")
	case uncached >= c.DirectThreshold && (!in.ResidentKnown || in.ResidentBytes*2 < uncached):
		return d(PathDirect, 7, "cold and large: under half of the uncached bytes are in the page cache")
	case uncached >= c.DirectThreshold:
		return d(PathBuffered, 8, "warm: the uncached bytes are mostly in the page cache")
	}
	return d(PathBuffered, 8, "small: uncached bytes below direct_threshold")
}

// Detail formats the numbers behind a decision for memtier_explain; kept out
// of Decide so the hot path never formats strings.
func Detail(c Config, in Input, d Decision) string {
	return fmt.Sprintf("%s (size %d, cached %d, page cache %d, direct_threshold %d)",
		d.Reason, in.Size, in.CachedBytes, in.ResidentBytes, c.DirectThreshold)
}
