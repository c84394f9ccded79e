/*
 * Description: field case B21 (C side; tests/field_cases.md). libmemtier.so is a Go
 * c-shared library marked STATIC_TLS, so dlopen() must fit its TLS block into
 * glibc's limited surplus static TLS. This program is NOT linked against
 * libmemtier: it first dlopen()s libmemtier_tls_hog.so (argv[2]; about 1 KiB
 * of initial-exec __thread data, checked to be STATIC_TLS and touched), then
 * dlopen()s libmemtier.so (argv[1]), which must succeed. It resolves
 * memtier_init / memtier_read / memtier_finalize (and the error helpers) with
 * dlsym and reads a P-file correctly, on the main thread and on a new thread
 * that also touches the hog's TLS. The PT_TLS sizes of both libraries are
 * printed. memtier.h is included for its types only: no memtier symbol is
 * referenced at link time (mt_test.h would, so its helpers are not used).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "memtier.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_SIZE (256 * 1024)
#define HOG_BYTES 1024

#define FAIL(...)                                                         \
    do {                                                                  \
        fprintf(stderr, "FAIL test_static_tls (%s:%d): ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                     \
        fprintf(stderr, "\n");                                            \
        exit(1);                                                          \
    } while (0)

typedef int (*init_fn)(const memtier_config_t*, memtier_ctx_t**);
typedef int (*read_fn)(memtier_ctx_t*, const char*, uint64_t, uint64_t, void*, int);
typedef int (*finalize_fn)(memtier_ctx_t*);
typedef const char* (*strerror_fn)(int);
typedef const char* (*last_error_fn)(void);
typedef uint64_t (*hog_touch_fn)(uint8_t);
typedef size_t (*hog_bytes_fn)(void);

static init_fn p_init;
static read_fn p_read;
static finalize_fn p_finalize;
static strerror_fn p_strerror;
static last_error_fn p_last_error;
static hog_touch_fn p_hog_touch;

static char dir[512];
static char file_path[600];
static memtier_ctx_t* ctx;

static void cleanup(void) {
    if (file_path[0]) unlink(file_path);
    if (dir[0]) rmdir(dir);
}

static uint8_t p_byte(uint64_t i) { return (uint8_t)((i * 131 + 7) & 0xFF); }

static void* must_sym(void* h, const char* lib, const char* name) {
    void* s;
    dlerror();
    s = dlsym(h, name);
    if (s == NULL) FAIL("dlsym(%s, \"%s\"): %s", lib, name, dlerror());
    return s;
}

/* What one thread's tls_hog_touch(seed) returns on its n-th call. */
static uint64_t hog_sum(uint8_t seed, uint64_t n) {
    uint64_t s = 0, i;
    for (i = 0; i < HOG_BYTES; i++) s += (uint8_t)(seed + i);
    return s + n;
}

/* The PT_TLS memsz (0 if none) and DT_FLAGS & DF_STATIC_TLS of the loaded
 * object whose file name (without directory) is want (dl_iterate_phdr). */
struct tls_query {
    const char* want;
    size_t memsz;
    int static_tls;
    int found;
};

static int phdr_cb(struct dl_phdr_info* info, size_t size, void* arg) {
    struct tls_query* q = arg;
    int i;
    (void)size;
    const char* base;
    if (info->dlpi_name == NULL) return 0;
    base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strcmp(base, q->want) != 0) return 0;
    q->found = 1;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_TLS) q->memsz = ph->p_memsz;
        if (ph->p_type == PT_DYNAMIC) {
            const ElfW(Dyn)* d = (const ElfW(Dyn)*)(info->dlpi_addr + ph->p_vaddr);
            for (; d->d_tag != DT_NULL; d++)
                if (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_STATIC_TLS)) q->static_tls = 1;
        }
    }
    return 1;
}

static struct tls_query tls_info(const char* want) {
    struct tls_query q = {want, 0, 0, 0};
    dl_iterate_phdr(phdr_cb, &q);
    if (!q.found) FAIL("dl_iterate_phdr: no loaded object named %s", want);
    printf("%s: PT_TLS memsz %zu (0x%zx), DT_FLAGS %s STATIC_TLS\n", want, q.memsz, q.memsz,
           q.static_tls ? "has" : "lacks");
    return q;
}

static void read_and_check(const char* who) {
    uint8_t* buf = malloc(FILE_SIZE);
    uint64_t off, size = 100000;
    int st;
    if (buf == NULL) FAIL("out of memory");
    for (off = 0; off + size <= FILE_SIZE; off += 77777) {
        uint64_t i;
        memset(buf, 0xAA, size);
        st = p_read(ctx, file_path, off, size, buf, MEMTIER_TARGET_CPU);
        if (st != MEMTIER_OK)
            FAIL("%s: memtier_read(off %llu, size %llu) = %d (%s): %s", who,
                 (unsigned long long)off, (unsigned long long)size, st, p_strerror(st),
                 p_last_error());
        for (i = 0; i < size; i++)
            if (buf[i] != p_byte(off + i))
                FAIL("%s: read at off %llu: byte %llu is 0x%02x, want 0x%02x", who,
                     (unsigned long long)off, (unsigned long long)i, buf[i], p_byte(off + i));
    }
    free(buf);
}

