/*
 * bench_gpu_read: file -> GPU memory through MemTier (MEMTIER_TARGET_CUDA)
 * against baselines measured in the same run.
 *
 *   bench_gpu_read [--file=F] [--size=N] [--repeat=R] [--no-gds] [--overwrite] [--json]
 *
 * F defaults to a temporary experiment-pattern file (removed at exit); a given
 * F that is missing or shorter than N is created or extended with the pattern
 * (a "note:" line says so). N defaults to the size of F, or 1 GiB for the
 * temporary file. The page cache is warmed with one untimed pread pass first.
 *
 * It loads the CUDA driver itself (dlopen of $MEMTIER_CUDA_LIBRARY, else
 * libcuda.so.1; a few prototypes of its own, no CUDA headers) to allocate
 * device memory, pin host memory and copy bytes back for the check. With no
 * usable CUDA (library missing or cuInit failing) it prints "no CUDA: <why>"
 * and exits 77.
 *
 * (a) staged path: one memtier_read(target CUDA) of N bytes with gds_mode OFF
 *     and the DRAM cache off, against, in the same run:
 *       file_pinned     a single-thread 8 MiB pread loop into pinned memory
 *       file_pageable   the same into pageable memory
 *       h2d_pinned      cuMemcpyHtoDAsync of N bytes from a pinned 64 MiB
 *                       buffer, 64 MiB at a time on one stream, then its sync
 *       naive           pread 8 MiB into pinned memory, copy it, sync, repeat
 *                       (what a loader without a pipeline does)
 *     ratio = memtier / min(file_pinned, h2d_pinned): the pipeline's target is
 *     >= 0.9 (it overlaps the two and reads with several threads).
 * (b) GDS: the same read with gds_mode AUTO (GPUDirect Storage when cuFile
 *     works; the bytes still checked), and memtier_gpu_info's gds and gds_path
 *     lines: on a machine without the nvidia-fs driver cuFile runs in
 *     compatibility mode (POSIX reads inside cuFile) and AUTO reads staged, or
 *     GDS is unavailable and reads fall back to the staged path (gds_fallbacks
 *     counts it); then with gds_mode REQUIRED, which reads with cuFile in
 *     either mode (not measured when cuFile cannot open). Skipped with
 *     --no-gds.
 * Times are medians of R runs (MemTier's after one untimed run per context,
 * which pins its staging buffers and opens cuFile); GB/s uses 1 GB = 1e9 B. After every MemTier
 * read, 1 MiB at the start, the middle and the end of the device buffer is
 * copied back and checked against the pattern.
 *
 * Exit 0, 1 when a read failed or returned wrong bytes, 2 on a usage error, 77
 * without CUDA.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

#define MAX_REPEAT 64
#define STAGE (8 * MT_MIB)
#define H2D_CHUNK (64 * MT_MIB)

typedef int cu_result;
typedef unsigned long long cu_ptr;

static struct {
    cu_result (*Init)(unsigned);
    cu_result (*DeviceGet)(int*, int);
    cu_result (*DevicePrimaryCtxRetain)(void**, int);
    cu_result (*CtxSetCurrent)(void*);
    cu_result (*MemAlloc)(cu_ptr*, size_t);
    cu_result (*MemFree)(cu_ptr);
    cu_result (*MemHostRegister)(void*, size_t, unsigned);
    cu_result (*MemHostUnregister)(void*);
    cu_result (*MemcpyHtoDAsync)(cu_ptr, const void*, size_t, void*);
    cu_result (*MemcpyDtoH)(void*, cu_ptr, size_t);
    cu_result (*StreamCreate)(void**, unsigned);
    cu_result (*StreamSynchronize)(void*);
    cu_result (*StreamDestroy)(void*);
    void* ctx;
    void* stream;
} cu;

static void no_cuda(const char* why) {
    printf("no CUDA: %s\n", why);
    exit(77);
}

static void cu_check(cu_result r, const char* what) {
    if (r != 0) mt_die("%s failed: CUDA error %d", what, r);
}

static void cuda_open(void) {
    const char* name = getenv("MEMTIER_CUDA_LIBRARY");
    if (name == NULL || name[0] == '\0') name = "libcuda.so.1";
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) no_cuda(dlerror());
#define SYM(f, s)                                                                  \
    do {                                                                           \
        *(void**)&cu.f = dlsym(lib, s);                                            \
        if (cu.f == NULL) no_cuda(s " not found in the CUDA driver library");      \
    } while (0)
    SYM(Init, "cuInit");
    SYM(DeviceGet, "cuDeviceGet");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(MemAlloc, "cuMemAlloc_v2");
    SYM(MemFree, "cuMemFree_v2");
    SYM(MemHostRegister, "cuMemHostRegister_v2");
    SYM(MemHostUnregister, "cuMemHostUnregister");
    SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(StreamCreate, "cuStreamCreate");
    SYM(StreamSynchronize, "cuStreamSynchronize");
    SYM(StreamDestroy, "cuStreamDestroy_v2");
#undef SYM
    int dev = 0;
    cu_result r = cu.Init(0);
    if (r != 0) {
        char why[64];
        snprintf(why, sizeof why, "cuInit returned %d", r);
        no_cuda(why);
    }
    cu_check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
    cu_check(cu.DevicePrimaryCtxRetain(&cu.ctx, dev), "cuDevicePrimaryCtxRetain");
    cu_check(cu.CtxSetCurrent(cu.ctx), "cuCtxSetCurrent");
    cu_check(cu.StreamCreate(&cu.stream, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
}

/* Page-aligned host memory registered with the driver (pinned). */
static void* pinned_alloc(size_t n) {
    void* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) mt_die("mmap %zu bytes: %s", n, strerror(errno));
    memset(p, 0, n);
    cu_check(cu.MemHostRegister(p, n, 0), "cuMemHostRegister");
    return p;
}

