/*
 * Description: field case B20 (CPU side; tests/field_cases.md), GPU requested on a machine without
 * one. ctest sets LD_LIBRARY_PATH to a build-tree directory whose
 * libcufile.so.0 and libcuda.so.1 are text files, so any dlopen of them fails.
 * memtier_init succeeds and a CPU read is byte-correct; a MEMTIER_TARGET_CUDA
 * read returns MEMTIER_ERR_UNSUPPORTED with a last_error mentioning "CUDA";
 * memtier_prefetch with MEMTIER_PREFETCH_TO_HBM returns UNSUPPORTED;
 * memtier_explain for a CUDA target returns UNSUPPORTED and fills out->path =
 * MEMTIER_PATH_NONE with a non-empty reason; CPU reads still work afterwards;
 * stats gds_requests and staged_requests stay 0; memtier_gpu_info says the
 * GPU target is unavailable and why (B20 d); readv, load_chunks and
 * load_tensor to CUDA are UNSUPPORTED too; memtier_init with gds_mode
 * REQUIRED fails with UNSUPPORTED (B20 c) and a later AUTO context reads
 * correctly. Nothing aborts.
 */
#include "mt_test.h"

#include <dlfcn.h>
#include <strings.h>

#define FILE_SIZE (1 * MiB)

/* The fake libraries must be in place, or the test proves nothing. */
static void check_fake_libs(void) {
    static const char* names[] = {"libcufile.so.0", "libcuda.so.1"};
    const char* llp = getenv("LD_LIBRARY_PATH");
    char first[1024];
    size_t i;
    MT_CHECK(llp != NULL && llp[0] != '\0', "LD_LIBRARY_PATH is not set (ctest ENVIRONMENT)");
    snprintf(first, sizeof first, "%s", llp);
    first[strcspn(first, ":")] = '\0';
    printf("LD_LIBRARY_PATH=%s\n", llp);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[1200], head[4] = {0};
        int fd;
        snprintf(p, sizeof p, "%s/%s", first, names[i]);
        fd = open(p, O_RDONLY);
        MT_CHECK(fd >= 0, "fake library %s: %s", p, strerror(errno));
        MT_CHECK(read(fd, head, 4) == 4, "read %s", p);
        close(fd);
        MT_CHECK(memcmp(head, "\177ELF", 4) != 0, "%s is an ELF file, want a text file", p);
        /* The loader must refuse it (this is what MemTier would see). */
        {
            void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
            printf("dlopen(%s): %s\n", names[i], h ? "loaded (a real library elsewhere?)" : dlerror());
            if (h) dlclose(h);
        }
    }
}

