/*
 * Description: MEMTIER_TARGET_CUDA through the staged path (gds_mode OFF):
 * pinned, double-buffered host-to-device copies. Device memory comes from the
 * CUDA driver library libmemtier.so loads ($MEMTIER_CUDA_LIBRARY: ctest gives
 * the test double of tests/gpu_double; scripts/gpu_check.sh runs it against a
 * real driver), and every read is copied back with cuMemcpyDtoH and compared
 * with the file.
 *  (1) memtier_read to device for sizes 0, 1, 4095, 4097, 8 MiB - 1, 8 MiB + 1
 *      and 64 MiB + 3 at offsets 0, 1, 4095 and 12345: bytes equal the file,
 *      the byte after the range is untouched; stats: staged_requests and
 *      staged_bytes count them, gds_requests stays 0, h2d_bytes >= the bytes,
 *      staged_read_ns > 0, buffered_/direct_ counters stay 0.
 *  (2) a host pointer as CUDA dst: MEMTIER_ERR_INVALID_ARG, last_error says it
 *      is not device memory, the host buffer is not written.
 *  (3) bytes prefetched into the DRAM cache go to the device from cache
 *      memory: cache_hit_bytes grows by the read, staged_bytes does not.
 *  (4) readv (one bad element with a host pointer), load_chunks (adjacent,
 *      overlapping, past EOF), load_tensor, read_async and load_chunks_async
 *      to device; safetensors load and load_all; dataset read and read_batch.
 *  (5) memtier_explain for a CUDA target: path STAGED naming gds_mode OFF;
 *      memtier_gpu_info says CUDA is available.
 *  (0) with the test double: CPU-only use (config, init, CPU read, explain,
 *      prefetch, stats, finalize) never calls cuInit.
 *  (6) with the test double: a failing copy, a failing pin and a failing sync
 *      give MEMTIER_ERR_IO / MEMTIER_ERR_NOMEM / MEMTIER_ERR_IO, and the next
 *      read works; the double's bug counters (memory freed or unpinned under a
 *      running copy) stay 0. Run again by ctest with FAKE_CUDA_DEFER_COPIES=1,
 *      where copies complete only at a synchronisation (then two copies must
 *      have been in flight at once for the 64 MiB read).
 */
#include "mt_gpu.h"

#define FILE_SIZE (80 * MiB)
#define DEV_SIZE (72 * MiB)

static const char* path;
static mt_cu_ptr dev;
static uint8_t* host;

static memtier_ctx_t* staged_ctx(void) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.gds_mode = MEMTIER_GDS_OFF;
    return mt_init_cfg(&cfg);
}

