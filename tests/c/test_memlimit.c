/*
 * Description: memtier_memory_limit, the memory limit that bounded the DRAM
 * cache budget at init (field case N06, tests/field_cases.md; issue 11 "say so in config()").
 * The limit is read under MEMTIER_CGROUP_ROOT (a test-only variable that
 * points the lookup at a fake tree instead of "/"), which the library reads
 * when it loads; so the test makes two fake cgroup v2 trees in its temp
 * directory and runs itself once per tree with the variable set:
 *   child cgroup  the process cgroup /job has memory.max 805306368 (768 MiB):
 *                 bytes 805306368, source "cgroup v2 memory.max at
 *                 /sys/fs/cgroup/job", default cache_bytes 192 MiB (25%);
 *                 the source cut to source_len bytes (NUL included), NULL
 *                 outputs skipped, source_len 0 INVALID_ARG (counted in
 *                 stats.errors, source untouched), NULL ctx INVALID_ARG, a
 *                 finalized ctx CLOSED, a forked child FORKED;
 *   child host    memory.max "max" (no limit): the host's RAM from
 *                 sysinfo(2), source "host RAM", default cache_bytes 1 GiB.
 * The parent (the real tree) checks only that the limit it reports is the
 * host's RAM or a cgroup one.
 */
#include "mt_test.h"

#include <spawn.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>

extern char** environ;

#define CG_LIMIT 805306368ull
#define CG_SOURCE "cgroup v2 memory.max at /sys/fs/cgroup/job"

static uint64_t host_ram(void) {
    struct sysinfo si;
    if (sysinfo(&si) != 0) MT_FAIL("sysinfo: %s", strerror(errno));
    return (uint64_t)si.totalram * (uint64_t)si.mem_unit;
}

static memtier_ctx_t* init_default(void) {
    memtier_config_t cfg;
    MT_OK(memtier_config_default(&cfg));
    return mt_init_cfg(&cfg);
}

static void expect_cache_bytes(memtier_ctx_t* ctx, uint64_t want) {
    memtier_config_t got;
    MT_OK(memtier_get_config(ctx, &got, sizeof got));
    MT_EQ_U64(got.cache_bytes, want, "default cache_bytes");
}

static void child_cgroup(void) {
    memtier_ctx_t* ctx = init_default();
    char src[256];
    uint64_t bytes = 0;

    memset(src, 'x', sizeof src);
    MT_OK(memtier_memory_limit(ctx, &bytes, src, sizeof src));
    MT_EQ_U64(bytes, CG_LIMIT, "cgroup limit bytes");
    MT_CHECK(strcmp(src, CG_SOURCE) == 0, "source \"%s\", want \"%s\"", src, CG_SOURCE);
    expect_cache_bytes(ctx, CG_LIMIT / 4);

    /* Truncated to source_len bytes, the NUL included. */
    memset(src, 'x', sizeof src);
    bytes = 0;
    MT_OK(memtier_memory_limit(ctx, &bytes, src, 10));
    MT_CHECK(strcmp(src, "cgroup v2") == 0, "source cut to 10 bytes: \"%s\"", src);
    MT_CHECK(src[10] == 'x', "byte 10 written past source_len");
    MT_EQ_U64(bytes, CG_LIMIT, "bytes with a short source");
    memset(src, 'x', sizeof src);
    MT_OK(memtier_memory_limit(ctx, NULL, src, 1));
    MT_CHECK(src[0] == '\0' && src[1] == 'x', "source_len 1 gives \"\" and nothing more");
    /* Exactly long enough, and one byte short. */
    memset(src, 'x', sizeof src);
    MT_OK(memtier_memory_limit(ctx, NULL, src, sizeof CG_SOURCE));
    MT_CHECK(strcmp(src, CG_SOURCE) == 0, "source in exactly its size: \"%s\"", src);
    memset(src, 'x', sizeof src);
    MT_OK(memtier_memory_limit(ctx, NULL, src, sizeof CG_SOURCE - 1));
    MT_CHECK(strlen(src) == sizeof CG_SOURCE - 2 && strncmp(src, CG_SOURCE, sizeof CG_SOURCE - 2) == 0,
             "source one byte short: \"%s\"", src);

    /* NULL outputs are skipped. */
    bytes = 0;
    MT_OK(memtier_memory_limit(ctx, &bytes, NULL, 0));
    MT_EQ_U64(bytes, CG_LIMIT, "bytes without a source");
    MT_OK(memtier_memory_limit(ctx, NULL, NULL, 123));

    /* Argument errors. */
    uint64_t errors0 = mt_stats(ctx).errors;
    memset(src, 'x', sizeof src);
    bytes = 7;
    MT_STATUS(memtier_memory_limit(ctx, &bytes, src, 0), MEMTIER_ERR_INVALID_ARG);
    MT_CHECK(src[0] == 'x' && bytes == 7, "source_len 0: outputs written");
    MT_CHECK(strcmp(memtier_last_error(), "memtier_memory_limit: source_len is 0 (no room for the NUL)") == 0,
             "last_error \"%s\"", memtier_last_error());
    MT_EQ_U64(mt_stats(ctx).errors, errors0 + 1, "stats.errors counts the argument error");
    MT_STATUS(memtier_memory_limit(NULL, &bytes, src, sizeof src), MEMTIER_ERR_INVALID_ARG);

    /* A forked child answers FORKED without entering Go. */
    pid_t pid = fork();
    MT_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) _exit(memtier_memory_limit(ctx, &bytes, src, sizeof src) == MEMTIER_ERR_FORKED ? 0 : 1);
    int status = 0;
    MT_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "memtier_memory_limit in a forked child: status %d, want MEMTIER_ERR_FORKED", status);

    MT_OK(memtier_finalize(ctx));
    MT_STATUS(memtier_memory_limit(ctx, &bytes, src, sizeof src), MEMTIER_ERR_CLOSED);
}

