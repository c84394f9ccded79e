//go:build cgo

package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// initState is the process's one attempt to load and initialise CUDA.
type initState struct {
	once    sync.Once
	err     *Error
	reason  string
	version int
	devices int
	library string
}

var (
	cfgMu   sync.Mutex
	cfg     Config
	state   atomic.Pointer[initState]
	started atomic.Bool // the load began: Configure is too late
	cudaOK  atomic.Bool // Init succeeded: later calls skip the once
)

func init() { state.Store(new(initState)) }

// Configure sets the library paths Init and OpenGDS load, overriding
// MEMTIER_CUDA_LIBRARY / MEMTIER_CUFILE_LIBRARY. It must come before the
// first Init (or Available, or any call that needs CUDA); later it returns a
// KindInvalidArg error and changes nothing, since a process loads CUDA once.
func Configure(c Config) error {
	cfgMu.Lock()
	defer cfgMu.Unlock()
	if started.Load() {
		return &Error{Kind: KindInvalidArg, Op: "Configure", Detail: "CUDA is already initialised in this process"}
	}
	cfg = c
	return nil
}

func configured() Config {
	cfgMu.Lock()
	defer cfgMu.Unlock()
	return cfg
}

// Init loads the CUDA driver library and calls cuInit(0), once per process;
// later calls return the first answer at once. nil means CUDA is usable and
// at least one device exists. The error is an *Error of kind KindUnavailable
// naming what is missing, e.g. "libcuda.so.1 not loaded: libcuda.so.1:
// cannot open shared object file: No such file or directory" or "cuInit
// failed: CUDA_ERROR_NO_DEVICE (100)". Safe for concurrent use; it never
// panics or aborts when the library is absent, broken or not a library.
func Init() error {
	if cudaOK.Load() {
		return nil
	}
	s := state.Load()
	s.once.Do(func() { s.run() })
	if s.err != nil {
		return s.err
	}
	return nil
}

func (s *initState) run() {
	started.Store(true)
	lib := configured().CUDALibrary
	if lib == "" {
		lib = cgetenv(EnvCUDALibrary)
	}
	if lib == "" {
		lib = DefaultCUDALibrary
	}
	s.library = lib
	if msg, ok := cudaLoad(lib); !ok {
		s.fail(&Error{Kind: KindUnavailable, Detail: lib + " not loaded: " + msg})
		return
	}
	if r := cuInit(); r != cudaSuccess {
		e := cudaError(KindUnavailable, "cuInit", r)
		if r == cudaErrorNotInitialized {
			// What a process forked after its parent initialised CUDA gets
			// (e.g. DataLoader workers of a torch parent;
			// https://github.com/triton-lang/triton/issues/10443).
			e.Detail = "failed, probably because CUDA was initialised in a parent process " +
				"before fork() (use spawn or forkserver worker processes)"
		}
		s.fail(e)
		return
	}
	if v, r := cuDriverGetVersion(); r == cudaSuccess {
		s.version = v
	}
	n, r := cuDeviceGetCount()
	if r != cudaSuccess {
		s.fail(cudaError(KindUnavailable, "cuDeviceGetCount", r))
		return
	}
	if n < 1 {
		s.fail(&Error{Kind: KindUnavailable, Detail: "no CUDA device (cuDeviceGetCount returned 0)"})
		return
	}
	s.devices = n
	s.reason = fmt.Sprintf("CUDA available: driver %d.%d, %d device(s), library %s",
		s.version/1000, s.version%1000/10, n, lib)
	cudaOK.Store(true)
}

func (s *initState) fail(e *Error) {
	s.err = e
	s.reason = "GPU target unavailable: " + e.Error()
}

// Available reports whether device reads can be served: it calls Init (the
// first call loads libcuda and initialises the driver). Safe for concurrent
// use.
func Available() bool { return Init() == nil }

// Reason explains Available's answer in one line: what is missing and why
// ("GPU target unavailable: ..."), or the driver version and device count.
// Calls Init.
func Reason() string {
	_ = Init()
	return state.Load().reason
}

// DeviceCount is the number of CUDA devices (0 when Init failed).
func DeviceCount() int {
	if Init() != nil {
		return 0
	}
	return state.Load().devices
}

// DriverVersion is cuDriverGetVersion's answer, e.g. 12040 for 12.4 (0 when
// Init failed).
func DriverVersion() int {
	if Init() != nil {
		return 0
	}
	return state.Load().version
}

// stickyHint is added to the message of a sticky error.
const stickyHint = "a sticky CUDA error: this process's CUDA context (torch's too) is unusable " +
	"and every later CUDA call fails; restart the process"