int main(void) {
    mt_begin("test_no_gpu");
    check_fake_libs();

    const char* path = mt_make_pfile("p1m.bin", FILE_SIZE);
    uint8_t* buf = mt_alloc(64 * KiB);
    memtier_ctx_t* ctx = mt_init_cfg(NULL);

    /* A CPU read works. */
    MT_OK(memtier_read(ctx, path, 1000, 64 * KiB, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 1000, 64 * KiB) < 0, "CPU read bytes differ at %lld",
             (long long)mt_find_p_mismatch(buf, 1000, 64 * KiB));

    /* CUDA target: UNSUPPORTED, naming CUDA. buf is host memory, as a caller
     * confused about the device would pass; it must not be written. */
    memset(buf, 0x5A, 4096);
    MT_STATUS(memtier_read(ctx, path, 0, 4096, buf, MEMTIER_TARGET_CUDA), MEMTIER_ERR_UNSUPPORTED);
    printf("CUDA read: last_error \"%s\"\n", memtier_last_error());
    MT_CHECK(strcasestr(memtier_last_error(), "CUDA") != NULL,
             "last_error after a CUDA-target read \"%s\" does not mention CUDA",
             memtier_last_error());
    MT_CHECK(mt_find_not(buf, 0x5A, 4096) < 0, "a refused CUDA read wrote to dst");

    /* Prefetch to HBM: UNSUPPORTED. */
    {
        memtier_prefetch_opts_t opts = {sizeof(memtier_prefetch_opts_t), MEMTIER_PREFETCH_TO_HBM};
        MT_STATUS(memtier_prefetch(ctx, path, 0, 0, &opts), MEMTIER_ERR_UNSUPPORTED);
        printf("prefetch TO_HBM: last_error \"%s\"\n", memtier_last_error());
    }

    /* explain for a CUDA target: UNSUPPORTED, path NONE, a reason. */
    {
        memtier_decision_t d;
        memset(&d, 0xEE, sizeof d);
        d.reason[0] = '\0';
        MT_STATUS(memtier_explain(ctx, path, 0, 4096, buf, MEMTIER_TARGET_CUDA, 0, &d),
                  MEMTIER_ERR_UNSUPPORTED);
        MT_CHECK(memchr(d.reason, '\0', sizeof d.reason) != NULL, "explain: reason is not NUL-terminated");
        printf("explain CUDA: path %d (%s), reason \"%s\"\n", (int)d.path,
               memtier_path_name(d.path), d.reason);
        MT_CHECK(d.path == MEMTIER_PATH_NONE, "explain CUDA: out->path = %d (%s), want %d (none)",
                 (int)d.path, memtier_path_name(d.path), MEMTIER_PATH_NONE);
        MT_CHECK(d.reason[0] != '\0', "explain CUDA: out->reason is empty");
    }

    /* CPU reads still work, from storage and from the cache. */
    MT_OK(memtier_read(ctx, path, 1000, 64 * KiB, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 1000, 64 * KiB) < 0, "CPU read (cached) bytes differ");
    MT_OK(memtier_read(ctx, path, FILE_SIZE - 5000, 5000, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, FILE_SIZE - 5000, 5000) < 0, "CPU read (tail) bytes differ");

    {
        memtier_stats_t st = mt_stats(ctx);
        printf("stats: requests %llu errors %llu gds_requests %llu staged_requests %llu\n",
               (unsigned long long)st.requests, (unsigned long long)st.errors,
               (unsigned long long)st.gds_requests, (unsigned long long)st.staged_requests);
        MT_EQ_U64(st.gds_requests, 0, "gds_requests on a machine without GPU");
        MT_EQ_U64(st.gds_bytes, 0, "gds_bytes on a machine without GPU");
        MT_EQ_U64(st.staged_requests, 0, "staged_requests on a machine without GPU");
        MT_EQ_U64(st.staged_bytes, 0, "staged_bytes on a machine without GPU");
    }

    /* (d) B20: why the GPU side is inactive, as text; no GDS fallback counted. */
    {
        char info[2048];
        memtier_stats_t st = mt_stats(ctx);
        MT_OK(memtier_gpu_info(ctx, info, sizeof info));
        printf("memtier_gpu_info:\n%s", info);
        MT_CHECK(strstr(info, "cuda: GPU target unavailable") != NULL,
                 "gpu_info does not say the GPU target is unavailable");
        MT_CHECK(strstr(info, "gds: GDS") != NULL, "gpu_info has no GDS line");
        MT_EQ_U64(st.gds_fallbacks, 0, "gds_fallbacks on a machine without GPU");
        MT_EQ_U64(st.h2d_bytes, 0, "h2d_bytes on a machine without GPU");
        MT_EQ_U64(st.hbm_resident_bytes, 0, "hbm_resident_bytes on a machine without GPU");
    }
    /* Other entries with a CUDA target: UNSUPPORTED, nothing written. */
    {
        memtier_iovec_t v = {0, 4096, buf, NULL, 0};
        memtier_chunk_t ch = {0, 4096, buf, 0};
        memset(buf, 0x5A, 4096);
        MT_STATUS(memtier_readv(ctx, path, &v, 1, MEMTIER_TARGET_CUDA), MEMTIER_ERR_UNSUPPORTED);
        MT_STATUS(memtier_load_chunks(ctx, path, &ch, 1, MEMTIER_TARGET_CUDA), MEMTIER_ERR_UNSUPPORTED);
        MT_STATUS(memtier_load_tensor(ctx, path, 0, 4096, buf, MEMTIER_TARGET_CUDA), MEMTIER_ERR_UNSUPPORTED);
        MT_CHECK(mt_find_not(buf, 0x5A, 4096) < 0, "a refused CUDA load wrote to dst");
    }
    MT_OK(memtier_finalize(ctx));

    /* (c) B20: gds_mode REQUIRED: init fails cleanly (no GDS here), nothing aborts. */
    {
        memtier_config_t cfg;
        memtier_ctx_t* bad = (memtier_ctx_t*)&cfg;
        MT_OK(memtier_config_default(&cfg));
        cfg.gds_mode = MEMTIER_GDS_REQUIRED;
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_UNSUPPORTED);
        MT_CHECK(bad == NULL, "failed init left *ctx_out non-NULL");
        printf("init with gds_mode REQUIRED: %s\n", memtier_last_error());
        /* AUTO still works, and so do CPU reads. */
        ctx = mt_init_cfg(NULL);
        MT_OK(memtier_read(ctx, path, 7, 4096, buf, MEMTIER_TARGET_CPU));
        MT_CHECK(mt_find_p_mismatch(buf, 7, 4096) < 0, "CPU read after the failed init");
        MT_OK(memtier_finalize(ctx));
    }
    free(buf);
    mt_pass();
    return 0;
}
