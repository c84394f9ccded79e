/*
 * Description: memtier.h compiles alone as strict C99 (-std=c99 -pedantic
 * -Wall -Wextra -Werror), its ABI is pinned (status values, struct field
 * offsets: the header promises they are append-only; tools/mtgen copies
 * whatever the header says, so these pins are what catches a renumbered
 * status or a moved field), its testing hooks stay hidden without
 * MEMTIER_TESTING_API, and the library it links against reports the
 * header's version.
 */
#include "memtier.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* C99 has no _Static_assert: a negative array size fails the compile. */
#define ABI_CHECK(name, cond) typedef char abi_check_##name[(cond) ? 1 : -1]

ABI_CHECK(ok, MEMTIER_OK == 0);
ABI_CHECK(invalid_arg, MEMTIER_ERR_INVALID_ARG == -1);
ABI_CHECK(not_found, MEMTIER_ERR_NOT_FOUND == -2);
ABI_CHECK(permission, MEMTIER_ERR_PERMISSION == -3);
ABI_CHECK(eof, MEMTIER_ERR_EOF == -4);
ABI_CHECK(io, MEMTIER_ERR_IO == -5);
ABI_CHECK(nomem, MEMTIER_ERR_NOMEM == -6);
ABI_CHECK(unsupported, MEMTIER_ERR_UNSUPPORTED == -7);
ABI_CHECK(closed, MEMTIER_ERR_CLOSED == -8);
ABI_CHECK(busy, MEMTIER_ERR_BUSY == -9);
ABI_CHECK(timeout, MEMTIER_ERR_TIMEOUT == -10);
ABI_CHECK(format, MEMTIER_ERR_FORMAT == -11);
ABI_CHECK(is_dir, MEMTIER_ERR_IS_DIR == -12);
ABI_CHECK(internal, MEMTIER_ERR_INTERNAL == -13);
ABI_CHECK(forked, MEMTIER_ERR_FORKED == -14);
ABI_CHECK(direct_io, MEMTIER_ERR_DIRECT_IO == -15);
ABI_CHECK(not_regular, MEMTIER_ERR_NOT_REGULAR == -16);

/* The testing hooks are declared only for code that asks for them. */
#ifdef MEMTIER_DEBUG_PANIC_EXPORT
#error "memtier.h declares its testing hooks although MEMTIER_TESTING_API is not defined here"
#endif

/* memtier_config_t: fields may only be appended. */
ABI_CHECK(cfg_struct_size, offsetof(memtier_config_t, struct_size) == 0);
ABI_CHECK(cfg_io_threads, offsetof(memtier_config_t, io_threads) == 4);
ABI_CHECK(cfg_cache_bytes, offsetof(memtier_config_t, cache_bytes) == 8);
ABI_CHECK(cfg_block, offsetof(memtier_config_t, cache_block_bytes) == 16);
ABI_CHECK(cfg_admit, offsetof(memtier_config_t, cache_admit_max_bytes) == 24);
ABI_CHECK(cfg_task, offsetof(memtier_config_t, task_bytes) == 32);
ABI_CHECK(cfg_direct_thr, offsetof(memtier_config_t, direct_threshold_bytes) == 40);
ABI_CHECK(cfg_direct_mode, offsetof(memtier_config_t, direct_mode) == 48);
ABI_CHECK(cfg_cache_enabled, offsetof(memtier_config_t, cache_enabled) == 52);
ABI_CHECK(cfg_max_open, offsetof(memtier_config_t, max_open_files) == 56);
ABI_CHECK(cfg_gomaxprocs, offsetof(memtier_config_t, gomaxprocs) == 60);
ABI_CHECK(cfg_gds, offsetof(memtier_config_t, gds_threshold_bytes) == 64);
ABI_CHECK(cfg_inflight, offsetof(memtier_config_t, max_inflight_mib) == 72);
ABI_CHECK(cfg_small_io, offsetof(memtier_config_t, small_io_depth) == 76);
ABI_CHECK(cfg_recheck, offsetof(memtier_config_t, path_recheck_ms) == 80);
ABI_CHECK(cfg_reserved0, offsetof(memtier_config_t, reserved0) == 84);
ABI_CHECK(cfg_hbm_bytes, offsetof(memtier_config_t, hbm_cache_bytes) == 88); /* added after 0.1 */
ABI_CHECK(cfg_gds_mode, offsetof(memtier_config_t, gds_mode) == 96);
ABI_CHECK(cfg_hbm_device, offsetof(memtier_config_t, hbm_device) == 100);
ABI_CHECK(cfg_size, sizeof(memtier_config_t) >= 104);
ABI_CHECK(gds_modes, MEMTIER_GDS_AUTO == 0 && MEMTIER_GDS_OFF == 1 && MEMTIER_GDS_REQUIRED == 2);
ABI_CHECK(path_hbm, MEMTIER_PATH_HBM == 6 && MEMTIER_PATH_NONE == 5);

ABI_CHECK(iov_offset, offsetof(memtier_iovec_t, offset) == 0);
ABI_CHECK(iov_size, offsetof(memtier_iovec_t, size) == 8);
ABI_CHECK(iov_dst, offsetof(memtier_iovec_t, dst) == 16);
ABI_CHECK(iov_path, offsetof(memtier_iovec_t, path) == 24);
ABI_CHECK(iov_result, offsetof(memtier_iovec_t, result) == 32);
ABI_CHECK(iov_sizeof, sizeof(memtier_iovec_t) == 40); /* an array element: fixed */

