// Package config holds a context's Options: defaults, MEMTIER_* environment
// overrides (parsed strictly: a bad value is an error, never a silent default)
// and validation. One table (vars) drives the environment, the README table and
// the tests.
package config

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/memtier/memtier/runtime/errs"
)

// Direct I/O modes; values equal MEMTIER_DIRECT_* in include/memtier.h.
const (
	DirectAuto     = 0 // policy decides; a refused O_DIRECT falls back to buffered
	DirectOff      = 1 // always buffered pread
	DirectAlways   = 2 // O_DIRECT for every uncached byte, fallback when refused
	DirectRequired = 3 // like Always, refusal is errs.DirectIO
)

// GPUDirect Storage modes; values equal MEMTIER_GDS_* in include/memtier.h.
const (
	GDSAuto     = 0 // GDS for large aligned GPU reads when cuFile works; fallbacks go staged
	GDSOff      = 1 // never GDS: every GPU read goes through pinned host buffers
	GDSRequired = 2 // GDS for every uncached GPU byte; no GDS is an error, never a fallback
)

// Freshness settings; values equal MEMTIER_FRESHNESS_* in include/memtier.h.
const (
	FreshStrict   = 0 // every call checks the open file (fstat): never stale
	FreshInterval = 1 // a file checked less than FreshnessIntervalMs ago is trusted
	FreshOpen     = 2 // checked when opened only: data the caller declares immutable

	DefaultFreshnessIntervalMs = 100
)

// Defaults of the GPU tier.
const (
	DefaultHBMCacheBytes = 1 * GiB // HBM cache budget (allocated on the first TO_HBM prefetch)
	HBMBlockBytes        = 2 * MiB // HBM cache block (gpu.DefaultHBMBlockSize)
	MaxHBMDevice         = 63
)

const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// Options configures an engine.Context. Sizes are bytes.
type Options struct {
	IOThreads          int    // I/O worker goroutines; default 4
	CacheBytes         uint64 // DRAM cache budget; default 1 GiB
	CacheBlockBytes    uint64 // cache block size, power of two >= 4 KiB; default 64 KiB
	CacheAdmitMaxBytes uint64 // requests larger than this bypass the cache unless WILL_REUSE; default 16 MiB
	TaskBytes          uint64 // split size of large reads; default 4 MiB
	DirectThreshold    uint64 // AUTO: uncached, non-resident reads >= this go O_DIRECT; default 8 MiB
	DirectMode         int    // Direct*; default DirectAuto
	CacheEnabled       bool   // default true
	MaxOpenFiles       int    // bound of the descriptor table; default 128
	GOMAXPROCS         int    // 0 = leave the Go scheduler as it is
	GDSThreshold       uint64 // GPU builds: minimum size for GDS; default 1 MiB
	MaxInflightMiB     int    // cap on bounce/task buffer memory in MiB; default 64
	SmallIODepth       int    // readv: small reads in flight at once; default 32
	// NoIOUring makes readv read its uncached elements one preadv2 each
	// instead of in io_uring batches (MEMTIER_IO_URING=0); default false.
	NoIOUring bool
	// PathRecheckMs: how long a resolved path is trusted while only the open
	// descriptor is re-checked (fstat) per call; default 1000; -1 = stat the
	// path on every call.
	PathRecheckMs int
	// HBMCacheBytes is the budget of the HBM (device memory) cache that
	// MEMTIER_PREFETCH_TO_HBM fills; 0 turns the tier off. Default 1 GiB,
	// allocated block by block on the first TO_HBM prefetch, never before.
	HBMCacheBytes uint64
	// HBMDevice is the CUDA device ordinal that holds the HBM cache; default 0.
	HBMDevice int
	// GDSMode is GDSAuto, GDSOff or GDSRequired; default GDSAuto.
	GDSMode int
	// PrefetchToHBM makes every prefetch go to the HBM cache
	// (MEMTIER_PREFETCH_TO_HBM=1), as if it passed MEMTIER_PREFETCH_TO_HBM.
	PrefetchToHBM bool
	// Freshness is FreshStrict (default), FreshInterval or FreshOpen.
	Freshness int
	// FreshnessIntervalMs bounds the staleness of FreshInterval, in ms.
	FreshnessIntervalMs int
	// Fault is the MEMTIER_FAULT test hook ("eintr_every=N,short_max=N"); "" = off.
	Fault string
	// TestHooks enables memtier_debug_hook (MEMTIER_TEST_HOOKS=1).
	TestHooks bool
}