static void* thread_main(void* arg) {
    (void)arg;
    /* A new thread gets its own copy of the hog's static TLS block. */
    if (p_hog_touch(7) != hog_sum(7, 1)) FAIL("tls_hog_touch on a new thread: wrong checksum");
    read_and_check("new thread");
    if (p_hog_touch(9) != hog_sum(9, 2)) FAIL("tls_hog_touch after memtier_read: wrong checksum");
    return NULL;
}

int main(int argc, char** argv) {
    void *hog, *mt;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 3) FAIL("usage: %s <libmemtier.so> <libmemtier_tls_hog.so>", argv[0]);
    const char* mt_lib = argv[1];
    const char* hog_lib = argv[2];

    /* The input file, in a private temp directory. */
    {
        const char* base = getenv("TMPDIR");
        uint8_t* data = malloc(FILE_SIZE);
        uint64_t i;
        int fd;
        if (base == NULL || base[0] == '\0') base = "/tmp";
        snprintf(dir, sizeof dir, "%s/memtier_test_XXXXXX", base);
        if (mkdtemp(dir) == NULL) {
            dir[0] = '\0';
            FAIL("mkdtemp in %s: %s", base, strerror(errno));
        }
        atexit(cleanup);
        snprintf(file_path, sizeof file_path, "%s/p.bin", dir);
        if (data == NULL) FAIL("out of memory");
        for (i = 0; i < FILE_SIZE; i++) data[i] = p_byte(i);
        fd = open(file_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, data, FILE_SIZE) != FILE_SIZE || close(fd) != 0)
            FAIL("write %s: %s", file_path, strerror(errno));
        free(data);
    }

    /* libmemtier must not be loaded yet: this program is not linked with it. */
    if (dlopen("libmemtier.so", RTLD_NOW | RTLD_NOLOAD) != NULL)
        FAIL("libmemtier.so is already loaded before dlopen: the test is linked against it");

    /* 1. The TLS hog eats into the static TLS surplus. */
    hog = dlopen(hog_lib, RTLD_NOW | RTLD_LOCAL);
    if (hog == NULL) FAIL("dlopen(%s) [tls hog]: %s", hog_lib, dlerror());
    p_hog_touch = (hog_touch_fn)must_sym(hog, "tls_hog", "tls_hog_touch");
    {
        hog_bytes_fn bytes = (hog_bytes_fn)must_sym(hog, "tls_hog", "tls_hog_bytes");
        const char* slash = strrchr(hog_lib, '/');
        struct tls_query q = tls_info(slash ? slash + 1 : hog_lib);
        if (!q.static_tls) FAIL("the tls hog is not STATIC_TLS: it would not use the surplus");
        if (q.memsz < HOG_BYTES) FAIL("the tls hog's PT_TLS is %zu bytes, want >= %d", q.memsz, HOG_BYTES);
        printf("tls hog declares %zu bytes of initial-exec TLS\n", bytes());
    }
    if (p_hog_touch(3) != hog_sum(3, 1)) FAIL("tls_hog_touch: wrong checksum");

    /* 2. libmemtier.so after it: must load. */
    mt = dlopen(mt_lib, RTLD_NOW | RTLD_LOCAL);
    if (mt == NULL) {
        const char* e = dlerror();
        printf("dlopen(%s) after the tls hog: FAILED: %s\n", mt_lib, e);
        FAIL("dlopen(%s) after a library with %d bytes of static TLS: %s", mt_lib, HOG_BYTES, e);
    }
    printf("dlopen(%s) after the tls hog: succeeded\n", mt_lib);
    {
        const char* slash = strrchr(mt_lib, '/');
        tls_info(slash ? slash + 1 : mt_lib);
    }

    p_init = (init_fn)must_sym(mt, "libmemtier", "memtier_init");
    p_read = (read_fn)must_sym(mt, "libmemtier", "memtier_read");
    p_finalize = (finalize_fn)must_sym(mt, "libmemtier", "memtier_finalize");
    p_strerror = (strerror_fn)must_sym(mt, "libmemtier", "memtier_strerror");
    p_last_error = (last_error_fn)must_sym(mt, "libmemtier", "memtier_last_error");

    {
        int st = p_init(NULL, &ctx);
        if (st != MEMTIER_OK || ctx == NULL)
            FAIL("memtier_init = %d (%s): %s", st, p_strerror(st), p_last_error());
    }
    read_and_check("main thread");
    if (p_hog_touch(5) != hog_sum(5, 2)) FAIL("tls_hog_touch after memtier_read: wrong checksum");
    {
        pthread_t t;
        int rc = pthread_create(&t, NULL, thread_main, NULL);
        if (rc != 0) FAIL("pthread_create: %s", strerror(rc));
        pthread_join(t, NULL);
    }
    {
        int st = p_finalize(ctx);
        if (st != MEMTIER_OK) FAIL("memtier_finalize = %d (%s)", st, p_strerror(st));
    }
    /* libmemtier is NODELETE (Go cannot be unloaded); do not dlclose it. */
    printf("PASS test_static_tls\n");
    return 0;
}