ABI_CHECK(pf_struct_size, offsetof(memtier_prefetch_opts_t, struct_size) == 0);
ABI_CHECK(pf_flags, offsetof(memtier_prefetch_opts_t, flags) == 4);

ABI_CHECK(dec_path, offsetof(memtier_decision_t, path) == 0);
ABI_CHECK(dec_admit, offsetof(memtier_decision_t, admit) == 4);
ABI_CHECK(dec_cached, offsetof(memtier_decision_t, cached_bytes) == 8);
ABI_CHECK(dec_resident, offsetof(memtier_decision_t, resident_bytes) == 16);
ABI_CHECK(dec_tasks, offsetof(memtier_decision_t, tasks) == 24);
ABI_CHECK(dec_reason, offsetof(memtier_decision_t, reason) == 32);
ABI_CHECK(dec_reason_len, sizeof(((memtier_decision_t*)0)->reason) == 256);

/* memtier_stats_t: 32 uint64 counters of 0.1 in this order, then the GPU-tier
 * ones, appended only. */
ABI_CHECK(st_requests, offsetof(memtier_stats_t, requests) == 0 * 8);
ABI_CHECK(st_cache_hit_requests, offsetof(memtier_stats_t, cache_hit_requests) == 2 * 8);
ABI_CHECK(st_direct_requests, offsetof(memtier_stats_t, direct_requests) == 6 * 8);
ABI_CHECK(st_gds_requests, offsetof(memtier_stats_t, gds_requests) == 8 * 8);
ABI_CHECK(st_cache_hits, offsetof(memtier_stats_t, cache_hits) == 12 * 8);
ABI_CHECK(st_resident, offsetof(memtier_stats_t, cache_resident_bytes) == 15 * 8);
ABI_CHECK(st_budget, offsetof(memtier_stats_t, cache_budget_bytes) == 16 * 8);
ABI_CHECK(st_prefetch, offsetof(memtier_stats_t, prefetch_requests) == 18 * 8);
ABI_CHECK(st_readv, offsetof(memtier_stats_t, readv_calls) == 20 * 8);
ABI_CHECK(st_storage, offsetof(memtier_stats_t, storage_bytes) == 22 * 8);
ABI_CHECK(st_fallbacks, offsetof(memtier_stats_t, direct_fallbacks) == 23 * 8);
ABI_CHECK(st_eintr, offsetof(memtier_stats_t, eintr_retries) == 25 * 8);
ABI_CHECK(st_errors, offsetof(memtier_stats_t, errors) == 28 * 8);
ABI_CHECK(st_stale, offsetof(memtier_stats_t, stale_invalidations) == 31 * 8);
ABI_CHECK(st_hbm_hit_requests, offsetof(memtier_stats_t, hbm_hit_requests) == 32 * 8); /* added after 0.1 */
ABI_CHECK(st_hbm_resident, offsetof(memtier_stats_t, hbm_resident_bytes) == 36 * 8);
ABI_CHECK(st_gds_fallbacks, offsetof(memtier_stats_t, gds_fallbacks) == 38 * 8);
ABI_CHECK(st_h2d_bytes, offsetof(memtier_stats_t, h2d_bytes) == 39 * 8);
ABI_CHECK(st_staged_read_ns, offsetof(memtier_stats_t, staged_read_ns) == 41 * 8);
ABI_CHECK(st_revalidations, offsetof(memtier_stats_t, revalidations) == 42 * 8); /* added in 0.3 */
ABI_CHECK(st_readv_inline_hits, offsetof(memtier_stats_t, readv_inline_hits) == 43 * 8);
ABI_CHECK(st_readv_uring_batches, offsetof(memtier_stats_t, readv_uring_batches) == 44 * 8); /* after 0.3 */
ABI_CHECK(st_readv_uring_fallback_unavailable,
          offsetof(memtier_stats_t, readv_uring_fallback_unavailable) == 47 * 8);
ABI_CHECK(st_remote_requests, offsetof(memtier_stats_t, remote_requests) == 48 * 8); /* after 0.3 */
ABI_CHECK(st_disk_cache_hit_blocks, offsetof(memtier_stats_t, disk_cache_hit_blocks) == 52 * 8);
ABI_CHECK(st_disk_cache_inline_writes, offsetof(memtier_stats_t, disk_cache_inline_writes) == 59 * 8);
ABI_CHECK(st_disk_cache_queue_waits, offsetof(memtier_stats_t, disk_cache_queue_waits) == 60 * 8);
ABI_CHECK(st_disk_cache_trusted_pieces, offsetof(memtier_stats_t, disk_cache_trusted_pieces) == 62 * 8);
ABI_CHECK(st_size, sizeof(memtier_stats_t) == 64 * 8);

int main(void) {
    const char* v = memtier_version();
    if (v == NULL || strcmp(v, MEMTIER_VERSION_STRING) != 0) {
        fprintf(stderr, "FAIL: memtier_version() = \"%s\", header says \"%s\"\n",
                v ? v : "(null)", MEMTIER_VERSION_STRING);
        return 1;
    }
    if (memtier_version_number() != MEMTIER_VERSION_NUMBER) {
        fprintf(stderr, "FAIL: memtier_version_number() = %d, header says %d\n",
                memtier_version_number(), MEMTIER_VERSION_NUMBER);
        return 1;
    }
    printf("header_c99: ABI pinned, library version %s\n", v);
    return 0;
}
