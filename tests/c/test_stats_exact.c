/*
 * Description: exact memtier_stats counters for a known sequence on a 1 MiB
 * P-file with a fresh default context. (1) read 4096 at 0: requests 1, bytes
 * 4096, buffered_requests 1, cache_hits 0, cache_misses 1,
 * cache_inserted_bytes 4096, storage_bytes 4096. (2) the same read again:
 * requests 2, cache_hit_requests 1, cache_hit_bytes 4096, cache_hits 1,
 * storage_bytes still 4096. (3) memtier_read_ex READ_ONCE (8192, 4096):
 * buffered_requests 2, cache_inserted_bytes unchanged. (4) memtier_prefetch
 * (0, 0 = whole file): prefetch_requests 1, prefetch_bytes 1 MiB - 4096 (only
 * what was missing). (5) memtier_stats_reset zeroes every counter except
 * cache_resident_bytes and cache_budget_bytes. (6) memtier_drop_cache(ctx,
 * path): cache_resident_bytes 0. The GPU-tier counters (0.2) stay 0 for CPU
 * reads; hbm_budget_bytes is the configured hbm_cache_bytes and, with
 * hbm_resident_bytes, survives the reset. The remote_* and disk_cache_*
 * counters (after 0.3) stay 0 for a local file. All read bytes are checked against P. Every
 * mismatch is printed before the test fails, so one run shows them all.
 */
#include "mt_test.h"

#include <stddef.h>

#define FILE_SIZE (1 * MiB)

static int mismatches;

/* Like MT_EQ_U64 but keeps going, so a run lists every differing counter. */
#define SOFT_EQ(a, b, step)                                                             \
    do {                                                                                \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);  \
        if (a_ != b_) {                                                                 \
            fprintf(stderr, "MISMATCH %s: %s = %llu, want %llu\n", step, #a, a_, b_);   \
            mismatches++;                                                               \
        }                                                                               \
    } while (0)

