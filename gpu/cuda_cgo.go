//go:build cgo

package gpu

// The CUDA driver API, loaded with dlopen. The prototypes below are this
// package's own declarations of the public driver API (cuda.h is not used):
// CUresult is an int, CUdevice an int, CUdeviceptr an unsigned long long,
// and contexts, streams and events are opaque pointers, passed to Go as
// uintptr_t so Go never holds them as pointers. Versioned entry points are
// resolved by their exported names (cuMemAlloc_v2, ...), as cuda.h's macros
// would. Every call goes through a small C wrapper; none of them call back
// into Go.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int mt_res;
typedef unsigned long long mt_dptr;

struct mt_cuda {
	void *lib;
	mt_res (*cuInit)(unsigned);
	mt_res (*cuDriverGetVersion)(int *);
	mt_res (*cuDeviceGetCount)(int *);
	mt_res (*cuDeviceGet)(int *, int);
	mt_res (*cuDevicePrimaryCtxRetain)(void **, int);
	mt_res (*cuCtxGetCurrent)(void **);
	mt_res (*cuCtxSetCurrent)(void *);
	mt_res (*cuPointerGetAttribute)(void *, int, mt_dptr);
	mt_res (*cuMemAlloc)(mt_dptr *, size_t);
	mt_res (*cuMemFree)(mt_dptr);
	mt_res (*cuMemHostRegister)(void *, size_t, unsigned);
	mt_res (*cuMemHostUnregister)(void *);
	mt_res (*cuMemcpyHtoDAsync)(mt_dptr, const void *, size_t, void *);
	mt_res (*cuMemcpyDtoH)(void *, mt_dptr, size_t);
	mt_res (*cuMemcpyDtoDAsync)(mt_dptr, mt_dptr, size_t, void *);
	mt_res (*cuStreamCreate)(void **, unsigned);
	mt_res (*cuStreamSynchronize)(void *);
	mt_res (*cuStreamDestroy)(void *);
	mt_res (*cuEventCreate)(void **, unsigned);
	mt_res (*cuEventRecord)(void *, void *);
	mt_res (*cuEventSynchronize)(void *);
	mt_res (*cuEventDestroy)(void *);
	mt_res (*cuGetErrorName)(mt_res, const char **); // optional
	// Optional too (every driver since CUDA 7 has them; InspectPointer does
	// without them): the 201 retry and the DEVICE_ORDINAL fallback.
	mt_res (*cuDevicePrimaryCtxGetState)(int, unsigned *, int *);
	mt_res (*cuDevicePrimaryCtxRelease)(int);
	mt_res (*cuCtxGetDevice)(int *);
};

static struct mt_cuda mt_cu;

// dl_cgo.go's loader, shared with gds_cgo.go.
struct mt_dl_sym { void **slot; const char *name; };
int mt_dl_load(const char *path, void **lib, const struct mt_dl_sym *syms, size_t n, const char *hint,
               char *err, size_t errlen);