// Defaults returns the compiled-in defaults.
func Defaults() Options {
	return Options{
		IOThreads:          4,
		CacheBytes:         1 * GiB,
		CacheBlockBytes:    64 * KiB,
		CacheAdmitMaxBytes: 16 * MiB,
		TaskBytes:          4 * MiB,
		DirectThreshold:    8 * MiB,
		DirectMode:         DirectAuto,
		CacheEnabled:       true,
		MaxOpenFiles:       128,
		GDSThreshold:       1 * MiB,
		MaxInflightMiB:     64,
		SmallIODepth:       32,
		PathRecheckMs:      1000,
		HBMCacheBytes:      DefaultHBMCacheBytes,
		GDSMode:            GDSAuto,

		FreshnessIntervalMs: DefaultFreshnessIntervalMs,
	}
}

// Var describes one MEMTIER_* environment variable.
type Var struct {
	Name string // e.g. "MEMTIER_CACHE_BYTES"
	Doc  string // one line for the README table
	set  func(o *Options, v string) error
}

// ParseSize parses a MEMTIER_* byte size: digits with an optional K, M, G, T
// or KiB, MiB, GiB, TiB suffix (any case), all powers of 1024; KB/MB/GB are
// refused (they could mean powers of 1000). Errors: not a size, or a size
// that overflows 64 bits. The one parser of every MEMTIER_* size
// (runtime/remote and runtime/diskcache use it too).
func ParseSize(v string) (uint64, error) {
	s := strings.TrimSpace(strings.ToUpper(v))
	mult := uint64(1)
	for _, suf := range []struct {
		s string
		m uint64
	}{{"KIB", KiB}, {"MIB", MiB}, {"GIB", GiB}, {"TIB", 1 << 40}, {"K", KiB}, {"M", MiB}, {"G", GiB}, {"T", 1 << 40}} {
		if strings.HasSuffix(s, suf.s) {
			s, mult = strings.TrimSuffix(s, suf.s), suf.m
			break
		}
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a byte size (digits with an optional K, M, G, T or KiB, MiB, GiB, TiB suffix, " +
			"all powers of 1024; KB/MB/GB are refused: they could mean powers of 1000)")
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, fmt.Errorf("byte size overflows 64 bits")
	}
	return lo, nil
}

func parseInt(v string, min, max int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("not an integer in [%d, %d]", min, max)
	}
	return n, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean (1/0, true/false, yes/no, on/off)")
}

func sizeVar(name, doc string, field func(*Options) *uint64) Var {
	return Var{name, doc, func(o *Options, v string) error {
		n, err := ParseSize(v)
		if err == nil {
			*field(o) = n
		}
		return err
	}}
}

// modeVar is a variable that takes one of a set of names (case-insensitive);
// list is the error text's "not one of ..." part.
func modeVar(name, doc string, field func(*Options) *int, list string, names map[string]int) Var {
	return Var{name, doc, func(o *Options, v string) error {
		n, ok := names[strings.ToLower(strings.TrimSpace(v))]
		if !ok {
			return fmt.Errorf("not one of %s", list)
		}
		*field(o) = n
		return nil
	}}
}

