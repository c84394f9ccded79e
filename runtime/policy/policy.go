// Package policy decides, per request, which path serves the bytes that are
// not already in the DRAM cache and whether the read fills the cache. It is a
// pure function of the request, the cache and page-cache state, the device
// probe's result and the configured thresholds: no I/O, so every row of the
// table is unit-tested and fuzzed, and memtier_explain can show the decision
// without reading.
//
// The decision table (first matching row wins; the row numbers are names,
// and 9 to 15 are the CUDA table's, gpu.go):
//
//	#   condition                                        path      admit
//	1   target is CUDA and no GPU backend                none      no   (UNSUPPORTED)
//	2   size == 0                                        none      no
//	3   every byte already in the DRAM cache             cache     -
//	admission (the rows below pick the path; admit is decided alongside):
//	    admit = cache on AND not READ_ONCE AND not the internal ReadNoAdmit
//	            AND (size <= admit_max OR WILL_REUSE)
//	4   hint BUFFERED, or direct_mode OFF                buffered
//	5   file system refused O_DIRECT, mode not REQUIRED  buffered  (fallback, counted)
//	6   direct_mode ALWAYS/REQUIRED, or hint DIRECT      direct
//	    AUTO, cold and large: uncached bytes >= direct_threshold AND less
//	    than half of them in the page cache (unknown residency counts as cold):
//	7     READ_ONCE, and the device probe did not find
//	      buffered reads faster (or has not run)         direct
//	16    READ_ONCE, and the device probe measured
//	      buffered reads over 1.1x O_DIRECT              buffered  (readahead streams)
//	17    no READ_ONCE                                   buffered  (readahead streams)
//	8   otherwise                                        buffered  (warm or small)
//
// Why rows 7, 16 and 17: a read without READ_ONCE leaves its bytes in the page
// cache, so the next read of the file, in this process or the next one,
// is a memcpy (a relaunched script reads a checkpoint at page-cache speed,
// not disk speed); a cold O_DIRECT read would leave it cold. Large buffered
// reads run as parallel readahead streams, one descriptor per worker
// (iopath.ReadBuffered), which on the build machine's disk read cold files
// faster than O_DIRECT and than one pread loop. READ_ONCE says the bytes are
// not wanted again, so there the device probe picks the faster path: the
// first cold READ_ONCE read of at least iopath.ProbeMinBytes on a device times
// O_DIRECT against buffered streams once per process (NeedsProbe), and O_DIRECT
// wins ties, since it also keeps the page cache free for other data. Warm
// data is a memcpy away in the page cache, and small reads stay buffered
// because O_DIRECT latency per request is higher.
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

	// ReadNoAdmit is internal, never a public flag (it is not in AllFlags,
	// so the API refuses it): the read does not fill the DRAM cache, like
	// READ_ONCE, but it is an ordinary read otherwise, so a cold large one
	// stays buffered and leaves its bytes in the page cache (row 17). For
	// engine callers that only want to keep a scan out of the DRAM cache.
	ReadNoAdmit uint32 = 1 << 31
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
	Probe         Probe // what the device probe measured on the file's device
}

// Probe is the device probe's result for one device: cold sequential read
// throughput of O_DIRECT and of parallel buffered readahead streams, in
// MB/s (1e6 bytes per second). Zero: not measured.
type Probe struct {
	DirectMBps, BufferedMBps uint32
}

// Measured reports whether the probe ran and measured both paths.
func (p Probe) Measured() bool { return p.DirectMBps > 0 && p.BufferedMBps > 0 }

// BufferedFaster reports whether buffered streams measured more than 1.1x the
// speed of O_DIRECT: only then does a cold READ_ONCE read go buffered (row 16).
func (p Probe) BufferedFaster() bool {
	return p.Measured() && uint64(p.BufferedMBps)*10 > uint64(p.DirectMBps)*11
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
	Row    int    // the table row that decided Path (1-8, 16, 17), for tests and explain
	Reason string // one line, for memtier_explain and logs
}

// Admit reports whether a request of size bytes with flags fills the cache.
func Admit(c Config, size uint64, flags uint32) bool {
	return c.CacheEnabled && flags&(ReadOnce|ReadNoAdmit) == 0 && (size <= c.AdmitMax || flags&ReadWillUse != 0)
}

// NeedsResidency reports whether Decide's path depends on ResidentBytes (and
// on Probe), so callers can skip the mincore probe when it cannot change the
// path: only a large AUTO READ_ONCE read can go O_DIRECT for being cold; any
// other large read is buffered whether it is cold (row 17) or warm (row 8).
func NeedsResidency(c Config, in Input) bool {
	return in.Target == TargetCPU && c.DirectMode == DirectAuto &&
		in.Flags&(ReadBuffered|ReadDirect) == 0 && in.Flags&ReadOnce != 0 && !in.DirectRefused &&
		in.Size > in.CachedBytes && in.Size-in.CachedBytes >= c.DirectThreshold
}

// NeedsProbe reports whether the device probe should run before deciding:
// the request is a cold large READ_ONCE read (row 7) and in.Probe has not
// been measured, so the probe's result could send it buffered (row 16).
func NeedsProbe(c Config, in Input) bool {
	return !in.Probe.Measured() && NeedsResidency(c, in) && Decide(c, in).Row == 7
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
	case uncached < c.DirectThreshold:
		return d(PathBuffered, 8, "small: uncached bytes below direct_threshold")
	case in.ResidentKnown && in.ResidentBytes*2 >= uncached:
		return d(PathBuffered, 8, "warm: the uncached bytes are mostly in the page cache")
	case in.Flags&ReadOnce == 0:
		return d(PathBuffered, 17, "cold and large: buffered streams, kept in the page cache")
	case in.Probe.BufferedFaster():
		return d(PathBuffered, 16, "cold and large, READ_ONCE: buffered, the device probe found it faster")
	}
	return d(PathDirect, 7, "cold and large, READ_ONCE: O_DIRECT")
}

// Detail formats the numbers behind a decision for memtier_explain; kept out
// of Decide so the hot path never formats strings.
// The device probe's numbers follow for the cold and large rows. The text
// stays inside memtier_decision_t.reason (256 bytes, with explain's
// additions) for any numbers.
func Detail(c Config, in Input, d Decision) string {
	s := fmt.Sprintf("%s (size %d, cached %d, page cache %d, direct_threshold %d)",
		d.Reason, in.Size, in.CachedBytes, in.ResidentBytes, c.DirectThreshold)
	switch {
	case d.Row != 7 && d.Row != 16 && d.Row != 17:
	case in.Probe.Measured():
		s += fmt.Sprintf("; probe: direct %d, buffered %d MB/s", in.Probe.DirectMBps, in.Probe.BufferedMBps)
	case d.Row == 7:
		s += "; device not probed"
	}
	return s
}
