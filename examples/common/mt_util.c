/*
 * mt_util.c: helpers shared by MemTier's C examples and benchmarks.
 * See mt_util.h for the pattern, P-file and checksum definitions.
 */
#define _GNU_SOURCE
#include "mt_util.h"
#include "mt_generated.h" /* status and stats lists, generated from memtier.h */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Byte order                                                          */
/* ------------------------------------------------------------------ */

static inline uint64_t to_le64(uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}

static inline uint64_t load_le64(const uint8_t* p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return to_le64(v);
}

static inline void store_le64(uint8_t* p, uint64_t v) {
    v = to_le64(v);
    memcpy(p, &v, 8);
}

/* ------------------------------------------------------------------ */
/* Pattern                                                             */
/* ------------------------------------------------------------------ */

uint64_t mt_splitmix64(uint64_t x) {
    uint64_t z = x + UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t mt_pattern_word(uint64_t k) { return mt_splitmix64(MT_PATTERN_KEY ^ k); }

void mt_pattern_fill(void* dst, uint64_t off, size_t n) {
    uint8_t* p = (uint8_t*)dst;
    uint64_t k = off >> 3;
    unsigned b = (unsigned)(off & 7);
    if (n == 0) return;
    if (b != 0) {
        uint64_t w = mt_pattern_word(k++);
        size_t m = 8 - b < n ? 8 - b : n;
        for (size_t i = 0; i < m; i++) p[i] = (uint8_t)(w >> (8 * (b + i)));
        p += m;
        n -= m;
    }
    for (; n >= 8; n -= 8, p += 8) store_le64(p, mt_pattern_word(k++));
    if (n > 0) {
        uint64_t w = mt_pattern_word(k);
        for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(w >> (8 * i));
    }
}

uint64_t mt_pattern_check(const void* buf, uint64_t off, size_t n) {
    const uint8_t* p = (const uint8_t*)buf;
    uint64_t pos = off;
    uint64_t k = off >> 3;
    unsigned b = (unsigned)(off & 7);
    if (n == 0) return MT_NO_MISMATCH;
    if (b != 0) {
        uint64_t w = mt_pattern_word(k++);
        size_t m = 8 - b < n ? 8 - b : n;
        for (size_t i = 0; i < m; i++)
            if (p[i] != (uint8_t)(w >> (8 * (b + i)))) return pos + i;
        p += m;
        n -= m;
        pos += m;
    }
    for (; n >= 8; n -= 8, p += 8, pos += 8) {
        uint64_t w = mt_pattern_word(k++);
        if (load_le64(p) != w) {
            for (unsigned i = 0; i < 8; i++)
                if (p[i] != (uint8_t)(w >> (8 * i))) return pos + i;
        }
    }
    if (n > 0) {
        uint64_t w = mt_pattern_word(k);
        for (size_t i = 0; i < n; i++)
            if (p[i] != (uint8_t)(w >> (8 * i))) return pos + i;
    }
    return MT_NO_MISMATCH;
}

/* ------------------------------------------------------------------ */
/* P-file                                                              */
/* ------------------------------------------------------------------ */

void mt_pfile_fill(void* dst, uint64_t off, size_t n) {
    uint8_t* p = (uint8_t*)dst;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((off + i) * 131u + 7u);
}

uint64_t mt_pfile_check(const void* buf, uint64_t off, size_t n) {
    const uint8_t* p = (const uint8_t*)buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)((off + i) * 131u + 7u)) return off + i;
    return MT_NO_MISMATCH;
}

/* ------------------------------------------------------------------ */
/* Checksum                                                            */
/* ------------------------------------------------------------------ */

#define FNV_BASIS UINT64_C(0xCBF29CE484222325)
#define FNV_PRIME UINT64_C(0x100000001B3)

void mt_checksum_init(mt_checksum_t* c) {
    memset(c, 0, sizeof *c);
    c->h = FNV_BASIS;
}

void mt_checksum_update(mt_checksum_t* c, const void* data, size_t n) {
    const uint8_t* p = (const uint8_t*)data;
    uint64_t h = c->h;
    c->length += n;
    if (c->ntail > 0) {
        while (c->ntail < 8 && n > 0) {
            c->tail[c->ntail++] = *p++;
            n--;
        }
        if (c->ntail < 8) return;
        h = (h ^ load_le64(c->tail)) * FNV_PRIME;
        c->ntail = 0;
    }
    for (; n >= 8; n -= 8, p += 8) h = (h ^ load_le64(p)) * FNV_PRIME;
    for (size_t i = 0; i < n; i++) c->tail[c->ntail++] = p[i];
    c->h = h;
}

uint64_t mt_checksum_final(const mt_checksum_t* c) {
    uint64_t h = c->h;
    if (c->ntail > 0) {
        uint8_t w[8] = {0};
        memcpy(w, c->tail, c->ntail);
        h = (h ^ load_le64(w)) * FNV_PRIME;
    }
    return (h ^ c->length) * FNV_PRIME;
}

