/*
 * Description: one context shared by 8 threads doing 1000 random reads each
 * (up to 256 KiB, some hinted WILL_REUSE) returns exact bytes while the cache
 * never holds more than its 4 MiB budget; memtier_last_error is per thread
 * (two threads failing on different paths 2000 times each never see the
 * other's message); stats count the bytes and the errors exactly.
 */
#include "mt_test.h"

#include <pthread.h>

#define NTHREADS 8
#define READS 1000
#define FILE_SIZE (64 * MiB)
#define MAX_READ (256 * KiB)
#define BUDGET (4 * MiB)
#define ERR_LOOPS 2000

static memtier_ctx_t* ctx;
static const char* path;
static const uint8_t* ref;

struct reader {
    int id;
    uint64_t bytes;
    char failure[512];
};

static void* reader_main(void* arg) {
    struct reader* r = arg;
    uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(r->id + 1);
    uint8_t* dst = mt_alloc(MAX_READ + 1);
    int i;
    for (i = 1; i <= READS; i++) {
        uint64_t size = 1 + mt_rand(&seed) % MAX_READ;
        uint64_t off = mt_rand(&seed) % (FILE_SIZE - size + 1);
        uint32_t flags = (mt_rand(&seed) % 4 == 0) ? MEMTIER_READ_WILL_REUSE : 0;
        uint8_t* d = dst + (i & 1); /* alternate aligned / unaligned dst */
        int st = memtier_read_ex(ctx, path, off, size, d, MEMTIER_TARGET_CPU, flags);
        if (st != MEMTIER_OK) {
            snprintf(r->failure, sizeof r->failure, "thread %d read %d (off=%llu size=%llu) = %d (%s): %s",
                     r->id, i, (unsigned long long)off, (unsigned long long)size, st,
                     memtier_strerror(st), memtier_last_error());
            break;
        }
        if (memcmp(d, ref + off, size) != 0) {
            snprintf(r->failure, sizeof r->failure, "thread %d read %d (off=%llu size=%llu): bytes differ",
                     r->id, i, (unsigned long long)off, (unsigned long long)size);
            break;
        }
        r->bytes += size;
        if (i % 100 == 0) {
            memtier_stats_t st;
            if (memtier_stats(ctx, &st) != MEMTIER_OK) {
                snprintf(r->failure, sizeof r->failure, "thread %d: memtier_stats failed", r->id);
                break;
            }
            if (st.cache_resident_bytes > st.cache_budget_bytes || st.cache_budget_bytes != BUDGET) {
                snprintf(r->failure, sizeof r->failure,
                         "thread %d after %d reads: cache_resident_bytes %llu, budget %llu (want <= %llu)",
                         r->id, i, (unsigned long long)st.cache_resident_bytes,
                         (unsigned long long)st.cache_budget_bytes, (unsigned long long)BUDGET);
                break;
            }
        }
    }
    free(dst);
    return NULL;
}

struct failer {
    const char* mine;
    const char* other;
    int mismatches;
    int wrong_status;
};

static void* failer_main(void* arg) {
    struct failer* f = arg;
    uint8_t b[8];
    int i;
    for (i = 0; i < ERR_LOOPS; i++) {
        int st = memtier_read(ctx, f->mine, 0, sizeof b, b, MEMTIER_TARGET_CPU);
        if (st != MEMTIER_ERR_NOT_FOUND) f->wrong_status++;
        const char* e = memtier_last_error();
        if (e == NULL || strstr(e, f->mine) == NULL || strstr(e, f->other) != NULL)
            f->mismatches++;
    }
    return NULL;
}

int main(void) {
    mt_begin("test_threads");
    uint8_t* whole = mt_alloc(FILE_SIZE);
    mt_fill_p(whole, 0, FILE_SIZE);
    ref = whole;
    path = mt_make_pfile("p64m.bin", FILE_SIZE);

    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.cache_bytes = BUDGET;
    ctx = mt_init_cfg(&cfg);

    pthread_t th[NTHREADS];
    struct reader rd[NTHREADS];
    int i;
    for (i = 0; i < NTHREADS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].id = i;
        MT_CHECK(pthread_create(&th[i], NULL, reader_main, &rd[i]) == 0, "pthread_create");
    }
    uint64_t bytes = 0;
    for (i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        MT_CHECK(rd[i].failure[0] == '\0', "%s", rd[i].failure);
        bytes += rd[i].bytes;
    }

    memtier_stats_t st = mt_stats(ctx);
    printf("%d threads x %d reads: bytes=%llu cache_hit_requests=%llu cache_evictions=%llu "
           "resident=%llu budget=%llu\n",
           NTHREADS, READS, (unsigned long long)st.bytes,
           (unsigned long long)st.cache_hit_requests, (unsigned long long)st.cache_evictions,
           (unsigned long long)st.cache_resident_bytes, (unsigned long long)st.cache_budget_bytes);
    MT_EQ_U64(st.requests, (uint64_t)NTHREADS * READS, "reads counted");
    MT_EQ_U64(st.bytes, bytes, "bytes delivered");
    MT_EQ_U64(st.errors, 0, "no errors yet");
    MT_CHECK(st.cache_resident_bytes <= BUDGET, "resident %llu > budget",
             (unsigned long long)st.cache_resident_bytes);

    /* Per-thread last_error. */
    struct failer fa = {mt_path("missing_alpha.bin"), mt_path("missing_beta.bin"), 0, 0};
    struct failer fb = {fa.other, fa.mine, 0, 0};
    pthread_t ta, tb;
    MT_CHECK(pthread_create(&ta, NULL, failer_main, &fa) == 0, "pthread_create");
    MT_CHECK(pthread_create(&tb, NULL, failer_main, &fb) == 0, "pthread_create");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("last_error: %d + %d mismatched messages in 2 x %d failures\n", fa.mismatches,
           fb.mismatches, ERR_LOOPS);
    MT_CHECK(fa.wrong_status == 0 && fb.wrong_status == 0,
             "%d + %d reads of a missing file did not return NOT_FOUND", fa.wrong_status,
             fb.wrong_status);
    MT_CHECK(fa.mismatches == 0 && fb.mismatches == 0,
             "%d + %d last_error messages named the wrong path", fa.mismatches, fb.mismatches);
    st = mt_stats(ctx);
    MT_EQ_U64(st.errors, 2 * ERR_LOOPS, "failed reads counted");

    MT_OK(memtier_finalize(ctx));
    free(whole);
    mt_pass();
    return 0;
}
