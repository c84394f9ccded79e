/*
 * mt_test.h: the few helpers the C API tests share (header only).
 *
 * Exit codes: 0 pass, 1 fail (the message names the failing check), 77 skip.
 * Test files live in a private mkdtemp directory that is removed at exit.
 * A "P-file" holds byte i = (i * 131 + 7) & 0xFF at file offset i.
 */
#ifndef MT_TEST_H
#define MT_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "memtier.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MT_SKIP_CODE 77
#define MT_FN static __attribute__((unused))
#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)

/* ------------------------------------------------------------- reporting */

static const char* mt_test_name __attribute__((unused)) = "test";

MT_FN void mt_fail_at(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
MT_FN void mt_fail_at(const char* file, int line, const char* fmt, ...) {
    va_list ap;
    fprintf(stderr, "FAIL %s (%s:%d): ", mt_test_name, file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    fflush(stderr);
    exit(1);
}

#define MT_FAIL(...) mt_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* MT_CHECK(cond, "what, with %d values", ...) */
#define MT_CHECK(cond, ...)                                                        \
    do {                                                                           \
        if (!(cond)) mt_fail_at(__FILE__, __LINE__, "check `" #cond "`: " __VA_ARGS__); \
    } while (0)

/* MT_STATUS(call, want): call must return exactly the status want. */
#define MT_STATUS(call, want)                                                       \
    do {                                                                            \
        int mt_got_ = (call);                                                       \
        int mt_want_ = (want);                                                      \
        if (mt_got_ != mt_want_)                                                    \
            mt_fail_at(__FILE__, __LINE__, "%s returned %d (%s), want %d (%s); last_error: %s", \
                       #call, mt_got_, memtier_strerror(mt_got_), mt_want_,        \
                       memtier_strerror(mt_want_), memtier_last_error());          \
    } while (0)

#define MT_OK(call) MT_STATUS(call, MEMTIER_OK)

/* MT_EQ_U64(a, b, "what"): exact counter comparison with both values printed. */
#define MT_EQ_U64(a, b, what)                                                      \
    do {                                                                           \
        unsigned long long mt_a_ = (unsigned long long)(a);                        \
        unsigned long long mt_b_ = (unsigned long long)(b);                        \
        if (mt_a_ != mt_b_)                                                        \
            mt_fail_at(__FILE__, __LINE__, "%s: %s = %llu, want %s = %llu", what, #a, \
                       mt_a_, #b, mt_b_);                                          \
    } while (0)

/* Names the test and makes stdout line-buffered so output interleaves in order. */
MT_FN void mt_begin(const char* name) {
    mt_test_name = name;
    setvbuf(stdout, NULL, _IOLBF, 0);
}

MT_FN void mt_skip(const char* why) __attribute__((noreturn));
MT_FN void mt_skip(const char* why) {
    printf("SKIP %s: %s\n", mt_test_name, why);
    fflush(stdout);
    exit(MT_SKIP_CODE);
}

MT_FN void mt_pass(void) {
    printf("PASS %s\n", mt_test_name);
    fflush(stdout);
}

/* ------------------------------------------------------------- P pattern */

MT_FN inline uint8_t mt_p(uint64_t i) { return (uint8_t)((i * 131 + 7) & 0xFF); }

/* Fills buf with P bytes for file offsets [off, off + n). */
MT_FN void mt_fill_p(uint8_t* buf, uint64_t off, uint64_t n) {
    uint64_t i;
    for (i = 0; i < n; i++) buf[i] = mt_p(off + i);
}

/* Index of the first byte of buf that is not P at [off, off + n), or -1. */
MT_FN int64_t mt_find_p_mismatch(const uint8_t* buf, uint64_t off, uint64_t n) {
    uint64_t i;
    for (i = 0; i < n; i++)
        if (buf[i] != mt_p(off + i)) return (int64_t)i;
    return -1;
}

/* Index of the first byte of buf that is not v, or -1. */
MT_FN int64_t mt_find_not(const uint8_t* buf, uint8_t v, uint64_t n) {
    uint64_t i;
    for (i = 0; i < n; i++)
        if (buf[i] != v) return (int64_t)i;
    return -1;
}

/* ----------------------------------------------------------- temp files */

#define MT_MAX_FILES 64
static char mt_dir[512];
static char* mt_files[MT_MAX_FILES];
static int mt_nfiles;
static pid_t mt_owner_pid;

MT_FN void mt_cleanup(void) {
    int i;
    if (mt_dir[0] == '\0' || getpid() != mt_owner_pid) return;
    for (i = 0; i < mt_nfiles; i++) {
        if (mt_files[i] == NULL) continue; /* (never; tells gcc -Wnonnull so in tests that make no file) */
        unlink(mt_files[i]);
        free(mt_files[i]);
    }
    mt_nfiles = 0;
    rmdir(mt_dir);
    mt_dir[0] = '\0';
}

/* Creates the private temp directory under base (NULL: $TMPDIR or /tmp). */
MT_FN const char* mt_tmpdir_in(const char* base) {
    if (mt_dir[0] != '\0') return mt_dir;
    if (base == NULL) base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    snprintf(mt_dir, sizeof mt_dir, "%s/memtier_test_XXXXXX", base);
    if (mkdtemp(mt_dir) == NULL) {
        int e = errno;
        mt_dir[0] = '\0';
        MT_FAIL("mkdtemp in %s: %s", base, strerror(e));
    }
    mt_owner_pid = getpid();
    atexit(mt_cleanup);
    return mt_dir;
}

MT_FN const char* mt_tmpdir(void) { return mt_tmpdir_in(NULL); }

/* A path name inside the temp directory; remembered for cleanup. */
MT_FN const char* mt_path(const char* name) {
    char buf[1024];
    int i;
    snprintf(buf, sizeof buf, "%s/%s", mt_tmpdir(), name);
    for (i = 0; i < mt_nfiles; i++)
        if (strcmp(mt_files[i], buf) == 0) return mt_files[i];
    if (mt_nfiles == MT_MAX_FILES) MT_FAIL("too many temp files");
    mt_files[mt_nfiles] = strdup(buf);
    return mt_files[mt_nfiles++];
}

/* Writes size bytes produced by gen (P if gen is NULL) to path. */
MT_FN void mt_write_file_gen(const char* path, uint64_t size, uint8_t (*gen)(uint64_t)) {
    static uint8_t chunk[1 << 16];
    uint64_t off = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) MT_FAIL("create %s: %s", path, strerror(errno));
    while (off < size) {
        uint64_t n = size - off < sizeof chunk ? size - off : sizeof chunk;
        uint64_t i;
        for (i = 0; i < n; i++) chunk[i] = gen ? gen(off + i) : mt_p(off + i);
        if (pwrite(fd, chunk, n, (off_t)off) != (ssize_t)n)
            MT_FAIL("write %s: %s", path, strerror(errno));
        off += n;
    }
    if (close(fd) != 0) MT_FAIL("close %s: %s", path, strerror(errno));
}

/* Creates a P-file named name of size bytes in the temp directory. */
MT_FN const char* mt_make_pfile(const char* name, uint64_t size) {
    const char* path = mt_path(name);
    mt_write_file_gen(path, size, NULL);
    return path;
}

/* Page-aligned allocation, failing the test when memory runs out. */
MT_FN void* mt_alloc(size_t n) {
    void* p = NULL;
    if (posix_memalign(&p, 4096, n ? n : 1) != 0) MT_FAIL("out of memory (%zu bytes)", n);
    return p;
}

MT_FN memtier_ctx_t* mt_init_cfg(const memtier_config_t* cfg) {
    memtier_ctx_t* ctx = NULL;
    MT_OK(memtier_init(cfg, &ctx));
    MT_CHECK(ctx != NULL, "memtier_init returned OK with a NULL context");
    return ctx;
}

MT_FN memtier_stats_t mt_stats(memtier_ctx_t* ctx) {
    memtier_stats_t st;
    MT_OK(memtier_stats(ctx, &st));
    return st;
}

MT_FN double mt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: reproducible per-thread random numbers. */
MT_FN inline uint64_t mt_rand(uint64_t* s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

#endif /* MT_TEST_H */
