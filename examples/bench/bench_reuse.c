/*
 * bench_reuse: a file read again and again (epochs): MemTier's DRAM cache against
 * the kernel page cache.
 *
 *   bench_reuse [F] [--size=N] [--chunk=4M] [--repeat=R] [--cold] [--overwrite] [--json]
 *
 * F defaults to a temporary 256 MiB experiment-pattern file; a given F that is
 * missing or shorter than --size is created / extended with the pattern first
 * (one "note: created|extended <absolute path>" line says so).
 * N defaults to the size of F.
 *
 * Refused with exit 2 before anything is written: an F that is not a regular
 * file (a FIFO, directory, device); an N whose missing bytes do not fit in the
 * free space of F's file system minus a safety margin (the smaller of 1 GiB and
 * 5% of the file system); an N that with its read buffer does not fit in the
 * physical memory (the DRAM cache holds all N bytes); --chunk outside 1 B..1 TiB;
 * --repeat outside 1..64. A write that fails removes the file it created, or
 * truncates the file it extended back to its old size.
 *
 *   pass 1    memtier_read_ex(MEMTIER_READ_WILL_REUSE) of [0, N) in chunks into a
 *             context whose cache budget (cache_bytes) is N + 64 MiB: fills the
 *             DRAM cache (--cold drops the page cache first)
 *   pass 2    the same reads again, R times: served from the DRAM cache
 *   baseline  a plain pread loop with the same chunk size, page cache warm
 *             (after one untimed pass), R times
 * seconds = median of R runs (pass 1: one run); GB/s uses 1 GB = 1e9 B;
 * ratio = GB/s / GB/s of the baseline. Every chunk is checked against the
 * pattern after its read (outside the timed calls).
 *
 * Memory: peak RSS (VmHWM, reset before the memtier passes) minus RSS before
 * them is MemTier's footprint; "rss_ok" when it is at most the cache budget +
 * 64 MiB. Exit 0, 1 when a read failed or returned wrong bytes, 2 on a usage error.
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

#define MAX_REPEAT 64
#define MEM_WHAT "the DRAM cache (all N bytes) plus the read buffer (min(--chunk, N))"
/* N + min(chunk, N), saturating. */
#define MEM_BYTES(n, c) ((n) > UINT64_MAX / 2 ? UINT64_MAX : (n) + ((c) < (n) ? (c) : (n)))

typedef struct bench {
    const char* path;
    uint64_t size, chunk;
    uint8_t* buf;
    int is_pattern; /* 1: check bytes against the pattern; 0: compare checksums */
} bench_t;

/* One memtier pass; returns seconds spent in memtier_read_ex. */
static double memtier_pass(const bench_t* b, memtier_ctx_t* ctx, uint64_t* sum) {
    uint64_t ns = 0;
    mt_checksum_t cs;
    mt_checksum_init(&cs);
    for (uint64_t off = 0; off < b->size; off += b->chunk) {
        uint64_t n = b->size - off < b->chunk ? b->size - off : b->chunk;
        uint64_t t0 = mt_now_ns();
        int st = memtier_read_ex(ctx, b->path, off, n, b->buf, MEMTIER_TARGET_CPU, MEMTIER_READ_WILL_REUSE);
        ns += mt_now_ns() - t0;
        mt_check(st, "memtier_read_ex(WILL_REUSE)");
        if (b->is_pattern) {
            uint64_t bad = mt_pattern_check(b->buf, off, (size_t)n);
            if (bad != MT_NO_MISMATCH) mt_die("memtier: wrong byte at offset %" PRIu64, bad);
        }
        mt_checksum_update(&cs, b->buf, (size_t)n);
    }
    *sum = mt_checksum_final(&cs);
    return (double)ns / 1e9;
}

static double pread_pass(const bench_t* b, uint64_t* sum) {
    int fd = mt_open_file(b->path, O_RDONLY, 0);
    if (fd < 0) mt_die("open %s: %s", b->path, strerror(errno));
    uint64_t ns = 0;
    mt_checksum_t cs;
    mt_checksum_init(&cs);
    for (uint64_t off = 0; off < b->size; off += b->chunk) {
        size_t n = (size_t)(b->size - off < b->chunk ? b->size - off : b->chunk);
        uint64_t t0 = mt_now_ns();
        int64_t r = mt_pread_full(fd, b->buf, n, off);
        ns += mt_now_ns() - t0;
        if (r != (int64_t)n) mt_die("pread %s at %" PRIu64 ": %s", b->path, off, r < 0 ? strerror(errno) : "short");
        if (b->is_pattern) {
            uint64_t bad = mt_pattern_check(b->buf, off, n);
            if (bad != MT_NO_MISMATCH) mt_die("pread: byte at offset %" PRIu64 " is not the pattern", bad);
        }
        mt_checksum_update(&cs, b->buf, n);
    }
    close(fd);
    *sum = mt_checksum_final(&cs);
    return (double)ns / 1e9;
}

