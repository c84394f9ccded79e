/*
 * Description: configuration. memtier_config_default writes struct_size and
 * every documented default; memtier_get_config after init returns the fields
 * the program set (and defaults for fields past an older, shorter
 * struct_size); out-of-range fields give INVALID_ARG. MEMTIER_* environment
 * variables, set by ctest before the process starts:
 *   test_config env     MEMTIER_CACHE_BYTES=8M, MEMTIER_IO_THREADS=3 show up
 *                       in config_default and in init(NULL); code set after
 *                       config_default wins; MEMTIER_GDS_MODE=off and
 *                       MEMTIER_HBM_CACHE_BYTES=0 give gds_mode OFF and
 *                       hbm_cache_bytes 0;
 *   test_config badenv  MEMTIER_CACHE_BYTES=lots makes memtier_init(NULL)
 *                       fail with MEMTIER_ERR_FORMAT naming the variable.
 */
#include "mt_test.h"

extern char** environ;

static void expect_defaults(const memtier_config_t* c) {
    MT_EQ_U64(c->struct_size, sizeof(memtier_config_t), "struct_size");
    MT_EQ_U64(c->io_threads, 4, "io_threads default");
    MT_EQ_U64(c->cache_bytes, 1024 * MiB, "cache_bytes default");
    MT_EQ_U64(c->cache_block_bytes, 64 * KiB, "cache_block_bytes default");
    MT_EQ_U64(c->cache_admit_max_bytes, 16 * MiB, "cache_admit_max_bytes default");
    MT_EQ_U64(c->task_bytes, 4 * MiB, "task_bytes default");
    MT_EQ_U64(c->direct_threshold_bytes, 8 * MiB, "direct_threshold_bytes default");
    MT_EQ_U64(c->direct_mode, MEMTIER_DIRECT_AUTO, "direct_mode default");
    MT_EQ_U64(c->cache_enabled, 1, "cache_enabled default");
    MT_EQ_U64(c->max_open_files, 128, "max_open_files default");
    MT_EQ_U64(c->gomaxprocs, 0, "gomaxprocs default");
    MT_EQ_U64(c->gds_threshold_bytes, 1 * MiB, "gds_threshold_bytes default");
    MT_EQ_U64(c->max_inflight_mib, 64, "max_inflight_mib default");
    MT_EQ_U64(c->small_io_depth, 32, "small_io_depth default");
    MT_CHECK(c->path_recheck_ms == 1000, "path_recheck_ms default: %d, want 1000",
             c->path_recheck_ms);
    MT_EQ_U64(c->hbm_cache_bytes, 1024 * MiB, "hbm_cache_bytes default");
    MT_EQ_U64(c->gds_mode, MEMTIER_GDS_AUTO, "gds_mode default");
    MT_EQ_U64(c->hbm_device, 0, "hbm_device default");
}

/* Every field of got equals the one in want. */
static void expect_same(const memtier_config_t* got, const memtier_config_t* want) {
#define SAME(f) MT_EQ_U64(got->f, want->f, "get_config returns the value passed to init: " #f)
    SAME(struct_size);
    SAME(io_threads);
    SAME(cache_bytes);
    SAME(cache_block_bytes);
    SAME(cache_admit_max_bytes);
    SAME(task_bytes);
    SAME(direct_threshold_bytes);
    SAME(direct_mode);
    SAME(cache_enabled);
    SAME(max_open_files);
    SAME(gomaxprocs);
    SAME(gds_threshold_bytes);
    SAME(max_inflight_mib);
    SAME(small_io_depth);
    SAME(hbm_cache_bytes);
    SAME(gds_mode);
    SAME(hbm_device);
    MT_CHECK(got->path_recheck_ms == want->path_recheck_ms,
             "get_config path_recheck_ms %d, passed to init %d", got->path_recheck_ms,
             want->path_recheck_ms);
#undef SAME
}

