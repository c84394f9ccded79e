/*
 * basic_read: read a whole file through memtier_read and check every byte.
 *
 *   basic_read            makes an 8 MiB experiment-pattern file in $TMPDIR (or
 *                         /tmp), reads it, verifies it, removes it
 *   basic_read FILE       reads FILE in 64 MiB chunks; prints size, GB/s and the
 *                         fnv1a64w checksum; says "pattern verified" when FILE
 *                         holds the experiment pattern (prepare_experiment_files)
 *
 * Flags: --chunk=SIZE (default 64M; 1 byte..1T, and the buffers it needs,
 * min(chunk, size of FILE) twice, must fit in memory), --no-verify (skip the
 * pread comparison of a FILE that is not a pattern file).
 * FILE must be a regular file: a FIFO, directory or device is refused before it
 * is opened. Exit 0 on success, 1 on any failure, 2 on a bad flag value or a
 * FILE that is not a regular file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

int main(int argc, char** argv) {
    uint64_t chunk = 64 * MT_MIB;
    int no_verify = 0, help = 0;
    const mt_flag_t flags[] = {
        {"chunk", MT_FLAG_SIZE, &chunk, "bytes per memtier_read call (default 64M)"},
        {"no-verify", MT_FLAG_BOOL, &no_verify, "FILE: do not compare with plain pread"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    const char* pos[1];
    int npos = mt_parse_args(argc, argv, flags, nflags, pos, 1,
                             "usage: basic_read [FILE] [flags]\n");
    mt_flag_size_range("chunk", chunk, 1, 1024 * MT_GIB);

    mt_print_banner("basic_read");
    const int own_file = npos == 0;
    const char* path;
    if (own_file) {
        path = mt_temp_file("basic_read", 8 * MT_MIB, MT_CONTENT_PATTERN);
        printf("no FILE given: made an 8 MiB experiment-pattern file %s\n", path);
    } else {
        path = pos[0];
        /* Before anything opens it: a FIFO would block memtier_read and open(2). */
        if (!mt_require_regular(path, NULL)) mt_die("%s: %s", path, strerror(errno));
    }
    printf("reads the whole file through memtier_read in %s chunks into one host buffer,\n",
           mt_fmt_bytes((char[32]){0}, 32, chunk));
    printf("checks every byte (%s), and prints throughput and the %s checksum.\n",
           own_file ? "against the experiment pattern"
                    : (no_verify ? "pattern check only: --no-verify" : "against plain pread"),
           MT_CHECKSUM_NAME);

    int64_t fsize = mt_file_size(path);
    if (fsize < 0) mt_die("%s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)fsize;

    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(NULL, &ctx), "memtier_init");

    size_t cap = (size_t)(size < chunk ? (size > 0 ? size : 1) : chunk);
    const int pread_verify = !own_file && !no_verify;
    mt_require_memory(pread_verify ? "the read and pread buffers (2 x min(--chunk, file size))"
                                   : "the read buffer (min(--chunk, file size))",
                      (uint64_t)cap * (pread_verify ? 2 : 1));
    uint8_t* buf = (uint8_t*)mt_alloc(cap);
    uint8_t* ref = NULL;
    int fd = -1;
    if (pread_verify) {
        ref = (uint8_t*)mt_alloc(cap);
        fd = mt_open_file(path, O_RDONLY, 0);
        if (fd < 0) mt_die("open %s: %s", path, strerror(errno));
    }

    mt_checksum_t cs;
    mt_checksum_init(&cs);
    uint64_t pattern_bad = MT_NO_MISMATCH; /* first offset that differs from the pattern */
    uint64_t read_ns = 0;
    if (size == 0) {
        /* A zero-length read succeeds and does not touch dst. */
        mt_check(memtier_read(ctx, path, 0, 0, NULL, MEMTIER_TARGET_CPU), "memtier_read(size 0)");
    }
    for (uint64_t off = 0; off < size;) {
        uint64_t n = size - off < cap ? size - off : cap;
        uint64_t t0 = mt_now_ns();
        int st = memtier_read(ctx, path, off, n, buf, MEMTIER_TARGET_CPU);
        read_ns += mt_now_ns() - t0;
        if (st != MEMTIER_OK) {
            char what[128];
            snprintf(what, sizeof what, "memtier_read(offset %" PRIu64 ", size %" PRIu64 ")", off, n);
            mt_check(st, what);
        }
        mt_checksum_update(&cs, buf, (size_t)n);
        if (pattern_bad == MT_NO_MISMATCH) pattern_bad = mt_pattern_check(buf, off, (size_t)n);
        if (pread_verify) {
            int64_t r = mt_pread_full(fd, ref, (size_t)n, off);
            if (r < 0) mt_die("pread %s: %s", path, strerror(errno));
            if ((uint64_t)r != n) mt_die("pread %s: file shrank while reading", path);
            if (memcmp(buf, ref, (size_t)n) != 0) {
                size_t i = 0;
                while (buf[i] == ref[i]) i++;
                mt_die("memtier_read returned wrong bytes at offset %" PRIu64
                       ": got 0x%02x, pread gives 0x%02x",
                       off + i, buf[i], ref[i]);
            }
        }
        off += n;
    }
    uint64_t sum = mt_checksum_final(&cs);
    double secs = (double)read_ns / 1e9;

    char sz[32];
    printf("file      %s\n", path);
    printf("size      %" PRIu64 " bytes (%s)\n", size, mt_fmt_bytes(sz, sizeof sz, size));
    printf("read      %.4f s, %.2f GB/s (memtier_read time only, 1 GB = 1e9 B)\n", secs,
           mt_gbps(size, secs));
    printf("checksum  %s 0x%016" PRIx64 "  (%s)\n", MT_CHECKSUM_NAME, sum, MT_CHECKSUM_DESC);

    int ok = 1;
    if (size == 0) {
        printf("empty file: nothing to verify (a zero-length memtier_read succeeded)\n");
    } else if (pattern_bad == MT_NO_MISMATCH) {
        uint64_t want = mt_pattern_checksum(size);
        if (want != sum) {
            printf("FAIL: pattern bytes matched but the checksum 0x%016" PRIx64
                   " differs from the pattern's 0x%016" PRIx64 "\n", sum, want);
            ok = 0;
        } else {
            printf("pattern verified (all %" PRIu64 " bytes; checksum equals mt_pattern_checksum)\n", size);
        }
    } else if (own_file) {
        printf("FAIL: byte at offset %" PRIu64 " differs from the experiment pattern\n", pattern_bad);
        ok = 0;
    } else {
        printf("not an experiment-pattern file (first difference at offset %" PRIu64 ")%s\n",
               pattern_bad, pread_verify ? "; every byte matched plain pread" : "");
    }

    memtier_stats_t st;
    mt_check(memtier_stats(ctx, &st), "memtier_stats");
    printf("stats:\n");
    mt_stats_print(stdout, "  ", &st);
    if (st.bytes != size) {
        printf("FAIL: stats.bytes = %" PRIu64 ", expected %" PRIu64 "\n", (uint64_t)st.bytes, size);
        ok = 0;
    }

    if (fd >= 0) close(fd);
    free(ref);
    free(buf);
    mt_check(memtier_finalize(ctx), "memtier_finalize");
    printf("%s\n", ok ? "basic_read: OK" : "basic_read: FAILED");
    return ok ? 0 : 1;
}
