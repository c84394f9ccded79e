/*
 * Description: memtier_load_chunks, memtier_load_chunks_async +
 * memtier_request_next and memtier_load_tensor on an 8 MiB P-file.
 * (1) random chunks (adjacent runs, gaps, overlaps, chunks larger than a
 * task) hold the P-file bytes and nothing past their size is written;
 * (2) exact stats of a coalesced run on a cache-less context; (3) per-chunk
 * results with a chunk past EOF and a NULL dst among good ones, lowest-index
 * failure returned; (4) argument errors (n = 0, NULL chunks, NULL path);
 * (5) 100,000 small chunks; (6) streaming: every index reported exactly once
 * with its result final, then MEMTIER_ERR_EOF; request_next on a plain read
 * request is INVALID_ARG, on a released one CLOSED; release while running;
 * (7) exact stats of a run plus an isolated chunk on a default context,
 * twice (nothing is admitted: both passes read storage; a chunk already
 * cached by memtier_prefetch is a cache hit); (8)
 * memtier_load_tensor admits small tensors and reads large ones once; (9) a
 * dst in an unmapped page gives MEMTIER_ERR_IO for that chunk only.
 */
#include "mt_test.h"

#include <sys/mman.h>

#define FILE_SIZE (8 * MiB)

static const char* path;

/* Allocates each chunk's dst with 8 canary bytes after it. */
static void alloc_dsts(memtier_chunk_t* c, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        c[i].dst = malloc(c[i].size + 8);
        MT_CHECK(c[i].dst != NULL, "malloc");
        memset(c[i].dst, 0xAA, c[i].size + 8);
        c[i].result = 12345;
    }
}

static void free_dsts(memtier_chunk_t* c, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) free(c[i].dst);
}

/* Every chunk with a non-negative result holds P and left its canary. */
static void check_chunks(const memtier_chunk_t* c, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (c[i].result < 0 || c[i].dst == NULL) continue;
        MT_CHECK(c[i].result == (int64_t)c[i].size, "chunk %zu: result %lld, size %llu", i,
                 (long long)c[i].result, (unsigned long long)c[i].size);
        MT_CHECK(mt_find_p_mismatch(c[i].dst, c[i].offset, c[i].size) < 0,
                 "chunk %zu (%llu, %llu): byte %lld differs", i, (unsigned long long)c[i].offset,
                 (unsigned long long)c[i].size,
                 (long long)mt_find_p_mismatch(c[i].dst, c[i].offset, c[i].size));
        MT_CHECK(mt_find_not((const uint8_t*)c[i].dst + c[i].size, 0xAA, 8) < 0,
                 "chunk %zu: canary past its size overwritten", i);
    }
}

static memtier_ctx_t* ctx_with(int cache_enabled, uint64_t admit_max) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.cache_enabled = cache_enabled;
    if (admit_max) cfg.cache_admit_max_bytes = admit_max;
    return mt_init_cfg(&cfg);
}

static void test_random(memtier_ctx_t* ctx) {
    enum { N = 400 };
    memtier_chunk_t c[N];
    uint64_t seed = 42, pos = 0;
    int round;
    for (round = 0; round < 3; round++) {
        size_t i;
        for (i = 0; i < N; i++) {
            uint64_t r = mt_rand(&seed), n = 1 + r % 20000;
            switch (r >> 40 & 7) {
            case 0: n = 1 + r % (6 * MiB); break;                  /* larger than a task */
            case 1: pos -= pos < 3000 ? pos : r % 3000; break;     /* overlap */
            case 2: pos += r % 50000; break;                        /* gap */
            }
            if (pos + n > FILE_SIZE) pos = r % 1000;
            c[i].offset = pos;
            c[i].size = n;
            pos += n;
        }
        for (i = N - 1; i > 0; i--) { /* shuffle: the library sorts */
            size_t j = mt_rand(&seed) % (i + 1);
            memtier_chunk_t t = c[i];
            c[i] = c[j];
            c[j] = t;
        }
        alloc_dsts(c, N);
        MT_OK(memtier_load_chunks(ctx, path, c, N, MEMTIER_TARGET_CPU));
        check_chunks(c, N);
        free_dsts(c, N);
    }
}

