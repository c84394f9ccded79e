/*
 * Description: MEMTIER_TARGET_CUDA through GPUDirect Storage (cuFile), its
 * policy and its fallbacks (field case B20, tests/field_cases.md). ctest runs it against the test
 * doubles of tests/gpu_double (MEMTIER_CUDA_LIBRARY, MEMTIER_CUFILE_LIBRARY);
 * scripts/gpu_check.sh runs the "auto" mode against a real driver, where the
 * checks that need the doubles' switches are skipped. Every read is copied
 * back and compared with the file. Modes (argv[1]):
 *   auto      gds_mode AUTO: an aligned 8 MiB read goes GDS (gds_requests,
 *             cuFileRead bytes), a small or unaligned one staged; explain says
 *             which and why; partial cuFileReads still give every byte; a
 *             failing cuFileRead falls back staged (gds_fallbacks 1) and the
 *             file is not tried again (no further cuFileRead, no further
 *             fallback count); a file system cuFile refuses
 *             (FAKE_CUFILE_UNSUPPORTED_FS) falls back with reason
 *             fs_unsupported shown by memtier_gpu_info; a rewritten file is a
 *             new version and is tried with GDS again. When memtier_gpu_info
 *             says "gds_path: compat" (cuFile without nvidia-fs; ctest's
 *             test_gpu_gds_compat sets FAKE_CUFILE_COMPAT_MODE=1), the aligned
 *             read is staged instead, with no fallback counted, explain says
 *             why, and a gds_mode REQUIRED context reads it with cuFile.
 *   required  MEMTIER_GDS_MODE=required: init succeeds (the driver opens),
 *             even a small unaligned read goes GDS, and a file system cuFile
 *             refuses is MEMTIER_ERR_UNSUPPORTED, not a fallback.
 *   nodriver  MEMTIER_GDS_MODE=required and cuFileDriverOpen failing: init
 *             fails with MEMTIER_ERR_UNSUPPORTED (B20 c); with gds_mode AUTO
 *             from code, a GDS-sized read falls back staged once (reason
 *             gds_driver_open) and later reads go staged uncounted.
 *   nocufile  MEMTIER_CUFILE_LIBRARY names a missing file: reads fall back
 *             staged (reason cufile_unavailable), bytes correct, counted once.
 */
#include "mt_gpu.h"

#define FILE_SIZE (32 * MiB)

static mt_cu_ptr dev;
static uint8_t* host;

static memtier_ctx_t* ctx_mode(int mode) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    cfg.gds_mode = mode;
    return mt_init_cfg(&cfg);
}

/* The stats one checked read into dev moved. */
static memtier_stats_t read_delta(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t n) {
    return mt_gpu_read_delta(ctx, path, off, n, dev, host);
}

static void explain(memtier_ctx_t* ctx, const char* path, uint64_t off, uint64_t n, int want,
                    const char* want_reason) {
    memtier_decision_t d;
    int rc = memtier_explain(ctx, path, off, n, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA, 0, &d);
    printf("explain (%llu, %llu): rc %d path %s reason \"%s\"\n", (unsigned long long)off,
           (unsigned long long)n, rc, memtier_path_name(d.path), d.reason);
    MT_CHECK(d.path == want, "explain path %s, want %s", memtier_path_name(d.path), memtier_path_name(want));
    MT_CHECK(strstr(d.reason, want_reason) != NULL, "explain reason lacks \"%s\"", want_reason);
}

