/*
 * Description: C threads that call into Go and exit do not leak
 * OS threads or memory. After memtier_init the thread count (/proc/self/task)
 * and VmRSS are taken as the baseline. Phase 1: 1000 pthreads created one after
 * another, each making one 4 KiB memtier_read, checking its bytes and exiting
 * (joined before the next starts); afterwards the thread count is at most
 * baseline + 4 and VmRSS grew by less than 20 MB. Phase 2 (concurrent): two
 * rounds of 64 threads at once x 100 reads each, all byte-checked; after each
 * round RSS growth stays under 20 MB, and round 2 adds at most 4 threads over
 * round 1 (no per-round leak). All counts are printed.
 */
#include "mt_test.h"

#include <dirent.h>
#include <pthread.h>

#define FILE_SIZE (4 * MiB)
#define READ_SIZE 4096
#define CHURN_THREADS 1000
#define CONC_THREADS 64
#define CONC_READS 100
#define THREAD_SLACK 4
#define RSS_LIMIT_KB (20 * 1024)

static memtier_ctx_t* ctx;
static const char* path;

static int thread_count(void) {
    DIR* d = opendir("/proc/self/task");
    struct dirent* e;
    int n = 0;
    MT_CHECK(d != NULL, "opendir /proc/self/task: %s", strerror(errno));
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static long rss_kb(void) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    MT_CHECK(f != NULL, "open /proc/self/status: %s", strerror(errno));
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    fclose(f);
    MT_CHECK(kb >= 0, "no VmRSS in /proc/self/status");
    return kb;
}

struct job {
    int id;
    int reads;
    char failure[512];
};

static void* reader_main(void* arg) {
    struct job* j = arg;
    uint8_t buf[READ_SIZE];
    uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(j->id + 1);
    int i;
    for (i = 0; i < j->reads; i++) {
        uint64_t off = mt_rand(&seed) % (FILE_SIZE - READ_SIZE + 1);
        int st = memtier_read(ctx, path, off, READ_SIZE, buf, MEMTIER_TARGET_CPU);
        if (st != MEMTIER_OK) {
            snprintf(j->failure, sizeof j->failure, "thread %d read %d (off %llu) = %d (%s): %s",
                     j->id, i, (unsigned long long)off, st, memtier_strerror(st),
                     memtier_last_error());
            return NULL;
        }
        if (mt_find_p_mismatch(buf, off, READ_SIZE) >= 0) {
            snprintf(j->failure, sizeof j->failure, "thread %d read %d (off %llu): byte %lld differs",
                     j->id, i, (unsigned long long)off,
                     (long long)mt_find_p_mismatch(buf, off, READ_SIZE));
            return NULL;
        }
    }
    return NULL;
}

int main(void) {
    mt_begin("test_thread_churn");
    path = mt_make_pfile("p4m.bin", FILE_SIZE);
    ctx = mt_init_cfg(NULL);

    const int base_threads = thread_count();
    const long base_rss = rss_kb();
    printf("baseline after init: %d threads, VmRSS %ld kB\n", base_threads, base_rss);

    /* Phase 1: 1000 threads one after another. */
    {
        double t0 = mt_now();
        int i, peak = 0;
        for (i = 0; i < CHURN_THREADS; i++) {
            struct job j = {i, 1, {0}};
            pthread_t t;
            int rc = pthread_create(&t, NULL, reader_main, &j);
            MT_CHECK(rc == 0, "pthread_create #%d: %s", i, strerror(rc));
            MT_CHECK(pthread_join(t, NULL) == 0, "pthread_join #%d", i);
            if (j.failure[0]) MT_FAIL("%s", j.failure);
            if (i % 100 == 99) {
                int n = thread_count();
                if (n > peak) peak = n;
            }
        }
        int threads = thread_count();
        long rss = rss_kb();
        printf("after %d sequential threads (%.2f s): %d threads (baseline %d, +%d; peak seen %d), "
               "VmRSS %ld kB (+%ld kB)\n",
               CHURN_THREADS, mt_now() - t0, threads, base_threads, threads - base_threads, peak,
               rss, rss - base_rss);
        MT_CHECK(threads <= base_threads + THREAD_SLACK,
                 "after %d sequential threads: %d threads, want <= baseline %d + %d", CHURN_THREADS,
                 threads, base_threads, THREAD_SLACK);
        MT_CHECK(rss - base_rss < RSS_LIMIT_KB,
                 "after %d sequential threads: VmRSS grew by %ld kB, want < %d kB", CHURN_THREADS,
                 rss - base_rss, RSS_LIMIT_KB);
    }

    /* Phase 2: 64 threads at once x 100 reads, two rounds. */
    {
        static struct job jobs[CONC_THREADS];
        pthread_t tids[CONC_THREADS];
        int round, round1_threads = 0;
        for (round = 1; round <= 2; round++) {
            double t0 = mt_now();
            int i, peak;
            for (i = 0; i < CONC_THREADS; i++) {
                jobs[i].id = round * 1000 + i;
                jobs[i].reads = CONC_READS;
                jobs[i].failure[0] = '\0';
                int rc = pthread_create(&tids[i], NULL, reader_main, &jobs[i]);
                MT_CHECK(rc == 0, "pthread_create concurrent #%d: %s", i, strerror(rc));
            }
            peak = thread_count();
            for (i = 0; i < CONC_THREADS; i++)
                MT_CHECK(pthread_join(tids[i], NULL) == 0, "pthread_join concurrent #%d", i);
            for (i = 0; i < CONC_THREADS; i++)
                if (jobs[i].failure[0]) MT_FAIL("%s", jobs[i].failure);
            int threads = thread_count();
            long rss = rss_kb();
            printf("concurrent round %d (%d threads x %d reads, %.2f s): %d threads while running, "
                   "%d after join (baseline %d, +%d), VmRSS %ld kB (+%ld kB)\n",
                   round, CONC_THREADS, CONC_READS, mt_now() - t0, peak, threads, base_threads,
                   threads - base_threads, rss, rss - base_rss);
            MT_CHECK(rss - base_rss < RSS_LIMIT_KB,
                     "after concurrent round %d: VmRSS grew by %ld kB, want < %d kB", round,
                     rss - base_rss, RSS_LIMIT_KB);
            if (round == 1)
                round1_threads = threads;
            else
                MT_CHECK(threads <= round1_threads + THREAD_SLACK,
                         "concurrent round 2 left %d threads, round 1 left %d: threads leak per round",
                         threads, round1_threads);
        }
    }

    {
        memtier_stats_t st = mt_stats(ctx);
        uint64_t want = CHURN_THREADS + 2ULL * CONC_THREADS * CONC_READS;
        MT_EQ_U64(st.requests, want, "stats.requests after all reads");
        MT_EQ_U64(st.bytes, want * READ_SIZE, "stats.bytes after all reads");
        MT_EQ_U64(st.errors, 0, "stats.errors");
    }

    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
