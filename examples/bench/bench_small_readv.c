/*
 * bench_small_readv: many small random reads, memtier_readv against a serial
 * pread loop, plus the latency of a cached 4 KiB memtier_read.
 *
 *   bench_small_readv [F] [--count=100000] [--batch=256] [--size=N] [--warm] [--cold]
 *                     [--lat-count=200000] [--region=64M] [--overwrite] [--json]
 *
 * F defaults to a temporary 256 MiB experiment-pattern file; a given F missing or
 * shorter than --size is created / extended with the pattern first (one
 * "note: created|extended <absolute path>" line says so).
 *
 * Throughput: --count random 4 KiB-aligned 4 KiB reads over [0, N) (fixed seed
 * 0x5EED, same offsets for every mode):
 *   pread       a serial pread loop (the baseline)
 *   readv       memtier_readv in batches of --batch, DRAM cache disabled
 *   read loop   one memtier_read per block, DRAM cache disabled (warm only)
 * warm = after one untimed sequential pass; cold = posix_fadvise DONTNEED before
 * each run. Both by default; --warm or --cold picks one. Time is summed over the
 * batches only; each batch is checked against the pattern after it is timed.
 * ratio = reads/s of the mode / reads/s of pread in the same pass.
 *
 * Latency: a context with the cache on prefetches the first --region bytes, then
 * --lat-count memtier_read calls of a random 4 KiB block inside it are timed one
 * by one (mean, p50, p99, p99.9, max; the clock's own cost is printed). Every
 * read is checked after its timing.
 *
 * Memory: "rss_ok" when MemTier's peak RSS overhead (VmHWM after the memtier runs
 * minus RSS before them) is at most the cache budget + 64 MiB.
 *
 * Limits (else exit 2, before anything is written): --count 1..10,000,000,
 * --batch 1..65536 (buffers hold min(batch, count) blocks), --lat-count
 * 0..10,000,000, --region 4 KiB..1 TiB (clamped to N; the prefetched region must
 * fit in memory), N at least 4 KiB; F must be a regular file (not a FIFO,
 * directory or device); the bytes F lacks must fit in the free space of its file
 * system minus a safety margin (the smaller of 1 GiB and 5% of the file system).
 * A write that fails removes the file it created, or truncates the file it
 * extended back to its old size.
 * Exit 0, 1 when a read failed or returned wrong bytes, 2 on a usage error.
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

#define BLK 4096u
#define MAX_COUNT 10000000L
#define MAX_BATCH 65536L

enum { M_PREAD, M_READV, M_READ, M_COUNT };
static const char* const mode_names[M_COUNT] = {"pread", "readv", "read loop"};
#define REGION_WHAT "the prefetched latency region (min(--region, N), held in the DRAM cache)"

typedef struct result {
    int ran;
    double seconds;
    memtier_stats_t stats;
    int have_stats;
} result_t;

typedef struct bench {
    const char* path;
    uint64_t size;
    const uint64_t* offs;
    long count, batch;
    uint8_t* buf; /* min(batch, count) * BLK */
    memtier_iovec_t* iov;
    memtier_ctx_t* ctx; /* cache disabled */
} bench_t;

static void verify_batch(const bench_t* b, long first, size_t n, const char* what) {
    for (size_t k = 0; k < n; k++) {
        uint64_t bad = mt_pattern_check(b->buf + k * BLK, b->offs[first + (long)k], BLK);
        if (bad != MT_NO_MISMATCH)
            mt_die("%s: read %ld (offset %" PRIu64 "): wrong byte at file offset %" PRIu64, what,
                   first + (long)k, b->offs[first + (long)k], bad);
    }
}