uint64_t mt_checksum(const void* data, size_t n) {
    mt_checksum_t c;
    mt_checksum_init(&c);
    mt_checksum_update(&c, data, n);
    return mt_checksum_final(&c);
}

uint64_t mt_pattern_checksum(uint64_t size) {
    uint64_t h = FNV_BASIS;
    uint64_t words = size / 8;
    for (uint64_t k = 0; k < words; k++) h = (h ^ mt_pattern_word(k)) * FNV_PRIME;
    unsigned rest = (unsigned)(size % 8);
    if (rest > 0) {
        uint64_t mask = (UINT64_C(1) << (8 * rest)) - 1;
        h = (h ^ (mt_pattern_word(words) & mask)) * FNV_PRIME;
    }
    return (h ^ size) * FNV_PRIME;
}

/* ------------------------------------------------------------------ */
/* Cleanup of temporary paths                                          */
/* ------------------------------------------------------------------ */

#define MT_MAX_CLEANUP 64
static char* g_cleanup_path[MT_MAX_CLEANUP];
static int g_cleanup_dir[MT_MAX_CLEANUP];
static volatile sig_atomic_t g_cleanup_n;
static int g_cleanup_installed;

/* The file write in progress (mt_write_file): undone when the write fails, and
 * by the signal handler when the process is interrupted while writing. A file
 * the write created (or whose old contents it had already replaced) is removed;
 * a file it extended is truncated back to its old size. */
static char g_pending_path[PATH_MAX];
static volatile sig_atomic_t g_pending_active;
static int g_pending_fd = -1;
static int g_pending_remove;
static off_t g_pending_old_size;

/* pending_undo: async-signal-safe (unlink, ftruncate). Returns 0 or -1 (errno). */
static int pending_undo(void) {
    if (!g_pending_active) return 0;
    g_pending_active = 0;
    if (g_pending_remove) return unlink(g_pending_path);
    return ftruncate(g_pending_fd, g_pending_old_size);
}

static void cleanup_all(void) {
    (void)pending_undo();
    int n = (int)g_cleanup_n;
    g_cleanup_n = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (g_cleanup_path[i] == NULL) continue;
        if (g_cleanup_dir[i])
            rmdir(g_cleanup_path[i]);
        else
            unlink(g_cleanup_path[i]);
    }
}

static void cleanup_signal(int sig) {
    cleanup_all(); /* unlink, rmdir and ftruncate are async-signal-safe */
    /* SA_RESETHAND restored the default action; the signal is delivered again
     * when this handler returns. */
    raise(sig);
}

void mt_cleanup_now(void) {
    int n = (int)g_cleanup_n;
    cleanup_all();
    for (int i = 0; i < n; i++) {
        free(g_cleanup_path[i]);
        g_cleanup_path[i] = NULL;
    }
}

/* install_cleanup: mt_cleanup_now at exit, cleanup_signal on SIGINT, SIGTERM,
 * SIGHUP (only where the default action is in place). */
static void install_cleanup(void) {
    if (g_cleanup_installed) return;
    g_cleanup_installed = 1;
    atexit(mt_cleanup_now);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) != 0) continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL) continue;
        if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction != NULL) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = cleanup_signal;
        sigemptyset(&sa.sa_mask);
        /* SA_ONSTACK: a Go runtime lives in this process (libmemtier.so). */
        sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
        sigaction(sigs[i], &sa, NULL);
    }
}

void mt_cleanup_add(const char* path, int is_dir) {
    install_cleanup();
    int n = (int)g_cleanup_n;
    if (n >= MT_MAX_CLEANUP) {
        fprintf(stderr, "note: too many temporary paths; %s will not be removed\n", path);
        return;
    }
    g_cleanup_path[n] = strdup(path);
    g_cleanup_dir[n] = is_dir;
    g_cleanup_n = n + 1;
}

const char* mt_tmp_dir(void) {
    const char* t = getenv("TMPDIR");
    return (t != NULL && t[0] != '\0') ? t : "/tmp";
}

/* ------------------------------------------------------------------ */
/* Paths, file types, free space                                       */
/* ------------------------------------------------------------------ */

/* split_path: the directory part of path into dir ("." when there is none,
 * "/" for a file in the root) and a pointer to the last component. */
static const char* split_path(const char* path, char* dir, size_t len) {
    const char* slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, len, ".");
        return path;
    }
    if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
    return slash + 1;
}

const char* mt_abs_path(const char* path, char* out, size_t len) {
    char dir[PATH_MAX];
    const char* base = split_path(path, dir, sizeof dir);
    char* real = realpath(dir, NULL);
    if (real != NULL) {
        snprintf(out, len, "%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", base);
        free(real);
        return out;
    }
    char cwd[PATH_MAX];
    if (path[0] != '/' && getcwd(cwd, sizeof cwd) != NULL)
        snprintf(out, len, "%s/%s", cwd, path);
    else
        snprintf(out, len, "%s", path);
    return out;
}

