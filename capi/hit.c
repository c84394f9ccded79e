/* The C-side DRAM-cache hit path of memtier_read and memtier_readv: a cached
 * range is found in the context's hit region (runtime/hitidx, written by Go
 * but for the counters and use bits C sets) and copied with one string copy
 * (mt_copy_bytes), without the cgo round trip and the Go-side lookups. A
 * readv's elements that are such hits of the call's file (checked once for
 * the call) are copied here; memtier.c hands the rest to Go in one call.
 *
 * Every step that cannot be answered for certain here gives the call back to
 * Go (return 0), which then serves it and overwrites dst:
 *   - the file: the path's entry must name it; strict freshness fstats the
 *     descriptor and compares exactly what files.Table.acquireFast compares
 *     (device, inode, size, mtime, ctime, link count > 0) and gives back a
 *     path whose last stat is older than the path recheck, or relative;
 *     interval freshness trusts a File checked within the interval (else Go
 *     checks it); open freshness and MEMTIER_READ_IMMUTABLE trust the entry;
 *   - the range: inside the file and inside one block whose pages are valid;
 *   - the source: a trusted read copies first from where the block's hint
 *     (runtime/hitidx.HintEntry) predicts it, so that the block entry's
 *     cache miss is served during the copy, not before it; the copy stands
 *     only when the entry, read after it under its sequence counter, still
 *     has the hint's sequence value and names the same address (else the
 *     read copies again from the entry's own address, as a checked read
 *     does from the start);
 *   - races: the file and block entries' sequence counters are read before
 *     and after the copy, and Go moves them before a block's memory is reused
 *     or a File leaves the descriptor table, so a copy that raced is redone;
 *   - context lifetime: a reader count per registered context, which
 *     mt_hit_unregister waits out before the region and the cache memory are
 *     unmapped; an unknown or finalized context is answered by Go;
 *   - a bad dst: a fault inside the copy is caught (SIGSEGV/SIGBUS handler
 *     installed at the first registration, chained to the previous one for
 *     every other fault) and Go serves the call, reporting MEMTIER_ERR_IO as
 *     on its own path. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "hit.h"
#include "hitcopy.h"
#include "memtier.h"

/* Read-only flags a hit may carry; others (unknown bits) are Go's to refuse. */
#define MT_HIT_FLAGS                                                                     \
    (MEMTIER_READ_ONCE | MEMTIER_READ_WILL_REUSE | MEMTIER_READ_DIRECT | MEMTIER_READ_BUFFERED | \
     MEMTIER_READ_IMMUTABLE)

/* ------------------------------------------------------------ registry */

#define MT_HIT_CTX_SLOTS 64
#define MT_HIT_PROBE 4

typedef struct mt_hit_ctx {
    _Atomic uint64_t id;      /* 0: free */
    _Atomic uint64_t readers; /* C readers inside the region now */
    _Atomic(const unsigned char*) region;
    char pad[64 - 24];
} __attribute__((aligned(64))) mt_hit_ctx_t;

static mt_hit_ctx_t mt_hit_ctxs[MT_HIT_CTX_SLOTS];
static pthread_mutex_t mt_hit_reg_mu = PTHREAD_MUTEX_INITIALIZER;

static void mt_hit_install_guard(void);

int mt_hit_register(uint64_t id, void* region) {
    if (id == 0 || region == NULL) return -1;
    if (__atomic_load_n((const uint64_t*)region, __ATOMIC_ACQUIRE) != MT_HIT_MAGIC) return -1;
    mt_hit_install_guard();
    int rc = -1;
    pthread_mutex_lock(&mt_hit_reg_mu);
    for (int i = 0; i < MT_HIT_PROBE; i++) {
        mt_hit_ctx_t* c = &mt_hit_ctxs[(id + (uint64_t)i) % MT_HIT_CTX_SLOTS];
        if (atomic_load(&c->id) != 0) continue;
        /* Stale readers of an earlier owner may still pass by: they compare the
         * id after counting themselves in, and only the new id matches. */
        atomic_store(&c->region, (const unsigned char*)region);
        atomic_store(&c->id, id);
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&mt_hit_reg_mu);
    return rc;
}

void mt_hit_unregister(uint64_t id) {
    if (id == 0) return;
    pthread_mutex_lock(&mt_hit_reg_mu);
    for (int i = 0; i < MT_HIT_PROBE; i++) {
        mt_hit_ctx_t* c = &mt_hit_ctxs[(id + (uint64_t)i) % MT_HIT_CTX_SLOTS];
        if (atomic_load(&c->id) != id) continue;
        /* seq_cst store, then seq_cst loads of readers: a reader counts itself
         * in (seq_cst) before it loads the id (seq_cst), so either it sees 0
         * or this loop sees it. */
        atomic_store(&c->id, 0);
        while (atomic_load(&c->readers) != 0) sched_yield();
        atomic_store(&c->region, NULL);
        break;
    }
    pthread_mutex_unlock(&mt_hit_reg_mu);
}

/* ------------------------------------------------------ fault guard */

typedef struct mt_copy_guard {
    sigjmp_buf jb;
    sigset_t mask; /* the thread's mask when the fault hit */
} mt_copy_guard_t;

