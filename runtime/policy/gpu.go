package policy

import "fmt"

// PathHBM: bytes copied device to device out of the HBM cache; value equals
// MEMTIER_PATH_HBM.
const PathHBM = 6

// GDS modes; values equal config.GDS* and MEMTIER_GDS_*.
const (
	GDSAuto     = 0
	GDSOff      = 1
	GDSRequired = 2
)

// GDSAlign is the file offset and length alignment GDS wants in AUTO mode
// (cuFile reads unaligned ranges through its own bounce buffers, which is
// slower than the staged path).
const GDSAlign = 4096

// GPUConfig holds the thresholds of the GPU table (from config.Options).
type GPUConfig struct {
	GDSMode      int
	GDSThreshold uint64
}

// GPUInput describes one request to device memory (target CUDA) as the GPU
// table sees it. Sizes are bytes.
type GPUInput struct {
	Size         uint64
	Off          uint64 // file offset of the request
	FileSize     uint64 // the file's size (a tail ending at EOF counts as aligned)
	HBMBytes     uint64 // bytes of the range in the HBM cache (on dst's device)
	CachedBytes  uint64 // bytes of the range in the DRAM cache (not in HBM)
	GPUAvailable bool
	// GDSUnavailable is why GDS cannot run in this process ("" when it can,
	// or when it has not been probed yet).
	GDSUnavailable string
	// FileFallback is why GDS fell back for this version of the file before
	// ("" when it did not): the file is not tried with GDS again.
	FileFallback string
	// GDSCompat: the cuFile driver is open but runs only in its
	// compatibility mode (no nvidia-fs, no P2PDMA): POSIX reads into host
	// bounce buffers inside cuFile, the staged path's work without its lanes.
	GDSCompat bool
}

// GDSAligned reports whether [off, off+size) suits GDS in AUTO mode: the
// offset is a multiple of GDSAlign and so is the size, or the range ends at
// end of file.
func GDSAligned(off, size, fileSize uint64) bool {
	return off%GDSAlign == 0 && (size%GDSAlign == 0 || off+size == fileSize)
}

// DecideGPU applies the GPU decision table (README "Path policy", rows 9 to
// 15, after the shared rows 1 and 2):
//
//	#   condition (target CUDA)                                  path
//	1   no GPU backend                                           none (UNSUPPORTED)
//	2   size == 0                                                none
//	9   every byte in the HBM cache                              hbm    (device to device)
//	10  every byte in the HBM or DRAM cache                      cache  (host to device from cache memory)
//	11  gds_mode OFF, or GDS unavailable (not built, no cuFile,  staged
//	    or AUTO with cuFile in compatibility mode)
//	12  GDS fell back for this file version before               staged
//	13  AUTO: uncached bytes below gds_threshold_bytes           staged
//	14  AUTO: offset or size not a multiple of 4 KiB             staged
//	15  otherwise (AUTO large and aligned, or REQUIRED)          gds
//
// Path is the path of the bytes in neither cache; Admit is always false (GPU
// reads never fill the DRAM cache; prefetch TO_HBM fills the HBM cache). With
// gds_mode REQUIRED, rows 11 and 12 are errors in the engine, not a staged
// read. Pure: no I/O, no CUDA call.
func DecideGPU(c GPUConfig, in GPUInput) Decision {
	d := func(path, row int, why string) Decision { return Decision{Path: path, Row: row, Reason: why} }
	if !in.GPUAvailable {
		return d(PathNone, 1, "CUDA target: no usable GPU backend")
	}
	if in.Size == 0 {
		return d(PathNone, 2, "empty request")
	}
	if in.HBMBytes >= in.Size {
		return d(PathHBM, 9, "every byte is in the HBM cache: device-to-device copy")
	}
	if in.HBMBytes+in.CachedBytes >= in.Size {
		return d(PathCache, 10, "every byte is in the HBM or DRAM cache: host-to-device copy from cache memory")
	}
	uncached := in.Size - in.HBMBytes - in.CachedBytes
	switch {
	case c.GDSMode == GDSOff:
		return d(PathStaged, 11, "gds_mode OFF")
	case in.GDSUnavailable != "":
		return d(PathStaged, 11, in.GDSUnavailable)
	case in.FileFallback != "":
		return d(PathStaged, 12, "GDS fell back for this file before ("+in.FileFallback+"): not retried")
	case c.GDSMode == GDSRequired:
		return d(PathGDS, 15, "gds_mode REQUIRED")
	case in.GDSCompat:
		return d(PathStaged, 11, "cuFile runs in compatibility mode (no nvidia-fs, no P2PDMA): "+
			"the staged path is faster (gds_mode REQUIRED would use cuFile)")
	case uncached < c.GDSThreshold:
		return d(PathStaged, 13, fmt.Sprintf("uncached bytes %d below gds_threshold_bytes %d", uncached, c.GDSThreshold))
	case !GDSAligned(in.Off, in.Size, in.FileSize):
		return d(PathStaged, 14, fmt.Sprintf("offset %d or size %d not a multiple of 4096", in.Off, in.Size))
	}
	return d(PathGDS, 15, "large and 4 KiB aligned")
}
