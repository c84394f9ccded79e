/*
 * Description: MEMTIER_ERR_PERMISSION is reached on purpose: a file with mode
 * 000, and a readable file inside a directory with mode 000, both give
 * PERMISSION from memtier_read, with memtier_last_error naming the path and
 * "permission denied"; a readable P-file still reads correctly; stats.errors is
 * exactly 2. Root reads anything, so ctest runs this under
 * `setpriv --reuid=65534 --regid=65534 --clear-groups` when it is root; if the
 * process can still open a mode-000 file (root without setpriv, or
 * CAP_DAC_OVERRIDE), the test skips (77).
 */
#include "mt_test.h"

#include <strings.h>

static char locked_dir[1024];  /* the mode-000 directory          */
static char inner_file[1100];  /* a readable file inside it       */

/* Runs before mt_cleanup (registered after it): restore modes so it can unlink. */
static void restore_modes(void) {
    if (getpid() != mt_owner_pid) return;
    if (locked_dir[0] != '\0') {
        chmod(locked_dir, 0755);
        unlink(inner_file);
        rmdir(locked_dir);
    }
}

static void expect_detail(const char* what, const char* needle) {
    const char* e = memtier_last_error();
    MT_CHECK(e != NULL, "%s: memtier_last_error() is NULL", what);
    MT_CHECK(strcasestr(e, needle) != NULL, "%s: last_error \"%s\" does not contain \"%s\"",
             what, e, needle);
}

int main(void) {
    mt_begin("test_permission");
    printf("running as uid %d euid %d gid %d egid %d\n", (int)getuid(), (int)geteuid(),
           (int)getgid(), (int)getegid());

    const char* dir = mt_tmpdir(); /* registers mt_cleanup */
    atexit(restore_modes);         /* runs first: atexit handlers run in reverse */

    const char* pfile = mt_make_pfile("p4k.bin", 4096);
    const char* locked = mt_make_pfile("locked.bin", 4096);
    MT_CHECK(chmod(locked, 0) == 0, "chmod 000 %s: %s", locked, strerror(errno));

    snprintf(locked_dir, sizeof locked_dir, "%s/locked_dir", dir);
    snprintf(inner_file, sizeof inner_file, "%s/inner.bin", locked_dir);
    MT_CHECK(mkdir(locked_dir, 0755) == 0, "mkdir %s: %s", locked_dir, strerror(errno));
    mt_write_file_gen(inner_file, 4096, NULL);
    MT_CHECK(chmod(inner_file, 0644) == 0, "chmod 644 %s: %s", inner_file, strerror(errno));
    MT_CHECK(chmod(locked_dir, 0) == 0, "chmod 000 %s: %s", locked_dir, strerror(errno));

    /* Can this process still open them (root, CAP_DAC_OVERRIDE)? Then skip. */
    {
        int fd = open(locked, O_RDONLY);
        if (fd >= 0) {
            close(fd);
            mt_skip(geteuid() == 0
                        ? "running as root (not dropped to another uid by setpriv): mode 000 does not stop root"
                        : "this process can open a mode-000 file (CAP_DAC_OVERRIDE?)");
        }
        MT_CHECK(errno == EACCES, "open(mode-000 file) failed with %s, want EACCES",
                 strerror(errno));
        fd = open(inner_file, O_RDONLY);
        if (fd >= 0) {
            close(fd);
            mt_skip("this process can open a file inside a mode-000 directory");
        }
        MT_CHECK(errno == EACCES, "open(file in mode-000 dir) failed with %s, want EACCES",
                 strerror(errno));
    }

    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    uint8_t buf[4096];

    /* A readable file reads correctly as this user. */
    MT_OK(memtier_read(ctx, pfile, 0, sizeof buf, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 0, sizeof buf) < 0, "P-file bytes differ at %lld",
             (long long)mt_find_p_mismatch(buf, 0, sizeof buf));

    /* A mode-000 file. */
    MT_STATUS(memtier_read(ctx, locked, 0, 4, buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_PERMISSION);
    printf("mode-000 file: last_error \"%s\"\n", memtier_last_error());
    expect_detail("mode-000 file", locked);
    expect_detail("mode-000 file", "permission denied");

    /* A readable file inside a mode-000 directory. */
    MT_STATUS(memtier_read(ctx, inner_file, 0, 4, buf, MEMTIER_TARGET_CPU),
              MEMTIER_ERR_PERMISSION);
    printf("file in mode-000 dir: last_error \"%s\"\n", memtier_last_error());
    expect_detail("file in mode-000 dir", inner_file);
    expect_detail("file in mode-000 dir", "permission denied");

    {
        memtier_stats_t st = mt_stats(ctx);
        printf("stats.errors = %llu, requests = %llu\n", (unsigned long long)st.errors,
               (unsigned long long)st.requests);
        MT_EQ_U64(st.errors, 2, "stats.errors after two PERMISSION failures");
    }

    /* The readable file still reads after the failures. */
    memset(buf, 0, sizeof buf);
    MT_OK(memtier_read(ctx, pfile, 0, sizeof buf, buf, MEMTIER_TARGET_CPU));
    MT_CHECK(mt_find_p_mismatch(buf, 0, sizeof buf) < 0, "P-file bytes differ after failures");

    MT_OK(memtier_finalize(ctx));
    mt_pass();
    return 0;
}