static void test_sizes(memtier_ctx_t* ctx) {
    static const uint64_t sizes[] = {0, 1, 4095, 4097, 8 * MiB - 1, 8 * MiB + 1, 64 * MiB + 3};
    static const uint64_t offs[] = {0, 1, 4095, 12345};
    uint64_t nreq = 0, nbytes = 0;
    size_t i, j;
    MT_OK(memtier_stats_reset(ctx));
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (j = 0; j < sizeof offs / sizeof offs[0]; j++) {
            mt_gpu_read_checked(ctx, path, offs[j], sizes[i], dev, host);
            nreq += sizes[i] > 0;
            nbytes += sizes[i];
        }
    memtier_stats_t s = mt_stats(ctx);
    printf("(1) %llu reads, %llu bytes: staged %llu/%llu h2d %llu bytes in %llu ns (read %llu ns), "
           "%.2f GB/s\n",
           (unsigned long long)nreq, (unsigned long long)nbytes,
           (unsigned long long)s.staged_requests, (unsigned long long)s.staged_bytes,
           (unsigned long long)s.h2d_bytes, (unsigned long long)s.h2d_ns,
           (unsigned long long)s.staged_read_ns, s.h2d_ns ? (double)s.h2d_bytes / (double)s.h2d_ns : 0);
    MT_EQ_U64(s.staged_requests, nreq, "(1) staged_requests");
    MT_EQ_U64(s.staged_bytes, nbytes, "(1) staged_bytes");
    MT_EQ_U64(s.bytes, nbytes, "(1) bytes");
    MT_EQ_U64(s.requests, nreq + 4, "(1) requests (size-0 reads count too)");
    MT_EQ_U64(s.gds_requests, 0, "(1) gds_requests with gds_mode OFF");
    MT_EQ_U64(s.buffered_requests + s.direct_requests, 0, "(1) CPU path counters");
    MT_EQ_U64(s.cache_inserted_bytes, 0, "(1) device reads do not fill the DRAM cache");
    MT_CHECK(s.h2d_bytes >= nbytes, "(1) h2d_bytes %llu < %llu", (unsigned long long)s.h2d_bytes,
             (unsigned long long)nbytes);
    MT_CHECK(s.h2d_ns > 0 && s.staged_read_ns > 0, "(1) h2d_ns / staged_read_ns are 0");
    MT_CHECK(s.storage_bytes >= nbytes, "(1) storage_bytes %llu", (unsigned long long)s.storage_bytes);
    if (mt_gpu.fake) {
        printf("(1) double: max_inflight %lld, copies_pinned %lld, copies_deferred %lld\n",
               mt_fake("max_inflight"), mt_fake("copies_pinned"), mt_fake("copies_deferred"));
        const char* defer = getenv("FAKE_CUDA_DEFER_COPIES");
        if (defer && strcmp(defer, "1") == 0)
            MT_CHECK(mt_fake("max_inflight") >= 2, "(1) the 64 MiB read never had two copies in flight");
    }
}

static void test_host_pointer(memtier_ctx_t* ctx) {
    uint8_t* hb = mt_alloc(8192);
    memset(hb, 0x5A, 8192);
    MT_STATUS(memtier_read(ctx, path, 0, 8192, hb, MEMTIER_TARGET_CUDA), MEMTIER_ERR_INVALID_ARG);
    printf("(2) host dst: %s\n", memtier_last_error());
    MT_CHECK(strstr(memtier_last_error(), "not CUDA device memory") != NULL,
             "(2) last_error \"%s\" does not say the pointer is not device memory", memtier_last_error());
    MT_CHECK(mt_find_not(hb, 0x5A, 8192) < 0, "(2) a refused CUDA read wrote to the host buffer");
    /* A device range that runs past its allocation. */
    MT_STATUS(memtier_read(ctx, path, 0, DEV_SIZE + 1, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA),
              MEMTIER_ERR_INVALID_ARG);
    printf("(2) past the allocation: %s\n", memtier_last_error());
    free(hb);
}

static void test_dram_hit(memtier_ctx_t* ctx) {
    memtier_stats_t a, b, d;
    MT_OK(memtier_prefetch(ctx, path, 0, 2 * MiB, NULL));
    a = mt_stats(ctx);
    mt_gpu_read_checked(ctx, path, 1000, 1500000, dev, host);
    b = mt_stats(ctx);
    d = mt_stats_delta(&a, &b);
    printf("(3) DRAM hit: cache_hit_bytes +%llu staged_bytes +%llu h2d +%llu\n",
           (unsigned long long)d.cache_hit_bytes, (unsigned long long)d.staged_bytes,
           (unsigned long long)d.h2d_bytes);
    MT_EQ_U64(d.cache_hit_bytes, 1500000, "(3) cache_hit_bytes");
    MT_EQ_U64(d.cache_hit_requests, 1, "(3) cache_hit_requests");
    MT_EQ_U64(d.staged_bytes, 0, "(3) staged_bytes");
    MT_EQ_U64(d.storage_bytes, 0, "(3) nothing read from the file");
    MT_EQ_U64(d.h2d_bytes, 1500000, "(3) h2d_bytes");
    /* Half cached, half not. */
    a = mt_stats(ctx);
    mt_gpu_read_checked(ctx, path, MiB, 3 * MiB, dev, host);
    b = mt_stats(ctx);
    d = mt_stats_delta(&a, &b);
    MT_EQ_U64(d.cache_hit_bytes, MiB, "(3) mixed: cache_hit_bytes");
    MT_EQ_U64(d.staged_bytes, 2 * MiB, "(3) mixed: staged_bytes");
    MT_OK(memtier_drop_cache(ctx, NULL));
}

