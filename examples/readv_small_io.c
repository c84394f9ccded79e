/*
 * readv_small_io: many small random reads through one memtier_readv call per
 * batch, against a loop of memtier_read.
 *
 * Makes a 64 MiB experiment-pattern file and reads 10,000 random 4 KiB-aligned
 * 4 KiB blocks (fixed seed) twice, with the DRAM cache off so both runs go to
 * storage (page cache warm): once as memtier_readv batches of 256, once as a loop
 * of memtier_read. Every block is checked. Stats show readv_calls and
 * coalesced_reads (storage reads left after adjacent blocks were merged). A last
 * batch mixes the pattern file and a small P-file (per-element path) with one
 * element past end of file: each element gets its own result.
 *
 * Flags: --count=N (10000; 1..10,000,000), --batch=N (256; 1..65536),
 * --size=SIZE (file, 64M; at least 12K, and it must fit in the free space of
 * $TMPDIR minus a safety margin, the smaller of 1 GiB and 5% of the file system).
 * Exit 0 (OK), 1 (a check failed), 2 (a bad flag value, or a size refused).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "memtier.h"
#include "mt_util.h"

#define BLK 4096u
#define MAX_COUNT 10000000L
#define MAX_BATCH 65536L

int main(int argc, char** argv) {
    long count = 10000, batch = 256;
    uint64_t fsize = 64 * MT_MIB;
    int help = 0;
    const mt_flag_t flags[] = {
        {"count", MT_FLAG_INT, &count, "number of 4 KiB reads (default 10000)"},
        {"batch", MT_FLAG_INT, &batch, "reads per memtier_readv call (default 256)"},
        {"size", MT_FLAG_SIZE, &fsize, "size of the temporary file (default 64M)"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    mt_parse_args(argc, argv, flags, nflags, NULL, 0, "usage: readv_small_io [flags]\n");
    mt_flag_range("count", count, 1, MAX_COUNT);
    mt_flag_range("batch", batch, 1, MAX_BATCH);
    /* The mixed batch reads the pattern file's blocks 0 and 2: at least 3 blocks. */
    mt_flag_size_range("size", fsize, 3 * BLK, UINT64_MAX);
    /* A batch never holds more than count elements: buffers are sized for that. */
    const long slots = batch < count ? batch : count;

    mt_print_banner("readv_small_io");
    char a[32];
    printf("reads %ld random 4 KiB blocks of a %s file: memtier_readv in batches of %ld\n", count,
           mt_fmt_bytes(a, sizeof a, fsize), batch);
    printf("vs one memtier_read per block (DRAM cache off, page cache warm). readv sorts each\n");
    printf("batch by offset, merges adjacent blocks and serves them in parallel; a failed\n");
    printf("element (past end of file) does not affect the others.\n");

    const char* path = mt_temp_file("readv_small_io", fsize, MT_CONTENT_PATTERN);

    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 0;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(&cfg, &ctx), "memtier_init");

    uint64_t* offs = (uint64_t*)malloc((size_t)count * sizeof *offs);
    memtier_iovec_t* iov = (memtier_iovec_t*)calloc((size_t)slots, sizeof *iov);
    uint8_t* buf = (uint8_t*)mt_alloc((size_t)slots * BLK);
    if (offs == NULL || iov == NULL) mt_die("out of memory");
    mt_rng_t rng;
    mt_rng_seed(&rng, 42);
    const uint64_t nblocks = fsize / BLK;
    for (long i = 0; i < count; i++) offs[i] = mt_rng_below(&rng, nblocks) * BLK;

    int ok = 1;

    /* 1. memtier_readv in batches. */
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
    uint64_t readv_ns = 0;
    for (long i = 0; i < count; i += batch) {
        size_t n = (size_t)(count - i < batch ? count - i : batch);
        for (size_t k = 0; k < n; k++) {
            iov[k].offset = offs[i + (long)k];
            iov[k].size = BLK;
            iov[k].dst = buf + k * BLK;
            iov[k].path = NULL;
            iov[k].result = 0;
        }
        uint64_t t0 = mt_now_ns();
        int st = memtier_readv(ctx, path, iov, n, MEMTIER_TARGET_CPU);
        readv_ns += mt_now_ns() - t0;
        mt_check(st, "memtier_readv");
        for (size_t k = 0; k < n; k++) {
            if (iov[k].result != (int64_t)BLK)
                mt_die("readv element %ld: result %" PRId64 ", expected %u", i + (long)k,
                       iov[k].result, BLK);
            uint64_t bad = mt_pattern_check(iov[k].dst, iov[k].offset, BLK);
            if (bad != MT_NO_MISMATCH) mt_die("readv element %ld: wrong byte at offset %" PRIu64, i + (long)k, bad);
        }
    }
    memtier_stats_t sv;
    mt_check(memtier_stats(ctx, &sv), "memtier_stats");

    /* 2. A loop of memtier_read. */
    mt_check(memtier_stats_reset(ctx), "memtier_stats_reset");
    uint64_t loop_ns = 0;
    for (long i = 0; i < count; i += batch) {
        size_t n = (size_t)(count - i < batch ? count - i : batch);
        uint64_t t0 = mt_now_ns();
        for (size_t k = 0; k < n; k++)
            mt_check(memtier_read(ctx, path, offs[i + (long)k], BLK, buf + k * BLK, MEMTIER_TARGET_CPU),
                     "memtier_read");
        loop_ns += mt_now_ns() - t0;
        for (size_t k = 0; k < n; k++) {
            uint64_t bad = mt_pattern_check(buf + k * BLK, offs[i + (long)k], BLK);
            if (bad != MT_NO_MISMATCH) mt_die("memtier_read %ld: wrong byte at offset %" PRIu64, i + (long)k, bad);
        }
    }
    memtier_stats_t sl;
    mt_check(memtier_stats(ctx, &sl), "memtier_stats");

    const uint64_t total = (uint64_t)count * BLK;
    double tv = (double)readv_ns / 1e9, tl = (double)loop_ns / 1e9;
    printf("\n%-13s %9s %9s %10s %9s %12s %11s %12s\n", "method", "seconds", "GB/s", "reads/s",
           "requests", "readv_calls", "coalesced", "storage");
    printf("%-13s %9.4f %9.3f %10.0f %9" PRIu64 " %12" PRIu64 " %11" PRIu64 " %12" PRIu64 "\n",
           "readv", tv, mt_gbps(total, tv), (double)count / tv, (uint64_t)sv.requests,
           (uint64_t)sv.readv_calls, (uint64_t)sv.coalesced_reads, (uint64_t)sv.storage_bytes);
    printf("%-13s %9.4f %9.3f %10.0f %9" PRIu64 " %12" PRIu64 " %11" PRIu64 " %12" PRIu64 "\n",
           "read loop", tl, mt_gbps(total, tl), (double)count / tl, (uint64_t)sl.requests,
           (uint64_t)sl.readv_calls, (uint64_t)sl.coalesced_reads, (uint64_t)sl.storage_bytes);
    printf("readv vs read loop: %.2fx; all %ld blocks verified in both runs\n", tv > 0 ? tl / tv : 0.0, count);
    uint64_t want_calls = (uint64_t)((count + batch - 1) / batch);
    printf("readv: %" PRIu64 " calls, %" PRIu64 " elements became %" PRIu64 " storage reads (%.1f%% merged)\n",
           (uint64_t)sv.readv_calls, (uint64_t)count, (uint64_t)sv.coalesced_reads,
           sv.coalesced_reads ? 100.0 * (1.0 - (double)sv.coalesced_reads / (double)count) : 0.0);
    if (sv.readv_calls != want_calls) {
        printf("FAIL: stats readv_calls = %" PRIu64 ", expected %" PRIu64 "\n", (uint64_t)sv.readv_calls, want_calls);
        ok = 0;
    }
    if (sv.requests != (uint64_t)count || sl.requests != (uint64_t)count) {
        printf("FAIL: stats requests = %" PRIu64 " (readv) / %" PRIu64 " (loop), expected %ld each\n",
               (uint64_t)sv.requests, (uint64_t)sl.requests, count);
        ok = 0;
    }
    if (sv.coalesced_reads == 0 || sv.coalesced_reads > (uint64_t)count) {
        printf("FAIL: stats coalesced_reads = %" PRIu64 ", expected 1..%ld\n", (uint64_t)sv.coalesced_reads, count);
        ok = 0;
    }

    /* 3. Per-element results and per-element files: one batch over the pattern
     * file and a 10,000-byte P-file (iov.path), one element past the P-file's end. */
    const uint64_t psize = 10000;
    const char* pfile = mt_temp_file("readv_small_io_p", psize, MT_CONTENT_PFILE);
    /* Its own buffer, independent of --batch: one destination per element, each
     * as large as the element's size and page-aligned, none overlapping. */
    enum { MIX_N = 4 };
    const uint64_t mix_off[MIX_N] = {0, 1234, psize - 100, 2 * BLK};
    const uint64_t mix_len[MIX_N] = {BLK, 5000, BLK, BLK};
    const char* mix_path[MIX_N] = {NULL, pfile, pfile, NULL};
    size_t mix_at[MIX_N], mix_bytes = 0;
    for (int k = 0; k < MIX_N; k++) {
        mix_at[k] = mix_bytes;
        mix_bytes += (size_t)((mix_len[k] + BLK - 1) / BLK * BLK);
    }
    uint8_t* mbuf = (uint8_t*)mt_alloc(mix_bytes);
    memtier_iovec_t mix[MIX_N];
    for (int k = 0; k < MIX_N; k++) {
        mix[k].offset = mix_off[k];
        mix[k].size = mix_len[k];
        mix[k].dst = mbuf + mix_at[k];
        mix[k].path = mix_path[k];
        mix[k].result = 0;
    }
    int mst = memtier_readv(ctx, path, mix, MIX_N, MEMTIER_TARGET_CPU);
    int good = mst == MEMTIER_ERR_EOF && mix[0].result == (int64_t)BLK && mix[1].result == 5000 &&
               mix[2].result == MEMTIER_ERR_EOF && mix[3].result == (int64_t)BLK &&
               mt_pattern_check(mix[0].dst, mix_off[0], BLK) == MT_NO_MISMATCH &&
               mt_pfile_check(mix[1].dst, mix_off[1], 5000) == MT_NO_MISMATCH &&
               mt_pattern_check(mix[3].dst, mix_off[3], BLK) == MT_NO_MISMATCH;
    printf("mixed batch (2 files, element 2 past the P-file's end): readv -> %s,\n", mt_status_name(mst));
    printf("  results [%" PRId64 ", %" PRId64 ", %" PRId64 " (%s), %" PRId64 "] -> %s\n", mix[0].result,
           mix[1].result, mix[2].result, mt_status_name((int)mix[2].result), mix[3].result,
           good ? "bytes of the others verified, as documented" : "UNEXPECTED");
    if (!good) ok = 0;

    printf("stats of the readv run:\n");
    mt_stats_print(stdout, "  ", &sv);

    free(offs);
    free(iov);
    free(buf);
    free(mbuf);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    printf("%s\n", ok ? "readv_small_io: OK" : "readv_small_io: FAILED");
    return ok ? 0 : 1;
}
