/*
 * Description: mistakes a new user made (found by following the README), each
 * with the status it must get: a destination pointer to unmapped memory, or
 * below 4096, is MEMTIER_ERR_IO on every path (never a crash or INTERNAL), and in a readv
 * only that element's result, beside cached and past-EOF ones; a readv count near
 * SIZE_MAX is INVALID_ARG; /proc and FIFO paths are NOT_REGULAR; a relative path
 * names the file of the current directory after a chdir; a cache budget above
 * physical memory is INVALID_ARG; a failed memtier_explain reports PATH_NONE.
 */
#include "mt_test.h"

#include <sys/mman.h>

static void check_bad_pointer(memtier_ctx_t* ctx, const char* p) {
    long ps = sysconf(_SC_PAGESIZE);
    void* hole = mmap(NULL, (size_t)ps * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(hole != MAP_FAILED, "mmap");
    munmap(hole, (size_t)ps * 4);
    const uint32_t flags[] = {MEMTIER_READ_DEFAULT, MEMTIER_READ_ONCE, MEMTIER_READ_WILL_REUSE};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        /* twice: the second read of the default path is a cache hit (a copy in Go) */
        for (int rep = 0; rep < 2; rep++) {
            MT_STATUS(memtier_read_ex(ctx, p, 0, 4096, hole, MEMTIER_TARGET_CPU, flags[i]),
                      MEMTIER_ERR_IO);
            MT_CHECK(strcasestr(memtier_last_error(), "bad") != NULL,
                     "flags %u: last_error \"%s\" does not say bad address", flags[i], memtier_last_error());
        }
    }
    /* a pointer below 4096 (a small integer passed as a pointer), on a
     * cache hit too: IO "bad destination address", not INTERNAL */
    void* const low[] = {(void*)16, (void*)4095};
    const char* fresh = mt_make_pfile("low.bin", 64 * 1024); /* first read: a cache fill */
    for (size_t i = 0; i < sizeof low / sizeof low[0]; i++) {
        for (int rep = 0; rep < 2; rep++) {
            MT_STATUS(memtier_read(ctx, rep ? p : fresh, 0, 16, low[i], MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
            MT_CHECK(strstr(memtier_last_error(), "bad destination address") != NULL,
                     "low pointer %p: last_error \"%s\"", low[i], memtier_last_error());
        }
    }
    uint8_t ok[4096];
    MT_OK(memtier_read(ctx, p, 0, sizeof ok, ok, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(ok, 0, sizeof ok) < 0, "bytes after the faults");
}

/* readv elements with a bad destination, beside cache hits: each element
 * gets its own result and the call the status of the lowest failed index
 * (the header's contract; the cache-hit copy once failed the whole call, or
 * gave INTERNAL for a pointer below 4096). */
/* Sizes no caller buffer can have (2^63, 2^50: above the address space Go
 * can view) are INVALID_ARG: for readv that element only, the others read;
 * they were a recovered panic (INTERNAL) with every result left unset. */
static void check_oversize(memtier_ctx_t* ctx) {
    const char* p = mt_make_pfile("big.bin", 128 * 1024);
    static uint8_t d[20 * 4096];
    const uint64_t huge[2] = {UINT64_C(1) << 63, UINT64_C(1) << 50};
    for (int h = 0; h < 2; h++) {
        for (int n = 1; n <= 20; n += 19) { /* one element; 20 (the cache-off C pread plan's size) */
            memtier_iovec_t v[20];
            for (int k = 0; k < n; k++) v[k] = (memtier_iovec_t){(uint64_t)k * 4096, 4096, d + k * 4096, NULL, -99};
            const int bad = n == 1 ? 0 : 7;
            v[bad].size = huge[h];
            MT_STATUS(memtier_readv(ctx, p, v, (size_t)n, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
            for (int k = 0; k < n; k++) {
                if (k == bad)
                    MT_CHECK(v[k].result == MEMTIER_ERR_INVALID_ARG, "oversize element: result %lld",
                             (long long)v[k].result);
                else
                    MT_CHECK(v[k].result == 4096 && mt_find_p_mismatch(d + k * 4096, (uint64_t)k * 4096, 4096) < 0,
                             "element %d beside an oversize one: result %lld", k, (long long)v[k].result);
            }
        }
        MT_STATUS(memtier_read(ctx, p, 0, huge[h], d, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(strstr(memtier_last_error(), "too large") != NULL, "read: last_error \"%s\"", memtier_last_error());
        memtier_request_t* rq = NULL;
        MT_STATUS(memtier_read_async(ctx, p, 0, huge[h], d, MEMTIER_TARGET_CPU, 0, &rq), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(strstr(memtier_last_error(), "too large") != NULL, "read_async: last_error \"%s\"",
                 memtier_last_error());
    }
}

static void check_readv_bad_elements(memtier_ctx_t* ctx) {
    const char* p = mt_make_pfile("rv.bin", 64 * 1024);
    uint8_t d[64];
    MT_OK(memtier_read(ctx, p, 0, sizeof d, d, MEMTIER_TARGET_CPU)); /* fills the DRAM cache */
    long ps = sysconf(_SC_PAGESIZE);
    uint8_t* ro = mmap(NULL, (size_t)ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    MT_CHECK(ro != MAP_FAILED, "mmap");
    for (int rep = 0; rep < 2; rep++) {
        memset(d, 0, sizeof d);
        memtier_iovec_t a[3] = {{0, 4, d, NULL, -99}, {8, 4, ro, NULL, -99}, {16, 4, d + 16, NULL, -99}};
        MT_STATUS(memtier_readv(ctx, p, a, 3, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
        MT_CHECK(a[0].result == 4, "cached element before the bad one: result %lld", (long long)a[0].result);
        MT_CHECK(a[1].result == MEMTIER_ERR_IO, "read-only destination: result %lld", (long long)a[1].result);
        MT_CHECK(a[2].result == 4, "cached element after the bad one: result %lld", (long long)a[2].result);
        MT_CHECK(mt_find_p_mismatch(d, 0, 4) < 0 && mt_find_p_mismatch(d + 16, 16, 4) < 0, "bytes of the good elements");

        memtier_iovec_t b[3] = {{0, 4, d, NULL, -99}, {8 * MiB, 4, d + 8, NULL, -99}, {8, 4, ro, NULL, -99}};
        MT_STATUS(memtier_readv(ctx, p, b, 3, MEMTIER_TARGET_CPU), MEMTIER_ERR_EOF); /* the lowest failed index */
        MT_CHECK(b[0].result == 4, "cached element: result %lld", (long long)b[0].result);
        MT_CHECK(b[1].result == MEMTIER_ERR_EOF, "element past the end: result %lld", (long long)b[1].result);
        MT_CHECK(b[2].result == MEMTIER_ERR_IO, "read-only destination after it: result %lld", (long long)b[2].result);

        memtier_iovec_t c[2] = {{0, 4, d, NULL, -99}, {8, 4, (void*)16, NULL, -99}};
        MT_STATUS(memtier_readv(ctx, p, c, 2, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
        MT_CHECK(strstr(memtier_last_error(), "bad destination address") != NULL, "last_error \"%s\"",
                 memtier_last_error());
        MT_CHECK(c[0].result == 4, "cached element: result %lld", (long long)c[0].result);
        MT_CHECK(c[1].result == MEMTIER_ERR_IO, "destination below 4096: result %lld", (long long)c[1].result);
    }
    /* Not cached (a fresh file, then a context with the cache off): a bad
     * destination in a coalesced group, or in a group of its own, fails only
     * its element; the others get their bytes. */
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.cache_bytes = 0;
    memtier_ctx_t* off = mt_init_cfg(&cfg);
    memtier_ctx_t* const ctxs[2] = {ctx, off};
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "rv_cold%d.bin", k);
        const char* q = mt_make_pfile(name, 300 * 1024);
        static uint8_t d2[2][4096];
        memtier_iovec_t e[3] = {{0, 4096, ro, NULL, -99}, {4096, 4096, d2[0], NULL, -99},
                                {200000, 4096, d2[1], NULL, -99}};
        MT_STATUS(memtier_readv(ctxs[k], q, e, 3, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
        MT_CHECK(e[0].result == MEMTIER_ERR_IO, "ctx %d: read-only destination: result %lld", k, (long long)e[0].result);
        MT_CHECK(e[1].result == 4096 && e[2].result == 4096, "ctx %d: good elements: results %lld %lld", k,
                 (long long)e[1].result, (long long)e[2].result);
        MT_CHECK(mt_find_p_mismatch(d2[0], 4096, 4096) < 0 && mt_find_p_mismatch(d2[1], 200000, 4096) < 0,
                 "ctx %d: bytes of the good elements", k);
    }
    MT_OK(memtier_finalize(off));
    munmap(ro, (size_t)ps);
}

int main(void) {
    mt_begin("test_misuse");
    const char* p = mt_make_pfile("p.bin", 1 * MiB);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);

    check_bad_pointer(ctx, p);
    check_readv_bad_elements(ctx);
    check_oversize(ctx);

    memtier_iovec_t one = {0, 8, NULL, NULL, 0};
    uint8_t b8[8];
    one.dst = b8;
    MT_STATUS(memtier_readv(ctx, p, &one, SIZE_MAX, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);

    uint8_t buf[100];
    if (access("/proc/self/status", R_OK) == 0)
        MT_STATUS(memtier_read(ctx, "/proc/self/status", 0, sizeof buf, buf, MEMTIER_TARGET_CPU),
                  MEMTIER_ERR_NOT_REGULAR);
    const char* fifo = mt_path("fifo");
    MT_CHECK(mkfifo(fifo, 0644) == 0, "mkfifo");
    MT_STATUS(memtier_read(ctx, fifo, 0, 1, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_NOT_REGULAR);
    MT_CHECK(strcmp(memtier_strerror(MEMTIER_ERR_NOT_REGULAR), "unknown status") != 0, "strerror");

    /* relative path after chdir */
    char cwd[4096];
    MT_CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    const char* da = mt_path("a");
    const char* db = mt_path("b");
    MT_CHECK(mkdir(da, 0755) == 0 && mkdir(db, 0755) == 0, "mkdir");
    char fa[4200], fb[4200];
    snprintf(fa, sizeof fa, "%s/f.bin", da);
    snprintf(fb, sizeof fb, "%s/f.bin", db);
    FILE* f = fopen(fa, "wb");
    fputs("AAAAAAAA", f);
    fclose(f);
    f = fopen(fb, "wb");
    fputs("BBBBBBBB", f);
    fclose(f);
    MT_CHECK(chdir(da) == 0, "chdir a");
    MT_OK(memtier_read(ctx, "f.bin", 0, 8, b8, MEMTIER_TARGET_CPU));
    MT_CHECK(b8[0] == 'A', "relative read in a: got %c", b8[0]);
    MT_CHECK(chdir(db) == 0, "chdir b");
    MT_OK(memtier_read(ctx, "f.bin", 0, 8, b8, MEMTIER_TARGET_CPU));
    MT_CHECK(b8[0] == 'B' && b8[7] == 'B', "relative read after chdir to b: got %c (stale file of a)", b8[0]);
    MT_CHECK(chdir(cwd) == 0, "chdir back");
    unlink(fa);
    unlink(fb);
    unlink(fifo);
    rmdir(da);
    rmdir(db);

    /* explain failure: PATH_NONE */
    memtier_decision_t d;
    MT_STATUS(memtier_explain(ctx, mt_path("missing"), 0, 10, buf, MEMTIER_TARGET_CPU, 0, &d),
              MEMTIER_ERR_NOT_FOUND);
    MT_EQ_U64(d.path, MEMTIER_PATH_NONE, "explain failure path");
    MT_OK(memtier_finalize(ctx));

    /* a cache budget above physical memory */
    memtier_config_t cfg;
    const uint64_t budgets[] = {UINT64_MAX, (uint64_t)1 << 62};
    for (size_t i = 0; i < 2; i++) {
        MT_OK(memtier_config_default(&cfg));
        cfg.cache_bytes = budgets[i];
        memtier_ctx_t* c2 = NULL;
        MT_STATUS(memtier_init(&cfg, &c2), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(c2 == NULL, "ctx_out not NULL after a failed init");
        MT_CHECK(strstr(memtier_last_error(), "physical memory") != NULL, "last_error \"%s\"", memtier_last_error());
    }
    mt_pass();
    return 0;
}
