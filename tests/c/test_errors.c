/*
 * Description: every error status is reachable on purpose and is exactly the
 * one memtier.h documents (INVALID_ARG, EOF, NOT_FOUND, IS_DIR, PERMISSION,
 * CLOSED, UNSUPPORTED); memtier_strerror names each code distinctly;
 * memtier_last_error names the path and the errno text; stats.errors counts
 * exactly the failed calls made on the context; nothing crashes.
 */
#include "mt_test.h"

#include "../../examples/common/mt_generated.h" /* MT_STATUS_LIST */

#include <strings.h>

static memtier_ctx_t* ctx;
static uint64_t failed_calls; /* failed calls made on ctx */

/* A call on ctx that must fail with want and be counted in stats.errors. */
#define EXPECT_FAIL(call, want)                                                        \
    do {                                                                               \
        MT_STATUS(call, want);                                                         \
        failed_calls++;                                                                \
        check_counted(#call);                                                          \
    } while (0)

static int uncounted; /* failed calls stats.errors missed */

/* stats.errors must equal the failed calls made so far; name the one it missed. */
static void check_counted(const char* call) {
    memtier_stats_t st;
    MT_OK(memtier_stats(ctx, &st)); /* a success: last_error keeps the failure */
    if (st.errors + (uint64_t)uncounted != failed_calls) {
        fprintf(stderr, "MISMATCH: stats.errors did not count the failure of %s "
                        "(errors %llu after %llu failed calls)\n",
                call, (unsigned long long)st.errors, (unsigned long long)failed_calls);
        uncounted = (int)(failed_calls - st.errors);
    }
}

static void expect_detail(const char* what, const char* needle) {
    const char* e = memtier_last_error();
    MT_CHECK(e != NULL, "%s: memtier_last_error() is NULL", what);
    MT_CHECK(strcasestr(e, needle) != NULL, "%s: last_error \"%s\" does not contain \"%s\"",
             what, e, needle);
}

/* Every memtier_status of the header, from the list tools/mtgen generates
 * from it (mt_generated.h): a status added to the header is checked here
 * with no edit of this file. */
#define MT_STATUS_VALUE(name) name,
static const int header_statuses[] = {MT_STATUS_LIST(MT_STATUS_VALUE)};
#undef MT_STATUS_VALUE

static void check_strerror(void) {
    const size_t n = sizeof header_statuses / sizeof header_statuses[0];
    int lowest = 0;
    size_t i, k;
    MT_CHECK(header_statuses[0] == MEMTIER_OK, "MT_STATUS_LIST starts with %d", header_statuses[0]);
    for (i = 0; i < n; i++) {
        const int code = header_statuses[i];
        const char* s = memtier_strerror(code);
        MT_CHECK(s != NULL && s[0] != '\0', "memtier_strerror(%d) is empty", code);
        MT_CHECK(strcmp(s, "unknown status") != 0, "memtier_strerror(%d) is \"unknown status\"",
                 code);
        for (k = 0; k < i; k++)
            MT_CHECK(strcmp(memtier_strerror(header_statuses[k]), s) != 0,
                     "memtier_strerror(%d) == memtier_strerror(%d) = \"%s\"", code,
                     header_statuses[k], s);
        if (code < lowest)
            lowest = code;
    }
    MT_CHECK(lowest <= MEMTIER_ERR_INTERRUPTED, "MT_STATUS_LIST (%zu statuses) stops at %d", n, lowest);
    /* one below the lowest status is not a status (values are pinned, new
     * ones go below) */
    const int unknown[] = {1, 7, lowest - 1, -99, 1000, -2147483647 - 1};
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        MT_CHECK(strcmp(memtier_strerror(unknown[i]), "unknown status") == 0,
                 "memtier_strerror(%d) = \"%s\", want \"unknown status\"", unknown[i],
                 memtier_strerror(unknown[i]));
}

int main(void) {
    mt_begin("test_errors");
    check_strerror();

    const char* pfile = mt_make_pfile("p100.bin", 100);
    const char* missing = mt_path("does_not_exist.bin");
    const char* dir = mt_tmpdir();
    uint8_t buf[256];

    /* NULL handles and pointers without a context. */
    MT_STATUS(memtier_init(NULL, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_config_default(NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_read(NULL, pfile, 0, 4, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_stats(NULL, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_request_wait(NULL, 0, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_request_test(NULL, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_request_release(NULL));
    {
        memtier_request_t* req = (memtier_request_t*)buf; /* any non-NULL value */
        MT_STATUS(memtier_prefetch_async(NULL, pfile, 0, 4, NULL, &req), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(req == NULL, "failed memtier_prefetch_async left *req_out non-NULL");
    }
    MT_OK(memtier_finalize(NULL));

    /* config struct_size smaller than its own size field. */
    {
        memtier_config_t cfg;
        memtier_ctx_t* bad = (memtier_ctx_t*)&cfg; /* any non-NULL value */
        MT_OK(memtier_config_default(&cfg));
        cfg.struct_size = 2;
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(bad == NULL, "failed memtier_init left *ctx_out non-NULL");
    }

    ctx = mt_init_cfg(NULL);

    /* INVALID_ARG: NULL path and dst, overflow, flags, readv. */
    EXPECT_FAIL(memtier_read(ctx, NULL, 0, 4, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    EXPECT_FAIL(memtier_read(ctx, pfile, 0, 4, NULL, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    EXPECT_FAIL(memtier_read(ctx, pfile, UINT64_MAX - 10, 100, buf, MEMTIER_TARGET_CPU),
                MEMTIER_ERR_INVALID_ARG);
    EXPECT_FAIL(memtier_read(ctx, pfile, UINT64_MAX, 1, buf, MEMTIER_TARGET_CPU),
                MEMTIER_ERR_INVALID_ARG);
    EXPECT_FAIL(memtier_read_ex(ctx, pfile, 0, 4, buf, MEMTIER_TARGET_CPU, 0x100u),
                MEMTIER_ERR_INVALID_ARG);
    EXPECT_FAIL(memtier_read_ex(ctx, pfile, 0, 4, buf, MEMTIER_TARGET_CPU, 0x80000000u),
                MEMTIER_ERR_INVALID_ARG);
    EXPECT_FAIL(memtier_readv(ctx, pfile, NULL, 3, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    /* size 0 with a NULL dst is fine. */
    MT_OK(memtier_read(ctx, pfile, 0, 0, NULL, MEMTIER_TARGET_CPU));

    /* EOF: offset past end of file. */
    EXPECT_FAIL(memtier_read(ctx, pfile, 1000, 1, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_EOF);
    expect_detail("EOF", pfile);

    /* NOT_FOUND, with the path and the errno text. */
    EXPECT_FAIL(memtier_read(ctx, missing, 0, 4, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_NOT_FOUND);
    expect_detail("NOT_FOUND", missing);
    expect_detail("NOT_FOUND", "no such file or directory");
    EXPECT_FAIL(memtier_prefetch(ctx, missing, 0, 0, NULL), MEMTIER_ERR_NOT_FOUND);

    /* IS_DIR. */
    EXPECT_FAIL(memtier_read(ctx, dir, 0, 4, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_IS_DIR);
    expect_detail("IS_DIR", dir);

    /* PERMISSION (root reads anything, so the check needs another user). */
    if (geteuid() == 0) {
        printf("note: running as root, PERMISSION check skipped (chmod 000 does not stop root)\n");
    } else {
        const char* locked = mt_make_pfile("locked.bin", 100);
        MT_CHECK(chmod(locked, 0) == 0, "chmod 000 %s: %s", locked, strerror(errno));
        EXPECT_FAIL(memtier_read(ctx, locked, 0, 4, buf, MEMTIER_TARGET_CPU),
                    MEMTIER_ERR_PERMISSION);
        expect_detail("PERMISSION", locked);
        chmod(locked, 0644);
    }

    /* The good calls in between did not count; every failure did. */
    {
        memtier_stats_t st = mt_stats(ctx);
        printf("stats.errors = %llu after %llu failed calls\n", (unsigned long long)st.errors,
               (unsigned long long)failed_calls);
        MT_EQ_U64(st.errors, failed_calls, "stats.errors counts failed calls on ctx");
    }
    MT_STATUS(memtier_stats(ctx, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_get_config(ctx, NULL, sizeof(memtier_config_t)), MEMTIER_ERR_INVALID_ARG);

    /* A released request gives CLOSED. */
    {
        memtier_request_t* req = NULL;
        uint64_t n = 0;
        MT_OK(memtier_read_async(ctx, pfile, 0, 64, buf, MEMTIER_TARGET_CPU, 0, &req));
        MT_CHECK(req != NULL, "read_async returned OK and a NULL request");
        MT_OK(memtier_request_wait(req, -1, &n));
        MT_EQ_U64(n, 64, "async bytes");
        MT_OK(memtier_request_release(req));
        MT_STATUS(memtier_request_wait(req, 0, NULL), MEMTIER_ERR_CLOSED);
        MT_STATUS(memtier_request_test(req, NULL), MEMTIER_ERR_CLOSED);
        MT_STATUS(memtier_request_release(req), MEMTIER_ERR_CLOSED);
    }

    /* After finalize: CLOSED for every use, and for a second finalize. */
    MT_OK(memtier_finalize(ctx));
    MT_STATUS(memtier_read(ctx, pfile, 0, 4, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_prefetch(ctx, pfile, 0, 4, NULL), MEMTIER_ERR_CLOSED);
    {
        memtier_stats_t st;
        memtier_config_t cfg;
        MT_STATUS(memtier_stats(ctx, &st), MEMTIER_ERR_CLOSED);
        MT_STATUS(memtier_get_config(ctx, &cfg, sizeof cfg), MEMTIER_ERR_CLOSED);
        MT_STATUS(memtier_drop_cache(ctx, NULL), MEMTIER_ERR_CLOSED);
    }
    MT_STATUS(memtier_finalize(ctx), MEMTIER_ERR_CLOSED);

    mt_pass();
    return 0;
}