/* The guard of the copy running on this thread, or NULL: 8 bytes of TLS.
 * initial-exec, like the Go runtime's own TLS in a c-shared library: the
 * default (global-dynamic) model would call __tls_get_addr, which makes the
 * library need ld-linux-x86-64.so.2 besides libc (tests/python/
 * test_packaging.py checks NEEDED) and costs a call on every hit. */
static __thread mt_copy_guard_t* mt_copy __attribute__((tls_model("initial-exec")));
static struct sigaction mt_old_segv, mt_old_bus;
static pthread_once_t mt_guard_once = PTHREAD_ONCE_INIT;
static int mt_guard_ok;

static void mt_fault(int sig, siginfo_t* si, void* uc) {
    mt_copy_guard_t* g = mt_copy;
    if (g != NULL) {
        mt_copy = NULL;
        g->mask = ((ucontext_t*)uc)->uc_sigmask;
        siglongjmp(g->jb, 1);
    }
    const struct sigaction* old = sig == SIGBUS ? &mt_old_bus : &mt_old_segv;
    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, si, uc); /* the Go runtime's handler, normally */
        return;
    }
    if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
        /* The fault repeats on return and takes the default action, as it
         * would have without this handler (a fault cannot be ignored). */
        signal(sig, SIG_DFL);
        return;
    }
    old->sa_handler(sig);
}

static void mt_guard_init(void) {
    struct sigaction sa;
    if (sigaction(SIGSEGV, NULL, &mt_old_segv) != 0 || sigaction(SIGBUS, NULL, &mt_old_bus) != 0) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = mt_fault;
    sa.sa_mask = mt_old_segv.sa_mask; /* what the chained handler expects blocked */
    sigaddset(&sa.sa_mask, SIGSEGV);
    sigaddset(&sa.sa_mask, SIGBUS);
    /* SA_ONSTACK: the Go runtime requires it of every handler non-Go code installs
     * (https://pkg.go.dev/os/signal#hdr-Go_programs_that_use_cgo_or_SWIG). */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (mt_old_segv.sa_flags & SA_RESTART);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) return;
    if (sigaction(SIGBUS, &sa, NULL) != 0) {
        sigaction(SIGSEGV, &mt_old_segv, NULL);
        return;
    }
    mt_guard_ok = 1;
}

static void mt_hit_install_guard(void) { pthread_once(&mt_guard_once, mt_guard_init); }

/* ------------------------------------------------------------ the hit */

#define LD(p, off) __atomic_load_n((const uint64_t*)((p) + (off)), __ATOMIC_RELAXED)
#define LDA(p, off) __atomic_load_n((const uint64_t*)((p) + (off)), __ATOMIC_ACQUIRE)
#define ST(p, off, v) __atomic_store_n((uint64_t*)((p) + (off)), (v), __ATOMIC_RELAXED)

uint64_t mt_hit_path_hash(const char* p, uint64_t n) {
    uint64_t h = n * 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8); /* little endian, zero-padded */
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ^ h >> 29;
}

/* runtime/cache.mix64, as runtime/hitidx.BlockSlot uses it. */
static inline uint64_t mt_mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* now on the files package's clock, never below it (HdrMonoOffset). */
static inline int64_t mt_files_now(const unsigned char* r) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - (int64_t)LD(r, MT_HIT_HDR_MONO_OFFSET);
}

