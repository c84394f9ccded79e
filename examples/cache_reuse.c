/*
 * cache_reuse: the DRAM cache serves a file read a second time.
 *
 * Makes a 32 MiB experiment-pattern file, drops it from the page cache, then
 * reads it twice in 4 MiB chunks with MEMTIER_READ_WILL_REUSE into a context
 * whose cache budget is 128 MiB. Pass 1 comes from storage and fills the cache;
 * pass 2 must be served entirely from the cache (stats cache_hit_requests and
 * cache_hit_bytes, no storage bytes). Both passes are timed and verified.
 *
 * Flags: --size=SIZE (default 32M; at least 1 byte; the file must fit in the
 * free space of $TMPDIR minus a safety margin, the smaller of 1 GiB and 5% of
 * the file system, and the buffer plus the cached copy, 2 x size, in memory),
 * --chunk=SIZE (default 4M; 1 byte..1T, larger than --size means one read).
 * Exit 0 (OK), 1 (a check failed), 2 (a bad flag value, or a size refused).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "memtier.h"
#include "mt_util.h"

static double read_pass(memtier_ctx_t* ctx, const char* path, uint64_t size, uint64_t chunk,
                        uint8_t* buf, memtier_stats_t* st, const char* label) {
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
    memset(buf, 0, (size_t)size);
    uint64_t t0 = mt_now_ns();
    for (uint64_t off = 0; off < size; off += chunk) {
        uint64_t n = size - off < chunk ? size - off : chunk;
        mt_check(memtier_read_ex(ctx, path, off, n, buf + off, MEMTIER_TARGET_CPU,
                                 MEMTIER_READ_WILL_REUSE),
                 "memtier_read_ex(WILL_REUSE)");
    }
    double secs = (double)(mt_now_ns() - t0) / 1e9;
    mt_check(memtier_stats(ctx, st), "memtier_stats");
    uint64_t bad = mt_pattern_check(buf, 0, (size_t)size);
    if (bad != MT_NO_MISMATCH) mt_die("%s: wrong byte at offset %" PRIu64, label, bad);
    return secs;
}

int main(int argc, char** argv) {
    uint64_t size = 32 * MT_MIB, chunk = 4 * MT_MIB;
    int help = 0;
    const mt_flag_t flags[] = {
        {"size", MT_FLAG_SIZE, &size, "file size (default 32M)"},
        {"chunk", MT_FLAG_SIZE, &chunk, "bytes per read (default 4M)"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    mt_parse_args(argc, argv, flags, nflags, NULL, 0, "usage: cache_reuse [flags]\n");
    mt_flag_size_range("size", size, 1, UINT64_MAX);
    mt_flag_size_range("chunk", chunk, 1, 1024 * MT_GIB);
    /* Refused before any work: a file the file system cannot hold, then a
     * buffer of --size bytes plus the DRAM cache's copy that memory cannot. */
    mt_require_temp_space("cache_reuse", size);
    mt_require_memory("the read buffer plus its cached copy (2 x --size)",
                      size > UINT64_MAX / 2 ? UINT64_MAX : 2 * size);

    mt_print_banner("cache_reuse");
    char a[32], b[32], c[32];
    const uint64_t budget = size * 2 > 128 * MT_MIB ? size * 2 : 128 * MT_MIB;
    printf("reads a %s file twice in %s chunks with MEMTIER_READ_WILL_REUSE\n",
           mt_fmt_bytes(a, sizeof a, size), mt_fmt_bytes(b, sizeof b, chunk));
    printf("(cache budget %s); pass 1 fills the DRAM cache from storage, pass 2 must be\n",
           mt_fmt_bytes(c, sizeof c, budget));
    printf("served from it entirely. Every byte of both passes is checked.\n");

    const char* path = mt_temp_file("cache_reuse", size, MT_CONTENT_PATTERN);
    if (mt_drop_page_cache(path) != 0)
        printf("note: could not drop %s from the page cache: %s\n", path, strerror(errno));

    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 1;
    cfg.cache_bytes = budget;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(&cfg, &ctx), "memtier_init");

    uint8_t* buf = (uint8_t*)mt_alloc((size_t)size);
    memtier_stats_t s1, s2;
    double t1 = read_pass(ctx, path, size, chunk, buf, &s1, "pass 1");
    double t2 = read_pass(ctx, path, size, chunk, buf, &s2, "pass 2");

    printf("\n%-7s %9s %9s %9s %10s %12s %12s %12s\n", "pass", "seconds", "GB/s", "requests",
           "cache_hit", "hit_bytes", "storage", "inserted");
    const memtier_stats_t* ss[2] = {&s1, &s2};
    const double ts[2] = {t1, t2};
    for (int i = 0; i < 2; i++)
        printf("%-7d %9.4f %9.2f %9" PRIu64 " %10" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 "\n",
               i + 1, ts[i], mt_gbps(size, ts[i]), (uint64_t)ss[i]->requests,
               (uint64_t)ss[i]->cache_hit_requests, (uint64_t)ss[i]->cache_hit_bytes,
               (uint64_t)ss[i]->storage_bytes, (uint64_t)ss[i]->cache_inserted_bytes);
    printf("pass 2 / pass 1 speed: %.2fx   cache resident %s of budget %s\n",
           t2 > 0 ? t1 / t2 : 0.0, mt_fmt_bytes(a, sizeof a, s2.cache_resident_bytes),
           mt_fmt_bytes(b, sizeof b, s2.cache_budget_bytes));
    printf("stats after pass 2:\n");
    mt_stats_print(stdout, "  ", &s2);

    int ok = 1;
    uint64_t nreq = (size + chunk - 1) / chunk;
    if (s2.requests != nreq || s2.cache_hit_requests != nreq) {
        printf("FAIL: pass 2 made %" PRIu64 " requests, %" PRIu64 " served entirely from the cache; "
               "expected %" PRIu64 " and %" PRIu64 "\n",
               (uint64_t)s2.requests, (uint64_t)s2.cache_hit_requests, nreq, nreq);
        ok = 0;
    }
    if (s2.cache_hit_bytes != size || s2.storage_bytes != 0) {
        printf("FAIL: pass 2 copied %" PRIu64 " bytes from the cache and read %" PRIu64
               " from storage; expected %" PRIu64 " and 0\n",
               (uint64_t)s2.cache_hit_bytes, (uint64_t)s2.storage_bytes, size);
        ok = 0;
    }
    if (s1.cache_inserted_bytes < size)
        printf("note: pass 1 inserted only %" PRIu64 " bytes into the cache\n",
               (uint64_t)s1.cache_inserted_bytes);
    if (s2.cache_resident_bytes > s2.cache_budget_bytes) {
        printf("FAIL: cache holds %" PRIu64 " bytes, over its budget %" PRIu64 "\n",
               (uint64_t)s2.cache_resident_bytes, (uint64_t)s2.cache_budget_bytes);
        ok = 0;
    }
    if (ok) printf("pass 2 was served from the DRAM cache: %" PRIu64 " of %" PRIu64 " requests, 0 storage bytes\n",
                   (uint64_t)s2.cache_hit_requests, nreq);

    free(buf);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    printf("%s\n", ok ? "cache_reuse: OK" : "cache_reuse: FAILED");
    return ok ? 0 : 1;
}