static void run_defaults(void) {
    char** e;
    for (e = environ; *e; e++)
        if (strncmp(*e, "MEMTIER_", 8) == 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "%.200s is set; defaults cannot be checked", *e);
            mt_skip(msg);
        }

    memtier_config_t cfg;
    memset(&cfg, 0xFF, sizeof cfg); /* every field must be written */
    MT_OK(memtier_config_default(&cfg));
    expect_defaults(&cfg);

    /* init(NULL) uses the same defaults. */
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    memtier_config_t got;
    memset(&got, 0xFF, sizeof got);
    MT_OK(memtier_get_config(ctx, &got, sizeof got));
    expect_defaults(&got);
    MT_OK(memtier_finalize(ctx));

    /* Fields set by code come back from get_config. */
    cfg.io_threads = 2;
    cfg.cache_bytes = 8 * MiB;
    cfg.cache_block_bytes = 16 * KiB;
    cfg.cache_admit_max_bytes = 1 * MiB;
    cfg.task_bytes = 1 * MiB;
    cfg.direct_threshold_bytes = 2 * MiB;
    cfg.direct_mode = MEMTIER_DIRECT_OFF;
    cfg.max_open_files = 16;
    cfg.gds_threshold_bytes = 2 * MiB;
    cfg.max_inflight_mib = 32;
    cfg.small_io_depth = 8;
    cfg.path_recheck_ms = -1;
    cfg.hbm_cache_bytes = 64 * MiB;
    cfg.gds_mode = MEMTIER_GDS_OFF;
    cfg.hbm_device = 0;
    ctx = mt_init_cfg(&cfg);
    memset(&got, 0xFF, sizeof got);
    MT_OK(memtier_get_config(ctx, &got, sizeof got));
    expect_same(&got, &cfg);
    {
        memtier_stats_t st = mt_stats(ctx);
        MT_EQ_U64(st.cache_budget_bytes, 8 * MiB, "stats.cache_budget_bytes follows cache_bytes");
        MT_EQ_U64(st.hbm_budget_bytes, 64 * MiB, "stats.hbm_budget_bytes follows hbm_cache_bytes");
    }

    /* The exported memtier_config_default (the 0.1 entry point that older
     * binaries and FFI bindings reach; the parentheses skip the header's
     * macro) writes the 0.1 layout only. */
    {
        const size_t v1 = offsetof(memtier_config_t, hbm_cache_bytes);
        memtier_config_t old;
        MT_EQ_U64(v1, 88, "the 0.1 config layout is 88 bytes");
        memset(&old, 0xC3, sizeof old);
        MT_OK((memtier_config_default)(&old));
        MT_EQ_U64(old.struct_size, v1, "exported config_default sets the 0.1 struct_size");
        MT_CHECK(mt_find_not((const uint8_t*)&old + v1, 0xC3, sizeof old - v1) < 0,
                 "exported memtier_config_default wrote past the 0.1 layout");
        MT_EQ_U64(old.io_threads, 4, "exported config_default fills the 0.1 fields");
    }

    /* get_config writes only cfg_size bytes. */
    {
        unsigned char raw[sizeof(memtier_config_t)];
        memset(raw, 0xEE, sizeof raw);
        MT_OK(memtier_get_config(ctx, (memtier_config_t*)raw, 8));
        MT_CHECK(mt_find_not(raw + 8, 0xEE, sizeof raw - 8) < 0,
                 "get_config(cfg_size = 8) wrote past 8 bytes");
        uint32_t io;
        memcpy(&io, raw + 4, sizeof io);
        MT_EQ_U64(io, 2, "io_threads from a short get_config");
    }
    MT_OK(memtier_finalize(ctx));

    /* An older caller: struct_size stops before small_io_depth; it defaults. */
    MT_OK(memtier_config_default(&cfg));
    cfg.struct_size = (uint32_t)offsetof(memtier_config_t, small_io_depth);
    cfg.small_io_depth = 7; /* past struct_size: must be ignored */
    cfg.path_recheck_ms = 5;  /* likewise */
    cfg.max_inflight_mib = 48;
    ctx = mt_init_cfg(&cfg);
    MT_OK(memtier_get_config(ctx, &got, sizeof got));
    MT_EQ_U64(got.small_io_depth, 32, "field past struct_size takes the default");
    MT_CHECK(got.path_recheck_ms == 1000, "path_recheck_ms past struct_size: %d, want 1000",
             got.path_recheck_ms);
    MT_EQ_U64(got.max_inflight_mib, 48, "field inside struct_size is used");
    MT_OK(memtier_finalize(ctx));

    /* Out-of-range fields. */
    {
        memtier_ctx_t* bad;
        MT_OK(memtier_config_default(&cfg));
        cfg.io_threads = 100000;
        bad = (memtier_ctx_t*)&cfg;
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(bad == NULL, "failed init left *ctx_out non-NULL");
        MT_OK(memtier_config_default(&cfg));
        cfg.cache_block_bytes = 3000; /* not a power of two */
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
        MT_OK(memtier_config_default(&cfg));
        cfg.direct_mode = 9;
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
        MT_OK(memtier_config_default(&cfg));
        cfg.gds_mode = 7;
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
        MT_OK(memtier_config_default(&cfg));
        cfg.hbm_device = -1;
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
        MT_OK(memtier_config_default(&cfg));
        cfg.hbm_cache_bytes = 4096; /* below one 2 MiB HBM block */
        MT_STATUS(memtier_init(&cfg, &bad), MEMTIER_ERR_INVALID_ARG);
    }
    MT_STATUS(memtier_get_config(NULL, &got, sizeof got), MEMTIER_ERR_INVALID_ARG);
}