// stickyCodes are the CUresults after which the context cannot be used
// again in this process: "the process must be terminated and relaunched"
// (cuda.h on CUDA_ERROR_ILLEGAL_ADDRESS, _HARDWARE_STACK_ERROR,
// _ILLEGAL_INSTRUCTION, _MISALIGNED_ADDRESS, _INVALID_ADDRESS_SPACE,
// _INVALID_PC, _LAUNCH_FAILED; see CUresult in
// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html).
var stickyCodes = map[cuResult]bool{700: true, 714: true, 715: true, 716: true, 717: true, 718: true, 719: true}

// cudaError wraps a failed driver call. CUDA_ERROR_OUT_OF_MEMORY is always
// KindNoMemory; a sticky error is always KindCUDA (whatever call returned
// it, the context is dead, so "cannot pin" or "no device" would mislead)
// and says so.
func cudaError(kind Kind, op string, r cuResult) *Error {
	sticky := stickyCodes[r]
	switch {
	case r == cudaErrorOutOfMemory:
		kind = KindNoMemory
	case sticky:
		kind = KindCUDA
	}
	e := &Error{Kind: kind, Op: op, Code: int(r), CodeName: errorName(r)}
	if kind == KindCUDA {
		e.reason = "cuda_error"
	}
	if sticky {
		e.Detail = stickyHint
	}
	return e
}

// ------------------------------------------------------------- contexts

var (
	primaryMu sync.Mutex
	primaries = map[int]ctxHandle{}
)

// primaryContext retains device dev's primary context once and keeps it for
// the life of the process (it is never released: no exit-path CUDA calls).
func primaryContext(dev int) (ctxHandle, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	primaryMu.Lock()
	defer primaryMu.Unlock()
	if c, ok := primaries[dev]; ok {
		return c, nil
	}
	if dev < 0 || dev >= state.Load().devices {
		return 0, &Error{Kind: KindInvalidArg, Op: "primaryContext", Detail: fmt.Sprintf("no CUDA device %d", dev)}
	}
	d, r := cuDeviceGet(dev)
	if r != cudaSuccess {
		return 0, cudaError(KindCUDA, "cuDeviceGet", r)
	}
	c, r := cuDevicePrimaryCtxRetain(d)
	if r != cudaSuccess {
		return 0, cudaError(KindCUDA, "cuDevicePrimaryCtxRetain", r)
	}
	primaries[dev] = c
	return c, nil
}

// withContext runs f with its goroutine locked to the OS thread and ctx
// current on that thread, then restores the thread's previous context.
func withContext(ctx ctxHandle, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, r := cuCtxGetCurrent()
	if r != cudaSuccess {
		return cudaError(KindCUDA, "cuCtxGetCurrent", r)
	}
	if prev != ctx {
		if r := cuCtxSetCurrent(ctx); r != cudaSuccess {
			return cudaError(KindCUDA, "cuCtxSetCurrent", r)
		}
		defer cuCtxSetCurrent(prev)
	}
	return f()
}

// -------------------------------------------------------------- pointers

// PointerInfo describes a CUDA device pointer.
type PointerInfo struct {
	// Device is the ordinal of the device that holds the memory.
	Device int
	// Base and Size are the allocation that contains the pointer, as the
	// driver reports it (0, 0 when it does not).
	Base uintptr
	Size uint64
	// Managed: the memory is managed (cuMemAllocManaged;
	// CU_POINTER_ATTRIBUTE_IS_MANAGED), which cuFile cannot read into
	// (CU_FILE_CUDA_MEMORY_TYPE_INVALID): fill it staged.
	Managed bool
	ctx     ctxHandle
}

