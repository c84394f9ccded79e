/*
 * Description: memtier_capabilities and the _sized output forms.
 *
 * (1) memtier_capabilities gives exactly the expected MEMTIER_CAP_* bits.
 *     The mode (argv[1], set by ctest with the environment it needs) says
 *     which:
 *       nogpu      libcuda.so.1 / libcufile.so.0 are text files first on
 *                  LD_LIBRARY_PATH (as test_no_gpu): CPU | REMOTE, plus
 *                  IO_URING when this kernel's io_uring_setup works (probed
 *                  here with the raw syscall, as readv's ring is set up);
 *       nouring    the same with MEMTIER_IO_URING=0: IO_URING is clear;
 *       diskcache  the same with MEMTIER_DISK_CACHE_DIR set: DISK_CACHE too;
 *       double     MEMTIER_CUDA_LIBRARY / MEMTIER_CUFILE_LIBRARY are the
 *                  test doubles of tests/gpu_double: CUDA and GDS too;
 *       compat     the doubles with FAKE_CUFILE_COMPAT_MODE=1 (cuFile
 *                  without nvidia-fs): CUDA, GDS and GDS_COMPAT.
 *     Misuse: NULL ctx or caps_out is INVALID_ARG (caps_out 0), a finalized
 *     context is CLOSED.
 * (2) memtier_explain_sized: the full size gives the bytes memtier_explain
 *     gives; a smaller out_size gets exactly that prefix and the bytes past
 *     it keep their canary; out_size 0 is INVALID_ARG with nothing written.
 * (3) memtier_safetensors_get_sized: the same for memtier_tensor_info_t;
 *     a failed call (index out of range) writes nothing.
 */
#include "mt_test.h"

#include <sys/syscall.h>

#define CANARY 0xA5

static int kernel_has_io_uring(void) {
#ifdef SYS_io_uring_setup
    unsigned char params[120]; /* struct io_uring_params */
    memset(params, 0, sizeof params);
    long fd = syscall(SYS_io_uring_setup, 8, params);
    if (fd < 0) return 0;
    close((int)fd);
    return 1;
#else
    return 0;
#endif
}

static void test_capabilities(const char* mode) {
    uint64_t want = MEMTIER_CAP_CPU | MEMTIER_CAP_REMOTE;
    int uring = kernel_has_io_uring();
    if (strcmp(mode, "nouring") != 0 && uring) want |= MEMTIER_CAP_IO_URING;
    if (strcmp(mode, "diskcache") == 0) want |= MEMTIER_CAP_DISK_CACHE;
    if (strcmp(mode, "double") == 0) want |= MEMTIER_CAP_CUDA | MEMTIER_CAP_GDS;
    if (strcmp(mode, "compat") == 0) want |= MEMTIER_CAP_CUDA | MEMTIER_CAP_GDS | MEMTIER_CAP_GDS_COMPAT;

    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    uint64_t caps = ~(uint64_t)0;
    MT_OK(memtier_capabilities(ctx, &caps));
    char info[1024];
    MT_OK(memtier_gpu_info(ctx, info, sizeof info));
    printf("(1) %s: caps 0x%llx, want 0x%llx (kernel io_uring %d)\n%s", mode,
           (unsigned long long)caps, (unsigned long long)want, uring, info);
    MT_EQ_U64(caps, want, "(1) capability bits");
    /* The answer is stable: a second call gives the same bits. */
    uint64_t again = 0;
    MT_OK(memtier_capabilities(ctx, &again));
    MT_EQ_U64(again, caps, "(1) second call");

    caps = 7;
    MT_STATUS(memtier_capabilities(NULL, &caps), MEMTIER_ERR_INVALID_ARG);
    MT_EQ_U64(caps, 0, "(1) caps_out after NULL ctx");
    MT_STATUS(memtier_capabilities(ctx, NULL), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_finalize(ctx));
    caps = 7;
    MT_STATUS(memtier_capabilities(ctx, &caps), MEMTIER_ERR_CLOSED);
    MT_EQ_U64(caps, 0, "(1) caps_out after a finalized ctx");
}

