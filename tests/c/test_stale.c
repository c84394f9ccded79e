/*
 * Description: the DRAM cache never serves stale bytes. A cached file that is
 * rewritten in place (same size, new content), atomically replaced with
 * rename(), or truncated (B11a) is re-read: reads return the new bytes, and a
 * range cut off by truncation gives MEMTIER_ERR_EOF; stats count at least one
 * stale invalidation.
 */
#include "mt_test.h"

#define SIZE (1 * MiB)

static uint8_t gen_q(uint64_t i) { return (uint8_t)(mt_p(i) ^ 0x5A); }
static uint8_t gen_r(uint64_t i) { return (uint8_t)((i * 7 + 3) & 0xFF); }

/* File timestamps can be coarse (a clock tick); let one pass between versions. */
static void tick(void) { usleep(50 * 1000); }

static void expect_bytes(memtier_ctx_t* ctx, const char* what, const char* path, uint64_t off,
                         uint64_t size, uint8_t (*gen)(uint64_t)) {
    uint8_t* b = mt_alloc(size);
    uint64_t i;
    MT_OK(memtier_read(ctx, path, off, size, b, MEMTIER_TARGET_CPU));
    for (i = 0; i < size; i++)
        if (b[i] != gen(off + i))
            MT_FAIL("%s: read(%llu, %llu) byte %llu is 0x%02x, want 0x%02x (stale cache?)", what,
                    (unsigned long long)off, (unsigned long long)size, (unsigned long long)i, b[i],
                    gen(off + i));
    free(b);
}

/* Warms the cache with the whole file and checks it was cached. */
static void warm(memtier_ctx_t* ctx, const char* path, uint8_t (*gen)(uint64_t)) {
    MT_OK(memtier_prefetch(ctx, path, 0, 0, NULL));
    memtier_stats_t before = mt_stats(ctx);
    expect_bytes(ctx, "warm", path, 512 * KiB, 4 * KiB, gen);
    memtier_stats_t after = mt_stats(ctx);
    MT_EQ_U64(after.cache_hit_requests, before.cache_hit_requests + 1,
              "read after prefetch is a cache hit");
}

static uint8_t p_gen(uint64_t i) { return mt_p(i); }

int main(void) {
    mt_begin("test_stale");
    memtier_ctx_t* ctx = mt_init_cfg(NULL);

    /* 1. Rewritten in place: same inode, same size, new content. */
    const char* a = mt_make_pfile("inplace.bin", SIZE);
    warm(ctx, a, p_gen);
    tick();
    {
        int fd = open(a, O_WRONLY);
        uint8_t* q = mt_alloc(SIZE);
        uint64_t i;
        MT_CHECK(fd >= 0, "open %s: %s", a, strerror(errno));
        for (i = 0; i < SIZE; i++) q[i] = gen_q(i);
        MT_CHECK(pwrite(fd, q, SIZE, 0) == (ssize_t)SIZE, "rewrite: %s", strerror(errno));
        close(fd);
        free(q);
    }
    expect_bytes(ctx, "rewritten in place", a, 512 * KiB, 4 * KiB, gen_q);
    expect_bytes(ctx, "rewritten in place", a, 0, SIZE, gen_q);

    /* 2. Atomically replaced: a new inode renamed over the path. */
    const char* b = mt_make_pfile("replaced.bin", SIZE);
    const char* tmp = mt_path("replaced.bin.tmp");
    warm(ctx, b, p_gen);
    tick();
    mt_write_file_gen(tmp, SIZE, gen_r);
    MT_CHECK(rename(tmp, b) == 0, "rename: %s", strerror(errno));
    expect_bytes(ctx, "replaced by rename", b, 512 * KiB, 4 * KiB, gen_r);
    expect_bytes(ctx, "replaced by rename", b, 0, SIZE, gen_r);

    /* 3. Truncated (B11a). */
    const char* c = mt_make_pfile("truncated.bin", SIZE);
    warm(ctx, c, p_gen);
    tick();
    MT_CHECK(truncate(c, 4096) == 0, "truncate: %s", strerror(errno));
    {
        uint8_t buf[4096];
        memset(buf, 0xAA, sizeof buf);
        MT_STATUS(memtier_read(ctx, c, 512 * KiB, 4 * KiB, buf, MEMTIER_TARGET_CPU),
                  MEMTIER_ERR_EOF);
        MT_CHECK(mt_find_not(buf, 0xAA, sizeof buf) < 0,
                 "read past the truncated end wrote stale bytes into dst");
    }
    expect_bytes(ctx, "truncated", c, 0, 4096, p_gen);

    memtier_stats_t st = mt_stats(ctx);
    printf("stale_invalidations = %llu\n", (unsigned long long)st.stale_invalidations);
    MT_CHECK(st.stale_invalidations >= 1, "stale_invalidations = %llu, want >= 1",
             (unsigned long long)st.stale_invalidations);
    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