static int mt_same_file(const unsigned char* fe, const struct stat* st) {
    return st->st_nlink != 0 && (uint64_t)st->st_dev == LD(fe, MT_HIT_FILE_DEV) &&
           (uint64_t)st->st_ino == LD(fe, MT_HIT_FILE_INO) &&
           (uint64_t)(int64_t)st->st_size == LD(fe, MT_HIT_FILE_SIZE) &&
           (uint64_t)((int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec) ==
               LD(fe, MT_HIT_FILE_MTIME) &&
           (uint64_t)((int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec) ==
               LD(fe, MT_HIT_FILE_CTIME);
}

int mt_hit_copy_test(void* dst, const void* src, uint64_t n) {
    mt_copy_bytes(dst, src, n);
#if defined(__x86_64__)
    return __atomic_load_n(&mt_copy_kind, __ATOMIC_RELAXED);
#else
    return 0;
#endif
}

int mt_hit_copy_stream_test(void* dst, const void* src, uint64_t n) {
    mt_copy_bytes_stream(dst, src, n);
    mt_copy_stream_fence();
#if defined(__x86_64__)
    return __atomic_load_n(&mt_copy_kind, __ATOMIC_RELAXED);
#else
    return 0;
#endif
}

/* The copy, with a fault on dst caught: 0 done, -1 faulted. Not inlined, so
 * that nothing of the caller's frame lives in registers sigsetjmp restores. */
static __attribute__((noinline)) int mt_guarded_copy(void* dst, const void* src, uint64_t n) {
    mt_copy_guard_t g;
    if (sigsetjmp(g.jb, 0) != 0) {
        pthread_sigmask(SIG_SETMASK, &g.mask, NULL);
        return -1;
    }
    mt_copy = &g;
    atomic_signal_fence(memory_order_seq_cst);
    mt_copy_bytes(dst, src, n);
    atomic_signal_fence(memory_order_seq_cst);
    mt_copy = NULL;
    return 0;
}

/* The file entry of path (len bytes) when it names the file, else NULL;
 * *fs1 is its sequence count before the reads, *ver its version. */
static inline const unsigned char* mt_hit_file(const unsigned char* r, const char* path, size_t len,
                                               uint64_t* fs1, uint64_t* ver) {
    if (len == 0 || len > MT_HIT_MAX_PATH) return NULL;
    const unsigned char* fe = r + LD(r, MT_HIT_HDR_FILE_OFF) +
                              (mt_hit_path_hash(path, len) & LD(r, MT_HIT_HDR_FILE_MASK)) * MT_HIT_FILE_ENTRY;
    *fs1 = LDA(fe, MT_HIT_FILE_SEQ);
    if (*fs1 & 1) return NULL;
    *ver = LD(fe, MT_HIT_FILE_VERSION);
    if (*ver == 0 || LD(fe, MT_HIT_FILE_PATH_LEN) != len || memcmp(fe + MT_HIT_FILE_PATH, path, len) != 0)
        return NULL;
    return fe;
}

/* The file entry this thread's last hit of a context used: a read of the
 * same path finds it without strlen, the path hash and the table's slot.
 * Only where to look: the entry is checked as on the full lookup (its path
 * compared byte by byte with the caller's, whose memory may since hold
 * another string, under the entry's sequence counter), so a path that
 * changed or an entry Go rewrote falls back to the full lookup. Keyed by the
 * context id, which is never reused, and used only while the caller holds
 * that id's region (mt_hit_enter), so fe always points into a live region of
 * that layout. initial-exec, as mt_copy. */
typedef struct mt_hit_last {
    uint64_t id; /* 0: none */
    const unsigned char* fe;
} mt_hit_last_t;
static __thread mt_hit_last_t mt_last __attribute__((tls_model("initial-exec")));

/* Whether the NUL-terminated path is exactly the len bytes at p (p[len] is
 * NUL in a settled entry): strncmp stops at path's NUL or the first
 * difference, so it reads neither string beyond its end (len <= MaxPath). */
static inline int mt_path_is(const char* path, const unsigned char* p, uint64_t len) {
    return strncmp(path, (const char*)p, len + 1) == 0;
}

/* mt_hit_file of context id's region r, trying this thread's last entry
 * (mt_last) first. */
static inline const unsigned char* mt_hit_file_cached(uint64_t id, const unsigned char* r, const char* path,
                                                      uint64_t* fs1, uint64_t* ver) {
    if (mt_last.id == id) {
        const unsigned char* fe = mt_last.fe;
        *fs1 = LDA(fe, MT_HIT_FILE_SEQ);
        *ver = LD(fe, MT_HIT_FILE_VERSION);
        const uint64_t len = LD(fe, MT_HIT_FILE_PATH_LEN);
        if (!(*fs1 & 1) && *ver != 0 && len != 0 && len <= MT_HIT_MAX_PATH &&
            mt_path_is(path, fe + MT_HIT_FILE_PATH, len))
            return fe;
    }
    const unsigned char* fe = mt_hit_file(r, path, strlen(path), fs1, ver);
    if (fe != NULL) {
        mt_last.id = id;
        mt_last.fe = fe;
    }
    return fe;
}

/* The freshness check of the context's mode for file entry fe: 1 trusted,
 * 2 checked with fstat now (strict), 0 Go must answer. */
static inline int mt_hit_fresh(const unsigned char* r, const unsigned char* fe, const char* path, uint32_t flags) {
    const uint64_t mode = LD(r, MT_HIT_HDR_MODE);
    if ((flags & MEMTIER_READ_IMMUTABLE) || mode == MT_HIT_MODE_OPEN) return 1;
    const int64_t now = mt_files_now(r);
    if (mode == MT_HIT_MODE_INTERVAL)
        return now - (int64_t)LD(fe, MT_HIT_FILE_CHECKED) < (int64_t)LD(r, MT_HIT_HDR_TRUST_NS) ? 1 : 0;
    const int64_t recheck = (int64_t)LD(r, MT_HIT_HDR_RECHECK_NS);
    if (recheck <= 0 || path[0] != '/' || now - (int64_t)LD(fe, MT_HIT_FILE_RESOLVED) > recheck) return 0;
    struct stat st;
    if (syscall(SYS_fstat, (int)(int32_t)LD(fe, MT_HIT_FILE_FD), &st) != 0 || !mt_same_file(fe, &st)) return 0;
    return 2;
}

/* The hash of block (file version ver, index bi): runtime/hitidx.blockHash. */
static inline uint64_t mt_block_hash(uint64_t ver, uint64_t bi) { return mt_mix64(ver ^ bi * 0x9e3779b97f4a7c15ull); }

/* The hint word's tag bits (runtime/hitidx.HintTag; addresses are page aligned). */
#define MT_HIT_HINT_TAG UINT64_C(0xfff)

void mt_hit_slots(uint64_t file, uint64_t index, uint64_t block_mask, uint64_t hint_mask, uint64_t* block,
                  uint64_t* hint, uint64_t* tag) {
    const uint64_t h = mt_block_hash(file, index);
    *block = h & block_mask & ~UINT64_C(1);
    *hint = h >> 1 & hint_mask;
    *tag = h >> 52;
}

/* The first block entry of the pair of block (ver, bi). */
static inline const unsigned char* mt_hit_lookup(const unsigned char* r, uint64_t ver, uint64_t bi) {
    return r + LD(r, MT_HIT_HDR_BLOCK_OFF) +
           (mt_block_hash(ver, bi) & LD(r, MT_HIT_HDR_BLOCK_MASK) & ~UINT64_C(1)) * MT_HIT_BLOCK_ENTRY;
}

/* The hint of block (ver, bi) (its address word at [0], its sequence value
 * at [MT_HIT_HINT_STAMP]). */
static inline const unsigned char* mt_hit_hint(const unsigned char* r, uint64_t ver, uint64_t bi) {
    const uint64_t h = mt_block_hash(ver, bi);
    return r + LD(r, MT_HIT_HDR_HINT_OFF) + (h >> 1 & LD(r, MT_HIT_HDR_HINT_MASK)) * MT_HIT_HINT_ENTRY;
}

/* The address block (ver, bi)'s hint word w predicts, or 0 (no hint, or
 * another block's: its tag differs). */
static inline uint64_t mt_hint_addr(uint64_t w, uint64_t ver, uint64_t bi) {
    return (w & MT_HIT_HINT_TAG) == mt_block_hash(ver, bi) >> 52 ? w & ~MT_HIT_HINT_TAG : 0;
}

static inline uint64_t mt_hit_predict(const unsigned char* r, uint64_t ver, uint64_t bi) {
    return mt_hint_addr(LD(mt_hit_hint(r, ver, bi), 0), ver, bi);
}

/* The most source lines a checked read prefetches before its check: a
 * whole 4 KiB read. */
#define MT_HIT_CHECK_SRC_LINES 64

/* Prefetches the source of [off, off + size) (at most
 * MT_HIT_CHECK_SRC_LINES lines) where block (ver, off >> shift)'s hint
 * predicts it, before a freshness check: the fstat's system call then
 * overlaps the copy's misses, which the copy after it would wait for one
 * after another (the floor of a strict read, fstat then memcpy, cannot
 * overlap them). A prefetch of any address is harmless: the copy checks
 * the entry as always. */
static inline void mt_hit_prefetch_range(const unsigned char* r, uint64_t ver, uint64_t off, uint64_t size,
                                         uint64_t shift) {
    const uint64_t pred = mt_hit_predict(r, ver, off >> shift);
    if (pred == 0) return;
    const unsigned char* p = (const unsigned char*)(uintptr_t)(pred + (off & ((UINT64_C(1) << shift) - 1)));
    const uint64_t end = (((uintptr_t)p & 63) + size + 63) >> 6;
    for (uint64_t l = 0; l < end && l < MT_HIT_CHECK_SRC_LINES; l++) __builtin_prefetch(p + 64 * l);
}

/* The pair of block entries for [off, off + size) of file version ver,
 * prefetched; NULL when the range is outside the file or spans two blocks. */
static inline const unsigned char* mt_hit_block_slot(const unsigned char* r, uint64_t ver, uint64_t fsize,
                                                     uint64_t off, uint64_t size, uint64_t shift) {
    if (off > fsize || size > fsize - off) return NULL;
    const uint64_t bi = off >> shift;
    if ((off + size - 1) >> shift != bi) return NULL;
    const unsigned char* be = mt_hit_lookup(r, ver, bi);
    /* The pair, two cache lines: their misses overlap what runs before the
     * entry is read (a trusted read's copy: mt_hit_copy_hinted). */
    __builtin_prefetch(be);
    __builtin_prefetch(be + MT_HIT_BLOCK_ENTRY);
    return be;
}

/* How many elements ahead a readv prefetches the block entries: each is a
 * dependent cache miss before its copy can start, so the misses of the next
 * few elements overlap the copies of this one. */
#define MT_HIT_READV_AHEAD 4

/* The ring of pairs a readv keeps: elements k .. k + MT_HIT_READV_AHEAD. */
#define MT_HIT_READV_RING 8
_Static_assert(MT_HIT_READV_AHEAD < MT_HIT_READV_RING && (MT_HIT_READV_RING & (MT_HIT_READV_RING - 1)) == 0,
               "the ring holds elements k .. k + AHEAD, and is a power of two");

/* The pair of block entries of block bi of file version ver in the block
 * table bt (mask: the block mask without its low bit), prefetched (no
 * checks: a prefetch of any address inside the table is harmless). */
static inline const unsigned char* mt_hit_prefetch_pair(const unsigned char* bt, uint64_t mask, uint64_t ver,
                                                         uint64_t bi) {
    const unsigned char* be = bt + (mt_block_hash(ver, bi) & mask) * MT_HIT_BLOCK_ENTRY;
    __builtin_prefetch(be);
    __builtin_prefetch(be + MT_HIT_BLOCK_ENTRY);
    return be;
}

/* How many cache lines of the next element's source a readv prefetches
 * before it copies this one. A 4 KiB copy from DRAM starts with a full miss
 * latency before the hardware's stream prefetcher runs ahead of it; touching
 * the next source's first lines early hides that start. On the build VM
 * (random 4 KiB from a 256 MiB huge-page buffer, interleaved): 1 element
 * ahead, 2 lines: 1.22-1.24x a plain memcpy loop; 4 lines 1.14-1.22x, 8
 * lines 1.06-1.17x; 2 elements ahead 1.13-1.19x; the whole 4 KiB 0.8-0.9x
 * (its 64 prefetches crowd out the copy's own loads). */
#define MT_HIT_READV_SRC_LINES 2

/* Prefetches the first source lines of element e (of file version ver) when
 * its block's entry names an address; no checks of validity or races: a
 * prefetch of any address is harmless, and the copy checks everything. */
static inline void mt_hit_prefetch_src(const unsigned char* be, uint64_t ver, const memtier_iovec_t* e,
                                       uint64_t shift) {
    if (e->path != NULL || e->size == 0) return;
    const uint64_t bi = e->offset >> shift;
    if (LD(be, MT_HIT_BLOCK_FILE) != ver || LD(be, MT_HIT_BLOCK_INDEX) != bi) be += MT_HIT_BLOCK_ENTRY;
    const uint64_t addr = LD(be, MT_HIT_BLOCK_ADDR);
    if (addr == 0) return;
    const unsigned char* p = (const unsigned char*)(uintptr_t)(addr + (e->offset & ((UINT64_C(1) << shift) - 1)));
    for (int l = 0; l < MT_HIT_READV_SRC_LINES; l++) __builtin_prefetch(p + 64 * l);
}

/* The pages of [lo, lo + size) of a block: bit p for page p. */
static inline uint64_t mt_pages(uint64_t lo, uint64_t size) {
    const uint64_t p0 = lo >> 12, p1 = (lo + size + 4095) >> 12;
    return (p1 - p0 == 64 ? ~UINT64_C(0) : ((UINT64_C(1) << (p1 - p0)) - 1)) << p0;
}

/* Copies [off, off + size) from the block of the pair at be when it holds
 * all of it (valid pages, no writer before or during the copy), marking the
 * block used: 1 copied, 0 not (dst may hold any bytes). The entry is read
 * before the copy, whose source is the entry's address: where its line is
 * not in the CPU caches the copy waits for it (mt_hit_copy_hinted does not).
 * guarded: 1 the copy has a fault guard of its own; 0 the caller's guard
 * (mt_hit_copy_all) catches a fault; 2 as 0 with streaming stores (the
 * caller fences). */
static inline __attribute__((always_inline)) int mt_hit_copy(const unsigned char* be, uint64_t ver, uint64_t off,
                                                              uint64_t size, uint64_t shift, void* dst,
                                                              int guarded) {
    const uint64_t bi = off >> shift;
    const uint64_t lo = off & ((UINT64_C(1) << shift) - 1);
    uint64_t bs1 = LDA(be, MT_HIT_BLOCK_SEQ);
    if (bs1 & 1 || LD(be, MT_HIT_BLOCK_FILE) != ver || LD(be, MT_HIT_BLOCK_INDEX) != bi) {
        be += MT_HIT_BLOCK_ENTRY;
        bs1 = LDA(be, MT_HIT_BLOCK_SEQ);
        if (bs1 & 1 || LD(be, MT_HIT_BLOCK_FILE) != ver || LD(be, MT_HIT_BLOCK_INDEX) != bi) return 0;
    }
    const uint64_t addr = LD(be, MT_HIT_BLOCK_ADDR);
    const uint64_t need = mt_pages(lo, size);
    if (addr == 0 || (LD(be, MT_HIT_BLOCK_VALID) & need) != need) return 0;
    const uint64_t src = addr + lo;
    if (guarded == 1) {
        if (!mt_guard_ok || mt_guarded_copy(dst, (const void*)(uintptr_t)src, size) != 0) return 0;
    } else { /* the caller's guard (mt_hit_copy_all) catches a fault */
        atomic_signal_fence(memory_order_seq_cst);
        if (guarded == 2)
            mt_copy_bytes_stream(dst, (const void*)(uintptr_t)src, size);
        else
            mt_copy_bytes(dst, (const void*)(uintptr_t)src, size);
        atomic_signal_fence(memory_order_seq_cst);
    }
    atomic_thread_fence(memory_order_acquire);
    if (LD(be, MT_HIT_BLOCK_SEQ) != bs1) return 0;
    /* A use Go's eviction would have seen (stored only when unset, so a hot
     * entry's line is not written on every hit). */
    if (LD(be, MT_HIT_BLOCK_REF) == 0) ST((unsigned char*)be, MT_HIT_BLOCK_REF, 1);
    return 1;
}

/* The copy of a trusted read: from where block (ver, off >> shift)'s hint
 * predicts it, before the block's entry (pair at be, prefetched) is read,
 * so the entry's miss to DRAM is served during the copy instead of before
 * it; then the entry is read under its sequence counter. 1: copied, and the
 * entry had the hint's sequence value from before the copy to after it and
 * named the hint's address with the range's pages valid; 0: not (dst may
 * hold any bytes; the caller copies with mt_hit_copy).
 *
 * Why an equal value proves the copy: Go gives every write of a block entry
 * a new value, unique across the region's entries (runtime/hitidx
 * unlockPair), and writes a hint's value after the entry took it. So an
 * entry that has the hint's value after the copy is the one the hint's
 * value was written for, unchanged since before the hint was read, that is
 * during the whole copy; and Go clears a block's entry (a new value) before
 * it reuses the block's memory. The hint itself may be torn or stale: its
 * address is only used once the entry names the same one. A copy from a
 * stale address reads memory of the cache, which stays mapped while the
 * context is registered; an address that faults (the guard catches it)
 * falls back like any other mismatch. */
static inline __attribute__((always_inline)) int mt_hit_copy_hinted(const unsigned char* r, const unsigned char* be,
                                                                     uint64_t ver, uint64_t off, uint64_t size,
                                                                     uint64_t shift, void* dst) {
    const uint64_t bi = off >> shift;
    const unsigned char* hp = mt_hit_hint(r, ver, bi);
    const uint64_t stamp = LD(hp, MT_HIT_HINT_STAMP);
    const uint64_t pred = mt_hint_addr(LD(hp, 0), ver, bi);
    if (pred == 0 || stamp == 0 || (stamp & 1) || !mt_guard_ok) return 0;
    atomic_thread_fence(memory_order_acquire); /* the hint's loads before the copy's */
    const uint64_t lo = off & ((UINT64_C(1) << shift) - 1);
    if (mt_guarded_copy(dst, (const void*)(uintptr_t)(pred + lo), size) != 0) return 0;
    atomic_thread_fence(memory_order_acquire); /* the copy's loads before the entry's */
    if (LDA(be, MT_HIT_BLOCK_SEQ) != stamp) {
        be += MT_HIT_BLOCK_ENTRY;
        if (LDA(be, MT_HIT_BLOCK_SEQ) != stamp) return 0;
    }
    const uint64_t need = mt_pages(lo, size);
    if (LD(be, MT_HIT_BLOCK_FILE) != ver || LD(be, MT_HIT_BLOCK_INDEX) != bi || LD(be, MT_HIT_BLOCK_ADDR) != pred ||
        (LD(be, MT_HIT_BLOCK_VALID) & need) != need)
        return 0;
    atomic_thread_fence(memory_order_acquire);
    if (LD(be, MT_HIT_BLOCK_SEQ) != stamp) return 0;
    if (LD(be, MT_HIT_BLOCK_REF) == 0) ST((unsigned char*)be, MT_HIT_BLOCK_REF, 1);
    return 1;
}

static int mt_hit_serve(uint64_t id, const unsigned char* r, const char* path, uint64_t off, uint64_t size,
                        void* dst, uint32_t flags) {
    uint64_t fs1, ver;
    const unsigned char* fe = mt_hit_file_cached(id, r, path, &fs1, &ver);
    if (fe == NULL) return 0;
    const uint64_t shift = LD(r, MT_HIT_HDR_BLOCK_SHIFT);
    const unsigned char* be = mt_hit_block_slot(r, ver, LD(fe, MT_HIT_FILE_SIZE), off, size, shift);
    if (be == NULL) return 0;
    /* Strict: the source is prefetched where the hint predicts it, and the
     * fstat runs while it arrives (interval and open freshness copy at once,
     * and their copy reads from the hint itself). */
    if (!(flags & MEMTIER_READ_IMMUTABLE) && LD(r, MT_HIT_HDR_MODE) == MT_HIT_MODE_STRICT)
        mt_hit_prefetch_range(r, ver, off, size, shift);
    const int fresh = mt_hit_fresh(r, fe, path, flags);
    if (fresh == 0) return 0;
    /* A trusted file copies from the hint first (else the copy would wait
     * for the entry's miss); a checked one does not: the entry's line
     * arrived during the fstat (and the source's, from the prefetch above). */
    int copied = fresh == 1 && mt_hit_copy_hinted(r, be, ver, off, size, shift, dst);
    if (!copied) {
        if (fresh == 1) __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_HINT_MISSES), 1, __ATOMIC_RELAXED);
        copied = mt_hit_copy(be, ver, off, size, shift, dst, 1);
    }
    if (!copied) return 0;
    if (LD(fe, MT_HIT_FILE_SEQ) != fs1) return 0;
    /* The use the descriptor LRU would have seen. */
    if (LD(fe, MT_HIT_FILE_TOUCHED) == 0) ST((unsigned char*)fe, MT_HIT_FILE_TOUCHED, 1);
    __atomic_fetch_add((uint64_t*)(r + (fresh == 2 ? MT_HIT_CTR_CHECKED : MT_HIT_CTR_TRUSTED)), 1, __ATOMIC_RELAXED);
    __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_BYTES), size, __ATOMIC_RELAXED);
    return 1;
}