static double run_mode(bench_t* b, int m) {
    uint64_t ns = 0;
    int fd = -1;
    if (m == M_PREAD) {
        fd = mt_open_file(b->path, O_RDONLY, 0);
        if (fd < 0) mt_die("open %s: %s", b->path, strerror(errno));
    }
    for (long i = 0; i < b->count; i += b->batch) {
        const size_t n = (size_t)(b->count - i < b->batch ? b->count - i : b->batch);
        memset(b->buf, 0xA5, n * BLK);
        if (m == M_READV) {
            for (size_t k = 0; k < n; k++) {
                b->iov[k].offset = b->offs[i + (long)k];
                b->iov[k].size = BLK;
                b->iov[k].dst = b->buf + k * BLK;
                b->iov[k].path = NULL;
                b->iov[k].result = 0;
            }
        }
        uint64_t t0 = mt_now_ns();
        if (m == M_PREAD) {
            for (size_t k = 0; k < n; k++) {
                ssize_t r;
                do r = pread(fd, b->buf + k * BLK, BLK, (off_t)b->offs[i + (long)k]);
                while (r < 0 && errno == EINTR);
                if (r != (ssize_t)BLK) mt_die("pread at %" PRIu64 ": %s", b->offs[i + (long)k], r < 0 ? strerror(errno) : "short");
            }
        } else if (m == M_READV) {
            mt_check(memtier_readv(b->ctx, b->path, b->iov, n, MEMTIER_TARGET_CPU), "memtier_readv");
        } else {
            for (size_t k = 0; k < n; k++)
                mt_check(memtier_read(b->ctx, b->path, b->offs[i + (long)k], BLK, b->buf + k * BLK,
                                      MEMTIER_TARGET_CPU),
                         "memtier_read");
        }
        ns += mt_now_ns() - t0;
        if (m == M_READV)
            for (size_t k = 0; k < n; k++)
                if (b->iov[k].result != (int64_t)BLK)
                    mt_die("readv element %ld: result %" PRId64, i + (long)k, b->iov[k].result);
        verify_batch(b, i, n, mode_names[m]);
    }
    if (fd >= 0) close(fd);
    return (double)ns / 1e9;
}

static void run_pass(bench_t* b, int cold, result_t* res, int* nres_modes, int* modes) {
    int n = 0;
    modes[n++] = M_PREAD;
    modes[n++] = M_READV;
    if (!cold) modes[n++] = M_READ;
    *nres_modes = n;
    if (!cold) {
        /* Untimed sequential pass: the whole range in the page cache. */
        int fd = mt_open_file(b->path, O_RDONLY, 0);
        if (fd < 0) mt_die("open %s: %s", b->path, strerror(errno));
        uint8_t* tmp = (uint8_t*)malloc(1 << 20);
        if (tmp == NULL) mt_die("out of memory");
        for (uint64_t off = 0; off < b->size; off += 1 << 20)
            if (mt_pread_full(fd, tmp, 1 << 20, off) < 0) mt_die("pread: %s", strerror(errno));
        free(tmp);
        close(fd);
    }
    for (int i = 0; i < n; i++) {
        const int m = modes[i];
        if (cold && mt_drop_page_cache(b->path) != 0) mt_note("note: cannot drop the page cache: %s\n", strerror(errno));
        memtier_stats_t s0, s1;
        if (m != M_PREAD) mt_check(memtier_stats(b->ctx, &s0), "memtier_stats");
        res[m].seconds = run_mode(b, m);
        res[m].ran = 1;
        if (m != M_PREAD) {
            mt_check(memtier_stats(b->ctx, &s1), "memtier_stats");
            mt_stats_sub(&res[m].stats, &s1, &s0);
            res[m].have_stats = 1;
        }
    }
}

typedef struct latency {
    int ran;
    uint64_t region, n, hits, clock_ns;
    double mean_ns;
    uint64_t p50, p99, p999, max;
    memtier_stats_t stats;
} latency_t;