static void run_auto(void) {
    const char* p1 = mt_make_pfile("g1.bin", FILE_SIZE);
    memtier_ctx_t* ctx = ctx_mode(MEMTIER_GDS_AUTO);
    memtier_stats_t d;
    char info[2048];

    explain(ctx, p1, 0, 8 * MiB, MEMTIER_PATH_GDS, "not probed yet");
    d = read_delta(ctx, p1, 0, 8 * MiB);
    printf("aligned 8 MiB: gds %llu/%llu staged %llu fallbacks %llu\n",
           (unsigned long long)d.gds_requests, (unsigned long long)d.gds_bytes,
           (unsigned long long)d.staged_bytes, (unsigned long long)d.gds_fallbacks);
    MT_OK(memtier_gpu_info(ctx, info, sizeof info));
    printf("memtier_gpu_info:\n%s", info);
    if (strstr(info, "gds_path: compat") != NULL) {
        /* cuFile without nvidia-fs (a VM; FAKE_CUFILE_COMPAT_MODE on the
         * double): AUTO keeps to the staged path, not counted as a fallback,
         * and REQUIRED still reads through cuFile's compatibility mode. */
        memtier_ctx_t* req;
        printf("note: cuFile in compatibility mode: AUTO reads staged, REQUIRED through cuFile\n");
        MT_EQ_U64(d.staged_bytes, 8 * MiB, "compat: AUTO staged");
        MT_EQ_U64(d.gds_bytes, 0, "compat: AUTO no GDS bytes");
        MT_EQ_U64(d.gds_fallbacks, 0, "compat: not a fallback");
        explain(ctx, p1, 0, 8 * MiB, MEMTIER_PATH_STAGED, "compatibility mode");
        MT_OK(memtier_finalize(ctx));
        req = ctx_mode(MEMTIER_GDS_REQUIRED);
        d = read_delta(req, p1, 4096, 8 * MiB);
        MT_EQ_U64(d.gds_bytes, 8 * MiB, "compat: REQUIRED reads with cuFile");
        MT_EQ_U64(d.staged_bytes, 0, "compat: REQUIRED nothing staged");
        if (mt_gpu.fake) MT_CHECK(mt_fake_cufile("compat_reads") >= 1, "compat: cuFileRead in compatibility mode");
        MT_OK(memtier_finalize(req));
        return;
    }
    if (d.gds_fallbacks != 0 && !mt_gpu.fake) {
        /* A real machine whose cuFile cannot run: the fallback is the answer. */
        printf("note: GDS fell back on this machine; the GDS byte checks are skipped\n");
        MT_EQ_U64(d.staged_bytes, 8 * MiB, "fallback served staged");
        MT_OK(memtier_finalize(ctx));
        return;
    }
    MT_EQ_U64(d.gds_requests, 1, "aligned 8 MiB: gds_requests");
    MT_EQ_U64(d.gds_bytes, 8 * MiB, "aligned 8 MiB: gds_bytes");
    MT_EQ_U64(d.staged_bytes, 0, "aligned 8 MiB: staged_bytes");
    MT_EQ_U64(d.gds_fallbacks, 0, "aligned 8 MiB: gds_fallbacks");
    MT_CHECK(strstr(info, "gds: GDS available") != NULL, "gpu_info does not say GDS is available");
    if (mt_gpu.fake) MT_CHECK(mt_fake_cufile("read_bytes") >= (long long)(8 * MiB), "cuFileRead bytes");
    /* A tail ending at EOF is aligned enough. */
    d = read_delta(ctx, p1, FILE_SIZE - 2 * MiB - 100, 2 * MiB + 100);
    MT_EQ_U64(d.staged_bytes, 2 * MiB + 100, "unaligned offset: staged");
    d = read_delta(ctx, p1, FILE_SIZE - 2 * MiB, 2 * MiB);
    MT_EQ_U64(d.gds_bytes, 2 * MiB, "aligned tail: GDS");

    explain(ctx, p1, 0, 8 * MiB, MEMTIER_PATH_GDS, "large and 4 KiB aligned");
    explain(ctx, p1, 0, 4097, MEMTIER_PATH_STAGED, "below gds_threshold_bytes");
    explain(ctx, p1, 1, 8 * MiB, MEMTIER_PATH_STAGED, "not a multiple of 4096");
    d = read_delta(ctx, p1, 4096, 4097);
    MT_EQ_U64(d.staged_bytes, 4097, "small: staged");
    MT_EQ_U64(d.gds_bytes, 0, "small: no GDS");
    d = read_delta(ctx, p1, 1, 8 * MiB);
    MT_EQ_U64(d.staged_bytes, 8 * MiB, "unaligned: staged");

    MT_NEED_FAKE("the cuFile switches");
    /* Partial cuFileReads. */
    mt_fake_switch("FAKE_CUFILE_PARTIAL", "65536");
    d = read_delta(ctx, p1, 4 * MiB, 8 * MiB);
    MT_EQ_U64(d.gds_bytes, 8 * MiB, "partial cuFileReads: gds_bytes");
    MT_CHECK(mt_fake_cufile("partial_reads") > 0, "FAKE_CUFILE_PARTIAL gave no partial read");
    mt_fake_switch("FAKE_CUFILE_PARTIAL", NULL);

    /* A failing cuFileRead: staged fallback, remembered for the file. */
    mt_fake_switch("FAKE_CUFILE_FAIL_READ_AFTER", "0");
    d = read_delta(ctx, p1, 8 * MiB, 8 * MiB);
    MT_EQ_U64(d.gds_fallbacks, 1, "read error: gds_fallbacks");
    MT_EQ_U64(d.staged_bytes, 8 * MiB, "read error: staged_bytes");
    MT_EQ_U64(d.gds_bytes, 0, "read error: gds_bytes");
    {
        long long calls = mt_fake_cufile("calls_cuFileRead");
        d = read_delta(ctx, p1, 16 * MiB, 8 * MiB);
        MT_EQ_U64(d.gds_fallbacks, 0, "remembered fallback is not counted again");
        MT_EQ_U64(d.staged_bytes, 8 * MiB, "remembered fallback: staged");
        MT_EQ_U64(mt_fake_cufile("calls_cuFileRead"), calls, "GDS retried on a file that fell back");
    }
    explain(ctx, p1, 0, 8 * MiB, MEMTIER_PATH_STAGED, "fell back for this file");
    mt_fake_switch("FAKE_CUFILE_FAIL_READ_AFTER", NULL);

    /* A file system cuFile refuses (registration fails). */
    {
        const char* p2 = mt_make_pfile("g2.bin", 16 * MiB);
        mt_fake_switch("FAKE_CUFILE_UNSUPPORTED_FS", "1");
        d = read_delta(ctx, p2, 0, 16 * MiB);
        MT_EQ_U64(d.gds_fallbacks, 1, "unsupported fs: gds_fallbacks");
        MT_EQ_U64(d.staged_bytes, 16 * MiB, "unsupported fs: staged_bytes");
        MT_OK(memtier_gpu_info(ctx, info, sizeof info));
        printf("after the fs fallback:\n%s", info);
        MT_CHECK(strstr(info, "fs_unsupported") != NULL, "gpu_info does not name fs_unsupported");
        MT_CHECK(strstr(info, "g2.bin") != NULL, "gpu_info does not name the file");
        mt_fake_switch("FAKE_CUFILE_UNSUPPORTED_FS", NULL);
        /* Rewritten: a new version is tried with GDS again. */
        usleep(20000);
        mt_write_file_gen(p2, 16 * MiB, NULL);
        {
            struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
            utimensat(AT_FDCWD, p2, ts, 0);
        }
        d = read_delta(ctx, p2, 0, 16 * MiB);
        MT_EQ_U64(d.gds_bytes, 16 * MiB, "rewritten file: GDS again");
    }
    MT_OK(memtier_finalize(ctx));
    MT_EQ_U64(mt_fake_cufile("handles_live"), 0, "finalize deregisters every cuFile handle");
    MT_EQ_U64(mt_fake_cufile("bug_read_unregistered"), 0, "cuFile double bug counter");
}

