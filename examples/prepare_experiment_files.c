/*
 * prepare_experiment_files: write an experiment file with the deterministic
 * pattern (see examples/common/mt_util.h) for the examples and benchmarks.
 *
 *   prepare_experiment_files NAME SIZE [--dir=D] [--verify]
 *
 * Writes D/NAME with SIZE bytes (K/M/G/T suffixes: powers of 1024) in 8 MiB
 * pwrite chunks, then fsync. D is --dir, else $MEMTIER_EXPERIMENT_DIR, else
 * /mnt/gds2/cwd_test if it exists or can be created, else ./memtier_experiments.
 * A missing directory is created. Files over 256 MiB get a progress line on
 * stderr every ~5%. Prints the path, the size and the fnv1a64w checksum.
 * --verify drops the file from the page cache and re-reads it with plain pread,
 * checking every byte against the pattern.
 *
 * Safety: D/NAME must be a regular file or missing (a FIFO, directory or device
 * is refused before it is opened: exit 2). SIZE bytes must fit in the free space
 * of D's file system minus a safety margin (the smaller of 1 GiB and 5% of the
 * file system; an existing NAME's blocks count as free, it is replaced): else
 * exit 2 before anything is written. A write that fails (ENOSPC, EIO, ...)
 * removes the partial file and exits 1.
 *
 * With no arguments: writes and verifies a 16 MiB file in a temporary directory,
 * deletes it, prints the usage and exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

static void usage(FILE* f, const mt_flag_t* flags, size_t nflags) {
    fprintf(f,
            "usage: prepare_experiment_files NAME SIZE [flags]\n"
            "  writes DIR/NAME: SIZE bytes (K/M/G suffixes) of the deterministic experiment pattern\n"
            "  DIR: --dir, else $MEMTIER_EXPERIMENT_DIR, else %s (created if possible),\n"
            "       else ./memtier_experiments\n"
            "  example: prepare_experiment_files memtier_exp_1g.bin 1073741824\n",
            MT_DEFAULT_EXPERIMENT_DIR);
    mt_print_flags(f, flags, nflags);
}

/* mkdir -p; returns 0 or -1 (errno set). */
static int mkdir_p(const char* dir) {
    char tmp[4096];
    if (strlen(dir) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(tmp, dir);
    for (char* p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(tmp, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static int write_file(const char* path, uint64_t size) {
    /* A FIFO, directory or device: refused (exit 2) before any open. */
    struct stat st;
    const int exists = mt_require_regular(path, &st);
    if (!exists && errno != ENOENT) {
        fprintf(stderr, "error: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* An existing file is replaced: its blocks are freed by the truncation. */
    const uint64_t freed = exists ? (uint64_t)st.st_blocks * 512 : 0;
    mt_require_space(path, size > freed ? size - freed : 0);
    /* O_EXCL: a file that is removed on failure must be one this run created. */
    int fd = mt_open_file(path, exists ? (O_WRONLY | O_TRUNC) : (O_WRONLY | O_CREAT | O_EXCL), 0644);
    if (fd < 0) {
        fprintf(stderr, "error: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint64_t t0 = mt_now_ns();
    /* On a failure: removes the partial file, says so, exits 1. */
    mt_write_file(fd, path, 0, size, MT_CONTENT_PATTERN, exists ? MT_FILE_REWRITTEN : MT_FILE_CREATED);
    double s = (double)(mt_now_ns() - t0) / 1e9;
    if (close(fd) != 0) {
        fprintf(stderr, "error: closing %s: %s\n", path, strerror(errno));
        return -1;
    }
    char b[32], abs[4096];
    printf("wrote     %s (%s)\n", mt_abs_path(path, abs, sizeof abs),
           exists ? "replaced the existing file" : "created");
    printf("size      %" PRIu64 " bytes (%s) in %.2f s, %.2f GB/s including fsync\n", size,
           mt_fmt_bytes(b, sizeof b, size), s, mt_gbps(size, s));
    printf("checksum  %s 0x%016" PRIx64 "  (%s)\n", MT_CHECKSUM_NAME, mt_pattern_checksum(size),
           MT_CHECKSUM_DESC);
    return 0;
}

/* Re-reads path with plain pread (after dropping it from the page cache). */
static int verify_file(const char* path, uint64_t size) {
    int64_t fs = mt_file_size(path);
    if (fs < 0 || (uint64_t)fs != size) {
        fprintf(stderr, "error: verify: %s has size %" PRId64 ", expected %" PRIu64 "\n", path, fs, size);
        return -1;
    }
    int dropped = mt_drop_page_cache(path) == 0;
    int fd = mt_open_file(path, O_RDONLY, 0);
    if (fd < 0) {
        fprintf(stderr, "error: verify: open %s: %s\n", path, strerror(errno));
        return -1;
    }
    const size_t chunk = 8u << 20;
    uint8_t* buf = (uint8_t*)mt_alloc(chunk);
    mt_checksum_t cs;
    mt_checksum_init(&cs);
    uint64_t t0 = mt_now_ns();
    int rc = 0;
    for (uint64_t off = 0; off < size;) {
        size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
        int64_t r = mt_pread_full(fd, buf, n, off);
        if (r != (int64_t)n) {
            fprintf(stderr, "error: verify: pread at %" PRIu64 ": %s\n", off,
                    r < 0 ? strerror(errno) : "file is shorter than expected");
            rc = -1;
            break;
        }
        uint64_t bad = mt_pattern_check(buf, off, n);
        if (bad != MT_NO_MISMATCH) {
            fprintf(stderr, "error: verify: byte at offset %" PRIu64 " differs from the pattern\n", bad);
            rc = -1;
            break;
        }
        mt_checksum_update(&cs, buf, n);
        off += n;
    }
    double s = (double)(mt_now_ns() - t0) / 1e9;
    close(fd);
    free(buf);
    if (rc == 0) {
        uint64_t sum = mt_checksum_final(&cs);
        if (sum != mt_pattern_checksum(size)) {
            fprintf(stderr, "error: verify: checksum 0x%016" PRIx64 " differs from the pattern's\n", sum);
            return -1;
        }
        printf("verified  every byte re-read with pread%s in %.2f s (%.2f GB/s); checksum 0x%016" PRIx64 "\n",
               dropped ? " after dropping the page cache" : " (page cache could not be dropped)", s,
               mt_gbps(size, s), sum);
    }
    return rc;
}

int main(int argc, char** argv) {
    const char* dir_flag = NULL;
    int verify = 0, help = 0;
    const mt_flag_t flags[] = {
        {"dir", MT_FLAG_STR, &dir_flag, "directory of the file (created when missing)"},
        {"verify", MT_FLAG_BOOL, &verify, "re-read the file with pread and check the pattern"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    const char* pos[2];
    int npos = mt_parse_flags(argc, argv, flags, nflags, pos, 2);
    if (npos < 0) return 2;
    if (help) {
        usage(stdout, flags, nflags);
        return 0;
    }

    if (npos == 0) {
        /* Self-demonstration: a 16 MiB file in a temporary directory. */
        printf("prepare_experiment_files: no NAME/SIZE given: writing and verifying a 16 MiB\n");
        printf("file in a temporary directory (removed afterwards), then the usage.\n");
        char* dir = mt_temp_dir_make("prepare");
        char path[4096];
        snprintf(path, sizeof path, "%s/memtier_exp_16m.bin", dir);
        mt_cleanup_add(path, 0);
        if (write_file(path, 16 * MT_MIB) != 0 || verify_file(path, 16 * MT_MIB) != 0) return 1;
        mt_cleanup_now();
        struct stat st;
        printf("removed   %s (%s)\n\n", path, stat(dir, &st) == 0 ? "directory still present!" : "and its directory");
        usage(stdout, flags, nflags);
        return 0;
    }
    if (npos != 2) {
        usage(stderr, flags, nflags);
        return 2;
    }
    const char* name = pos[0];
    uint64_t size = 0;
    if (mt_parse_size(pos[1], &size) != 0) {
        fprintf(stderr, "error: bad SIZE '%s' (bytes, with an optional K/M/G/T suffix)\n", pos[1]);
        return 2;
    }
    if (name[0] == '\0') {
        fprintf(stderr, "error: empty NAME\n");
        return 2;
    }

    const char* dir = dir_flag;
    const char* src = "--dir";
    if (dir == NULL || dir[0] == '\0') {
        dir = getenv("MEMTIER_EXPERIMENT_DIR");
        src = "MEMTIER_EXPERIMENT_DIR";
    }
    if (dir != NULL && dir[0] != '\0') {
        if (mkdir_p(dir) != 0) {
            fprintf(stderr, "error: directory %s (from %s): %s\n", dir, src, strerror(errno));
            return 1;
        }
    } else if (mkdir_p(MT_DEFAULT_EXPERIMENT_DIR) == 0 && access(MT_DEFAULT_EXPERIMENT_DIR, W_OK) == 0) {
        dir = MT_DEFAULT_EXPERIMENT_DIR;
    } else {
        int e = errno;
        dir = "./memtier_experiments";
        if (mkdir_p(dir) != 0) {
            fprintf(stderr, "error: cannot create %s: %s\n", dir, strerror(errno));
            return 1;
        }
        printf("note: %s is not usable (%s); using %s instead (set --dir or MEMTIER_EXPERIMENT_DIR)\n",
               MT_DEFAULT_EXPERIMENT_DIR, strerror(e), dir);
    }

    char path[4096];
    int plen;
    if (name[0] == '/')
        plen = snprintf(path, sizeof path, "%s", name);
    else
        plen = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (plen < 0 || (size_t)plen >= sizeof path) {
        fprintf(stderr, "error: the path of NAME is too long (%d bytes; at most %zu)\n", plen, sizeof path - 1);
        return 2;
    }
    if (name[0] == '/') printf("note: NAME is an absolute path; the directory is not used\n");

    if (write_file(path, size) != 0) return 1;
    if (verify && verify_file(path, size) != 0) return 1;
    return 0;
}
