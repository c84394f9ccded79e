/*
 * Description: the HBM tier: memtier_prefetch with MEMTIER_PREFETCH_TO_HBM
 * fills a device-memory block cache (2 MiB blocks, budget hbm_cache_bytes),
 * and MEMTIER_TARGET_CUDA reads of prefetched ranges are device-to-device
 * copies. Run against the test double by ctest (and against a real driver by
 * scripts/gpu_check.sh, without the double-only steps). Modes (argv[1]):
 *   main    hbm_cache_bytes 8 MiB. (1) prefetch TO_HBM of 6 MiB: prefetch_bytes,
 *           hbm_inserted_bytes and hbm_resident_bytes 6 MiB, nothing in the
 *           DRAM cache. (2) a CUDA read inside it: hbm_hit_requests 1,
 *           hbm_hit_bytes = its size, no staged bytes, bytes equal the file;
 *           explain says path hbm. (3) a read half in HBM: split between
 *           hbm_hit_bytes and staged_bytes. (4) CPU reads are unaffected (no
 *           hbm counter moves). (5) budget: prefetching 16 MiB keeps the last
 *           8 MiB (resident <= budget, evictions counted; the double's device
 *           memory stays under budget + the test's own). (6) the file is
 *           rewritten after a prefetch: the next CUDA read returns the new
 *           bytes, with no HBM hit, and the old blocks are dropped.
 *           (7) memtier_drop_cache drops HBM blocks; stats_reset keeps the
 *           HBM gauges. (8) with the double: cuMemAlloc failing makes a TO_HBM
 *           prefetch MEMTIER_ERR_NOMEM and a later one works; a failing
 *           device-to-device copy makes the CUDA read MEMTIER_ERR_IO, then
 *           reads work again.
 *   env     MEMTIER_PREFETCH_TO_HBM=1: a plain memtier_prefetch goes to HBM.
 *   off     MEMTIER_HBM_CACHE_BYTES=0: TO_HBM gives MEMTIER_ERR_UNSUPPORTED
 *           saying hbm_cache_bytes is 0; DRAM prefetch still works.
 */
#include "mt_gpu.h"

#define FILE_SIZE (16 * MiB)

static mt_cu_ptr dev;
static uint8_t* host;
static const memtier_prefetch_opts_t to_hbm = {sizeof(memtier_prefetch_opts_t), MEMTIER_PREFETCH_TO_HBM};

static memtier_ctx_t* hbm_ctx(uint64_t budget) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.hbm_cache_bytes = budget;
    cfg.gds_mode = MEMTIER_GDS_OFF;
    return mt_init_cfg(&cfg);
}

/* The stats one checked read into dev moved. */
static memtier_stats_t read_delta(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t n) {
    return mt_gpu_read_delta(ctx, path, off, n, dev, host);
}

/* Q pattern: another content of the same size, for the rewrite. */
static uint8_t q_byte(uint64_t i) { return (uint8_t)((i * 7 + 200) & 0xFF); }