const char* mt_file_kind(unsigned mode) {
    const mode_t m = (mode_t)mode;
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

static void die_not_regular(const char* path, mode_t mode) __attribute__((noreturn));
static void die_not_regular(const char* path, mode_t mode) {
    mt_usage_die("%s is %s, not a regular file: refusing to use it%s", path, mt_file_kind(mode),
                 S_ISFIFO(mode) ? " (opening or reading it would block until another process opens its "
                                  "other end; give the path of a regular file)"
                                : " (give the path of a regular file)");
}

int mt_require_regular(const char* path, struct stat* st_out) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (!S_ISREG(st.st_mode)) die_not_regular(path, st.st_mode);
    if (st_out != NULL) *st_out = st;
    return 1;
}

int mt_open_file(const char* path, int flags, unsigned mode) {
    /* O_NONBLOCK: a FIFO swapped in after mt_require_regular cannot block the
     * open (a reader's open returns at once, a writer's fails with ENXIO). */
    int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, (mode_t)mode);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) die_not_regular(path, st.st_mode);
        errno = e;
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        die_not_regular(path, st.st_mode);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int mt_free_space(const char* path, uint64_t* avail, uint64_t* margin, uint64_t* total) {
    char dir[PATH_MAX];
    split_path(path, dir, sizeof dir);
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0) return -1;
    const uint64_t unit = sv.f_frsize ? (uint64_t)sv.f_frsize : (uint64_t)sv.f_bsize;
    const uint64_t t = (uint64_t)sv.f_blocks * unit;
    const uint64_t five_pct = t / 20;
    if (avail) *avail = (uint64_t)sv.f_bavail * unit;
    if (margin) *margin = five_pct < MT_GIB ? five_pct : MT_GIB;
    if (total) *total = t;
    return 0;
}

void mt_require_space(const char* path, uint64_t need) {
    if (need == 0) return;
    uint64_t avail = 0, margin = 0, total = 0;
    if (mt_free_space(path, &avail, &margin, &total) != 0) {
        /* A missing directory: the open that follows reports it. */
        if (errno != ENOENT && errno != ENOTDIR)
            fprintf(stderr, "note: cannot check the free space for %s: %s\n", path, strerror(errno));
        return;
    }
    const uint64_t allowed = avail > margin ? avail - margin : 0;
    if (need <= allowed) return;
    char abs[PATH_MAX], dir[PATH_MAX], a[32], b[32], c[32], d[32], e[32];
    mt_abs_path(path, abs, sizeof abs);
    split_path(abs, dir, sizeof dir);
    mt_usage_die("not enough free space: refusing to write %s\n"
                 "  needed:    %" PRIu64 " more bytes (%s)\n"
                 "  available: %" PRIu64 " bytes (%s) in %s, less a safety margin of %s (the smaller of\n"
                 "             1 GiB and 5%% of the %s file system): at most %" PRIu64 " bytes (%s) may be written\n"
                 "  nothing was written; check the size you asked for",
                 abs, need, mt_fmt_bytes(a, sizeof a, need), avail, mt_fmt_bytes(b, sizeof b, avail), dir,
                 mt_fmt_bytes(c, sizeof c, margin), mt_fmt_bytes(d, sizeof d, total), allowed,
                 mt_fmt_bytes(e, sizeof e, allowed));
}

void mt_require_space_to_grow(const char* path, uint64_t size) {
    struct stat st;
    const int exists = mt_require_regular(path, &st);
    const uint64_t have = exists ? (uint64_t)st.st_size : 0;
    if (have < size) mt_require_space(path, size - have);
}

/* ------------------------------------------------------------------ */
/* Files                                                               */
/* ------------------------------------------------------------------ */

#define WRITE_CHUNK (8u << 20)

int mt_write_content(int fd, uint64_t start, uint64_t size, mt_content_t content,
                     int progress, const char* label) {
    if (start >= size) return fsync(fd);
    size_t cap = (size - start) < WRITE_CHUNK ? (size_t)(size - start) : WRITE_CHUNK;
    uint8_t* buf = (uint8_t*)malloc(cap);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    uint64_t total = size - start;
    uint64_t step = total / 20;
    uint64_t next_report = start + step;
    uint64_t t0 = mt_now_ns();
    for (uint64_t off = start; off < size;) {
        size_t n = (size - off) < cap ? (size_t)(size - off) : cap;
        if (content == MT_CONTENT_PATTERN)
            mt_pattern_fill(buf, off, n);
        else
            mt_pfile_fill(buf, off, n);
        size_t done = 0;
        while (done < n) {
            ssize_t w = pwrite(fd, buf + done, n - done, (off_t)(off + done));
            if (w < 0) {
                if (errno == EINTR) continue;
                int e = errno;
                free(buf);
                errno = e;
                return -1;
            }
            if (w == 0) { /* no progress and no error: do not spin */
                free(buf);
                errno = EIO;
                return -1;
            }
            done += (size_t)w;
        }
        off += n;
        if (progress && step > 0 && (off >= next_report || off == size)) {
            double s = (double)(mt_now_ns() - t0) / 1e9;
            char a[32], b[32];
            fprintf(stderr, "%s: %3d%% (%s of %s) written, %.2f GB/s\n",
                    label ? label : "write", (int)((off - start) * 100 / total),
                    mt_fmt_bytes(a, sizeof a, off - start), mt_fmt_bytes(b, sizeof b, total),
                    mt_gbps(off - start, s));
            while (next_report <= off) next_report += step;
        }
    }
    free(buf);
    if (progress) fprintf(stderr, "%s: fsync ...\n", label ? label : "write");
    return fsync(fd);
}

