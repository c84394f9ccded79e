/* The public C entry points of libmemtier.so. They stay in C so that a forked
 * child gets MEMTIER_ERR_FORKED without entering the Go runtime (which does not
 * survive fork), and so that strerror/last_error/version work anywhere. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* This file defines memtier_debug_hook, declared only in the testing part. */
#define MEMTIER_TESTING_API
#include "memtier.h"
#include "_cgo_export.h"
#include "bridge.h"
#include "hit.h"
#include "readv_pread.h"

#define MT_ID(p) ((uint64_t)(uintptr_t)(p))

static volatile int mt_forked;
static pthread_key_t mt_err_key;
static pthread_once_t mt_err_once = PTHREAD_ONCE_INIT;

static void mt_on_fork_child(void) { mt_forked = 1; }

__attribute__((constructor)) static void mt_install_fork_guard(void) {
    pthread_atfork(NULL, NULL, mt_on_fork_child);
}

static void mt_err_init(void) { pthread_key_create(&mt_err_key, free); }

void mt_set_error(const char* msg, size_t n) {
    pthread_once(&mt_err_once, mt_err_init);
    char* p = malloc(n + 1);
    if (p == NULL) return;
    memcpy(p, msg, n);
    p[n] = '\0';
    free(pthread_getspecific(mt_err_key));
    pthread_setspecific(mt_err_key, p);
}

static int mt_fail(int status, const char* msg) {
    mt_set_error(msg, strlen(msg));
    return status;
}

/* mt_fail_ctx reports an argument error found in C on a live context: the
 * detail is stored and the context's stats.errors counts it, like errors
 * found in Go. */
static int mt_fail_ctx(const void* ctx, int status, const char* msg) {
    mt_set_error(msg, strlen(msg));
    mtgo_note_error(MT_ID(ctx));
    return status;
}

static int mt_fork_fail(void) {
    return mt_fail(MEMTIER_ERR_FORKED,
                   "memtier: called in a child process after fork(): the Go runtime inside "
                   "libmemtier.so does not survive fork(); load and use MemTier after fork, or use "
                   "the multiprocessing start method 'spawn' or 'forkserver'");
}

#define MT_GUARD()                                      \
    do {                                                \
        if (mt_forked) return mt_fork_fail();           \
    } while (0)


const char* memtier_last_error(void) {
    pthread_once(&mt_err_once, mt_err_init);
    const char* p = pthread_getspecific(mt_err_key);
    return p ? p : "";
}

/* memtier_strerror and memtier_path_name are generated from the header by
 * tools/mtgen into zz_status.c. */

const char* memtier_version(void) { return MEMTIER_VERSION_STRING; }

int memtier_version_number(void) { return MEMTIER_VERSION_NUMBER; }

/* The config layout of version 0.1: the exported memtier_config_default writes
 * exactly this many bytes forever, so a caller built against the 0.1 header (or
 * an FFI binding with that struct) is never written past; later fields are
 * reached through memtier_config_default_sized, which the header's
 * memtier_config_default macro calls with the full size. The function names
 * below are in parentheses so the header's function-like macros of the same
 * names do not expand here. */
#define MT_CONFIG_V1_SIZE offsetof(memtier_config_t, hbm_cache_bytes)
#define MT_STATS_V1_SIZE offsetof(memtier_stats_t, hbm_hit_requests)

int (memtier_config_default)(memtier_config_t* cfg) {
    return memtier_config_default_sized(cfg, MT_CONFIG_V1_SIZE);
}