static void run_required(void) {
    const char* gm = getenv("MEMTIER_GDS_MODE");
    const char* p1;
    memtier_ctx_t* ctx;
    memtier_stats_t d;
    if (!gm || strcmp(gm, "required") != 0) mt_skip("needs MEMTIER_GDS_MODE=required (ctest)");
    MT_NEED_FAKE("mode required");
    p1 = mt_make_pfile("r1.bin", FILE_SIZE);
    ctx = mt_init_cfg(NULL);
    d = read_delta(ctx, p1, 1, 4097);
    MT_EQ_U64(d.gds_bytes, 4097, "REQUIRED: a small unaligned read goes GDS");
    MT_EQ_U64(d.staged_bytes, 0, "REQUIRED: nothing staged");
    {
        const char* p2 = mt_make_pfile("r2.bin", MiB);
        memtier_stats_t a = mt_stats(ctx), b;
        mt_fake_switch("FAKE_CUFILE_UNSUPPORTED_FS", "1");
        MT_STATUS(memtier_read(ctx, p2, 0, MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA),
                  MEMTIER_ERR_UNSUPPORTED);
        printf("REQUIRED, fs unsupported: %s\n", memtier_last_error());
        b = mt_stats(ctx);
        MT_EQ_U64(b.gds_fallbacks - a.gds_fallbacks, 0, "REQUIRED never falls back");
        mt_fake_switch("FAKE_CUFILE_UNSUPPORTED_FS", NULL);
        mt_fake_switch("FAKE_CUFILE_FAIL_READ_AFTER", "0");
        MT_STATUS(memtier_read(ctx, p1, 0, MiB, (void*)(uintptr_t)dev, MEMTIER_TARGET_CUDA), MEMTIER_ERR_IO);
        printf("REQUIRED, read error: %s\n", memtier_last_error());
        mt_fake_switch("FAKE_CUFILE_FAIL_READ_AFTER", NULL);
        d = read_delta(ctx, p1, 0, MiB);
        MT_EQ_U64(d.gds_bytes, MiB, "REQUIRED: GDS works again");
    }
    MT_OK(memtier_finalize(ctx));
}