/* Elements of a readv that span up to this many cache blocks are copied in
 * C, block by block: with 64 KiB blocks, about half of the 4-64 KiB samples
 * of a dataset cross a block boundary, and Go's path costs each of them a
 * pin, a map lookup and a runtime memmove. Longer elements stay with Go. */
#define MT_HIT_READV_SPAN 4

/* The blocks [off, off + size) spans beyond its first (size > 0). */
/* Bytes of a readv above which its copies use streaming stores (see
 * mt_hit_copy_all): above the L2 cache of common cores. */
#ifndef MT_HIT_STREAM_BYTES
#define MT_HIT_STREAM_BYTES (UINT64_C(1) << 20)
#endif

static inline uint64_t mt_span_extra(uint64_t off, uint64_t size, uint64_t shift) {
    return ((off + size - 1) >> shift) - (off >> shift);
}

/* Copies element [off, off + size), one piece per block it spans (one for
 * most); be0 is the pair of its first block. 1 copied, 0 not (dst may hold
 * any bytes; Go then serves the whole element). */
static inline int mt_hit_copy_span(const unsigned char* bt, uint64_t bmask, const unsigned char* be0, uint64_t ver,
                                   uint64_t off, uint64_t size, uint64_t shift, void* dst, int mode) {
    const uint64_t bmax = (UINT64_C(1) << shift) - 1;
    const unsigned char* be = be0;
    unsigned char* d = (unsigned char*)dst;
    for (;;) {
        const uint64_t room = bmax + 1 - (off & bmax);
        const uint64_t part = room < size ? room : size;
        if (!mt_hit_copy(be, ver, off, part, shift, d, mode)) return 0;
        size -= part;
        if (size == 0) return 1;
        off += part;
        d += part;
        be = mt_hit_prefetch_pair(bt, bmask, ver, off >> shift);
    }
}

