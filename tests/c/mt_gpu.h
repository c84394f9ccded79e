/*
 * mt_gpu.h: device memory for the C GPU tests (header only, with mt_test.h).
 *
 * The tests allocate and read back device memory themselves, through the same
 * CUDA driver library libmemtier.so loads: $MEMTIER_CUDA_LIBRARY (ctest points
 * it at the test double, tests/gpu_double) or libcuda.so.1 (a real driver, as
 * scripts/gpu_check.sh run does). A few driver prototypes are declared here;
 * no CUDA header is needed. With the double, its counters and failure
 * switches are reachable (mt_gpu_fake); with a real driver they are not, and
 * the checks that need them are skipped with a note.
 */
#ifndef MT_GPU_H
#define MT_GPU_H

#include "mt_test.h"

#include <dlfcn.h>

typedef int mt_cu_result;
typedef unsigned long long mt_cu_ptr;

typedef struct {
    void* lib;
    void* cufile; /* the cuFile double, when loaded by libmemtier (else NULL) */
    int fake;     /* the library is the test double */
    void* ctx;    /* device 0's primary context */
    mt_cu_result (*cuInit)(unsigned);
    mt_cu_result (*cuDeviceGet)(int*, int);
    mt_cu_result (*cuDevicePrimaryCtxRetain)(void**, int);
    mt_cu_result (*cuCtxSetCurrent)(void*);
    mt_cu_result (*cuMemAlloc)(mt_cu_ptr*, size_t);
    mt_cu_result (*cuMemFree)(mt_cu_ptr);
    mt_cu_result (*cuMemcpyDtoH)(void*, mt_cu_ptr, size_t);
    long long (*fake_cuda_stat)(const char*);
    void (*fake_cuda_reset)(void);
} mt_gpu_t;

static mt_gpu_t mt_gpu;

/* Loads the driver library, makes device 0's primary context current on the
 * calling thread, or skips the test (77) when there is no usable CUDA. */
MT_FN void mt_gpu_open(void) {
    const char* name = getenv("MEMTIER_CUDA_LIBRARY");
    int dev = 0;
    mt_cu_result r;
    if (name == NULL || name[0] == '\0') name = "libcuda.so.1";
    mt_gpu.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (mt_gpu.lib == NULL) {
        char msg[600];
        snprintf(msg, sizeof msg, "no CUDA driver library: %s", dlerror());
        mt_skip(msg);
    }
#define MT_GPU_SYM(field, sym)                                                     \
    do {                                                                           \
        *(void**)&mt_gpu.field = dlsym(mt_gpu.lib, sym);                           \
        if (mt_gpu.field == NULL) MT_FAIL("%s: symbol %s not found", name, sym);   \
    } while (0)
    MT_GPU_SYM(cuInit, "cuInit");
    MT_GPU_SYM(cuDeviceGet, "cuDeviceGet");
    MT_GPU_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    MT_GPU_SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
    MT_GPU_SYM(cuMemAlloc, "cuMemAlloc_v2");
    MT_GPU_SYM(cuMemFree, "cuMemFree_v2");
    MT_GPU_SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
#undef MT_GPU_SYM
    *(void**)&mt_gpu.fake_cuda_stat = dlsym(mt_gpu.lib, "fake_cuda_stat");
    *(void**)&mt_gpu.fake_cuda_reset = dlsym(mt_gpu.lib, "fake_cuda_reset");
    mt_gpu.fake = mt_gpu.fake_cuda_stat != NULL;
    if ((r = mt_gpu.cuInit(0)) != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "cuInit failed (%d): no usable GPU", r);
        mt_skip(msg);
    }
    if ((r = mt_gpu.cuDeviceGet(&dev, 0)) != 0) MT_FAIL("cuDeviceGet: %d", r);
    if ((r = mt_gpu.cuDevicePrimaryCtxRetain(&mt_gpu.ctx, dev)) != 0)
        MT_FAIL("cuDevicePrimaryCtxRetain: %d", r);
    if ((r = mt_gpu.cuCtxSetCurrent(mt_gpu.ctx)) != 0) MT_FAIL("cuCtxSetCurrent: %d", r);
    printf("CUDA driver library: %s (%s)\n", name, mt_gpu.fake ? "test double" : "real driver");
}

/* Device memory of n bytes (device 0); the test fails if it cannot be had. */
MT_FN mt_cu_ptr mt_gpu_alloc(size_t n) {
    mt_cu_ptr p = 0;
    mt_cu_result r;
    mt_gpu.cuCtxSetCurrent(mt_gpu.ctx);
    r = mt_gpu.cuMemAlloc(&p, n ? n : 1);
    if (r != 0) MT_FAIL("cuMemAlloc(%zu): %d", n, r);
    return p;
}

MT_FN void mt_gpu_free(mt_cu_ptr p) {
    mt_gpu.cuCtxSetCurrent(mt_gpu.ctx);
    mt_gpu.cuMemFree(p);
}