int memtier_config_default_sized(memtier_config_t* cfg, size_t cfg_size) {
    MT_GUARD();
    if (cfg == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_config_default: cfg is NULL");
    if (cfg_size < 8)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_config_default_sized: cfg_size below 8 bytes");
    memtier_config_t full;
    memset(&full, 0, sizeof(full));
    int rc = mtgo_config_default(&full);
    size_t n = cfg_size < sizeof(full) ? cfg_size : sizeof(full);
    full.struct_size = (uint32_t)n;
    memcpy(cfg, &full, n);
    return rc;
}

int memtier_init(const memtier_config_t* cfg, memtier_ctx_t** ctx_out) {
    if (ctx_out != NULL) *ctx_out = NULL;
    MT_GUARD();
    if (ctx_out == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_init: ctx_out is NULL");
    uint64_t id = 0;
    int rc = mtgo_init((memtier_config_t*)cfg, &id);
    if (rc == MEMTIER_OK) *ctx_out = (memtier_ctx_t*)(uintptr_t)id;
    return rc;
}

int memtier_finalize(memtier_ctx_t* ctx) {
    MT_GUARD();
    if (ctx == NULL) return MEMTIER_OK;
    return mtgo_finalize(MT_ID(ctx));
}

int memtier_get_config(memtier_ctx_t* ctx, memtier_config_t* cfg, size_t cfg_size) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_get_config: ctx is NULL");
    if (cfg == NULL) return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_get_config: cfg is NULL");
    memtier_config_t full;
    memset(&full, 0, sizeof(full));
    int rc = mtgo_get_config(MT_ID(ctx), &full);
    if (rc != MEMTIER_OK) return rc;
    memcpy(cfg, &full, cfg_size < sizeof(full) ? cfg_size : sizeof(full));
    return MEMTIER_OK;
}

int memtier_read(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size, void* dst,
                 int target) {
    return memtier_read_ex(ctx, path, offset, size, dst, target, MEMTIER_READ_DEFAULT);
}

int memtier_read_ex(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size,
                    void* dst, int target, uint32_t flags) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_read: ctx is NULL");
    /* A DRAM-cache hit is served in C when hit.c can (no cgo round trip);
     * anything else, and any doubt, goes to Go, which overwrites dst. */
    if (target == MEMTIER_TARGET_CPU && mt_hit_read(MT_ID(ctx), path, offset, size, dst, flags))
        return MEMTIER_OK;
    return mtgo_read(MT_ID(ctx), (char*)path, offset, size, dst, target, flags);
}

int memtier_readv(memtier_ctx_t* ctx, const char* path, memtier_iovec_t* iov, size_t n,
                  int target) {
    return memtier_readv_ex(ctx, path, iov, n, target, MEMTIER_READ_DEFAULT);
}

int memtier_readv_ex(memtier_ctx_t* ctx, const char* path, memtier_iovec_t* iov, size_t n,
                     int target, uint32_t flags) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_readv: ctx is NULL");
    if (n > 0 && iov == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_readv: iov is NULL with n > 0");
    /* The elements that are DRAM-cache hits of the call's file are served in
     * C (hit.c), as memtier_read's hits are; the rest go to Go in one call,
     * which counts the call (rest is allocated first, so that a served
     * element is never served and counted twice). */
    if (target == MEMTIER_TARGET_CPU && n > 0 && n <= MT_HIT_READV_MAX) {
        memtier_iovec_t* rest = malloc(n * sizeof *rest);
        if (rest != NULL) {
            const uint64_t served = mt_hit_readv(MT_ID(ctx), path, iov, n, flags);
            if (served == n) {
                free(rest);
                return MEMTIER_OK;
            }
            if (served > 0) {
                size_t m = 0;
                for (size_t k = 0; k < n; k++)
                    if (iov[k].result == 0) rest[m++] = iov[k];
                const int rc = mtgo_readv(MT_ID(ctx), (char*)path, rest, m, target, flags);
                for (size_t k = 0, j = 0; k < n; k++)
                    if (iov[k].result == 0) iov[k].result = rest[j++].result;
                free(rest);
                return rc;
            }
            free(rest);
        }
        /* With the DRAM cache off, the engine may plan the call as one
         * buffered pread per element, which readv_pread.c executes. */
        int rc;
        if (mt_readv_pread(MT_ID(ctx), path, iov, n, flags, &rc)) return rc;
    }
    return mtgo_readv(MT_ID(ctx), (char*)path, iov, n, target, flags);
}

