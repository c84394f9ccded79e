/*
 * Description: a Go panic never aborts the host. With MEMTIER_TEST_HOOKS=1 in
 * the environment at process start ("hooks"): a panic in the exported call
 * returns MEMTIER_ERR_INTERNAL, a panic in a read's worker makes that 64 MiB
 * read return MEMTIER_ERR_INTERNAL, and the process and context keep working
 * (the next read has correct bytes). Without the variable ("nohooks"),
 * memtier_debug_hook returns MEMTIER_ERR_UNSUPPORTED.
 * Usage: test_panic hooks|nohooks (ctest sets the environment; Go reads it
 * when the library loads, so setenv() in main would be too late).
 */
#define MEMTIER_TESTING_API /* memtier_debug_hook */
#include "mt_test.h"

#define SIZE (64 * MiB)

int main(int argc, char** argv) {
    mt_begin("test_panic");
    const char* env = getenv("MEMTIER_TEST_HOOKS");
    int hooks = env != NULL && strcmp(env, "1") == 0;
    if (argc != 2 || (strcmp(argv[1], "hooks") != 0 && strcmp(argv[1], "nohooks") != 0))
        MT_FAIL("usage: test_panic hooks|nohooks");
    if ((strcmp(argv[1], "hooks") == 0) != hooks)
        mt_skip("MEMTIER_TEST_HOOKS does not match the mode; run through ctest");

    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    const char* path = mt_make_pfile("p64m.bin", SIZE);
    uint8_t* buf = mt_alloc(SIZE);

    if (!hooks) {
        MT_STATUS(memtier_debug_hook(ctx, MEMTIER_DEBUG_PANIC_EXPORT), MEMTIER_ERR_UNSUPPORTED);
        MT_STATUS(memtier_debug_hook(ctx, MEMTIER_DEBUG_PANIC_WORKER), MEMTIER_ERR_UNSUPPORTED);
        MT_OK(memtier_read(ctx, path, 0, SIZE, buf, MEMTIER_TARGET_CPU));
        MT_OK(memtier_finalize(ctx));
        free(buf);
        mt_pass();
        return 0;
    }

    /* Panic inside the exported function. */
    MT_STATUS(memtier_debug_hook(ctx, MEMTIER_DEBUG_PANIC_EXPORT), MEMTIER_ERR_INTERNAL);
    MT_CHECK(memtier_last_error()[0] != '\0', "no last_error text after INTERNAL");
    printf("export panic -> INTERNAL: %s\n", memtier_last_error());

    /* Panic inside a worker of the next read. */
    MT_OK(memtier_debug_hook(ctx, MEMTIER_DEBUG_PANIC_WORKER));
    MT_STATUS(memtier_read(ctx, path, 0, SIZE, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INTERNAL);
    printf("worker panic -> INTERNAL: %s\n", memtier_last_error());

    /* The context still works. */
    memset(buf, 0, SIZE);
    MT_OK(memtier_read(ctx, path, 0, SIZE, buf, MEMTIER_TARGET_CPU));
    int64_t bad = mt_find_p_mismatch(buf, 0, SIZE);
    MT_CHECK(bad < 0, "read after the worker panic: byte %lld wrong", (long long)bad);
    MT_OK(memtier_read(ctx, path, 12345, 4096, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 12345, 4096) < 0, "small read after panics: bytes");

    memtier_stats_t st = mt_stats(ctx);
    MT_EQ_U64(st.errors, 2, "the two INTERNAL failures are counted");
    MT_OK(memtier_finalize(ctx));
    free(buf);
    mt_pass();
    return 0;
}
