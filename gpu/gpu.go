// Package gpu moves file bytes into CUDA device memory. It loads the CUDA
// driver API (libcuda.so.1) and cuFile, the GPUDirect Storage library
// (libcufile.so.0), with dlopen at run time and declares the few prototypes
// it calls itself: no CUDA headers or toolkit are needed to build, and one
// build runs on machines with and without a GPU.
//
// # Builds
//
// Every cgo build has the CUDA and cuFile backends: they load libcuda and
// libcufile with dlopen at run time, so building needs no CUDA toolkit and a
// machine without a driver gets KindUnavailable answers. Only a
// CGO_ENABLED=0 build is pure Go (nocgo.go): Available reports false, Reason
// says why, and every constructor returns an *Error of kind KindUnavailable.
//
// # Libraries
//
// libcuda.so.1 and libcufile.so.0 are looked up by the dynamic loader's usual
// rules. Two environment variables name other files instead (a path, used as
// given):
//
//	MEMTIER_CUDA_LIBRARY    the CUDA driver library (default libcuda.so.1)
//	MEMTIER_CUFILE_LIBRARY  the cuFile library (default libcufile.so.0; pip's
//	                        CUDA 13 wheels ship it under
//	                        site-packages/nvidia/cu13/lib/libcufile.so.0, the
//	                        CUDA 12 nvidia-cufile wheel under nvidia/cufile/lib)
//
// They are read with the C library's getenv when the library is first
// loaded, so a value set after process start (Python's os.environ, which
// calls putenv) still counts if it is set before the first GPU call.
// Configure sets the same paths from code and wins over the environment.
//
// # Lifecycle
//
// Nothing happens at import. Init (called by Available and by every entry
// point) loads libcuda and calls cuInit(0) once per process; the cuFile
// driver is opened only when OpenGDS is first called, because probing GDS can
// take seconds. A failed load or init is remembered: the process keeps the
// answer. Libraries are never unloaded, and the package never calls CUDA or
// cuFile from a finalizer, an atexit handler or any other process-exit path:
// Stager.Close and HBMCache.Close are explicit calls for a live process.
// CUDA, like the Go runtime, does not survive fork: do not use this package
// in a child forked after Init.
//
// # Threads and contexts
//
// CUDA's current context is per OS thread. Every call that needs one locks
// its goroutine to its OS thread for the duration, makes a context current,
// and restores the thread's previous current context before it returns, so
// a caller's own CUDA state (torch's, on a Python thread) is left as it was.
// Staged copies, one-shot copies and the HBM cache run in the primary
// context of the destination's device, which the package retains for the
// life of the process, and keep their pinned buffers, streams and events
// there (per device): a context the caller creates and destroys owns none
// of them. GDS reads, MemFree and CopyFromDevice run in the allocation's own
// context (the device's primary context for memory that has none, such as
// cuMemMap ranges). Every exported function and method is safe for concurrent use
// unless its documentation says otherwise.
//
// # Errors
//
// Failures are *Error values with a Kind the engine maps to a status code
// (KindInvalidPointer is an invalid argument, KindNoMemory is out of memory,
// KindUnavailable and KindUnsupported mean "use another path"), the CUDA or
// cuFile call that failed and its code. (*Error).Fallback says whether the
// staged path is worth trying instead, and Reason gives a short, stable key
// for fallback counters.
//
// gpu never imports the engine; the engine asks it for capabilities.
package gpu

// BuildTags lists the GPU backends compiled in ("cuda", "gds"), for diagnostics.
func BuildTags() []string { return append([]string(nil), buildTags...) }

var buildTags []string

// Config names the libraries Init and OpenGDS load. An empty field keeps the
// default: the environment variable, else the soname.
type Config struct {
	// CUDALibrary is the path or soname of the CUDA driver library
	// (MEMTIER_CUDA_LIBRARY, else "libcuda.so.1").
	CUDALibrary string
	// CUFileLibrary is the path or soname of cuFile
	// (MEMTIER_CUFILE_LIBRARY, else "libcufile.so.0").
	CUFileLibrary string
}

// Defaults for the sonames and the environment variables that override them.
const (
	DefaultCUDALibrary   = "libcuda.so.1"
	DefaultCUFileLibrary = "libcufile.so.0"
	EnvCUDALibrary       = "MEMTIER_CUDA_LIBRARY"
	EnvCUFileLibrary     = "MEMTIER_CUFILE_LIBRARY"
)
