/*
 * Description: the statuses include/memtier.h's doc comments list under
 * "Returns:" for the lifecycle, read, prefetch/async, objects and dataset
 * calls, where no other test reaches them: each call is made so that it must
 * return the documented status, and that exact status is asserted (with the
 * out pointers the docs promise NULL or untouched).
 */
#include <stdio.h>
#include <string.h>

#include "memtier.h"
#include "mt_test.h"

static void write_bytes(const char* path, const void* p, size_t n) {
    FILE* f = fopen(path, "wb");
    MT_CHECK(f != NULL, "create %s", path);
    MT_CHECK(fwrite(p, 1, n, f) == n, "write %s", path);
    fclose(f);
}

static void lifecycle(void) {
    memtier_config_t cfg;
    memtier_ctx_t* c = (memtier_ctx_t*)1;
    MT_STATUS(memtier_config_default_sized(NULL, sizeof cfg), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_config_default_sized(&cfg, 7), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_config_default(&cfg));
    cfg.struct_size = 4;
    MT_STATUS(memtier_init(&cfg, &c), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(c == NULL, "ctx_out not NULL after a failed init");
    cfg.struct_size = 65537;
    MT_STATUS(memtier_init(&cfg, &c), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_init(NULL, NULL), MEMTIER_ERR_INVALID_ARG);
    c = mt_init_cfg(NULL);
    MT_STATUS(memtier_get_config(c, NULL, sizeof cfg), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_finalize(c));
    MT_STATUS(memtier_finalize(c), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_get_config(c, &cfg, sizeof cfg), MEMTIER_ERR_CLOSED);
    MT_OK(memtier_finalize(NULL));
}

static void reads(memtier_ctx_t* ctx, const char* p) {
    uint8_t buf[64];
    memtier_iovec_t v = {0, 8, buf, NULL, 0};
    MT_STATUS(memtier_read(ctx, p, 0, 8, buf, 7), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_read_ex(ctx, p, 0, 8, buf, MEMTIER_TARGET_CPU, 0x8000u), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_readv(ctx, NULL, NULL, 0, MEMTIER_TARGET_CPU));
    MT_STATUS(memtier_readv_ex(ctx, p, &v, 1, MEMTIER_TARGET_CPU, 0x8000u), MEMTIER_ERR_INVALID_ARG);
    MT_EQ_U64((uint64_t)v.result, (uint64_t)(int64_t)MEMTIER_ERR_INVALID_ARG, "readv_ex element result");
    MT_STATUS(memtier_load_tensor(ctx, p, 0, 8, NULL, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_load_chunks(ctx, p, NULL, 0, MEMTIER_TARGET_CPU));
    MT_STATUS(memtier_load_chunks(ctx, NULL, NULL, 0, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
}

static void async_requests(memtier_ctx_t* ctx, const char* p) {
    uint8_t buf[64];
    uint64_t n = 0;
    size_t idx;
    memtier_request_t* r = (memtier_request_t*)1;
    /* CPU target: unknown flags are refused at once, no request made. */
    MT_STATUS(memtier_read_async(ctx, p, 0, 8, buf, MEMTIER_TARGET_CPU, 0x8000u, &r),
              MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(r == NULL, "req_out not NULL after a refused read_async");
    /* An unknown target is the request's status, from wait. */
    MT_OK(memtier_read_async(ctx, p, 0, 8, buf, 7, 0, &r));
    MT_STATUS(memtier_request_wait(r, -1, &n), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_request_test(r, &n), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_request_next(r, 0, &idx), MEMTIER_ERR_INVALID_ARG); /* not a chunk request */
    MT_OK(memtier_request_release(r));
    MT_STATUS(memtier_request_release(r), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_request_wait(r, 0, &n), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_request_test(r, &n), MEMTIER_ERR_CLOSED);
    MT_OK(memtier_request_release(NULL));
    MT_STATUS(memtier_request_test(NULL, &n), MEMTIER_ERR_INVALID_ARG);
    /* A completed read: its own status and bytes. */
    MT_OK(memtier_read_async(ctx, p, 0, 8, buf, MEMTIER_TARGET_CPU, 0, &r));
    MT_OK(memtier_request_wait(r, -1, &n));
    MT_EQ_U64(n, 8, "bytes of the request");
    MT_OK(memtier_request_test(r, NULL));
    MT_OK(memtier_request_release(r));
}

static void prefetches(memtier_ctx_t* ctx, const char* p) {
    memtier_prefetch_opts_t small = {4, 0}, bad = {sizeof(memtier_prefetch_opts_t), 0x80u};
    memtier_request_t* r = (memtier_request_t*)1;
    MT_STATUS(memtier_prefetch(ctx, p, 0, 8, &small), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_prefetch(ctx, p, 0, 8, &bad), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_prefetch(ctx, NULL, 0, 8, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_prefetch(ctx, p, 1 << 20, 8, NULL)); /* past end of file: clipped */
    MT_OK(memtier_prefetch(ctx, p, 4096, 1 << 30, NULL));
    MT_STATUS(memtier_prefetch_async(ctx, p, 0, 8, &bad, &r), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(r == NULL, "req_out not NULL after a refused prefetch_async");

    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.cache_enabled = 0;
    memtier_ctx_t* off = mt_init_cfg(&cfg);
    MT_STATUS(memtier_prefetch(off, p, 0, 8, NULL), MEMTIER_ERR_UNSUPPORTED);
    r = (memtier_request_t*)1;
    MT_STATUS(memtier_prefetch_async(off, p, 0, 8, NULL, &r), MEMTIER_ERR_UNSUPPORTED);
    MT_CHECK(r == NULL, "req_out not NULL after an unsupported prefetch_async");
    /* A request outlives nothing: finalize forgets it. */
    uint8_t buf[8];
    MT_OK(memtier_read_async(off, p, 0, 8, buf, MEMTIER_TARGET_CPU, 0, &r));
    MT_OK(memtier_finalize(off));
    MT_STATUS(memtier_request_wait(r, -1, NULL), MEMTIER_ERR_CLOSED);
}

static void datasets(memtier_ctx_t* ctx) {
    const char* data = mt_path("ds.bin");
    const char* index = mt_path("ds.idx");
    const char* gz = mt_path("shard.tar.gz");
    const char* stp = mt_path("st.safetensors");
    static const char hdr[] = "{}      ";
    uint8_t st_file[8 + sizeof hdr - 1];
    static const uint8_t gzip_magic[32] = {0x1f, 0x8b, 0x08, 0};
    uint64_t cnt = 0, idx[2] = {0, 5};
    uint8_t b0[4], b1[4];
    void* dsts[2] = {b0, b1};
    int64_t res[2] = {9, 9};
    memtier_dataset_t* ds = (memtier_dataset_t*)1;
    memtier_safetensors_t* st = NULL;

    write_bytes(data, "abcdefgh", 8);
    write_bytes(index, "0 4\n4 4\n", 8);
    write_bytes(gz, gzip_magic, sizeof gzip_magic);
    memset(st_file, 0, 8);
    st_file[0] = (uint8_t)(sizeof hdr - 1);
    memcpy(st_file + 8, hdr, sizeof hdr - 1);
    write_bytes(stp, st_file, sizeof st_file);

    MT_STATUS(memtier_dataset_open(ctx, data, NULL, &ds), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(ds == NULL, "ds_out not NULL after a failed open");
    MT_STATUS(memtier_dataset_open(ctx, mt_path("missing.bin"), index, &ds), MEMTIER_ERR_NOT_FOUND);
    MT_STATUS(memtier_dataset_open(ctx, data, mt_tmpdir(), &ds), MEMTIER_ERR_IS_DIR);
    MT_STATUS(memtier_dataset_open_tar(ctx, gz, &ds), MEMTIER_ERR_FORMAT);
    MT_STATUS(memtier_dataset_open_tar(ctx, NULL, &ds), MEMTIER_ERR_INVALID_ARG);

    MT_OK(memtier_dataset_open(ctx, data, index, &ds));
    MT_OK(memtier_dataset_count(ds, &cnt));
    MT_EQ_U64(cnt, 2, "samples");
    MT_STATUS(memtier_dataset_count(ds, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_dataset_sample(ds, 2, NULL, NULL, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_dataset_read(ds, 0, b0, 3, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_dataset_read_batch(ds, NULL, 0, NULL, NULL, MEMTIER_TARGET_CPU));
    MT_STATUS(memtier_dataset_read_batch(ds, idx, 2, NULL, res, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_dataset_read_batch(ds, idx, 2, dsts, res, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_EQ_U64((uint64_t)res[0], 4, "in-range sample read");
    MT_EQ_U64((uint64_t)res[1], (uint64_t)(int64_t)MEMTIER_ERR_INVALID_ARG, "out-of-range sample");
    MT_CHECK(memcmp(b0, "abcd", 4) == 0, "sample 0 bytes");

    /* A handle of the other kind is INVALID_ARG, not CLOSED. */
    MT_OK(memtier_safetensors_open(ctx, stp, &st));
    MT_STATUS(memtier_dataset_count((memtier_dataset_t*)st, &cnt), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_dataset_close((memtier_dataset_t*)st), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_safetensors_close(st));

    MT_OK(memtier_dataset_close(ds));
    MT_STATUS(memtier_dataset_close(ds), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_dataset_count(ds, &cnt), MEMTIER_ERR_CLOSED);
    MT_OK(memtier_dataset_close(NULL));
}

int main(void) {
    mt_begin("test_doc_statuses");
    const char* p = mt_make_pfile("p.bin", 64 * KiB);
    lifecycle();
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    reads(ctx, p);
    async_requests(ctx, p);
    prefetches(ctx, p);
    datasets(ctx);
    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
