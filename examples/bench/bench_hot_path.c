/*
 * bench_hot_path: the per-call cost of cached 4 KiB reads and of 256-read
 * batches, beside the C baselines and floors measured in the same run.
 *
 *   bench_hot_path [F] [--size=N] [--count=131072] [--batch=256] [--repeat=5]
 *                  [--cache-bytes=N+64M] [--overwrite] [--json]
 *
 * F defaults to a temporary 256 MiB experiment-pattern file (removed at exit); a
 * given F missing or shorter than --size is created / extended with the pattern
 * first (one "note: created|extended <absolute path>" line says so).
 *
 * Every mode reads the same --count random 4 KiB-aligned 4 KiB ranges of [0, N)
 * (fixed seed 0x407DA7), in batches of --batch ranges; read k of a batch goes
 * to slot k of one page-aligned buffer of batch * 4 KiB. The page cache is
 * warm (the whole file is read once, untimed) into a copy in memory (2 MiB
 * aligned, MADV_HUGEPAGE like MemTier's cache slabs) that the floors read from.
 *
 *   pread        a serial pread loop, one descriptor (the baseline)
 *   pread 2thr   the same loop on two threads: the caller and one worker made
 *                before the clock and woken per batch by a futex (its wake-up is
 *                timed, as a readv's would be), claiming 16 reads at a time.
 *                The ceiling of two CPUs for the cache-off readv row (JSON key
 *                pread_2thread_ns); not a target
 *   fstat+memcpy fstat of that descriptor + memcpy from the copy: the floor of a
 *                cached read that checks freshness on every call (strict)
 *   memcpy       memcpy from the copy alone: the floor of a cached read that
 *                trusts the file (immutable)
 *   memcpy+lookup memcpy whose source address is first loaded from a table of
 *                one 8-byte address per cache block of the file (the block
 *                size of the cached contexts), indexed by the block number: the
 *                ceiling of any block cache's hit, which must find the block
 *                before it can copy from it (one dependent load from a table
 *                the size of MemTier's address-hint table, 8 B per block; the
 *                per-batch memset of 1 MiB of slots evicts it from the L2 as it
 *                evicts the hint table)
 *   memcpy+lookup+rmw the same, then one atomic read-modify-write (lock add
 *                on x86) of a counter per read: the floor of a hit that counts
 *                itself (or its reader) with an atomic. The first such
 *                instruction after the copy waits until the copy's stores
 *                have drained, so the next copy cannot start under them.
 *   read strict  memtier_read, the whole file prefetched into the DRAM cache
 *                (budget --cache-bytes), default freshness (strict)
 *   read open    the same with a context made with freshness = OPEN
 *   read_ex imm  memtier_read_ex(MEMTIER_READ_IMMUTABLE) on the strict context
 *   readv cached memtier_readv of each batch, all in the DRAM cache (strict)
 *   readv_ex imm memtier_readv_ex(MEMTIER_READ_IMMUTABLE) of each batch, cached
 *   readv nocache memtier_readv of each batch, cache_enabled = 0 (page cache warm)
 *
 * Each --repeat round reads every batch with every mode, the modes taking turns
 * of 16 batches (so that a burst of other work on the machine hits every mode
 * alike), each mode on different batches at a time (so that no mode finds the
 * bytes another just read in the CPU cache; see run_round); ns/op = median over
 * the rounds of (time inside the read calls / count). Only the calls are timed (the clock is read once per batch and
 * mode); stats are sampled around each memtier batch, outside the clock. After each batch
 * (untimed) every slot is compared with the copy of the file, and the copy was
 * checked against the pattern when F is a pattern file. Cached modes must be
 * served entirely from the DRAM cache (stats cache_hit_requests), else exit 1.
 *
 * Ratios (above 1 = MemTier faster):
 *   floor rows   floor ns/op / memtier ns/op     (target >= 0.9)
 *   readv rows   pread ns/op / readv ns/op       (targets >= 1.7 cached, >= 1.3 cache off)
 *   ceiling rows the 2-thread pread loop against pread and against readv nocache;
 *                memcpy+lookup ns/op / memtier ns/op, and memcpy_lookup_vs_memcpy
 *                = memcpy ns/op / memcpy+lookup ns/op: the best floor ratio a
 *                block cache's hit can reach in this run (no target)
 *
 * Limits (else exit 2, before anything is written): --count 1..10,000,000,
 * --batch 1..65536, --repeat 1..64, N 4 KiB..1 TiB, --cache-bytes at least N
 * (the whole file is cached); the copy plus two caches must fit in memory;
 * F must be a regular file; the bytes F lacks must fit in the free space of its
 * file system minus a safety margin (the smaller of 1 GiB and 5% of it).
 * Exit 0, 1 when a read failed, returned wrong bytes or missed the cache, 2 on a
 * usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memtier.h"
#include "mt_util.h"

#define BLK 4096u
#define MAX_COUNT 10000000L
#define MAX_BATCH 65536L
#define MAX_REPEAT 64L

enum {
    M_PREAD,
    M_PREAD2,
    M_FSTAT_MEMCPY,
    M_MEMCPY,
    M_MEMCPY_LOOKUP,
    M_MEMCPY_LOOKUP_RMW,
    M_READ_STRICT,
    M_READ_OPEN,
    M_READ_EX_IMM,
    M_READV_CACHED,
    M_READV_EX_IMM,
    M_READV_NOCACHE,
    M_COUNT
};
static const char* const mode_names[M_COUNT] = {
    "pread", "pread 2thr", "fstat+memcpy", "memcpy", "memcpy+lookup", "memcpy+lookup+rmw", "read strict",
    "read open", "read_ex imm", "readv cached", "readv_ex imm", "readv nocache"};
static const char* const mode_keys[M_COUNT] = {
    "pread", "pread_2thread", "fstat_memcpy", "memcpy", "memcpy_lookup", "memcpy_lookup_rmw", "read_strict",
    "read_open", "read_ex_immutable",
    "readv_cached", "readv_ex_immutable", "readv_nocache"};
static const char* const mode_desc[M_COUNT] = {
    "serial pread loop, page cache warm",
    "pread loop on 2 threads, 16 reads claimed at a time (caller + a worker woken per batch)",
    "fstat + memcpy from an in-memory copy of the file (strict floor)",
    "memcpy from an in-memory copy of the file (immutable floor)",
    "memcpy from the copy, its source loaded from a table of 8 B per cache block (block-cache ceiling)",
    "memcpy+lookup, then one atomic read-modify-write of a counter per read",
    "memtier_read, all cached, freshness strict (default)",
    "memtier_read, all cached, context freshness = OPEN",
    "memtier_read_ex(MEMTIER_READ_IMMUTABLE), all cached, strict context",
    "memtier_readv per batch, all cached, strict",
    "memtier_readv_ex(MEMTIER_READ_IMMUTABLE) per batch, all cached",
    "memtier_readv per batch, DRAM cache off, page cache warm"};

/* The second thread of the pread 2thr mode. The caller posts a batch
 * (state POSTED) and both threads claim chunks of PREAD2_CHUNK reads from next
 * until none is left, so a worker that wakes late leaves its share to the
 * caller; a worker that has not started when the caller is done is taken back
 * (POSTED -> IDLE), else the caller waits for its last chunk (RUNNING -> IDLE).
 * This is the best a 2-thread pread loop does on a machine whose second CPU
 * is not always free (a static half each waits for the later thread). */
