/*
 * Description: asynchronous requests. read_async + request_wait return the
 * bytes (timeout 0 gives TIMEOUT or OK, -1 waits); request_test gives BUSY or
 * the final status; prefetch_async makes the next read a cache hit; finalize
 * while 64 reads of 4 MiB are in flight neither hangs nor crashes, writes no
 * destination after it returns, and later waits give CLOSED.
 */
#include "mt_test.h"

#include <signal.h>

#define FILE_SIZE (64 * MiB)
#define NFLIGHT 64
#define CHUNK (4 * MiB)

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_async: hung for 60 s (finalize or wait never returned)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

int main(void) {
    mt_begin("test_async");
    signal(SIGALRM, on_alarm);
    alarm(60);

    const char* path = mt_make_pfile("p64m.bin", FILE_SIZE);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    uint8_t* buf = mt_alloc(CHUNK);
    memtier_request_t* req = NULL;
    uint64_t n = 0;
    int st;

    /* wait(0) then test() then wait(-1). */
    MT_OK(memtier_read_async(ctx, path, 3 * MiB + 5, CHUNK, buf, MEMTIER_TARGET_CPU, 0, &req));
    MT_CHECK(req != NULL, "read_async returned OK and a NULL request");
    st = memtier_request_wait(req, 0, NULL);
    MT_CHECK(st == MEMTIER_ERR_TIMEOUT || st == MEMTIER_OK, "wait(0) = %d (%s), want TIMEOUT or OK",
             st, memtier_strerror(st));
    st = memtier_request_test(req, NULL);
    MT_CHECK(st == MEMTIER_ERR_BUSY || st == MEMTIER_OK, "test() = %d (%s), want BUSY or OK", st,
             memtier_strerror(st));
    st = memtier_request_wait(req, 1000, NULL); /* 1 us */
    MT_CHECK(st == MEMTIER_ERR_TIMEOUT || st == MEMTIER_OK, "wait(1us) = %d (%s)", st,
             memtier_strerror(st));
    MT_OK(memtier_request_wait(req, -1, &n));
    MT_EQ_U64(n, CHUNK, "wait(-1) nbytes");
    MT_CHECK(mt_find_p_mismatch(buf, 3 * MiB + 5, CHUNK) < 0, "async read bytes wrong");
    /* A completed request keeps answering until released. */
    n = 0;
    MT_OK(memtier_request_test(req, &n));
    MT_EQ_U64(n, CHUNK, "test() after completion nbytes");
    MT_OK(memtier_request_wait(req, 0, NULL));
    MT_OK(memtier_request_release(req));

    /* An async read that fails reports its status through wait. */
    req = NULL;
    st = memtier_read_async(ctx, path, FILE_SIZE - 10, 20, buf, MEMTIER_TARGET_CPU, 0, &req);
    if (st == MEMTIER_OK) {
        MT_STATUS(memtier_request_wait(req, -1, NULL), MEMTIER_ERR_EOF);
        MT_OK(memtier_request_release(req));
    } else {
        MT_CHECK(st == MEMTIER_ERR_EOF, "read_async past EOF = %d (%s)", st, memtier_strerror(st));
    }

    /* prefetch_async, then a read of the range is a cache hit. */
    req = NULL;
    MT_OK(memtier_prefetch_async(ctx, path, 8 * MiB, 1 * MiB, NULL, &req));
    MT_CHECK(req != NULL, "prefetch_async returned OK and a NULL request");
    MT_OK(memtier_request_wait(req, -1, NULL));
    MT_OK(memtier_request_release(req));
    {
        memtier_stats_t before = mt_stats(ctx);
        MT_OK(memtier_read(ctx, path, 8 * MiB + 100, 64 * KiB, buf, MEMTIER_TARGET_CPU));
        memtier_stats_t after = mt_stats(ctx);
        MT_CHECK(mt_find_p_mismatch(buf, 8 * MiB + 100, 64 * KiB) < 0, "bytes after prefetch");
        MT_EQ_U64(after.cache_hit_requests, before.cache_hit_requests + 1,
                  "read after prefetch_async is a cache hit");
        MT_CHECK(after.prefetch_requests >= 1 && after.async_requests >= 2,
                 "prefetch_requests=%llu async_requests=%llu",
                 (unsigned long long)after.prefetch_requests,
                 (unsigned long long)after.async_requests);
    }
    MT_OK(memtier_finalize(ctx));

    /* finalize with 64 x 4 MiB reads in flight (cache off: every byte is I/O). */
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.cache_enabled = 0;
    ctx = mt_init_cfg(&cfg);
    uint8_t* big = mt_alloc((size_t)NFLIGHT * CHUNK);
    memtier_request_t* reqs[NFLIGHT];
    int i;
    for (i = 0; i < NFLIGHT; i++) {
        reqs[i] = NULL;
        MT_OK(memtier_read_async(ctx, path, (uint64_t)(i % 16) * CHUNK, CHUNK,
                                 big + (size_t)i * CHUNK, MEMTIER_TARGET_CPU, 0, &reqs[i]));
    }
    double t0 = mt_now();
    MT_OK(memtier_finalize(ctx));
    printf("finalize with %d reads in flight returned after %.3f s\n", NFLIGHT, mt_now() - t0);

    /* Nothing may write a destination once finalize has returned. */
    memset(big, 0xEE, (size_t)NFLIGHT * CHUNK);
    usleep(200 * 1000);
    MT_CHECK(mt_find_not(big, 0xEE, (uint64_t)NFLIGHT * CHUNK) < 0,
             "a destination was written after memtier_finalize returned");

    for (i = 0; i < NFLIGHT; i++) {
        MT_STATUS(memtier_request_wait(reqs[i], -1, NULL), MEMTIER_ERR_CLOSED);
        MT_STATUS(memtier_request_wait(reqs[i], 0, NULL), MEMTIER_ERR_CLOSED);
        st = memtier_request_release(reqs[i]);
        MT_CHECK(st == MEMTIER_OK || st == MEMTIER_ERR_CLOSED, "release after finalize = %d (%s)",
                 st, memtier_strerror(st));
    }
    free(big);
    free(buf);
    mt_pass();
    return 0;
}
