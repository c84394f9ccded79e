/*
 * path_policy_demo: what the path policy decides, and proof that reads follow it.
 *
 * Makes a 96 MiB experiment-pattern file and drops it from the page cache. For a
 * sequence of requests (4 KiB, 1 MiB, 64 MiB; aligned and unaligned offsets and
 * destinations; hints READ_ONCE / WILL_REUSE / DIRECT; after a page-cache warm-up;
 * after memtier_prefetch; a CUDA target; an empty read) it prints
 * memtier_explain's decision, then performs the read, checks every byte and shows
 * which path moved the bytes (stats before/after). The requests run in order, so
 * earlier ones change what later ones find (cold -> cached -> warm).
 *
 * Exit 0 when every read returned the right bytes (or the expected status).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

enum pre_step { PRE_NONE, PRE_WARM_PAGE_CACHE, PRE_PREFETCH };

typedef struct row {
    const char* label;
    uint64_t offset;
    uint64_t size;
    size_t dst_skew; /* dst = aligned buffer + dst_skew */
    uint32_t flags;
    int target;
    enum pre_step pre;
} row_t;

static const char* flags_name(uint32_t f) {
    switch (f) {
    case MEMTIER_READ_DEFAULT: return "DEFAULT";
    case MEMTIER_READ_ONCE: return "READ_ONCE";
    case MEMTIER_READ_WILL_REUSE: return "WILL_REUSE";
    case MEMTIER_READ_DIRECT: return "DIRECT";
    case MEMTIER_READ_BUFFERED: return "BUFFERED";
    default: return "mixed";
    }
}

/* "cache 4K + direct 60M" from a stats difference. */
static void served_text(char* out, size_t len, const memtier_stats_t* d) {
    struct {
        const char* name;
        uint64_t bytes;
    } p[] = {{"cache", d->cache_hit_bytes}, {"buffered", d->buffered_bytes},
             {"direct", d->direct_bytes},   {"gds", d->gds_bytes},
             {"staged", d->staged_bytes}};
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        if (p[i].bytes == 0) continue;
        char b[32];
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s %s",
                                 used ? " + " : "", p[i].name, mt_fmt_bytes(b, sizeof b, p[i].bytes));
    }
    if (used == 0) snprintf(out, len, "-");
}

static int decision_matches(const memtier_decision_t* dec, const memtier_stats_t* d) {
    uint64_t uncached_bytes = d->buffered_bytes + d->direct_bytes + d->gds_bytes + d->staged_bytes;
    if (uncached_bytes == 0) return 1; /* everything came from the cache */
    switch (dec->path) {
    case MEMTIER_PATH_BUFFERED: return d->buffered_bytes > 0;
    case MEMTIER_PATH_DIRECT: return d->direct_bytes > 0 || d->direct_fallbacks > 0;
    case MEMTIER_PATH_GDS: return d->gds_bytes > 0;
    case MEMTIER_PATH_STAGED: return d->staged_bytes > 0;
    default: return 0;
    }
}