static void check_dev(mt_cu_ptr p, uint64_t off, uint64_t n, const char* what) {
    mt_gpu_get(host, p, n);
    if (mt_find_p_mismatch(host, off, n) >= 0)
        MT_FAIL("%s: byte %lld differs from the file", what, (long long)mt_find_p_mismatch(host, off, n));
}

static void test_vectored(memtier_ctx_t* ctx) {
    /* readv: three device elements and one host pointer. */
    {
        uint8_t hb[64];
        memtier_iovec_t v[4] = {
            {5000, 100000, (void*)(uintptr_t)dev, NULL, 0},
            {0, 4096, (void*)(uintptr_t)(dev + MiB), NULL, 0},
            {70 * MiB, 9 * MiB, (void*)(uintptr_t)(dev + 2 * MiB), NULL, 0},
            {0, sizeof hb, hb, NULL, 0},
        };
        MT_STATUS(memtier_readv(ctx, path, v, 4, MEMTIER_TARGET_CUDA), MEMTIER_ERR_INVALID_ARG);
        MT_EQ_U64(v[0].result, 100000, "readv[0]");
        MT_EQ_U64(v[1].result, 4096, "readv[1]");
        MT_EQ_U64(v[2].result, 9 * MiB, "readv[2]");
        MT_CHECK(v[3].result == MEMTIER_ERR_INVALID_ARG, "readv[3] (host dst) result %lld",
                 (long long)v[3].result);
        check_dev(dev, 5000, 100000, "readv[0]");
        check_dev(dev + MiB, 0, 4096, "readv[1]");
        check_dev(dev + 2 * MiB, 70 * MiB, 9 * MiB, "readv[2]");
    }
    /* load_chunks: adjacent, overlapping, large, past EOF, empty. */
    {
        memtier_chunk_t ch[6] = {
            {4096, 4096, (void*)(uintptr_t)dev, 0},
            {8192, 10000, (void*)(uintptr_t)(dev + 4096), 0},
            {6000, 5000, (void*)(uintptr_t)(dev + 64 * KiB), 0},
            {20 * MiB + 7, 17 * MiB, (void*)(uintptr_t)(dev + MiB), 0},
            {FILE_SIZE - 10, 20, (void*)(uintptr_t)(dev + 30 * MiB), 0},
            {0, 0, NULL, 0},
        };
        MT_STATUS(memtier_load_chunks(ctx, path, ch, 6, MEMTIER_TARGET_CUDA), MEMTIER_ERR_EOF);
        MT_EQ_U64(ch[0].result, 4096, "chunk 0");
        MT_EQ_U64(ch[1].result, 10000, "chunk 1");
        MT_EQ_U64(ch[2].result, 5000, "chunk 2");
        MT_EQ_U64(ch[3].result, 17 * MiB, "chunk 3");
        MT_CHECK(ch[4].result == MEMTIER_ERR_EOF, "chunk 4 result %lld", (long long)ch[4].result);
        MT_EQ_U64(ch[5].result, 0, "chunk 5 (empty)");
        check_dev(dev, 4096, 4096, "chunk 0");
        check_dev(dev + 4096, 8192, 10000, "chunk 1");
        check_dev(dev + 64 * KiB, 6000, 5000, "chunk 2");
        check_dev(dev + MiB, 20 * MiB + 7, 17 * MiB, "chunk 3");
    }
    /* load_tensor. */
    MT_OK(memtier_load_tensor(ctx, path, 333, 40 * MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA));
    check_dev(dev, 333, 40 * MiB, "load_tensor");
    /* read_async. */
    {
        memtier_request_t* r = NULL;
        uint64_t n = 0;
        MT_OK(memtier_read_async(ctx, path, 77, 3 * MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA, 0, &r));
        MT_OK(memtier_request_wait(r, -1, &n));
        MT_EQ_U64(n, 3 * MiB, "read_async bytes");
        MT_OK(memtier_request_release(r));
        check_dev(dev, 77, 3 * MiB, "read_async");
    }
    /* load_chunks_async with request_next. */
    {
        memtier_chunk_t ch[3] = {
            {0, MiB, (void*)(uintptr_t)dev, 0},
            {MiB, MiB, (void*)(uintptr_t)(dev + MiB), 0},
            {50 * MiB + 1, 5 * MiB, (void*)(uintptr_t)(dev + 2 * MiB), 0},
        };
        memtier_request_t* r = NULL;
        size_t idx, seen = 0;
        int rc;
        MT_OK(memtier_load_chunks_async(ctx, path, ch, 3, MEMTIER_TARGET_CUDA, &r));
        while ((rc = memtier_request_next(r, -1, &idx)) == MEMTIER_OK) {
            MT_CHECK(ch[idx].result == (int64_t)ch[idx].size, "async chunk %zu result %lld", idx,
                     (long long)ch[idx].result);
            seen++;
        }
        MT_STATUS(rc, MEMTIER_ERR_EOF);
        MT_EQ_U64(seen, 3, "chunks reported");
        MT_OK(memtier_request_wait(r, -1, NULL));
        MT_OK(memtier_request_release(r));
        check_dev(dev, 0, 2 * MiB, "async chunks 0-1");
        check_dev(dev + 2 * MiB, 50 * MiB + 1, 5 * MiB, "async chunk 2");
    }
}

