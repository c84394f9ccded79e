/*
 * bench_large_read: one large sequential read, MemTier against plain POSIX,
 * O_DIRECT, mmap and fio, measured in the same run; and a relaunch: the same
 * file loaded by a second process after a first one loaded it cold.
 *
 *   bench_large_read [--file=F] [--size=N] [--mode=MODE|all] [--cold] [--warm]
 *                    [--relaunch] [--repeat=R] [--overwrite] [--json]
 *
 * F defaults to a temporary experiment-pattern file (removed at exit); a given F
 * that is missing or shorter than N is created / extended with the pattern first
 * (one "note: created|extended <absolute path>" line says so).
 * N defaults to the size of F, or 256 MiB for the temporary file.
 *
 * Refused with exit 2 before anything is written: an F that is not a regular
 * file (a FIFO, directory, device); an N whose missing bytes do not fit in the
 * free space of F's file system minus a safety margin (the smaller of 1 GiB and
 * 5% of the file system); an N larger than the physical memory (the result
 * buffer holds all N bytes); --repeat outside 1..64. A write that fails removes
 * the file it created, or truncates the file it extended back to its old size.
 *
 * Modes (every one reads N bytes into one page-aligned, pre-faulted buffer):
 *   memtier         one memtier_read_ex of N bytes, default hints, DRAM cache off
 *                   (measures the read path, not the cache); everything else default
 *   posix           single-thread 1 MiB pread loop (the baseline)
 *   direct          single-thread 1 MiB O_DIRECT pread loop
 *   mmap            mmap + memcpy + munmap
 *   fio             fio --rw=read --bs=1M --iodepth=16 --ioengine=libaio --direct=1,
 *                   read bw_bytes from its JSON output (fio reads O_DIRECT: the page
 *                   cache state does not matter to it)
 *   fio_buffered    fio --rw=read --bs=1M --ioengine=psync --direct=0 (a buffered
 *                   sequential reader; cold: --invalidate=1)
 *   memtier_once    as memtier with MEMTIER_READ_ONCE: a cold read may go O_DIRECT
 *                   (the device probe decides; see memtier_explain)
 *   pread_threads   the ceiling of a page-cache read with MemTier's parallelism:
 *                   io_threads threads, each with its own descriptor, a 1 MiB
 *                   pread loop over one contiguous slice (warm pass only)
 *   memtier_cached  DRAM cache hits: a second context with the cache on and a budget
 *                   of N + 64 MiB, filled by one untimed MEMTIER_READ_WILL_REUSE
 *                   read, then timed reads with the same hint (warm pass only; the
 *                   cache's own memory is released after its runs; skipped when
 *                   twice N does not fit in memory)
 * Page cache: warm = after one untimed pread pass; cold = posix_fadvise
 * DONTNEED before every run (fio: --invalidate=1). --mode=all runs both tables
 * and the relaunch; a single mode runs warm unless --cold (both when both flags
 * are given), and is followed by posix, the baseline (memtier_cached also by
 * memtier, its baseline). The modes of a pass take turns: R rounds of one run
 * of each, so drift of a shared disk weighs on every mode alike. seconds =
 * median of R runs; GB/s uses 1 GB = 1e9 B; ratio = GB/s of the mode / GB/s of
 * the baseline.
 * Every buffer is checked once per mode and pass (untimed) against the pattern
 * and its fnv1a64w checksum printed.
 *
 * Relaunch (--relaunch, or --mode=all): R times, the file is dropped from the
 * page cache, a first child process loads it through MemTier (memtier_init with
 * defaults, one memtier_read_ex with default hints), then a second child does the
 * same; then the file is dropped again and two children read it with the posix
 * loop. Each child times its own load (memtier_init or open, through the read;
 * untimed: its buffer's allocation, then a checksum that the parent compares).
 * The row is the second MemTier process against the second posix process:
 * ratio = posix second-process seconds / MemTier second-process seconds (the
 * first children show what each leaves in the page cache for the next one).
 *
 * Summary (the last table; "summary" in --json): each target ratio with the
 * rows it compares, and whether it was met:
 *   cold_vs_best            cold memtier vs the best of posix, direct, mmap, fio
 *                           and fio_buffered in the cold pass (target 1.0)
 *   warm_vs_posix           warm memtier vs posix (target 1.8)
 *   cache_hit_vs_cache_off  warm memtier_cached vs memtier (target 1.2)
 *   relaunch_vs_posix       the relaunch ratio above (target 1.5)
 * A row that this run did not measure says why ("ran": false).
 *
 * Memory: RSS is sampled around the memtier runs: peak RSS (VmHWM, reset before
 * the runs) minus RSS before them is MemTier's own footprint; and around the
 * memtier_cached context: RSS once it is made and filled minus RSS before.
 * "rss_ok" when each is at most its context's cache budget + 64 MiB.
 *
 * Exit 0, 1 when a read failed or returned wrong bytes, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

extern char** environ;

#define MAX_REPEAT 64
#define PREAD_CHUNK (1u << 20)

enum { M_MEMTIER, M_POSIX, M_DIRECT, M_MMAP, M_FIO, M_FIOBUF, M_ONCE, M_CACHED, M_MEMCPY, M_PREADS, M_COUNT };
static const char* const mode_names[M_COUNT] = {"memtier",      "posix",        "direct",         "mmap",
                                                "fio",          "fio_buffered", "memtier_once",   "memtier_cached",
                                                "memcpy_floor", "pread_threads"};

/* is_memtier: the modes that read through a MemTier context. */
static int is_memtier(int m) { return m == M_MEMTIER || m == M_ONCE || m == M_CACHED; }

typedef struct mode_result {
    int ran;                 /* 1 when timed runs happened                      */
    char skip[512];          /* why it did not run                              */
    double samples[MAX_REPEAT];
    int nsamples;
    double seconds;          /* median                                          */
    uint64_t checksum;       /* of the buffer after the first run               */
    int verified;            /* 1 pattern ok, 0 wrong bytes, -1 not checked     */
    uint64_t bad_offset;
    int have_stats;
    memtier_stats_t stats;   /* memtier: counters of the runs of this pass      */
} mode_result_t;

typedef struct pass {
    int cold;
    int64_t resident_before; /* page cache bytes of the file before the first run */
    mode_result_t m[M_COUNT];
} pass_t;

/* Benchmark state shared by the runners. */
typedef struct bench {
    const char* path;
    uint64_t size;
    uint8_t* buf;
    size_t buf_len;
    memtier_ctx_t* ctx;
    memtier_ctx_t* once_ctx;   /* memtier_once: a context of its own, so its stats are its own */
    memtier_ctx_t* cached_ctx; /* memtier_cached: cache on, filled; NULL otherwise */
    uint64_t cached_budget;    /* memtier_cached: its cache budget, bytes */
    uint64_t cached_rss0;      /* memtier_cached: RSS before cached_open, bytes */
    uint64_t cached_overhead;  /* memtier_cached: largest RSS growth over cached_open (made, filled) */
    uint8_t* copy_src;         /* memcpy_floor: the file's bytes in memory; NULL otherwise */
    unsigned copy_threads;     /* memcpy_floor: threads, the default io_threads */
    int file_is_pattern; /* -1 unknown, 1 yes, 0 no */
} bench_t;

/* ---- runners: each returns 0 and *secs, or -1 with why[] ---- */