void mt_write_file(int fd, const char* path, uint64_t start, uint64_t size, mt_content_t content,
                   int how) {
    char abs[PATH_MAX];
    mt_abs_path(path, abs, sizeof abs);
    if (strlen(abs) >= sizeof g_pending_path) mt_die("path too long: %s", path);
    install_cleanup();
    snprintf(g_pending_path, sizeof g_pending_path, "%s", abs);
    g_pending_fd = fd;
    g_pending_remove = how != MT_FILE_EXTENDED;
    g_pending_old_size = (off_t)start;
    g_pending_active = 1;
    int rc = mt_write_content(fd, start, size, content, size - start > 256 * MT_MIB, abs);
    if (rc == 0) {
        g_pending_active = 0;
        return;
    }
    const int e = errno;
    const int urc = pending_undo();
    const int ue = errno;
    close(fd);
    char a[32];
    fflush(stdout);
    if (how == MT_FILE_EXTENDED)
        fprintf(stderr, "error: writing %s: %s; %s it back to its previous size %" PRIu64 " bytes (%s)\n",
                abs, strerror(e), urc == 0 ? "truncated" : "could not truncate", start,
                mt_fmt_bytes(a, sizeof a, start));
    else
        fprintf(stderr, "error: writing %s: %s; %s the partial file%s\n", abs, strerror(e),
                urc == 0 ? "removed" : "could not remove",
                how == MT_FILE_REWRITTEN ? " (its previous contents had already been replaced)" : "");
    if (urc != 0) fprintf(stderr, "error: %s: %s\n", abs, strerror(ue));
    exit(1);
}

void mt_require_temp_space(const char* tag, uint64_t size) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/memtier_%s_XXXXXX", mt_tmp_dir(), tag);
    mt_require_space(path, size);
}

char* mt_temp_file(const char* tag, uint64_t size, mt_content_t content) {
    size_t len = strlen(mt_tmp_dir()) + strlen(tag) + 32;
    char* path = (char*)malloc(len);
    if (path == NULL) mt_die("out of memory");
    snprintf(path, len, "%s/memtier_%s_XXXXXX", mt_tmp_dir(), tag);
    mt_require_space(path, size); /* before mkstemp: nothing to remove on refusal */
    int fd = mkstemp(path);
    if (fd < 0) mt_die("mkstemp %s: %s (set TMPDIR to a writable directory)", path, strerror(errno));
    mt_cleanup_add(path, 0);
    mt_write_file(fd, path, 0, size, content, MT_FILE_CREATED);
    close(fd);
    return path;
}

char* mt_temp_dir_make(const char* tag) {
    size_t len = strlen(mt_tmp_dir()) + strlen(tag) + 32;
    char* path = (char*)malloc(len);
    if (path == NULL) mt_die("out of memory");
    snprintf(path, len, "%s/memtier_%s_XXXXXX", mt_tmp_dir(), tag);
    if (mkdtemp(path) == NULL) mt_die("mkdtemp %s: %s", path, strerror(errno));
    mt_cleanup_add(path, 1);
    return path;
}

int64_t mt_file_size(const char* path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
}

/* is_pattern_prefix: 1 if the first n bytes of fd are the pattern. */
static int is_pattern_prefix(int fd, uint64_t n) {
    const size_t chunk = 8u << 20;
    uint8_t* buf = (uint8_t*)malloc(chunk);
    if (buf == NULL) mt_die("out of memory");
    int ok = 1;
    for (uint64_t off = 0; off < n && ok;) {
        size_t m = n - off < chunk ? (size_t)(n - off) : chunk;
        if (mt_pread_full(fd, buf, m, off) != (int64_t)m) ok = 0;
        else if (mt_pattern_check(buf, off, m) != MT_NO_MISMATCH) ok = 0;
        off += m;
    }
    free(buf);
    return ok;
}