/* A safetensors file whose data bytes are the P pattern at their file offsets. */
static const char ST_HDR[] =
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1000],\"data_offsets\":[0,4000]},"
    "\"b\":{\"dtype\":\"U8\",\"shape\":[3000000],\"data_offsets\":[4000,3004000]},"
    "\"c\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[3004000,3004024]}}";

static void test_objects(memtier_ctx_t* ctx) {
    const char* st_path = mt_path("model.safetensors");
    uint64_t hlen = sizeof ST_HDR - 1, total = 8 + hlen + 3004024;
    memtier_safetensors_t* st = NULL;
    size_t n, i;
    mt_write_file_gen(st_path, total, NULL);
    {
        int fd = open(st_path, O_WRONLY);
        uint8_t le[8];
        for (i = 0; i < 8; i++) le[i] = (uint8_t)(hlen >> (8 * i));
        MT_CHECK(fd >= 0 && pwrite(fd, le, 8, 0) == 8 && pwrite(fd, ST_HDR, hlen, 8) == (ssize_t)hlen,
                 "write %s", st_path);
        close(fd);
    }
    MT_OK(memtier_safetensors_open(ctx, st_path, &st));
    MT_OK(memtier_safetensors_count(st, &n));
    MT_EQ_U64(n, 3, "tensor count");
    {
        void* dsts[3];
        int64_t res[3];
        memtier_tensor_info_t info[3];
        mt_cu_ptr at = dev;
        for (i = 0; i < 3; i++) {
            MT_OK(memtier_safetensors_get(st, i, &info[i]));
            dsts[i] = (void*)(uintptr_t)at;
            at += (info[i].nbytes + 4095) / 4096 * 4096;
        }
        MT_OK(memtier_safetensors_load_all(st, dsts, res, MEMTIER_TARGET_CUDA));
        for (i = 0; i < 3; i++) {
            MT_EQ_U64(res[i], info[i].nbytes, "load_all result");
            check_dev((mt_cu_ptr)(uintptr_t)dsts[i], info[i].offset, info[i].nbytes, info[i].name);
        }
        MT_OK(memtier_safetensors_load(st, 1, (void*)(uintptr_t)(dev + 8 * MiB), info[1].nbytes,
                                       MEMTIER_TARGET_CUDA));
        check_dev(dev + 8 * MiB, info[1].offset, info[1].nbytes, "safetensors_load b");
    }
    MT_OK(memtier_safetensors_close(st));

    /* A packed dataset over the P-file. */
    {
        const char* idx_path = mt_path("ds.idx");
        FILE* f = fopen(idx_path, "w");
        memtier_dataset_t* ds = NULL;
        uint64_t idx[3] = {2, 0, 1};
        void* dsts[3] = {(void*)(uintptr_t)dev, (void*)(uintptr_t)(dev + MiB),
                         (void*)(uintptr_t)(dev + 2 * MiB)};
        int64_t res[3];
        MT_CHECK(f != NULL, "create %s", idx_path);
        fprintf(f, "0 1000\n5000 70000\n%llu 900000\n", (unsigned long long)(10 * MiB + 3));
        fclose(f);
        MT_OK(memtier_dataset_open(ctx, path, idx_path, &ds));
        MT_OK(memtier_dataset_read(ds, 1, (void*)(uintptr_t)dev, 70000, MEMTIER_TARGET_CUDA));
        check_dev(dev, 5000, 70000, "dataset_read 1");
        MT_OK(memtier_dataset_read_batch(ds, idx, 3, dsts, res, MEMTIER_TARGET_CUDA));
        check_dev(dev, 10 * MiB + 3, 900000, "read_batch sample 2");
        check_dev(dev + MiB, 0, 1000, "read_batch sample 0");
        check_dev(dev + 2 * MiB, 5000, 70000, "read_batch sample 1");
        MT_OK(memtier_dataset_close(ds));
    }
}