static void test_coalesced_stats(void) {
    memtier_ctx_t* ctx = ctx_with(0, 0);
    memtier_chunk_t c[12];
    memtier_stats_t s;
    size_t i;
    for (i = 0; i < 10; i++) { /* one adjacent run of 10 */
        c[i].offset = 1000 + 100 * i;
        c[i].size = 100;
    }
    c[10].offset = 50000; /* apart */
    c[10].size = 10;
    c[11].offset = 1050; /* overlapping the run */
    c[11].size = 100;
    alloc_dsts(c, 12);
    MT_OK(memtier_load_chunks(ctx, path, c, 12, MEMTIER_TARGET_CPU));
    check_chunks(c, 12);
    s = mt_stats(ctx);
    MT_EQ_U64(s.requests, 12, "one request per chunk");
    MT_EQ_U64(s.bytes, 1110, "bytes");
    MT_EQ_U64(s.coalesced_reads, 3, "the run, the apart chunk, the overlapping chunk");
    MT_EQ_U64(s.storage_bytes, 1110, "no byte read twice in one read, no gap read");
    MT_EQ_U64(s.buffered_requests, 12, "buffered_requests");
    MT_EQ_U64(s.buffered_bytes, 1110, "buffered_bytes");
    MT_EQ_U64(s.readv_calls, 0, "load_chunks is not readv");
    MT_EQ_U64(s.errors, 0, "errors");
    free_dsts(c, 12);
    MT_OK(memtier_finalize(ctx));
}