// Vars lists every MEMTIER_* variable in README order.
var Vars = []Var{
	{"MEMTIER_CACHE_BYTES", "DRAM cache budget in bytes (K/M/G suffixes); 0 turns the cache off", func(o *Options, v string) error {
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		if n == 0 {
			o.CacheEnabled = false
		} else {
			o.CacheBytes = n
		}
		return nil
	}},
	sizeVar("MEMTIER_CACHE_BLOCK_BYTES", "cache block size, a power of two, 4 KiB to 64 MiB", func(o *Options) *uint64 { return &o.CacheBlockBytes }),
	sizeVar("MEMTIER_CACHE_ADMIT_MAX_BYTES", "reads larger than this bypass the cache unless hinted WILL_REUSE", func(o *Options) *uint64 { return &o.CacheAdmitMaxBytes }),
	{"MEMTIER_CACHE", "1/0: cache on or off", func(o *Options, v string) error {
		b, err := parseBool(v)
		if err == nil {
			o.CacheEnabled = b
		}
		return err
	}},
	{"MEMTIER_IO_THREADS", "I/O worker goroutines (1 to 256)", func(o *Options, v string) error {
		n, err := parseInt(v, 1, 256)
		if err == nil {
			o.IOThreads = n
		}
		return err
	}},
	sizeVar("MEMTIER_TASK_BYTES", "large reads are split into parallel tasks of this size", func(o *Options) *uint64 { return &o.TaskBytes }),
	sizeVar("MEMTIER_DIRECT_THRESHOLD", "AUTO mode: uncached reads at least this large and not in the page cache use O_DIRECT", func(o *Options) *uint64 { return &o.DirectThreshold }),
	modeVar("MEMTIER_DIRECT", "auto, off, always or required", func(o *Options) *int { return &o.DirectMode },
		"auto, off, always, required", map[string]int{"auto": DirectAuto, "off": DirectOff, "0": DirectOff,
			"always": DirectAlways, "on": DirectAlways, "1": DirectAlways, "required": DirectRequired}),
	{"MEMTIER_MAX_OPEN_FILES", "bound of the open-descriptor table (1 to 65536)", func(o *Options, v string) error {
		n, err := parseInt(v, 1, 65536)
		if err == nil {
			o.MaxOpenFiles = n
		}
		return err
	}},
	{"MEMTIER_GOMAXPROCS", "Go scheduler threads set at init (0 = unchanged)", func(o *Options, v string) error {
		n, err := parseInt(v, 0, 1024)
		if err == nil {
			o.GOMAXPROCS = n
		}
		return err
	}},
	sizeVar("MEMTIER_GDS_THRESHOLD", "GPU builds: minimum request size for GDS", func(o *Options) *uint64 { return &o.GDSThreshold }),
	{"MEMTIER_MAX_INFLIGHT_MIB", "cap in MiB on bounce and task buffer memory (1 to 65536)", func(o *Options, v string) error {
		n, err := parseInt(v, 1, 65536)
		if err == nil {
			o.MaxInflightMiB = n
		}
		return err
	}},
	{"MEMTIER_SMALL_IO_DEPTH", "readv: small reads in flight at once (1 to 256)", func(o *Options, v string) error {
		n, err := parseInt(v, 1, 256)
		if err == nil {
			o.SmallIODepth = n
		}
		return err
	}},
	{"MEMTIER_IO_URING", "1/0: readv reads uncached elements in io_uring batches (default 1) or one preadv2 each", func(o *Options, v string) error {
		b, err := parseBool(v)
		if err == nil {
			o.NoIOUring = !b
		}
		return err
	}},
	{"MEMTIER_PATH_RECHECK_MS", "ms a resolved path is trusted while only the open descriptor is re-checked (fstat) per call; -1 = stat the path on every call", func(o *Options, v string) error {
		n, err := parseInt(v, -1, 1<<30)
		if err == nil {
			o.PathRecheckMs = n
		}
		return err
	}},
	modeVar("MEMTIER_FRESHNESS", "strict (every call checks the open file; never stale), interval (a file checked within MEMTIER_FRESHNESS_INTERVAL_MS is trusted) or open (checked at open only: immutable data)",
		func(o *Options) *int { return &o.Freshness }, "strict, interval, open",
		map[string]int{"strict": FreshStrict, "0": FreshStrict, "interval": FreshInterval, "1": FreshInterval,
			"open": FreshOpen, "immutable": FreshOpen, "2": FreshOpen}),
	{"MEMTIER_FRESHNESS_INTERVAL_MS", "freshness interval: ms a checked file is trusted (1 to 2^30; default 100)", func(o *Options, v string) error {
		n, err := parseInt(v, 1, 1<<30)
		if err == nil {
			o.FreshnessIntervalMs = n
		}
		return err
	}},
	modeVar("MEMTIER_GDS_MODE", "GPU builds: auto (GDS for large aligned reads, staged fallback), off (always staged) or required (no GDS is an error)",
		func(o *Options) *int { return &o.GDSMode }, "auto, off, required",
		map[string]int{"auto": GDSAuto, "off": GDSOff, "0": GDSOff, "required": GDSRequired, "1": GDSRequired, "on": GDSRequired}),
	sizeVar("MEMTIER_HBM_CACHE_BYTES", "GPU builds: budget of the device-memory (HBM) cache that prefetch TO_HBM fills; 0 turns the tier off", func(o *Options) *uint64 { return &o.HBMCacheBytes }),
	{"MEMTIER_HBM_DEVICE", "GPU builds: CUDA device ordinal that holds the HBM cache (0 to 63)", func(o *Options, v string) error {
		n, err := parseInt(v, 0, MaxHBMDevice)
		if err == nil {
			o.HBMDevice = n
		}
		return err
	}},
	{"MEMTIER_PREFETCH_TO_HBM", "GPU builds: 1 sends every prefetch to the HBM cache, as if MEMTIER_PREFETCH_TO_HBM were passed", func(o *Options, v string) error {
		b, err := parseBool(v)
		if err == nil {
			o.PrefetchToHBM = b
		}
		return err
	}},
	{"MEMTIER_FAULT", "test hook: eintr_every=N and/or short_max=N (comma separated) inject EINTR and short preads", func(o *Options, v string) error {
		if _, err := ParseFault(v); err != nil {
			return err
		}
		o.Fault = v
		return nil
	}},
	{"MEMTIER_TEST_HOOKS", "test hook: 1 enables memtier_debug_hook", func(o *Options, v string) error {
		b, err := parseBool(v)
		if err == nil {
			o.TestHooks = b
		}
		return err
	}},
}

