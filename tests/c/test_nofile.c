/*
 * test_nofile: loading libmemtier.so leaves the process's soft RLIMIT_NOFILE
 * as the host set it, for the process and for every child it forks and
 * execs (field case N04, tests/field_cases.md; Go's syscall init raises it to hard - 1 and
 * capi/nofile.go puts it back).
 *
 * The library is linked, so it loads before main runs: the test sets the soft
 * limit to 1024 and execs itself ("child"), which loads the library under that
 * limit. The child then checks the limit itself, in a forked child, and in
 * `sh -c 'ulimit -Sn'` started with popen (fork + exec by the host, which Go's
 * own restore for os/exec never covers), after 300 reads of 60 files.
 * Skips (77) when the hard limit is 1025 or less: Go then leaves the limit as is.
 */
#include "mt_test.h"

#include <sys/resource.h>
#include <sys/wait.h>

#define WANT_SOFT 1024

static unsigned long long soft_now(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) MT_FAIL("getrlimit: %s", strerror(errno));
    return (unsigned long long)rl.rlim_cur;
}

static void run_child(void) {
    /* Go's init runs on its own thread while the host goes on, and every
     * exported call waits for it: only after the first call is the limit
     * settled (before it, it may be Go's for a moment). */
    memtier_ctx_t* ctx = NULL;
    MT_OK(memtier_init(NULL, &ctx));
    MT_EQ_U64(soft_now(), WANT_SOFT, "soft limit after memtier_init");
    uint8_t buf[16];
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%03d", i % 60);
        const char* p = mt_path(name);
        if (i < 60) mt_write_file_gen(p, 4096, NULL);
        MT_OK(memtier_read(ctx, p, 100, sizeof buf, buf, MEMTIER_TARGET_CPU));
        MT_CHECK(mt_find_p_mismatch(buf, 100, sizeof buf) < 0, "file %s bytes", p);
    }
    MT_EQ_U64(soft_now(), WANT_SOFT, "soft limit after memtier_init and reads");

    /* A forked child (no exec) inherits the same limit. */
    int pfd[2];
    MT_CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    MT_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        unsigned long long v = soft_now();
        ssize_t w = write(pfd[1], &v, sizeof v);
        _exit(w == (ssize_t)sizeof v ? 0 : 1);
    }
    close(pfd[1]);
    unsigned long long forked = 0;
    MT_CHECK(read(pfd[0], &forked, sizeof forked) == (ssize_t)sizeof forked, "read from the forked child");
    close(pfd[0]);
    int status = 0;
    MT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "forked child status %d", status);
    MT_EQ_U64(forked, WANT_SOFT, "soft limit in a forked child");

    /* A child the host forks and execs. */
    FILE* sh = popen("ulimit -Sn", "r");
    MT_CHECK(sh != NULL, "popen: %s", strerror(errno));
    char line[64] = {0};
    MT_CHECK(fgets(line, sizeof line, sh) != NULL, "no output from sh -c 'ulimit -Sn'");
    MT_CHECK(pclose(sh) == 0, "sh -c 'ulimit -Sn' failed");
    MT_EQ_U64(strtoull(line, NULL, 10), WANT_SOFT, "soft limit in sh -c 'ulimit -Sn'");

    MT_OK(memtier_finalize(ctx));
    mt_pass();
}

int main(int argc, char** argv) {
    mt_begin("test_nofile");
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        run_child();
        return 0;
    }
    struct rlimit rl;
    MT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit: %s", strerror(errno));
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= WANT_SOFT + 1)
        mt_skip("hard RLIMIT_NOFILE is 1025 or less: Go leaves the soft limit alone");
    rl.rlim_cur = WANT_SOFT;
    MT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
    char* args[] = {argv[0], "child", NULL};
    execv("/proc/self/exe", args);
    MT_FAIL("exec /proc/self/exe: %s", strerror(errno));
}