static void run_latency(const char* path, uint64_t size, uint64_t region, long n, uint64_t* budget_out,
                        latency_t* L) {
    memset(L, 0, sizeof *L);
    region = (region < size ? region : size) / BLK * BLK;
    if (region < BLK) mt_die("--region must hold at least one 4 KiB block");
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 1;
    cfg.cache_bytes = region + 64 * MT_MIB;
    *budget_out = cfg.cache_bytes;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(&cfg, &ctx), "memtier_init(cache on)");
    mt_check(memtier_prefetch(ctx, path, 0, region, NULL), "memtier_prefetch");
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");

    uint64_t* lat = (uint64_t*)malloc((size_t)n * sizeof *lat);
    uint8_t* buf = (uint8_t*)mt_alloc(BLK);
    if (lat == NULL) mt_die("out of memory");
    mt_rng_t rng;
    mt_rng_seed(&rng, 0x1A7);
    const uint64_t nblocks = region / BLK;
    long double sum = 0;
    for (long i = 0; i < n; i++) {
        const uint64_t off = mt_rng_below(&rng, nblocks) * BLK;
        uint64_t t0 = mt_now_ns();
        int st = memtier_read(ctx, path, off, BLK, buf, MEMTIER_TARGET_CPU);
        uint64_t t1 = mt_now_ns();
        mt_check(st, "memtier_read (cached)");
        lat[i] = t1 - t0;
        sum += (long double)lat[i];
        uint64_t bad = mt_pattern_check(buf, off, BLK);
        if (bad != MT_NO_MISMATCH) mt_die("cached read at %" PRIu64 ": wrong byte at %" PRIu64, off, bad);
    }
    mt_check(memtier_stats(ctx, &L->stats), "memtier_stats");
    mt_check(memtier_finalize(ctx), "memtier_finalize");

    /* Cost of the clock itself: median of back-to-back readings. */
    uint64_t clk[1001];
    for (int i = 0; i < 1001; i++) {
        uint64_t a = mt_now_ns();
        clk[i] = mt_now_ns() - a;
    }
    mt_sort_u64(clk, 1001);

    mt_sort_u64(lat, (size_t)n);
    L->ran = 1;
    L->region = region;
    L->n = (uint64_t)n;
    L->hits = L->stats.cache_hit_requests;
    L->clock_ns = clk[500];
    L->mean_ns = (double)(sum / n);
    L->p50 = mt_percentile_u64(lat, (size_t)n, 50);
    L->p99 = mt_percentile_u64(lat, (size_t)n, 99);
    L->p999 = mt_percentile_u64(lat, (size_t)n, 99.9);
    L->max = lat[n - 1];
    free(lat);
    free(buf);
}

