/*
 * Description: loading and using MemTier leaves the program's signals alone:
 * after init and a read, SIGINT and SIGTERM are still SIG_DFL (the Go runtime
 * installs no handler for them in a c-shared library), and a SIGINT handler the
 * program installs with SA_ONSTACK runs exactly once per raise() (1000 times)
 * while 4 threads keep reading with exact bytes and no error.
 */
#include "mt_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#define FILE_SIZE (16 * MiB)
#define RAISES 1000
#define NREADERS 4

static memtier_ctx_t* ctx;
static const char* path;
static atomic_int stop;
static atomic_int handled;
static atomic_long reads_done;

static void on_sigint(int sig) {
    (void)sig;
    atomic_fetch_add(&handled, 1);
}

static const char* describe(const struct sigaction* sa) {
    if (sa->sa_flags & SA_SIGINFO) return "a SA_SIGINFO handler";
    if (sa->sa_handler == SIG_DFL) return "SIG_DFL";
    if (sa->sa_handler == SIG_IGN) return "SIG_IGN";
    return "a handler";
}

struct reader {
    int id;
    char failure[256];
};

static void* reader_main(void* arg) {
    struct reader* r = arg;
    uint64_t seed = 77 + (uint64_t)r->id;
    uint8_t* buf = mt_alloc(256 * KiB);
    while (!atomic_load(&stop)) {
        uint64_t size = 1 + mt_rand(&seed) % (256 * KiB);
        uint64_t off = mt_rand(&seed) % (FILE_SIZE - size + 1);
        int st = memtier_read(ctx, path, off, size, buf, MEMTIER_TARGET_CPU);
        if (st != MEMTIER_OK || mt_find_p_mismatch(buf, off, size) >= 0) {
            snprintf(r->failure, sizeof r->failure, "reader %d: read(%llu, %llu) = %d (%s) %s",
                     r->id, (unsigned long long)off, (unsigned long long)size, st,
                     memtier_strerror(st), st == MEMTIER_OK ? "with wrong bytes" : memtier_last_error());
            break;
        }
        atomic_fetch_add(&reads_done, 1);
    }
    free(buf);
    return NULL;
}

int main(void) {
    mt_begin("test_signals");
    path = mt_make_pfile("p16m.bin", FILE_SIZE);
    ctx = mt_init_cfg(NULL);
    uint8_t b[4096];
    MT_OK(memtier_read(ctx, path, 0, sizeof b, b, MEMTIER_TARGET_CPU));

    struct sigaction sa;
    const int sigs[] = {SIGINT, SIGTERM};
    const char* names[] = {"SIGINT", "SIGTERM"};
    int i;
    for (i = 0; i < 2; i++) {
        MT_CHECK(sigaction(sigs[i], NULL, &sa) == 0, "sigaction");
        MT_CHECK(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL,
                 "%s has %s after memtier_init + read; the library must not take it", names[i],
                 describe(&sa));
    }
    MT_CHECK(sigaction(SIGSEGV, NULL, &sa) == 0, "sigaction");
    printf("SIGINT/SIGTERM: SIG_DFL; SIGSEGV: %s%s (informational)\n", describe(&sa),
           (sa.sa_flags & SA_ONSTACK) ? " [SA_ONSTACK]" : "");

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    MT_CHECK(sigaction(SIGINT, &sa, NULL) == 0, "install SIGINT handler");

    pthread_t th[NREADERS];
    struct reader rd[NREADERS];
    for (i = 0; i < NREADERS; i++) {
        memset(&rd[i], 0, sizeof rd[i]);
        rd[i].id = i;
        MT_CHECK(pthread_create(&th[i], NULL, reader_main, &rd[i]) == 0, "pthread_create");
    }
    for (i = 0; i < RAISES; i++) {
        MT_CHECK(raise(SIGINT) == 0, "raise");
        if (i % 100 == 0) usleep(1000);
    }
    usleep(50 * 1000);
    atomic_store(&stop, 1);
    for (i = 0; i < NREADERS; i++) {
        pthread_join(th[i], NULL);
        MT_CHECK(rd[i].failure[0] == '\0', "%s", rd[i].failure);
    }
    printf("SIGINT handled %d times (raised %d) during %ld reads\n", atomic_load(&handled), RAISES,
           (long)atomic_load(&reads_done));
    MT_CHECK(atomic_load(&handled) == RAISES, "handler ran %d times, want %d",
             atomic_load(&handled), RAISES);
    MT_CHECK(atomic_load(&reads_done) > 0, "no read finished while signals were raised");

    /* Still ours after more MemTier calls. */
    MT_CHECK(sigaction(SIGINT, NULL, &sa) == 0 && sa.sa_handler == on_sigint,
             "the program's SIGINT handler was replaced");
    memtier_stats_t st = mt_stats(ctx);
    MT_EQ_U64(st.errors, 0, "no read failed");
    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