static void child_host(void) {
    memtier_ctx_t* ctx = init_default();
    char src[64];
    uint64_t bytes = 0;
    MT_OK(memtier_memory_limit(ctx, &bytes, src, sizeof src));
    MT_EQ_U64(bytes, host_ram(), "no cgroup limit: host RAM");
    MT_CHECK(strcmp(src, "host RAM") == 0, "source \"%s\", want \"host RAM\"", src);
    expect_cache_bytes(ctx, 1024 * MiB);
    MT_OK(memtier_finalize(ctx));
}

/* The fake tree's files and directories under the temp directory, children
 * before parents (removed in this order). */
static const char* const tree_files[] = {"proc/self/cgroup", "sys/fs/cgroup/cgroup.controllers",
                                         "sys/fs/cgroup/job/memory.max"};
static const char* const tree_dirs[] = {"sys/fs/cgroup/job", "sys/fs/cgroup", "sys/fs", "sys",
                                        "proc/self", "proc"};

static void tree_path(char* buf, size_t n, const char* tree, const char* rel) {
    snprintf(buf, n, "%s/%s/%s", mt_tmpdir(), tree, rel);
}

static void write_text(const char* path, const char* text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) MT_FAIL("create %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n || close(fd) != 0) MT_FAIL("write %s: %s", path, strerror(errno));
}

static void make_tree(const char* tree, const char* memory_max) {
    char p[1024];
    int i;
    tree_path(p, sizeof p, tree, "");
    if (mkdir(p, 0755) != 0) MT_FAIL("mkdir %s: %s", p, strerror(errno));
    for (i = (int)(sizeof tree_dirs / sizeof *tree_dirs) - 1; i >= 0; i--) {
        tree_path(p, sizeof p, tree, tree_dirs[i]);
        if (mkdir(p, 0755) != 0) MT_FAIL("mkdir %s: %s", p, strerror(errno));
    }
    const char* text[] = {"0::/job\n", "memory\n", memory_max};
    for (i = 0; i < 3; i++) {
        tree_path(p, sizeof p, tree, tree_files[i]);
        write_text(p, text[i]);
    }
}

static void remove_tree(const char* tree) {
    char p[1024];
    size_t i;
    for (i = 0; i < sizeof tree_files / sizeof *tree_files; i++) {
        tree_path(p, sizeof p, tree, tree_files[i]);
        unlink(p);
    }
    for (i = 0; i < sizeof tree_dirs / sizeof *tree_dirs; i++) {
        tree_path(p, sizeof p, tree, tree_dirs[i]);
        rmdir(p);
    }
    tree_path(p, sizeof p, tree, "");
    rmdir(p);
}

/* Runs this program as "argv0 mode" with MEMTIER_CGROUP_ROOT=tree and the rest
 * of the environment as is; fails unless it exits 0. */
static void run_child(const char* argv0, const char* mode, const char* tree) {
    char root[1024], var[1100];
    tree_path(root, sizeof root, tree, "");
    root[strlen(root) - 1] = '\0'; /* no trailing slash */
    snprintf(var, sizeof var, "MEMTIER_CGROUP_ROOT=%s", root);
    size_t n = 0, i, k = 0;
    while (environ[n]) n++;
    char** env = calloc(n + 2, sizeof *env);
    MT_CHECK(env != NULL, "out of memory");
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "MEMTIER_CGROUP_ROOT=", 20) != 0) env[k++] = environ[i];
    env[k++] = var;
    char* args[] = {(char*)argv0, (char*)mode, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, env);
    free(env);
    MT_CHECK(rc == 0, "posix_spawn: %s", strerror(rc));
    int status = 0;
    MT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    MT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %s: exit status %d", mode,
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "cgroup") == 0) {
        mt_begin("test_memlimit (cgroup child)");
        child_cgroup();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "host") == 0) {
        mt_begin("test_memlimit (host child)");
        child_host();
        return 0;
    }
    mt_begin("test_memlimit");

    /* The real tree: host RAM or a cgroup limit of this machine. */
    memtier_ctx_t* ctx = init_default();
    char src[4096 + 64];
    uint64_t bytes = 0;
    MT_OK(memtier_memory_limit(ctx, &bytes, src, sizeof src));
    if (strcmp(src, "host RAM") == 0)
        MT_EQ_U64(bytes, host_ram(), "host RAM");
    else
        MT_CHECK(strncmp(src, "cgroup v", 8) == 0 && bytes > 0 && bytes <= host_ram(),
                 "limit %llu from \"%s\"", (unsigned long long)bytes, src);
    MT_OK(memtier_finalize(ctx));

    make_tree("cg", "805306368\n");
    make_tree("host", "max\n");
    run_child(argv[0], "cgroup", "cg");
    run_child(argv[0], "host", "host");
    remove_tree("cg");
    remove_tree("host");
    mt_pass();
    return 0;
}