int main(int argc, char** argv) {
    long count = 100000, batch = 256, lat_count = 200000;
    uint64_t size = 0, region = 64 * MT_MIB;
    int warm = 0, cold = 0, json = 0, help = 0, overwrite = 0;
    const mt_flag_t flags[] = {
        {"count", MT_FLAG_INT, &count, "random 4 KiB reads per mode (default 100000)"},
        {"batch", MT_FLAG_INT, &batch, "reads per memtier_readv call (default 256)"},
        {"size", MT_FLAG_SIZE, &size, "range of the reads (default: size of F, or 256M)"},
        {"warm", MT_FLAG_BOOL, &warm, "only the warm page cache pass"},
        {"cold", MT_FLAG_BOOL, &cold, "only the cold page cache pass"},
        {"lat-count", MT_FLAG_INT, &lat_count, "cached memtier_read calls timed (default 200000; 0 = skip)"},
        {"region", MT_FLAG_SIZE, &region, "prefetched region of the latency test (default 64M)"},
        {"overwrite", MT_FLAG_BOOL, &overwrite, "rewrite an F too short and not a pattern file"},
        {"json", MT_FLAG_BOOL, &json, "print one JSON object"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    const char* pos[1];
    int npos = mt_parse_args(argc, argv, flags, nflags, pos, 1,
                             "usage: bench_small_readv [F] [flags]\n"
                             "  random 4 KiB reads: memtier_readv (cache off) vs a serial pread loop, warm and cold,\n"
                             "  and the latency of a cached 4 KiB memtier_read\n");
    mt_flag_range("count", count, 1, MAX_COUNT);
    mt_flag_range("batch", batch, 1, MAX_BATCH);
    mt_flag_range("lat-count", lat_count, 0, MAX_COUNT);
    mt_flag_size_range("region", region, BLK, 1024 * MT_GIB);
    if (size != 0) mt_flag_size_range("size", size, BLK, UINT64_MAX); /* 0: the default */
    if (json) mt_set_note_stream(stderr);
    const int do_warm = warm || !cold, do_cold = cold || !warm;

    bench_t b;
    memset(&b, 0, sizeof b);
    if (npos == 0) {
        if (size == 0) size = 256 * MT_MIB;
        mt_require_temp_space("bench_small_readv", size);
        if (lat_count > 0) mt_require_memory(REGION_WHAT, region < size ? region : size);
        b.path = mt_temp_file("bench_small_readv", size, MT_CONTENT_PATTERN);
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
            if (lat_count > 0) mt_require_memory(REGION_WHAT, region < size ? region : size);
            mt_ensure_pattern_file(b.path, size, overwrite);
        }
    }
    if (lat_count > 0) mt_require_memory(REGION_WHAT, region < size ? region : size);
    if (size < BLK) mt_die("the file must hold at least 4 KiB");
    b.size = size;
    b.count = count;
    b.batch = batch;

    uint64_t* offs = (uint64_t*)malloc((size_t)count * sizeof *offs);
    /* A batch never holds more than count reads: buffers are sized for that. */
    const long slots = batch < count ? batch : count;
    b.iov = (memtier_iovec_t*)calloc((size_t)slots, sizeof *b.iov);
    if (offs == NULL || b.iov == NULL) mt_die("out of memory");
    mt_rng_t rng;
    mt_rng_seed(&rng, 0x5EED);
    for (long i = 0; i < count; i++) offs[i] = mt_rng_below(&rng, size / BLK) * BLK;
    b.offs = offs;
    b.buf = (uint8_t*)mt_alloc((size_t)slots * BLK);
    {
        /* Is F a pattern file? (the benchmark checks every byte against it) */
        int fd = mt_open_file(b.path, O_RDONLY, 0);
        if (fd < 0 || mt_pread_full(fd, b.buf, BLK, 0) != (int64_t)BLK) mt_die("read %s: %s", b.path, strerror(errno));
        close(fd);
        if (mt_pattern_check(b.buf, 0, BLK) != MT_NO_MISMATCH)
            mt_die("%s is not an experiment-pattern file (see prepare_experiment_files); "
                   "this benchmark checks every read against the pattern", b.path);
    }

    const uint64_t rss_before = mt_rss_bytes();
    const int peak_reset = mt_peak_rss_reset() == 0;
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 0;
    mt_check(memtier_init(&cfg, &b.ctx), "memtier_init(cache off)");

    result_t res[2][M_COUNT];
    int modes[2][M_COUNT], nmodes[2] = {0, 0};
    memset(res, 0, sizeof res);
    if (do_warm) run_pass(&b, 0, res[0], &nmodes[0], modes[0]);
    if (do_cold) run_pass(&b, 1, res[1], &nmodes[1], modes[1]);

    latency_t L;
    memset(&L, 0, sizeof L);
    uint64_t budget = 0;
    if (lat_count > 0) run_latency(b.path, size, region, lat_count, &budget, &L);
    const uint64_t peak = mt_peak_rss_bytes();
    const uint64_t overhead = peak > rss_before ? peak - rss_before : 0;
    const int rss_ok = peak_reset && overhead <= budget + 64 * MT_MIB;
    const int lat_all_hits = !L.ran || L.hits == L.n;

    const uint64_t bytes = (uint64_t)count * BLK;
    if (json) {
        mt_json_t j;
        mt_json_begin(&j, stdout);
        mt_json_str(&j, "benchmark", "bench_small_readv");
        mt_json_str(&j, "memtier_version", memtier_version());
        mt_json_str(&j, "file", b.path);
        mt_json_u64(&j, "size", size);
        mt_json_i64(&j, "count", count);
        mt_json_i64(&j, "batch", batch);
        mt_json_u64(&j, "read_bytes", BLK);
        mt_json_str(&j, "gb", "1e9 bytes");
        mt_json_str(&j, "ratio", "reads/s / reads/s of the pread loop, same pass");
        mt_json_arr(&j, "passes");
        for (int p = 0; p < 2; p++) {
            if (nmodes[p] == 0) continue;
            mt_json_obj(&j, NULL);
            mt_json_str(&j, "page_cache", p ? "cold" : "warm");
            mt_json_arr(&j, "modes");
            for (int i = 0; i < nmodes[p]; i++) {
                const int m = modes[p][i];
                const result_t* r = &res[p][m];
                mt_json_obj(&j, NULL);
                mt_json_str(&j, "mode", mode_names[m]);
                mt_json_u64(&j, "bytes", bytes);
                mt_json_f64(&j, "seconds", r->seconds);
                mt_json_f64(&j, "gbps", mt_gbps(bytes, r->seconds));
                mt_json_f64(&j, "reads_per_s", r->seconds > 0 ? (double)count / r->seconds : 0);
                mt_json_f64(&j, "ratio_vs_pread", r->seconds > 0 ? res[p][M_PREAD].seconds / r->seconds : 0);
                if (r->have_stats) mt_json_stats(&j, "stats", &r->stats);
                mt_json_obj_end(&j);
            }
            mt_json_arr_end(&j);
            mt_json_obj_end(&j);
        }
        mt_json_arr_end(&j);
        if (L.ran) {
            mt_json_obj(&j, "cached_read_latency");
            mt_json_u64(&j, "region", L.region);
            mt_json_u64(&j, "reads", L.n);
            mt_json_u64(&j, "cache_hit_requests", L.hits);
            mt_json_f64(&j, "mean_ns", L.mean_ns);
            mt_json_u64(&j, "p50_ns", L.p50);
            mt_json_u64(&j, "p99_ns", L.p99);
            mt_json_u64(&j, "p999_ns", L.p999);
            mt_json_u64(&j, "max_ns", L.max);
            mt_json_u64(&j, "clock_overhead_ns", L.clock_ns);
            mt_json_obj_end(&j);
        }
        mt_json_obj(&j, "memory");
        mt_json_u64(&j, "peak_rss_bytes", peak);
        mt_json_u64(&j, "memtier_peak_overhead_bytes", overhead);
        mt_json_u64(&j, "cache_budget_bytes", budget);
        mt_json_bool(&j, "rss_ok", rss_ok);
        mt_json_obj_end(&j);
        mt_json_bool(&j, "verified", 1);
        mt_json_bool(&j, "ok", 1);
        mt_json_end(&j);
    } else {
        char x[32], y[32], z[32];
        printf("bench_small_readv: MemTier %s; %s (%s); %ld random 4 KiB reads, readv batches of %ld\n",
               memtier_version(), b.path, mt_fmt_bytes(x, sizeof x, size), count, batch);
        printf("seconds = time inside the read calls; ratio = reads/s vs the pread loop in the same pass\n");
        for (int p = 0; p < 2; p++) {
            if (nmodes[p] == 0) continue;
            printf("\n%s page cache%s\n", p ? "cold" : "warm",
                   p ? " (posix_fadvise DONTNEED before each run)" : " (after one untimed sequential pass)");
            printf("%-10s %12s %9s %8s %10s %9s  %s\n", "mode", "bytes", "seconds", "GB/s", "reads/s", "vs pread",
                   "detail");
            for (int i = 0; i < nmodes[p]; i++) {
                const int m = modes[p][i];
                const result_t* r = &res[p][m];
                char ratio[16], det[128] = "";
                if (m == M_PREAD)
                    snprintf(ratio, sizeof ratio, "baseline");
                else
                    snprintf(ratio, sizeof ratio, "%.2fx", r->seconds > 0 ? res[p][M_PREAD].seconds / r->seconds : 0);
                if (m == M_READV)
                    snprintf(det, sizeof det, "readv_calls=%" PRIu64 " coalesced_reads=%" PRIu64,
                             (uint64_t)r->stats.readv_calls, (uint64_t)r->stats.coalesced_reads);
                else if (m == M_READ)
                    snprintf(det, sizeof det, "requests=%" PRIu64, (uint64_t)r->stats.requests);
                printf("%-10s %12" PRIu64 " %9.4f %8.3f %10.0f %9s  %s\n", mode_names[m], bytes, r->seconds,
                       mt_gbps(bytes, r->seconds), r->seconds > 0 ? (double)count / r->seconds : 0, ratio, det);
            }
        }
        if (L.ran) {
            printf("\ncached 4 KiB memtier_read (region %s prefetched, %" PRIu64 " reads, %" PRIu64 " cache hits%s):\n",
                   mt_fmt_bytes(x, sizeof x, L.region), L.n, L.hits, lat_all_hits ? "" : " - NOT all hits");
            printf("  mean %.0f ns  p50 %" PRIu64 " ns  p99 %" PRIu64 " ns  p99.9 %" PRIu64 " ns  max %" PRIu64
                   " ns  (clock_gettime pair costs ~%" PRIu64 " ns, included)\n",
                   L.mean_ns, L.p50, L.p99, L.p999, L.max, L.clock_ns);
        }
        printf("\nevery read was checked against the experiment pattern\n");
        printf("memory: peak RSS %s; MemTier peak overhead %s; cache budget %s -> %s\n",
               mt_fmt_bytes(x, sizeof x, peak), mt_fmt_bytes(y, sizeof y, overhead),
               mt_fmt_bytes(z, sizeof z, budget),
               !peak_reset ? "rss_unknown (cannot reset VmHWM)" : (rss_ok ? "rss_ok" : "rss_over_budget"));
        printf("bench_small_readv: OK\n");
    }
    free(offs);
    free(b.iov);
    free(b.buf);
    mt_check(memtier_finalize(b.ctx), "memtier_finalize");
    return 0;
}