int main(int argc, char** argv) {
    uint64_t size = 0, chunk = 4 * MT_MIB;
    long repeat = 3;
    int json = 0, help = 0, cold = 0, overwrite = 0;
    const mt_flag_t flags[] = {
        {"size", MT_FLAG_SIZE, &size, "bytes to read (default: size of F, or 256M for the temp file)"},
        {"chunk", MT_FLAG_SIZE, &chunk, "bytes per read (default 4M)"},
        {"repeat", MT_FLAG_INT, &repeat, "timed runs of pass 2 and of the baseline (default 3)"},
        {"cold", MT_FLAG_BOOL, &cold, "drop the page cache before pass 1"},
        {"overwrite", MT_FLAG_BOOL, &overwrite, "rewrite an F too short and not a pattern file"},
        {"json", MT_FLAG_BOOL, &json, "print one JSON object"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    const char* pos[1];
    int npos = mt_parse_args(argc, argv, flags, nflags, pos, 1,
                             "usage: bench_reuse [F] [flags]\n"
                             "  reads F twice with MEMTIER_READ_WILL_REUSE (pass 2 from the DRAM cache)\n"
                             "  against a plain pread loop over the warm page cache\n");
    mt_flag_size_range("chunk", chunk, 1, 1024 * MT_GIB);
    mt_flag_range("repeat", repeat, 1, MAX_REPEAT);
    if (json) mt_set_note_stream(stderr);

    bench_t b;
    memset(&b, 0, sizeof b);
    b.chunk = chunk;
    b.is_pattern = 1;
    if (npos == 0) {
        if (size == 0) size = 256 * MT_MIB;
        /* The same checks as for F, before the file is written. */
        mt_require_temp_space("bench_reuse", size);
        mt_require_memory(MEM_WHAT, MEM_BYTES(size, chunk));
        b.path = mt_temp_file("bench_reuse", size, MT_CONTENT_PATTERN);
        mt_note("note: no F: using a temporary %s experiment-pattern file %s\n",
                mt_fmt_bytes((char[32]){0}, 32, size), b.path);
    } else {
        b.path = pos[0];
        /* A FIFO, directory or device is refused (exit 2) before any open. */
        const int exists = mt_require_regular(b.path, NULL);
        if (size == 0) {
            if (!exists) mt_die("%s: %s (give --size=N to create it)", b.path, strerror(errno));
            size = (uint64_t)mt_file_size(b.path);
        } else {
            /* Refused (exit 2) before anything is written. */
            mt_require_space_to_grow(b.path, size);
            mt_require_memory(MEM_WHAT, MEM_BYTES(size, chunk));
            mt_ensure_pattern_file(b.path, size, overwrite);
        }
    }
    if (size == 0) mt_die("nothing to read: size 0");
    mt_require_memory(MEM_WHAT, MEM_BYTES(size, chunk));
    b.size = size;
    b.buf = (uint8_t*)mt_alloc((size_t)(chunk < size ? chunk : size));

    /* Baseline first warms the page cache and tells whether F is a pattern file. */
    {
        int fd = mt_open_file(b.path, O_RDONLY, 0);
        if (fd < 0) mt_die("open %s: %s", b.path, strerror(errno));
        size_t n = (size_t)(size < chunk ? size : chunk);
        if (mt_pread_full(fd, b.buf, n, 0) != (int64_t)n) mt_die("pread %s: %s", b.path, strerror(errno));
        close(fd);
        if (mt_pattern_check(b.buf, 0, n) != MT_NO_MISMATCH) {
            b.is_pattern = 0;
            mt_note("note: %s is not an experiment-pattern file: passes are compared by checksum\n", b.path);
        }
    }

    const uint64_t budget = size + 64 * MT_MIB;
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 1;
    cfg.cache_bytes = budget;
    memtier_ctx_t* ctx = NULL;

    /* Memory around the memtier passes. */
    const uint64_t rss_before = mt_rss_bytes();
    const int peak_reset = mt_peak_rss_reset() == 0;
    mt_check(memtier_init(&cfg, &ctx), "memtier_init");

    if (cold && mt_drop_page_cache(b.path) != 0) mt_note("note: cannot drop the page cache: %s\n", strerror(errno));
    const int64_t resident1 = mt_page_cache_resident(b.path);
    uint64_t sum1 = 0, sum2 = 0, sumb = 0;
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
    const double t1 = memtier_pass(&b, ctx, &sum1);
    memtier_stats_t s1;
    mt_check(memtier_stats(ctx, &s1), "memtier_stats");

    double t2s[MAX_REPEAT];
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
    for (long k = 0; k < repeat; k++) {
        uint64_t s = 0;
        t2s[k] = memtier_pass(&b, ctx, &s);
        if (k == 0) sum2 = s;
        else if (s != sum2) mt_die("pass 2 run %ld: checksum changed", k + 1);
    }
    memtier_stats_t s2;
    mt_check(memtier_stats(ctx, &s2), "memtier_stats");
    const uint64_t peak = mt_peak_rss_bytes();
    const uint64_t overhead = peak > rss_before ? peak - rss_before : 0;

    /* Baseline: warm page cache. */
    double tbs[MAX_REPEAT];
    uint64_t dummy;
    pread_pass(&b, &dummy); /* untimed warm-up */
    const int64_t resident_b = mt_page_cache_resident(b.path);
    for (long k = 0; k < repeat; k++) tbs[k] = pread_pass(&b, k == 0 ? &sumb : &dummy);

    double t2s_sorted[MAX_REPEAT], tbs_sorted[MAX_REPEAT];
    memcpy(t2s_sorted, t2s, sizeof(double) * (size_t)repeat);
    memcpy(tbs_sorted, tbs, sizeof(double) * (size_t)repeat);
    const double t2 = mt_median(t2s_sorted, (size_t)repeat);
    const double tb = mt_median(tbs_sorted, (size_t)repeat);
    const double r1 = t1 > 0 ? tb / t1 : 0, r2 = t2 > 0 ? tb / t2 : 0;

    int ok = sum1 == sumb && sum2 == sumb;
    if (b.is_pattern && sumb != mt_pattern_checksum(size)) ok = 0;
    const uint64_t want_hits = size * (uint64_t)repeat;
    const int from_cache = s2.cache_hit_bytes == want_hits && s2.storage_bytes == 0;
    const int rss_ok = peak_reset && overhead <= budget + 64 * MT_MIB;

    if (json) {
        mt_json_t j;
        mt_json_begin(&j, stdout);
        mt_json_str(&j, "benchmark", "bench_reuse");
        mt_json_str(&j, "memtier_version", memtier_version());
        mt_json_str(&j, "file", b.path);
        mt_json_u64(&j, "size", size);
        mt_json_u64(&j, "chunk", chunk);
        mt_json_i64(&j, "repeat", repeat);
        mt_json_str(&j, "gb", "1e9 bytes");
        mt_json_str(&j, "ratio", "GB/s / GB/s of the warm pread baseline, same run");
        mt_json_arr(&j, "modes");
        const char* names[3] = {"pass1_will_reuse", "pass2_dram_cache", "pread_warm_baseline"};
        const double secs[3] = {t1, t2, tb};
        const double* samples[3] = {&t1, t2s, tbs};
        const long ns[3] = {1, repeat, repeat};
        for (int i = 0; i < 3; i++) {
            mt_json_obj(&j, NULL);
            mt_json_str(&j, "mode", names[i]);
            mt_json_u64(&j, "bytes", size);
            mt_json_f64(&j, "seconds", secs[i]);
            mt_json_arr(&j, "samples");
            for (long k = 0; k < ns[i]; k++) mt_json_f64(&j, NULL, samples[i][k]);
            mt_json_arr_end(&j);
            mt_json_f64(&j, "gbps", mt_gbps(size, secs[i]));
            mt_json_f64(&j, "ratio_vs_baseline", secs[i] > 0 ? tb / secs[i] : 0);
            mt_json_obj_end(&j);
        }
        mt_json_arr_end(&j);
        mt_json_f64(&j, "pass2_over_baseline", r2);
        mt_json_f64(&j, "pass1_seconds", t1);
        mt_json_i64(&j, "page_cache_resident_before_pass1", resident1);
        mt_json_bool(&j, "pass2_all_from_cache", from_cache);
        mt_json_stats(&j, "pass1_stats", &s1);
        mt_json_stats(&j, "pass2_stats", &s2);
        mt_json_hex(&j, "checksum", sumb);
        mt_json_str(&j, "checksum_algorithm", MT_CHECKSUM_NAME);
        mt_json_str(&j, "checksum_definition", MT_CHECKSUM_DESC);
        mt_json_obj(&j, "memory");
        mt_json_u64(&j, "peak_rss_bytes", peak);
        mt_json_u64(&j, "rss_before_bytes", rss_before);
        mt_json_u64(&j, "memtier_peak_overhead_bytes", overhead);
        mt_json_u64(&j, "cache_budget_bytes", budget);
        mt_json_bool(&j, "rss_ok", rss_ok);
        mt_json_obj_end(&j);
        mt_json_bool(&j, "ok", ok);
        mt_json_end(&j);
    } else {
        char x[32], y[32], z[32];
        printf("bench_reuse: MemTier %s; %s, %s in %s chunks; repeat %ld (median); 1 GB = 1e9 B\n",
               memtier_version(), b.path, mt_fmt_bytes(x, sizeof x, size), mt_fmt_bytes(y, sizeof y, chunk),
               repeat);
        printf("pass 1 page cache: %s resident before it%s\n",
               resident1 >= 0 ? mt_fmt_bytes(x, sizeof x, (uint64_t)resident1) : "?", cold ? " (--cold)" : "");
        printf("\n%-22s %12s %9s %8s %12s\n", "mode", "bytes", "seconds", "GB/s", "vs baseline");
        printf("%-22s %12" PRIu64 " %9.4f %8.2f %11.2fx\n", "pass 1 (WILL_REUSE)", size, t1, mt_gbps(size, t1), r1);
        printf("%-22s %12" PRIu64 " %9.4f %8.2f %11.2fx\n", "pass 2 (DRAM cache)", size, t2, mt_gbps(size, t2), r2);
        printf("%-22s %12" PRIu64 " %9.4f %8.2f %12s\n", "pread, warm page cache", size, tb, mt_gbps(size, tb),
               "baseline");
        printf("\npass2/baseline: %.2fx   pass 1: %.4f s (%.2f GB/s)\n", r2, t1, mt_gbps(size, t1));
        printf("pass 1: storage_bytes=%" PRIu64 " cache_inserted_bytes=%" PRIu64 " direct_bytes=%" PRIu64
               " buffered_bytes=%" PRIu64 "\n",
               (uint64_t)s1.storage_bytes, (uint64_t)s1.cache_inserted_bytes, (uint64_t)s1.direct_bytes,
               (uint64_t)s1.buffered_bytes);
        printf("pass 2 (%ld runs): cache_hit_bytes=%" PRIu64 " (of %" PRIu64 ") cache_hit_requests=%" PRIu64
               " storage_bytes=%" PRIu64 "%s\n",
               repeat, (uint64_t)s2.cache_hit_bytes, want_hits, (uint64_t)s2.cache_hit_requests,
               (uint64_t)s2.storage_bytes, from_cache ? " -> all from the DRAM cache" : " -> NOT all from the cache");
        printf("baseline page cache: %s of %s resident\n",
               resident_b >= 0 ? mt_fmt_bytes(x, sizeof x, (uint64_t)resident_b) : "?", mt_fmt_bytes(y, sizeof y, size));
        printf("checksum %s 0x%016" PRIx64 " (pass 1, pass 2, baseline %s)\n", MT_CHECKSUM_NAME, sumb,
               ok ? "agree" : "DISAGREE");
        printf("memory: peak RSS %s; MemTier peak overhead %s (cache resident %s); cache budget %s -> %s\n",
               mt_fmt_bytes(x, sizeof x, peak), mt_fmt_bytes(y, sizeof y, overhead),
               mt_fmt_bytes(z, sizeof z, s2.cache_resident_bytes), mt_fmt_bytes((char[32]){0}, 32, budget),
               !peak_reset ? "rss_unknown (cannot reset VmHWM)" : (rss_ok ? "rss_ok" : "rss_over_budget"));
        printf("%s\n", ok ? "bench_reuse: OK" : "bench_reuse: FAILED");
    }
    free(b.buf);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    return ok ? 0 : 1;
}
