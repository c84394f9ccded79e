/*
 * Description: EINTR and short preads never reach the caller (B04). With the
 * MEMTIER_FAULT=eintr_every=3,short_max=4095 test hook (set by ctest; Go reads
 * the environment when the library loads), 1000 random reads of up to 64 KiB
 * on a 16 MiB file return exact bytes on the buffered path and with O_DIRECT
 * always, and stats show the retries (eintr_retries > 0, short_read_retries > 0).
 */
#include "mt_test.h"

#define FILE_SIZE (16 * MiB)
#define READS 1000
#define MAX_READ (64 * KiB)

static void run(const char* path, const uint8_t* ref, int direct_mode, const char* label) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.direct_mode = direct_mode;
    cfg.cache_enabled = 0; /* every read goes to the file */
    memtier_ctx_t* ctx = mt_init_cfg(&cfg);
    uint8_t* buf = mt_alloc(MAX_READ + 1);
    uint64_t seed = 4242, bytes = 0;
    int i;
    for (i = 0; i < READS; i++) {
        uint64_t size = 1 + mt_rand(&seed) % MAX_READ;
        uint64_t off = mt_rand(&seed) % (FILE_SIZE - size + 1);
        uint8_t* dst = buf + (i & 1);
        int st = memtier_read(ctx, path, off, size, dst, MEMTIER_TARGET_CPU);
        if (st != MEMTIER_OK)
            MT_FAIL("[%s] read %d (off=%llu, size=%llu) = %d (%s): %s", label, i,
                    (unsigned long long)off, (unsigned long long)size, st, memtier_strerror(st),
                    memtier_last_error());
        if (memcmp(dst, ref + off, size) != 0)
            MT_FAIL("[%s] read %d (off=%llu, size=%llu): bytes differ", label, i,
                    (unsigned long long)off, (unsigned long long)size);
        bytes += size;
    }
    memtier_stats_t st = mt_stats(ctx);
    printf("[%s] %d reads ok: eintr_retries=%llu short_read_retries=%llu direct_requests=%llu "
           "direct_fallbacks=%llu storage_bytes=%llu\n",
           label, READS, (unsigned long long)st.eintr_retries,
           (unsigned long long)st.short_read_retries, (unsigned long long)st.direct_requests,
           (unsigned long long)st.direct_fallbacks, (unsigned long long)st.storage_bytes);
    MT_CHECK(st.eintr_retries > 0, "[%s] eintr_retries is 0 with eintr_every=3", label);
    MT_CHECK(st.short_read_retries > 0, "[%s] short_read_retries is 0 with short_max=4095", label);
    MT_EQ_U64(st.bytes, bytes, label);
    MT_EQ_U64(st.errors, 0, label);
    MT_OK(memtier_finalize(ctx));
    free(buf);
}

int main(void) {
    mt_begin("test_fault");
    const char* fault = getenv("MEMTIER_FAULT");
    if (fault == NULL || strstr(fault, "eintr_every") == NULL || strstr(fault, "short_max") == NULL)
        mt_skip("needs MEMTIER_FAULT=eintr_every=3,short_max=4095 at process start (ctest sets it)");

    uint8_t* ref = mt_alloc(FILE_SIZE);
    mt_fill_p(ref, 0, FILE_SIZE);
    const char* path = mt_make_pfile("p16m.bin", FILE_SIZE);
    run(path, ref, MEMTIER_DIRECT_OFF, "buffered");
    run(path, ref, MEMTIER_DIRECT_ALWAYS, "direct_always");
    free(ref);
    mt_pass();
    return 0;
}