static int mt_prefetch_flags(const void* ctx, const memtier_prefetch_opts_t* opts, uint32_t* flags) {
    *flags = MEMTIER_PREFETCH_TO_DRAM;
    if (opts == NULL) return MEMTIER_OK;
    if (opts->struct_size < sizeof(uint32_t) * 2)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG,
                       "memtier_prefetch: opts->struct_size too small (set it to sizeof(memtier_prefetch_opts_t))");
    *flags = opts->flags;
    return MEMTIER_OK;
}

int memtier_prefetch(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size,
                     const memtier_prefetch_opts_t* opts) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_prefetch: ctx is NULL");
    uint32_t flags;
    int rc = mt_prefetch_flags(ctx, opts, &flags);
    if (rc != MEMTIER_OK) return rc;
    return mtgo_prefetch(MT_ID(ctx), (char*)path, offset, size, flags);
}

int memtier_prefetch_async(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size,
                           const memtier_prefetch_opts_t* opts, memtier_request_t** req_out) {
    if (req_out != NULL) *req_out = NULL;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_prefetch_async: ctx is NULL");
    if (req_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_prefetch_async: req_out is NULL");
    uint32_t flags;
    int rc = mt_prefetch_flags(ctx, opts, &flags);
    if (rc != MEMTIER_OK) return rc;
    uint64_t id = 0;
    rc = mtgo_prefetch_async(MT_ID(ctx), (char*)path, offset, size, flags, &id);
    if (rc == MEMTIER_OK) *req_out = (memtier_request_t*)(uintptr_t)id;
    return rc;
}

int memtier_read_async(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size,
                       void* dst, int target, uint32_t flags, memtier_request_t** req_out) {
    if (req_out != NULL) *req_out = NULL;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_read_async: ctx is NULL");
    if (req_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_read_async: req_out is NULL");
    uint64_t id = 0;
    int rc = mtgo_read_async(MT_ID(ctx), (char*)path, offset, size, dst, target, flags, &id);
    if (rc == MEMTIER_OK) *req_out = (memtier_request_t*)(uintptr_t)id;
    return rc;
}

int memtier_request_wait(memtier_request_t* req, int64_t timeout_ns, uint64_t* nbytes_out) {
    MT_GUARD();
    if (req == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_request_wait: req is NULL");
    return mtgo_request_wait(MT_ID(req), timeout_ns, nbytes_out, 0);
}

int memtier_request_test(memtier_request_t* req, uint64_t* nbytes_out) {
    MT_GUARD();
    if (req == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_request_test: req is NULL");
    return mtgo_request_wait(MT_ID(req), 0, nbytes_out, 1);
}

int memtier_request_release(memtier_request_t* req) {
    MT_GUARD();
    if (req == NULL) return MEMTIER_OK;
    return mtgo_request_release(MT_ID(req));
}

int memtier_drop_cache(memtier_ctx_t* ctx, const char* path) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_drop_cache: ctx is NULL");
    return mtgo_drop_cache(MT_ID(ctx), (char*)path);
}

int memtier_interrupt(memtier_ctx_t* ctx) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_interrupt: ctx is NULL");
    return mtgo_interrupt(MT_ID(ctx));
}

int memtier_set_interrupt_check(memtier_ctx_t* ctx, memtier_interrupt_check_fn check, void* arg,
                                uint64_t thread) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_set_interrupt_check: ctx is NULL");
    return mtgo_set_interrupt_check(MT_ID(ctx), (void*)check, arg, thread);
}

int memtier_explain(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size,
                    const void* dst, int target, uint32_t flags, memtier_decision_t* out) {
    return memtier_explain_sized(ctx, path, offset, size, dst, target, flags, out, sizeof(*out));
}

/* The decision is built in a full-size local and its first out_size bytes
 * copied out, so a caller's shorter (older) struct is never written past.
 * *out is written whenever the arguments reach Go (a refused request too,
 * with path NONE), as memtier_explain always did. */
int memtier_explain_sized(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t size,
                          const void* dst, int target, uint32_t flags, memtier_decision_t* out,
                          size_t out_size) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_explain: ctx is NULL");
    if (out == NULL) return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_explain: out is NULL");
    if (out_size == 0)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_explain_sized: out_size is 0");
    memtier_decision_t full;
    memset(&full, 0, sizeof(full));
    full.path = MEMTIER_PATH_NONE;
    int dst_aligned = ((uintptr_t)dst % 4096) == 0;
    int rc = mtgo_explain(MT_ID(ctx), (char*)path, offset, size, dst_aligned, target, flags, &full);
    memcpy(out, &full, out_size < sizeof(full) ? out_size : sizeof(full));
    return rc;
}