static void run_main(void) {
    const char* path = mt_make_pfile("h.bin", FILE_SIZE);
    memtier_ctx_t* ctx = hbm_ctx(8 * MiB);
    memtier_stats_t s, d;
    memtier_decision_t dec;

    /* (1) */
    MT_OK(memtier_prefetch(ctx, path, 0, 6 * MiB, &to_hbm));
    s = mt_stats(ctx);
    printf("(1) prefetch TO_HBM 6 MiB: prefetch %llu/%llu inserted %llu resident %llu budget %llu "
           "dram %llu h2d %llu\n",
           (unsigned long long)s.prefetch_requests, (unsigned long long)s.prefetch_bytes,
           (unsigned long long)s.hbm_inserted_bytes, (unsigned long long)s.hbm_resident_bytes,
           (unsigned long long)s.hbm_budget_bytes, (unsigned long long)s.cache_resident_bytes,
           (unsigned long long)s.h2d_bytes);
    MT_EQ_U64(s.prefetch_requests, 1, "(1) prefetch_requests");
    MT_EQ_U64(s.prefetch_bytes, 6 * MiB, "(1) prefetch_bytes");
    MT_EQ_U64(s.hbm_inserted_bytes, 6 * MiB, "(1) hbm_inserted_bytes");
    MT_EQ_U64(s.hbm_resident_bytes, 6 * MiB, "(1) hbm_resident_bytes");
    MT_EQ_U64(s.hbm_budget_bytes, 8 * MiB, "(1) hbm_budget_bytes");
    MT_EQ_U64(s.cache_resident_bytes, 0, "(1) TO_HBM does not fill the DRAM cache");
    MT_EQ_U64(s.h2d_bytes, 6 * MiB, "(1) h2d_bytes");
    /* Prefetching it again reads nothing. */
    MT_OK(memtier_prefetch(ctx, path, MiB, 2 * MiB, &to_hbm));
    MT_EQ_U64(mt_stats(ctx).prefetch_bytes, 6 * MiB, "(1) a resident range is not read again");

    /* (2) */
    MT_OK(memtier_explain(ctx, path, 100, 5 * MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA, 0, &dec));
    printf("(2) explain: %s \"%s\"\n", memtier_path_name(dec.path), dec.reason);
    MT_CHECK(dec.path == MEMTIER_PATH_HBM, "(2) explain path %s, want hbm", memtier_path_name(dec.path));
    d = read_delta(ctx, path, 100, 5 * MiB);
    MT_EQ_U64(d.hbm_hit_requests, 1, "(2) hbm_hit_requests");
    MT_EQ_U64(d.hbm_hit_bytes, 5 * MiB, "(2) hbm_hit_bytes");
    MT_EQ_U64(d.staged_bytes, 0, "(2) staged_bytes");
    MT_EQ_U64(d.storage_bytes, 0, "(2) nothing read from the file");
    MT_EQ_U64(d.bytes, 5 * MiB, "(2) bytes");
    if (mt_gpu.fake) MT_CHECK(mt_fake("bytes_dtod") >= (long long)(5 * MiB), "(2) no device-to-device copy");

    /* (3) */
    d = read_delta(ctx, path, 5 * MiB, 3 * MiB);
    MT_EQ_U64(d.hbm_hit_bytes, MiB, "(3) hbm part");
    MT_EQ_U64(d.staged_bytes, 2 * MiB, "(3) staged part");
    MT_EQ_U64(d.hbm_hit_requests, 0, "(3) not entirely from HBM");

    /* (4) */
    {
        memtier_stats_t a = mt_stats(ctx), b;
        MT_OK(memtier_read(ctx, path, 4096, 4096, host, MEMTIER_TARGET_CPU));
        MT_CHECK(mt_find_p_mismatch(host, 4096, 4096) < 0, "(4) CPU read bytes");
        b = mt_stats(ctx);
        d = mt_stats_delta(&a, &b);
        MT_EQ_U64(d.hbm_hit_bytes + d.hbm_hit_requests + d.h2d_bytes, 0, "(4) CPU read used the GPU tier");
        MT_EQ_U64(d.buffered_bytes, 4096, "(4) CPU read from the file");
    }

    /* (5) */
    {
        MT_OK(memtier_prefetch(ctx, path, 0, 0, &to_hbm));
        s = mt_stats(ctx);
        printf("(5) prefetch 16 MiB into 8 MiB: resident %llu budget %llu evictions %llu inserted %llu\n",
               (unsigned long long)s.hbm_resident_bytes, (unsigned long long)s.hbm_budget_bytes,
               (unsigned long long)s.hbm_evictions, (unsigned long long)s.hbm_inserted_bytes);
        MT_CHECK(s.hbm_resident_bytes <= s.hbm_budget_bytes, "(5) resident %llu over budget %llu",
                 (unsigned long long)s.hbm_resident_bytes, (unsigned long long)s.hbm_budget_bytes);
        MT_EQ_U64(s.hbm_resident_bytes, 8 * MiB, "(5) the last budget's worth is resident");
        MT_CHECK(s.hbm_evictions > 0, "(5) no eviction counted");
        if (mt_gpu.fake)
            MT_CHECK(mt_fake("device_bytes_live") - (long long)FILE_SIZE <= (long long)(8 * MiB),
                     "(5) the HBM cache holds %lld bytes of device memory, budget 8 MiB",
                     mt_fake("device_bytes_live") - (long long)FILE_SIZE);
        d = read_delta(ctx, path, 8 * MiB, 8 * MiB);
        MT_EQ_U64(d.hbm_hit_bytes, 8 * MiB, "(5) the tail is served from HBM");
        d = read_delta(ctx, path, 0, MiB);
        MT_EQ_U64(d.hbm_hit_bytes, 0, "(5) the head was evicted");
    }

    /* (6) */
    {
        usleep(20000);
        mt_write_file_gen(path, FILE_SIZE, q_byte);
        struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
        utimensat(AT_FDCWD, path, ts, 0);
        memtier_stats_t a = mt_stats(ctx), b;
        MT_OK(memtier_read(ctx, path, 9 * MiB, MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA));
        b = mt_stats(ctx);
        d = mt_stats_delta(&a, &b);
        mt_gpu_get(host, dev, MiB);
        {
            uint64_t i;
            for (i = 0; i < MiB; i++)
                if (host[i] != q_byte(9 * MiB + i))
                    MT_FAIL("(6) byte %llu after the rewrite is stale", (unsigned long long)i);
        }
        MT_EQ_U64(d.hbm_hit_bytes, 0, "(6) no HBM hit on a changed file");
        MT_EQ_U64(b.hbm_resident_bytes, 0, "(6) the old version's blocks are dropped");
        printf("(6) rewrite: fresh bytes, stale_invalidations +%llu\n",
               (unsigned long long)d.stale_invalidations);
        mt_write_file_gen(path, FILE_SIZE, NULL); /* back to P */
        utimensat(AT_FDCWD, path, ts, 0);
    }

    /* (7) */
    MT_OK(memtier_prefetch(ctx, path, 0, 4 * MiB, &to_hbm));
    MT_OK(memtier_stats_reset(ctx));
    s = mt_stats(ctx);
    MT_EQ_U64(s.hbm_resident_bytes, 4 * MiB, "(7) reset keeps hbm_resident_bytes");
    MT_EQ_U64(s.hbm_budget_bytes, 8 * MiB, "(7) reset keeps hbm_budget_bytes");
    MT_EQ_U64(s.hbm_inserted_bytes, 0, "(7) reset zeroes hbm_inserted_bytes");
    d = read_delta(ctx, path, 0, 4 * MiB);
    MT_EQ_U64(d.hbm_hit_bytes, 4 * MiB, "(7) served from HBM after the rewrite back");
    MT_OK(memtier_drop_cache(ctx, path));
    MT_EQ_U64(mt_stats(ctx).hbm_resident_bytes, 0, "(7) drop_cache(path) drops HBM blocks");
    MT_OK(memtier_prefetch(ctx, path, 0, 2 * MiB, &to_hbm));
    MT_OK(memtier_drop_cache(ctx, NULL));
    MT_EQ_U64(mt_stats(ctx).hbm_resident_bytes, 0, "(7) drop_cache(NULL) drops HBM blocks");
    MT_OK(memtier_finalize(ctx));

    /* (8) */
    MT_NEED_FAKE("(8) failure injection");
    ctx = hbm_ctx(8 * MiB); /* a fresh HBM cache: nothing allocated yet */
    mt_fake_switch("FAKE_CUDA_FAIL_ALLOC_AFTER", "0");
    MT_STATUS(memtier_prefetch(ctx, path, 0, 4 * MiB, &to_hbm), MEMTIER_ERR_NOMEM);
    printf("(8) alloc fails: %s\n", memtier_last_error());
    mt_fake_switch("FAKE_CUDA_FAIL_ALLOC_AFTER", NULL);
    MT_OK(memtier_prefetch(ctx, path, 0, 4 * MiB, &to_hbm));
    mt_fake_switch("FAKE_CUDA_FAIL_COPY_AFTER", "0");
    MT_STATUS(memtier_read(ctx, path, 0, MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA), MEMTIER_ERR_IO);
    printf("(8) device-to-device copy fails: %s\n", memtier_last_error());
    mt_fake_switch("FAKE_CUDA_FAIL_COPY_AFTER", NULL);
    d = read_delta(ctx, path, 0, 4 * MiB);
    MT_EQ_U64(d.hbm_hit_bytes, 4 * MiB, "(8) HBM hits after the failed copy");
    {
        memtier_request_t* r = NULL;
        MT_OK(memtier_prefetch_async(ctx, path, 4 * MiB, 4 * MiB, &to_hbm, &r));
        MT_OK(memtier_request_wait(r, -1, NULL));
        MT_OK(memtier_request_release(r));
        d = read_delta(ctx, path, 4 * MiB, 4 * MiB);
        MT_EQ_U64(d.hbm_hit_bytes, 4 * MiB, "(8) prefetch_async TO_HBM");
    }
    MT_OK(memtier_finalize(ctx));
    MT_EQ_U64(mt_fake("bug_freed_while_inflight"), 0, "double bug counter");
}

