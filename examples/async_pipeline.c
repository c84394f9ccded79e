/*
 * async_pipeline: overlap reading with computing, double-buffered.
 *
 * Makes a 64 MiB experiment-pattern file and processes it in 4 MiB chunks, where
 * "compute" = fnv1a64w checksum + pattern check of the chunk:
 *   serial    memtier_read chunk i, then compute chunk i
 *   pipeline  memtier_read_async chunk i+1 into the other buffer, compute chunk i,
 *             memtier_request_wait chunk i+1, ...
 * Reads use MEMTIER_READ_ONCE so the DRAM cache does not serve later runs, and
 * the file is dropped from the page cache before every run (--warm keeps it), so
 * reading costs about as much as computing. Each mode runs --repeat times (best
 * time kept). Prints both times and the overlap ratio; both checksums must equal
 * the pattern's.
 *
 * Flags: --size=SIZE (64M; at least 1 byte, and the file must fit in the free
 * space of $TMPDIR minus a safety margin, the smaller of 1 GiB and 5% of the file
 * system), --chunk=SIZE (4M; 1 byte..1T; the two buffers are
 * min(chunk, size) each), --repeat=N (3; 1..1000), --warm.
 * Exit 0 (OK), 1 (a check failed), 2 (a bad flag value, or a size refused).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "memtier.h"
#include "mt_util.h"

/* compute: checksum and check the chunk; returns the first bad offset. */
static uint64_t compute(mt_checksum_t* cs, const uint8_t* p, uint64_t off, size_t n) {
    mt_checksum_update(cs, p, n);
    return mt_pattern_check(p, off, n);
}

typedef struct result {
    double wall, io, cpu; /* seconds */
    uint64_t checksum;
    uint64_t ready; /* pipeline: chunks already complete when their turn came */
} result_t;

static result_t run_serial(memtier_ctx_t* ctx, const char* path, uint64_t size, uint64_t chunk,
                           uint8_t* buf) {
    result_t r = {0};
    mt_checksum_t cs;
    mt_checksum_init(&cs);
    uint64_t t0 = mt_now_ns();
    for (uint64_t off = 0; off < size; off += chunk) {
        uint64_t n = size - off < chunk ? size - off : chunk;
        uint64_t a = mt_now_ns();
        mt_check(memtier_read_ex(ctx, path, off, n, buf, MEMTIER_TARGET_CPU, MEMTIER_READ_ONCE),
                 "memtier_read_ex");
        uint64_t b = mt_now_ns();
        uint64_t bad = compute(&cs, buf, off, (size_t)n);
        uint64_t c = mt_now_ns();
        if (bad != MT_NO_MISMATCH) mt_die("serial: wrong byte at offset %" PRIu64, bad);
        r.io += (double)(b - a) / 1e9;
        r.cpu += (double)(c - b) / 1e9;
    }
    r.wall = (double)(mt_now_ns() - t0) / 1e9;
    r.checksum = mt_checksum_final(&cs);
    return r;
}

static result_t run_pipeline(memtier_ctx_t* ctx, const char* path, uint64_t size, uint64_t chunk,
                             uint8_t* buf[2]) {
    result_t r = {0};
    mt_checksum_t cs;
    mt_checksum_init(&cs);
    const uint64_t nchunks = (size + chunk - 1) / chunk;
    memtier_request_t* req[2] = {NULL, NULL};
    uint64_t t0 = mt_now_ns();
    mt_check(memtier_read_async(ctx, path, 0, size < chunk ? size : chunk, buf[0], MEMTIER_TARGET_CPU,
                                MEMTIER_READ_ONCE, &req[0]),
             "memtier_read_async");
    for (uint64_t i = 0; i < nchunks; i++) {
        const int cur = (int)(i & 1), nxt = cur ^ 1;
        const uint64_t off = i * chunk;
        const uint64_t n = size - off < chunk ? size - off : chunk;
        uint64_t got = 0;
        if (memtier_request_test(req[cur], NULL) != MEMTIER_ERR_BUSY) r.ready++;
        uint64_t w0 = mt_now_ns();
        mt_check(memtier_request_wait(req[cur], -1, &got), "memtier_request_wait");
        r.io += (double)(mt_now_ns() - w0) / 1e9; /* time spent waiting for I/O */
        mt_check(memtier_request_release(req[cur]), "memtier_request_release");
        req[cur] = NULL;
        if (got != n) mt_die("request for chunk %" PRIu64 " moved %" PRIu64 " bytes, expected %" PRIu64, i, got, n);
        if (i + 1 < nchunks) {
            const uint64_t noff = off + chunk;
            const uint64_t nn = size - noff < chunk ? size - noff : chunk;
            mt_check(memtier_read_async(ctx, path, noff, nn, buf[nxt], MEMTIER_TARGET_CPU,
                                        MEMTIER_READ_ONCE, &req[nxt]),
                     "memtier_read_async");
        }
        uint64_t c0 = mt_now_ns();
        uint64_t bad = compute(&cs, buf[cur], off, (size_t)n);
        r.cpu += (double)(mt_now_ns() - c0) / 1e9;
        if (bad != MT_NO_MISMATCH) mt_die("pipeline: wrong byte at offset %" PRIu64, bad);
    }
    r.wall = (double)(mt_now_ns() - t0) / 1e9;
    r.checksum = mt_checksum_final(&cs);
    return r;
}