/* The copies of a readv (file version ver, size fsize), under one fault
 * guard for the whole loop: a sigsetjmp and two TLS stores per call, not
 * per element (the per-element guard and its call cost about as much as
 * the bookkeeping of an element). Sets each element's result (its size
 * when copied, 0 when Go must serve it), *bytes_out and *extra_out (the
 * blocks beyond the first of the elements copied); returns the number
 * copied. A fault on an element's dst ends the loop there: the elements
 * before it keep their copies, it and every later one get result 0 (Go
 * serves them, and reports the fault as on its own path). */
static __attribute__((noinline)) uint64_t mt_hit_copy_all(const unsigned char* r, uint64_t ver, uint64_t fsize,
                                                          uint64_t shift, memtier_iovec_t* iov, uint64_t n,
                                                          uint64_t* bytes_out, uint64_t* extra_out) {
    mt_copy_guard_t g;
    volatile uint64_t at = 0; /* the element being copied: where a fault stops the loop */
    /* A batch of more than MT_HIT_STREAM_BYTES is copied with streaming
     * stores: its destination cannot stay in the CPU caches anyway, and
     * plain stores would first read every destination line from DRAM. */
    uint64_t want = 0;
    for (uint64_t k = 0; k < n; k++) want += iov[k].size;
    const int mode = want > MT_HIT_STREAM_BYTES ? 2 : 0;
    if (sigsetjmp(g.jb, 0) != 0) {
        pthread_sigmask(SIG_SETMASK, &g.mask, NULL);
        if (mode == 2) mt_copy_stream_fence();
        const uint64_t stop = at;
        uint64_t served = 0, bytes = 0, extra = 0;
        for (uint64_t k = 0; k < n; k++) {
            if (k >= stop) {
                iov[k].result = 0;
            } else if (iov[k].result > 0) {
                served++;
                bytes += (uint64_t)iov[k].result;
                extra += mt_span_extra(iov[k].offset, iov[k].size, shift);
            }
        }
        *bytes_out = bytes;
        *extra_out = extra;
        return served;
    }
    mt_copy = &g;
    atomic_signal_fence(memory_order_seq_cst);
    /* The block table and the pair of each element ahead, found once per
     * element (the hash is computed when the pair is prefetched, and the
     * source prefetch and the copy take it from the ring). */
    const unsigned char* const bt = r + LD(r, MT_HIT_HDR_BLOCK_OFF);
    const uint64_t bmask = LD(r, MT_HIT_HDR_BLOCK_MASK) & ~UINT64_C(1);
    const unsigned char* ring[MT_HIT_READV_RING];
    uint64_t bytes = 0, served = 0, extra = 0;
    for (uint64_t k = 0; k < n && k < MT_HIT_READV_AHEAD; k++)
        ring[k % MT_HIT_READV_RING] = mt_hit_prefetch_pair(bt, bmask, ver, iov[k].offset >> shift);
    for (uint64_t k = 0; k < n; k++) {
        memtier_iovec_t* e = &iov[k];
        if (k + MT_HIT_READV_AHEAD < n)
            ring[(k + MT_HIT_READV_AHEAD) % MT_HIT_READV_RING] =
                mt_hit_prefetch_pair(bt, bmask, ver, iov[k + MT_HIT_READV_AHEAD].offset >> shift);
        if (k + 1 < n) mt_hit_prefetch_src(ring[(k + 1) % MT_HIT_READV_RING], ver, &iov[k + 1], shift);
        e->result = 0;
        if (e->path != NULL || e->size == 0 || e->dst == NULL) continue;
        const uint64_t off = e->offset, size = e->size;
        if (off > fsize || size > fsize - off) continue;
        const uint64_t span = mt_span_extra(off, size, shift);
        if (span >= MT_HIT_READV_SPAN) continue;
        at = k; /* volatile: the fault path reads it */
        if (!mt_hit_copy_span(bt, bmask, ring[k % MT_HIT_READV_RING], ver, off, size, shift, e->dst, mode)) continue;
        extra += span;
        e->result = (int64_t)e->size;
        bytes += e->size;
        served++;
    }
    if (mode == 2) mt_copy_stream_fence();
    atomic_signal_fence(memory_order_seq_cst);
    mt_copy = NULL;
    *bytes_out = bytes;
    *extra_out = extra;
    return served;
}

