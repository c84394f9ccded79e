/*
 * Description: field case B05 (tests/field_cases.md), one request larger than 2 GiB. Linux moves at
 * most 0x7ffff000 bytes per read/pread, so a 2,300,000,000-byte memtier_read
 * must loop over short counts. A sparse file of that size with markers
 * "HEAD0000" at 0, "EDGE1234" at 2,147,479,548 (straddling 0x7ffff000) and
 * "TAIL9999" at size-8 is read whole into one buffer (prefilled with 0xAA)
 * three times: default config, direct_mode = MEMTIER_DIRECT_ALWAYS, and
 * cache_enabled = 0. Each returns MEMTIER_OK, the markers sit at their
 * offsets, every other byte is 0, and stats.bytes is the full size. Each read
 * is timed (printed; over 120 s fails). Skips (77) if the 2.3 GB buffer can't
 * be allocated or the temp file system has under 3 GB free.
 */
#include "mt_test.h"

#include <sys/statvfs.h>

#define FILE_BYTES 2300000000ULL
#define EDGE_OFF 2147479548ULL /* 0x7ffff000 - 4 */
#define MAX_SECONDS 120.0

static const struct {
    uint64_t off;
    const char* text;
} markers[] = {
    {0, "HEAD0000"},
    {EDGE_OFF, "EDGE1234"},
    {FILE_BYTES - 8, "TAIL9999"},
};
#define NMARKERS (sizeof markers / sizeof markers[0])

static uint8_t zeros[1 << 20];

/* Offset of the first byte of buf[0, n) that is not 0, or -1 (memcmp per MiB). */
static int64_t first_nonzero(const uint8_t* buf, uint64_t n) {
    uint64_t off = 0;
    while (off < n) {
        uint64_t len = n - off < sizeof zeros ? n - off : sizeof zeros;
        if (memcmp(buf + off, zeros, len) != 0) {
            uint64_t i;
            for (i = 0; i < len; i++)
                if (buf[off + i] != 0) return (int64_t)(off + i);
        }
        off += len;
    }
    return -1;
}

static void check_buffer(const char* mode, uint8_t* dst) {
    size_t m;
    for (m = 0; m < NMARKERS; m++) {
        if (memcmp(dst + markers[m].off, markers[m].text, 8) != 0) {
            char got[9];
            memcpy(got, dst + markers[m].off, 8);
            got[8] = '\0';
            MT_FAIL("%s: marker at %llu is \"%s\" (bytes shown raw), want \"%s\"", mode,
                    (unsigned long long)markers[m].off, got, markers[m].text);
        }
    }
    /* Every other byte must be 0: scan the gaps between markers. */
    {
        uint64_t start = 0;
        for (m = 0; m <= NMARKERS; m++) {
            uint64_t end = m < NMARKERS ? markers[m].off : FILE_BYTES;
            if (end > start) {
                int64_t bad = first_nonzero(dst + start, end - start);
                if (bad >= 0)
                    MT_FAIL("%s: byte at offset %llu is 0x%02x, want 0", mode,
                            (unsigned long long)(start + (uint64_t)bad), dst[start + (uint64_t)bad]);
            }
            if (m < NMARKERS) start = markers[m].off + 8;
        }
    }
}

static void run_mode(const char* mode, const memtier_config_t* cfg, const char* path,
                     uint8_t* dst) {
    memtier_ctx_t* ctx = mt_init_cfg(cfg);
    memtier_stats_t st;
    double t0, dt;

    memset(dst, 0xAA, FILE_BYTES); /* proves the read wrote every byte */
    t0 = mt_now();
    MT_OK(memtier_read(ctx, path, 0, FILE_BYTES, dst, MEMTIER_TARGET_CPU));
    dt = mt_now() - t0;
    st = mt_stats(ctx);
    printf("%-14s read %llu bytes in %.2f s (%.0f MB/s); stats: bytes %llu storage %llu "
           "buffered %llu/%llu direct %llu/%llu fallbacks %llu bounce %llu short_retries %llu "
           "cache_inserted %llu errors %llu\n",
           mode, FILE_BYTES, dt, (double)FILE_BYTES / dt / 1e6, (unsigned long long)st.bytes,
           (unsigned long long)st.storage_bytes, (unsigned long long)st.buffered_requests,
           (unsigned long long)st.buffered_bytes, (unsigned long long)st.direct_requests,
           (unsigned long long)st.direct_bytes, (unsigned long long)st.direct_fallbacks,
           (unsigned long long)st.bounce_bytes, (unsigned long long)st.short_read_retries,
           (unsigned long long)st.cache_inserted_bytes, (unsigned long long)st.errors);
    check_buffer(mode, dst);
    MT_EQ_U64(st.bytes, FILE_BYTES, mode);
    MT_EQ_U64(st.requests, 1, mode);
    MT_EQ_U64(st.errors, 0, mode);
    MT_CHECK(dt < MAX_SECONDS, "%s: the read took %.1f s (limit %.0f s)", mode, dt, MAX_SECONDS);
    MT_OK(memtier_finalize(ctx));
}

int main(void) {
    mt_begin("test_large_2g");
    const char* dir = mt_tmpdir();

    {
        struct statvfs sv;
        uint64_t avail;
        MT_CHECK(statvfs(dir, &sv) == 0, "statvfs %s: %s", dir, strerror(errno));
        avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
        printf("temp dir %s: %.1f GB free\n", dir, (double)avail / 1e9);
        if (avail < 3000000000ULL) mt_skip("temp file system has under 3 GB free");
    }

    uint8_t* dst = malloc(FILE_BYTES);
    if (dst == NULL) mt_skip("malloc of 2.3 GB failed");

    /* The sparse file: a hole everywhere except the markers. */
    const char* path = mt_path("sparse_2g3.bin");
    {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        size_t m;
        MT_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
        MT_CHECK(ftruncate(fd, (off_t)FILE_BYTES) == 0, "ftruncate %s: %s", path, strerror(errno));
        for (m = 0; m < NMARKERS; m++)
            MT_CHECK(pwrite(fd, markers[m].text, 8, (off_t)markers[m].off) == 8,
                     "write marker %s: %s", markers[m].text, strerror(errno));
        MT_CHECK(close(fd) == 0, "close %s: %s", path, strerror(errno));
    }

    double t_all = mt_now();
    {
        memtier_config_t cfg;
        MT_OK(memtier_config_default(&cfg));
        run_mode("default", &cfg, path, dst);
    }
    {
        memtier_config_t cfg;
        MT_OK(memtier_config_default(&cfg));
        cfg.direct_mode = MEMTIER_DIRECT_ALWAYS;
        run_mode("direct_always", &cfg, path, dst);
    }
    {
        memtier_config_t cfg;
        MT_OK(memtier_config_default(&cfg));
        cfg.cache_enabled = 0;
        run_mode("cache_disabled", &cfg, path, dst);
    }
    printf("total %.1f s (including 0xAA prefill and checks)\n", mt_now() - t_all);

    free(dst);
    mt_pass();
    return 0;
}
