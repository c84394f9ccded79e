/*
 * Description: memtier_read returns exactly the file's bytes on every path
 * (default policy, O_DIRECT always, cache disabled, and cache hits after a
 * WILL_REUSE read) for offsets and sizes around block edges up to 64 MiB + 3,
 * into aligned and unaligned destinations, without touching a byte outside the
 * destination; a read crossing end of file returns MEMTIER_ERR_EOF and writes
 * nothing beyond what the file holds (B07), the same on the buffered, cached,
 * readv and O_DIRECT paths.
 */
#include "mt_test.h"

#define FILE_SIZE (64 * MiB + 3 * 4096 + 5)
#define GUARD 4096 /* canary bytes on each side of dst */
#define CANARY 0xCD
#define FILL 0x5A

static const uint64_t points[] = {0, 1, 4095, 4096, 4097, 1 * MiB + 1, 64 * MiB + 3};
#define NPOINTS (sizeof points / sizeof points[0])

enum mode { MODE_DEFAULT, MODE_DIRECT, MODE_NOCACHE, MODE_REUSE, NMODES };
static const char* mode_names[] = {"default", "direct_always", "cache_disabled", "will_reuse"};

static uint8_t* ref;  /* the whole file, for memcmp */
static uint8_t* area; /* GUARD + FILE_SIZE + 1 + GUARD bytes */

/* Reads (off, size) into area + GUARD + shift and checks bytes and canaries. */
static void read_and_check(memtier_ctx_t* ctx, const char* path, enum mode m, uint64_t off,
                           uint64_t size, int shift) {
    uint8_t* dst = area + GUARD + shift;
    memset(area, CANARY, GUARD + (size_t)shift);
    memset(dst, FILL, size);
    memset(dst + size, CANARY, GUARD);
    uint32_t flags = m == MODE_REUSE ? MEMTIER_READ_WILL_REUSE : MEMTIER_READ_DEFAULT;
    int st = memtier_read_ex(ctx, path, off, size, dst, MEMTIER_TARGET_CPU, flags);
    if (st != MEMTIER_OK)
        MT_FAIL("[%s] read(off=%llu, size=%llu, dst+%d) = %d (%s): %s", mode_names[m],
                (unsigned long long)off, (unsigned long long)size, shift, st,
                memtier_strerror(st), memtier_last_error());
    if (memcmp(dst, ref + off, size) != 0) {
        uint64_t i = 0;
        while (dst[i] == ref[off + i]) i++;
        MT_FAIL("[%s] read(off=%llu, size=%llu, dst+%d): byte %llu is 0x%02x, want 0x%02x",
                mode_names[m], (unsigned long long)off, (unsigned long long)size, shift,
                (unsigned long long)i, dst[i], ref[off + i]);
    }
    int64_t bad = mt_find_not(area, CANARY, GUARD + (uint64_t)shift);
    MT_CHECK(bad < 0, "[%s] read(off=%llu, size=%llu): byte %lld before dst overwritten",
             mode_names[m], (unsigned long long)off, (unsigned long long)size,
             (long long)bad - GUARD - shift);
    bad = mt_find_not(dst + size, CANARY, GUARD);
    MT_CHECK(bad < 0, "[%s] read(off=%llu, size=%llu): byte %lld after dst end overwritten",
             mode_names[m], (unsigned long long)off, (unsigned long long)size, (long long)bad);
}