static void test_errors(memtier_ctx_t* ctx) {
    memtier_chunk_t c[5];
    memset(c, 0, sizeof c);
    c[0].offset = 0, c[0].size = 100;
    c[1].offset = FILE_SIZE - 10, c[1].size = 20; /* past EOF */
    c[2].offset = 100, c[2].size = 100;
    c[3].offset = 5, c[3].size = 0;               /* empty, dst NULL */
    c[4].offset = 300, c[4].size = 10;            /* dst NULL */
    alloc_dsts(c, 3);
    c[3].result = c[4].result = 777;
    MT_STATUS(memtier_load_chunks(ctx, path, c, 5, MEMTIER_TARGET_CPU), MEMTIER_ERR_EOF);
    MT_CHECK(strlen(memtier_last_error()) > 0, "no last_error text");
    MT_CHECK(c[0].result == 100 && c[2].result == 100 && c[3].result == 0, "good chunks: %lld %lld %lld",
             (long long)c[0].result, (long long)c[2].result, (long long)c[3].result);
    MT_CHECK(c[1].result == MEMTIER_ERR_EOF, "EOF chunk result %lld", (long long)c[1].result);
    MT_CHECK(c[4].result == MEMTIER_ERR_INVALID_ARG, "NULL dst result %lld", (long long)c[4].result);
    MT_CHECK(mt_find_not(c[1].dst, 0xAA, 28) < 0, "the EOF chunk's dst was written");
    check_chunks(c, 5);
    /* The lowest index wins: put the NULL dst first. */
    {
        memtier_chunk_t t = c[4];
        c[4] = c[0];
        c[0] = t;
    }
    MT_STATUS(memtier_load_chunks(ctx, path, c, 5, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    {
        memtier_chunk_t t = c[4];
        c[4] = c[0];
        c[0] = t;
    }
    MT_OK(memtier_load_chunks(ctx, path, c, 0, MEMTIER_TARGET_CPU));
    MT_OK(memtier_load_chunks(ctx, path, NULL, 0, MEMTIER_TARGET_CPU));
    c[0].result = 999;
    MT_STATUS(memtier_load_chunks(ctx, path, NULL, 3, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_load_chunks(ctx, NULL, c, 1, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(c[0].result == 999, "an argument error touched a chunk");
    MT_STATUS(memtier_load_chunks(NULL, path, c, 1, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_load_chunks(ctx, mt_path("missing.bin"), c, 1, MEMTIER_TARGET_CPU),
              MEMTIER_ERR_NOT_FOUND);
    MT_CHECK(c[0].result == MEMTIER_ERR_NOT_FOUND, "missing file result %lld", (long long)c[0].result);
    MT_STATUS(memtier_load_chunks(ctx, path, c, 1, 99), MEMTIER_ERR_INVALID_ARG);
    free_dsts(c, 3);
}

static void test_many_small(memtier_ctx_t* ctx) {
    enum { N = 100000 };
    memtier_chunk_t* c = calloc(N, sizeof *c);
    uint8_t* pool = malloc((size_t)N * 64);
    uint64_t seed = 7;
    size_t i;
    MT_CHECK(c && pool, "malloc");
    for (i = 0; i < N; i++) {
        uint64_t r = mt_rand(&seed);
        if (i % 2 == 0) { /* adjacent 16-byte chunks: long runs */
            c[i].offset = i * 16;
            c[i].size = 16;
        } else {
            c[i].offset = r % (FILE_SIZE - 64);
            c[i].size = 1 + (r >> 32) % 64;
        }
        c[i].dst = pool + i * 64;
    }
    MT_OK(memtier_load_chunks(ctx, path, c, N, MEMTIER_TARGET_CPU));
    for (i = 0; i < N; i++) {
        MT_CHECK(c[i].result == (int64_t)c[i].size, "chunk %zu: result %lld", i, (long long)c[i].result);
        MT_CHECK(mt_find_p_mismatch(c[i].dst, c[i].offset, c[i].size) < 0, "chunk %zu bytes differ", i);
    }
    free(pool);
    free(c);
}

static void test_streaming(memtier_ctx_t* ctx) {
    enum { N = 300 };
    memtier_chunk_t c[N];
    memtier_request_t* req = NULL;
    uint8_t seen[N];
    size_t i, idx, got = 0;
    uint64_t nbytes = 0, want_bytes = 0;
    for (i = 0; i < N; i++) {
        c[i].offset = (uint64_t)i * 20000;
        c[i].size = 1 + i * 37;
    }
    c[7].offset = 0, c[7].size = 5 * MiB; /* a large chunk, split into pieces */
    c[9].offset = FILE_SIZE, c[9].size = 1; /* past EOF */
    alloc_dsts(c, N);
    for (i = 0; i < N; i++)
        if (i != 9) want_bytes += c[i].size;
    memset(seen, 0, sizeof seen);
    MT_OK(memtier_load_chunks_async(ctx, path, c, N, MEMTIER_TARGET_CPU, &req));
    MT_CHECK(req != NULL, "no request");
    for (;;) {
        int rc = memtier_request_next(req, -1, &idx);
        if (rc == MEMTIER_ERR_EOF) break;
        MT_OK(rc);
        MT_CHECK(idx < N, "index %zu out of range", idx);
        MT_CHECK(!seen[idx], "index %zu reported twice", idx);
        seen[idx] = 1;
        got++;
        /* The result is final when the index is reported. */
        if (idx == 9) {
            MT_CHECK(c[idx].result == MEMTIER_ERR_EOF, "EOF chunk result %lld", (long long)c[idx].result);
        } else {
            MT_CHECK(c[idx].result == (int64_t)c[idx].size, "chunk %zu reported with result %lld", idx,
                     (long long)c[idx].result);
            MT_CHECK(mt_find_p_mismatch(c[idx].dst, c[idx].offset, c[idx].size) < 0,
                     "chunk %zu reported before its bytes", idx);
        }
    }
    MT_EQ_U64(got, N, "every index reported once");
    MT_STATUS(memtier_request_next(req, 0, &idx), MEMTIER_ERR_EOF);
    MT_STATUS(memtier_request_wait(req, -1, &nbytes), MEMTIER_ERR_EOF);
    MT_EQ_U64(nbytes, want_bytes, "nbytes counts the successful chunks");
    MT_OK(memtier_request_release(req));
    MT_STATUS(memtier_request_next(req, 0, &idx), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_request_next(NULL, 0, &idx), MEMTIER_ERR_INVALID_ARG);

    /* request_next on a plain read request. */
    {
        uint8_t b[16];
        MT_OK(memtier_read_async(ctx, path, 0, 16, b, MEMTIER_TARGET_CPU, 0, &req));
        MT_STATUS(memtier_request_next(req, -1, &idx), MEMTIER_ERR_INVALID_ARG);
        MT_OK(memtier_request_wait(req, -1, NULL));
        MT_OK(memtier_request_release(req));
    }
    /* A poll right after submitting: a chunk, or TIMEOUT. */
    MT_OK(memtier_load_chunks_async(ctx, path, c, N, MEMTIER_TARGET_CPU, &req));
    {
        int rc = memtier_request_next(req, 0, &idx);
        MT_CHECK(rc == MEMTIER_OK || rc == MEMTIER_ERR_TIMEOUT, "poll returned %d", rc);
        MT_STATUS(memtier_request_next(req, 1, NULL), MEMTIER_ERR_INVALID_ARG);
    }
    /* Release while running: it waits, so the bytes are complete after it. */
    MT_OK(memtier_request_release(req));
    check_chunks(c, N);
    /* Argument errors come back directly with *req_out NULL. */
    req = (memtier_request_t*)1;
    MT_STATUS(memtier_load_chunks_async(ctx, NULL, c, N, MEMTIER_TARGET_CPU, &req), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(req == NULL, "req_out not NULL after an argument error");
    MT_STATUS(memtier_load_chunks_async(ctx, path, NULL, 2, MEMTIER_TARGET_CPU, &req), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_load_chunks_async(ctx, path, c, N, MEMTIER_TARGET_CPU, NULL), MEMTIER_ERR_INVALID_ARG);
    /* n = 0: done at once, EOF at once. */
    MT_OK(memtier_load_chunks_async(ctx, path, NULL, 0, MEMTIER_TARGET_CPU, &req));
    MT_STATUS(memtier_request_next(req, -1, &idx), MEMTIER_ERR_EOF);
    MT_OK(memtier_request_wait(req, -1, &nbytes));
    MT_EQ_U64(nbytes, 0, "empty load");
    MT_OK(memtier_request_release(req));
    free_dsts(c, N);
}

static void test_exact_stats(void) {
    memtier_ctx_t* ctx = ctx_with(1, 0);
    memtier_chunk_t c[4];
    memtier_stats_t s;
    int pass;
    c[0].offset = 0, c[0].size = 1000;
    c[1].offset = 1000, c[1].size = 1000;
    c[2].offset = 2000, c[2].size = 1000;
    c[3].offset = 1 * MiB, c[3].size = 4096; /* isolated: read once too */
    alloc_dsts(c, 4);
    for (pass = 1; pass <= 2; pass++) {
        MT_OK(memtier_load_chunks(ctx, path, c, 4, MEMTIER_TARGET_CPU));
        check_chunks(c, 4);
    }
    s = mt_stats(ctx);
    printf("exact: requests %llu bytes %llu coalesced %llu storage %llu hit_req %llu inserted %llu\n",
           (unsigned long long)s.requests, (unsigned long long)s.bytes,
           (unsigned long long)s.coalesced_reads, (unsigned long long)s.storage_bytes,
           (unsigned long long)s.cache_hit_requests, (unsigned long long)s.cache_inserted_bytes);
    MT_EQ_U64(s.requests, 8, "4 chunks twice");
    MT_EQ_U64(s.bytes, 2 * 7096, "bytes");
    MT_EQ_U64(s.coalesced_reads, 4, "the run and the isolated chunk, twice");
    MT_EQ_U64(s.cache_inserted_bytes, 0, "chunk loads admit nothing");
    MT_EQ_U64(s.cache_hit_requests, 0, "so nothing hits");
    MT_EQ_U64(s.storage_bytes, 2 * 7096, "both passes read storage");
    /* A chunk whose bytes memtier_prefetch put in the cache is copied from it. */
    MT_OK(memtier_prefetch(ctx, path, 1 * MiB, 4096, NULL));
    MT_OK(memtier_stats_reset(ctx));
    MT_OK(memtier_load_chunks(ctx, path, c, 4, MEMTIER_TARGET_CPU));
    check_chunks(c, 4);
    s = mt_stats(ctx);
    MT_EQ_U64(s.cache_hit_requests, 1, "the prefetched chunk hits");
    MT_EQ_U64(s.cache_hit_bytes, 4096, "cache_hit_bytes");
    MT_EQ_U64(s.storage_bytes, 3000, "only the run is read from storage");
    MT_EQ_U64(s.buffered_requests, 3, "the run's chunks; the hit is not buffered");
    free_dsts(c, 4);
    MT_OK(memtier_finalize(ctx));
}

static void test_load_tensor(void) {
    memtier_ctx_t* ctx = ctx_with(1, 1 * MiB);
    uint8_t* buf = mt_alloc(2 * MiB);
    memtier_stats_t s;
    MT_OK(memtier_load_tensor(ctx, path, 12345, 2 * MiB, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 12345, 2 * MiB) < 0, "large tensor bytes differ");
    s = mt_stats(ctx);
    MT_EQ_U64(s.cache_inserted_bytes, 0, "a tensor >= cache_admit_max_bytes is read once");
    MT_OK(memtier_load_tensor(ctx, path, 4 * MiB, 4096, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 4 * MiB, 4096) < 0, "small tensor bytes differ");
    s = mt_stats(ctx);
    MT_EQ_U64(s.cache_inserted_bytes, 4096, "a small tensor is admitted");
    MT_OK(memtier_load_tensor(ctx, path, 0, 0, NULL, MEMTIER_TARGET_CPU));
    MT_STATUS(memtier_load_tensor(ctx, path, FILE_SIZE - 1, 2, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_EOF);
    MT_STATUS(memtier_load_tensor(ctx, path, 0, 1, NULL, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_load_tensor(ctx, NULL, 0, 1, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_load_tensor(NULL, path, 0, 1, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    free(buf);
    MT_OK(memtier_finalize(ctx));
}

static void test_bad_dst(memtier_ctx_t* ctx) {
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t* bad = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memtier_chunk_t c[4];
    int k;
    MT_CHECK(bad != MAP_FAILED, "mmap");
    for (k = 0; k < 2; k++) { /* k = 0: cold (preadv, pread); k = 1: the isolated one cached */
        memset(c, 0, sizeof c);
        c[0].offset = 0, c[0].size = 100;       /* a run of two: preadv into a bad page */
        c[1].offset = 100, c[1].size = 100;
        c[2].offset = 2 * MiB, c[2].size = 100; /* isolated: through the cache */
        c[3].offset = 3 * MiB, c[3].size = 100; /* a good one */
        alloc_dsts(c, 4);
        free(c[1].dst);
        free(c[2].dst);
        c[1].dst = bad;
        c[2].dst = bad;
        MT_STATUS(memtier_load_chunks(ctx, path, c, 4, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
        MT_CHECK(c[1].result == MEMTIER_ERR_IO && c[2].result == MEMTIER_ERR_IO,
                 "bad dst results %lld %lld", (long long)c[1].result, (long long)c[2].result);
        MT_CHECK(c[3].result == 100, "good chunk result %lld", (long long)c[3].result);
        MT_CHECK(c[0].result == 100 || c[0].result == MEMTIER_ERR_IO, "chunk 0 result %lld",
                 (long long)c[0].result);
        c[1].dst = c[2].dst = NULL;
        c[1].result = c[2].result = -1;
        check_chunks(c, 4);
        free(c[0].dst);
        free(c[3].dst);
    }
    munmap(bad, (size_t)pg);
}

int main(void) {
    mt_begin("test_chunks");
    path = mt_make_pfile("chunks.bin", FILE_SIZE);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    test_random(ctx);
    test_coalesced_stats();
    test_errors(ctx);
    test_many_small(ctx);
    test_streaming(ctx);
    test_exact_stats();
    test_load_tensor();
    test_bad_dst(ctx);
    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