int mt_ensure_pattern_file(const char* path, uint64_t size, int overwrite) {
    char a[32], b[32], abs[PATH_MAX];
    struct stat st;
    const int exists = mt_require_regular(path, &st); /* exits 2 unless regular or missing */
    if (!exists && errno != ENOENT) mt_die("%s: %s", path, strerror(errno));
    const uint64_t have = exists ? (uint64_t)st.st_size : 0;
    if (exists && have >= size) return MT_FILE_KEPT;
    /* Before anything is written: refuse a size the file system cannot hold. */
    mt_require_space(path, size - have);
    /* O_EXCL: a file that is removed on failure must be one this call created. */
    int fd = mt_open_file(path, exists ? O_RDWR : (O_RDWR | O_CREAT | O_EXCL), 0644);
    if (fd < 0) mt_die("cannot open %s for writing: %s", path, strerror(errno));
    mt_abs_path(path, abs, sizeof abs);
    int what = MT_FILE_CREATED;
    uint64_t start = 0;
    if (exists) {
        if (have == 0 || is_pattern_prefix(fd, have)) {
            what = MT_FILE_EXTENDED;
            start = have;
        } else if (overwrite) {
            what = MT_FILE_REWRITTEN;
            if (ftruncate(fd, 0) != 0) mt_die("truncate %s: %s", path, strerror(errno));
        } else {
            close(fd);
            mt_die("%s holds %s that are not the experiment pattern and is shorter than %s; "
                   "refusing to overwrite it (pass --overwrite, or a larger file, or a new path)",
                   path, mt_fmt_bytes(a, sizeof a, have), mt_fmt_bytes(b, sizeof b, size));
        }
    }
    mt_write_file(fd, path, start, size, MT_CONTENT_PATTERN, what);
    if (close(fd) != 0) mt_die("closing %s: %s", abs, strerror(errno));
    if (what == MT_FILE_CREATED)
        mt_note("note: created %s: %s (%" PRIu64 " bytes) of the experiment pattern\n", abs,
                mt_fmt_bytes(b, sizeof b, size), size);
    else if (what == MT_FILE_EXTENDED)
        mt_note("note: extended %s from %s to %s (%" PRIu64 " bytes) with the experiment pattern\n", abs,
                mt_fmt_bytes(a, sizeof a, have), mt_fmt_bytes(b, sizeof b, size), size);
    else
        mt_note("note: rewrote %s: %s (%" PRIu64 " bytes) of the experiment pattern replaced its "
                "%s of other bytes (--overwrite)\n",
                abs, mt_fmt_bytes(b, sizeof b, size), size, mt_fmt_bytes(a, sizeof a, have));
    return what;
}

int mt_drop_page_cache(const char* path) {
    int fd = mt_open_file(path, O_RDONLY, 0);
    if (fd < 0) return -1;
    /* Dirty pages cannot be dropped: write them back first. fdatasync on a
     * read-only descriptor is allowed on Linux. */
    (void)fdatasync(fd);
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

int64_t mt_page_cache_resident(const char* path) {
    int fd = mt_open_file(path, O_RDONLY, 0);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size == 0) {
        close(fd);
        return 0;
    }
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t page = pg > 0 ? (uint64_t)pg : 4096;
    const uint64_t window = 1 * MT_GIB;
    unsigned char* vec = (unsigned char*)malloc((size_t)(window / page));
    if (vec == NULL) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    int64_t resident = 0;
    for (uint64_t off = 0; off < size; off += window) {
        size_t len = (size - off) < window ? (size_t)(size - off) : (size_t)window;
        void* m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
        if (m == MAP_FAILED) {
            int e = errno;
            free(vec);
            close(fd);
            errno = e;
            return -1;
        }
        size_t npages = (len + page - 1) / page;
        if (mincore(m, len, vec) != 0) {
            int e = errno;
            munmap(m, len);
            free(vec);
            close(fd);
            errno = e;
            return -1;
        }
        for (size_t i = 0; i < npages; i++) {
            if (vec[i] & 1) {
                uint64_t b = off + i * page;
                uint64_t e = b + page < size ? b + page : size;
                resident += (int64_t)(e - b);
            }
        }
        munmap(m, len);
    }
    free(vec);
    close(fd);
    return resident;
}

int64_t mt_pread_full(int fd, void* buf, size_t n, uint64_t offset) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (uint8_t*)buf + done, n - done, (off_t)(offset + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    return (int64_t)done;
}

/* ------------------------------------------------------------------ */
/* Time, memory                                                        */
/* ------------------------------------------------------------------ */

uint64_t mt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double mt_gbps(uint64_t bytes, double seconds) {
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0;
}