typedef struct {
    const char* path;
    uint64_t size;
    long repeat;
    cu_ptr dev;
    uint8_t* pinned;   /* STAGE bytes, pinned */
    uint8_t* pageable; /* STAGE bytes */
    uint8_t* h2d_src;  /* H2D_CHUNK bytes, pinned */
    uint8_t* check;    /* 1 MiB for the checks */
} bench_t;

static double median_of(double* v, long n) { return mt_median(v, (size_t)n); }

static double pread_loop(bench_t* b, uint8_t* buf) {
    int fd = mt_open_file(b->path, O_RDONLY, 0);
    if (fd < 0) mt_die("open %s: %s", b->path, strerror(errno));
    uint64_t t = mt_now_ns();
    for (uint64_t off = 0; off < b->size; off += STAGE) {
        size_t n = (size_t)(b->size - off < STAGE ? b->size - off : STAGE);
        if (mt_pread_full(fd, buf, n, off) != (int64_t)n) mt_die("pread %s: %s", b->path, strerror(errno));
    }
    double s = (double)(mt_now_ns() - t) * 1e-9;
    close(fd);
    return s;
}

static double h2d_loop(bench_t* b) {
    uint64_t t = mt_now_ns();
    for (uint64_t off = 0; off < b->size; off += H2D_CHUNK) {
        size_t n = (size_t)(b->size - off < H2D_CHUNK ? b->size - off : H2D_CHUNK);
        cu_check(cu.MemcpyHtoDAsync(b->dev + off, b->h2d_src, n, cu.stream), "cuMemcpyHtoDAsync");
    }
    cu_check(cu.StreamSynchronize(cu.stream), "cuStreamSynchronize");
    return (double)(mt_now_ns() - t) * 1e-9;
}

static double naive_loop(bench_t* b) {
    int fd = mt_open_file(b->path, O_RDONLY, 0);
    if (fd < 0) mt_die("open %s: %s", b->path, strerror(errno));
    uint64_t t = mt_now_ns();
    for (uint64_t off = 0; off < b->size; off += STAGE) {
        size_t n = (size_t)(b->size - off < STAGE ? b->size - off : STAGE);
        if (mt_pread_full(fd, b->pinned, n, off) != (int64_t)n) mt_die("pread: %s", strerror(errno));
        cu_check(cu.MemcpyHtoDAsync(b->dev + off, b->pinned, n, cu.stream), "cuMemcpyHtoDAsync");
        cu_check(cu.StreamSynchronize(cu.stream), "cuStreamSynchronize");
    }
    double s = (double)(mt_now_ns() - t) * 1e-9;
    close(fd);
    return s;
}