int memtier_capabilities(memtier_ctx_t* ctx, uint64_t* caps_out) {
    if (caps_out != NULL) *caps_out = 0;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_capabilities: ctx is NULL");
    if (caps_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_capabilities: caps_out is NULL");
    uint64_t caps = 0;
    int rc = mtgo_capabilities(MT_ID(ctx), &caps); /* exports_stats.go */
    if (rc == MEMTIER_OK) *caps_out = caps;
    return rc;
}

int (memtier_stats)(memtier_ctx_t* ctx, memtier_stats_t* st) {
    return memtier_stats_sized(ctx, st, MT_STATS_V1_SIZE);
}

int memtier_stats_sized(memtier_ctx_t* ctx, memtier_stats_t* st, size_t st_size) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_stats: ctx is NULL");
    if (st == NULL) return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_stats: st is NULL");
    memtier_stats_t full;
    memset(&full, 0, sizeof(full));
    int rc = mtgo_stats(MT_ID(ctx), &full);
    if (rc != MEMTIER_OK) return rc;
    memcpy(st, &full, st_size < sizeof(full) ? st_size : sizeof(full));
    return MEMTIER_OK;
}

int memtier_stats_reset(memtier_ctx_t* ctx) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_stats_reset: ctx is NULL");
    return mtgo_stats_reset(MT_ID(ctx));
}

int memtier_gpu_info(memtier_ctx_t* ctx, char* buf, size_t buf_size) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_gpu_info: ctx is NULL");
    if (buf == NULL || buf_size == 0)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_gpu_info: buf is NULL or buf_size is 0");
    buf[0] = '\0';
    return mtgo_gpu_info(MT_ID(ctx), buf, buf_size);
}

int memtier_memory_limit(memtier_ctx_t* ctx, uint64_t* bytes_out, char* source, size_t source_len) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_memory_limit: ctx is NULL");
    if (source != NULL && source_len == 0)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG,
                           "memtier_memory_limit: source_len is 0 (no room for the NUL)");
    if (source != NULL) source[0] = '\0';
    return mtgo_memory_limit(MT_ID(ctx), bytes_out, source, source_len); /* exports_memlimit.go */
}

int memtier_debug_hook(memtier_ctx_t* ctx, int hook) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_debug_hook: ctx is NULL");
    return mtgo_debug_hook(MT_ID(ctx), hook);
}

/* ------------------------------------------------ objects: tensors, chunks */

int memtier_load_tensor(memtier_ctx_t* ctx, const char* path, uint64_t offset, uint64_t nbytes,
                        void* dst, int target) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_load_tensor: ctx is NULL");
    return mtgo_load_tensor(MT_ID(ctx), (char*)path, offset, nbytes, dst, target);
}