#define PREAD2_CHUNK 16
enum { W_IDLE, W_POSTED, W_RUNNING };
typedef struct pread_worker {
    pthread_t thread;
    _Atomic uint32_t state; /* futex word */
    _Atomic int stop;
    _Atomic size_t next;    /* first unclaimed read of the batch */
    _Atomic int err;        /* errno of a failed read, 0 if none */
    int fd;
    const uint64_t* offs;
    uint8_t* buf;
    size_t n;
} pread_worker_t;

static void futex_wait(_Atomic uint32_t* w, uint32_t val) {
    syscall(SYS_futex, (uint32_t*)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t* w) { syscall(SYS_futex, (uint32_t*)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* preads n slots of BLK: 0, or the errno (EIO for a short read). */
static int pread_slots(int fd, uint8_t* buf, const uint64_t* offs, size_t n) {
    for (size_t k = 0; k < n; k++) {
        ssize_t r;
        do r = pread(fd, buf + k * BLK, BLK, (off_t)offs[k]);
        while (r < 0 && errno == EINTR);
        if (r != (ssize_t)BLK) return r < 0 ? errno : EIO;
    }
    return 0;
}

/* Claims and reads chunks of the posted batch until none is left. */
static void pread_drain(pread_worker_t* w) {
    size_t lo;
    while ((lo = atomic_fetch_add(&w->next, PREAD2_CHUNK)) < w->n) {
        const size_t m = w->n - lo < PREAD2_CHUNK ? w->n - lo : PREAD2_CHUNK;
        const int e = pread_slots(w->fd, w->buf + lo * BLK, w->offs + lo, m);
        if (e != 0) atomic_store(&w->err, e);
    }
}

static void* pread_worker_main(void* arg) {
    pread_worker_t* w = (pread_worker_t*)arg;
    for (;;) {
        uint32_t s;
        while ((s = atomic_load(&w->state)) != W_POSTED && !atomic_load(&w->stop)) futex_wait(&w->state, s);
        if (atomic_load(&w->stop)) return NULL;
        uint32_t want = W_POSTED;
        if (!atomic_compare_exchange_strong(&w->state, &want, W_RUNNING)) continue; /* taken back */
        pread_drain(w);
        atomic_store(&w->state, W_IDLE);
        futex_wake(&w->state);
    }
}

typedef struct bench {
    const char* path;
    uint64_t size;
    const uint64_t* offs;
    long count, batch;
    uint8_t* copy;  /* the whole file */
    const uint8_t** table; /* memcpy+lookup: copy + block k * block size, per block k */
    uint64_t bshift;       /* log2 of the cached contexts' block size */
    uint64_t rmw;          /* memcpy+lookup+rmw: the counter */
    uint8_t* buf;   /* min(batch, count) slots of BLK */
    memtier_iovec_t* iov;
    int fd;
    memtier_ctx_t* strict; /* cache on, freshness strict */
    memtier_ctx_t* open;   /* cache on, freshness OPEN   */
    memtier_ctx_t* nocache;
    pread_worker_t worker; /* pread 2thr's second thread */
} bench_t;

/* The copy of the file the floors read from: 2 MiB aligned and marked
 * MADV_HUGEPAGE, as MemTier's cache slabs are, so that the floor is not slowed
 * by TLB misses MemTier does not have. Every page is touched. */
#define HUGE_ALIGN (2u << 20)
static uint8_t* alloc_copy(size_t n, void** map_out, size_t* map_len) {
    const size_t len = (n + 2 * (size_t)HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    void* m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) mt_die("cannot map %zu bytes for the copy of the file: %s", len, strerror(errno));
    uint8_t* p = (uint8_t*)(((uintptr_t)m + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN);
    (void)madvise(p, n, MADV_HUGEPAGE); /* a hint: fine where THP is off */
    memset(p, 0, n);
    *map_out = m;
    *map_len = len;
    return p;
}

typedef struct mode_result {
    double ns[MAX_REPEAT]; /* ns/op per round */
    int n;
    double median;
    memtier_stats_t stats; /* summed over rounds (memtier modes) */
    int have_stats;
} mode_result_t;

static memtier_ctx_t* mode_ctx(const bench_t* b, int m) {
    switch (m) {
    case M_READ_STRICT:
    case M_READ_EX_IMM:
    case M_READV_CACHED:
    case M_READV_EX_IMM: return b->strict;
    case M_READ_OPEN: return b->open;
    case M_READV_NOCACHE: return b->nocache;
    default: return NULL;
    }
}

static void verify_batch(const bench_t* b, long first, size_t n, int m) {
    for (size_t k = 0; k < n; k++) {
        const uint64_t off = b->offs[first + (long)k];
        if (memcmp(b->buf + k * BLK, b->copy + off, BLK) != 0)
            mt_die("%s: read %ld (offset %" PRIu64 "): bytes differ from the file", mode_names[m],
                   first + (long)k, off);
    }
}

/* Batch i (reads i .. i + n - 1) with mode m: returns the ns inside the calls;
 * then (untimed) checks every slot against the file. */
static uint64_t run_batch(bench_t* b, int m, long i) {
    memtier_ctx_t* ctx = mode_ctx(b, m);
    uint64_t ns = 0;
    struct stat st;
    {
        const size_t n = (size_t)(b->count - i < b->batch ? b->count - i : b->batch);
        const uint64_t* offs = b->offs + i;
        uint8_t* buf = b->buf;
        memset(buf, 0xA5, n * BLK); /* untimed: stale bytes cannot pass */
        if (m == M_READV_CACHED || m == M_READV_EX_IMM || m == M_READV_NOCACHE) {
            for (size_t k = 0; k < n; k++) {
                b->iov[k].offset = offs[k];
                b->iov[k].size = BLK;
                b->iov[k].dst = buf + k * BLK;
                b->iov[k].path = NULL;
                b->iov[k].result = 0;
            }
        }
        int st_rc = MEMTIER_OK;
        const uint64_t t0 = mt_now_ns();
        switch (m) {
        case M_PREAD:
            for (size_t k = 0; k < n; k++) {
                ssize_t r;
                do r = pread(b->fd, buf + k * BLK, BLK, (off_t)offs[k]);
                while (r < 0 && errno == EINTR);
                if (r != (ssize_t)BLK)
                    mt_die("pread at %" PRIu64 ": %s", offs[k], r < 0 ? strerror(errno) : "short read");
            }
            break;
        case M_PREAD2: {
            pread_worker_t* w = &b->worker;
            w->offs = offs;
            w->buf = buf;
            w->n = n;
            atomic_store(&w->next, 0);
            atomic_store(&w->err, 0);
            atomic_store(&w->state, W_POSTED);
            futex_wake(&w->state);
            pread_drain(w);
            uint32_t want = W_POSTED, st2;
            if (!atomic_compare_exchange_strong(&w->state, &want, W_IDLE))
                while ((st2 = atomic_load(&w->state)) == W_RUNNING) futex_wait(&w->state, st2);
            if (atomic_load(&w->err) != 0) mt_die("pread 2thr: %s", strerror(atomic_load(&w->err)));
            break;
        }
        case M_FSTAT_MEMCPY:
            for (size_t k = 0; k < n; k++) {
                if (fstat(b->fd, &st) != 0) mt_die("fstat: %s", strerror(errno));
                memcpy(buf + k * BLK, b->copy + offs[k], BLK);
            }
            break;
        case M_MEMCPY:
            for (size_t k = 0; k < n; k++) memcpy(buf + k * BLK, b->copy + offs[k], BLK);
            break;
        case M_MEMCPY_LOOKUP:
        case M_MEMCPY_LOOKUP_RMW: {
            const uint64_t lo_mask = (UINT64_C(1) << b->bshift) - 1;
            if (m == M_MEMCPY_LOOKUP) {
                for (size_t k = 0; k < n; k++)
                    memcpy(buf + k * BLK, b->table[offs[k] >> b->bshift] + (offs[k] & lo_mask), BLK);
            } else {
                for (size_t k = 0; k < n; k++) {
                    memcpy(buf + k * BLK, b->table[offs[k] >> b->bshift] + (offs[k] & lo_mask), BLK);
                    __atomic_fetch_add(&b->rmw, 1, __ATOMIC_RELAXED);
                }
            }
            break;
        }
        case M_READ_STRICT:
        case M_READ_OPEN:
            for (size_t k = 0; k < n && st_rc == MEMTIER_OK; k++)
                st_rc = memtier_read(ctx, b->path, offs[k], BLK, buf + k * BLK, MEMTIER_TARGET_CPU);
            break;
        case M_READ_EX_IMM:
            for (size_t k = 0; k < n && st_rc == MEMTIER_OK; k++)
                st_rc = memtier_read_ex(ctx, b->path, offs[k], BLK, buf + k * BLK, MEMTIER_TARGET_CPU,
                                        MEMTIER_READ_IMMUTABLE);
            break;
        case M_READV_EX_IMM:
            st_rc = memtier_readv_ex(ctx, b->path, b->iov, n, MEMTIER_TARGET_CPU, MEMTIER_READ_IMMUTABLE);
            break;
        default: /* M_READV_CACHED, M_READV_NOCACHE */
            st_rc = memtier_readv(ctx, b->path, b->iov, n, MEMTIER_TARGET_CPU);
            break;
        }
        ns += mt_now_ns() - t0;
        mt_check(st_rc, mode_names[m]);
        if (m == M_READV_CACHED || m == M_READV_EX_IMM || m == M_READV_NOCACHE)
            for (size_t k = 0; k < n; k++)
                if (b->iov[k].result != (int64_t)BLK)
                    mt_die("%s element %ld: result %" PRId64, mode_names[m], i + (long)k, b->iov[k].result);
        verify_batch(b, i, n, m);
    }
    return ns;
}

/* Stats counters a mode's batches add up (the other fields are not used). */
static void stats_add(memtier_stats_t* acc, const memtier_stats_t* d) {
    acc->requests += d->requests;
    acc->cache_hit_requests += d->cache_hit_requests;
    acc->revalidations += d->revalidations;
    acc->readv_inline_hits += d->readv_inline_hits;
    acc->storage_bytes += d->storage_bytes;
    acc->buffered_requests += d->buffered_requests;
    acc->readv_calls += d->readv_calls;
}

/* One round: every mode reads every batch once. The modes take turns of
 * TURN_BATCHES consecutive batches (a few ms: back-to-back calls within a turn,
 * as a loop of reads makes them), the first mode rotating from turn to turn, so
 * that a burst of other work on the machine hits all modes alike. At step t mode
 * m reads turn (t + m * stride) mod nt (stride = nt / modes): the modes read
 * different batches at the same time and a batch comes back to another mode only
 * after more memory than the CPU caches hold was read (no mode finds the bytes
 * another just read in the CPU cache). ns_out[m] = ns/op of mode m in this
 * round; stats (when not NULL) accumulate each memtier mode's counters, sampled
 * around its batches (outside the clock). */
#define TURN_BATCHES 16
static void run_round(bench_t* b, double* ns_out, memtier_stats_t* stats) {
    uint64_t ns[M_COUNT] = {0};
    const long nb = (b->count + b->batch - 1) / b->batch;
    const long nt = (nb + TURN_BATCHES - 1) / TURN_BATCHES;
    const long stride = nt / M_COUNT > 0 ? nt / M_COUNT : 1;
    for (long t = 0; t < nt; t++) {
        for (int k = 0; k < M_COUNT; k++) {
            const int m = (int)((t + k) % M_COUNT);
            const long turn = (t + (long)m * stride) % nt;
            memtier_ctx_t* ctx = mode_ctx(b, m);
            for (long j = turn * TURN_BATCHES; j < (turn + 1) * TURN_BATCHES && j < nb; j++) {
                memtier_stats_t s0, s1, d;
                if (ctx && stats) mt_check(memtier_stats(ctx, &s0), "memtier_stats");
                ns[m] += run_batch(b, m, j * b->batch);
                if (ctx && stats) {
                    mt_check(memtier_stats(ctx, &s1), "memtier_stats");
                    mt_stats_sub(&d, &s1, &s0);
                    stats_add(&stats[m], &d);
                }
            }
        }
    }
    for (int m = 0; m < M_COUNT; m++) ns_out[m] = (double)ns[m] / (double)b->count;
}

static memtier_ctx_t* make_ctx(int cache, uint64_t cache_bytes, int freshness, const char* what) {
    memtier_config_t cfg;
    mt_check(memtier_config_default(&cfg), "memtier_config_default");
    cfg.cache_enabled = cache;
    if (cache) cfg.cache_bytes = cache_bytes;
    cfg.freshness = freshness;
    memtier_ctx_t* ctx = NULL;
    mt_check(memtier_init(&cfg, &ctx), what);
    return ctx;
}

typedef struct ratio_row {
    const char* key;
    const char* name;
    int mode, base;
    double target;
    const char* kind; /* "floor", "baseline" or "ceiling" (a same-run bound on a floor or readv ratio) */
} ratio_row_t;

static const ratio_row_t ratio_rows[] = {
    {"read_strict_vs_fstat_memcpy", "cached 4 KiB memtier_read (strict) vs fstat+memcpy floor", M_READ_STRICT,
     M_FSTAT_MEMCPY, 0.9, "floor"},
    {"read_open_vs_memcpy", "cached 4 KiB memtier_read (freshness open) vs memcpy floor", M_READ_OPEN, M_MEMCPY,
     0.9, "floor"},
    {"read_ex_immutable_vs_memcpy", "cached 4 KiB memtier_read_ex(IMMUTABLE) vs memcpy floor", M_READ_EX_IMM,
     M_MEMCPY, 0.9, "floor"},
    {"read_open_vs_memcpy_lookup", "cached 4 KiB memtier_read (freshness open) vs memcpy+lookup ceiling",
     M_READ_OPEN, M_MEMCPY_LOOKUP, 0, "ceiling"},
    {"read_ex_immutable_vs_memcpy_lookup", "cached 4 KiB memtier_read_ex(IMMUTABLE) vs memcpy+lookup ceiling",
     M_READ_EX_IMM, M_MEMCPY_LOOKUP, 0, "ceiling"},
    {"memcpy_lookup_vs_memcpy", "block-cache ceiling: memcpy+lookup vs memcpy floor (best floor ratio)",
     M_MEMCPY_LOOKUP, M_MEMCPY, 0, "ceiling"},
    {"memcpy_lookup_rmw_vs_memcpy", "ceiling with one atomic RMW per read: memcpy+lookup+rmw vs memcpy floor",
     M_MEMCPY_LOOKUP_RMW, M_MEMCPY, 0, "ceiling"},
    {"read_strict_vs_pread", "cached 4 KiB memtier_read (strict) vs pread", M_READ_STRICT, M_PREAD, 0, "baseline"},
    {"read_open_vs_pread", "cached 4 KiB memtier_read (freshness open) vs pread", M_READ_OPEN, M_PREAD, 0,
     "baseline"},
    {"readv_cached_vs_pread", "readv 256 x 4 KiB, all cached, vs pread loop", M_READV_CACHED, M_PREAD, 1.7,
     "baseline"},
    {"readv_ex_immutable_vs_pread", "readv_ex(IMMUTABLE) 256 x 4 KiB, cached, vs pread loop", M_READV_EX_IMM,
     M_PREAD, 0, "baseline"},
    {"readv_nocache_vs_pread", "readv 256 x 4 KiB, cache off, page cache warm, vs pread loop", M_READV_NOCACHE,
     M_PREAD, 1.3, "baseline"},
    {"pread_2thread_vs_pread", "ceiling: pread loop on 2 threads vs pread loop", M_PREAD2, M_PREAD, 0, "ceiling"},
    {"readv_nocache_vs_pread_2thread", "readv 256 x 4 KiB, cache off, vs the 2-thread pread loop", M_READV_NOCACHE,
     M_PREAD2, 0, "ceiling"},
};
#define NRATIO (sizeof ratio_rows / sizeof ratio_rows[0])

int main(int argc, char** argv) {
    long count = 131072, batch = 256, repeat = 5;
    uint64_t size = 0, cache_bytes = 0;
    int json = 0, help = 0, overwrite = 0;
    const mt_flag_t flags[] = {
        {"size", MT_FLAG_SIZE, &size, "range of the reads (default: size of F, or 256M)"},
        {"count", MT_FLAG_INT, &count, "random 4 KiB reads per mode and round (default 131072)"},
        {"batch", MT_FLAG_INT, &batch, "reads per batch / memtier_readv call (default 256)"},
        {"repeat", MT_FLAG_INT, &repeat, "rounds; ns/op is the median (default 5)"},
        {"cache-bytes", MT_FLAG_SIZE, &cache_bytes, "DRAM cache budget of each cached context (default N + 64M)"},
        {"overwrite", MT_FLAG_BOOL, &overwrite, "rewrite an F too short and not a pattern file"},
        {"json", MT_FLAG_BOOL, &json, "print one JSON object"},
        {"help", MT_FLAG_BOOL, &help, "this text"},
    };
    const size_t nflags = sizeof flags / sizeof flags[0];
    const char* pos[1];
    int npos = mt_parse_args(argc, argv, flags, nflags, pos, 1,
                             "usage: bench_hot_path [F] [flags]\n"
                             "  cached 4 KiB memtier_read / _ex(IMMUTABLE) vs the fstat+memcpy and memcpy floors\n"
                             "  and a pread loop; memtier_readv of 256 x 4 KiB (cached, cache off) vs a pread loop.\n"
                             "  F: a pattern file (default: a temporary 256 MiB one). Exit 0 ok, 1 failure, 2 usage.\n");
    mt_flag_range("count", count, 1, MAX_COUNT);
    mt_flag_range("batch", batch, 1, MAX_BATCH);
    mt_flag_range("repeat", repeat, 1, MAX_REPEAT);
    if (size != 0) mt_flag_size_range("size", size, BLK, 1024 * MT_GIB);
    if (cache_bytes != 0) mt_flag_size_range("cache-bytes", cache_bytes, BLK, 1024 * MT_GIB);
    if (json) mt_set_note_stream(stderr);

    bench_t b;
    memset(&b, 0, sizeof b);
    if (npos == 0 && size == 0) size = 256 * MT_MIB;
    uint64_t need_size = size;
    if (npos > 0 && size == 0) {
        /* A FIFO, directory or device is refused (exit 2) before any open. */
        if (!mt_require_regular(pos[0], NULL))
            mt_die("%s: %s (give --size=N to create it)", pos[0], strerror(errno));
        need_size = (uint64_t)mt_file_size(pos[0]);
        if (need_size < BLK || need_size > 1024 * MT_GIB)
            mt_usage_die("%s: size %" PRIu64 " is outside 4 KiB..1 TiB", pos[0], need_size);
    }
    if (cache_bytes == 0) cache_bytes = need_size + 64 * MT_MIB;
    if (cache_bytes < need_size)
        mt_usage_die("--cache-bytes=%" PRIu64 " is less than the file range (%" PRIu64
                     " bytes): the whole range must be cached",
                     cache_bytes, need_size);
    /* The copy of the file, two full caches (strict, open) and the slots. */
    const uint64_t slots = (uint64_t)(batch < count ? batch : count);
    mt_require_memory("the copy of the file plus two DRAM caches (--size, --cache-bytes)",
                      need_size + 2 * cache_bytes + slots * BLK);

    if (npos == 0) {
        mt_require_temp_space("bench_hot_path", size);
        b.path = mt_temp_file("bench_hot_path", size, MT_CONTENT_PATTERN);
        mt_note("note: no F: using a temporary %s experiment-pattern file %s\n",
                mt_fmt_bytes((char[32]){0}, 32, size), b.path);
    } else {
        b.path = pos[0];
        if (size != 0) {
            mt_require_regular(b.path, NULL);
            mt_require_space_to_grow(b.path, size); /* exit 2 before anything is written */
            mt_ensure_pattern_file(b.path, size, overwrite);
        } else {
            size = need_size;
        }
    }
    b.size = size / BLK * BLK;
    b.count = count;
    b.batch = batch;

    /* Offsets, buffers, the copy (which also warms the page cache). */
    uint64_t* offs = (uint64_t*)malloc((size_t)count * sizeof *offs);
    b.iov = (memtier_iovec_t*)calloc((size_t)slots, sizeof *b.iov);
    if (offs == NULL || b.iov == NULL) mt_die("out of memory");
    mt_rng_t rng;
    mt_rng_seed(&rng, 0x407DA7);
    for (long i = 0; i < count; i++) offs[i] = mt_rng_below(&rng, b.size / BLK) * BLK;
    b.offs = offs;
    b.buf = (uint8_t*)mt_alloc((size_t)slots * BLK);
    void* copy_map = NULL;
    size_t copy_map_len = 0;
    b.copy = alloc_copy((size_t)b.size, &copy_map, &copy_map_len);
    b.fd = mt_open_file(b.path, O_RDONLY, 0);
    if (b.fd < 0) mt_die("open %s: %s", b.path, strerror(errno));
    for (uint64_t off = 0; off < b.size; off += MT_MIB) {
        const size_t n = b.size - off < MT_MIB ? (size_t)(b.size - off) : (size_t)MT_MIB;
        if (mt_pread_full(b.fd, b.copy + off, n, off) != (int64_t)n)
            mt_die("read %s at %" PRIu64 ": %s", b.path, off, errno ? strerror(errno) : "short");
    }
    /* A pattern file is checked against the pattern (so the copy the modes are
     * compared with is right); any other file is compared with itself. */
    const int is_pattern = mt_pattern_check(b.copy, 0, BLK) == MT_NO_MISMATCH;
    if (is_pattern) {
        const uint64_t bad = mt_pattern_check(b.copy, 0, (size_t)b.size);
        if (bad != MT_NO_MISMATCH) mt_die("%s: byte at %" PRIu64 " is not the pattern", b.path, bad);
    }

    b.strict = make_ctx(1, cache_bytes, MEMTIER_FRESHNESS_STRICT, "memtier_init(cache on, strict)");
    b.open = make_ctx(1, cache_bytes, MEMTIER_FRESHNESS_OPEN, "memtier_init(cache on, freshness open)");
    b.nocache = make_ctx(0, 0, MEMTIER_FRESHNESS_STRICT, "memtier_init(cache off)");
    b.worker.fd = b.fd;
    if (pthread_create(&b.worker.thread, NULL, pread_worker_main, &b.worker) != 0)
        mt_die("cannot start the pread 2thr worker thread");
    mt_check(memtier_prefetch(b.strict, b.path, 0, b.size, NULL), "memtier_prefetch(strict)");
    mt_check(memtier_prefetch(b.open, b.path, 0, b.size, NULL), "memtier_prefetch(open)");
    /* The memcpy+lookup table: one address per block of the cached contexts. */
    memtier_config_t got;
    mt_check(memtier_get_config(b.strict, &got, sizeof got), "memtier_get_config");
    while ((UINT64_C(1) << b.bshift) < got.cache_block_bytes) b.bshift++;
    const uint64_t nblocks = (b.size + (UINT64_C(1) << b.bshift) - 1) >> b.bshift;
    b.table = (const uint8_t**)malloc((size_t)nblocks * sizeof *b.table);
    if (b.table == NULL) mt_die("out of memory");
    for (uint64_t k = 0; k < nblocks; k++) b.table[k] = b.copy + (k << b.bshift);

    mode_result_t res[M_COUNT];
    memset(res, 0, sizeof res);
    /* One untimed round (first-touch, open descriptors), then the rounds. */
    double round_ns[M_COUNT];
    memtier_stats_t stats[M_COUNT];
    memset(stats, 0, sizeof stats);
    run_round(&b, round_ns, NULL);
    for (long r = 0; r < repeat; r++) {
        run_round(&b, round_ns, stats);
        for (int m = 0; m < M_COUNT; m++) res[m].ns[res[m].n++] = round_ns[m];
    }
    for (int m = 0; m < M_COUNT; m++) {
        res[m].stats = stats[m];
        res[m].have_stats = mode_ctx(&b, m) != NULL;
    }
    int ok = 1;
    char miss[M_COUNT][96];
    for (int m = 0; m < M_COUNT; m++) {
        double tmp[MAX_REPEAT];
        memcpy(tmp, res[m].ns, sizeof(double) * (size_t)res[m].n);
        res[m].median = mt_median(tmp, (size_t)res[m].n);
        miss[m][0] = '\0';
        const int cached = mode_ctx(&b, m) != NULL && m != M_READV_NOCACHE;
        const uint64_t want = (uint64_t)count * (uint64_t)repeat;
        if (cached && res[m].stats.cache_hit_requests != want) {
            snprintf(miss[m], sizeof miss[m], "only %" PRIu64 " of %" PRIu64 " reads were cache hits",
                     (uint64_t)res[m].stats.cache_hit_requests, want);
            ok = 0;
        }
    }
    double ratio[NRATIO];
    for (size_t i = 0; i < NRATIO; i++) {
        const double mt = res[ratio_rows[i].mode].median, base = res[ratio_rows[i].base].median;
        ratio[i] = mt > 0 ? base / mt : 0;
    }

    if (json) {
        mt_json_t j;
        mt_json_begin(&j, stdout);
        mt_json_str(&j, "benchmark", "bench_hot_path");
        mt_json_str(&j, "memtier_version", memtier_version());
        mt_json_u64(&j, "size", b.size);
        mt_json_i64(&j, "count", count);
        mt_json_i64(&j, "batch", batch);
        mt_json_i64(&j, "repeat", repeat);
        mt_json_u64(&j, "read_bytes", BLK);
        mt_json_u64(&j, "cache_bytes", cache_bytes);
        mt_json_str(&j, "ns_per_op", "median over rounds of time inside the calls / count");
        mt_json_str(&j, "ratio", "baseline or floor ns/op / memtier ns/op (above 1: memtier faster)");
        mt_json_obj(&j, "modes");
        for (int m = 0; m < M_COUNT; m++) {
            mt_json_obj(&j, mode_keys[m]);
            mt_json_str(&j, "name", mode_names[m]);
            mt_json_str(&j, "what", mode_desc[m]);
            mt_json_f64(&j, "ns_per_op", res[m].median);
            mt_json_arr(&j, "rounds_ns_per_op");
            for (int k = 0; k < res[m].n; k++) mt_json_f64(&j, NULL, res[m].ns[k]);
            mt_json_arr_end(&j);
            if (res[m].have_stats) {
                mt_json_u64(&j, "requests", res[m].stats.requests);
                mt_json_u64(&j, "cache_hit_requests", res[m].stats.cache_hit_requests);
                mt_json_u64(&j, "revalidations", res[m].stats.revalidations);
                mt_json_u64(&j, "readv_inline_hits", res[m].stats.readv_inline_hits);
                mt_json_u64(&j, "storage_bytes", res[m].stats.storage_bytes);
            }
            if (miss[m][0]) mt_json_str(&j, "error", miss[m]);
            mt_json_obj_end(&j);
        }
        mt_json_obj_end(&j);
        mt_json_obj(&j, "ratios");
        for (size_t i = 0; i < NRATIO; i++) {
            const ratio_row_t* r = &ratio_rows[i];
            mt_json_obj(&j, r->key);
            mt_json_str(&j, "name", r->name);
            mt_json_str(&j, "memtier_mode", mode_keys[r->mode]);
            mt_json_str(&j, "base_mode", mode_keys[r->base]);
            mt_json_str(&j, "kind", r->kind);
            mt_json_f64(&j, "memtier_ns", res[r->mode].median);
            mt_json_f64(&j, "base_ns", res[r->base].median);
            mt_json_f64(&j, "ratio", ratio[i]);
            if (r->target > 0) {
                mt_json_f64(&j, "target", r->target);
                mt_json_bool(&j, "met", ratio[i] >= r->target);
            } else {
                mt_json_null(&j, "target");
            }
            mt_json_obj_end(&j);
        }
        mt_json_obj_end(&j);
        /* The 2-CPU ceiling of the cache-off readv row, measured in this run. */
        mt_json_f64(&j, "pread_2thread_ns", res[M_PREAD2].median);
        mt_json_bool(&j, "file_is_pattern", is_pattern);
        mt_json_bool(&j, "verified", 1);
        mt_json_bool(&j, "ok", ok);
        mt_json_end(&j);
    } else {
        char x[32], y[32];
        printf("bench_hot_path: MemTier %s; %s (%s); %ld random 4 KiB reads per mode, batches of %ld, "
               "median of %ld rounds; cache budget %s per context\n",
               memtier_version(), b.path, mt_fmt_bytes(x, sizeof x, b.size), count, batch, repeat,
               mt_fmt_bytes(y, sizeof y, cache_bytes));
        printf("ns/op = time inside the calls / reads (the clock is read once per batch)\n\n");
        printf("%-17s %9s %8s %10s %9s  %s\n", "mode", "ns/op", "vs pread", "hits", "revalid.", "what");
        for (int m = 0; m < M_COUNT; m++) {
            char hits[24] = "-", reval[24] = "-";
            if (res[m].have_stats) {
                snprintf(hits, sizeof hits, "%" PRIu64, (uint64_t)res[m].stats.cache_hit_requests);
                snprintf(reval, sizeof reval, "%" PRIu64, (uint64_t)res[m].stats.revalidations);
            }
            printf("%-17s %9.1f %7.2fx %10s %9s  %s%s%s\n", mode_names[m], res[m].median,
                   res[m].median > 0 ? res[M_PREAD].median / res[m].median : 0, hits, reval, mode_desc[m],
                   miss[m][0] ? " - " : "", miss[m]);
        }
        printf("\n%-72s %9s %9s %7s %7s  %s\n", "ratio (baseline or floor ns / memtier ns)", "memtier", "base",
               "ratio", "target", "");
        for (size_t i = 0; i < NRATIO; i++) {
            const ratio_row_t* r = &ratio_rows[i];
            char t[16] = "-";
            if (r->target > 0) snprintf(t, sizeof t, ">=%.1fx", r->target);
            printf("%-72s %9.1f %9.1f %6.2fx %7s  %s\n", r->name, res[r->mode].median, res[r->base].median,
                   ratio[i], t, r->target > 0 ? (ratio[i] >= r->target ? "met" : "MISSED") : "");
        }
        printf("\nevery read was compared with the file's bytes%s\n",
               is_pattern ? " (the file was checked against the experiment pattern)" : "");
        printf("%s\n", ok ? "bench_hot_path: OK" : "bench_hot_path: FAILED (reads missed the DRAM cache)");
    }
    atomic_store(&b.worker.stop, 1);
    futex_wake(&b.worker.state);
    pthread_join(b.worker.thread, NULL);
    mt_check(memtier_finalize(b.strict), "memtier_finalize");
    mt_check(memtier_finalize(b.open), "memtier_finalize");
    mt_check(memtier_finalize(b.nocache), "memtier_finalize");
    close(b.fd);
    free(offs);
    free(b.iov);
    free((void*)b.table);
    free(b.buf);
    munmap(copy_map, copy_map_len);
    return ok ? 0 : 1;
}