static void run_nodriver(void) {
    const char* gm = getenv("MEMTIER_GDS_MODE");
    const char* p1;
    memtier_ctx_t* ctx = (memtier_ctx_t*)&ctx;
    memtier_stats_t d;
    char info[2048];
    if (!gm || strcmp(gm, "required") != 0 || !getenv("FAKE_CUFILE_DRIVER_OPEN_FAIL"))
        mt_skip("needs MEMTIER_GDS_MODE=required FAKE_CUFILE_DRIVER_OPEN_FAIL=5030 (ctest)");
    MT_STATUS(memtier_init(NULL, &ctx), MEMTIER_ERR_UNSUPPORTED);
    printf("init with gds_mode REQUIRED and no cuFile driver: %s\n", memtier_last_error());
    MT_CHECK(ctx == NULL, "failed init left *ctx_out non-NULL");
    MT_CHECK(strstr(memtier_last_error(), "GDS") != NULL, "init error does not mention GDS");
    p1 = mt_make_pfile("n1.bin", FILE_SIZE);
    ctx = ctx_mode(MEMTIER_GDS_AUTO);
    d = read_delta(ctx, p1, 0, 8 * MiB);
    MT_EQ_U64(d.gds_fallbacks, 1, "no driver: one fallback");
    MT_EQ_U64(d.staged_bytes, 8 * MiB, "no driver: staged");
    d = read_delta(ctx, p1, 8 * MiB, 8 * MiB);
    MT_EQ_U64(d.gds_fallbacks, 0, "no driver: counted once");
    MT_EQ_U64(d.staged_bytes, 8 * MiB, "no driver: staged again");
    MT_OK(memtier_gpu_info(ctx, info, sizeof info));
    printf("%s", info);
    MT_CHECK(strstr(info, "gds_driver_open") != NULL, "gpu_info does not name gds_driver_open");
    explain(ctx, p1, 0, 8 * MiB, MEMTIER_PATH_STAGED, "GDS unavailable");
    MT_OK(memtier_finalize(ctx));
}

static void run_nocufile(void) {
    const char* lib = getenv("MEMTIER_CUFILE_LIBRARY");
    const char* p1;
    memtier_ctx_t* ctx;
    memtier_stats_t d;
    char info[2048];
    if (!lib || strstr(lib, "missing") == NULL)
        mt_skip("needs MEMTIER_CUFILE_LIBRARY naming a missing file (ctest)");
    p1 = mt_make_pfile("c1.bin", FILE_SIZE);
    ctx = ctx_mode(MEMTIER_GDS_AUTO);
    d = read_delta(ctx, p1, 0, 8 * MiB);
    MT_EQ_U64(d.gds_fallbacks, 1, "no cuFile: one fallback");
    MT_EQ_U64(d.staged_bytes, 8 * MiB, "no cuFile: staged");
    d = read_delta(ctx, p1, 8 * MiB, 16 * MiB);
    MT_EQ_U64(d.gds_fallbacks, 0, "no cuFile: counted once");
    MT_OK(memtier_gpu_info(ctx, info, sizeof info));
    printf("%s", info);
    MT_CHECK(strstr(info, "cufile_unavailable") != NULL, "gpu_info does not name cufile_unavailable");
    MT_OK(memtier_finalize(ctx));
}

int main(int argc, char** argv) {
    static const mt_gpu_mode_t modes[] = {
        {"auto", run_auto},
        {"required", run_required},
        {"nodriver", run_nodriver},
        {"nocufile", run_nocufile},
    };
    return mt_gpu_main("test_gpu_gds", argc, argv, modes, sizeof modes / sizeof modes[0], FILE_SIZE, &host,
                       &dev);
}
