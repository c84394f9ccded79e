/*
 * prefetch_demo: bring a range into the DRAM cache in the background, then read
 * it from there.
 *
 * Makes a 96 MiB experiment-pattern file and drops it from the page cache.
 * memtier_prefetch_async starts loading [16 MiB, 80 MiB) into the DRAM cache;
 * meanwhile the program does other work (builds the expected bytes for the later
 * check, polling memtier_request_test between slices); then it waits and reads the
 * range in 4 MiB chunks: every request must be a cache hit with no storage bytes.
 * Finally MEMTIER_PREFETCH_TO_HBM is asked for; a machine without a usable CUDA GPU answers
 * MEMTIER_ERR_UNSUPPORTED, which is the expected result, not a failure.
 *
 * Exit 0/1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "memtier.h"
#include "mt_util.h"

int main(int argc, char** argv) {
    int help = 0;
    const mt_flag_t flags[] = {{"help", MT_FLAG_BOOL, &help, "this text"}};
    if (mt_parse_flags(argc, argv, flags, 1, NULL, 0) < 0) return 2;
    if (help) {
        printf("usage: prefetch_demo (no arguments)\n");
        return 0;
    }

    mt_print_banner("prefetch_demo");
    const uint64_t M = MT_MIB;
    const uint64_t fsize = 96 * M, off = 16 * M, len = 64 * M, chunk = 4 * M;
    printf("memtier_prefetch_async loads 64 MiB [16 MiB, 80 MiB) of a 96 MiB file into the\n");
    printf("DRAM cache while the program does other work; the reads that follow must all be\n");
    printf("cache hits. MEMTIER_PREFETCH_TO_HBM is UNSUPPORTED without a usable CUDA GPU (expected).\n");

    const char* path = mt_temp_file("prefetch_demo", fsize, MT_CONTENT_PATTERN);
    if (mt_drop_page_cache(path) != 0) printf("note: could not drop the page cache: %s\n", strerror(errno));

    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 1;
    cfg.cache_bytes = 256 * M;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(&cfg, &ctx), "memtier_init");

    uint8_t* expect = (uint8_t*)mt_alloc((size_t)len);
    uint8_t* buf = (uint8_t*)mt_alloc((size_t)len);
    int ok = 1;

    /* 1. Start the prefetch. */
    memtier_prefetch_opts_t opts = {sizeof(memtier_prefetch_opts_t), MEMTIER_PREFETCH_TO_DRAM};
    memtier_request_t* req = NULL;
    uint64_t t0 = mt_now_ns();
    mt_check(memtier_prefetch_async(ctx, path, off, len, &opts, &req), "memtier_prefetch_async");
    uint64_t t_submit = mt_now_ns();

    /* 2. Other work: build the expected bytes, 1 MiB at a time, polling. */
    uint64_t busy_polls = 0, polls = 0;
    for (uint64_t o = 0; o < len; o += M) {
        mt_pattern_fill(expect + o, off + o, (size_t)M);
        polls++;
        if (memtier_request_test(req, NULL) == MEMTIER_ERR_BUSY) busy_polls++;
    }
    uint64_t t_work = mt_now_ns();

    /* 3. Wait. */
    uint64_t moved = 0;
    int wst = memtier_request_wait(req, -1, &moved);
    uint64_t t_done = mt_now_ns();
    if (wst != MEMTIER_OK) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", memtier_last_error());
        mt_die("memtier_request_wait(prefetch): %s (%s): %s", memtier_strerror(wst), mt_status_name(wst), detail);
    }
    mt_check(memtier_request_release(req), "memtier_request_release");
    printf("\nprefetch submitted in %.3f ms; other work took %.2f ms (request still running at\n"
           "%" PRIu64 " of %" PRIu64 " polls); wait returned after %.2f ms more; %" PRIu64 " bytes reported moved\n",
           (double)(t_submit - t0) / 1e6, (double)(t_work - t_submit) / 1e6, busy_polls, polls,
           (double)(t_done - t_work) / 1e6, moved);

    memtier_stats_t sp;
    mt_check(memtier_stats(ctx, &sp), "memtier_stats");
    printf("after prefetch: prefetch_requests=%" PRIu64 " prefetch_bytes=%" PRIu64
           " cache_resident=%" PRIu64 " storage_bytes=%" PRIu64 "\n",
           (uint64_t)sp.prefetch_requests, (uint64_t)sp.prefetch_bytes,
           (uint64_t)sp.cache_resident_bytes, (uint64_t)sp.storage_bytes);
    if (sp.cache_resident_bytes < len) {
        printf("FAIL: the cache holds %" PRIu64 " bytes, less than the %" PRIu64 " prefetched\n",
               (uint64_t)sp.cache_resident_bytes, len);
        ok = 0;
    }

    /* 4. Read the range: all hits. */
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
    uint64_t r0 = mt_now_ns();
    for (uint64_t o = 0; o < len; o += chunk)
        mt_check(memtier_read(ctx, path, off + o, chunk, buf + o, MEMTIER_TARGET_CPU), "memtier_read");
    double rs = (double)(mt_now_ns() - r0) / 1e9;
    memtier_stats_t sr;
    mt_check(memtier_stats(ctx, &sr), "memtier_stats");
    int bytes_ok = memcmp(buf, expect, (size_t)len) == 0;
    const uint64_t nreq = len / chunk;
    printf("read back 64 MiB in %" PRIu64 " x 4 MiB: %.4f s (%.2f GB/s); bytes %s\n", nreq, rs,
           mt_gbps(len, rs), bytes_ok ? "verified" : "WRONG");
    printf("read stats: requests=%" PRIu64 " cache_hit_requests=%" PRIu64 " cache_hit_bytes=%" PRIu64
           " storage_bytes=%" PRIu64 "\n",
           (uint64_t)sr.requests, (uint64_t)sr.cache_hit_requests, (uint64_t)sr.cache_hit_bytes,
           (uint64_t)sr.storage_bytes);
    if (!bytes_ok) {
        printf("FAIL: first wrong byte at file offset %" PRIu64 "\n", mt_pattern_check(buf, off, (size_t)len));
        ok = 0;
    }
    if (sr.cache_hit_requests != nreq || sr.cache_hit_bytes != len || sr.storage_bytes != 0) {
        printf("FAIL: expected %" PRIu64 " cache-hit requests, %" PRIu64 " hit bytes, 0 storage bytes\n",
               nreq, len);
        ok = 0;
    } else {
        printf("all %" PRIu64 " reads were cache hits\n", nreq);
    }

    /* 5. TO_HBM. */
    memtier_prefetch_opts_t hbm = {sizeof(memtier_prefetch_opts_t), MEMTIER_PREFETCH_TO_HBM};
    memtier_request_t* hreq = NULL;
    int hst = memtier_prefetch_async(ctx, path, off, len, &hbm, &hreq);
    char hdetail[256] = "";
    if (hst != MEMTIER_OK) snprintf(hdetail, sizeof hdetail, "%s", memtier_last_error());
    const char* where = "at submit";
    if (hst == MEMTIER_OK && hreq != NULL) {
        hst = memtier_request_wait(hreq, -1, NULL);
        if (hst != MEMTIER_OK) snprintf(hdetail, sizeof hdetail, "%s", memtier_last_error());
        memtier_request_release(hreq);
        where = "at wait";
    }
    int sst = memtier_prefetch(ctx, path, off, len, &hbm);
    if (hst == MEMTIER_ERR_UNSUPPORTED && sst == MEMTIER_ERR_UNSUPPORTED) {
        printf("MEMTIER_PREFETCH_TO_HBM: async -> %s (%s), sync -> %s: expected without a usable CUDA GPU\n"
               "  detail: %s\n",
               mt_status_name(hst), where, mt_status_name(sst), hdetail);
    } else if (hst == MEMTIER_OK && sst == MEMTIER_OK) {
        printf("MEMTIER_PREFETCH_TO_HBM: supported by this build (CUDA)\n");
    } else {
        printf("FAIL: MEMTIER_PREFETCH_TO_HBM: async -> %s (%s) %s, sync -> %s\n", mt_status_name(hst),
               where, hdetail, mt_status_name(sst));
        ok = 0;
    }

    free(buf);
    free(expect);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    printf("%s\n", ok ? "prefetch_demo: OK" : "prefetch_demo: FAILED");
    return ok ? 0 : 1;
}
