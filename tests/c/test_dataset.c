/*
 * Description: memtier_dataset_* on datasets made here. (1) A packed dataset:
 * a 10,000-byte P-file with a text index (comments, a length-0 record) and
 * with an .npy int64 (n, 2) index: count, sample ranges, "" names, read and
 * read_batch bytes, an index out of range (INVALID_ARG for sample and read,
 * that entry alone in a batch), dst_size too small; a malformed index and a
 * record past the data file's end give MEMTIER_ERR_FORMAT. (2) A ustar shard
 * written by hand (a directory entry, a name split into prefix + name, an
 * empty member) and, when the system tar exists, GNU (a 150-byte name: a
 * long-name record) and pax (a long and a non-ASCII name) shards: member
 * names, sizes, data offsets (checked by reading the tar file there), bytes of
 * read and read_batch, reopening, a malformed tar (FORMAT). (3) Handles:
 * close(NULL), close twice, after finalize; a read after the data file changed
 * is MEMTIER_ERR_IO.
 */
#include "mt_test.h"

#define DATA_SIZE 10000

static void write_text(const char* path, const char* text) {
    FILE* f = fopen(path, "wb");
    MT_CHECK(f != NULL, "create %s", path);
    fputs(text, f);
    MT_CHECK(fclose(f) == 0, "close");
}

static memtier_dataset_t* open_packed(memtier_ctx_t* ctx, const char* data, const char* index) {
    memtier_dataset_t* ds = NULL;
    MT_OK(memtier_dataset_open(ctx, data, index, &ds));
    MT_CHECK(ds != NULL, "open returned OK with NULL");
    return ds;
}