/* 1 MiB at the start, middle and end of the device buffer against the pattern. */
static void check_device(bench_t* b, const char* what) {
    uint64_t at[3] = {0, b->size / 2, b->size > MT_MIB ? b->size - MT_MIB : 0};
    for (int i = 0; i < 3; i++) {
        size_t n = (size_t)(b->size - at[i] < MT_MIB ? b->size - at[i] : MT_MIB);
        cu.CtxSetCurrent(cu.ctx);
        cu_check(cu.MemcpyDtoH(b->check, b->dev + at[i], n), "cuMemcpyDtoH");
        uint64_t bad = mt_pattern_check(b->check, at[i], n);
        if (bad != MT_NO_MISMATCH) {
            fprintf(stderr, "error: %s: device byte at file offset %" PRIu64 " differs from the file\n",
                    what, bad);
            exit(1);
        }
    }
}

/* A context without the DRAM cache; NULL (with memtier_last_error) when
 * init fails and may_fail is set (gds_mode REQUIRED without cuFile). */
static memtier_ctx_t* bench_ctx_opt(int gds_mode, int may_fail) {
    memtier_config_t cfg;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 0;
    cfg.gds_mode = gds_mode;
    int rc = memtier_init(&cfg, &ctx);
    if (rc != MEMTIER_OK && may_fail) return NULL;
    mt_check(rc, "memtier_init");
    return ctx;
}

static memtier_ctx_t* bench_ctx(int gds_mode) { return bench_ctx_opt(gds_mode, 0); }

/* The value of "key: " in memtier_gpu_info's text, one line, into out. */
static void info_line(const char* info, const char* key, char* out, size_t n) {
    const char* g = strstr(info, key);
    if (!g) {
        snprintf(out, n, "?");
        return;
    }
    g += strlen(key);
    snprintf(out, n, "%.*s", (int)strcspn(g, "\n"), g);
}

/* Median seconds of R memtier_read(target CUDA) runs, after one untimed run
 * (a context pins its staging buffers and opens cuFile on first use); stats
 * of the last run. */
static double memtier_runs(bench_t* b, memtier_ctx_t* ctx, const char* what, memtier_stats_t* st) {
    double t[MAX_REPEAT + 1];
    for (long r = -1; r < b->repeat; r++) {
        mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
        uint64_t t0 = mt_now_ns();
        int rc = memtier_read(ctx, b->path, 0, b->size, (void*)(uintptr_t)b->dev, MEMTIER_TARGET_CUDA);
        t[r + 1] = (double)(mt_now_ns() - t0) * 1e-9;
        if (rc == MEMTIER_ERR_UNSUPPORTED && r < 0) {
            char why[600];
            snprintf(why, sizeof why, "libmemtier answers UNSUPPORTED: %s", memtier_last_error());
            no_cuda(why);
        }
        mt_check(rc, what);
        check_device(b, what);
    }
    mt_check(memtier_stats(ctx, st), "memtier_stats");
    return median_of(t + 1, b->repeat);
}