static void test_explain_info(memtier_ctx_t* ctx) {
    memtier_decision_t d;
    char info[2048];
    MT_OK(memtier_explain(ctx, path, 0, 64 * MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA, 0, &d));
    printf("(5) explain CUDA 64 MiB: path %s, tasks %llu, reason \"%s\"\n", memtier_path_name(d.path),
           (unsigned long long)d.tasks, d.reason);
    MT_CHECK(d.path == MEMTIER_PATH_STAGED, "(5) explain path %s, want staged", memtier_path_name(d.path));
    MT_CHECK(strstr(d.reason, "gds_mode OFF") != NULL, "(5) reason does not name gds_mode OFF");
    MT_OK(memtier_gpu_info(ctx, info, sizeof info));
    printf("(5) memtier_gpu_info:\n%s", info);
    MT_CHECK(strstr(info, "cuda: CUDA available") != NULL, "(5) gpu_info does not say CUDA is available");
    MT_CHECK(strstr(info, "gds_mode: off") != NULL, "(5) gpu_info does not show gds_mode off");
    {
        char small[8];
        MT_OK(memtier_gpu_info(ctx, small, sizeof small));
        MT_EQ_U64(strlen(small), 7, "(5) gpu_info truncates to the buffer");
    }
    MT_STATUS(memtier_gpu_info(ctx, info, 0), MEMTIER_ERR_INVALID_ARG);
}

static void test_faults(void) {
    memtier_ctx_t* ctx;
    MT_NEED_FAKE("(6) failure injection");
    ctx = staged_ctx(); /* a fresh Stager: its buffers are pinned on first use */
    mt_fake_switch("FAKE_CUDA_FAIL_HOST_REGISTER_AFTER", "0");
    MT_STATUS(memtier_read(ctx, path, 0, MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA),
              MEMTIER_ERR_NOMEM);
    printf("(6) pin fails: %s\n", memtier_last_error());
    mt_fake_switch("FAKE_CUDA_FAIL_HOST_REGISTER_AFTER", NULL);
    mt_gpu_read_checked(ctx, path, 3, 9 * MiB, dev, host);

    mt_fake_switch("FAKE_CUDA_FAIL_COPY_AFTER", "1");
    MT_STATUS(memtier_read(ctx, path, 0, 20 * MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA),
              MEMTIER_ERR_IO);
    printf("(6) copy fails: %s\n", memtier_last_error());
    /* CUDA_ERROR_ILLEGAL_ADDRESS is sticky: the context is dead and the next
     * read says so (the switch's reset below stands in for a new process). */
    setenv("FAKE_CUDA_FAIL_COPY_AFTER", "1000000", 1);
    MT_STATUS(memtier_read(ctx, path, 0, MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA), MEMTIER_ERR_IO);
    MT_CHECK(strstr(memtier_last_error(), "sticky CUDA error") != NULL,
             "(6) the read after a sticky error: \"%s\"", memtier_last_error());
    mt_fake_switch("FAKE_CUDA_FAIL_COPY_AFTER", NULL);
    mt_gpu_read_checked(ctx, path, 4096, 20 * MiB, dev, host);

    mt_fake_switch("FAKE_CUDA_FAIL_SYNC_AFTER", "0");
    MT_STATUS(memtier_read(ctx, path, 0, 20 * MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA),
              MEMTIER_ERR_IO);
    printf("(6) sync fails: %s\n", memtier_last_error());
    mt_fake_switch("FAKE_CUDA_FAIL_SYNC_AFTER", NULL);
    mt_gpu_read_checked(ctx, path, 1, 20 * MiB, dev, host);
    MT_OK(memtier_finalize(ctx));
}