/* Checks ds's samples against the expected (offset, size) pairs of the P-file. */
static void check_packed(memtier_dataset_t* ds, const uint64_t (*want)[2], size_t n) {
    uint64_t count = 0, off, size, i;
    const char* name = NULL;
    uint8_t buf[256];
    MT_OK(memtier_dataset_count(ds, &count));
    MT_EQ_U64(count, n, "sample count");
    for (i = 0; i < n; i++) {
        MT_OK(memtier_dataset_sample(ds, i, &off, &size, &name));
        MT_EQ_U64(off, want[i][0], "sample offset");
        MT_EQ_U64(size, want[i][1], "sample size");
        MT_CHECK(name != NULL && name[0] == '\0', "packed sample name not \"\"");
        memset(buf, 0xAA, sizeof buf);
        MT_OK(memtier_dataset_read(ds, i, size ? buf : NULL, size, MEMTIER_TARGET_CPU));
        MT_CHECK(mt_find_p_mismatch(buf, off, size) < 0, "sample %llu bytes differ", (unsigned long long)i);
        MT_CHECK(mt_find_not(buf + size, 0xAA, sizeof buf - size) < 0, "sample %llu wrote past", (unsigned long long)i);
        if (size > 0) {
            memset(buf, 0xAA, sizeof buf);
            MT_STATUS(memtier_dataset_read(ds, i, buf, size - 1, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
            MT_CHECK(mt_find_not(buf, 0xAA, sizeof buf) < 0, "short dst written");
        }
    }
    MT_OK(memtier_dataset_sample(ds, 0, NULL, NULL, NULL));
    MT_STATUS(memtier_dataset_sample(ds, n, &off, &size, &name), MEMTIER_ERR_INVALID_ARG);
    MT_STATUS(memtier_dataset_read(ds, n, buf, sizeof buf, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
}

static void test_packed(memtier_ctx_t* ctx) {
    static const uint64_t want[4][2] = {{0, 10}, {10, 20}, {500, 0}, {9900, 100}};
    const char* data = mt_make_pfile("data.bin", DATA_SIZE);
    const char* index = mt_path("data.idx");
    memtier_dataset_t* ds;
    write_text(index, "# offset length\n0 10\n10 20\n\n  500 0\n9900\t100\r\n");
    ds = open_packed(ctx, data, index);
    check_packed(ds, want, 4);
    {
        /* A batch: out of order, a repeat, one index out of range. */
        uint64_t idx[5] = {3, 0, 1, 7, 0};
        uint8_t b[5][128];
        void* dsts[5];
        int64_t res[5];
        size_t k;
        memset(b, 0xAA, sizeof b);
        for (k = 0; k < 5; k++) dsts[k] = b[k];
        MT_STATUS(memtier_dataset_read_batch(ds, idx, 5, dsts, res, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
        MT_CHECK(res[3] == MEMTIER_ERR_INVALID_ARG, "out-of-range entry result %lld", (long long)res[3]);
        for (k = 0; k < 5; k++) {
            if (k == 3) continue;
            MT_EQ_U64(res[k], want[idx[k]][1], "batch result");
            MT_CHECK(mt_find_p_mismatch(b[k], want[idx[k]][0], want[idx[k]][1]) < 0, "batch entry %zu bytes", k);
        }
        idx[3] = 2;
        MT_OK(memtier_dataset_read_batch(ds, idx, 5, dsts, res, MEMTIER_TARGET_CPU));
        MT_OK(memtier_dataset_read_batch(ds, NULL, 0, NULL, NULL, MEMTIER_TARGET_CPU));
        MT_STATUS(memtier_dataset_read_batch(ds, idx, 5, dsts, NULL, MEMTIER_TARGET_CPU), MEMTIER_ERR_INVALID_ARG);
    }
    /* The data file rewritten after open: reads fail, never another version's bytes. */
    {
        uint8_t b[16];
        usleep(50 * 1000); /* file timestamps can be a clock tick coarse */
        mt_make_pfile("data.bin", DATA_SIZE);
        MT_STATUS(memtier_dataset_read(ds, 0, b, sizeof b, MEMTIER_TARGET_CPU), MEMTIER_ERR_IO);
        MT_CHECK(strstr(memtier_last_error(), "changed since open") != NULL, "message: %s", memtier_last_error());
    }
    MT_OK(memtier_dataset_close(ds));

    /* The same samples as an .npy int64 (4, 2) index. */
    {
        const char* npy = mt_path("data.npy");
        char hdr[118];
        uint8_t rows[64];
        int i, j;
        FILE* f;
        int n = snprintf(hdr, sizeof hdr, "{'descr': '<i8', 'fortran_order': False, 'shape': (4, 2), }");
        memset(hdr + n, ' ', sizeof hdr - (size_t)n);
        hdr[sizeof hdr - 1] = '\n'; /* 10 + 118 = 128 bytes before the data */
        for (i = 0; i < 4; i++)
            for (j = 0; j < 2; j++) {
                int b;
                for (b = 0; b < 8; b++) rows[(i * 2 + j) * 8 + b] = (uint8_t)(want[i][j] >> (8 * b));
            }
        f = fopen(npy, "wb");
        fwrite("\x93NUMPY\x01\x00", 1, 8, f);
        fputc((int)(sizeof hdr & 0xFF), f);
        fputc((int)(sizeof hdr >> 8), f);
        fwrite(hdr, 1, sizeof hdr, f);
        fwrite(rows, 1, sizeof rows, f);
        fclose(f);
        ds = open_packed(ctx, data, npy);
        check_packed(ds, want, 4);
        MT_OK(memtier_dataset_close(ds));
    }

    /* Malformed indexes and a record past the data file's end. */
    {
        static const char* bad[] = {"0 10\n10 abc\n", "0 10 20\n", "-1 5\n", "9990 20\n", "0x10 4\n"};
        size_t k;
        for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            memtier_dataset_t* d = (memtier_dataset_t*)1;
            write_text(index, bad[k]);
            MT_STATUS(memtier_dataset_open(ctx, data, index, &d), MEMTIER_ERR_FORMAT);
            MT_CHECK(d == NULL, "ds_out not NULL after FORMAT");
            MT_CHECK(strlen(memtier_last_error()) > 0, "no message");
            printf("  bad index %zu: %s\n", k, memtier_last_error());
        }
        MT_STATUS(memtier_dataset_open(ctx, data, mt_path("none.idx"), &ds), MEMTIER_ERR_NOT_FOUND);
        MT_STATUS(memtier_dataset_open(ctx, mt_path("none.bin"), index, &ds), MEMTIER_ERR_NOT_FOUND);
        MT_STATUS(memtier_dataset_open(ctx, NULL, index, &ds), MEMTIER_ERR_INVALID_ARG);
        MT_STATUS(memtier_dataset_open(ctx, data, index, NULL), MEMTIER_ERR_INVALID_ARG);
    }
}

/* ------------------------------------------------------------ tar shards */

struct member {
    char name[400];
    uint64_t size;
    uint64_t offset; /* filled for hand-written shards; 0 = unknown */
    uint8_t seed;
};

static uint8_t content(const struct member* m, uint64_t i) { return (uint8_t)(i * 31 + m->seed); }

static void octal(char* field, size_t len, uint64_t v) { snprintf(field, len, "%0*llo", (int)len - 1, (unsigned long long)v); }

/* One ustar header block: name split at prefix_len when > 0. */
static void ustar_header(uint8_t* h, const char* name, size_t prefix_len, uint64_t size, char type) {
    unsigned sum = 0;
    size_t i;
    memset(h, 0, 512);
    if (prefix_len) {
        memcpy(h + 345, name, prefix_len);
        name += prefix_len + 1;
    }
    memcpy(h, name, strlen(name));
    octal((char*)h + 100, 8, 0644);
    octal((char*)h + 108, 8, 0);
    octal((char*)h + 116, 8, 0);
    octal((char*)h + 124, 12, size);
    octal((char*)h + 136, 12, 1700000000);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    for (i = 0; i < 512; i++) sum += h[i];
    snprintf((char*)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static void write_member_data(FILE* f, const struct member* m) {
    uint64_t i;
    for (i = 0; i < m->size; i++) fputc(content(m, i), f);
    for (i = m->size; i % 512 != 0; i++) fputc(0, f);
}

/* A ustar shard by hand; members get their offsets. */
static void write_ustar(const char* path, struct member* m, size_t n) {
    uint8_t h[512];
    size_t k;
    FILE* f = fopen(path, "wb");
    MT_CHECK(f != NULL, "create %s", path);
    ustar_header(h, "dir/", 0, 0, '5'); /* a directory: not a sample */
    fwrite(h, 1, 512, f);
    for (k = 0; k < n; k++) {
        const char* slash = strlen(m[k].name) > 100 ? strchr(m[k].name, '/') : NULL;
        ustar_header(h, m[k].name, slash ? (size_t)(slash - m[k].name) : 0, m[k].size, '0');
        fwrite(h, 1, 512, f);
        m[k].offset = (uint64_t)ftell(f);
        write_member_data(f, &m[k]);
    }
    memset(h, 0, 512);
    fwrite(h, 1, 512, f);
    fwrite(h, 1, 512, f);
    MT_CHECK(fclose(f) == 0, "close");
}

/* Checks a shard's members (in order) by name, size, offset and bytes. */
static void check_shard(memtier_ctx_t* ctx, const char* path, const struct member* m, size_t n) {
    memtier_dataset_t* ds = NULL;
    uint64_t count = 0, off, size, k;
    const char* name;
    uint8_t buf[4096], raw[4096];
    int fd = open(path, O_RDONLY);
    MT_CHECK(fd >= 0, "open %s", path);
    MT_OK(memtier_dataset_open_tar(ctx, path, &ds));
    MT_OK(memtier_dataset_count(ds, &count));
    MT_EQ_U64(count, n, "member count");
    for (k = 0; k < n; k++) {
        uint64_t i;
        MT_OK(memtier_dataset_sample(ds, k, &off, &size, &name));
        MT_CHECK(strcmp(name, m[k].name) == 0, "member %llu: name \"%s\", want \"%s\"", (unsigned long long)k, name,
                 m[k].name);
        MT_EQ_U64(size, m[k].size, "member size");
        MT_CHECK((off & 511) == 0, "member data offset %llu not block-aligned", (unsigned long long)off);
        if (m[k].offset) MT_EQ_U64(off, m[k].offset, "member offset");
        MT_CHECK(size <= sizeof buf, "test member too large");
        memset(buf, 0xAA, sizeof buf);
        MT_OK(memtier_dataset_read(ds, k, size ? buf : NULL, size, MEMTIER_TARGET_CPU));
        for (i = 0; i < size; i++)
            MT_CHECK(buf[i] == content(&m[k], i), "member %llu byte %llu", (unsigned long long)k, (unsigned long long)i);
        MT_CHECK(pread(fd, raw, size, (off_t)off) == (ssize_t)size && memcmp(raw, buf, size) == 0,
                 "member %llu: the tar file does not hold its bytes at the reported offset", (unsigned long long)k);
    }
    {
        /* Every member in one batch, last first. */
        uint64_t idx[8];
        void* dsts[8];
        int64_t res[8];
        static uint8_t b[8][4096];
        MT_CHECK(n <= 8, "too many members for the batch");
        for (k = 0; k < n; k++) {
            idx[k] = n - 1 - k;
            dsts[k] = b[k];
        }
        MT_OK(memtier_dataset_read_batch(ds, idx, n, dsts, res, MEMTIER_TARGET_CPU));
        for (k = 0; k < n; k++) {
            MT_EQ_U64(res[k], m[idx[k]].size, "batch result");
            MT_CHECK(m[idx[k]].size == 0 || b[k][m[idx[k]].size - 1] == content(&m[idx[k]], m[idx[k]].size - 1),
                     "batch entry %llu bytes", (unsigned long long)k);
        }
    }
    MT_OK(memtier_dataset_close(ds));
    /* Reopening the same version uses the context's member list. */
    MT_OK(memtier_dataset_open_tar(ctx, path, &ds));
    MT_OK(memtier_dataset_count(ds, &count));
    MT_EQ_U64(count, n, "member count after reopening");
    MT_OK(memtier_dataset_close(ds));
    close(fd);
}

static void test_ustar(memtier_ctx_t* ctx) {
    struct member m[3];
    memset(m, 0, sizeof m);
    strcpy(m[0].name, "a.txt");
    m[0].size = 5, m[0].seed = 1;
    memset(m[1].name, 'p', 60);
    m[1].name[60] = '/';
    memset(m[1].name + 61, 'q', 60); /* 121 bytes: ustar prefix + name */
    m[1].size = 1000, m[1].seed = 2;
    strcpy(m[2].name, "dir/empty");
    m[2].size = 0, m[2].seed = 3;
    const char* path = mt_path("ustar.tar");
    write_ustar(path, m, 3);
    check_shard(ctx, path, m, 3);

    /* Malformed: a header whose checksum is wrong. */
    {
        FILE* f = fopen(path, "r+b");
        fseek(f, 512 + 10, SEEK_SET);
        fputc('X', f);
        fclose(f);
        memtier_dataset_t* ds = (memtier_dataset_t*)1;
        MT_STATUS(memtier_dataset_open_tar(ctx, path, &ds), MEMTIER_ERR_FORMAT);
        MT_CHECK(ds == NULL && strlen(memtier_last_error()) > 0, "FORMAT without a message");
        printf("  bad tar: %s\n", memtier_last_error());
    }
}

/* Writes each member as a file in the temp directory and runs tar. */
static int system_tar(const char* format, const char* out, struct member* m, size_t n) {
    char cmd[4096];
    size_t k, len;
    len = (size_t)snprintf(cmd, sizeof cmd, "tar --format=%s -cf '%s' -C '%s'", format, out, mt_tmpdir());
    for (k = 0; k < n; k++) {
        const char* p = mt_path(m[k].name);
        FILE* f = fopen(p, "wb");
        uint64_t i;
        MT_CHECK(f != NULL, "create %s", p);
        for (i = 0; i < m[k].size; i++) fputc(content(&m[k], i), f);
        fclose(f);
        len += (size_t)snprintf(cmd + len, sizeof cmd - len, " '%s'", m[k].name);
    }
    return system(cmd);
}

static void test_system_tar(memtier_ctx_t* ctx) {
    struct member m[3];
    if (system("tar --version >/dev/null 2>&1") != 0) {
        printf("  no system tar: GNU and pax shards not tested\n");
        return;
    }
    memset(m, 0, sizeof m);
    strcpy(m[0].name, "short.txt");
    m[0].size = 700, m[0].seed = 4;
    memset(m[1].name, 'L', 150); /* a long name: GNU 'L' record or pax path */
    strcpy(m[1].name + 150, ".bin");
    m[1].size = 3000, m[1].seed = 5;
    strcpy(m[2].name, "\xc3\xbc-\xe5\x90\x8d.txt"); /* non-ASCII: a pax path record */
    m[2].size = 1, m[2].seed = 6;
    MT_CHECK(system_tar("gnu", mt_path("gnu.tar"), m, 2) == 0, "tar --format=gnu failed");
    check_shard(ctx, mt_path("gnu.tar"), m, 2);
    MT_CHECK(system_tar("pax", mt_path("pax.tar"), m, 3) == 0, "tar --format=pax failed");
    check_shard(ctx, mt_path("pax.tar"), m, 3);
}

static void test_handles(void) {
    const char* data = mt_make_pfile("h.bin", 100);
    const char* index = mt_path("h.idx");
    uint64_t count;
    memtier_dataset_t* ds;
    write_text(index, "0 100\n");
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    MT_OK(memtier_dataset_close(NULL));
    ds = open_packed(ctx, data, index);
    MT_OK(memtier_dataset_close(ds));
    MT_STATUS(memtier_dataset_close(ds), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_dataset_count(ds, &count), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_dataset_count(NULL, &count), MEMTIER_ERR_INVALID_ARG);
    ds = open_packed(ctx, data, index);
    MT_STATUS(memtier_dataset_count(ds, NULL), MEMTIER_ERR_INVALID_ARG);
    /* A safetensors call on a dataset handle is refused, not confused. */
    MT_STATUS(memtier_safetensors_close((memtier_safetensors_t*)ds), MEMTIER_ERR_INVALID_ARG);
    MT_OK(memtier_finalize(ctx));
    MT_STATUS(memtier_dataset_count(ds, &count), MEMTIER_ERR_CLOSED);
    MT_STATUS(memtier_dataset_close(ds), MEMTIER_ERR_CLOSED);
}

int main(void) {
    mt_begin("test_dataset");
    memtier_ctx_t* ctx = mt_init_cfg(NULL);
    test_packed(ctx);
    test_ustar(ctx);
    test_system_tar(ctx);
    MT_OK(memtier_finalize(ctx));
    test_handles();
    mt_pass();
    return 0;
}