static void run_env(void) {
    const char* cb = getenv("MEMTIER_CACHE_BYTES");
    const char* io = getenv("MEMTIER_IO_THREADS");
    if (!cb || strcmp(cb, "8M") != 0 || !io || strcmp(io, "3") != 0)
        mt_skip("needs MEMTIER_CACHE_BYTES=8M MEMTIER_IO_THREADS=3 at process start (ctest)");
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    MT_EQ_U64(cfg.cache_bytes, 8 * MiB, "MEMTIER_CACHE_BYTES=8M in config_default");
    MT_EQ_U64(cfg.io_threads, 3, "MEMTIER_IO_THREADS=3 in config_default");
    MT_EQ_U64(cfg.task_bytes, 4 * MiB, "unset variables keep defaults");
    {
        const char* gm = getenv("MEMTIER_GDS_MODE");
        const char* hb = getenv("MEMTIER_HBM_CACHE_BYTES");
        if (gm && strcmp(gm, "off") == 0)
            MT_EQ_U64(cfg.gds_mode, MEMTIER_GDS_OFF, "MEMTIER_GDS_MODE=off in config_default");
        if (hb && strcmp(hb, "0") == 0)
            MT_EQ_U64(cfg.hbm_cache_bytes, 0, "MEMTIER_HBM_CACHE_BYTES=0 turns the HBM tier off");
    }

    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    memtier_config_t got;
    MT_OK(memtier_get_config(ctx, &got, sizeof got));
    MT_EQ_U64(got.cache_bytes, 8 * MiB, "init(NULL) applies MEMTIER_CACHE_BYTES");
    MT_EQ_U64(got.io_threads, 3, "init(NULL) applies MEMTIER_IO_THREADS");
    MT_OK(memtier_finalize(ctx));

    /* Code wins over the environment. */
    cfg.io_threads = 5;
    ctx = mt_init_cfg(&cfg);
    MT_OK(memtier_get_config(ctx, &got, sizeof got));
    MT_EQ_U64(got.io_threads, 5, "a field set after config_default wins");
    MT_EQ_U64(got.cache_bytes, 8 * MiB, "environment value kept for the other field");
    MT_OK(memtier_finalize(ctx));
}

static void run_badenv(void) {
    const char* cb = getenv("MEMTIER_CACHE_BYTES");
    if (!cb || strcmp(cb, "lots") != 0)
        mt_skip("needs MEMTIER_CACHE_BYTES=lots at process start (ctest)");
    memtier_ctx_t* ctx = (memtier_ctx_t*)&ctx;
    MT_STATUS(memtier_init(NULL, &ctx), MEMTIER_ERR_FORMAT);
    MT_CHECK(ctx == NULL, "failed init left *ctx_out non-NULL");
    MT_CHECK(strstr(memtier_last_error(), "MEMTIER_CACHE_BYTES") != NULL,
             "last_error \"%s\" does not name MEMTIER_CACHE_BYTES", memtier_last_error());
    printf("badenv: %s\n", memtier_last_error());

    memtier_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    MT_STATUS(memtier_config_default(&cfg), MEMTIER_ERR_FORMAT);
    MT_CHECK(strstr(memtier_last_error(), "MEMTIER_CACHE_BYTES") != NULL,
             "config_default last_error \"%s\" does not name the variable", memtier_last_error());
    MT_EQ_U64(cfg.struct_size, sizeof cfg, "config_default still fills the defaults");
    MT_EQ_U64(cfg.cache_bytes, 1024 * MiB, "config_default holds the default cache_bytes");
}

int main(int argc, char** argv) {
    mt_begin("test_config");
    const char* mode = argc > 1 ? argv[1] : "defaults";
    if (strcmp(mode, "defaults") == 0)
        run_defaults();
    else if (strcmp(mode, "env") == 0)
        run_env();
    else if (strcmp(mode, "badenv") == 0)
        run_badenv();
    else
        MT_FAIL("usage: test_config [defaults|env|badenv]");
    mt_pass();
    return 0;
}