/* Copies n bytes of device memory at src to host memory (synchronous). */
MT_FN void mt_gpu_get(void* dst, mt_cu_ptr src, size_t n) {
    mt_cu_result r;
    if (n == 0) return;
    mt_gpu.cuCtxSetCurrent(mt_gpu.ctx);
    r = mt_gpu.cuMemcpyDtoH(dst, src, n);
    if (r != 0) MT_FAIL("cuMemcpyDtoH(%zu bytes): %d", n, r);
}

/* Reads [off, off+n) of path to device memory at dst with target CUDA, copies
 * it back and checks it against the P pattern; the byte after it, guard,
 * must keep its value. */
MT_FN void mt_gpu_read_checked(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t n,
                               mt_cu_ptr dst, uint8_t* host) {
    uint8_t before = 0, after = 0;
    mt_gpu_get(&before, dst + n, 1);
    memset(host, 0x11, n);
    MT_OK(memtier_read(ctx, path, off, n, (void*)(uintptr_t)dst, MEMTIER_TARGET_CUDA));
    mt_gpu_get(host, dst, n);
    mt_gpu_get(&after, dst + n, 1);
    if (mt_find_p_mismatch(host, off, n) >= 0)
        MT_FAIL("CUDA read (%llu, %llu): byte %lld differs from the file", (unsigned long long)off,
                (unsigned long long)n, (long long)mt_find_p_mismatch(host, off, n));
    MT_CHECK(before == after, "CUDA read (%llu, %llu) wrote past its end",
             (unsigned long long)off, (unsigned long long)n);
}

/* A counter of the CUDA double (-1 with a real driver). */
MT_FN long long mt_fake(const char* name) {
    return mt_gpu.fake_cuda_stat ? mt_gpu.fake_cuda_stat(name) : -1;
}

/* A counter of the cuFile double (-1 when it is not loaded). */
MT_FN long long mt_fake_cufile(const char* name) {
    long long (*f)(const char*) = NULL;
    const char* lib = getenv("MEMTIER_CUFILE_LIBRARY");
    if (!mt_gpu.fake || lib == NULL) return -1;
    if (mt_gpu.cufile == NULL) mt_gpu.cufile = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (mt_gpu.cufile == NULL) return -1;
    *(void**)&f = dlsym(mt_gpu.cufile, "fake_cufile_stat");
    return f ? f(name) : -1;
}

/* Sets a failure switch of the doubles (read at each call) and restarts
 * their fault counts; value NULL clears it. */
MT_FN void mt_fake_switch(const char* name, const char* value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    if (mt_gpu.fake_cuda_reset) mt_gpu.fake_cuda_reset();
    (void)mt_fake_cufile("calls_cuFileRead"); /* finds the cuFile double once loaded */
    if (mt_gpu.cufile) {
        void (*reset)(void) = NULL;
        *(void**)&reset = dlsym(mt_gpu.cufile, "fake_cufile_reset");
        if (reset) reset();
    }
}

/* Requires the test double (its switches or counters); skips the rest of the
 * test with a note otherwise. */
#define MT_NEED_FAKE(what)                                                   \
    do {                                                                     \
        if (!mt_gpu.fake) {                                                  \
            printf("note: %s needs the test double; skipped on a real GPU\n", what); \
            return;                                                          \
        }                                                                    \
    } while (0)

MT_FN memtier_stats_t mt_stats_delta(const memtier_stats_t* a, const memtier_stats_t* b) {
    memtier_stats_t d;
    const uint64_t* x = (const uint64_t*)a;
    const uint64_t* y = (const uint64_t*)b;
    uint64_t* z = (uint64_t*)&d;
    size_t i;
    for (i = 0; i < sizeof d / sizeof(uint64_t); i++) z[i] = y[i] - x[i];
    return d;
}

/* The stats a checked CUDA read (mt_gpu_read_checked) moved. */
MT_FN memtier_stats_t mt_gpu_read_delta(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t n,
                                        mt_cu_ptr dst, uint8_t* host) {
    memtier_stats_t a = mt_stats(ctx), b;
    mt_gpu_read_checked(ctx, path, off, n, dst, host);
    b = mt_stats(ctx);
    return mt_stats_delta(&a, &b);
}

/* One mode of a test with modes: argv[1] names it. */
typedef struct {
    const char* name;
    void (*run)(void);
} mt_gpu_mode_t;

/* The whole main() of a test with modes, so they all start and end alike:
 * opens the driver (or skips), allocates size bytes of host memory (*host)
 * and of device memory (*dev) for the modes to read into, runs the mode
 * argv[1] names (the first one without argv[1]; an unknown name fails), frees
 * both and passes. */
MT_FN int mt_gpu_main(const char* test, int argc, char** argv, const mt_gpu_mode_t* modes, size_t nmodes,
                      size_t size, uint8_t** host, mt_cu_ptr* dev) {
    const char* mode = argc > 1 ? argv[1] : modes[0].name;
    size_t i = 0;
    mt_begin(test);
    mt_gpu_open();
    *host = mt_alloc(size);
    *dev = mt_gpu_alloc(size);
    while (i < nmodes && strcmp(mode, modes[i].name) != 0) i++;
    if (i == nmodes) MT_FAIL("unknown mode %s", mode);
    modes[i].run();
    mt_gpu_free(*dev);
    free(*host);
    mt_pass();
    return 0;
}

#endif /* MT_GPU_H */