static void run_mode(const char* path, enum mode m) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    if (m == MODE_DIRECT) cfg.direct_mode = MEMTIER_DIRECT_ALWAYS;
    if (m == MODE_NOCACHE) cfg.cache_enabled = 0;
    memtier_ctx_t* ctx = mt_init_cfg(&cfg);

    uint64_t calls = 0, bytes = 0, hits = 0;
    size_t i, j;
    for (i = 0; i < NPOINTS; i++) {
        for (j = 0; j < NPOINTS; j++) {
            uint64_t off = points[i], size = points[j];
            int shift;
            if (off + size > FILE_SIZE) continue; /* EOF cases are below */
            for (shift = 0; shift <= 1; shift++) {
                read_and_check(ctx, path, m, off, size, shift);
                calls++;
                bytes += size;
                if (m == MODE_REUSE && size > 0) {
                    /* The range was admitted: a plain read is now a cache hit. */
                    memtier_stats_t before = mt_stats(ctx);
                    read_and_check(ctx, path, MODE_DEFAULT, off, size, shift);
                    calls++;
                    bytes += size;
                    hits++;
                    memtier_stats_t after = mt_stats(ctx);
                    if (after.cache_hit_requests != before.cache_hit_requests + 1)
                        MT_FAIL("[will_reuse] re-read(off=%llu, size=%llu): cache_hit_requests "
                                "went %llu -> %llu, want +1",
                                (unsigned long long)off, (unsigned long long)size,
                                (unsigned long long)before.cache_hit_requests,
                                (unsigned long long)after.cache_hit_requests);
                }
            }
        }
    }

    memtier_stats_t st = mt_stats(ctx);
    printf("[%s] %llu reads: requests=%llu bytes=%llu cache_hit_requests=%llu buffered=%llu "
           "direct=%llu direct_fallbacks=%llu bounce_bytes=%llu cache_inserted=%llu\n",
           mode_names[m], (unsigned long long)calls, (unsigned long long)st.requests,
           (unsigned long long)st.bytes, (unsigned long long)st.cache_hit_requests,
           (unsigned long long)st.buffered_requests, (unsigned long long)st.direct_requests,
           (unsigned long long)st.direct_fallbacks, (unsigned long long)st.bounce_bytes,
           (unsigned long long)st.cache_inserted_bytes);
    MT_EQ_U64(st.requests, calls, mode_names[m]);
    MT_EQ_U64(st.bytes, bytes, mode_names[m]);
    MT_EQ_U64(st.errors, 0, mode_names[m]);
    if (m == MODE_REUSE) MT_CHECK(st.cache_hit_requests >= hits, "[will_reuse] hits");
    if (m == MODE_NOCACHE) {
        MT_EQ_U64(st.cache_hit_requests, 0, "cache disabled");
        MT_EQ_U64(st.cache_inserted_bytes, 0, "cache disabled");
        MT_EQ_U64(st.cache_resident_bytes, 0, "cache disabled");
    }
    if (m == MODE_DIRECT)
        MT_CHECK(st.direct_requests + st.direct_fallbacks > 0,
                 "DIRECT_ALWAYS used neither O_DIRECT nor a counted fallback");
    MT_OK(memtier_finalize(ctx));
}

/* B07: reads crossing end of file on a 100-byte file and a 0-byte file. */
static void check_eof(memtier_ctx_t* ctx, const char* label, const char* path, uint64_t off,
                      uint64_t size, uint64_t file_size, int want) {
    uint8_t dst[32];
    memset(dst, 0xAA, sizeof dst);
    int st = memtier_read(ctx, path, off, size, dst, MEMTIER_TARGET_CPU);
    if (st != want)
        MT_FAIL("[%s] read(%llu, %llu) on a %llu-byte file = %d (%s), want %d (%s)", label,
                (unsigned long long)off, (unsigned long long)size,
                (unsigned long long)file_size, st, memtier_strerror(st), want,
                memtier_strerror(want));
    /* Bytes the file does not hold must not be written. */
    uint64_t held = off >= file_size ? 0 : file_size - off;
    if (held > size) held = size;
    int64_t bad = mt_find_not(dst + held, 0xAA, sizeof dst - held);
    MT_CHECK(bad < 0, "[%s] read(%llu, %llu): dst[%lld] written past what the file holds",
             label, (unsigned long long)off, (unsigned long long)size, (long long)(held + bad));
    if (st == MEMTIER_OK) {
        int64_t m = mt_find_p_mismatch(dst, off, size);
        MT_CHECK(m < 0, "[%s] read(%llu, %llu): byte %lld wrong", label,
                 (unsigned long long)off, (unsigned long long)size, (long long)m);
    }
}