static void run_env(void) {
    const char* v = getenv("MEMTIER_PREFETCH_TO_HBM");
    const char* path;
    memtier_ctx_t* ctx;
    memtier_stats_t s, d;
    if (!v || strcmp(v, "1") != 0) mt_skip("needs MEMTIER_PREFETCH_TO_HBM=1 (ctest)");
    path = mt_make_pfile("e.bin", 4 * MiB);
    ctx = mt_init_cfg(NULL);
    MT_OK(memtier_prefetch(ctx, path, 0, 0, NULL));
    s = mt_stats(ctx);
    MT_EQ_U64(s.hbm_inserted_bytes, 4 * MiB, "MEMTIER_PREFETCH_TO_HBM=1: prefetch went to HBM");
    MT_EQ_U64(s.cache_inserted_bytes, 0, "MEMTIER_PREFETCH_TO_HBM=1: nothing in the DRAM cache");
    d = read_delta(ctx, path, 0, 4 * MiB);
    MT_EQ_U64(d.hbm_hit_bytes, 4 * MiB, "HBM hit after the env prefetch");
    MT_OK(memtier_finalize(ctx));
}

static void run_off(void) {
    const char* v = getenv("MEMTIER_HBM_CACHE_BYTES");
    const char* path;
    memtier_ctx_t* ctx;
    if (!v || strcmp(v, "0") != 0) mt_skip("needs MEMTIER_HBM_CACHE_BYTES=0 (ctest)");
    path = mt_make_pfile("o.bin", MiB);
    ctx = mt_init_cfg(NULL);
    MT_STATUS(memtier_prefetch(ctx, path, 0, 0, &to_hbm), MEMTIER_ERR_UNSUPPORTED);
    printf("HBM tier off: %s\n", memtier_last_error());
    MT_CHECK(strstr(memtier_last_error(), "hbm_cache_bytes is 0") != NULL, "message does not say why");
    MT_EQ_U64(mt_stats(ctx).hbm_budget_bytes, 0, "hbm_budget_bytes with the tier off");
    MT_OK(memtier_prefetch(ctx, path, 0, 0, NULL));
    mt_gpu_read_checked(ctx, path, 0, MiB, dev, host);
    MT_OK(memtier_finalize(ctx));
}

int main(int argc, char** argv) {
    static const mt_gpu_mode_t modes[] = {{"main", run_main}, {"env", run_env}, {"off", run_off}};
    return mt_gpu_main("test_gpu_hbm", argc, argv, modes, sizeof modes / sizeof modes[0], FILE_SIZE, &host,
                       &dev);
}