/* readv of one file: the file is found and checked once, then each element
 * is a block lookup and a copy. Elements C cannot serve (a path of their
 * own, size 0, not cached, a race) get result 0 and are left to Go. Returns
 * the number served; n: the call was counted whole (one readv call, one
 * revalidation when checked); fewer: only the hits were counted (Go counts
 * the call when it reads the rest); 0 also when the file changed during the
 * copies (nothing counted, Go serves everything). */
static uint64_t mt_hit_serve_v(const unsigned char* r, const char* path, memtier_iovec_t* iov, uint64_t n,
                               uint32_t flags) {
    uint64_t fs1, ver;
    const unsigned char* fe = mt_hit_file(r, path, strlen(path), &fs1, &ver);
    if (fe == NULL) return 0;
    const int fresh = mt_hit_fresh(r, fe, path, flags);
    if (fresh == 0) return 0;
    if (!mt_guard_ok) return 0;
    const uint64_t shift = LD(r, MT_HIT_HDR_BLOCK_SHIFT), fsize = LD(fe, MT_HIT_FILE_SIZE);
    uint64_t bytes = 0, extra = 0;
    const uint64_t served = mt_hit_copy_all(r, ver, fsize, shift, iov, n, &bytes, &extra);
    if (served == 0) return 0;
    if (LD(fe, MT_HIT_FILE_SEQ) != fs1) {
        for (uint64_t k = 0; k < n; k++) iov[k].result = 0;
        return 0;
    }
    if (LD(fe, MT_HIT_FILE_TOUCHED) == 0) ST((unsigned char*)fe, MT_HIT_FILE_TOUCHED, 1);
    __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_TRUSTED), served, __ATOMIC_RELAXED);
    __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_BYTES), bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_READV_HITS), served, __ATOMIC_RELAXED);
    if (extra) __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_EXTRA_BLOCKS), extra, __ATOMIC_RELAXED);
    if (served == n) {
        if (fresh == 2) __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_READV_CHECKED), 1, __ATOMIC_RELAXED);
        __atomic_fetch_add((uint64_t*)(r + MT_HIT_CTR_READV_CALLS), 1, __ATOMIC_RELAXED);
    }
    return served;
}

