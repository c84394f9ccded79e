/* The executor of the engine's pread plan of a readv (engine.PreadPlan): the
 * engine decides, opens and checks the file, and counts the stats; this file
 * only moves the planned bytes, one preadv2(RWF_NOWAIT) per element, with no
 * Go scheduling in between. On the 2-core build VM a pread loop in C beat the
 * Go path's io_uring batch (plans, sort, coalescing, a helper goroutine woken
 * per call, sysmon ticks during io_uring_enter) by 1.3-1.4x; the work of a
 * large call is shared with one resident worker thread, woken by a futex,
 * that claims elements in chunks, so a worker that gets no CPU in time
 * leaves its share to the caller instead of holding half the call. */
#define _GNU_SOURCE
#include "readv_pread.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "_cgo_export.h"
#include "hit.h"

/* Elements one thread claims at a time: about 16 us of preads, so the caller
 * waits at most that long for a worker that started. */
#define MT_RP_CHUNK 16
/* From this many elements the worker is woken; below, its wake-up (tens of
 * microseconds on a loaded VM) costs more than it can take over. */
#define MT_RP_PAR_MIN 64
/* The fewest elements the engine plans for (engine.preadPlanMin). */
#define MT_RP_MIN 16
/* How long the caller spins for a worker that is finishing its chunk before
 * it sleeps: a running worker ends a chunk well within this. */
#define MT_RP_SPIN_NS 200000

/* The job the worker shares: fields are written by the caller that holds
 * owner while state is MT_RP_IDLE, and read by the worker only after it
 * moved state from MT_RP_POSTED to MT_RP_RUNNING. */
enum { MT_RP_IDLE = 0, MT_RP_POSTED = 1, MT_RP_RUNNING = 2 };
static struct {
    pthread_mutex_t owner; /* the one call using the worker */
    pthread_once_t once;
    int started;           /* the worker thread runs (else callers read alone) */
    _Atomic uint32_t state; /* futex word */
    memtier_iovec_t* iov;
    uint64_t n, fsize;
    int fd;
    _Atomic uint64_t next; /* the first element not yet claimed */
    _Atomic uint64_t served, bytes;
} mt_rp = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_ONCE_INIT};