static void test_explain_sized(memtier_ctx_t* ctx) {
    const char* path = mt_make_pfile("explain.bin", 256 * KiB);
    memtier_decision_t full, big;
    memset(&full, CANARY, sizeof full);
    MT_OK(memtier_explain(ctx, path, 0, 64 * KiB, NULL, MEMTIER_TARGET_CPU, 0, &full));
    memset(&big, CANARY, sizeof big);
    MT_OK(memtier_explain_sized(ctx, path, 0, 64 * KiB, NULL, MEMTIER_TARGET_CPU, 0, &big, sizeof big));
    MT_CHECK(memcmp(&full, &big, sizeof full) == 0, "(2) explain_sized(sizeof) differs from explain");
    MT_CHECK(full.reason[0] != '\0', "(2) explain gave no reason");

    /* A caller's struct that ends after tasks, and one that ends inside
     * reason: exactly that prefix, the canary after it. */
    size_t sizes[] = {offsetof(memtier_decision_t, reason), offsetof(memtier_decision_t, reason) + 5, 1};
    size_t k;
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char buf[sizeof(memtier_decision_t) + 16];
        memset(buf, CANARY, sizeof buf);
        MT_OK(memtier_explain_sized(ctx, path, 0, 64 * KiB, NULL, MEMTIER_TARGET_CPU, 0,
                                    (memtier_decision_t*)(void*)buf, sizes[k]));
        MT_CHECK(memcmp(buf, &full, sizes[k]) == 0, "(2) out_size %zu: prefix differs", sizes[k]);
        MT_CHECK(mt_find_not(buf + sizes[k], CANARY, sizeof buf - sizes[k]) == -1,
                 "(2) out_size %zu: a byte past out_size was written", sizes[k]);
    }

    /* A request refused before I/O still shows its decision, also sized. */
    unsigned char buf[sizeof(memtier_decision_t)];
    memset(buf, CANARY, sizeof buf);
    MT_STATUS(memtier_explain_sized(ctx, mt_path("missing.bin"), 0, 1, NULL, MEMTIER_TARGET_CPU, 0,
                                    (memtier_decision_t*)(void*)buf, sizeof(int32_t)),
              MEMTIER_ERR_NOT_FOUND);
    int32_t p;
    memcpy(&p, buf, sizeof p);
    MT_EQ_U64(p, MEMTIER_PATH_NONE, "(2) refused request: path");
    MT_CHECK(mt_find_not(buf + sizeof p, CANARY, sizeof buf - sizeof p) == -1,
             "(2) refused request: a byte past out_size was written");

    memset(buf, CANARY, sizeof buf);
    MT_STATUS(memtier_explain_sized(ctx, path, 0, 1, NULL, MEMTIER_TARGET_CPU, 0,
                                    (memtier_decision_t*)(void*)buf, 0),
              MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(mt_find_not(buf, CANARY, sizeof buf) == -1, "(2) out_size 0 wrote bytes");
    MT_STATUS(memtier_explain_sized(ctx, path, 0, 1, NULL, MEMTIER_TARGET_CPU, 0, NULL, sizeof buf),
              MEMTIER_ERR_INVALID_ARG);
    printf("(2) explain_sized: prefixes exact, nothing written past out_size\n");
}

static void test_safetensors_get_sized(memtier_ctx_t* ctx) {
    const char* path = mt_path("t.safetensors");
    const char* hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
    unsigned char data[24] = {0};
    uint64_t n = strlen(hdr);
    FILE* f = fopen(path, "wb");
    unsigned char len[8];
    int i;
    MT_CHECK(f != NULL, "create %s", path);
    for (i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    MT_CHECK(fwrite(len, 1, 8, f) == 8 && fwrite(hdr, 1, n, f) == n &&
                 fwrite(data, 1, sizeof data, f) == sizeof data && fclose(f) == 0,
             "write %s", path);

    memtier_safetensors_t* st = NULL;
    MT_OK(memtier_safetensors_open(ctx, path, &st));
    memtier_tensor_info_t full, big;
    memset(&full, CANARY, sizeof full);
    MT_OK(memtier_safetensors_get(st, 0, &full));
    memset(&big, CANARY, sizeof big);
    MT_OK(memtier_safetensors_get_sized(st, 0, &big, sizeof big));
    MT_CHECK(memcmp(&full, &big, sizeof full) == 0, "(3) get_sized(sizeof) differs from get");
    MT_EQ_U64(full.nbytes, 24, "(3) nbytes");
    MT_EQ_U64(full.ndim, 2, "(3) ndim");

    size_t sizes[] = {offsetof(memtier_tensor_info_t, offset), offsetof(memtier_tensor_info_t, dtype) + 3, 1};
    size_t k;
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char buf[sizeof(memtier_tensor_info_t) + 16];
        memset(buf, CANARY, sizeof buf);
        MT_OK(memtier_safetensors_get_sized(st, 0, (memtier_tensor_info_t*)(void*)buf, sizes[k]));
        MT_CHECK(memcmp(buf, &full, sizes[k]) == 0, "(3) info_size %zu: prefix differs", sizes[k]);
        MT_CHECK(mt_find_not(buf + sizes[k], CANARY, sizeof buf - sizes[k]) == -1,
                 "(3) info_size %zu: a byte past info_size was written", sizes[k]);
    }
    unsigned char buf[sizeof(memtier_tensor_info_t)];
    memset(buf, CANARY, sizeof buf);
    MT_STATUS(memtier_safetensors_get_sized(st, 1, (memtier_tensor_info_t*)(void*)buf, sizeof buf),
              MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(mt_find_not(buf, CANARY, sizeof buf) == -1, "(3) a failed get wrote bytes");
    MT_STATUS(memtier_safetensors_get_sized(st, 0, (memtier_tensor_info_t*)(void*)buf, 0),
              MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(mt_find_not(buf, CANARY, sizeof buf) == -1, "(3) info_size 0 wrote bytes");
    MT_OK(memtier_safetensors_close(st));
    printf("(3) safetensors_get_sized: prefixes exact, nothing written past info_size\n");
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "nogpu";
    mt_begin("test_capabilities");
    test_capabilities(mode);
    if (strcmp(mode, "nogpu") == 0) {
        memtier_ctx_t* ctx = mt_init_cfg(NULL);
        test_explain_sized(ctx);
        test_safetensors_get_sized(ctx);
        MT_OK(memtier_finalize(ctx));
    }
    mt_pass();
    return 0;
}