// InspectPointer checks that [ptr, ptr+size) is CUDA device memory and
// returns its device. Host memory (pageable or page-locked), NULL, unknown
// addresses, and a range that runs past the pointer's allocation give a
// KindInvalidPointer error; KindUnavailable when CUDA is not usable. size 0
// checks ptr alone. Safe for concurrent use; it queries the driver each time
// (a few microseconds).
func InspectPointer(ptr uintptr, size uint64) (PointerInfo, error) {
	if err := Init(); err != nil {
		return PointerInfo{}, err
	}
	if ptr == 0 {
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, Detail: "NULL device pointer"}
	}
	if ptr+uintptr(size) < ptr {
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, Detail: fmt.Sprintf("range 0x%x + %d overflows", ptr, size)}
	}
	var raw rawPointerInfo
	span := spanOK
	query := func() cuResult {
		var r cuResult
		if raw, r = pointerInfo(ptr); r != cudaSuccess || size == 0 ||
			(raw.memType != memoryTypeDevice && raw.memType != memoryTypeUnified) {
			return r
		}
		span, r = pointerSpan(ptr, ptr+uintptr(size)-1, raw.base)
		return r
	}
	r := query()
	if r == cudaErrorInvalidCtx {
		r = queryInActiveContext(query)
	}
	if r != cudaSuccess && stickyCodes[r] {
		return PointerInfo{}, cudaError(KindCUDA, "cuPointerGetAttribute", r)
	}
	if r != cudaSuccess {
		e := cudaError(KindInvalidPointer, "cuPointerGetAttribute", r)
		e.Detail = fmt.Sprintf("0x%x is not CUDA memory", ptr)
		if r == cudaErrorInvalidCtx {
			e.Detail += " (the driver answers only under a current context, and no CUDA context is active in this process)"
		}
		return PointerInfo{}, e
	}
	switch raw.memType {
	case memoryTypeDevice, memoryTypeUnified:
	case memoryTypeHost:
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, Detail: fmt.Sprintf("0x%x is page-locked host memory, not device memory", ptr)}
	default:
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, Detail: fmt.Sprintf("0x%x has CUDA memory type %d, not device memory", ptr, raw.memType)}
	}
	info := PointerInfo{Device: raw.ordinal, Base: raw.base, Size: raw.size, Managed: raw.managed, ctx: raw.ctx}
	if raw.size > 0 && (ptr < raw.base || uint64(ptr-raw.base) > raw.size || size > raw.size-uint64(ptr-raw.base)) {
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, reason: reasonRange, Detail: fmt.Sprintf(
			"range [0x%x, +%d) runs past its allocation [0x%x, +%d)", ptr, size, raw.base, raw.size)}
	}
	// For VMM memory (PyTorch expandable segments) and memory pools the range
	// above is the reserved VA, so it bounds little; the last byte must be
	// mapped device memory of the same range too (CU_POINTER_ATTRIBUTE_RANGE_SIZE,
	// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html).
	switch span {
	case spanOutsideRange:
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, reason: reasonRange, Detail: fmt.Sprintf(
			"range [0x%x, +%d) runs past its allocation: its last byte is not in the allocation's range", ptr, size)}
	case spanFirstUnmapped:
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, Detail: fmt.Sprintf(
			"0x%x is reserved but not mapped device memory", ptr)}
	case spanLastUnmapped:
		return PointerInfo{}, &Error{Kind: KindInvalidPointer, reason: reasonRange, Detail: fmt.Sprintf(
			"range [0x%x, +%d) runs past the mapped memory of its allocation [0x%x, +%d reserved)",
			ptr, size, raw.base, raw.size)}
	}
	if info.ctx == 0 {
		c, err := primaryContext(info.Device)
		if err != nil {
			return PointerInfo{}, err
		}
		info.ctx = c
	}
	return info, nil
}

// queryInActiveContext reruns a pointer query that failed with
// CUDA_ERROR_INVALID_CONTEXT under a context that already exists, never
// creating one: retaining device 0's primary context here would put a
// context (hundreds of MiB) on GPU 0 in every rank of a multi-GPU job, on an
// error path. It tries the primary contexts this process holds, then those other
// code (e.g. torch) made active, each retained only for the query. Returns
// the query's last answer (201 when no context was active).
func queryInActiveContext(query func() cuResult) cuResult {
	r := cudaErrorInvalidCtx
	cur, _ := cuCtxGetCurrent() // the query already ran under it
	n := state.Load().devices
	held := make([]ctxHandle, n)
	primaryMu.Lock()
	for d := range held {
		held[d] = primaries[d]
	}
	primaryMu.Unlock()
	for _, c := range held {
		if c != 0 && c != cur {
			_ = withContext(c, func() error { r = query(); return nil })
			if r != cudaErrorInvalidCtx {
				return r
			}
		}
	}
	for d := 0; d < n; d++ {
		if held[d] != 0 {
			continue
		}
		dev, rd := cuDeviceGet(d)
		if rd != cudaSuccess {
			continue
		}
		if active, rs := cuDevicePrimaryCtxGetState(dev); rs != cudaSuccess || !active {
			continue
		}
		c, rr := cuDevicePrimaryCtxRetain(dev)
		if rr != cudaSuccess {
			continue
		}
		if c != cur {
			_ = withContext(c, func() error { r = query(); return nil })
		}
		_ = cuDevicePrimaryCtxRelease(dev)
		if r != cudaErrorInvalidCtx {
			return r
		}
	}
	return r
}

// PointerDevice returns the device ordinal of a CUDA device pointer, or a
// KindInvalidPointer error for anything else (see InspectPointer).
func PointerDevice(ptr uintptr) (int, error) {
	info, err := InspectPointer(ptr, 0)
	return info.Device, err
}

