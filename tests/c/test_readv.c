/*
 * Description: memtier_readv (B19). One batch on a 64 MiB file with the cache
 * off: adjacent, duplicate and zero-size elements, one crossing end of file,
 * 30 small reads 2 MiB apart and one on a missing file. Every good element is
 * exact, each bad one fails alone in its own result slot, the call returns the
 * lowest failing index's status, and coalescing never fills the 2 MiB gaps
 * (storage_bytes stays near 30 small reads, far below 60 MiB).
 */
#include "mt_test.h"

#define FILE_SIZE (64 * MiB)
#define NSMALL 30
#define N (6 + NSMALL)

int main(void) {
    mt_begin("test_readv");
    const char* path = mt_make_pfile("p64m.bin", FILE_SIZE);
    const char* missing = mt_path("missing.bin");

    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.cache_enabled = 0;
    memtier_ctx_t* ctx = mt_init_cfg(&cfg);

    uint8_t A[4], B[4], C[4], D[16], E[16], F[8], small[NSMALL][100];
    memtier_iovec_t iov[N];
    int k;
    memset(A, 0, sizeof A);
    memset(B, 0, sizeof B);
    memset(C, 0, sizeof C);
    memset(D, 0xAA, sizeof D);
    memset(E, 0xAA, sizeof E);
    memset(F, 0xAA, sizeof F);
    memset(small, 0, sizeof small);
    memset(iov, 0, sizeof iov);

    iov[0] = (memtier_iovec_t){0, 4, A, NULL, 0};
    iov[1] = (memtier_iovec_t){4, 4, B, NULL, 0};
    iov[2] = (memtier_iovec_t){4, 4, C, NULL, 0};
    iov[3] = (memtier_iovec_t){100, 0, D, NULL, 0};
    iov[4] = (memtier_iovec_t){FILE_SIZE - 6, 16, E, NULL, 0};
    for (k = 0; k < NSMALL; k++)
        iov[5 + k] = (memtier_iovec_t){(uint64_t)k * 2 * MiB + 17, 100, small[k], NULL, 0};
    iov[5 + NSMALL] = (memtier_iovec_t){0, 8, F, missing, 0};

    int st = memtier_readv(ctx, path, iov, N, MEMTIER_TARGET_CPU);
    MT_CHECK(st == MEMTIER_ERR_EOF, "readv returned %d (%s), want %d (EOF of r4, the lowest "
             "failing index)", st, memtier_strerror(st), MEMTIER_ERR_EOF);

    MT_CHECK(iov[0].result == 4 && mt_find_p_mismatch(A, 0, 4) < 0, "r0 (0,4): result %lld",
             (long long)iov[0].result);
    MT_CHECK(iov[1].result == 4 && mt_find_p_mismatch(B, 4, 4) < 0, "r1 (4,4): result %lld",
             (long long)iov[1].result);
    MT_CHECK(iov[2].result == 4 && mt_find_p_mismatch(C, 4, 4) < 0,
             "r2 (4,4) duplicate: result %lld", (long long)iov[2].result);
    MT_CHECK(iov[3].result == 0, "r3 (100,0): result %lld, want 0", (long long)iov[3].result);
    MT_CHECK(mt_find_not(D, 0xAA, sizeof D) < 0, "r3 (100,0) wrote into its dst");
    MT_CHECK(iov[4].result == MEMTIER_ERR_EOF, "r4 (64MiB-6,16): result %lld, want %d (EOF)",
             (long long)iov[4].result, MEMTIER_ERR_EOF);
    MT_CHECK(mt_find_not(E + 6, 0xAA, sizeof E - 6) < 0, "r4 wrote dst bytes past end of file");
    for (k = 0; k < NSMALL; k++) {
        memtier_iovec_t* v = &iov[5 + k];
        MT_CHECK(v->result == 100, "r%d (%llu,100): result %lld", 5 + k,
                 (unsigned long long)v->offset, (long long)v->result);
        MT_CHECK(mt_find_p_mismatch(small[k], v->offset, 100) < 0, "r%d (%llu,100): bytes wrong",
                 5 + k, (unsigned long long)v->offset);
    }
    MT_CHECK(iov[5 + NSMALL].result == MEMTIER_ERR_NOT_FOUND,
             "r%d (missing file): result %lld, want %d (NOT_FOUND)", 5 + NSMALL,
             (long long)iov[5 + NSMALL].result, MEMTIER_ERR_NOT_FOUND);
    MT_CHECK(mt_find_not(F, 0xAA, sizeof F) < 0, "r%d (missing file) wrote into its dst",
             5 + NSMALL);

    memtier_stats_t s = mt_stats(ctx);
    uint64_t limit = NSMALL * MiB + 4 * 64 * KiB;
    printf("readv: storage_bytes=%llu (limit %llu) coalesced_reads=%llu requests=%llu "
           "readv_calls=%llu errors=%llu\n",
           (unsigned long long)s.storage_bytes, (unsigned long long)limit,
           (unsigned long long)s.coalesced_reads, (unsigned long long)s.requests,
           (unsigned long long)s.readv_calls, (unsigned long long)s.errors);
    MT_CHECK(s.storage_bytes <= limit, "storage_bytes %llu > %llu: gaps were read",
             (unsigned long long)s.storage_bytes, (unsigned long long)limit);
    MT_EQ_U64(s.readv_calls, 1, "one readv call");
    MT_EQ_U64(s.requests, N, "each readv element is a request");
    MT_EQ_U64(s.errors, 1, "one failed call");

    /* NULL iov with n > 0 touches nothing; n == 0 is an empty batch. */
    MT_STATUS(memtier_readv(ctx, path, NULL, 1, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    iov[0].result = 12345;
    MT_STATUS(memtier_readv(NULL, path, iov, 1, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(iov[0].result == 12345, "readv(NULL ctx) touched an element");
    MT_OK(memtier_readv(ctx, path, iov, 0, MEMTIER_TARGET_CPU));

    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