static uint64_t status_kib(const char* key) {
    FILE* f = fopen("/proc/self/status", "r");
    if (f == NULL) return 0;
    char line[256];
    size_t klen = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            v = strtoull(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v * 1024;
}

uint64_t mt_rss_bytes(void) { return status_kib("VmRSS"); }
uint64_t mt_peak_rss_bytes(void) { return status_kib("VmHWM"); }

int mt_peak_rss_reset(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t w = write(fd, "5", 1);
    close(fd);
    return w == 1 ? 0 : -1;
}

void* mt_alloc(size_t n) {
    void* p = NULL;
    size_t sz = n > 0 ? n : 1;
    if ((uint64_t)n > mt_phys_mem_bytes()) {
        /* Every page is touched below: this would only end in the OOM killer. */
        char a[32], b[32];
        mt_die("cannot allocate %s: more than this machine's physical memory (%s)",
               mt_fmt_bytes(a, sizeof a, n), mt_fmt_bytes(b, sizeof b, mt_phys_mem_bytes()));
    }
    if (posix_memalign(&p, 4096, sz) != 0 || p == NULL) {
        char b[32];
        mt_die("cannot allocate %s", mt_fmt_bytes(b, sizeof b, n));
    }
    memset(p, 0, sz);
    return p;
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

double mt_median(double* v, size_t n) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cmp_u64(const void* a, const void* b) {
    uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
    return x < y ? -1 : x > y;
}

void mt_sort_u64(uint64_t* v, size_t n) { qsort(v, n, sizeof *v, cmp_u64); }

uint64_t mt_percentile_u64(const uint64_t* sorted, size_t n, double p) {
    if (n == 0) return 0;
    double rank = p / 100.0 * (double)n;
    size_t i = (size_t)rank;
    if ((double)i < rank) i++; /* ceil */
    if (i == 0) i = 1;
    if (i > n) i = n;
    return sorted[i - 1];
}

/* ------------------------------------------------------------------ */
/* Random numbers                                                      */
/* ------------------------------------------------------------------ */

void mt_rng_seed(mt_rng_t* r, uint64_t seed) { r->s = seed; }

uint64_t mt_rng_next(mt_rng_t* r) {
    uint64_t x = r->s;
    r->s += UINT64_C(0x9E3779B97F4A7C15);
    return mt_splitmix64(x);
}

uint64_t mt_rng_below(mt_rng_t* r, uint64_t n) {
    /* Rejection sampling: no modulo bias. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t v;
    do v = mt_rng_next(r);
    while (v >= limit);
    return v % n;
}

/* ------------------------------------------------------------------ */
/* Flags                                                               */
/* ------------------------------------------------------------------ */

int mt_parse_size(const char* s, uint64_t* out) {
    if (s == NULL) return -1;
    while (isspace((unsigned char)*s)) s++;
    if (!isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char* end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0) return -1;
    while (isspace((unsigned char)*end)) end++;
    uint64_t mult = 1;
    char u[8] = {0};
    size_t ul = strlen(end);
    if (ul >= sizeof u) return -1;
    for (size_t i = 0; i < ul; i++) u[i] = (char)toupper((unsigned char)end[i]);
    while (ul > 0 && isspace((unsigned char)u[ul - 1])) u[--ul] = '\0';
    if (ul > 0) {
        const char* rest = u + 1;
        switch (u[0]) {
        case 'B': mult = 1; break;
        case 'K': mult = MT_KIB; break;
        case 'M': mult = MT_MIB; break;
        case 'G': mult = MT_GIB; break;
        case 'T': mult = MT_GIB * 1024; break;
        default: return -1;
        }
        if (u[0] == 'B') {
            if (*rest != '\0') return -1;
        } else if (!(strcmp(rest, "") == 0 || strcmp(rest, "B") == 0 || strcmp(rest, "IB") == 0)) {
            return -1;
        }
    }
    if (mult > 1 && v > UINT64_MAX / mult) return -1;
    *out = (uint64_t)v * mult;
    return 0;
}

static int parse_bool(const char* s, int* out) {
    if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) {
        *out = 0;
        return 0;
    }
    return -1;
}

int mt_parse_flags(int argc, char** argv, const mt_flag_t* flags, size_t nflags,
                   const char** pos, int max_pos) {
    int npos = 0;
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (!only_pos && strcmp(a, "-h") == 0) a = "--help";
        if (!only_pos && a[0] == '-' && a[1] != '\0') {
            if (a[1] != '-') {
                fprintf(stderr, "%s: unknown option '%s' (flags are --name=value)\n", argv[0], a);
                return -1;
            }
            const char* name = a + 2;
            const char* eq = strchr(name, '=');
            size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
            const mt_flag_t* f = NULL;
            for (size_t k = 0; k < nflags; k++) {
                if (strlen(flags[k].name) == nlen && strncmp(flags[k].name, name, nlen) == 0) {
                    f = &flags[k];
                    break;
                }
            }
            if (f == NULL) {
                fprintf(stderr, "%s: unknown flag '%s' (see --help)\n", argv[0], a);
                return -1;
            }
            const char* val = eq ? eq + 1 : NULL;
            if (f->kind != MT_FLAG_BOOL && val == NULL) {
                fprintf(stderr, "%s: --%s needs a value: --%s=VALUE\n", argv[0], f->name, f->name);
                return -1;
            }
            int ok = 0;
            switch (f->kind) {
            case MT_FLAG_BOOL:
                if (val == NULL) {
                    *(int*)f->value = 1;
                    ok = 1;
                } else {
                    ok = parse_bool(val, (int*)f->value) == 0;
                }
                break;
            case MT_FLAG_SIZE:
                ok = mt_parse_size(val, (uint64_t*)f->value) == 0;
                break;
            case MT_FLAG_INT: {
                char* end = NULL;
                errno = 0;
                long v = strtol(val, &end, 10);
                ok = errno == 0 && end != val && *end == '\0';
                if (ok) *(long*)f->value = v;
                break;
            }
            case MT_FLAG_STR:
                *(const char**)f->value = val;
                ok = 1;
                break;
            }
            if (!ok) {
                fprintf(stderr, "%s: bad value in '%s'%s\n", argv[0], a,
                        f->kind == MT_FLAG_SIZE ? " (bytes, with an optional K/M/G suffix)" : "");
                return -1;
            }
            continue;
        }
        if (npos >= max_pos) {
            fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", argv[0], a);
            return -1;
        }
        pos[npos++] = a;
    }
    return npos;
}

void mt_print_flags(FILE* f, const mt_flag_t* flags, size_t nflags) {
    for (size_t i = 0; i < nflags; i++) {
        char left[64];
        const char* arg = "";
        switch (flags[i].kind) {
        case MT_FLAG_BOOL: arg = ""; break;
        case MT_FLAG_SIZE: arg = "=SIZE"; break;
        case MT_FLAG_INT: arg = "=N"; break;
        case MT_FLAG_STR: arg = "=TEXT"; break;
        }
        snprintf(left, sizeof left, "--%s%s", flags[i].name, arg);
        fprintf(f, "  %-20s %s\n", left, flags[i].help ? flags[i].help : "");
    }
}

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

const char* mt_fmt_bytes(char* buf, size_t len, uint64_t n) {
    static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < MT_KIB) {
        snprintf(buf, len, "%" PRIu64 " B", n);
        return buf;
    }
    int u = 0;
    uint64_t div = MT_KIB;
    while (u < 3 && n >= div * 1024) {
        div *= 1024;
        u++;
    }
    if (n % div == 0)
        snprintf(buf, len, "%" PRIu64 " %s", n / div, units[u]);
    else
        snprintf(buf, len, "%.2f %s", (double)n / (double)div, units[u]);
    return buf;
}

