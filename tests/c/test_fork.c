/*
 * Description: the Go runtime does not survive fork(), so in a forked child
 * every MemTier call fails fast with MEMTIER_ERR_FORKED instead of hanging:
 * (1) a parent that only loaded the library (never called memtier_init) forks
 * and the child's memtier_init gives FORKED; (2) a parent that read through a
 * context forks and the child's memtier_read, memtier_stats, memtier_init and
 * memtier_finalize each give FORKED within 1 s, while memtier_strerror (pure C)
 * still works, and memtier_pread_batch (pure C, no Go runtime) reads exact
 * bytes of a descriptor opened before the fork. The parent keeps working
 * after both forks.
 */
#include "mt_test.h"

#include <signal.h>
#include <sys/wait.h>

static void child_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_fork: child hung in a MemTier call (alarm)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(3);
}

/* In the child: report every failed check, then _exit(2) at the end (no
 * atexit handlers, no Go). */
static int child_failures;

#define CHILD_CHECK(cond, ...)                                                \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "FAIL test_fork (child, line %d): ", __LINE__);   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            child_failures++;                                                 \
        }                                                                     \
    } while (0)

#define CHILD_FORKED(call)                                                              \
    do {                                                                                \
        double t0_ = mt_now();                                                          \
        int st_ = (call);                                                               \
        double dt_ = mt_now() - t0_;                                                    \
        CHILD_CHECK(st_ == MEMTIER_ERR_FORKED, "%s = %d (%s), want %d (FORKED)", #call, st_, \
                    memtier_strerror(st_), MEMTIER_ERR_FORKED);                         \
        CHILD_CHECK(dt_ < 1.0, "%s took %.3f s, want < 1 s", #call, dt_);              \
    } while (0)

/* Runs body in a child with a 2 s alarm; returns 1 if it exited 0. */
static int run_child(const char* what, void (*body)(void* arg), void* arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    MT_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGALRM, child_alarm);
        alarm(2);
        body(arg);
        fflush(stdout);
        fflush(stderr);
        _exit(child_failures ? 2 : 0);
    }
    int status = 0;
    MT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "FAIL test_fork: %s: child killed by signal %d\n", what, WTERMSIG(status));
        return 0;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL test_fork: %s: child exited with %d (2 = wrong result, 3 = hang)\n",
                what, WEXITSTATUS(status));
        return 0;
    }
    printf("%s: child got MEMTIER_ERR_FORKED fast\n", what);
    return 1;
}

static void child_load_only(void* arg) {
    (void)arg;
    memtier_ctx_t* c = (memtier_ctx_t*)&c;
    CHILD_FORKED(memtier_init(NULL, &c));
    CHILD_CHECK(c == NULL, "failed memtier_init left *ctx_out non-NULL");
    memtier_config_t cfg;
    CHILD_FORKED(memtier_config_default(&cfg));
}

struct used {
    memtier_ctx_t* ctx;
    const char* path;
    int fd;
};

static void child_after_use(void* arg) {
    struct used* u = arg;
    uint8_t buf[64];
    memtier_stats_t st;
    memtier_ctx_t* c = NULL;
    CHILD_FORKED(memtier_read(u->ctx, u->path, 0, sizeof buf, buf, MEMTIER_TARGET_CPU));
    CHILD_FORKED(memtier_stats(u->ctx, &st));
    CHILD_FORKED(memtier_init(NULL, &c));
    CHILD_FORKED(memtier_finalize(u->ctx));
    memtier_request_t* req = (memtier_request_t*)&req;
    CHILD_FORKED(memtier_prefetch_async(u->ctx, u->path, 0, 4096, NULL, &req));
    CHILD_CHECK(req == NULL, "failed memtier_prefetch_async left *req_out non-NULL");
    const char* s = memtier_strerror(MEMTIER_ERR_FORKED);
    CHILD_CHECK(s != NULL && s[0] != '\0' && strcmp(s, "unknown status") != 0,
                "memtier_strerror(FORKED) in the child = \"%s\"", s ? s : "(null)");
    /* memtier_pread_batch works in the child: two file-adjacent ranges (one
     * preadv), one apart, and one past the end of the 1 MiB file. */
    static uint8_t dst[3 * 4096 + 16];
    int32_t fds[4] = {u->fd, u->fd, u->fd, u->fd};
    uint64_t offs[4] = {8192, 12288, 500000, MiB - 8};
    uint64_t sizes[4] = {4096, 4096, 4096, 16};
    void* dsts[4] = {dst, dst + 4096, dst + 8192, dst + 12288};
    int64_t res[4] = {0, 0, 0, 0};
    int st_b = memtier_pread_batch(fds, offs, sizes, dsts, 4, res);
    CHILD_CHECK(st_b == MEMTIER_ERR_EOF, "memtier_pread_batch = %d, want %d (EOF)", st_b, MEMTIER_ERR_EOF);
    CHILD_CHECK(res[0] == 4096 && res[1] == 4096 && res[2] == 4096 && res[3] == MEMTIER_ERR_EOF,
                "memtier_pread_batch results %lld %lld %lld %lld", (long long)res[0], (long long)res[1],
                (long long)res[2], (long long)res[3]);
    CHILD_CHECK(mt_find_p_mismatch(dst, 8192, 8192) < 0 && mt_find_p_mismatch(dst + 8192, 500000, 4096) < 0,
                "memtier_pread_batch bytes differ from the file");
    char want[200];
    snprintf(want, sizeof want,
             "memtier_pread_batch: element 3 (fd %d, offset %llu, 16 bytes): the file ends after 8 of them",
             u->fd, (unsigned long long)(MiB - 8));
    CHILD_CHECK(strcmp(memtier_last_error(), want) == 0, "memtier_last_error() = \"%s\", want \"%s\"",
                memtier_last_error(), want);
    /* These return strings, not statuses; they must simply return. */
    CHILD_CHECK(memtier_last_error() != NULL, "memtier_last_error() NULL in the child");
    CHILD_CHECK(memtier_version() != NULL, "memtier_version() NULL in the child");
}

int main(void) {
    mt_begin("test_fork");
    const char* path = mt_make_pfile("p1m.bin", 1 * MiB);

    /* (1) Loaded (linked) but never initialised; the Go runtime started at load. */
    int ok = run_child("load-only parent", child_load_only, NULL);

    /* (2) Parent used a context before fork. */
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    uint8_t buf[4096];
    MT_OK(memtier_read(ctx, path, 0, sizeof buf, buf, MEMTIER_TARGET_CPU));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    MT_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
    struct used u = {ctx, path, fd};
    ok &= run_child("parent after init + read", child_after_use, &u);

    /* The parent is unaffected. */
    MT_OK(memtier_read(ctx, path, 4096, sizeof buf, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 4096, sizeof buf) < 0, "parent read after fork: bytes");
    MT_OK(memtier_finalize(ctx));
    close(fd);
    MT_CHECK(ok, "a forked child did not behave as memtier.h documents (see above)");
    mt_pass();
    return 0;
}