static void mt_rp_futex_wait(_Atomic uint32_t* w, uint32_t val) {
    syscall(SYS_futex, (uint32_t*)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void mt_rp_futex_wake(_Atomic uint32_t* w) {
    syscall(SYS_futex, (uint32_t*)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Reads element e whole from fd (a file of fsize bytes); returns 1 and sets
 * e->result, or 0 with e->result left 0 (Go serves and reports it): past the
 * end, a short read, bytes not in the page cache (RWF_NOWAIT: the disk is Go's
 * second pass, SmallIODepth reads at a time), or an error (EFAULT for a bad
 * destination: the kernel writes dst, so a bad one cannot fault here). */
static int mt_rp_read(int fd, uint64_t fsize, memtier_iovec_t* e) {
    if (e->offset > fsize || e->size > fsize - e->offset) return 0;
    uint64_t done = 0;
    while (done < e->size) {
        struct iovec v = {(char*)e->dst + done, (size_t)(e->size - done)};
        const ssize_t r = preadv2(fd, &v, 1, (off_t)(e->offset + done), RWF_NOWAIT);
        if (r > 0) {
            done += (uint64_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        return 0;
    }
    e->result = (int64_t)e->size;
    return 1;
}

/* Claims and reads chunks of the job until none is left; adds what it served. */
static void mt_rp_drain(memtier_iovec_t* iov, uint64_t n, int fd, uint64_t fsize) {
    uint64_t served = 0, bytes = 0;
    for (;;) {
        const uint64_t lo = atomic_fetch_add_explicit(&mt_rp.next, MT_RP_CHUNK, memory_order_relaxed);
        if (lo >= n) break;
        const uint64_t hi = lo + MT_RP_CHUNK < n ? lo + MT_RP_CHUNK : n;
        for (uint64_t k = lo; k < hi; k++)
            if (mt_rp_read(fd, fsize, &iov[k])) {
                served++;
                bytes += iov[k].size;
            }
    }
    atomic_fetch_add(&mt_rp.served, served);
    atomic_fetch_add(&mt_rp.bytes, bytes);
}

static void* mt_rp_worker(void* arg) {
    (void)arg;
    for (;;) {
        uint32_t s;
        while ((s = atomic_load(&mt_rp.state)) != MT_RP_POSTED) mt_rp_futex_wait(&mt_rp.state, s);
        uint32_t want = MT_RP_POSTED;
        if (!atomic_compare_exchange_strong(&mt_rp.state, &want, MT_RP_RUNNING)) continue; /* taken back */
        mt_rp_drain(mt_rp.iov, mt_rp.n, mt_rp.fd, mt_rp.fsize);
        atomic_store(&mt_rp.state, MT_RP_IDLE);
        mt_rp_futex_wake(&mt_rp.state);
    }
    return NULL;
}

/* Starts the worker once, with every signal blocked (the process's signals
 * go to its own threads). A failure leaves callers reading alone. */
static void mt_rp_start(void) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) == 0) {
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 << 10);
        mt_rp.started = pthread_create(&t, &a, mt_rp_worker, NULL) == 0;
        pthread_attr_destroy(&a);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static uint64_t mt_rp_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Executes the plan on the calling thread, with the worker when the call is
 * large and the worker free; returns the elements served, *bytes their bytes. */
static uint64_t mt_rp_exec(memtier_iovec_t* iov, uint64_t n, int fd, uint64_t fsize, uint64_t* bytes) {
    if (n >= MT_RP_PAR_MIN) pthread_once(&mt_rp.once, mt_rp_start);
    if (n < MT_RP_PAR_MIN || !mt_rp.started || pthread_mutex_trylock(&mt_rp.owner) != 0) {
        uint64_t served = 0, b = 0;
        for (uint64_t k = 0; k < n; k++)
            if (mt_rp_read(fd, fsize, &iov[k])) {
                served++;
                b += iov[k].size;
            }
        *bytes = b;
        return served;
    }
    mt_rp.iov = iov;
    mt_rp.n = n;
    mt_rp.fd = fd;
    mt_rp.fsize = fsize;
    atomic_store(&mt_rp.next, 0);
    atomic_store(&mt_rp.served, 0);
    atomic_store(&mt_rp.bytes, 0);
    atomic_store(&mt_rp.state, MT_RP_POSTED);
    mt_rp_futex_wake(&mt_rp.state);
    mt_rp_drain(iov, n, fd, fsize);
    /* Take the job back if the worker has not started it; else wait for its
     * last chunk (spinning first: it is running on another CPU). */
    uint32_t want = MT_RP_POSTED;
    if (!atomic_compare_exchange_strong(&mt_rp.state, &want, MT_RP_IDLE)) {
        const uint64_t t0 = mt_rp_now_ns();
        uint32_t s;
        while ((s = atomic_load(&mt_rp.state)) == MT_RP_RUNNING) {
            if (mt_rp_now_ns() - t0 < MT_RP_SPIN_NS)
                __builtin_ia32_pause();
            else
                mt_rp_futex_wait(&mt_rp.state, s);
        }
    }
    const uint64_t served = atomic_load(&mt_rp.served);
    *bytes = atomic_load(&mt_rp.bytes);
    pthread_mutex_unlock(&mt_rp.owner);
    return served;
}

int mt_readv_pread(uint64_t id, const char* path, memtier_iovec_t* iov, uint64_t n, uint32_t flags, int* rc) {
    if (path == NULL || n < MT_RP_MIN || n > MT_HIT_READV_MAX) return 0;
    const uint64_t size = iov[0].size;
    if (size == 0 || size > (uint64_t)INT64_MAX) return 0;
    for (uint64_t k = 0; k < n; k++) {
        const memtier_iovec_t* e = &iov[k];
        /* Go's readv refuses a destination below 4096 with its own message. */
        if (e->path != NULL || e->size != size || (uintptr_t)e->dst < 4096) return 0;
    }
    /* Allocated before anything is read, so that a served element is never
     * served and counted twice when the rest must go to Go. */
    memtier_iovec_t* rest = malloc(n * sizeof *rest);
    if (rest == NULL) return 0;
    int fd = -1;
    uint64_t fsize = 0;
    const uint64_t h = mtgo_readv_plan(id, (char*)path, n, size, flags, &fd, &fsize);
    if (h == 0) {
        free(rest);
        return 0;
    }
    for (uint64_t k = 0; k < n; k++) iov[k].result = 0;
    uint64_t bytes = 0;
    const uint64_t served = mt_rp_exec(iov, n, fd, fsize, &bytes);
    mtgo_readv_plan_done(h, served, bytes, served == n);
    if (served == n) {
        free(rest);
        *rc = MEMTIER_OK;
        return 1;
    }
    uint64_t m = 0;
    for (uint64_t k = 0; k < n; k++)
        if (iov[k].result == 0) rest[m++] = iov[k];
    *rc = mtgo_readv(id, (char*)path, rest, m, MEMTIER_TARGET_CPU, flags);
    for (uint64_t k = 0, j = 0; k < n; k++)
        if (iov[k].result == 0) iov[k].result = rest[j++].result;
    free(rest);
    return 1;
}