/* The registered slot of context id with its reader counted in, or NULL
 * (then nothing was counted); mt_hit_leave ends the visit. */
static inline mt_hit_ctx_t* mt_hit_enter(uint64_t id, const unsigned char** region) {
    for (int i = 0; i < MT_HIT_PROBE; i++) {
        mt_hit_ctx_t* s = &mt_hit_ctxs[(id + (uint64_t)i) % MT_HIT_CTX_SLOTS];
        if (atomic_load_explicit(&s->id, memory_order_relaxed) == id) {
            atomic_fetch_add(&s->readers, 1);
            const unsigned char* r = NULL;
            if (atomic_load(&s->id) == id) r = atomic_load_explicit(&s->region, memory_order_acquire);
            if (r == NULL) {
                atomic_fetch_sub_explicit(&s->readers, 1, memory_order_release);
                return NULL;
            }
            *region = r;
            return s;
        }
    }
    return NULL;
}

static inline void mt_hit_leave(mt_hit_ctx_t* c) { atomic_fetch_sub_explicit(&c->readers, 1, memory_order_release); }

int mt_hit_read(uint64_t id, const char* path, uint64_t offset, uint64_t size, void* dst, uint32_t flags) {
    if (path == NULL || dst == NULL || size == 0 || (flags & ~(uint32_t)MT_HIT_FLAGS) != 0) return 0;
    const unsigned char* r;
    mt_hit_ctx_t* c = mt_hit_enter(id, &r);
    if (c == NULL) return 0;
    const int served = mt_hit_serve(id, r, path, offset, size, dst, flags);
    mt_hit_leave(c);
    return served;
}

uint64_t mt_hit_readv(uint64_t id, const char* path, memtier_iovec_t* iov, uint64_t n, uint32_t flags) {
    if (path == NULL || iov == NULL || n == 0 || (flags & ~(uint32_t)MT_HIT_FLAGS) != 0) return 0;
    const unsigned char* r;
    mt_hit_ctx_t* c = mt_hit_enter(id, &r);
    if (c == NULL) return 0;
    const uint64_t served = mt_hit_serve_v(r, path, iov, n, flags);
    mt_hit_leave(c);
    return served;
}