static int run_memtier(bench_t* b, memtier_ctx_t* ctx, uint32_t flags, double* secs, char* why, size_t wlen) {
    uint64_t t0 = mt_now_ns();
    int st = memtier_read_ex(ctx, b->path, 0, b->size, b->buf, MEMTIER_TARGET_CPU, flags);
    uint64_t t1 = mt_now_ns();
    if (st != MEMTIER_OK) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", memtier_last_error());
        snprintf(why, wlen, "memtier_read_ex: %s (%s): %s", memtier_strerror(st), mt_status_name(st), detail);
        return -1;
    }
    *secs = (double)(t1 - t0) / 1e9;
    return 0;
}

/* cached_open makes the memtier_cached context and fills its cache with one
 * untimed read; 0, or -1 with why[] (the mode is skipped). */
static int cached_open(bench_t* b, char* why, size_t wlen) {
    const uint64_t need = b->buf_len + b->size + 64 * MT_MIB;
    if (need > mt_phys_mem_bytes() / 10 * 9) {
        char x[32], y[32];
        snprintf(why, wlen, "skipped: the result buffer and a cache of N bytes (%s) need more than 90%% of memory (%s)",
                 mt_fmt_bytes(x, sizeof x, need), mt_fmt_bytes(y, sizeof y, mt_phys_mem_bytes()));
        return -1;
    }
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 1;
    cfg.cache_bytes = (b->size + 64 * MT_MIB + cfg.cache_block_bytes - 1) / cfg.cache_block_bytes * cfg.cache_block_bytes;
    b->cached_budget = cfg.cache_bytes;
    b->cached_rss0 = mt_rss_bytes();
    int st = memtier_init(&cfg, &b->cached_ctx);
    if (st != MEMTIER_OK) {
        snprintf(why, wlen, "memtier_init with a %" PRIu64 "-byte cache: %s: %s", cfg.cache_bytes, mt_status_name(st),
                 memtier_last_error());
        b->cached_ctx = NULL;
        return -1;
    }
    double secs;
    if (run_memtier(b, b->cached_ctx, MEMTIER_READ_WILL_REUSE, &secs, why, wlen) != 0) return -1;
    /* The cache now holds every block, and its timed rounds are hits (no
     * allocation); RSS is taken here, before the other modes set up (the
     * memcpy floor's copy of the file would count otherwise). */
    const uint64_t rss = mt_rss_bytes();
    const uint64_t over = rss > b->cached_rss0 ? rss - b->cached_rss0 : 0;
    if (over > b->cached_overhead) b->cached_overhead = over;
    return 0;
}

/* mode_ctx: the context a memtier mode reads through. */
static memtier_ctx_t* mode_ctx(const bench_t* b, int m) {
    return m == M_CACHED ? b->cached_ctx : m == M_ONCE ? b->once_ctx : b->ctx;
}

static void cached_close(bench_t* b) {
    if (b->cached_ctx != NULL) mt_check(memtier_finalize(b->cached_ctx), "memtier_finalize (memtier_cached)");
    b->cached_ctx = NULL;
}

/* posix_load: the posix loop (open, 1 MiB preads, close) of the whole file
 * into dst; 0, or -1 with why[]. */
static int posix_load(const bench_t* b, uint8_t* dst, char* why, size_t wlen) {
    int fd = mt_open_file(b->path, O_RDONLY, 0);
    if (fd < 0) {
        snprintf(why, wlen, "open: %s", strerror(errno));
        return -1;
    }
    for (uint64_t off = 0; off < b->size;) {
        size_t n = b->size - off < PREAD_CHUNK ? (size_t)(b->size - off) : PREAD_CHUNK;
        ssize_t r = pread(fd, dst + off, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(why, wlen, "pread at %" PRIu64 ": %s", off, r < 0 ? strerror(errno) : "end of file");
            close(fd);
            return -1;
        }
        off += (uint64_t)r;
    }
    close(fd);
    return 0;
}

/* memcpy_floor: the physical ceiling of a DRAM-cache hit (and of any copy of
 * N bytes in memory): io_threads threads, MemTier's default parallelism, each
 * memcpy one contiguous slice of a pre-faulted copy of the file into the
 * pre-faulted result buffer. Nothing that copies N bytes from memory can beat
 * it, so a row whose baseline is near it cannot reach a ratio much above 1. */
/* A slice [lo, lo + n) of the file, one thread's share of a sliced mode. */
typedef struct slice_part {
    const bench_t* b;
    uint64_t lo, n;
    int failed; /* set by the worker */
} slice_part_t;

static void* copy_worker(void* arg) {
    slice_part_t* p = arg;
    memcpy(p->b->buf + p->lo, p->b->copy_src + p->lo, (size_t)p->n);
    return NULL;
}

/* run_sliced times worker over t slices of the file (each a multiple of
 * align bytes but the last), one thread each; the caller's thread runs
 * slice 0, as MemTier's caller works on its own request. */
static int run_sliced(const bench_t* b, unsigned t, uint64_t align, void* (*worker)(void*), double* secs, char* why,
                      size_t wlen) {
    pthread_t th[64];
    slice_part_t parts[64];
    t = t < 1 ? 1 : t > 64 ? 64 : t;
    const uint64_t per = (b->size / t + align - 1) / align * align;
    uint64_t t0 = mt_now_ns();
    unsigned started = 0;
    for (unsigned k = 0; k < t; k++) {
        const uint64_t lo = (uint64_t)k * per;
        if (lo >= b->size) break;
        parts[k] = (slice_part_t){b, lo, b->size - lo < per ? b->size - lo : per, 0};
        if (k == 0) continue;
        if (pthread_create(&th[k], NULL, worker, &parts[k]) != 0) {
            snprintf(why, wlen, "pthread_create: %s", strerror(errno));
            for (unsigned j = 1; j < k; j++) pthread_join(th[j], NULL);
            return -1;
        }
        started = k;
    }
    worker(&parts[0]);
    for (unsigned j = 1; j <= started; j++) pthread_join(th[j], NULL);
    *secs = (double)(mt_now_ns() - t0) / 1e9;
    for (unsigned j = 0; j <= started; j++) {
        if (parts[j].failed) {
            snprintf(why, wlen, "slice [%" PRIu64 ", +%" PRIu64 ") failed", parts[j].lo, parts[j].n);
            return -1;
        }
    }
    return 0;
}

static int memcpy_open(bench_t* b, char* why, size_t wlen) {
    const uint64_t need = b->buf_len + b->size + 64 * MT_MIB;
    if (need > mt_phys_mem_bytes() / 10 * 9) {
        snprintf(why, wlen, "skipped: the result buffer and a second copy of N bytes need more than 90%% of memory");
        return -1;
    }
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    b->copy_threads = cfg.io_threads < 1 ? 1 : cfg.io_threads > 64 ? 64 : cfg.io_threads;
    void* m = mmap(NULL, (size_t)b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        snprintf(why, wlen, "mmap of the source copy: %s", strerror(errno));
        return -1;
    }
    b->copy_src = m;
    return posix_load(b, b->copy_src, why, wlen);
}

static void memcpy_close(bench_t* b) {
    if (b->copy_src != NULL) munmap(b->copy_src, (size_t)b->size);
    b->copy_src = NULL;
}

static int run_memcpy(bench_t* b, double* secs, char* why, size_t wlen) {
    return run_sliced(b, b->copy_threads, 4096, copy_worker, secs, why, wlen);
}

/* pread_threads: the ceiling of a read from the page cache (a copy by the
 * kernel, which on a CPU without fast string copies runs slower than a vector
 * memcpy in user space): io_threads threads, MemTier's default parallelism,
 * each a posix loop over one contiguous slice on its own descriptor (its own
 * readahead state). A warm read through the page cache cannot beat it by
 * much, whatever the reader. */