int memtier_load_chunks(memtier_ctx_t* ctx, const char* path, memtier_chunk_t* chunks, size_t n,
                        int target) {
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_load_chunks: ctx is NULL");
    if (n > 0 && chunks == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_load_chunks: chunks is NULL with n > 0");
    return mtgo_load_chunks(MT_ID(ctx), (char*)path, chunks, n, target);
}

int memtier_load_chunks_async(memtier_ctx_t* ctx, const char* path, memtier_chunk_t* chunks,
                              size_t n, int target, memtier_request_t** req_out) {
    if (req_out != NULL) *req_out = NULL;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_load_chunks_async: ctx is NULL");
    if (req_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_load_chunks_async: req_out is NULL");
    if (n > 0 && chunks == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG,
                           "memtier_load_chunks_async: chunks is NULL with n > 0");
    uint64_t id = 0;
    int rc = mtgo_load_chunks_async(MT_ID(ctx), (char*)path, chunks, n, target, &id);
    if (rc == MEMTIER_OK) *req_out = (memtier_request_t*)(uintptr_t)id;
    return rc;
}

int memtier_request_next(memtier_request_t* req, int64_t timeout_ns, size_t* index_out) {
    MT_GUARD();
    if (req == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_request_next: req is NULL");
    if (index_out == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_request_next: index_out is NULL");
    return mtgo_request_next(MT_ID(req), timeout_ns, index_out);
}

/* ------------------------------------------------------- safetensors files */

int memtier_safetensors_open(memtier_ctx_t* ctx, const char* path, memtier_safetensors_t** st_out) {
    if (st_out != NULL) *st_out = NULL;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_open: ctx is NULL");
    if (st_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_open: st_out is NULL");
    uint64_t id = 0;
    int rc = mtgo_safetensors_open(MT_ID(ctx), (char*)path, &id);
    if (rc == MEMTIER_OK) *st_out = (memtier_safetensors_t*)(uintptr_t)id;
    return rc;
}

int memtier_safetensors_close(memtier_safetensors_t* st) {
    MT_GUARD();
    if (st == NULL) return MEMTIER_OK;
    return mtgo_safetensors_close(MT_ID(st));
}

int memtier_safetensors_count(memtier_safetensors_t* st, size_t* count_out) {
    MT_GUARD();
    if (st == NULL || count_out == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_count: st or count_out is NULL");
    return mtgo_safetensors_count(MT_ID(st), count_out);
}

int memtier_safetensors_get(memtier_safetensors_t* st, size_t index, memtier_tensor_info_t* info) {
    return memtier_safetensors_get_sized(st, index, info, sizeof(*info));
}

/* Filled in a full-size local; on success its first info_size bytes are
 * copied out (on failure *info is left as it was, as before). */
int memtier_safetensors_get_sized(memtier_safetensors_t* st, size_t index,
                                  memtier_tensor_info_t* info, size_t info_size) {
    MT_GUARD();
    if (st == NULL || info == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_get: st or info is NULL");
    if (info_size == 0)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_get_sized: info_size is 0");
    memtier_tensor_info_t full;
    memset(&full, 0, sizeof(full));
    int rc = mtgo_safetensors_get(MT_ID(st), index, &full);
    if (rc == MEMTIER_OK) memcpy(info, &full, info_size < sizeof(full) ? info_size : sizeof(full));
    return rc;
}

int memtier_safetensors_find(memtier_safetensors_t* st, const char* name, size_t name_len,
                             size_t* index_out) {
    MT_GUARD();
    if (st == NULL || index_out == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_find: st or index_out is NULL");
    return mtgo_safetensors_find(MT_ID(st), (char*)name, name_len, index_out);
}

int memtier_safetensors_metadata(memtier_safetensors_t* st, size_t index, const char** key_out,
                                 const char** value_out) {
    MT_GUARD();
    if (st == NULL || key_out == NULL || value_out == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG,
                       "memtier_safetensors_metadata: st, key_out or value_out is NULL");
    return mtgo_safetensors_metadata(MT_ID(st), index, (char**)key_out, (char**)value_out);
}

int memtier_safetensors_metadata_count(memtier_safetensors_t* st, size_t* count_out,
                                       int* present_out) {
    MT_GUARD();
    if (st == NULL || count_out == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG,
                       "memtier_safetensors_metadata_count: st or count_out is NULL");
    return mtgo_safetensors_metadata_count(MT_ID(st), count_out, present_out);
}

int memtier_safetensors_load(memtier_safetensors_t* st, size_t index, void* dst, uint64_t dst_size,
                             int target) {
    MT_GUARD();
    if (st == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_load: st is NULL");
    return mtgo_safetensors_load(MT_ID(st), index, dst, dst_size, target);
}

int memtier_safetensors_load_all(memtier_safetensors_t* st, void* const* dsts, int64_t* results,
                                 int target) {
    MT_GUARD();
    if (st == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_safetensors_load_all: st is NULL");
    return mtgo_safetensors_load_all(MT_ID(st), (void**)dsts, results, target);
}

/* ------------------------------------------------------------------ datasets */

int memtier_dataset_open(memtier_ctx_t* ctx, const char* data_path, const char* index_path,
                         memtier_dataset_t** ds_out) {
    if (ds_out != NULL) *ds_out = NULL;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_dataset_open: ctx is NULL");
    if (ds_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_dataset_open: ds_out is NULL");
    uint64_t id = 0;
    int rc = mtgo_dataset_open(MT_ID(ctx), (char*)data_path, (char*)index_path, &id);
    if (rc == MEMTIER_OK) *ds_out = (memtier_dataset_t*)(uintptr_t)id;
    return rc;
}

int memtier_dataset_open_tar(memtier_ctx_t* ctx, const char* tar_path, memtier_dataset_t** ds_out) {
    if (ds_out != NULL) *ds_out = NULL;
    MT_GUARD();
    if (ctx == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_dataset_open_tar: ctx is NULL");
    if (ds_out == NULL)
        return mt_fail_ctx(ctx, MEMTIER_ERR_INVALID_ARG, "memtier_dataset_open_tar: ds_out is NULL");
    uint64_t id = 0;
    int rc = mtgo_dataset_open_tar(MT_ID(ctx), (char*)tar_path, &id);
    if (rc == MEMTIER_OK) *ds_out = (memtier_dataset_t*)(uintptr_t)id;
    return rc;
}

int memtier_dataset_close(memtier_dataset_t* ds) {
    MT_GUARD();
    if (ds == NULL) return MEMTIER_OK;
    return mtgo_dataset_close(MT_ID(ds));
}

int memtier_dataset_count(memtier_dataset_t* ds, uint64_t* count_out) {
    MT_GUARD();
    if (ds == NULL || count_out == NULL)
        return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_dataset_count: ds or count_out is NULL");
    return mtgo_dataset_count(MT_ID(ds), count_out);
}

int memtier_dataset_sample(memtier_dataset_t* ds, uint64_t index, uint64_t* offset_out,
                           uint64_t* size_out, const char** name_out) {
    MT_GUARD();
    if (ds == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_dataset_sample: ds is NULL");
    return mtgo_dataset_sample(MT_ID(ds), index, offset_out, size_out, (char**)name_out);
}

int memtier_dataset_read(memtier_dataset_t* ds, uint64_t index, void* dst, uint64_t dst_size,
                         int target) {
    MT_GUARD();
    if (ds == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_dataset_read: ds is NULL");
    return mtgo_dataset_read(MT_ID(ds), index, dst, dst_size, target);
}

int memtier_dataset_read_batch(memtier_dataset_t* ds, const uint64_t* indices, size_t n,
                               void* const* dsts, int64_t* results, int target) {
    MT_GUARD();
    if (ds == NULL) return mt_fail(MEMTIER_ERR_INVALID_ARG, "memtier_dataset_read_batch: ds is NULL");
    return mtgo_dataset_read_batch(MT_ID(ds), (uint64_t*)indices, n, (void**)dsts, results, target);
}