static FILE* g_note;

void mt_set_note_stream(FILE* f) { g_note = f; }

void mt_note(const char* fmt, ...) {
    FILE* f = g_note ? g_note : stdout;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fflush(f);
}

void mt_die(const char* fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void mt_usage_die(const char* fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(MT_EXIT_USAGE);
}

void mt_flag_range(const char* flag, long v, long lo, long hi) {
    if (v >= lo && v <= hi) return;
    mt_usage_die("--%s=%ld is out of range: it must be %ld..%ld (see --help)", flag, v, lo, hi);
}

void mt_flag_size_range(const char* flag, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v >= lo && v <= hi) return;
    char a[32], b[32], c[32];
    if (hi == UINT64_MAX)
        mt_usage_die("--%s=%" PRIu64 " (%s) is too small: it must be at least %s (see --help)", flag, v,
                     mt_fmt_bytes(a, sizeof a, v), mt_fmt_bytes(b, sizeof b, lo));
    mt_usage_die("--%s=%" PRIu64 " (%s) is out of range: it must be %s..%s (see --help)", flag, v,
                 mt_fmt_bytes(a, sizeof a, v), mt_fmt_bytes(b, sizeof b, lo), mt_fmt_bytes(c, sizeof c, hi));
}

uint64_t mt_phys_mem_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pg <= 0) return UINT64_MAX; /* unknown: no limit */
    return (uint64_t)pages * (uint64_t)pg;
}

void mt_require_memory(const char* what, uint64_t bytes) {
    const uint64_t phys = mt_phys_mem_bytes();
    if (bytes <= phys) return;
    char a[32], b[32];
    mt_usage_die("%s needs %" PRIu64 " bytes (%s) of memory, more than this machine's physical memory "
                 "(%s); refusing (check the sizes you asked for)",
                 what, bytes, mt_fmt_bytes(a, sizeof a, bytes), mt_fmt_bytes(b, sizeof b, phys));
}

void mt_check(int status, const char* what) {
    if (status == MEMTIER_OK) return;
    /* Copy the detail first: it is valid only until the next MemTier call. */
    char detail[512];
    snprintf(detail, sizeof detail, "%s", memtier_last_error());
    fflush(stdout);
    fprintf(stderr, "error: %s failed: %s (%s)%s%s\n", what, memtier_strerror(status),
            mt_status_name(status), detail[0] ? ": " : "", detail);
    exit(1);
}

const char* mt_status_name(int status) {
    switch (status) {
#define MT_STATUS_CASE(name) \
    case name: return #name;
        MT_STATUS_LIST(MT_STATUS_CASE)
#undef MT_STATUS_CASE
    default: return "unknown status";
    }
}

void mt_print_banner(const char* prog) {
    const char* v = memtier_version();
    printf("%s: MemTier %s\n", prog, v);
    if (strcmp(v, MEMTIER_VERSION_STRING) != 0 || memtier_version_number() != MEMTIER_VERSION_NUMBER)
        fprintf(stderr, "warning: library version %s (%d) differs from header %s (%d)\n", v,
                memtier_version_number(), MEMTIER_VERSION_STRING, MEMTIER_VERSION_NUMBER);
}

/* MT_STATS_FIELDS(C, S), every field of memtier_stats_t in header order (S: state,
 * not a counter), comes from mt_generated.h, generated from the header. */