// Loads path and resolves every symbol; fills mt_cu only when all are there.
// Returns 0, or -1 (dlopen failed) / -2 (a symbol is missing) with err set.
// A library that loaded is never unloaded.
static int mt_cuda_load(const char *path, char *err, size_t errlen) {
	struct mt_cuda t;
	memset(&t, 0, sizeof t);
	const struct mt_dl_sym syms[] = {
		{(void **)&t.cuInit, "cuInit"},
		{(void **)&t.cuDriverGetVersion, "cuDriverGetVersion"},
		{(void **)&t.cuDeviceGetCount, "cuDeviceGetCount"},
		{(void **)&t.cuDeviceGet, "cuDeviceGet"},
		{(void **)&t.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{(void **)&t.cuCtxGetCurrent, "cuCtxGetCurrent"},
		{(void **)&t.cuCtxSetCurrent, "cuCtxSetCurrent"},
		{(void **)&t.cuPointerGetAttribute, "cuPointerGetAttribute"},
		{(void **)&t.cuMemAlloc, "cuMemAlloc_v2"},
		{(void **)&t.cuMemFree, "cuMemFree_v2"},
		{(void **)&t.cuMemHostRegister, "cuMemHostRegister_v2"},
		{(void **)&t.cuMemHostUnregister, "cuMemHostUnregister"},
		{(void **)&t.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
		{(void **)&t.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
		{(void **)&t.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
		{(void **)&t.cuStreamCreate, "cuStreamCreate"},
		{(void **)&t.cuStreamSynchronize, "cuStreamSynchronize"},
		{(void **)&t.cuStreamDestroy, "cuStreamDestroy_v2"},
		{(void **)&t.cuEventCreate, "cuEventCreate"},
		{(void **)&t.cuEventRecord, "cuEventRecord"},
		{(void **)&t.cuEventSynchronize, "cuEventSynchronize"},
		{(void **)&t.cuEventDestroy, "cuEventDestroy_v2"},
	};
	int rc = mt_dl_load(path, &t.lib, syms, sizeof syms / sizeof syms[0], " (driver too old?)", err, errlen);
	if (rc != 0) return rc;
	*(void **)&t.cuGetErrorName = dlsym(t.lib, "cuGetErrorName"); // optional
	*(void **)&t.cuDevicePrimaryCtxGetState = dlsym(t.lib, "cuDevicePrimaryCtxGetState");
	*(void **)&t.cuDevicePrimaryCtxRelease = dlsym(t.lib, "cuDevicePrimaryCtxRelease_v2");
	if (!t.cuDevicePrimaryCtxRelease) *(void **)&t.cuDevicePrimaryCtxRelease = dlsym(t.lib, "cuDevicePrimaryCtxRelease");
	*(void **)&t.cuCtxGetDevice = dlsym(t.lib, "cuCtxGetDevice");
	mt_cu = t;
	return 0;
}

static uintptr_t mt_cuda_lib(void) { return (uintptr_t)mt_cu.lib; }

static mt_res mt_cuInit(void) { return mt_cu.cuInit(0); }
static mt_res mt_cuDriverGetVersion(int *v) { return mt_cu.cuDriverGetVersion(v); }
static mt_res mt_cuDeviceGetCount(int *n) { return mt_cu.cuDeviceGetCount(n); }
static mt_res mt_cuDeviceGet(int *d, int ordinal) { return mt_cu.cuDeviceGet(d, ordinal); }

static mt_res mt_cuDevicePrimaryCtxRetain(uintptr_t *ctx, int dev) {
	void *c = NULL;
	mt_res r = mt_cu.cuDevicePrimaryCtxRetain(&c, dev);
	*ctx = (uintptr_t)c;
	return r;
}
// -1: the driver lacks cuDevicePrimaryCtxGetState / _Release.
static mt_res mt_cuDevicePrimaryCtxGetState(int dev, int *active) {
	unsigned flags = 0;
	*active = 0;
	if (!mt_cu.cuDevicePrimaryCtxGetState) return -1;
	return mt_cu.cuDevicePrimaryCtxGetState(dev, &flags, active);
}
static mt_res mt_cuDevicePrimaryCtxRelease(int dev) {
	if (!mt_cu.cuDevicePrimaryCtxRelease) return -1;
	return mt_cu.cuDevicePrimaryCtxRelease(dev);
}
static mt_res mt_cuCtxGetCurrent(uintptr_t *ctx) {
	void *c = NULL;
	mt_res r = mt_cu.cuCtxGetCurrent(&c);
	*ctx = (uintptr_t)c;
	return r;
}
static mt_res mt_cuCtxSetCurrent(uintptr_t ctx) { return mt_cu.cuCtxSetCurrent((void *)ctx); }

// The device of context c, asked with c current on this thread for the
// duration of the call (the thread's context is restored).
static mt_res mt_ctx_device(void *c, int *ordinal) {
	void *prev = NULL;
	if (!mt_cu.cuCtxGetDevice) return 1; // CUDA_ERROR_INVALID_VALUE: unknown
	mt_res r = mt_cu.cuCtxGetCurrent(&prev);
	if (r != 0) return r;
	if (prev != c && (r = mt_cu.cuCtxSetCurrent(c)) != 0) return r;
	r = mt_cu.cuCtxGetDevice(ordinal);
	if (prev != c) mt_cu.cuCtxSetCurrent(prev);
	return r;
}

// cuda.h: CU_POINTER_ATTRIBUTE_CONTEXT 1, _MEMORY_TYPE 2, _IS_MANAGED 8,
// _DEVICE_ORDINAL 9, _RANGE_START_ADDR 11, _RANGE_SIZE 12;
// CU_MEMORYTYPE_DEVICE 2, _UNIFIED 4. Fills *memtype; for device memory also
// the ordinal, the allocation's context (0 when it has none), its range (0, 0
// when not reported) and whether it is managed memory (a boolean read into a
// zeroed int; 0 when not answered). When DEVICE_ORDINAL is not answered the
// ordinal is the device of the allocation's context.
static mt_res mt_pointer_info(mt_dptr p, unsigned *memtype, int *ordinal, uintptr_t *ctx,
                              mt_dptr *base, unsigned long long *size, unsigned *managed) {
	*memtype = 0;
	*ordinal = -1;
	*ctx = 0;
	*base = 0;
	*size = 0;
	*managed = 0;
	mt_res r = mt_cu.cuPointerGetAttribute(memtype, 2, p);
	if (r != 0 || (*memtype != 2 && *memtype != 4)) return r;
	void *c = NULL;
	if (mt_cu.cuPointerGetAttribute(&c, 1, p) != 0) c = NULL;
	r = mt_cu.cuPointerGetAttribute(ordinal, 9, p);
	if (r == 201) return r;
	if (r != 0) {
		if (!c || mt_ctx_device(c, ordinal) != 0) return r;
	}
	*ctx = (uintptr_t)c;
	mt_dptr b = 0;
	size_t s = 0;
	if (mt_cu.cuPointerGetAttribute(&b, 11, p) == 0 && mt_cu.cuPointerGetAttribute(&s, 12, p) == 0) {
		*base = b;
		*size = s;
	}
	unsigned m = 0;
	if (mt_cu.cuPointerGetAttribute(&m, 8, p) == 0) *managed = m != 0;
	return 0;
}

// cuda.h: CU_POINTER_ATTRIBUTE_MAPPED 13 (a boolean; read into a zeroed
// int, so a one-byte or a four-byte answer reads the same). Checks what the
// range attributes cannot for VMM reservations and memory pools, where
// RANGE_START_ADDR/RANGE_SIZE describe the reserved VA, not the mapped
// memory (CU_POINTER_ATTRIBUTE_RANGE_SIZE in
// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html): *state is 0 (nothing found wrong), 1 (last is not
// device memory of the range that starts at base), 2 (first is not mapped)
// or 3 (last is not mapped). A driver that does not answer MAPPED is not
// second-guessed. Returns 201 when the driver wants a current context.
static mt_res mt_pointer_span(mt_dptr first, mt_dptr last, mt_dptr base, int *state) {
	*state = 0;
	unsigned mt = 0;
	mt_res r = mt_cu.cuPointerGetAttribute(&mt, 2, last);
	if (r == 201) return r;
	if (r != 0 || (mt != 2 && mt != 4)) {
		*state = 1;
		return 0;
	}
	mt_dptr b = 0;
	if (base != 0 && mt_cu.cuPointerGetAttribute(&b, 11, last) == 0 && b != base) {
		*state = 1;
		return 0;
	}
	unsigned mapped = 0;
	if (mt_cu.cuPointerGetAttribute(&mapped, 13, first) == 0 && !mapped) {
		*state = 2;
		return 0;
	}
	mapped = 0;
	if (mt_cu.cuPointerGetAttribute(&mapped, 13, last) == 0 && !mapped) *state = 3;
	return 0;
}

static mt_res mt_cuMemAlloc(mt_dptr *p, size_t n) { return mt_cu.cuMemAlloc(p, n); }
static mt_res mt_cuMemFree(mt_dptr p) { return mt_cu.cuMemFree(p); }

// A page-aligned anonymous mapping, pinned for every context
// (CU_MEMHOSTREGISTER_PORTABLE = 1). NULL with *res set on failure; *res is
// -1 when mmap itself failed.
static void *mt_pinned_alloc(size_t n, mt_res *res) {
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		*res = -1;
		return NULL;
	}
	*res = mt_cu.cuMemHostRegister(p, n, 1);
	if (*res != 0) {
		munmap(p, n);
		return NULL;
	}
	return p;
}
static mt_res mt_pinned_free(void *p, size_t n) {
	mt_res r = mt_cu.cuMemHostUnregister(p);
	munmap(p, n);
	return r;
}

static mt_res mt_htod_async(mt_dptr dst, void *src, size_t n, uintptr_t s) {
	return mt_cu.cuMemcpyHtoDAsync(dst, src, n, (void *)s);
}
static mt_res mt_stream_sync(uintptr_t s);
// One async copy from (possibly pageable, possibly Go) memory and the
// stream's (blocking) sync in the same C call, so the driver holds src only
// during it.
static mt_res mt_htod_sync(mt_dptr dst, const void *src, size_t n, uintptr_t s) {
	mt_res r = mt_cu.cuMemcpyHtoDAsync(dst, src, n, (void *)s);
	mt_res r2 = mt_stream_sync(s);
	return r != 0 ? r : r2;
}
static mt_res mt_dtod_async(mt_dptr dst, mt_dptr src, size_t n, uintptr_t s) {
	return mt_cu.cuMemcpyDtoDAsync(dst, src, n, (void *)s);
}
static mt_res mt_dtoh(void *dst, mt_dptr src, size_t n) { return mt_cu.cuMemcpyDtoH(dst, src, n); }

// CU_STREAM_NON_BLOCKING = 1: no implicit sync with the legacy default stream.
static mt_res mt_stream_create(uintptr_t *s) {
	void *x = NULL;
	mt_res r = mt_cu.cuStreamCreate(&x, 1);
	*s = (uintptr_t)x;
	return r;
}
// CU_EVENT_BLOCKING_SYNC 1 | CU_EVENT_DISABLE_TIMING 2: an event for
// ordering only whose cuEventSynchronize sleeps until the work is done.
// Without BLOCKING_SYNC the context's scheduling flag decides, and under the
// primary context's default (CU_CTX_SCHED_AUTO, fewer contexts than CPUs)
// every wait spins a core. See CU_EVENT_BLOCKING_SYNC and CU_CTX_SCHED_AUTO in
// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html and
// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html. The
// context's flags are not touched: the primary context is torch's too.
#define MT_EVENT_FLAGS 3u
// Waits for everything queued on s, sleeping rather than spinning: a
// blocking-sync event recorded at the end of s and waited on (plain
// cuStreamSynchronize spins like the events above). Falls back to
// cuStreamSynchronize when no event can be made.
static mt_res mt_stream_sync(uintptr_t s) {
	void *e = NULL;
	if (mt_cu.cuEventCreate(&e, MT_EVENT_FLAGS) != 0) return mt_cu.cuStreamSynchronize((void *)s);
	mt_res r = mt_cu.cuEventRecord(e, (void *)s);
	if (r == 0) r = mt_cu.cuEventSynchronize(e);
	else r = mt_cu.cuStreamSynchronize((void *)s);
	mt_cu.cuEventDestroy(e);
	return r;
}
static mt_res mt_stream_destroy(uintptr_t s) { return mt_cu.cuStreamDestroy((void *)s); }
static mt_res mt_event_create(uintptr_t *e) {
	void *x = NULL;
	mt_res r = mt_cu.cuEventCreate(&x, MT_EVENT_FLAGS);
	*e = (uintptr_t)x;
	return r;
}
static mt_res mt_event_record(uintptr_t e, uintptr_t s) { return mt_cu.cuEventRecord((void *)e, (void *)s); }
static mt_res mt_event_sync(uintptr_t e) { return mt_cu.cuEventSynchronize((void *)e); }
static mt_res mt_event_destroy(uintptr_t e) { return mt_cu.cuEventDestroy((void *)e); }

static const char *mt_error_name(mt_res r) {
	const char *s = NULL;
	if (mt_cu.cuGetErrorName && mt_cu.cuGetErrorName(r, &s) == 0) return s;
	return NULL;
}

// Test doubles only: calls an optional counter hook of a loaded library
// ("long long fn(const char *)", -2 when the library has none) or an
// optional reset hook ("void fn(void)", 0 when absent).
static long long mt_hook_stat(uintptr_t lib, const char *fn, const char *name) {
	long long (*f)(const char *);
	*(void **)&f = lib ? dlsym((void *)lib, fn) : NULL;
	return f ? f(name) : -2;
}
// Tests only: a context of the test's own (cuCtxCreate_v2, left current on
// this thread) or its destruction (cuCtxDestroy_v2), resolved when called;
// -1 when the library lacks the call.
static mt_res mt_hook_ctx_create(uintptr_t lib, int dev, uintptr_t *ctx) {
	mt_res (*f)(void **, unsigned, int);
	*(void **)&f = lib ? dlsym((void *)lib, "cuCtxCreate_v2") : NULL;
	if (!f) return -1;
	void *c = NULL;
	mt_res r = f(&c, 0, dev);
	*ctx = (uintptr_t)c;
	return r;
}
static mt_res mt_hook_ctx_destroy(uintptr_t lib, uintptr_t ctx) {
	mt_res (*f)(void *);
	*(void **)&f = lib ? dlsym((void *)lib, "cuCtxDestroy_v2") : NULL;
	return f ? f((void *)ctx) : -1;
}
static int mt_hook_call(uintptr_t lib, const char *fn) {
	void (*f)(void);
	*(void **)&f = lib ? dlsym((void *)lib, fn) : NULL;
	if (!f) return 0;
	f();
	return 1;
}
*/
import "C"

import (
	"unsafe"
)

// cuResult is a CUresult; 0 is CUDA_SUCCESS.
type cuResult int

// CUresult values this package looks at (cuda.h).
const (
	cudaSuccess             cuResult = 0
	cudaErrorOutOfMemory    cuResult = 2
	cudaErrorNotInitialized cuResult = 3
	cudaErrorInvalidCtx     cuResult = 201
	memoryTypeHost                   = 1
	memoryTypeDevice                 = 2
	memoryTypeUnified                = 4
)

// Opaque driver handles, as integers.
type (
	ctxHandle    uintptr
	streamHandle uintptr
	eventHandle  uintptr
)

func cudaLoad(path string) (string, bool) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	if C.mt_cuda_load(cpath, &buf[0], C.size_t(len(buf))) != 0 {
		return C.GoString(&buf[0]), false
	}
	return "", true
}

func cudaLibHandle() uintptr { return uintptr(C.mt_cuda_lib()) }

func cuInit() cuResult { return cuResult(C.mt_cuInit()) }

func cuDriverGetVersion() (int, cuResult) {
	var v C.int
	r := C.mt_cuDriverGetVersion(&v)
	return int(v), cuResult(r)
}

func cuDeviceGetCount() (int, cuResult) {
	var n C.int
	r := C.mt_cuDeviceGetCount(&n)
	return int(n), cuResult(r)
}

func cuDeviceGet(ordinal int) (int, cuResult) {
	var d C.int
	r := C.mt_cuDeviceGet(&d, C.int(ordinal))
	return int(d), cuResult(r)
}

func cuDevicePrimaryCtxRetain(dev int) (ctxHandle, cuResult) {
	var c C.uintptr_t
	r := C.mt_cuDevicePrimaryCtxRetain(&c, C.int(dev))
	return ctxHandle(c), cuResult(r)
}

func cuCtxGetCurrent() (ctxHandle, cuResult) {
	var c C.uintptr_t
	r := C.mt_cuCtxGetCurrent(&c)
	return ctxHandle(c), cuResult(r)
}

func cuCtxSetCurrent(c ctxHandle) cuResult { return cuResult(C.mt_cuCtxSetCurrent(C.uintptr_t(c))) }

// cuDevicePrimaryCtxGetState reports whether dev's primary context is active
// (retained by someone). r is -1 when the driver lacks the call.
func cuDevicePrimaryCtxGetState(dev int) (bool, cuResult) {
	var active C.int
	r := C.mt_cuDevicePrimaryCtxGetState(C.int(dev), &active)
	return active != 0, cuResult(r)
}

// cuDevicePrimaryCtxRelease drops one reference to dev's primary context
// (-1 when the driver lacks the call).
func cuDevicePrimaryCtxRelease(dev int) cuResult {
	return cuResult(C.mt_cuDevicePrimaryCtxRelease(C.int(dev)))
}

type rawPointerInfo struct {
	memType uint
	ordinal int
	ctx     ctxHandle
	base    uintptr
	size    uint64
	managed bool
}

func pointerInfo(p uintptr) (rawPointerInfo, cuResult) {
	var mt C.unsigned
	var ord C.int
	var ctx C.uintptr_t
	var base C.mt_dptr
	var size C.ulonglong
	var managed C.unsigned
	r := C.mt_pointer_info(C.mt_dptr(p), &mt, &ord, &ctx, &base, &size, &managed)
	return rawPointerInfo{uint(mt), int(ord), ctxHandle(ctx), uintptr(base), uint64(size), managed != 0}, cuResult(r)
}

// spanState is mt_pointer_span's verdict on [first, last].
type spanState int

const (
	spanOK            spanState = 0
	spanOutsideRange  spanState = 1
	spanFirstUnmapped spanState = 2
	spanLastUnmapped  spanState = 3
)

// pointerSpan checks that last lies in the range that starts at base and
// that first and last are mapped (see mt_pointer_span).
func pointerSpan(first, last, base uintptr) (spanState, cuResult) {
	var st C.int
	r := C.mt_pointer_span(C.mt_dptr(first), C.mt_dptr(last), C.mt_dptr(base), &st)
	return spanState(st), cuResult(r)
}

func cuMemAlloc(n uint64) (uintptr, cuResult) {
	var p C.mt_dptr
	r := C.mt_cuMemAlloc(&p, C.size_t(n))
	return uintptr(p), cuResult(r)
}

func cuMemFree(p uintptr) cuResult { return cuResult(C.mt_cuMemFree(C.mt_dptr(p))) }

// pinnedAlloc maps n bytes (page aligned) and registers them with CUDA.
// r is -1 when mmap failed.
func pinnedAlloc(n uint64) (unsafe.Pointer, cuResult) {
	var r C.mt_res
	p := C.mt_pinned_alloc(C.size_t(n), &r)
	return p, cuResult(r)
}

func pinnedFree(p unsafe.Pointer, n uint64) cuResult {
	return cuResult(C.mt_pinned_free(p, C.size_t(n)))
}

// htodAsync enqueues a copy from C (pinned) memory.
func htodAsync(dst uintptr, src unsafe.Pointer, n uint64, s streamHandle) cuResult {
	return cuResult(C.mt_htod_async(C.mt_dptr(dst), src, C.size_t(n), C.uintptr_t(s)))
}

// htodSync copies src (any host memory, Go memory included) and waits.
func htodSync(dst uintptr, src []byte, s streamHandle) cuResult {
	return cuResult(C.mt_htod_sync(C.mt_dptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), C.uintptr_t(s)))
}

// dtodAsync enqueues a device-to-device copy on s.
func dtodAsync(dst, src uintptr, n uint64, s streamHandle) cuResult {
	return cuResult(C.mt_dtod_async(C.mt_dptr(dst), C.mt_dptr(src), C.size_t(n), C.uintptr_t(s)))
}

func dtoh(dst []byte, src uintptr) cuResult {
	return cuResult(C.mt_dtoh(unsafe.Pointer(&dst[0]), C.mt_dptr(src), C.size_t(len(dst))))
}

func streamCreate() (streamHandle, cuResult) {
	var s C.uintptr_t
	r := C.mt_stream_create(&s)
	return streamHandle(s), cuResult(r)
}

// streamSync waits for all work queued on s; the thread sleeps instead of
// spinning (a blocking-sync event, see mt_stream_sync). s's context is current.
func streamSync(s streamHandle) cuResult    { return cuResult(C.mt_stream_sync(C.uintptr_t(s))) }
func streamDestroy(s streamHandle) cuResult { return cuResult(C.mt_stream_destroy(C.uintptr_t(s))) }

func eventCreate() (eventHandle, cuResult) {
	var e C.uintptr_t
	r := C.mt_event_create(&e)
	return eventHandle(e), cuResult(r)
}

func eventRecord(e eventHandle, s streamHandle) cuResult {
	return cuResult(C.mt_event_record(C.uintptr_t(e), C.uintptr_t(s)))
}
func eventSync(e eventHandle) cuResult    { return cuResult(C.mt_event_sync(C.uintptr_t(e))) }
func eventDestroy(e eventHandle) cuResult { return cuResult(C.mt_event_destroy(C.uintptr_t(e))) }

// errorName is cuGetErrorName's answer, else a name from the table below,
// else "".
func errorName(r cuResult) string {
	if s := C.mt_error_name(C.mt_res(r)); s != nil {
		return C.GoString(s)
	}
	return cudaErrorNames[r]
}

// cgetenv reads the environment through the C library, which sees values
// set after process start (a c-shared Go runtime's os.Getenv does not).
func cgetenv(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if v := C.getenv(cname); v != nil {
		return C.GoString(v)
	}
	return ""
}

// hookStat and hookCall reach the counters of the test doubles
// (tests/gpu_double); against real libraries they find nothing.
func hookStat(lib uintptr, fn, name string) (int64, bool) {
	cfn, cname := C.CString(fn), C.CString(name)
	defer C.free(unsafe.Pointer(cfn))
	defer C.free(unsafe.Pointer(cname))
	v := int64(C.mt_hook_stat(C.uintptr_t(lib), cfn, cname))
	return v, v >= 0
}

// hookCtxCreate and hookCtxDestroy make and destroy a context of the
// caller's own on the loaded driver (tests of context ownership); the new
// context is current on the calling thread, which the caller locks.
func hookCtxCreate(dev int) (ctxHandle, cuResult) {
	var c C.uintptr_t
	r := C.mt_hook_ctx_create(C.uintptr_t(cudaLibHandle()), C.int(dev), &c)
	return ctxHandle(c), cuResult(r)
}

func hookCtxDestroy(c ctxHandle) cuResult {
	return cuResult(C.mt_hook_ctx_destroy(C.uintptr_t(cudaLibHandle()), C.uintptr_t(c)))
}

func hookCall(lib uintptr, fn string) bool {
	cfn := C.CString(fn)
	defer C.free(unsafe.Pointer(cfn))
	return C.mt_hook_call(C.uintptr_t(lib), cfn) != 0
}

// cudaErrorNames covers drivers without cuGetErrorName's answer.
var cudaErrorNames = map[cuResult]string{
	1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
	4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
	100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE", 201: "CUDA_ERROR_INVALID_CONTEXT",
	304: "CUDA_ERROR_OPERATING_SYSTEM", 400: "CUDA_ERROR_INVALID_HANDLE", 600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS", 712: "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	713: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", 714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION", 716: "CUDA_ERROR_MISALIGNED_ADDRESS",
	717: "CUDA_ERROR_INVALID_ADDRESS_SPACE", 718: "CUDA_ERROR_INVALID_PC", 719: "CUDA_ERROR_LAUNCH_FAILED",
	801: "CUDA_ERROR_NOT_SUPPORTED", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}