int main(int argc, char** argv) {
    int help = 0;
    const mt_flag_t flags[] = {{"help", MT_FLAG_BOOL, &help, "this text"}};
    if (mt_parse_flags(argc, argv, flags, 1, NULL, 0) < 0) return 2;
    if (help) {
        printf("usage: path_policy_demo (no arguments)\n");
        return 0;
    }

    mt_print_banner("path_policy_demo");
    printf("shows memtier_explain's path decision for a series of reads of a 96 MiB file,\n");
    printf("then performs each read, checks its bytes and shows which path moved them\n");
    printf("(\"served\", from stats). Requests run in order: earlier reads change the state\n");
    printf("(DRAM cache, page cache) that later decisions see.\n");

    const uint64_t fsize = 96 * MT_MIB;
    const char* path = mt_temp_file("path_policy", fsize, MT_CONTENT_PATTERN);
    if (mt_drop_page_cache(path) != 0)
        printf("note: could not drop the page cache: %s\n", strerror(errno));
    int64_t res = mt_page_cache_resident(path);
    char a[32], b[32], c[32], d[32];
    if (res >= 0)
        printf("file %s: page cache holds %s of %s after the drop%s\n", path,
               mt_fmt_bytes(a, sizeof a, (uint64_t)res), mt_fmt_bytes(b, sizeof b, fsize),
               res > 0 ? " (this file system keeps them: warm results below)" : "");

    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 1;
    cfg.cache_bytes = 256 * MT_MIB;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(&cfg, &ctx), "memtier_init");
    memtier_config_t eff;
    mt_check(memtier_get_config(ctx, &eff, sizeof eff), "memtier_get_config");
    printf("config: direct_mode=%d direct_threshold=%s cache=%s admit_max=%s task=%s block=%s\n",
           eff.direct_mode, mt_fmt_bytes(a, sizeof a, eff.direct_threshold_bytes),
           mt_fmt_bytes(b, sizeof b, eff.cache_bytes),
           mt_fmt_bytes(c, sizeof c, eff.cache_admit_max_bytes),
           mt_fmt_bytes(d, sizeof d, eff.task_bytes),
           mt_fmt_bytes((char[32]){0}, 32, eff.cache_block_bytes));

    const uint64_t M = MT_MIB, K = MT_KIB;
    const row_t rows[] = {
        {"4 KiB @0 (cold)", 0, 4 * K, 0, 0, MEMTIER_TARGET_CPU, PRE_NONE},
        {"4 KiB @0 again", 0, 4 * K, 0, 0, MEMTIER_TARGET_CPU, PRE_NONE},
        {"4 KiB @12345, dst+1", 12345, 4 * K, 1, 0, MEMTIER_TARGET_CPU, PRE_NONE},
        {"1 MiB @1M", 1 * M, 1 * M, 0, 0, MEMTIER_TARGET_CPU, PRE_NONE},
        {"1 MiB @3M+7, dst+3", 3 * M + 7, 1 * M, 3, MEMTIER_READ_DIRECT, MEMTIER_TARGET_CPU, PRE_NONE},
        {"1 MiB @5M", 5 * M, 1 * M, 0, MEMTIER_READ_ONCE, MEMTIER_TARGET_CPU, PRE_NONE},
        {"64 MiB @16M (cold)", 16 * M, 64 * M, 0, 0, MEMTIER_TARGET_CPU, PRE_NONE},
        {"64 MiB @16M+1, dst+5", 16 * M + 1, 64 * M - 1, 5, MEMTIER_READ_WILL_REUSE, MEMTIER_TARGET_CPU, PRE_NONE},
        {"64 MiB @16M again", 16 * M, 64 * M, 0, 0, MEMTIER_TARGET_CPU, PRE_NONE},
        {"16 MiB @80M, pc warm", 80 * M, 16 * M, 0, MEMTIER_READ_ONCE, MEMTIER_TARGET_CPU, PRE_WARM_PAGE_CACHE},
        {"8 MiB @5M, prefetched", 5 * M, 8 * M, 0, 0, MEMTIER_TARGET_CPU, PRE_PREFETCH},
        {"4 KiB @0, CUDA target", 0, 4 * K, 0, 0, MEMTIER_TARGET_CUDA, PRE_NONE},
        {"0 bytes @0", 0, 0, 0, 0, MEMTIER_TARGET_CPU, PRE_NONE},
    };
    const size_t nrows = sizeof rows / sizeof rows[0];

    uint8_t* base = (uint8_t*)mt_alloc((size_t)(64 * M + 4096));
    uint8_t* warm = NULL;
    int ok = 1;

    printf("\n%-2s %-22s %-10s | %-8s %5s %10s %10s %5s | %-22s %8s %s\n", "#", "request", "hint",
           "path", "admit", "cached", "resident", "tasks", "served (stats)", "ms", "check");
    for (size_t i = 0; i < nrows; i++) {
        const row_t* r = &rows[i];
        uint8_t* dst = base + r->dst_skew;
        if (r->pre == PRE_WARM_PAGE_CACHE) {
            /* Warm the page cache with plain pread, outside MemTier. */
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) mt_die("open %s: %s", path, strerror(errno));
            if (warm == NULL) warm = (uint8_t*)mt_alloc((size_t)(1 * M));
            for (uint64_t o = r->offset; o < r->offset + r->size; o += M)
                if (mt_pread_full(fd, warm, (size_t)M, o) < 0) mt_die("pread: %s", strerror(errno));
            close(fd);
            printf("   (plain pread of [%" PRIu64 " MiB, %" PRIu64 " MiB) to warm the page cache)\n",
                   r->offset / M, (r->offset + r->size) / M);
        } else if (r->pre == PRE_PREFETCH) {
            mt_check(memtier_prefetch(ctx, path, r->offset, r->size, NULL), "memtier_prefetch");
            printf("   (memtier_prefetch of [%" PRIu64 " MiB, %" PRIu64 " MiB) into the DRAM cache)\n",
                   r->offset / M, (r->offset + r->size) / M);
        }

        memtier_decision_t dec;
        memset(&dec, 0, sizeof dec);
        int est = memtier_explain(ctx, path, r->offset, r->size, dst, r->target, r->flags, &dec);
        char explain_err[256] = "";
        if (est != MEMTIER_OK)
            snprintf(explain_err, sizeof explain_err, "%s", memtier_last_error());

        if (r->target == MEMTIER_TARGET_CUDA && est == MEMTIER_OK && dec.path != MEMTIER_PATH_NONE) {
            /* A CUDA build: a real read needs device memory, which this example
             * (libc + memtier.h only) does not allocate. */
            printf("%-2zu %-22s %-10s | %-8s %5d %10s %10s %5" PRIu64 " | %-22s %8s %s\n", i + 1,
                   r->label, flags_name(r->flags), memtier_path_name(dec.path), dec.admit,
                   mt_fmt_bytes(a, sizeof a, dec.cached_bytes),
                   mt_fmt_bytes(b, sizeof b, dec.resident_bytes), (uint64_t)dec.tasks,
                   "(not run: no device buffer)", "-", "skip");
            printf("   reason: %s\n", dec.reason);
            continue;
        }

        memtier_stats_t before, after, diff;
        mt_check(memtier_stats(ctx, &before), "memtier_stats");
        uint64_t t0 = mt_now_ns();
        int rst = memtier_read_ex(ctx, path, r->offset, r->size, r->size ? dst : NULL, r->target, r->flags);
        double ms = (double)(mt_now_ns() - t0) / 1e6;
        char read_err[256] = "";
        if (rst != MEMTIER_OK) snprintf(read_err, sizeof read_err, "%s", memtier_last_error());
        mt_check(memtier_stats(ctx, &after), "memtier_stats");
        mt_stats_sub(&diff, &after, &before);

        if (r->target == MEMTIER_TARGET_CUDA) {
            /* No usable GPU: the read fails with UNSUPPORTED without touching dst;
             * memtier.h says explain returns the status the read would fail with. */
            int good = rst == MEMTIER_ERR_UNSUPPORTED && diff.bytes == 0;
            printf("%-2zu %-22s %-10s | explain: %s (path %s), read: %s -> %s\n", i + 1, r->label,
                   flags_name(r->flags), mt_status_name(est), memtier_path_name(dec.path),
                   mt_status_name(rst), good ? "expected without a usable CUDA GPU" : "UNEXPECTED");
            if (est == MEMTIER_OK)
                printf("   reason: %s\n   note: explain returned MEMTIER_OK although the read fails with %s\n",
                       dec.reason, mt_status_name(rst));
            else
                printf("   explain detail: %s\n", explain_err);
            if (!good) {
                printf("   read detail: %s\n", read_err);
                ok = 0;
            }
            continue;
        }
        if (est != MEMTIER_OK || rst != MEMTIER_OK) {
            printf("%-2zu %-22s FAIL: explain %s (%s), read %s (%s)\n", i + 1, r->label,
                   mt_status_name(est), explain_err, mt_status_name(rst), read_err);
            ok = 0;
            continue;
        }
        uint64_t bad = mt_pattern_check(dst, r->offset, (size_t)r->size);
        char served[96];
        served_text(served, sizeof served, &diff);
        int agrees = r->size == 0 ? dec.path == MEMTIER_PATH_NONE : decision_matches(&dec, &diff);
        printf("%-2zu %-22s %-10s | %-8s %5d %10s %10s %5" PRIu64 " | %-22s %8.2f %s%s\n", i + 1,
               r->label, flags_name(r->flags), memtier_path_name(dec.path), dec.admit,
               mt_fmt_bytes(a, sizeof a, dec.cached_bytes),
               mt_fmt_bytes(b, sizeof b, dec.resident_bytes), (uint64_t)dec.tasks, served, ms,
               bad == MT_NO_MISMATCH ? "bytes ok" : "BAD BYTES",
               agrees ? "" : " (served differs from explain)");
        printf("   reason: %s\n", dec.reason);
        if (bad != MT_NO_MISMATCH) {
            printf("   FAIL: first wrong byte at file offset %" PRIu64 "\n", bad);
            ok = 0;
        }
        if (diff.bytes != r->size) {
            printf("   FAIL: stats.bytes grew by %" PRIu64 ", expected %" PRIu64 "\n",
                   (uint64_t)diff.bytes, r->size);
            ok = 0;
        }
    }

    memtier_stats_t st;
    mt_check(memtier_stats(ctx, &st), "memtier_stats");
    printf("\nstats per path (whole run):\n");
    printf("  %-9s %9s %12s\n", "path", "requests", "bytes");
    printf("  %-9s %9" PRIu64 " %12" PRIu64 "  (requests served entirely from the cache)\n", "cache",
           (uint64_t)st.cache_hit_requests, (uint64_t)st.cache_hit_bytes);
    printf("  %-9s %9" PRIu64 " %12" PRIu64 "\n", "buffered", (uint64_t)st.buffered_requests,
           (uint64_t)st.buffered_bytes);
    printf("  %-9s %9" PRIu64 " %12" PRIu64 "  (bounce bytes %" PRIu64 ", fallbacks %" PRIu64 ")\n",
           "direct", (uint64_t)st.direct_requests, (uint64_t)st.direct_bytes,
           (uint64_t)st.bounce_bytes, (uint64_t)st.direct_fallbacks);
    printf("  %-9s %9" PRIu64 " %12" PRIu64 "\n", "gds", (uint64_t)st.gds_requests, (uint64_t)st.gds_bytes);
    printf("  %-9s %9" PRIu64 " %12" PRIu64 "\n", "staged", (uint64_t)st.staged_requests,
           (uint64_t)st.staged_bytes);
    printf("all counters:\n");
    mt_stats_print(stdout, "  ", &st);

    free(warm);
    free(base);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    printf("%s\n", ok ? "path_policy_demo: OK" : "path_policy_demo: FAILED");
    return ok ? 0 : 1;
}
