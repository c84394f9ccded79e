/*
 * Description: O_DIRECT on tmpfs (B09). A 10,000-byte file under /dev/shm read
 * with MEMTIER_DIRECT_ALWAYS gives correct bytes; if the file system refuses
 * O_DIRECT (older kernels' tmpfs), the fallback is visible: exactly one
 * direct_fallbacks for the file. With MEMTIER_DIRECT_REQUIRED the read either
 * succeeds (O_DIRECT accepted) or fails with MEMTIER_ERR_DIRECT_IO naming the
 * path. Skips when /dev/shm does not exist.
 */
#include "mt_test.h"

#define SIZE 10000

static void read_expect(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t size) {
    uint8_t buf[SIZE];
    MT_OK(memtier_read(ctx, path, off, size, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, off, size) < 0, "read(%llu, %llu): bytes wrong",
             (unsigned long long)off, (unsigned long long)size);
}

int main(void) {
    mt_begin("test_tmpfs");
    struct stat sb;
    if (stat("/dev/shm", &sb) != 0 || !S_ISDIR(sb.st_mode)) mt_skip("/dev/shm does not exist");
    mt_tmpdir_in("/dev/shm");
    const char* path = mt_make_pfile("mt_odirect.bin", SIZE);

    /* Does this tmpfs accept O_DIRECT? (Linux >= 6.6 does.) */
    int fd = open(path, O_RDONLY | O_DIRECT);
    int refused = fd < 0;
    if (fd >= 0) close(fd);
    printf("/dev/shm %s O_DIRECT\n", refused ? "refuses" : "accepts");

    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.direct_mode = MEMTIER_DIRECT_ALWAYS;
    cfg.cache_enabled = 0;
    memtier_ctx_t* ctx = mt_init_cfg(&cfg);
    read_expect(ctx, path, 0, SIZE);
    read_expect(ctx, path, 4097, 3);
    memtier_stats_t st = mt_stats(ctx);
    printf("ALWAYS: direct_requests=%llu direct_fallbacks=%llu buffered_requests=%llu\n",
           (unsigned long long)st.direct_requests, (unsigned long long)st.direct_fallbacks,
           (unsigned long long)st.buffered_requests);
    if (refused)
        MT_EQ_U64(st.direct_fallbacks, 1, "one counted fallback for the file");
    else
        MT_EQ_U64(st.direct_fallbacks, 0, "O_DIRECT accepted: no fallback");
    MT_EQ_U64(st.errors, 0, "no errors");
    MT_OK(memtier_finalize(ctx));

    cfg.direct_mode = MEMTIER_DIRECT_REQUIRED;
    ctx = mt_init_cfg(&cfg);
    uint8_t buf[SIZE];
    int s = memtier_read(ctx, path, 0, SIZE, buf, MEMTIER_TARGET_CPU);
    if (refused) {
        MT_CHECK(s == MEMTIER_ERR_DIRECT_IO, "REQUIRED on a refusing fs = %d (%s), want %d",
                 s, memtier_strerror(s), MEMTIER_ERR_DIRECT_IO);
        MT_CHECK(strstr(memtier_last_error(), path) != NULL,
                 "DIRECT_IO last_error \"%s\" does not name %s", memtier_last_error(), path);
    } else {
        MT_CHECK(s == MEMTIER_OK, "REQUIRED on an accepting fs = %d (%s): %s", s,
                 memtier_strerror(s), memtier_last_error());
        MT_CHECK(mt_find_p_mismatch(buf, 0, SIZE) < 0, "REQUIRED read: bytes wrong");
        st = mt_stats(ctx);
        MT_CHECK(st.direct_requests >= 1, "REQUIRED read did not count a direct request");
    }
    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