static void* pread_worker(void* arg) {
    slice_part_t* p = arg;
    int fd = mt_open_file(p->b->path, O_RDONLY, 0);
    if (fd < 0) {
        p->failed = 1;
        return NULL;
    }
    for (uint64_t off = p->lo; off < p->lo + p->n;) {
        const uint64_t left = p->lo + p->n - off;
        const size_t n = left < PREAD_CHUNK ? (size_t)left : PREAD_CHUNK;
        ssize_t r = pread(fd, p->b->buf + off, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            p->failed = 1;
            break;
        }
        off += (uint64_t)r;
    }
    close(fd);
    return NULL;
}

static int run_preads(bench_t* b, double* secs, char* why, size_t wlen) {
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    return run_sliced(b, cfg.io_threads, PREAD_CHUNK, pread_worker, secs, why, wlen);
}

static int run_posix(bench_t* b, double* secs, char* why, size_t wlen) {
    uint64_t t0 = mt_now_ns();
    if (posix_load(b, b->buf, why, wlen) != 0) return -1;
    *secs = (double)(mt_now_ns() - t0) / 1e9;
    return 0;
}

static int run_direct(bench_t* b, double* secs, char* why, size_t wlen) {
    uint64_t t0 = mt_now_ns();
    int fd = mt_open_file(b->path, O_RDONLY | O_DIRECT, 0);
    if (fd < 0) {
        snprintf(why, wlen, "%s", errno == EINVAL ? "O_DIRECT not supported by this file system"
                                                  : strerror(errno));
        return -1;
    }
    /* Offsets are multiples of 1 MiB and the buffer is page-aligned; the last
     * read asks for a whole number of 4 KiB blocks (the buffer has room) and
     * comes back short at end of file. */
    uint64_t off = 0;
    while (off < b->size) {
        uint64_t left = b->size - off;
        size_t n = left < PREAD_CHUNK ? (size_t)((left + 4095) & ~(uint64_t)4095) : PREAD_CHUNK;
        ssize_t r = pread(fd, b->buf + off, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(why, wlen, "O_DIRECT pread at %" PRIu64 ": %s", off, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0) break;
        if ((size_t)r < n && off + (uint64_t)r < b->size) {
            snprintf(why, wlen, "O_DIRECT short read at %" PRIu64, off);
            close(fd);
            return -1;
        }
        off += (uint64_t)r;
    }
    close(fd);
    *secs = (double)(mt_now_ns() - t0) / 1e9;
    if (off < b->size) {
        snprintf(why, wlen, "O_DIRECT read ended at %" PRIu64, off);
        return -1;
    }
    return 0;
}

static int run_mmap(bench_t* b, double* secs, char* why, size_t wlen) {
    uint64_t t0 = mt_now_ns();
    int fd = mt_open_file(b->path, O_RDONLY, 0);
    if (fd < 0) {
        snprintf(why, wlen, "open: %s", strerror(errno));
        return -1;
    }
    void* m = mmap(NULL, (size_t)b->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(why, wlen, "mmap: %s", strerror(errno));
        close(fd);
        return -1;
    }
    memcpy(b->buf, m, (size_t)b->size);
    munmap(m, (size_t)b->size);
    close(fd);
    *secs = (double)(mt_now_ns() - t0) / 1e9;
    return 0;
}

/* fio ---------------------------------------------------------------- */

static int find_in_path(const char* prog) {
    const char* p = getenv("PATH");
    if (p == NULL) p = "/usr/bin:/bin";
    char dir[4096];
    while (*p) {
        size_t n = strcspn(p, ":");
        if (n > 0 && n < sizeof dir - strlen(prog) - 2) {
            memcpy(dir, p, n);
            snprintf(dir + n, sizeof dir - n, "/%s", prog);
            if (access(dir, X_OK) == 0) return 1;
        }
        p += n;
        if (*p == ':') p++;
    }
    return 0;
}

/* json_number_after: the number after "key" following from, or -1. */
static double json_number_after(const char* from, const char* key) {
    const char* k = strstr(from, key);
    if (k == NULL) return -1;
    const char* c = strchr(k + strlen(key), ':');
    if (c == NULL) return -1;
    return strtod(c + 1, NULL);
}

static int run_fio(bench_t* b, int cold, int direct, double* secs, char* why, size_t wlen) {
    /* fio separates file names with ':'; escape it. */
    char fname[4200] = "--filename=";
    size_t fl = strlen(fname);
    for (const char* p = b->path; *p && fl + 3 < sizeof fname; p++) {
        if (*p == ':') fname[fl++] = '\\';
        fname[fl++] = *p;
    }
    fname[fl] = '\0';
    char fsize[64];
    snprintf(fsize, sizeof fsize, "--size=%" PRIu64, b->size);
    char* argv_direct[] = {"fio", "--name=seq", fname, "--rw=read", "--bs=1M", "--iodepth=16",
                           "--ioengine=libaio", "--direct=1", fsize, "--output-format=json",
                           cold ? "--invalidate=1" : NULL, NULL};
    char* argv_buffered[] = {"fio", "--name=seq", fname, "--rw=read", "--bs=1M",
                             "--ioengine=psync", "--direct=0", fsize, "--output-format=json",
                             cold ? "--invalidate=1" : NULL, NULL};
    char** argv = direct ? argv_direct : argv_buffered;
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(why, wlen, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    posix_spawn_file_actions_addclose(&fa, pfd[1]);
    pid_t pid;
    int rc = posix_spawnp(&pid, "fio", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (rc != 0) {
        close(pfd[0]);
        snprintf(why, wlen, "%s", rc == ENOENT ? "fio: not installed" : strerror(rc));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char* out = (char*)malloc(cap);
    if (out == NULL) mt_die("out of memory");
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap *= 2;
            char* n = (char*)realloc(out, cap);
            if (n == NULL) mt_die("out of memory");
            out = n;
        }
        ssize_t r = read(pfd[0], out + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    out[len] = '\0';
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const char* jobs = strstr(out, "\"jobs\"");
    const char* rd = jobs ? strstr(jobs, "\"read\"") : NULL;
    double bw = rd ? json_number_after(rd, "\"bw_bytes\"") : -1;
    double io = rd ? json_number_after(rd, "\"io_bytes\"") : -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || bw <= 0 || io <= 0) {
        const char* line = strstr(out, "fio:");
        if (line == NULL) line = out;
        size_t n = strcspn(line, "\n");
        snprintf(why, wlen, "fio failed (exit %d): %.*s", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 (int)(n < 120 ? n : 120), line);
        free(out);
        return -1;
    }
    free(out);
    *secs = io / bw;
    return 0;
}

/* ---- one pass (warm or cold) ---- */

static void warm_page_cache(bench_t* b) {
    double s;
    char why[160];
    if (run_posix(b, &s, why, sizeof why) != 0) mt_die("warm-up read: %s", why);
}

static void run_pass(bench_t* b, pass_t* p, const int* modes, int nmodes, int repeat, int fio_ok,
                     uint64_t* peak_overhead, int* ok) {
    if (p->cold) {
        if (mt_drop_page_cache(b->path) != 0) mt_note("note: cannot drop the page cache: %s\n", strerror(errno));
    } else {
        warm_page_cache(b);
    }
    p->resident_before = mt_page_cache_resident(b->path);

    /* Set up every mode, then run the modes in turn, one run each per round,
     * so drift of a shared disk during the pass weighs on every mode alike. */
    int active[M_COUNT] = {0};
    memtier_stats_t s0[M_COUNT];
    for (int mi = 0; mi < nmodes; mi++) {
        const int m = modes[mi];
        mode_result_t* r = &p->m[m];
        r->verified = -1;
        if ((m == M_FIO || m == M_FIOBUF) && !fio_ok) {
            snprintf(r->skip, sizeof r->skip, "fio: not installed");
            continue;
        }
        if (m == M_CACHED && p->cold) {
            snprintf(r->skip, sizeof r->skip, "warm pass only (DRAM cache hits do not read the page cache)");
            continue;
        }
        if (m == M_CACHED && cached_open(b, r->skip, sizeof r->skip) != 0) {
            cached_close(b);
            continue;
        }
        if (m == M_MEMCPY && p->cold) {
            snprintf(r->skip, sizeof r->skip, "warm pass only (a copy in memory does not read the page cache)");
            continue;
        }
        if (m == M_PREADS && p->cold) {
            snprintf(r->skip, sizeof r->skip, "warm pass only (the ceiling of a page-cache read)");
            continue;
        }
        if (m == M_MEMCPY && memcpy_open(b, r->skip, sizeof r->skip) != 0) {
            memcpy_close(b);
            continue;
        }
        if (is_memtier(m)) mt_check(memtier_stats(mode_ctx(b, m), &s0[m]), "memtier_stats");
        active[m] = 1;
    }
    for (int k = 0; k < repeat; k++) {
        for (int mi = 0; mi < nmodes; mi++) {
            const int m = modes[mi];
            mode_result_t* r = &p->m[m];
            if (!active[m]) continue;
            if (p->cold) mt_drop_page_cache(b->path);
            const int is_fio = m == M_FIO || m == M_FIOBUF;
            if (!is_fio) memset(b->buf, 0xA5, b->buf_len); /* untimed: stale bytes cannot pass */
            uint64_t rss_before = 0;
            int peak_reset = 0;
            if (m == M_MEMTIER) {
                rss_before = mt_rss_bytes();
                peak_reset = mt_peak_rss_reset() == 0;
            }
            double secs = 0;
            int rc;
            switch (m) {
            case M_MEMTIER: rc = run_memtier(b, b->ctx, 0, &secs, r->skip, sizeof r->skip); break;
            case M_ONCE: rc = run_memtier(b, b->once_ctx, MEMTIER_READ_ONCE, &secs, r->skip, sizeof r->skip); break;
            case M_CACHED:
                rc = run_memtier(b, b->cached_ctx, MEMTIER_READ_WILL_REUSE, &secs, r->skip, sizeof r->skip);
                break;
            case M_POSIX: rc = run_posix(b, &secs, r->skip, sizeof r->skip); break;
            case M_DIRECT: rc = run_direct(b, &secs, r->skip, sizeof r->skip); break;
            case M_MMAP: rc = run_mmap(b, &secs, r->skip, sizeof r->skip); break;
            case M_MEMCPY: rc = run_memcpy(b, &secs, r->skip, sizeof r->skip); break;
            case M_PREADS: rc = run_preads(b, &secs, r->skip, sizeof r->skip); break;
            default: rc = run_fio(b, p->cold, m == M_FIO, &secs, r->skip, sizeof r->skip); break;
            }
            if (m == M_MEMTIER && peak_reset) {
                uint64_t peak = mt_peak_rss_bytes();
                uint64_t over = peak > rss_before ? peak - rss_before : 0;
                if (over > *peak_overhead) *peak_overhead = over;
            }
            if (rc != 0) {
                r->ran = 0;
                active[m] = 0;
                /* A memtier failure is a failure of the benchmark; others are skips. */
                if (is_memtier(m)) *ok = 0;
                continue;
            }
            r->ran = 1;
            r->samples[r->nsamples++] = secs;
            if (k == 0 && !is_fio) {
                r->checksum = mt_checksum(b->buf, (size_t)b->size);
                r->bad_offset = mt_pattern_check(b->buf, 0, (size_t)b->size);
                r->verified = r->bad_offset == MT_NO_MISMATCH;
            }
        }
    }
    for (int mi = 0; mi < nmodes; mi++) {
        const int m = modes[mi];
        mode_result_t* r = &p->m[m];
        if (is_memtier(m) && (active[m] || r->nsamples > 0)) {
            memtier_stats_t s1;
            mt_check(memtier_stats(mode_ctx(b, m), &s1), "memtier_stats");
            mt_stats_sub(&r->stats, &s1, &s0[m]);
            r->have_stats = 1;
        }
        if (m == M_CACHED) cached_close(b);
        if (m == M_MEMCPY) memcpy_close(b);
        if (r->ran) {
            double tmp[MAX_REPEAT];
            memcpy(tmp, r->samples, sizeof(double) * (size_t)r->nsamples);
            r->seconds = mt_median(tmp, (size_t)r->nsamples);
        }
    }

    /* Correctness: pattern files must match the pattern; other files must give
     * the same checksum in every mode. */
    const mode_result_t* base = &p->m[M_POSIX];
    for (int mi = 0; mi < nmodes; mi++) {
        const mode_result_t* r = &p->m[modes[mi]];
        if (!r->ran || r->verified < 0) continue;
        if (b->file_is_pattern == 1 && !r->verified) *ok = 0;
        if (b->file_is_pattern == 0 && base->ran && r->checksum != base->checksum) *ok = 0;
    }
}

static double ratio(const mode_result_t* a, const mode_result_t* base) {
    if (!a->ran || !base->ran || a->seconds <= 0 || base->seconds <= 0) return 0;
    return base->seconds / a->seconds; /* same bytes: GB/s ratio */
}

static void detail_text(char* out, size_t len, int m, const mode_result_t* r, const bench_t* b) {
    out[0] = '\0';
    if (is_memtier(m) && r->have_stats && r->nsamples > 0) {
        char x[32], y[32], z[32];
        const uint64_t n = (uint64_t)r->nsamples;
        snprintf(out, len, "per run: direct %s, buffered %s, cache %s, fallbacks %" PRIu64,
                 mt_fmt_bytes(x, sizeof x, r->stats.direct_bytes / n),
                 mt_fmt_bytes(y, sizeof y, r->stats.buffered_bytes / n),
                 mt_fmt_bytes(z, sizeof z, r->stats.cache_hit_bytes / n),
                 (uint64_t)r->stats.direct_fallbacks / n);
    } else if (m == M_FIO) {
        snprintf(out, len, "O_DIRECT, iodepth 16, libaio");
    } else if (m == M_FIOBUF) {
        snprintf(out, len, "buffered, psync");
    }
    if (r->verified == 0) {
        size_t u = strlen(out);
        if (b->file_is_pattern == 1)
            snprintf(out + u, len - u, "%sWRONG BYTE at %" PRIu64, u ? "; " : "", r->bad_offset);
    }
}

static void print_pass(const bench_t* b, const pass_t* p, const int* modes, int nmodes) {
    char x[32], y[32];
    printf("\n%s page cache (%s; page cache held %s of %s before the first run)\n",
           p->cold ? "cold" : "warm",
           p->cold ? "posix_fadvise DONTNEED before every run; fio --invalidate=1"
                   : "after one untimed pread pass",
           p->resident_before >= 0 ? mt_fmt_bytes(x, sizeof x, (uint64_t)p->resident_before) : "?",
           mt_fmt_bytes(y, sizeof y, b->size));
    const mode_result_t* posix = &p->m[M_POSIX];
    const mode_result_t* fio = &p->m[M_FIO];
    const int show_fio = p->cold && fio->ran;
    printf("%-14s %12s %9s %8s %9s", "mode", "bytes", "seconds", "GB/s", "vs posix");
    if (show_fio) printf(" %8s", "vs fio");
    printf("  %-18s %-8s %s\n", "checksum", "pattern", "detail");
    for (int mi = 0; mi < nmodes; mi++) {
        const int m = modes[mi];
        const mode_result_t* r = &p->m[m];
        if (!r->ran) {
            printf("%-14s %s\n", mode_names[m], r->skip[0] ? r->skip : "skipped");
            continue;
        }
        char rv[16], rf[16], cs[24], det[600];
        if (m == M_POSIX)
            snprintf(rv, sizeof rv, "baseline");
        else
            snprintf(rv, sizeof rv, "%.2fx", ratio(r, posix));
        snprintf(rf, sizeof rf, m == M_FIO || m == M_FIOBUF ? "-" : "%.2fx", ratio(r, fio));
        if (r->verified < 0)
            snprintf(cs, sizeof cs, "-");
        else
            snprintf(cs, sizeof cs, "0x%016" PRIx64, r->checksum);
        detail_text(det, sizeof det, m, r, b);
        printf("%-14s %12" PRIu64 " %9.4f %8.2f %9s", mode_names[m], b->size, r->seconds,
               mt_gbps(b->size, r->seconds), rv);
        if (show_fio) printf(" %8s", rf);
        printf("  %-18s %-8s %s\n", cs,
               r->verified < 0 ? "-" : (r->verified ? "ok" : (b->file_is_pattern == 1 ? "WRONG" : "no")),
               det);
    }
}

static void json_pass(mt_json_t* j, const bench_t* b, const pass_t* p, const int* modes, int nmodes) {
    mt_json_obj(j, NULL);
    mt_json_str(j, "page_cache", p->cold ? "cold" : "warm");
    mt_json_i64(j, "resident_bytes_before", p->resident_before);
    mt_json_arr(j, "modes");
    for (int mi = 0; mi < nmodes; mi++) {
        const int m = modes[mi];
        const mode_result_t* r = &p->m[m];
        mt_json_obj(j, NULL);
        mt_json_str(j, "mode", mode_names[m]);
        mt_json_bool(j, "ran", r->ran);
        if (!r->ran) {
            mt_json_str(j, "skipped", r->skip);
            mt_json_obj_end(j);
            continue;
        }
        mt_json_u64(j, "bytes", b->size);
        mt_json_f64(j, "seconds", r->seconds);
        mt_json_arr(j, "samples");
        for (int k = 0; k < r->nsamples; k++) mt_json_f64(j, NULL, r->samples[k]);
        mt_json_arr_end(j);
        mt_json_f64(j, "gbps", mt_gbps(b->size, r->seconds));
        if (m != M_POSIX && p->m[M_POSIX].ran) mt_json_f64(j, "ratio_vs_posix", ratio(r, &p->m[M_POSIX]));
        if (p->cold && m != M_FIO && m != M_FIOBUF && p->m[M_FIO].ran)
            mt_json_f64(j, "ratio_vs_fio", ratio(r, &p->m[M_FIO]));
        if (m == M_CACHED && p->m[M_MEMTIER].ran) mt_json_f64(j, "ratio_vs_memtier", ratio(r, &p->m[M_MEMTIER]));
        if (r->verified >= 0) {
            mt_json_hex(j, "checksum", r->checksum);
            mt_json_bool(j, "pattern_ok", r->verified);
        }
        if (r->have_stats) mt_json_stats(j, "stats", &r->stats);
        mt_json_obj_end(j);
    }
    mt_json_arr_end(j);
    mt_json_obj_end(j);
}

/* ---- relaunch: a second process loading the file after a first one ---- */

enum { C_MEMTIER, C_POSIX, C_COUNT };
static const char* const child_names[C_COUNT] = {"memtier", "posix"};

typedef struct relaunch {
    int ran;
    char skip[512];
    double first[C_COUNT][MAX_REPEAT];  /* seconds of the first child, per repeat  */
    double second[C_COUNT][MAX_REPEAT]; /* seconds of the second child             */
    int n;                              /* repeats done                            */
    double first_med[C_COUNT], second_med[C_COUNT];
    int64_t resident_after_first[C_COUNT]; /* page cache bytes after the first child (last repeat) */
    uint64_t checksum;                  /* every child's buffer checksum           */
    int checksums_agree;
} relaunch_t;

/* child_load is the whole of a child process: one load of path (size bytes)
 * by kind, timed from memtier_init (or open) through the read; prints
 * "seconds=S checksum=0x..." on stdout. Returns the exit status. */
static int child_load(const char* kind, const char* path, uint64_t size) {
    const size_t len = (size_t)((size + PREAD_CHUNK - 1) / PREAD_CHUNK * PREAD_CHUNK);
    uint8_t* buf = (uint8_t*)mt_alloc(len); /* untimed, pre-faulted */
    bench_t b;
    memset(&b, 0, sizeof b);
    b.path = path;
    b.size = size;
    b.buf = buf;
    b.buf_len = len;
    double secs = 0;
    char why[512];
    int rc;
    if (strcmp(kind, "memtier") == 0) {
        uint64_t t0 = mt_now_ns();
        memtier_ctx_t* ctx = NULL;
        int st = memtier_init(NULL, &ctx);
        if (st != MEMTIER_OK) {
            fprintf(stderr, "child: memtier_init: %s: %s\n", mt_status_name(st), memtier_last_error());
            return 1;
        }
        rc = run_memtier(&b, ctx, 0, &secs, why, sizeof why);
        secs = (double)(mt_now_ns() - t0) / 1e9;
        memtier_finalize(ctx);
    } else if (strcmp(kind, "posix") == 0) {
        rc = run_posix(&b, &secs, why, sizeof why);
    } else {
        fprintf(stderr, "child: unknown --child=%s\n", kind);
        return 2;
    }
    if (rc != 0) {
        fprintf(stderr, "child %s: %s\n", kind, why);
        return 1;
    }
    printf("seconds=%.9f checksum=0x%016" PRIx64 "\n", secs, mt_checksum(buf, (size_t)size));
    free(buf);
    return 0;
}

/* spawn_child runs this program with --child=kind and reads its result. */
static int spawn_child(const bench_t* b, int kind, double* secs, uint64_t* sum, char* why, size_t wlen) {
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0) {
        snprintf(why, wlen, "readlink /proc/self/exe: %s", strerror(errno));
        return -1;
    }
    exe[el] = '\0';
    char a_kind[64], a_size[64];
    char* a_file = (char*)malloc(strlen(b->path) + 16);
    if (a_file == NULL) mt_die("out of memory");
    snprintf(a_kind, sizeof a_kind, "--child=%s", child_names[kind]);
    snprintf(a_size, sizeof a_size, "--size=%" PRIu64, b->size);
    sprintf(a_file, "--file=%s", b->path);
    char* argv[] = {exe, a_kind, a_file, a_size, NULL};
    int pfd[2];
    if (pipe(pfd) != 0) {
        free(a_file);
        snprintf(why, wlen, "pipe: %s", strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    posix_spawn_file_actions_addclose(&fa, pfd[1]);
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    free(a_file);
    if (rc != 0) {
        close(pfd[0]);
        snprintf(why, wlen, "posix_spawn: %s", strerror(rc));
        return -1;
    }
    char out[512];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(pfd[0], out + len, sizeof out - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
        if (len == sizeof out - 1) break;
    }
    out[len] = '\0';
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const char* sp = strstr(out, "seconds=");
    const char* cp = strstr(out, "checksum=");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || sp == NULL || cp == NULL) {
        snprintf(why, wlen, "%s child failed (exit %d; its stderr says why)", child_names[kind],
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return -1;
    }
    *secs = strtod(sp + 8, NULL);
    *sum = strtoull(cp + 9, NULL, 16);
    return 0;
}

/* run_relaunch: R rounds of (drop, memtier child, memtier child, drop, posix
 * child, posix child). */
static void run_relaunch(const bench_t* b, relaunch_t* rl, int repeat, int* ok) {
    rl->checksums_agree = 1;
    int have_sum = 0;
    for (int k = 0; k < repeat; k++) {
        for (int c = 0; c < C_COUNT; c++) {
            if (mt_drop_page_cache(b->path) != 0) {
                snprintf(rl->skip, sizeof rl->skip, "cannot drop the page cache: %s", strerror(errno));
                return;
            }
            for (int which = 0; which < 2; which++) {
                double secs;
                uint64_t sum;
                if (spawn_child(b, c, &secs, &sum, rl->skip, sizeof rl->skip) != 0) {
                    rl->ran = 0;
                    *ok = 0;
                    return;
                }
                if (!have_sum) rl->checksum = sum, have_sum = 1;
                if (sum != rl->checksum) rl->checksums_agree = 0;
                (which == 0 ? rl->first : rl->second)[c][k] = secs;
                if (which == 0) rl->resident_after_first[c] = mt_page_cache_resident(b->path);
            }
        }
        rl->n = k + 1;
    }
    for (int c = 0; c < C_COUNT; c++) {
        double tmp[MAX_REPEAT];
        memcpy(tmp, rl->first[c], sizeof(double) * (size_t)rl->n);
        rl->first_med[c] = mt_median(tmp, (size_t)rl->n);
        memcpy(tmp, rl->second[c], sizeof(double) * (size_t)rl->n);
        rl->second_med[c] = mt_median(tmp, (size_t)rl->n);
    }
    rl->ran = 1;
    if (!rl->checksums_agree || (b->file_is_pattern == 1 && rl->checksum != mt_pattern_checksum(b->size))) *ok = 0;
}

/* ---- summary: the target ratios ---- */

typedef struct target_row {
    const char* key;
    const char* what;
    double target;
    int ran;
    char skip[160];
    const char* mode;     /* the measured side */
    const char* baseline; /* the mode it is compared with */
    double secs, base_secs, ratio;
} target_row_t;

enum { T_COLD, T_WARM, T_CACHE, T_RELAUNCH, T_COUNT };

static void summarize(const bench_t* b, const pass_t* passes, int npasses, const relaunch_t* rl, int relaunch_asked,
                      target_row_t* t) {
    (void)b;
    t[T_COLD] = (target_row_t){"cold_vs_best", "cold read vs the best of posix, direct, mmap, fio, fio_buffered", 1.0};
    t[T_WARM] = (target_row_t){"warm_vs_posix", "warm read vs the posix loop", 1.8};
    t[T_CACHE] = (target_row_t){"cache_hit_vs_cache_off", "DRAM cache hit vs cache off, page cache warm", 1.2};
    t[T_RELAUNCH] = (target_row_t){"relaunch_vs_posix", "second process vs a posix loop in a second process", 1.5};
    const pass_t* warm = NULL;
    const pass_t* cold = NULL;
    for (int i = 0; i < npasses; i++) {
        if (passes[i].cold)
            cold = &passes[i];
        else
            warm = &passes[i];
    }
    target_row_t* r = &t[T_COLD];
    if (cold == NULL || !cold->m[M_MEMTIER].ran) {
        snprintf(r->skip, sizeof r->skip, "needs a cold pass with memtier (--mode=all, or --cold)");
    } else {
        const int cand[] = {M_POSIX, M_DIRECT, M_MMAP, M_FIO, M_FIOBUF};
        int best = -1;
        for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
            const mode_result_t* m = &cold->m[cand[i]];
            if (m->ran && (best < 0 || m->seconds < cold->m[best].seconds)) best = cand[i];
        }
        if (best < 0) {
            snprintf(r->skip, sizeof r->skip, "no baseline ran in the cold pass (--mode=all)");
        } else {
            r->ran = 1;
            r->mode = mode_names[M_MEMTIER];
            r->baseline = mode_names[best];
            r->secs = cold->m[M_MEMTIER].seconds;
            r->base_secs = cold->m[best].seconds;
        }
    }
    r = &t[T_WARM];
    if (warm == NULL || !warm->m[M_MEMTIER].ran || !warm->m[M_POSIX].ran) {
        snprintf(r->skip, sizeof r->skip, "needs a warm pass with memtier and posix");
    } else {
        r->ran = 1, r->mode = "memtier", r->baseline = "posix";
        r->secs = warm->m[M_MEMTIER].seconds, r->base_secs = warm->m[M_POSIX].seconds;
    }
    r = &t[T_CACHE];
    if (warm == NULL || !warm->m[M_CACHED].ran || !warm->m[M_MEMTIER].ran) {
        snprintf(r->skip, sizeof r->skip, "%s",
                 warm != NULL && warm->m[M_CACHED].skip[0] ? warm->m[M_CACHED].skip
                                                           : "needs a warm pass with memtier_cached and memtier (--mode=all)");
    } else {
        r->ran = 1, r->mode = "memtier_cached", r->baseline = "memtier";
        r->secs = warm->m[M_CACHED].seconds, r->base_secs = warm->m[M_MEMTIER].seconds;
    }
    r = &t[T_RELAUNCH];
    if (!rl->ran) {
        snprintf(r->skip, sizeof r->skip, "%s", relaunch_asked ? rl->skip : "not asked (--relaunch or --mode=all)");
    } else {
        r->ran = 1, r->mode = "memtier second process", r->baseline = "posix second process";
        r->secs = rl->second_med[C_MEMTIER], r->base_secs = rl->second_med[C_POSIX];
    }
    for (int i = 0; i < T_COUNT; i++)
        if (t[i].ran && t[i].secs > 0) t[i].ratio = t[i].base_secs / t[i].secs;
}

static void print_summary(const bench_t* b, const relaunch_t* rl, const target_row_t* t) {
    if (rl->ran) {
        printf("\nrelaunch (page cache dropped, then two child processes load the file one after the other;\n"
               "seconds = median of %d rounds, each child timed from memtier_init/open through its read)\n",
               rl->n);
        printf("%-8s %13s %9s %14s %9s  %s\n", "loader", "first child s", "GB/s", "second child s", "GB/s",
               "page cache after the first child");
        for (int c = 0; c < C_COUNT; c++) {
            char x[32];
            printf("%-8s %13.4f %9.2f %14.4f %9.2f  %s\n", child_names[c], rl->first_med[c],
                   mt_gbps(b->size, rl->first_med[c]), rl->second_med[c], mt_gbps(b->size, rl->second_med[c]),
                   rl->resident_after_first[c] >= 0 ? mt_fmt_bytes(x, sizeof x, (uint64_t)rl->resident_after_first[c])
                                                    : "?");
        }
        printf("children's checksums %s\n", rl->checksums_agree ? "agree" : "DIFFER");
    }
    printf("\nsummary (ratio = GB/s of the row / GB/s of its baseline)\n");
    for (int i = 0; i < T_COUNT; i++) {
        if (!t[i].ran) {
            printf("%-24s %-64s not measured: %s\n", t[i].key, t[i].what, t[i].skip);
            continue;
        }
        printf("%-24s %-64s %5.2fx (target %.1fx: %s; vs %s)\n", t[i].key, t[i].what, t[i].ratio, t[i].target,
               t[i].ratio >= t[i].target ? "met" : "NOT met", t[i].baseline);
    }
}

static void json_summary(mt_json_t* j, const bench_t* b, const relaunch_t* rl, int relaunch_asked,
                         const target_row_t* t) {
    mt_json_obj(j, "relaunch");
    mt_json_bool(j, "ran", rl->ran);
    if (!rl->ran) {
        mt_json_str(j, "skipped", relaunch_asked ? rl->skip : "not asked (--relaunch or --mode=all)");
    } else {
        mt_json_i64(j, "rounds", rl->n);
        for (int c = 0; c < C_COUNT; c++) {
            mt_json_obj(j, child_names[c]);
            mt_json_f64(j, "first_seconds", rl->first_med[c]);
            mt_json_f64(j, "second_seconds", rl->second_med[c]);
            mt_json_f64(j, "first_gbps", mt_gbps(b->size, rl->first_med[c]));
            mt_json_f64(j, "second_gbps", mt_gbps(b->size, rl->second_med[c]));
            mt_json_arr(j, "first_samples");
            for (int k = 0; k < rl->n; k++) mt_json_f64(j, NULL, rl->first[c][k]);
            mt_json_arr_end(j);
            mt_json_arr(j, "second_samples");
            for (int k = 0; k < rl->n; k++) mt_json_f64(j, NULL, rl->second[c][k]);
            mt_json_arr_end(j);
            mt_json_i64(j, "resident_bytes_after_first", rl->resident_after_first[c]);
            mt_json_obj_end(j);
        }
        mt_json_f64(j, "ratio_second_vs_posix_second", rl->second_med[C_POSIX] / rl->second_med[C_MEMTIER]);
        mt_json_hex(j, "checksum", rl->checksum);
        mt_json_bool(j, "checksums_agree", rl->checksums_agree);
    }
    mt_json_obj_end(j);
    mt_json_obj(j, "summary");
    for (int i = 0; i < T_COUNT; i++) {
        mt_json_obj(j, t[i].key);
        mt_json_str(j, "what", t[i].what);
        mt_json_f64(j, "target", t[i].target);
        mt_json_bool(j, "ran", t[i].ran);
        if (!t[i].ran) {
            mt_json_str(j, "skipped", t[i].skip);
        } else {
            mt_json_str(j, "mode", t[i].mode);
            mt_json_str(j, "baseline", t[i].baseline);
            mt_json_f64(j, "seconds", t[i].secs);
            mt_json_f64(j, "baseline_seconds", t[i].base_secs);
            mt_json_f64(j, "gbps", mt_gbps(b->size, t[i].secs));
            mt_json_f64(j, "baseline_gbps", mt_gbps(b->size, t[i].base_secs));
            mt_json_f64(j, "ratio", t[i].ratio);
            mt_json_bool(j, "met", t[i].ratio >= t[i].target);
        }
        mt_json_obj_end(j);
    }
    mt_json_obj_end(j);
}

static void usage(FILE* f, const mt_flag_t* flags, size_t n) {
    fprintf(f, "usage: bench_large_read [flags]\n"
               "  one large sequential read: memtier vs posix pread (baseline), O_DIRECT, mmap, fio\n"
               "  (O_DIRECT and buffered), memtier with READ_ONCE and with DRAM cache hits; a\n"
               "  relaunch (a second process loading the file after a first one); a summary of\n"
               "  the target ratios (cold vs best baseline, warm vs posix, cache hit vs cache\n"
               "  off, relaunch vs posix). --mode=all measures every row.\n");
    mt_print_flags(f, flags, n);
    fprintf(f, "  MEMTIER_* environment variables configure the memtier contexts (the cache stays\n"
               "  off but for memtier_cached; relaunch children use memtier_init defaults)\n");
}

int main(int argc, char** argv) {
    const char* file = NULL;
    const char* mode = "memtier";
    uint64_t size = 0;
    long repeat = 3;
    int cold = 0, warm = 0, json = 0, help = 0, overwrite = 0, relaunch = 0;
    const char* child = NULL;
    const mt_flag_t flags[] = {
        {"file", MT_FLAG_STR, &file, "file to read (default: a temporary pattern file)"},
        {"size", MT_FLAG_SIZE, &size, "bytes to read (default: size of --file, else 256M)"},
        {"mode", MT_FLAG_STR, &mode,
         "memtier|posix|direct|mmap|fio|fio_buffered|memtier_once|memtier_cached|memcpy_floor|pread_threads|all "
         "(default memtier)"},
        {"cold", MT_FLAG_BOOL, &cold, "drop the file from the page cache before every run"},
        {"warm", MT_FLAG_BOOL, &warm, "warm page cache (the default for one mode)"},
        {"relaunch", MT_FLAG_BOOL, &relaunch, "measure the relaunch (on with --mode=all)"},
        {"repeat", MT_FLAG_INT, &repeat, "timed runs per mode (relaunch: rounds), median reported (default 3)"},
        {"overwrite", MT_FLAG_BOOL, &overwrite, "rewrite a --file too short and not a pattern file"},
        {"json", MT_FLAG_BOOL, &json, "print one JSON object instead of tables"},
        {"child", MT_FLAG_STR, &child, "internal: memtier|posix, one timed load of --file (--size bytes)"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    if (mt_parse_flags(argc, argv, flags, nflags, NULL, 0) < 0) return 2;
    if (help) {
        usage(stdout, flags, nflags);
        return 0;
    }
    if (child != NULL) {
        if (file == NULL || size == 0) mt_usage_die("--child needs --file and --size");
        return child_load(child, file, size);
    }
    mt_flag_range("repeat", repeat, 1, MAX_REPEAT);
    if (strcmp(mode, "all") == 0) relaunch = 1;
    int modes[M_COUNT], nmodes = 0;
    if (strcmp(mode, "all") == 0) {
        for (int m = 0; m < M_COUNT; m++) modes[nmodes++] = m;
    } else {
        int m = -1;
        for (int k = 0; k < M_COUNT; k++)
            if (strcmp(mode, mode_names[k]) == 0) m = k;
        if (m < 0) {
            fprintf(stderr, "bench_large_read: unknown --mode=%s\n", mode);
            usage(stderr, flags, nflags);
            return 2;
        }
        modes[nmodes++] = m;
        if (m == M_CACHED) modes[nmodes++] = M_MEMTIER; /* its baseline: the cache off */
        if (m != M_POSIX) modes[nmodes++] = M_POSIX;   /* baseline, measured right after */
    }
    int do_warm, do_cold;
    if (cold || warm) {
        do_warm = warm;
        do_cold = cold;
    } else {
        do_warm = 1;
        do_cold = strcmp(mode, "all") == 0;
    }
    if (json) mt_set_note_stream(stderr);

    bench_t b;
    memset(&b, 0, sizeof b);
    b.file_is_pattern = -1;
    if (file == NULL) {
        if (size == 0) size = 256 * MT_MIB;
        /* The same checks as for --file, before the file is written. */
        mt_require_temp_space("bench_large_read", size);
        mt_require_memory("the result buffer (--size)", size);
        b.path = mt_temp_file("bench_large_read", size, MT_CONTENT_PATTERN);
        b.file_is_pattern = 1;
        mt_note("note: no --file: using a temporary %s experiment-pattern file %s\n",
                mt_fmt_bytes((char[32]){0}, 32, size), b.path);
    } else {
        b.path = file;
        /* A FIFO, directory or device is refused (exit 2) before any open. */
        const int exists = mt_require_regular(file, NULL);
        if (size == 0) {
            if (!exists) mt_die("%s: %s (give --size=N to create it)", file, strerror(errno));
            size = (uint64_t)mt_file_size(file);
        } else {
            /* Refused (exit 2) before anything is written: a size the file system
             * cannot hold, then one the result buffer cannot. */
            mt_require_space_to_grow(file, size);
            mt_require_memory("the result buffer (--size)", size);
            int what = mt_ensure_pattern_file(file, size, overwrite);
            if (what != MT_FILE_KEPT) b.file_is_pattern = 1;
        }
    }
    if (size == 0) mt_die("nothing to read: size 0");
    mt_require_memory(file != NULL ? "the result buffer (the size of --file)" : "the result buffer (--size)",
                      size);
    b.size = size;
    b.buf_len = (size_t)((size + PREAD_CHUNK - 1) / PREAD_CHUNK * PREAD_CHUNK);
    b.buf = (uint8_t*)mt_alloc(b.buf_len);

    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = 0;
    mt_check(memtier_init(&cfg, &b.ctx), "memtier_init");
    mt_check(memtier_init(&cfg, &b.once_ctx), "memtier_init");
    memtier_config_t eff;
    mt_check(memtier_get_config(b.ctx, &eff, sizeof eff), "memtier_get_config");
    const uint64_t budget = eff.cache_enabled ? eff.cache_bytes : 0;

    const int fio_ok = find_in_path("fio");
    pass_t passes[2];
    int npasses = 0, ok = 1;
    uint64_t overhead = 0;
    memset(passes, 0, sizeof passes);
    if (do_warm) {
        passes[npasses].cold = 0;
        run_pass(&b, &passes[npasses++], modes, nmodes, (int)repeat, fio_ok, &overhead, &ok);
    }
    if (do_cold) {
        passes[npasses].cold = 1;
        run_pass(&b, &passes[npasses++], modes, nmodes, (int)repeat, fio_ok, &overhead, &ok);
    }
    if (b.file_is_pattern < 0) {
        /* A file we did not write: it is a pattern file if the posix read says so. */
        for (int i = 0; i < npasses; i++)
            if (passes[i].m[M_POSIX].ran) b.file_is_pattern = passes[i].m[M_POSIX].verified == 1;
        if (b.file_is_pattern == 1) {
            for (int i = 0; i < npasses; i++)
                for (int mi = 0; mi < nmodes; mi++)
                    if (passes[i].m[modes[mi]].verified == 0) ok = 0;
        } else {
            for (int i = 0; i < npasses; i++)
                for (int mi = 0; mi < nmodes; mi++) {
                    const mode_result_t* r = &passes[i].m[modes[mi]];
                    if (r->verified >= 0 && passes[i].m[M_POSIX].ran &&
                        r->checksum != passes[i].m[M_POSIX].checksum)
                        ok = 0;
                }
        }
    }
    relaunch_t rl;
    memset(&rl, 0, sizeof rl);
    if (relaunch) run_relaunch(&b, &rl, (int)repeat, &ok);
    target_row_t targets[T_COUNT];
    summarize(&b, passes, npasses, &rl, relaunch, targets);

    const uint64_t peak = mt_peak_rss_bytes();
    const int cached_rss_ok = b.cached_overhead <= b.cached_budget + 64 * MT_MIB;
    const int rss_ok = overhead <= budget + 64 * MT_MIB && cached_rss_ok;
    const uint64_t pattern_sum = b.file_is_pattern == 1 ? mt_pattern_checksum(size) : 0;

    memtier_stats_t st;
    mt_check(memtier_stats(b.ctx, &st), "memtier_stats");

    if (json) {
        mt_json_t j;
        mt_json_begin(&j, stdout);
        mt_json_str(&j, "benchmark", "bench_large_read");
        mt_json_str(&j, "memtier_version", memtier_version());
        mt_json_str(&j, "file", b.path);
        mt_json_u64(&j, "size", size);
        mt_json_str(&j, "mode", mode);
        mt_json_i64(&j, "repeat", repeat);
        mt_json_str(&j, "gb", "1e9 bytes");
        mt_json_str(&j, "seconds", "median of repeat runs");
        mt_json_str(&j, "ratio", "GB/s of the mode / GB/s of the baseline, same run");
        mt_json_str(&j, "checksum_algorithm", MT_CHECKSUM_NAME);
        mt_json_str(&j, "checksum_definition", MT_CHECKSUM_DESC);
        if (b.file_is_pattern == 1) mt_json_hex(&j, "pattern_checksum", pattern_sum);
        mt_json_bool(&j, "file_is_pattern", b.file_is_pattern == 1);
        mt_json_arr(&j, "passes");
        for (int i = 0; i < npasses; i++) json_pass(&j, &b, &passes[i], modes, nmodes);
        mt_json_arr_end(&j);
        json_summary(&j, &b, &rl, relaunch, targets);
        mt_json_obj(&j, "memory");
        mt_json_u64(&j, "peak_rss_bytes", peak);
        mt_json_u64(&j, "result_buffer_bytes", b.buf_len);
        mt_json_u64(&j, "memtier_peak_overhead_bytes", overhead);
        mt_json_u64(&j, "cache_budget_bytes", budget);
        mt_json_u64(&j, "memtier_cached_overhead_bytes", b.cached_overhead);
        mt_json_u64(&j, "memtier_cached_budget_bytes", b.cached_budget);
        mt_json_bool(&j, "rss_ok", rss_ok);
        mt_json_obj_end(&j);
        mt_json_stats(&j, "memtier_stats", &st);
        mt_json_bool(&j, "ok", ok);
        mt_json_end(&j);
    } else {
        char x[32], y[32], z[32];
        printf("bench_large_read: MemTier %s; %s, %" PRIu64 " bytes (%s), repeat %ld\n", memtier_version(),
               b.path, size, mt_fmt_bytes(x, sizeof x, size), repeat);
        printf("seconds = median of %ld runs; GB/s = 1e9 B/s; ratio = GB/s / GB/s of the baseline in this run\n",
               repeat);
        for (int i = 0; i < npasses; i++) print_pass(&b, &passes[i], modes, nmodes);
        print_summary(&b, &rl, targets);
        if (b.file_is_pattern == 1)
            printf("\npattern checksum %s 0x%016" PRIx64 "%s\n  (%s)\n", MT_CHECKSUM_NAME, pattern_sum,
                   ok ? "; every verified buffer matched the pattern" : "", MT_CHECKSUM_DESC);
        else
            printf("\nnote: %s is not an experiment-pattern file: modes were compared by checksum with posix\n",
                   b.path);
        printf("memory: peak RSS %s (result buffer %s); MemTier peak overhead %s; cache budget %s",
               mt_fmt_bytes(x, sizeof x, peak), mt_fmt_bytes(y, sizeof y, b.buf_len),
               mt_fmt_bytes(z, sizeof z, overhead), mt_fmt_bytes((char[32]){0}, 32, budget));
        if (b.cached_budget != 0)
            printf("; memtier_cached RSS growth %s, its cache budget %s",
                   mt_fmt_bytes((char[32]){0}, 32, b.cached_overhead),
                   mt_fmt_bytes((char[32]){0}, 32, b.cached_budget));
        printf(" -> %s\n", rss_ok ? "rss_ok" : "rss_over_budget");
        printf("%s\n", ok ? "bench_large_read: OK" : "bench_large_read: FAILED (wrong bytes or a memtier error)");
    }
    free(b.buf);
    mt_check(memtier_finalize(b.once_ctx), "memtier_finalize");
    mt_check(memtier_finalize(b.ctx), "memtier_finalize");
    return ok ? 0 : 1;
}