void mt_stats_print(FILE* f, const char* indent, const memtier_stats_t* st) {
    int col = 0;
    int any = 0;
#define MT_PRINT_FIELD(name)                                                          \
    if (st->name != 0) {                                                              \
        char item[96];                                                                \
        int len = snprintf(item, sizeof item, "%s=%" PRIu64, #name, (uint64_t)st->name); \
        if (col > 0 && col + 2 + len > 96) {                                          \
            fputc('\n', f);                                                           \
            col = 0;                                                                  \
        }                                                                             \
        if (col == 0)                                                                 \
            col += fprintf(f, "%s", indent);                                          \
        else                                                                          \
            col += fprintf(f, "  ");                                                  \
        col += fprintf(f, "%s", item);                                                \
        any = 1;                                                                      \
    }
    MT_STATS_FIELDS(MT_PRINT_FIELD, MT_PRINT_FIELD)
#undef MT_PRINT_FIELD
    if (!any) fprintf(f, "%s(all counters zero)", indent);
    fputc('\n', f);
}

void mt_stats_sub(memtier_stats_t* out, const memtier_stats_t* a, const memtier_stats_t* b) {
    memtier_stats_t r;
#define MT_SUB_C(name) r.name = a->name - b->name;
#define MT_SUB_S(name) r.name = a->name;
    MT_STATS_FIELDS(MT_SUB_C, MT_SUB_S)
#undef MT_SUB_C
#undef MT_SUB_S
    *out = r;
}

/* JSON */

static void json_indent(mt_json_t* j) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

static void json_string(FILE* f, const char* s) {
    fputc('"', f);
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void json_key(mt_json_t* j, const char* key) {
    if (j->count[j->depth]++ > 0) fputc(',', j->f);
    json_indent(j);
    if (key != NULL) {
        json_string(j->f, key);
        fputs(": ", j->f);
    }
}

static void json_open(mt_json_t* j, char c) {
    fputc(c, j->f);
    if (j->depth < 15) j->depth++;
    j->count[j->depth] = 0;
}

static void json_close(mt_json_t* j, char c) {
    int had = j->count[j->depth] > 0;
    if (j->depth > 0) j->depth--;
    if (had) json_indent(j);
    fputc(c, j->f);
}

void mt_json_begin(mt_json_t* j, FILE* f) {
    memset(j, 0, sizeof *j);
    j->f = f;
    json_open(j, '{');
}

void mt_json_end(mt_json_t* j) {
    while (j->depth > 1) json_close(j, '}');
    json_close(j, '}');
    fputc('\n', j->f);
    fflush(j->f);
}

void mt_json_obj(mt_json_t* j, const char* key) {
    json_key(j, key);
    json_open(j, '{');
}
void mt_json_obj_end(mt_json_t* j) { json_close(j, '}'); }
void mt_json_arr(mt_json_t* j, const char* key) {
    json_key(j, key);
    json_open(j, '[');
}
void mt_json_arr_end(mt_json_t* j) { json_close(j, ']'); }

void mt_json_str(mt_json_t* j, const char* key, const char* v) {
    json_key(j, key);
    if (v == NULL)
        fputs("null", j->f);
    else
        json_string(j->f, v);
}
void mt_json_u64(mt_json_t* j, const char* key, uint64_t v) {
    json_key(j, key);
    fprintf(j->f, "%" PRIu64, v);
}
void mt_json_i64(mt_json_t* j, const char* key, int64_t v) {
    json_key(j, key);
    fprintf(j->f, "%" PRId64, v);
}
void mt_json_f64(mt_json_t* j, const char* key, double v) {
    json_key(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.6g", v);
    else
        fputs("null", j->f);
}
void mt_json_bool(mt_json_t* j, const char* key, int v) {
    json_key(j, key);
    fputs(v ? "true" : "false", j->f);
}
void mt_json_null(mt_json_t* j, const char* key) {
    json_key(j, key);
    fputs("null", j->f);
}
void mt_json_hex(mt_json_t* j, const char* key, uint64_t v) {
    json_key(j, key);
    fprintf(j->f, "\"0x%016" PRIx64 "\"", v);
}
void mt_json_stats(mt_json_t* j, const char* key, const memtier_stats_t* st) {
    mt_json_obj(j, key);
#define MT_JSON_FIELD(name) mt_json_u64(j, #name, (uint64_t)st->name);
    MT_STATS_FIELDS(MT_JSON_FIELD, MT_JSON_FIELD)
#undef MT_JSON_FIELD
    mt_json_obj_end(j);
}

int mt_parse_args(int argc, char** argv, const mt_flag_t* flags, size_t nflags,
                  const char** pos, int maxpos, const char* usage) {
    int npos = mt_parse_flags(argc, argv, flags, nflags, pos, maxpos);
    if (npos < 0) exit(2);
    for (size_t i = 0; i < nflags; i++) {
        if (flags[i].kind == MT_FLAG_BOOL && strcmp(flags[i].name, "help") == 0 &&
            *(const int*)flags[i].value) {
            fputs(usage, stdout);
            mt_print_flags(stdout, flags, nflags);
            exit(0);
        }
    }
    return npos;
}