int main(int argc, char** argv) {
    uint64_t size = 64 * MT_MIB, chunk = 4 * MT_MIB;
    long repeat = 3;
    int help = 0, warm = 0;
    const mt_flag_t flags[] = {
        {"size", MT_FLAG_SIZE, &size, "file size (default 64M)"},
        {"chunk", MT_FLAG_SIZE, &chunk, "chunk size (default 4M)"},
        {"repeat", MT_FLAG_INT, &repeat, "runs of each mode, best kept (default 3)"},
        {"warm", MT_FLAG_BOOL, &warm, "keep the file in the page cache (default: drop before each run)"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    mt_parse_args(argc, argv, flags, nflags, NULL, 0, "usage: async_pipeline [flags]\n");
    mt_flag_size_range("size", size, 1, UINT64_MAX);
    mt_flag_size_range("chunk", chunk, 1, 1024 * MT_GIB);
    mt_flag_range("repeat", repeat, 1, 1000);
    /* No chunk is longer than the file: the buffers need no more than that. */
    const uint64_t buf_bytes = chunk < size ? chunk : size;
    mt_require_memory("the two chunk buffers (2 x min(--chunk, --size))", 2 * buf_bytes);

    mt_print_banner("async_pipeline");
    char a[32], b[32];
    printf("processes a %s file in %s chunks (compute = %s checksum + pattern check):\n",
           mt_fmt_bytes(a, sizeof a, size), mt_fmt_bytes(b, sizeof b, chunk), MT_CHECKSUM_NAME);
    printf("serial reads then computes each chunk; the pipeline computes chunk i while\n");
    printf("memtier_read_async fills the other buffer with chunk i+1. %s\n",
           warm ? "Page cache warm (--warm)." : "The page cache is dropped before each run.");

    const char* path = mt_temp_file("async_pipeline", size, MT_CONTENT_PATTERN);
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(NULL, &ctx), "memtier_init");
    uint8_t* bufs[2] = {(uint8_t*)mt_alloc((size_t)buf_bytes), (uint8_t*)mt_alloc((size_t)buf_bytes)};

    result_t best_s = {0}, best_p = {0};
    int dropped = 1;
    for (long k = 0; k < repeat; k++) {
        if (!warm) dropped &= mt_drop_page_cache(path) == 0;
        result_t s = run_serial(ctx, path, size, chunk, bufs[0]);
        if (!warm) dropped &= mt_drop_page_cache(path) == 0;
        result_t p = run_pipeline(ctx, path, size, chunk, bufs);
        if (k == 0 || s.wall < best_s.wall) best_s = s;
        if (k == 0 || p.wall < best_p.wall) best_p = p;
    }

    if (!warm && !dropped) printf("note: the page cache could not be dropped; reads were warm\n");
    const uint64_t want = mt_pattern_checksum(size);
    double shorter = best_s.io < best_s.cpu ? best_s.io : best_s.cpu;
    double overlap = shorter > 0 ? (best_s.wall - best_p.wall) / shorter : 0.0;
    if (overlap < 0) overlap = 0;
    if (overlap > 1) overlap = 1;
    const uint64_t nchunks = (size + chunk - 1) / chunk;

    printf("\n%-9s %9s %9s   %s\n", "mode", "seconds", "GB/s", "detail");
    printf("%-9s %9.4f %9.2f   read %.4f s + compute %.4f s\n", "serial", best_s.wall,
           mt_gbps(size, best_s.wall), best_s.io, best_s.cpu);
    printf("%-9s %9.4f %9.2f   waited for reads %.4f s + compute %.4f s; %" PRIu64 " of %" PRIu64
           " chunks were ready when their turn came\n",
           "pipeline", best_p.wall, mt_gbps(size, best_p.wall), best_p.io, best_p.cpu, best_p.ready, nchunks);
    printf("speedup %.2fx; overlap ratio %.2f (share of the shorter phase, %s, hidden behind the other)\n",
           best_p.wall > 0 ? best_s.wall / best_p.wall : 0.0, overlap,
           best_s.io < best_s.cpu ? "read" : "compute");
    printf("checksum %s serial 0x%016" PRIx64 " pipeline 0x%016" PRIx64 " pattern 0x%016" PRIx64 "\n",
           MT_CHECKSUM_NAME, best_s.checksum, best_p.checksum, want);

    memtier_stats_t st;
    mt_check(memtier_stats(ctx, &st), "memtier_stats");
    printf("stats (all runs):\n");
    mt_stats_print(stdout, "  ", &st);

    int ok = best_s.checksum == want && best_p.checksum == want;
    if (!ok) printf("FAIL: a checksum differs from the pattern's\n");
    if (st.async_requests != (uint64_t)repeat * nchunks) {
        printf("FAIL: stats async_requests = %" PRIu64 ", expected %" PRIu64 "\n",
               (uint64_t)st.async_requests, (uint64_t)repeat * nchunks);
        ok = 0;
    }
    free(bufs[0]);
    free(bufs[1]);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    printf("%s\n", ok ? "async_pipeline: OK" : "async_pipeline: FAILED");
    return ok ? 0 : 1;
}