static void run_eof(void) {
    const char* small = mt_make_pfile("p100.bin", 100);
    const char* empty = mt_make_pfile("empty.bin", 0);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);

    check_eof(ctx, "buffered", small, 90, 20, 100, MEMTIER_ERR_EOF);
    check_eof(ctx, "buffered", small, 100, 0, 100, MEMTIER_OK);
    check_eof(ctx, "buffered", small, 100, 1, 100, MEMTIER_ERR_EOF);
    check_eof(ctx, "buffered", small, 200, 4, 100, MEMTIER_ERR_EOF);
    check_eof(ctx, "buffered", small, 90, 10, 100, MEMTIER_OK);
    check_eof(ctx, "empty", empty, 0, 16, 0, MEMTIER_ERR_EOF);
    check_eof(ctx, "empty", empty, 0, 0, 0, MEMTIER_OK);

    /* Cache warm. */
    MT_OK(memtier_prefetch(ctx, small, 0, 0, NULL));
    check_eof(ctx, "cached", small, 90, 20, 100, MEMTIER_ERR_EOF);
    check_eof(ctx, "cached", small, 100, 1, 100, MEMTIER_ERR_EOF);

    /* Through readv: the element's result is EOF and so is the call's. */
    uint8_t e[32], ok[8];
    memset(e, 0xAA, sizeof e);
    memtier_iovec_t iov[2] = {
        {90, 20, e, NULL, 12345},
        {0, 8, ok, NULL, 12345},
    };
    MT_STATUS(memtier_readv(ctx, small, iov, 2, MEMTIER_TARGET_CPU), MEMTIER_ERR_EOF);
    MT_CHECK(iov[0].result == MEMTIER_ERR_EOF, "readv element (90,20) result %lld, want %d",
             (long long)iov[0].result, MEMTIER_ERR_EOF);
    MT_CHECK(iov[1].result == 8, "readv element (0,8) result %lld, want 8",
             (long long)iov[1].result);
    MT_CHECK(mt_find_not(e + 10, 0xAA, sizeof e - 10) < 0, "readv EOF element wrote past EOF");
    MT_CHECK(mt_find_p_mismatch(ok, 0, 8) < 0, "readv element (0,8) bytes wrong");
    MT_OK(memtier_finalize(ctx));

    /* O_DIRECT, cache off so the read reaches the file. */
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.direct_mode = MEMTIER_DIRECT_ALWAYS;
    cfg.cache_enabled = 0;
    ctx = mt_init_cfg(&cfg);
    check_eof(ctx, "direct", small, 90, 20, 100, MEMTIER_ERR_EOF);
    check_eof(ctx, "direct", small, 100, 1, 100, MEMTIER_ERR_EOF);
    check_eof(ctx, "direct", small, 90, 10, 100, MEMTIER_OK);
    check_eof(ctx, "direct", empty, 0, 16, 0, MEMTIER_ERR_EOF);
    MT_OK(memtier_finalize(ctx));
    printf("[eof] B07 cases pass on buffered, cached, readv and direct paths\n");
}

int main(void) {
    mt_begin("test_read_paths");
    ref = mt_alloc(FILE_SIZE);
    mt_fill_p(ref, 0, FILE_SIZE);
    area = mt_alloc(GUARD + FILE_SIZE + 1 + GUARD);
    const char* path = mt_path("p64m.bin");
    mt_write_file_gen(path, FILE_SIZE, NULL);

    int m;
    for (m = 0; m < NMODES; m++) run_mode(path, (enum mode)m);
    run_eof();
    free(area);
    free(ref);
    mt_pass();
    return 0;
}