// FromEnv applies every variable that lookup finds to o. A value that does not
// parse is an errs.Format error naming the variable and the value.
func (o *Options) FromEnv(lookup func(string) (string, bool)) error {
	for _, v := range Vars {
		s, ok := lookup(v.Name)
		if !ok || s == "" {
			continue
		}
		if err := v.set(o, s); err != nil {
			return errs.New(errs.Format, "config", "%s=%q: %v", v.Name, s, err)
		}
	}
	return nil
}

// Validate checks ranges and cross-field rules; errors are errs.InvalidArg.
func (o *Options) Validate() error {
	bad := func(f string, a ...any) error { return errs.New(errs.InvalidArg, "config", f, a...) }
	switch {
	case o.IOThreads < 1 || o.IOThreads > 256:
		return bad("io_threads %d not in [1, 256]", o.IOThreads)
	case o.CacheBlockBytes < 4*KiB || o.CacheBlockBytes > 64*MiB || o.CacheBlockBytes&(o.CacheBlockBytes-1) != 0:
		return bad("cache_block_bytes %d is not a power of two in [4 KiB, 64 MiB]", o.CacheBlockBytes)
	case o.CacheEnabled && o.CacheBytes < o.CacheBlockBytes:
		return bad("cache_bytes %d is smaller than one block (%d)", o.CacheBytes, o.CacheBlockBytes)
	case o.TaskBytes < 64*KiB || o.TaskBytes > 1*GiB:
		return bad("task_bytes %d not in [64 KiB, 1 GiB]", o.TaskBytes)
	case o.DirectMode < DirectAuto || o.DirectMode > DirectRequired:
		return bad("direct_mode %d unknown", o.DirectMode)
	case o.MaxOpenFiles < 1 || o.MaxOpenFiles > 65536:
		return bad("max_open_files %d not in [1, 65536]", o.MaxOpenFiles)
	case o.GOMAXPROCS < 0 || o.GOMAXPROCS > 1024:
		return bad("gomaxprocs %d not in [0, 1024]", o.GOMAXPROCS)
	case o.MaxInflightMiB < 1 || o.MaxInflightMiB > 65536:
		return bad("max_inflight_mib %d not in [1, 65536]", o.MaxInflightMiB)
	case o.PathRecheckMs < -1:
		return bad("path_recheck_ms %d below -1", o.PathRecheckMs)
	case o.SmallIODepth < 1 || o.SmallIODepth > 256:
		return bad("small_io_depth %d not in [1, 256]", o.SmallIODepth)
	case uint64(o.MaxInflightMiB)*MiB < o.TaskBytes:
		return bad("max_inflight_mib (%d MiB) smaller than one task (%d bytes)", o.MaxInflightMiB, o.TaskBytes)
	case o.GDSMode < GDSAuto || o.GDSMode > GDSRequired:
		return bad("gds_mode %d unknown", o.GDSMode)
	case o.HBMDevice < 0 || o.HBMDevice > MaxHBMDevice:
		return bad("hbm_device %d not in [0, %d]", o.HBMDevice, MaxHBMDevice)
	case o.Freshness < FreshStrict || o.Freshness > FreshOpen:
		return bad("freshness %d unknown", o.Freshness)
	case o.FreshnessIntervalMs < 1 || o.FreshnessIntervalMs > 1<<30:
		return bad("freshness_interval_ms %d not in [1, 2^30]", o.FreshnessIntervalMs)
	case o.HBMCacheBytes != 0 && o.HBMCacheBytes < HBMBlockBytes:
		return bad("hbm_cache_bytes %d is smaller than one HBM block (%d bytes)", o.HBMCacheBytes, HBMBlockBytes)
	}
	return nil
}

// Fault is the parsed MEMTIER_FAULT hook.
type Fault struct {
	EINTREvery int // every Nth pread fails with EINTR first; 0 = never
	ShortMax   int // no pread returns more than this many bytes; 0 = no limit
}

// ParseFault parses "eintr_every=N,short_max=N" (either part optional).
func ParseFault(s string) (Fault, error) {
	var f Fault
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return f, fmt.Errorf("bad fault spec %q (want eintr_every=N,short_max=N)", part)
		}
		switch k {
		case "eintr_every":
			f.EINTREvery = n
		case "short_max":
			f.ShortMax = n
		default:
			return f, fmt.Errorf("unknown fault %q", k)
		}
	}
	return f, nil
}