int main(int argc, char** argv) {
    uint64_t size = 0;
    long repeat = 3;
    int json = 0, help = 0, no_gds = 0, overwrite = 0;
    const char* file = NULL;
    const mt_flag_t flags[] = {
        {"file", MT_FLAG_STR, &file, "file to read (default: a temporary pattern file)"},
        {"size", MT_FLAG_SIZE, &size, "bytes to read (default: size of F, or 1G for the temp file)"},
        {"repeat", MT_FLAG_INT, &repeat, "timed runs of each mode (default 3)"},
        {"no-gds", MT_FLAG_BOOL, &no_gds, "skip the GDS table (b)"},
        {"overwrite", MT_FLAG_BOOL, &overwrite, "rewrite an F too short and not a pattern file"},
        {"json", MT_FLAG_BOOL, &json, "print one JSON object"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    mt_parse_args(argc, argv, flags, sizeof flags / sizeof flags[0], NULL, 0,
                  "usage: bench_gpu_read [flags]\n"
                  "  file -> GPU memory: memtier_read(MEMTIER_TARGET_CUDA), staged and GDS, against\n"
                  "  pread, pinned host-to-device copy and a naive pread+copy loop in the same run\n");
    mt_flag_range("repeat", repeat, 1, MAX_REPEAT);
    if (json) mt_set_note_stream(stderr);

    cuda_open(); /* exits 77 without CUDA, before any file is written */

    bench_t b;
    memset(&b, 0, sizeof b);
    b.repeat = repeat;
    if (file == NULL) {
        if (size == 0) size = MT_GIB;
        mt_require_temp_space("bench_gpu_read", size);
        b.path = mt_temp_file("bench_gpu_read", size, MT_CONTENT_PATTERN);
        mt_note("note: no --file: using a temporary %s experiment-pattern file %s\n",
                mt_fmt_bytes((char[32]){0}, 32, size), b.path);
    } else {
        b.path = file;
        int exists = mt_require_regular(file, NULL);
        if (size == 0) {
            if (!exists) mt_die("%s: %s (give --size=N to create it)", file, strerror(errno));
            size = (uint64_t)mt_file_size(file);
        } else {
            mt_require_space_to_grow(file, size);
            mt_ensure_pattern_file(file, size, overwrite);
        }
    }
    if (size == 0) mt_die("nothing to read: size 0");
    b.size = size;

    cu.CtxSetCurrent(cu.ctx);
    cu_result r = cu.MemAlloc(&b.dev, (size_t)size);
    if (r != 0) mt_die("cuMemAlloc of %" PRIu64 " bytes failed (CUDA error %d): use a smaller --size", size, r);
    b.pinned = pinned_alloc(STAGE);
    b.h2d_src = pinned_alloc(H2D_CHUNK);
    b.pageable = mt_alloc(STAGE);
    b.check = mt_alloc(MT_MIB);

    /* Warm the page cache (untimed), then the baselines. */
    (void)pread_loop(&b, b.pageable);
    double t_fp[MAX_REPEAT], t_fg[MAX_REPEAT], t_h2d[MAX_REPEAT], t_naive[MAX_REPEAT];
    for (long i = 0; i < repeat; i++) {
        t_fp[i] = pread_loop(&b, b.pinned);
        t_fg[i] = pread_loop(&b, b.pageable);
        cu.CtxSetCurrent(cu.ctx);
        t_h2d[i] = h2d_loop(&b);
        t_naive[i] = naive_loop(&b);
    }
    const double file_pinned = mt_gbps(size, median_of(t_fp, repeat));
    const double file_pageable = mt_gbps(size, median_of(t_fg, repeat));
    const double h2d = mt_gbps(size, median_of(t_h2d, repeat));
    const double naive = mt_gbps(size, median_of(t_naive, repeat));
    check_device(&b, "naive loop");

    memtier_stats_t st_staged, st_gds;
    memset(&st_gds, 0, sizeof st_gds);
    memtier_ctx_t* ctx = bench_ctx(MEMTIER_GDS_OFF);
    const double staged = mt_gbps(size, memtier_runs(&b, ctx, "memtier staged", &st_staged));
    char info[2048] = "";
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    double gds = 0, gds_req = 0;
    memtier_stats_t st_req;
    memset(&st_req, 0, sizeof st_req);
    char req_line[600] = "not measured (--no-gds)";
    if (!no_gds) {
        ctx = bench_ctx(MEMTIER_GDS_AUTO);
        gds = mt_gbps(size, memtier_runs(&b, ctx, "memtier gds", &st_gds));
        mt_check(memtier_gpu_info(ctx, info, sizeof info), "memtier_gpu_info");
        mt_check(memtier_finalize(ctx), "memtier_finalize");
        ctx = bench_ctx_opt(MEMTIER_GDS_REQUIRED, 1);
        if (ctx) {
            gds_req = mt_gbps(size, memtier_runs(&b, ctx, "memtier gds required", &st_req));
            mt_check(memtier_finalize(ctx), "memtier_finalize");
            snprintf(req_line, sizeof req_line, "measured");
        } else {
            snprintf(req_line, sizeof req_line, "not measured: %s", memtier_last_error());
        }
    }
    const double bound = file_pinned < h2d ? file_pinned : h2d;
    const double ratio = bound > 0 ? staged / bound : 0;
    char gds_line[512] = "not measured (--no-gds)", gds_path[64] = "not measured";
    if (!no_gds) {
        info_line(info, "gds: ", gds_line, sizeof gds_line);
        info_line(info, "gds_path: ", gds_path, sizeof gds_path);
    }

    if (json) {
        mt_json_t j;
        mt_json_begin(&j, stdout);
        mt_json_str(&j, "benchmark", "bench_gpu_read");
        mt_json_u64(&j, "size", size);
        mt_json_i64(&j, "repeat", repeat);
        mt_json_obj(&j, "gbps");
        mt_json_f64(&j, "file_pinned", file_pinned);
        mt_json_f64(&j, "file_pageable", file_pageable);
        mt_json_f64(&j, "h2d_pinned", h2d);
        mt_json_f64(&j, "naive", naive);
        mt_json_f64(&j, "memtier_staged", staged);
        if (!no_gds) mt_json_f64(&j, "memtier_gds", gds);
        if (!no_gds) mt_json_f64(&j, "memtier_gds_required", gds_req);
        mt_json_obj_end(&j);
        mt_json_f64(&j, "staged_ratio_vs_bound", ratio);
        mt_json_f64(&j, "staged_ratio_vs_naive", naive > 0 ? staged / naive : 0);
        mt_json_bool(&j, "staged_target_met", ratio >= 0.9);
        if (!no_gds) {
            mt_json_f64(&j, "gds_ratio_vs_staged", staged > 0 ? gds / staged : 0);
            mt_json_str(&j, "gds_state", gds_line);
            mt_json_str(&j, "gds_path", gds_path);
            mt_json_u64(&j, "gds_bytes", st_gds.gds_bytes);
            mt_json_u64(&j, "gds_fallbacks", st_gds.gds_fallbacks);
            mt_json_str(&j, "gds_required_state", req_line);
            mt_json_u64(&j, "gds_required_bytes", st_req.gds_bytes);
        }
        mt_json_stats(&j, "stats_staged", &st_staged);
        mt_json_end(&j);
    } else {
        char sz[32];
        mt_print_banner("bench_gpu_read");
        printf("file %s, %s, median of %ld run(s), page cache warm\n\n", b.path,
               mt_fmt_bytes(sz, sizeof sz, size), repeat);
        printf("(a) staged: file -> pinned host buffers -> device\n");
        printf("  %-34s %8.2f GB/s\n", "file read, pread 8M -> pinned", file_pinned);
        printf("  %-34s %8.2f GB/s\n", "file read, pread 8M -> pageable", file_pageable);
        printf("  %-34s %8.2f GB/s\n", "H2D copy from pinned (64M)", h2d);
        printf("  %-34s %8.2f GB/s\n", "naive pread + copy + sync loop", naive);
        printf("  %-34s %8.2f GB/s   ratio %.2f vs min(file, H2D) (target >= 0.9: %s), %.2fx naive\n",
               "memtier_read CUDA, gds_mode OFF", staged, ratio, ratio >= 0.9 ? "met" : "NOT met",
               naive > 0 ? staged / naive : 0);
        printf("  stats: staged_bytes %" PRIu64 " h2d_bytes %" PRIu64 " h2d_ns %" PRIu64
               " staged_read_ns %" PRIu64 "\n",
               st_staged.staged_bytes, st_staged.h2d_bytes, st_staged.h2d_ns, st_staged.staged_read_ns);
        printf("\n(b) GDS (gds_mode AUTO)\n");
        if (no_gds) {
            printf("  skipped (--no-gds)\n");
        } else {
            printf("  %-34s %8.2f GB/s   %.2fx staged\n", "memtier_read CUDA, gds_mode AUTO", gds,
                   staged > 0 ? gds / staged : 0);
            printf("  gds_bytes %" PRIu64 " staged_bytes %" PRIu64 " gds_fallbacks %" PRIu64 "\n",
                   st_gds.gds_bytes, st_gds.staged_bytes, st_gds.gds_fallbacks);
            printf("  cuFile: %s (gds_path %s)\n", gds_line, gds_path);
            printf("  %-34s %8.2f GB/s   %.2fx staged (%s; gds_bytes %" PRIu64 ")\n",
                   "memtier_read CUDA, gds_mode REQUIRED", gds_req, staged > 0 ? gds_req / staged : 0, req_line,
                   st_req.gds_bytes);
        }
    }
    cu.CtxSetCurrent(cu.ctx);
    cu.MemHostUnregister(b.pinned);
    cu.MemHostUnregister(b.h2d_src);
    cu.MemFree(b.dev);
    return 0;
}