static void dump(const char* step, const memtier_stats_t* s) {
    printf("%s: requests %llu bytes %llu hit_req %llu hit_bytes %llu buffered %llu/%llu "
           "direct %llu/%llu hits %llu misses %llu inserted %llu resident %llu budget %llu "
           "prefetch %llu/%llu storage %llu errors %llu files_opened %llu\n",
           step, (unsigned long long)s->requests, (unsigned long long)s->bytes,
           (unsigned long long)s->cache_hit_requests, (unsigned long long)s->cache_hit_bytes,
           (unsigned long long)s->buffered_requests, (unsigned long long)s->buffered_bytes,
           (unsigned long long)s->direct_requests, (unsigned long long)s->direct_bytes,
           (unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
           (unsigned long long)s->cache_inserted_bytes, (unsigned long long)s->cache_resident_bytes,
           (unsigned long long)s->cache_budget_bytes, (unsigned long long)s->prefetch_requests,
           (unsigned long long)s->prefetch_bytes, (unsigned long long)s->storage_bytes,
           (unsigned long long)s->errors, (unsigned long long)s->files_opened);
}

static void read_checked(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t n,
                         uint32_t flags, uint8_t* buf) {
    memset(buf, 0xAA, n);
    MT_OK(memtier_read_ex(ctx, path, off, n, buf, MEMTIER_TARGET_CPU, flags));
    MT_CHECK(mt_find_p_mismatch(buf, off, n) < 0, "read (%llu, %llu): byte %lld differs",
             (unsigned long long)off, (unsigned long long)n,
             (long long)mt_find_p_mismatch(buf, off, n));
}

int main(void) {
    mt_begin("test_stats_exact");
    const char* path = mt_make_pfile("p1m.bin", FILE_SIZE);
    uint8_t* buf = mt_alloc(FILE_SIZE);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    memtier_config_t cfg;
    memtier_stats_t s;

    MT_OK(memtier_get_config(ctx, &cfg, sizeof cfg));
    printf("config: cache_bytes %llu block %llu admit_max %llu direct_mode %d threshold %llu\n",
           (unsigned long long)cfg.cache_bytes, (unsigned long long)cfg.cache_block_bytes,
           (unsigned long long)cfg.cache_admit_max_bytes, (int)cfg.direct_mode,
           (unsigned long long)cfg.direct_threshold_bytes);
    MT_CHECK(cfg.cache_enabled == 1, "the default context has the cache disabled");

    /* (1) 4096 bytes at 0, cold. */
    read_checked(ctx, path, 0, 4096, MEMTIER_READ_DEFAULT, buf);
    s = mt_stats(ctx);
    dump("(1) read 4096@0", &s);
    SOFT_EQ(s.requests, 1, "(1)");
    SOFT_EQ(s.bytes, 4096, "(1)");
    SOFT_EQ(s.buffered_requests, 1, "(1)");
    SOFT_EQ(s.cache_hits, 0, "(1)");
    SOFT_EQ(s.cache_misses, 1, "(1)");
    SOFT_EQ(s.cache_inserted_bytes, 4096, "(1)");
    SOFT_EQ(s.storage_bytes, 4096, "(1)");
    /* A local file never reaches the remote or disk cache tiers (after 0.3). */
    {
        const size_t lo = offsetof(memtier_stats_t, remote_requests);
        const size_t hi = offsetof(memtier_stats_t, disk_cache_trust_fallbacks) + sizeof(uint64_t);
        size_t off;
        SOFT_EQ(lo, 48 * sizeof(uint64_t), "(1) remote_requests follows the io_uring counters");
        SOFT_EQ(hi, sizeof s, "(1) disk_cache_trust_fallbacks is the last field");
        for (off = lo; off < hi; off += sizeof(uint64_t)) {
            uint64_t v;
            memcpy(&v, (const unsigned char*)&s + off, sizeof v);
            if (v != 0) {
                fprintf(stderr, "MISMATCH (1): remote/disk counter at byte offset %zu = %llu, want 0\n",
                        off, (unsigned long long)v);
                mismatches++;
            }
        }
    }
    const uint64_t inserted1 = s.cache_inserted_bytes;

    /* (2) the same read again: a cache hit. */
    read_checked(ctx, path, 0, 4096, MEMTIER_READ_DEFAULT, buf);
    s = mt_stats(ctx);
    dump("(2) read 4096@0 again", &s);
    SOFT_EQ(s.requests, 2, "(2)");
    SOFT_EQ(s.bytes, 8192, "(2)");
    SOFT_EQ(s.cache_hit_requests, 1, "(2)");
    SOFT_EQ(s.cache_hit_bytes, 4096, "(2)");
    SOFT_EQ(s.cache_hits, 1, "(2)");
    SOFT_EQ(s.storage_bytes, 4096, "(2)");
    SOFT_EQ(s.buffered_requests, 1, "(2)");

    /* (3) READ_ONCE of (8192, 4096): from storage, not admitted. */
    read_checked(ctx, path, 8192, 4096, MEMTIER_READ_ONCE, buf);
    s = mt_stats(ctx);
    dump("(3) read_ex ONCE 4096@8192", &s);
    SOFT_EQ(s.requests, 3, "(3)");
    SOFT_EQ(s.buffered_requests, 2, "(3)");
    SOFT_EQ(s.cache_inserted_bytes, inserted1, "(3) cache_inserted_bytes unchanged");
    SOFT_EQ(s.storage_bytes, 8192, "(3)");

    /* (4) prefetch the whole file: only the missing bytes come in. */
    MT_OK(memtier_prefetch(ctx, path, 0, 0, NULL));
    s = mt_stats(ctx);
    dump("(4) prefetch whole file", &s);
    SOFT_EQ(s.prefetch_requests, 1, "(4)");
    SOFT_EQ(s.prefetch_bytes, FILE_SIZE - 4096, "(4)");
    SOFT_EQ(s.cache_resident_bytes, FILE_SIZE, "(4)");
    SOFT_EQ(s.requests, 3, "(4) prefetch is not a read request");
    /* Everything is resident now: a whole-file read is a pure cache hit. */
    read_checked(ctx, path, 0, FILE_SIZE, MEMTIER_READ_DEFAULT, buf);
    s = mt_stats(ctx);
    dump("(4b) read whole file", &s);
    SOFT_EQ(s.cache_hit_requests, 2, "(4b)");
    SOFT_EQ(s.cache_hit_bytes, 4096 + FILE_SIZE, "(4b)");
    const uint64_t resident = s.cache_resident_bytes, budget = s.cache_budget_bytes;
    SOFT_EQ(budget, cfg.cache_bytes, "(4b) cache_budget_bytes is the configured budget");

    /* (4c) CPU reads never touch the GPU tier: its counters stay 0, and the
     * HBM budget gauge is the configured one (default 1 GiB, allocated only by
     * TO_HBM prefetches). */
    SOFT_EQ(s.hbm_hit_requests, 0, "(4c)");
    SOFT_EQ(s.hbm_hit_bytes, 0, "(4c)");
    SOFT_EQ(s.hbm_inserted_bytes, 0, "(4c)");
    SOFT_EQ(s.hbm_resident_bytes, 0, "(4c)");
    SOFT_EQ(s.hbm_budget_bytes, cfg.hbm_cache_bytes, "(4c) hbm_budget_bytes is the configured budget");
    SOFT_EQ(s.gds_fallbacks, 0, "(4c)");
    SOFT_EQ(s.h2d_bytes, 0, "(4c)");
    SOFT_EQ(s.h2d_ns, 0, "(4c)");
    SOFT_EQ(s.staged_read_ns, 0, "(4c)");
    SOFT_EQ(s.gds_requests + s.staged_requests, 0, "(4c)");

    /* (5) reset: every counter 0 except the four state fields. */
    MT_OK(memtier_stats_reset(ctx));
    s = mt_stats(ctx);
    dump("(5) after memtier_stats_reset", &s);
    {
        const uint64_t* f = (const uint64_t*)&s;
        size_t i, n = sizeof s / sizeof(uint64_t);
        for (i = 0; i < n; i++) {
            size_t off = i * sizeof(uint64_t);
            if (off == offsetof(memtier_stats_t, cache_resident_bytes) ||
                off == offsetof(memtier_stats_t, cache_budget_bytes) ||
                off == offsetof(memtier_stats_t, hbm_resident_bytes) ||
                off == offsetof(memtier_stats_t, hbm_budget_bytes))
                continue;
            if (f[i] != 0) {
                fprintf(stderr, "MISMATCH (5): counter #%zu (byte offset %zu) = %llu after reset, want 0\n",
                        i, off, (unsigned long long)f[i]);
                mismatches++;
            }
        }
        SOFT_EQ(s.cache_resident_bytes, resident, "(5) resident kept across reset");
        SOFT_EQ(s.cache_budget_bytes, budget, "(5) budget kept across reset");
    }

    /* (6) drop the file's blocks. */
    MT_OK(memtier_drop_cache(ctx, path));
    s = mt_stats(ctx);
    dump("(6) after memtier_drop_cache(path)", &s);
    SOFT_EQ(s.cache_resident_bytes, 0, "(6)");
    SOFT_EQ(s.cache_budget_bytes, budget, "(6)");
    /* And the file still reads correctly afterwards. */
    read_checked(ctx, path, 12345, 4096, MEMTIER_READ_DEFAULT, buf);

    /* (7) The exported memtier_stats (what 0.1 binaries and FFI bindings call:
     * the name in parentheses skips the header's macro) writes the 0.1 layout
     * only, so an older, shorter struct is never written past; the macro and
     * memtier_stats_sized fill the whole struct. */
    {
        const size_t v1 = offsetof(memtier_stats_t, hbm_hit_requests);
        memtier_stats_t old;
        size_t i;
        SOFT_EQ(v1, 32 * sizeof(uint64_t), "(7) the 0.1 layout is 32 counters");
        memset(&old, 0xA7, sizeof old);
        MT_OK((memtier_stats)(ctx, &old));
        for (i = v1; i < sizeof old; i++)
            if (((const unsigned char*)&old)[i] != 0xA7) {
                fprintf(stderr, "MISMATCH (7): exported memtier_stats wrote byte %zu (0.1 size %zu)\n", i, v1);
                mismatches++;
                break;
            }
        SOFT_EQ(old.requests, mt_stats(ctx).requests, "(7) exported memtier_stats fills the 0.1 fields");
        memset(&old, 0xA7, sizeof old);
        MT_OK(memtier_stats(ctx, &old));
        SOFT_EQ(old.hbm_budget_bytes, cfg.hbm_cache_bytes, "(7) the memtier_stats macro fills 0.2 fields");
    }

    MT_OK(memtier_finalize(ctx));
    free(buf);
    if (mismatches) MT_FAIL("%d counter(s) differ from the expected exact values (see MISMATCH lines)", mismatches);
    mt_pass();
    return 0;
}