/* (0) CPU-only use of a CUDA build never initialises CUDA: config, init, CPU
 * reads, explain and prefetch, stats, finalize leave the double's cuInit
 * uncalled (the double is loaded here without init; libmemtier would get the
 * same library instance from the same path). */
static void test_cpu_only_no_cuda(void) {
    const char* name = getenv("MEMTIER_CUDA_LIBRARY");
    void* lib;
    long long (*st)(const char*) = NULL;
    memtier_ctx_t* ctx;
    memtier_decision_t d;
    uint8_t* b = mt_alloc(MiB);
    if (name == NULL || (lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) == NULL) return;
    *(void**)&st = dlsym(lib, "fake_cuda_stat");
    if (st == NULL) return; /* a real driver: nothing to count with */
    ctx = staged_ctx();
    MT_OK(memtier_read(ctx, path, 5, MiB, b, MEMTIER_TARGET_CPU));
    MT_OK(memtier_explain(ctx, path, 0, MiB, b, MEMTIER_TARGET_CPU, 0, &d));
    MT_OK(memtier_explain(ctx, path, 0, 0, b, MEMTIER_TARGET_CPU, 0, &d));
    MT_OK(memtier_prefetch(ctx, path, 0, MiB, NULL));
    (void)mt_stats(ctx);
    MT_OK(memtier_drop_cache(ctx, NULL));
    MT_OK(memtier_finalize(ctx));
    printf("(0) CPU-only use: cuInit called %lld time(s)\n", st("calls_cuInit"));
    MT_EQ_U64(st("calls_cuInit"), 0, "(0) CPU-only use initialised CUDA");
    free(b);
}

int main(void) {
    mt_begin("test_gpu_staged");
    path = mt_make_pfile("p80m.bin", FILE_SIZE);
    test_cpu_only_no_cuda();
    mt_gpu_open();
    host = mt_alloc(DEV_SIZE);
    dev = mt_gpu_alloc(DEV_SIZE);
    memtier_ctx_t* ctx = staged_ctx();

    test_sizes(ctx);
    test_host_pointer(ctx);
    test_dram_hit(ctx);
    test_vectored(ctx);
    test_objects(ctx);
    test_explain_info(ctx);
    MT_OK(memtier_finalize(ctx));
    if (mt_gpu.fake)
        MT_EQ_U64(mt_fake("host_registered_live"), 0, "finalize unpins every staging buffer");
    /* After a failed synchronisation a lane's buffers may still be read by a
     * copy, so the Stager leaks them on purpose: no such check after this. */
    test_faults();

    if (mt_gpu.fake) {
        printf("double: bug_freed_while_inflight %lld bug_unregistered_while_inflight %lld "
               "bug_unregister_busy %lld host_registered_live %lld\n",
               mt_fake("bug_freed_while_inflight"), mt_fake("bug_unregistered_while_inflight"),
               mt_fake("bug_unregister_busy"), mt_fake("host_registered_live"));
        MT_EQ_U64(mt_fake("bug_freed_while_inflight"), 0, "double bug counter");
        MT_EQ_U64(mt_fake("bug_unregistered_while_inflight"), 0, "double bug counter");
        MT_EQ_U64(mt_fake("bug_unregister_busy"), 0, "double bug counter");
    }
    mt_gpu_free(dev);
    free(host);
    mt_pass();
    return 0;
}