// ------------------------------------------------------ device memory

// MemAlloc allocates size bytes of device memory on device (cuMemAlloc in
// its primary context). For tests, tools and the HBM cache: the engine
// never allocates the caller's memory. KindNoMemory when the device is full.
func MemAlloc(device int, size uint64) (uintptr, error) {
	if size == 0 {
		return 0, &Error{Kind: KindInvalidArg, Op: "MemAlloc", Detail: "size 0"}
	}
	ctx, err := primaryContext(device)
	if err != nil {
		return 0, err
	}
	var p uintptr
	err = withContext(ctx, func() error {
		var r cuResult
		if p, r = cuMemAlloc(size); r != cudaSuccess {
			return cudaError(KindNoMemory, "cuMemAlloc", r)
		}
		return nil
	})
	return p, err
}

// MemFree frees memory from MemAlloc (ptr must be the start of the
// allocation).
func MemFree(ptr uintptr) error {
	info, err := InspectPointer(ptr, 0)
	if err != nil {
		return err
	}
	return withContext(info.ctx, func() error {
		if r := cuMemFree(ptr); r != cudaSuccess {
			return cudaError(KindCUDA, "cuMemFree", r)
		}
		return nil
	})
}

// CopyFromDevice copies len(dst) bytes from device memory at src into dst
// (cuMemcpyDtoH, synchronous). For tests and tools that check what a read
// delivered; it does not wait for work queued on other streams.
func CopyFromDevice(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	info, err := InspectPointer(src, uint64(len(dst)))
	if err != nil {
		return err
	}
	return withContext(info.ctx, func() error {
		if r := dtoh(dst, src); r != cudaSuccess {
			return cudaError(KindCUDA, "cuMemcpyDtoH", r)
		}
		return nil
	})
}

// ---------------------------------------------------------------- streams

// Per-device pools of non-blocking streams for one-shot copies
// (CopyToDevice, the HBM cache), in each device's primary context (retained
// for the life of the process, so a handle never outlives its context or is
// confused with one of a later context at the same address). Streams are
// never destroyed while the process lives (they are small; no exit-path CUDA
// calls).
var (
	streamMu    sync.Mutex
	streamPools = map[int][]streamHandle{}
)

// getStream returns a stream of device dev; dev's primary context must be
// current.
func getStream(dev int) (streamHandle, error) {
	streamMu.Lock()
	if l := streamPools[dev]; len(l) > 0 {
		s := l[len(l)-1]
		streamPools[dev] = l[:len(l)-1]
		streamMu.Unlock()
		return s, nil
	}
	streamMu.Unlock()
	s, r := streamCreate()
	if r != cudaSuccess {
		return 0, cudaError(KindCUDA, "cuStreamCreate", r)
	}
	return s, nil
}

// putStream returns s to dev's pool, or destroys it after an error (dev's
// primary context current) so a stream in an unknown state is not reused.
func putStream(dev int, s streamHandle, failed bool) {
	if failed {
		_ = streamDestroy(s)
		return
	}
	streamMu.Lock()
	streamPools[dev] = append(streamPools[dev], s)
	streamMu.Unlock()
}

// copyHostToDevice copies src to dst on a pooled stream of device dev and
// waits (dev's primary context current).
func copyHostToDevice(dev int, dst uintptr, src []byte) error {
	s, err := getStream(dev)
	if err != nil {
		return err
	}
	r := htodSync(dst, src, s)
	putStream(dev, s, r != cudaSuccess)
	if r != cudaSuccess {
		return cudaError(KindCUDA, "cuMemcpyHtoDAsync", r)
	}
	return nil
}

// dtodCopy is one device-to-device copy of copyDevicesToDevice.
type dtodCopy struct {
	dst, src uintptr
	n        uint64
}

// copyDevicesToDevice queues every copy on one pooled stream of device dev
// and waits once, for all of them (dev's primary context current). After a
// failed enqueue it still waits for the copies already queued, so none
// outlives the call.
func copyDevicesToDevice(dev int, cps []dtodCopy) error {
	s, err := getStream(dev)
	if err != nil {
		return err
	}
	var e *Error
	for _, cp := range cps {
		if cp.n == 0 {
			continue
		}
		if r := dtodAsync(cp.dst, cp.src, cp.n, s); r != cudaSuccess {
			e = cudaError(KindCUDA, "cuMemcpyDtoDAsync", r)
			break
		}
	}
	if r := streamSync(s); r != cudaSuccess && e == nil {
		e = cudaError(KindCUDA, "cuStreamSynchronize", r)
	}
	putStream(dev, s, e != nil)
	if e != nil {
		return e
	}
	return nil
}
